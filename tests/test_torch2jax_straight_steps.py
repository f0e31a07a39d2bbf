"""torch2jax training steps that are not a loop: a notebook's straight-line step

    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    l = crit(model(x), y); opt.zero_grad(); l.backward(); opt.step(); print(float(l))

at module level, in a function body or under an if, becomes the loop's optax form (one train_step call, model and
opt_state rebound, the loss readable afterwards); a notebook's first step without zero_grad() on a model built just
above (its gradients are clear) too; a function that is one step of the module's optimizer (`def
train_one_batch(x, y)`) declares `global model, opt_state`; a threaded training function (the optimizer a parameter)
called on a line of several statements from module level, where a draw above gives the caller a key. Each trains like
PyTorch from the same weights (losses and parameters compared); the variants fwport cannot prove stay errors.
"""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from helpers import error_findings as errors, t2j

pytest.importorskip("torch")
pytest.importorskip("jax")

# a model whose initial parameters are the same numbers on both sides (no draw): the steps start from the same weights
NET = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.linspace(-1.0, 1.0, 24).reshape(6, 4))
        self.w2 = nn.Parameter(torch.linspace(0.5, -0.5, 12).reshape(4, 3))

    def forward(self, x):
        return torch.tanh(x @ self.w1) @ self.w2


x = torch.linspace(-2.0, 2.0, 48).reshape(8, 6)
y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
crit = nn.CrossEntropyLoss()
'''

# the driver's body (runners.SIDE_HEAD): the losses and the trained parameters of the module's model (`g`: the namespace
# the program's functions rebind, where a function declares `global model`)
SAVE = """
g = ns[sys.argv[4]].__globals__ if len(sys.argv) > 4 else ns
if len(sys.argv) > 4:
    losses = [float(v) for v in ns[sys.argv[4]](ns["x"], ns["y"])]
else:
    losses = [float(ns[n]) for n in ("first", "second") if n in ns]
m = g["model"]
ws = [np.asarray(m.w1.detach().numpy() if side == "torch" else m.w1), np.asarray(m.w2.detach().numpy() if side == "torch" else m.w2)]
np.savez(sys.argv[3], np.asarray(losses), *ws)
"""


def _same_training(tmp_path, src: str, *args: str) -> None:
    """The program trains its model alike on both sides: the same losses and parameters (float32)."""
    from runners import SIDE_HEAD, saved_arrays

    src = textwrap.dedent(src).lstrip("\n")
    r = t2j(src, "f.py")
    assert not errors(r), [f.message for f in errors(r)]
    (tmp_path / "orig.py").write_text(src)
    (tmp_path / "jax.py").write_text(r.output)
    torch_side, jax_side = [saved_arrays(SIDE_HEAD + SAVE, side, tmp_path / p, tmp_path / f"{side}.npz", *args)
                            for side, p in (("torch", "orig.py"), ("jax", "jax.py"))]
    assert len(torch_side[0]) >= 1 and len(torch_side) == 3
    for a, b in zip(torch_side, jax_side, strict=True):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6)
    start = np.linspace(-1.0, 1.0, 24).reshape(6, 4)
    assert not np.allclose(torch_side[1], start)  # the step did change the parameters
    return r


MODULE_STEPS = NET + '''
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=0.1)
l = crit(model(x), y); opt.zero_grad(); l.backward(); opt.step(); first = float(l)
x = x * 0.5
opt.zero_grad()
l = crit(model(x), y)
l.backward()
opt.step()
second = float(l)
'''


def test_module_level_straight_steps_train_like_pytorch(tmp_path):
    """Two straight-line steps at module level (the first on one line of several statements): one train_step, defined
    above the first call, called twice; `x`, bound again between them, is an argument (a global would be kept as
    eqx.filter_jit traced it)."""
    r = _same_training(tmp_path, MODULE_STEPS)
    out = r.output
    assert out.count("def train_step(") == 1 and out.count("= train_step(model, opt_state, x)") == 2, out
    assert out.index("def train_step(") < out.index("= train_step(") and ".backward()" not in out
    assert "model, opt_state, l = train_step(model, opt_state, x)\nfirst = float(l)\n" in out, out


def test_a_straight_step_under_an_if_and_in_a_function(session, tmp_path):
    """A function creating its optimizer and stepping it under an if, outside any loop: the train_step in the function,
    trained like PyTorch from the same weights (fwport verify's training check: parameters and losses)."""
    from fwport.verify.run import Options
    from fwport.verify.torch2jax import verify_training

    src = NET + '''

def fit(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses = []
    if x.shape[0] > 1:
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    x = x * 2
    opt.zero_grad(); loss = crit(model(x), y); loss.backward(); opt.step(); losses.append(loss.item())
    return model, losses
'''
    src = textwrap.dedent(src).lstrip("\n")
    r = t2j(src, "f.py")
    assert not errors(r), [f.message for f in errors(r)]
    out = r.output
    assert out.count("def train_step(") == 1 and out.count("model, opt_state, loss = train_step(model, opt_state, x, y)") == 2
    assert out.index("def train_step(") < out.index("    if x.shape[0] > 1:\n") and ".backward()" not in out, out
    (tmp_path / "model.py").write_text(src)
    (tmp_path / "translated.py").write_text(r.output)
    opts = Options(str(tmp_path / "model.py"), str(tmp_path / "translated.py"), "Net", args={},
                   inputs=["float32[8,6]", "int64[8]:3"], device="cpu", direction="torch2jax", dtype="float32")
    cert = verify_training(opts, session, "fit", {})
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:3000]


def test_a_first_step_without_zero_grad_on_a_model_built_above(tmp_path):
    """`l.backward(); opt.step()` with no zero_grad() on a model built just above (PyTorch's examples in notebooks,
    the dev kit's VAE): its gradients are clear, so the step is the same; the translation trains alike."""
    src = NET + '''
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=0.1)
l = crit(model(x), y)
l.backward()
opt.step()
first = float(l)
'''
    r = _same_training(tmp_path, src)
    assert "model, opt_state, l = train_step(model, opt_state)" in r.output, r.output
    assert any("the gradients are clear there" in f.message for f in r.findings)


@pytest.mark.parametrize("between", [
    "crit(model(x), y).backward()\n",  # gradients computed since the model was built: PyTorch adds them up
    "warm_up()\n",  # a function of the file that computes gradients
])
def test_a_step_without_zero_grad_after_other_gradients_stays_an_error(between):
    src = NET + '''

def warm_up():
    crit(model(x), y).backward()


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=0.1)
''' + between + '''l = crit(model(x), y)
l.backward()
opt.step()
'''
    r = t2j(src)
    assert any("l.backward() is not at the level of a loop's body" in f.message for f in errors(r)), r.findings
    assert "def train_step" not in r.output


def test_a_step_split_across_blocks_keeps_the_existing_error():
    """zero_grad() and the loss at module level, backward() and step() under an if: not one block's step."""
    src = NET + '''
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=0.1)
opt.zero_grad()
l = crit(model(x), y)
if l > 0:
    l.backward()
    opt.step()
'''
    r = t2j(src)
    errs = errors(r)
    assert len(errs) == 1 and "l.backward() is not at the level of a loop's body" in errs[0].message, r.findings
    assert "def train_step" not in r.output


def test_a_straight_step_of_an_optimizer_from_elsewhere_is_an_error():
    src = NET + '''

def step(model, opt):
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()
'''
    r = t2j(src)
    assert any("opt is not created in this function" in f.message for f in errors(r)), r.findings


GLOBAL_STEP = NET + '''
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)


def train_one_batch(x, y):
    opt.zero_grad()
    out = model(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
    return loss.item()


def fit(x, y):
    return [train_one_batch(x, y), train_one_batch(x * 0.5, y), train_one_batch(x, y)]
'''


def test_a_function_that_is_one_step_of_the_modules_optimizer(tmp_path):
    """`def train_one_batch(x, y)` stepping the module's optimizer over the module's model: `global model,
    opt_state` and one train_step call, each call a step as in PyTorch."""
    r = _same_training(tmp_path, GLOBAL_STEP, "fit")
    assert "def train_one_batch(x, y):\n    global model, opt_state\n    model, opt_state, loss = train_step(model, " \
           "opt_state, x, y)\n    return loss.item()\n" in r.output, r.output


THREADED = NET + '''
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, optimizer, epoch):
    model.train()
    for data, target in loader:
        optimizer.zero_grad()
        loss = crit(model(data), target)
        loss.backward()
        optimizer.step()


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.5); loader = DataLoader(TensorDataset(x, y), batch_size=4); train(model, loader, opt, 1); first = 0.0
'''


def test_a_threaded_training_function_called_on_a_line_of_several_statements(tmp_path):
    """pytorch/examples' mnist `train(args, model, device, loader, optimizer, epoch)` called as the dev kit calls it,
    on one line with other statements: the line is split, and the call threads opt_state."""
    r = _same_training(tmp_path, THREADED)
    assert "def train(model, loader, optimizer, opt_state, epoch):" in r.output, r.output
    assert "\nmodel, opt_state = train(model, loader, opt, opt_state, 1)\nfirst = 0.0\n" in r.output, r.output


def test_a_threaded_caller_with_a_draw_above_gives_the_key(tmp_path):
    """A model with dropout trained by the threaded function from module level: the module's draw above the call
    (`x = torch.randn(...)`) makes keys.py's root key there, which the call splits for train()'s key."""
    src = THREADED.replace("return torch.tanh(x @ self.w1) @ self.w2",
                           "return torch.nn.functional.dropout(torch.tanh(x @ self.w1), 0.5, self.training) @ self.w2") \
        .replace("x = torch.linspace(-2.0, 2.0, 48).reshape(8, 6)", "x = torch.randn(8, 6)")
    r = t2j(src)
    assert not errors(r), [f.message for f in errors(r)]
    assert "key, train_key = jax.random.split(key)\nmodel, opt_state = train(model, loader, opt, opt_state, 1, " \
           "key=train_key)\n" in r.output, r.output
    # no draw above the call: the caller has no key, the error stays
    r = t2j(src.replace("x = torch.randn(8, 6)", "x = torch.linspace(-2.0, 2.0, 48).reshape(8, 6)"))
    assert any("a caller has none of its own" in f.message for f in errors(r)), r.findings


def test_param_groups_of_an_optax_optimizer_is_an_error():
    """yunjey's `update_lr(optimizer, lr)` sets `group['lr']` over optimizer.param_groups, which an optax optimizer
    does not have (it failed at run time, reported nowhere). Called with an optimizer of the file, it takes the
    opt_state instead (tests/test_torch2jax_learning_rate_writes.py); never called so, it stays an error."""
    src = MODULE_STEPS + '''

def update_lr(optimizer, lr):
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr
'''
    r = t2j(src)
    errs = errors(r)
    assert len(errs) == 1 and "optimizer.param_groups: an optax optimizer has no param_groups" in errs[0].message


TOKENS = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.linspace(-1.0, 1.0, 24).reshape(6, 4))
        self.w2 = nn.Parameter(torch.linspace(0.5, -0.5, 12).reshape(4, 3))
        self.b = nn.Parameter(torch.linspace(-0.1, 0.1, 3))

    def forward(self, x, targets=None):
        logits = torch.tanh(x @ self.w1) @ self.w2 + self.b
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, lr):
        param_dict = {pn: p for pn, p in self.named_parameters()}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {'params': decay_params, 'weight_decay': weight_decay},
            {'params': nodecay_params, 'weight_decay': 0.0}
        ]
        optimizer = torch.optim.AdamW(optim_groups, lr=lr)
        return optimizer


x = torch.linspace(-2.0, 2.0, 48).reshape(2, 4, 6)
y = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 1]])
model = Net()
opt = model.configure_optimizers(0.1, 0.1)
_, l = model(x, targets=y); l.backward(); opt.step(); first = float(l)
'''


def test_an_optimizer_from_a_model_method_and_a_loss_from_forward(tmp_path):
    """nanoGPT as the dev kit trains it: `opt = model.configure_optimizers(...)` (a method of the model's class
    returning a torch.optim optimizer) and `_, l = model(x, targets=x)` (the loss computed in forward, one per
    example under jax.vmap: their mean is PyTorch's), no zero_grad on the model built just above."""
    r = _same_training(tmp_path, TOKENS)
    assert "opt_state = opt.init(eqx.filter(model, eqx.is_array))" in r.output, r.output
    assert "        return jnp.mean(l)\n" in r.output and "model, opt_state, l = train_step(model, opt_state)" in r.output


LONE_BACKWARD = '''
import torch
import torch.nn as nn


class D(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


d = D()
real = torch.randn(3, 4)
gp = d(real).pow(2).mean(); gp.backward(); print(float(gp))
'''


def test_a_lone_backward_on_a_line_of_several_statements_is_an_error_with_its_marker():
    """A gradient penalty's ``gp.backward()`` with no optimizer step, on a ``;`` line (WGAN-GP's kit spec), whose
    gradients a later statement reads: the line is split and the backward() refused with a finding and a ``# fwport:``
    comment above it (it got no finding while it shared its line)."""
    r = t2j(LONE_BACKWARD + "print(d.fc.weight.grad)\n")
    errs = [f for f in errors(r) if "gp.backward()" in f.message]
    assert len(errs) == 1 and errs[0].line == 16, r.findings  # (the source without its first empty line)
    lines = r.output.splitlines()
    at = lines.index("gp.backward()")
    assert lines[at - 1].startswith("# fwport: unsupported-construct: gp.backward()"), r.output


def test_a_lone_backward_on_a_line_of_several_statements_is_dropped_where_nothing_reads_its_gradients():
    r = t2j(LONE_BACKWARD)
    assert not errors(r), r.findings
    assert "gp.backward()" not in r.output and "print(float(gp))" in r.output, r.output
