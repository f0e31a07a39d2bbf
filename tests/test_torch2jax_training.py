"""fwport torch2jax: the scripts and training code around a model.

- every optimizer rule against torch.optim, numerically: the translated optax transformation and the
  PyTorch optimizer take the same steps from the same parameters and gradients (float64), and a
  planted mistake in the parametrisation (eps placement, a default left at optax's) does not;
- devices: torch.device / is_available / current_accelerator become JAX's default device;
- DataLoader / TensorDataset → the NumpyLoader / ArrayDataset helpers written into the file: the
  batches PyTorch's loader makes (in order), a permutation per pass when shuffled, no torch needed;
- torch.save(model.state_dict()) / model.load_state_dict(torch.load()) → Equinox's serialisation,
  round-tripped;
- a training loop is rewritten only in the scope that creates its optimizer;
- eval code: torch.max(x, 1), .size(0), .data outside modules.

The whole-script fixture (fixtures/torch2jax/mnist_script) is checked in tests/test_torch2jax.py with
the other fixtures (translation, verification); here it is also run as a script without torch.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_findings as errors, needs
from runners import python

ROOT = Path(__file__).resolve().parent.parent
PACK = load_pack("torch2jax")
needs_frameworks = needs("torch", "jax", "equinox", "optax")
NO_TORCH = "import sys\nsys.modules['torch'] = None\nimport runpy\nrunpy.run_path(sys.argv[1], run_name='__main__')\n"


def t2j(text: str):
    return translate_source(text, "example.py", PACK)


# --- optimizers against torch.optim --------------------------------------------------------------------

OPTIMIZERS = [
    "torch.optim.Adadelta(model.parameters())",
    "torch.optim.Adadelta(model.parameters(), lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.01)",
    "torch.optim.RMSprop(model.parameters())",
    "torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-3)",
    "torch.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.9, centered=True, eps=1e-3, weight_decay=0.05)",
    "torch.optim.Adagrad(model.parameters())",
    "torch.optim.Adagrad(model.parameters(), lr=0.1, initial_accumulator_value=0.5, weight_decay=0.01)",
    "torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.8, 0.95), weight_decay=0.01)",
    "torch.optim.AdamW(model.parameters(), lr=1e-2)",
    "torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)",
    "torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.3, weight_decay=1e-3)",
]

_STEPS = """
import json, sys
import numpy as np
spec = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
shapes = [(3, 4), (5,)]
p0 = [rng.standard_normal(s) for s in shapes]
grads = [[rng.standard_normal(s) * 10.0 ** rng.integers(-3, 2) for s in shapes] for _ in range(6)]
results = []
if spec["side"] == "torch":
    import torch
    for make in spec["makes"]:
        params = [torch.tensor(p, requires_grad=True) for p in p0]
        model = type("M", (), {"parameters": lambda self: iter(params)})()
        opt = eval(make, {"torch": torch, "model": model})
        for g in grads:
            for p, gi in zip(params, g):
                p.grad = torch.tensor(gi)
            opt.step()
        results.append([p.detach().numpy().tolist() for p in params])
else:
    sys.modules["torch"] = None
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import optax
    for make in spec["makes"]:
        ns = {}
        exec(make, ns)
        tx = ns["make"](None)
        params = [jnp.asarray(p) for p in p0]
        state = tx.init(params)
        for g in grads:
            updates, state = tx.update([jnp.asarray(gi) for gi in g], state, params)
            params = optax.apply_updates(params, updates)
        results.append([np.asarray(p).tolist() for p in params])
print(json.dumps(results))
"""


_cache: dict = {}


def _steps(side: str, make: str) -> list:
    """Every case of one side in one subprocess (the first call computes all of them)."""
    if (side, make) not in _cache:
        cases = [("torch", c) for c in OPTIMIZERS] + [("jax", _translated_make(c)) for c in OPTIMIZERS] + \
            [("jax", _translated_make(c).replace(right, wrong)) for c, right, wrong in PLANTED]
        todo = [m for sd, m in cases if sd == side and (side, m) not in _cache]
        if make not in todo:
            todo.append(make)
        p = python("-c", _STEPS, json.dumps({"side": side, "makes": todo}), side=side, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        for m, out in zip(todo, json.loads(p.stdout.strip().splitlines()[-1])):
            _cache[(side, m)] = out
    return _cache[(side, make)]


def _translated_make(ctor: str) -> str:
    r = t2j(f"import torch\n\n\ndef make(model):\n    return {ctor}\n")
    assert not errors(r), r.findings
    assert "torch" not in r.output
    return r.output


def _assert_close(torch_params, jax_params, rtol=1e-9, atol=1e-12):
    import numpy as np
    for t, j in zip(torch_params, jax_params):
        np.testing.assert_allclose(np.asarray(j), np.asarray(t), rtol=rtol, atol=atol)


@needs_frameworks
@pytest.mark.parametrize("ctor", OPTIMIZERS)
def test_the_optax_translation_steps_as_torch_optim(ctor):
    """Six steps with gradients spanning 1e-3..10, float64: the parameters agree to 1e-9 (Adagrad's eps
    placement, 1e-10 outside the root in PyTorch and 0 inside in optax, is far below that)."""
    make = _translated_make(ctor)
    _assert_close(_steps("torch", ctor), _steps("jax", make))


PLANTED = [
    # optax's default: eps inside the root
    ("torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-3)", "eps_in_sqrt=False", "eps_in_sqrt=True"),
    # optax's default decay 0.9 where PyTorch's alpha is 0.99
    ("torch.optim.RMSprop(model.parameters())", "decay=0.99, ", ""),
    # optax's default initial accumulator 0.1 where PyTorch starts at 0
    ("torch.optim.Adagrad(model.parameters())", "initial_accumulator_value=0, ", ""),
    # coupled decay translated as decoupled (after the adaptive scaling)
    ("torch.optim.Adadelta(model.parameters(), lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.01)",
     "optax.chain(optax.add_decayed_weights(0.01), optax.adadelta(learning_rate=0.5, rho=0.8, eps=1e-4))",
     "optax.chain(optax.adadelta(learning_rate=0.5, rho=0.8, eps=1e-4), optax.add_decayed_weights(0.01))"),
    # dampening applied to the first gradient too (PyTorch's buffer starts as the undampened gradient)
    ("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.3, weight_decay=1e-3)",
     "jnp.where(count == 0, g, momentum * b + (1 - dampening) * g)", "momentum * b + (1 - dampening) * g"),
]


@needs_frameworks
@pytest.mark.parametrize("ctor,right,wrong", PLANTED, ids=[p[2] or p[1] for p in PLANTED])
def test_a_planted_parametrisation_mistake_is_caught(ctor, right, wrong):
    make = _translated_make(ctor)
    assert right in make, make
    with pytest.raises(AssertionError):
        _assert_close(_steps("torch", ctor), _steps("jax", make.replace(right, wrong)))


def test_optimizer_rules_pin_what_differs():
    out = t2j("import torch\n\n\ndef make(model):\n    return torch.optim.RMSprop(model.parameters(), momentum=0)\n").output
    assert "optax.rmsprop(learning_rate=0.01, decay=0.99, eps_in_sqrt=False)" in out  # momentum 0: none
    r = t2j("import torch\n\n\ndef make(model):\n    return torch.optim.Adagrad(model.parameters(), eps=1e-6)\n")
    assert "eps=0.0" in r.output and [f.code for f in r.findings if f.severity is Severity.WARNING] == ["approximate"]
    r = t2j("import torch\n\n\ndef make(model):\n    return torch.optim.Adagrad(model.parameters(), lr_decay=0.1)\n")
    assert [f.code for f in errors(r)] == ["unsupported-argument"]


# --- devices ---------------------------------------------------------------------------------------------

def test_devices_become_the_default_device_and_moves_go():
    r = t2j("import torch\n\nuse_accel = torch.accelerator.is_available()\n"
            "device = torch.accelerator.current_accelerator() if use_accel else torch.device('cpu')\n"
            "cuda = torch.cuda.is_available()\nx = torch.ones(3).to(device)\n")
    assert not errors(r), r.findings
    assert r.output == ('import jax\nimport jax.numpy as jnp\n\nuse_accel = jax.default_backend() != "cpu"\n'
                        "device = jax.devices()[0] if use_accel else jax.devices()[0]\n"
                        'cuda = jax.default_backend() == "gpu"\nx = jnp.ones(3)\n')
    assert any("default device" in f.message for f in r.findings)  # what was dropped is said


# --- data loading ------------------------------------------------------------------------------------------

_LOADERS = """
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

x = torch.from_numpy(np.arange(30.0).reshape(10, 3))
y = torch.from_numpy(np.arange(10))
pairs = [(np.arange(3.0) + i, i) for i in range(10)]
loaders = {"tensors": DataLoader(TensorDataset(x, y), batch_size=4),
           "dropped": DataLoader(TensorDataset(x, y), batch_size=4, drop_last=True),
           "pairs": DataLoader(pairs, batch_size=3, shuffle=False),
           "one": DataLoader(TensorDataset(x), 5)}
runs = {k: [len(v), [[b.tolist() for b in batch] for batch in v]] for k, v in loaders.items()}
shuffled = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
epochs = [[b[1].tolist() for b in shuffled] for _ in range(2)]
print(runs, epochs)
"""


@needs_frameworks
def test_the_numpy_loader_batches_as_the_data_loader(tmp_path):
    """In order, the same batches as PyTorch's DataLoader (tensors, drop_last, a list of pairs, one
    tensor); shuffled, every pass is a permutation of the whole set, and passes differ."""
    r = t2j(_LOADERS)
    assert not errors(r), r.findings
    assert "class NumpyLoader" in r.output and "torch" not in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(_LOADERS.replace("print(runs, epochs)", "import json; print(json.dumps([runs, epochs]))"))
    out.write_text(r.output.replace("print(runs, epochs)", "import json; print(json.dumps([runs, epochs]))"))
    results = []
    for path, code, side in ((src, "import runpy, sys; runpy.run_path(sys.argv[1])", "torch"), (out, NO_TORCH, "jax")):
        p = python("-c", code, path, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    (t_runs, _), (j_runs, j_epochs) = results
    assert j_runs == t_runs
    assert t_runs["dropped"][0] == 2 and t_runs["tensors"][0] == 3
    for epoch in j_epochs:
        assert sorted(v for batch in epoch for v in batch) == list(range(10))
    assert j_epochs[0] != j_epochs[1]


def test_data_loader_options_that_change_the_batches_are_refused():
    r = t2j("import torch\n\nloader = torch.utils.data.DataLoader(ds, batch_size=8, collate_fn=pad)\n")
    assert [f.code for f in errors(r)] == ["unsupported-argument"] and "NumpyLoader" not in r.output


_KWARGS = """
import torch


def main(args, dataset1, dataset2, use_accel):
    train_kwargs = {'batch_size': args.batch_size}
    test_kwargs = {'batch_size': args.test_batch_size}
    if use_accel:
        accel_kwargs = {'num_workers': 1,
                        'persistent_workers': True,
                        'pin_memory': True,
                        'shuffle': True}
        train_kwargs.update(accel_kwargs)
        test_kwargs.update(accel_kwargs)
    train_loader = torch.utils.data.DataLoader(dataset1, **train_kwargs)
    test_loader = torch.utils.data.DataLoader(dataset2, **test_kwargs)
    return train_loader, test_loader
"""

_KWARGS_EMPTIED = """
import torch

kwargs = {'num_workers': 1, 'pin_memory': True} if use_accel else {}
train_loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, **kwargs)
"""


def test_data_loader_kwargs_built_in_the_file_are_bound_by_their_keys():
    """PyTorch's examples' `DataLoader(dataset, **train_kwargs)`: the keys the dict can hold (over both
    branches) are bound like written arguments: batch_size/shuffle stay in the dict, the worker and
    pinned-memory keys leave it (an info each); a dict left empty in every branch leaves the file."""
    r = t2j(_KWARGS)
    assert not errors(r), r.findings
    assert "        accel_kwargs = {'shuffle': True}\n" in r.output
    assert "    train_loader = NumpyLoader(dataset1, **train_kwargs)\n" in r.output
    assert "    test_loader = NumpyLoader(dataset2, **test_kwargs)\n" in r.output
    dropped = sorted(f.message.split()[0] for f in r.findings if f.code == "dropped-argument")
    assert dropped == ["num_workers", "persistent_workers", "pin_memory"], r.findings
    r = t2j(_KWARGS_EMPTIED)
    assert not errors(r), r.findings
    assert "kwargs" not in r.output
    assert "train_loader = NumpyLoader(ds, batch_size=args.batch_size, shuffle=True)\n" in r.output


@pytest.mark.parametrize("change,why", [
    # the dict is read elsewhere: dropping its keys would change that use
    (("    return train_loader, test_loader\n", "    print(train_kwargs)\n    return train_loader, test_loader\n"),
     "cannot be bound statically"),
    # a key the loader refuses, with its reason
    (("'shuffle': True}", "'shuffle': True, 'sampler': sampler}"), "a sampler is not translated"),
    # not an argument of DataLoader
    (("'shuffle': True}", "'shuffle': True, 'bacth_size': 3}"), "'bacth_size' is not an argument"),
    # bound twice: which dict a use sees is not followed
    (("    if use_accel:\n", "    train_kwargs = {}\n    if use_accel:\n"), "cannot be bound statically"),
])
def test_data_loader_kwargs_not_followed_are_refused(change, why):
    r = t2j(_KWARGS.replace(*change))
    errs = [f for f in errors(r) if f.line in (15, 16)]  # (16: after the inserted line)
    assert errs and why in errs[0].message, r.findings
    assert "DataLoader(dataset1, **train_kwargs)" in r.output and "accel_kwargs = {'num_workers': 1," in r.output


# --- checkpoints -------------------------------------------------------------------------------------------

_SAVE = """
import sys
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.bn = nn.BatchNorm1d(2)

    def forward(self, x):
        return self.bn(self.fc(x))


torch.manual_seed(0)
model = Net()
model.train()
y = model(torch.randn(8, 3) * 3.0 + 1.0)  # moves the running statistics
model.eval()
a = model(torch.ones(2, 3))
torch.save(model.state_dict(), sys.argv[2])
other = Net()
other.load_state_dict(torch.load(sys.argv[2], map_location="cpu"))
other.eval()
b = other(torch.ones(2, 3))
fresh = Net()
fresh.eval()
c = fresh(torch.ones(2, 3))
print(float(((a - b) ** 2).sum()), float(((a - c) ** 2).sum()))
"""


@needs_frameworks
def test_a_saved_state_dict_loads_back_with_its_layer_state(tmp_path):
    r = t2j(_SAVE)
    assert not errors(r), r.findings
    # (three models keeping a state in one scope: a state variable each)
    assert "eqx.tree_serialise_leaves(sys.argv[2], (model, model_state))" in r.output
    assert "other, other_state = eqx.tree_deserialise_leaves(sys.argv[2], (other, other_state))" in r.output
    out = tmp_path / "out.py"
    out.write_text(r.output)
    code = "import sys\nsys.modules['torch'] = None\nimport runpy\nsys.argv = sys.argv[:1] + sys.argv[1:]\n" \
           "runpy.run_path(sys.argv[1], run_name='__main__')\n"
    p = python("-c", code, out, tmp_path / "ckpt.eqx", side="jax", timeout=300)
    assert p.returncode == 0, r.output + p.stderr[-3000:]
    loaded, fresh = map(float, p.stdout.split())
    assert loaded == 0.0 and fresh > 1e-3  # the running statistics came back with the weights
    assert (tmp_path / "ckpt.eqx").stat().st_size > 0


def test_other_saves_and_loads_are_refused():
    r = t2j("import torch\n\ntorch.save({'model': model.state_dict(), 'epoch': 3}, 'ckpt.pt')\n"
            "data = torch.load('traindata.pt')\n")
    assert [(f.code, f.line) for f in errors(r)] == [("unsupported-construct", 3), ("unsupported-construct", 4)]


# --- training loops and eval code ---------------------------------------------------------------------------

_TWO_FUNCTIONS = """
import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


def main(model, loader, optimizer):
    train(model, loader, optimizer)
"""


def test_a_loop_is_rewritten_only_where_its_optimizer_is_created():
    """The step of a function that receives the optimizer from a caller that does not create it either
    has no opt_state to thread: an error at the loop, and no train_step written anywhere."""
    r = t2j(_TWO_FUNCTIONS)
    errs = errors(r)
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 7)], r.findings
    assert "optimizer is not created in this function" in errs[0].message
    assert "train_step" not in r.output and "loss.backward()" in r.output


_TRAINER_CLASS = """
import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(source), targets)
        loss.backward()
        self.optimizer.step()


model = torch.nn.Linear(20, 3)
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=1e-3))
"""


def test_a_step_in_a_trainer_class_method_is_an_error():
    """PyTorch's DDP tutorial's Trainer: its step, written in a method, is not rewritten; an error says so (it was
    left as written without a finding)."""
    r = t2j(_TRAINER_CLASS)
    errs = [f for f in errors(r) if "in a method of a class" in f.message]
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 14)], r.findings
    assert "self.opt_state = optimizer.init(eqx.filter(model, eqx.is_array))" in errs[0].message
    assert "loss.backward()" in r.output


_NO_ZERO_GRAD = """
import json
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
xs = [torch.randn(4, 3), torch.randn(4, 3)]
seen = []
for x in xs:
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
    seen.append(model.weight.grad.clone())
alone = [torch.autograd.grad(model(x).sum(), model.weight)[0] for x in xs]
print(json.dumps(dict(seen=[g.tolist() for g in seen], alone=[g.tolist() for g in alone])))
"""


@needs_frameworks
def test_a_loop_that_never_clears_the_gradients_is_an_error_saying_they_add_up():
    """PyTorch's tensor-parallel examples step without zero_grad(): the gradients of every iteration add up (checked
    in PyTorch), which a train_step computing them afresh would not do."""
    import numpy as np
    r = t2j(_NO_ZERO_GRAD)
    errs = [f.message for f in errors(r) if "nothing in this loop clears the gradients" in f.message]
    assert len(errs) == 1 and "adds its gradients to those of all the earlier iterations" in errs[0], r.findings
    assert "loss.backward()" in r.output
    p = python("-c", _NO_ZERO_GRAD, side="torch", timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(out["seen"][1], np.add(out["alone"][0], out["alone"][1]), rtol=1e-6)
    assert not np.allclose(out["seen"][1], out["alone"][1])


def test_eval_code_outside_modules():
    r = t2j("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(4, 3)\n\n    def forward(self, x):\n"
            "        return self.fc(x)\n\n\nmodel = Net()\nwith torch.no_grad():\n    outputs = model(images)\n"
            "    _, predicted = torch.max(outputs.data, 1)\n    total = labels.size(0)\n    shape = labels.size()\n"
            "    best = torch.argmax(outputs, dim=1)\n")
    assert not errors(r), r.findings
    assert "_, predicted = (jnp.max(outputs, axis=1), jnp.argmax(outputs, axis=1))" in r.output
    assert "total = labels.shape[0]" in r.output and "shape = labels.shape\n" in r.output
    assert "best = jnp.argmax(outputs, axis=1)" in r.output


def test_torch_max_of_two_tensors_is_refused():
    r = t2j("import torch\n\nm = torch.max(a, b)\n")
    # a second positional argument that is not an int literal may be a tensor (the elementwise maximum)
    assert [f.code for f in errors(r)] == ["unsupported-construct"] and "torch.maximum" in errors(r)[0].message


def test_nll_loss_module_and_variable():
    r = t2j("import torch\nfrom torch import nn\nfrom torch.autograd import Variable\n\n"
            "criterion = nn.NLLLoss(reduction='sum')\nx = Variable(data, requires_grad=False)\n")
    assert not errors(r), r.findings
    assert "criterion = lambda input, target: jnp.sum(-jnp.take_along_axis(input, target[:, None], axis=1)[:, 0])" \
           in r.output and "x = data\n" in r.output


# --- the whole-script fixture, run as a script -------------------------------------------------------------

@needs_frameworks
def test_the_mnist_like_script_runs_without_torch_and_learns_as_pytorch_does(tmp_path):
    """fixtures/torch2jax/mnist_script: the original with torch, the translation with torch unimportable,
    each as `python script.py CKPT` (shuffled batches: each side its own order): both learn the task
    (held-out accuracy well above chance, 0.25) to within a few points, and both write their checkpoint.
    Training step for step from the same state is verified in tests/test_torch2jax.py (verify.json)."""
    d = ROOT / "fixtures" / "torch2jax" / "mnist_script"
    accuracies = []
    for side, path, code in (("torch", d / "model.py", "import runpy, sys; sys.argv = sys.argv[1:]; "
                                                        "runpy.run_path(sys.argv[0], run_name='__main__')"),
                             ("jax", d / "expected.py", NO_TORCH.replace("runpy.run_path(sys.argv[1]",
                                                                         "sys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0]"))):
        ckpt = tmp_path / f"{side}.ckpt"
        p = python("-c", code, path, ckpt, side=side, timeout=300, cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        assert ckpt.stat().st_size > 0
        lines = p.stdout.strip().splitlines()
        assert len([ln for ln in lines if ln.startswith("epoch ")]) == 20
        accuracies.append(float(lines[-1].split()[-1]))
    t_acc, j_acc = accuracies
    assert t_acc > 0.85 and j_acc > 0.85, accuracies
    assert abs(t_acc - j_acc) <= 0.06, accuracies


MNIST_PLANTED = [
    # Adadelta's rho left at another value
    ("optax.adadelta(learning_rate=lr)", "optax.adadelta(learning_rate=lr, rho=0.95)"),
    # the loader's batches in another order than PyTorch's (shuffle=False keeps the dataset's order)
    ("order = self.rng.permutation(n) if self.shuffle else np.arange(n)",
     "order = self.rng.permutation(n) if self.shuffle else np.arange(n)[::-1]"),
    # NLLLoss summed where PyTorch averages
    ("criterion = lambda input, target: jnp.mean(", "criterion = lambda input, target: jnp.sum("),
]


@needs_frameworks
@pytest.mark.parametrize("right,wrong", MNIST_PLANTED, ids=[w[-30:] for _, w in MNIST_PLANTED])
def test_a_planted_bug_in_the_script_fails_training_verification(right, wrong, tmp_path):
    from fwport.verify.run import Options, Session
    from fwport.verify.torch2jax import verify_training
    d = ROOT / "fixtures" / "torch2jax" / "mnist_script"
    v = json.loads((d / "verify.json").read_text())
    text = (d / "expected.py").read_text()
    assert right in text
    bad = tmp_path / "translated.py"
    bad.write_text(text.replace(right, wrong))
    opts = Options(str(d / "model.py"), str(bad), v["model"], args=v["args"], inputs=v["inputs"], device="cpu",
                   direction="torch2jax", dtype=v["dtype"])
    with Session() as session:
        cert = verify_training(opts, session, v["train"], v["train_args"])
    assert cert["verdict"] == "mismatch"


@pytest.mark.parametrize("check", ["train"])
def test_verify_refuses_the_torch2jax_checks_it_does_not_make(check):
    """`fwport verify --direction torch2jax --check train` used to drop the check and print PASS from the forward
    comparison alone: a certificate claiming a training comparison never made. Refused (exit 2) before any run."""
    from click.testing import CliRunner

    from fwport.verify.cli import verify_command
    d = ROOT / "fixtures" / "torch2jax" / "sgd_loop"
    r = CliRunner().invoke(verify_command, [str(d / "model.py"), str(d / "expected.py"), "--model", "Classifier",
                                            "--input", "float32[8,6]", "--direction", "torch2jax", "--device", "cpu",
                                            "--check", f"forward,{check}"])
    assert r.exit_code == 2, r.output
    assert f"--check {check} is not implemented for torch2jax" in r.output and "PASS" not in r.output


# --- learning-rate schedulers: refused with the exact optax schedule --------------------------------------

SCHEDULERS = [
    "StepLR(optimizer, step_size=3, gamma=0.7)",
    "StepLR(optimizer, 2)",
    "ExponentialLR(optimizer, gamma=0.9)",
    "MultiStepLR(optimizer, milestones=[2, 5], gamma=0.5)",
    "CosineAnnealingLR(optimizer, T_max=10, eta_min=0.01)",
    "CosineAnnealingLR(optimizer, 10)",  # up to T_max: PyTorch then rises again (see the rule)
    "LambdaLR(optimizer, lr_lambda=lambda epoch: 0.9 ** epoch)",
    "LambdaLR(optimizer, lambda e: 1.0 - e / 20 if e < 8 else 0.1)",  # parenthesised in the schedule
]

_SCHEDULES = """
import json, sys
import torch
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import optax
from torch.optim import lr_scheduler
out = []
for make, schedule in json.loads(sys.argv[1]):
    p = torch.zeros(2, requires_grad=True)
    optimizer = torch.optim.SGD([p], lr=0.5)
    sched = eval("lr_scheduler." + make)
    torch_lrs = []
    for k in range(11):
        torch_lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        sched.step()
    steps_per_epoch = 3
    lr = 0.5
    f = eval("lambda count: " + schedule + "(count // steps_per_epoch)")
    optax_lrs = [float(f(jnp.asarray(u))) for u in range(33)]
    out.append([torch_lrs, optax_lrs])
print(json.dumps(out))
"""


@needs_frameworks
def test_a_scheduler_error_gives_the_exact_optax_schedule():
    """The schedule the error message gives, evaluated at each optimizer update with 3 updates per
    scheduler.step(), is PyTorch's learning rate of that epoch (float64)."""
    from fwport.packs.torch2jax.ops import SCHEDULE_MARK
    import numpy as np
    cases = []
    for make in SCHEDULERS:
        r = t2j(f"import torch\nfrom torch.optim import lr_scheduler\n\nscheduler = lr_scheduler.{make}\n")
        errs = errors(r)
        assert [f.code for f in errs] == ["unsupported-construct"], r.findings
        msg = errs[0].message
        schedule = msg.split(SCHEDULE_MARK, 1)[1].split("(count // steps_per_epoch)", 1)[0]
        cases.append([make, schedule])
    p = python("-c", _SCHEDULES, json.dumps(cases), side="torch", timeout=300)  # (torch and JAX both)
    assert p.returncode == 0, p.stderr[-3000:]
    for (make, schedule), (torch_lrs, optax_lrs) in zip(cases, json.loads(p.stdout.strip().splitlines()[-1])):
        expected = [torch_lrs[u // 3] for u in range(33)]
        np.testing.assert_allclose(optax_lrs, expected, rtol=1e-12, atol=1e-15, err_msg=f"{make}: {schedule}")
        assert len(set(np.round(torch_lrs, 12))) > 2, make  # the schedule really changes over these steps


# the layout of PyTorch's mnist example, small: a dict of loader arguments, a model with dropout, a train()
# function per epoch, StepLR stepped once per epoch (synthetic data: nothing to download)
_EPOCH_SCRIPT = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.dropout = nn.Dropout(0.2)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.dropout(x)
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, device, train_loader, optimizer, epoch):
    model.train()
    total = 0.0
    for data, target in train_loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        total += loss.item()
        optimizer.step()
    print("epoch", epoch, total / len(train_loader))


def main():
    torch.manual_seed(0)
    use_accel = torch.cuda.is_available()
    device = torch.device("cuda" if use_accel else "cpu")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    y = ((x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64))
    dataset = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    train_kwargs = {'batch_size': 32}
    if use_accel:
        accel_kwargs = {'num_workers': 1, 'pin_memory': True, 'shuffle': True}
        train_kwargs.update(accel_kwargs)
    train_loader = DataLoader(dataset, **train_kwargs)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=2, gamma=0.7)
    for epoch in range(1, 7):
        train(model, device, train_loader, optimizer, epoch)
        scheduler.step()


if __name__ == '__main__':
    main()
"""


def test_an_epoch_scheduler_becomes_the_optimizers_schedule():
    """StepLR stepped once per epoch after train(...): the optimizer is created with the optax schedule
    over its update count (step_size * len(train_loader) updates per decay), the scheduler's lines go."""
    r = t2j(_EPOCH_SCRIPT)
    assert not errors(r), r.findings
    assert ("    optimizer = optax.adadelta(learning_rate=optax.exponential_decay(1.0, transition_steps=2 * "
            "len(train_loader), decay_rate=0.7, staircase=True))\n") in r.output, r.output
    assert "scheduler" not in r.output and "StepLR" not in r.output
    # stepped inside the batch loop (per update), or before the epoch's training: left to the rule's error
    for change in (("        optimizer.step()\n", "        optimizer.step()\n        scheduler.step()\n"),
                   ("        train(model, device, train_loader, optimizer, epoch)\n        scheduler.step()\n",
                    "        scheduler.step()\n        train(model, device, train_loader, optimizer, epoch)\n")):
        other = t2j(_EPOCH_SCRIPT.replace("    scheduler = StepLR", "    scheduler = StepLR").replace(*change))
        assert any("StepLR sets the learning rate" in f.message for f in errors(other)), change


_EPOCH_STEPS = """
import json, sys
import numpy as np
spec = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
p0 = rng.standard_normal(5)
epochs, batches = 6, 3
grads = [rng.standard_normal(5) for _ in range(epochs * batches)]
if spec["side"] == "torch":
    import torch
    p = torch.tensor(p0, requires_grad=True)
    optimizer = torch.optim.Adadelta([p], lr=1.0, weight_decay=spec["wd"])
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.7)
    out, lrs = [], []
    for e in range(epochs):
        for b in range(batches):
            lrs.append(optimizer.param_groups[0]["lr"])
            p.grad = torch.tensor(grads[e * batches + b])
            optimizer.step()
            out.append(p.detach().numpy().tolist())
        scheduler.step()
else:
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import optax
    train_loader = range(batches)
    optimizer = eval(spec["optimizer"], {"optax": optax, "train_loader": train_loader})
    params = jnp.asarray(p0)
    state = optimizer.init(params)
    out, lrs = [], []
    schedule = eval(spec["schedule"], {"optax": optax, "train_loader": train_loader})
    for u, g in enumerate(grads):
        lrs.append(float(schedule(u)))
        updates, state = optimizer.update(jnp.asarray(g), state, params)
        params = optax.apply_updates(params, updates)
        out.append(np.asarray(params).tolist())
print(json.dumps([out, lrs]))
"""


@needs_frameworks
@pytest.mark.parametrize("planted, wd", [(None, 0.0), (("transition_steps=2 * len(train_loader)", "transition_steps=len(train_loader)"), 0.0),
                                         (None, 0.05)])
def test_the_epoch_schedule_steps_as_torch_steplr(planted, wd):
    """The translated optimizer (Adadelta under StepLR(step_size=2, gamma=0.7), 3 batches per epoch, 6
    epochs) takes PyTorch's steps from the same parameters and gradients, each update at the rate of its
    epoch (float64); a schedule decaying every epoch instead (planted) does not. With a coupled weight decay the
    optimizer is optax.chain(optax.add_decayed_weights(wd), ...): the schedule goes into the chain's Adadelta."""
    r = t2j(_EPOCH_SCRIPT.replace("lr=1.0)", f"lr=1.0, weight_decay={wd})") if wd else _EPOCH_SCRIPT)
    line = next(ln for ln in r.output.splitlines() if ln.strip().startswith("optimizer = optax."))
    optimizer = line.split("=", 1)[1].strip()
    assert optimizer.startswith("optax.chain(optax.add_decayed_weights(0.05), optax.adadelta(") == bool(wd), optimizer
    schedule = optimizer.split("learning_rate=", 1)[1]
    while schedule.count(")") > schedule.count("("):  # the calls around it closed
        schedule = schedule[:-1]
    if planted:
        assert planted[0] in optimizer
        optimizer, schedule = optimizer.replace(*planted), schedule.replace(*planted)
    results = []
    for side in ("torch", "jax"):
        p = python("-c", _EPOCH_STEPS, json.dumps({"side": side, "optimizer": optimizer, "schedule": schedule,
                                                    "wd": wd}), side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    import numpy as np
    (t_out, t_lrs), (j_out, j_lrs) = results
    assert len(set(t_lrs)) == 3  # 1.0, 0.7, 0.49: the rate really changes over these epochs
    if planted:
        assert not np.allclose(j_lrs, t_lrs)
        assert not np.allclose(j_out, t_out, rtol=1e-7, atol=1e-10)
    else:
        np.testing.assert_allclose(j_lrs, t_lrs, rtol=1e-12)
        # (float64: Adadelta's square roots, taken in another order, differ by ~1e-9 after 18 steps)
        np.testing.assert_allclose(j_out, t_out, rtol=1e-7, atol=1e-10)


@needs_frameworks
def test_the_epoch_script_runs_without_torch_and_learns(tmp_path):
    """The translated script (loader dict, dropout with its key per step, threaded train(), the epoch
    schedule) runs with torch unimportable and its mean training loss falls over the epochs, as PyTorch's does."""
    r = t2j(_EPOCH_SCRIPT)
    assert not errors(r), r.findings
    losses = []
    for name, text, runner, side in (("src.py", _EPOCH_SCRIPT, "import runpy, sys; runpy.run_path(sys.argv[1], "
                                                               "run_name='__main__')", "torch"),
                                     ("out.py", r.output, NO_TORCH, "jax")):
        path = tmp_path / name
        path.write_text(text)
        p = python("-c", runner, path, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        losses.append([float(ln.split()[-1]) for ln in p.stdout.splitlines() if ln.startswith("epoch ")])
    for side in losses:
        assert len(side) == 6 and side[-1] < 0.9 * side[0], losses


# the layout of PyTorch's VAE example: loader, model and optimizer at module level, def train(epoch) / test(epoch)
_GLOBAL_SCRIPT = """
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
x = rng.standard_normal((64, 6)).astype(np.float32)
y = (x @ rng.standard_normal((6, 2))).astype(np.float32)
use_accel = torch.cuda.is_available()
kwargs = {'num_workers': 1, 'pin_memory': True} if use_accel else {}
train_loader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=16, shuffle=False, **kwargs)


class Reg(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


model = Reg()
optimizer = optim.Adam(model.parameters(), lr=1e-2)


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        out = model(data)
        loss = F.mse_loss(out, target)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    print('epoch', epoch, train_loss / len(train_loader))


def test(epoch):
    model.eval()
    out = model(torch.from_numpy(x))
    print('test', epoch, float(F.mse_loss(out, torch.from_numpy(y))))


if __name__ == "__main__":
    for epoch in range(1, 9):
        train(epoch)
        test(epoch)
"""


def test_a_function_stepping_the_modules_optimizer_rebinds_the_modules_state():
    """def train(epoch) over the module's model and optimizer (PyTorch's VAE example): the train_step is
    written at module level after opt_state, the function declares `global model, opt_state`; test(epoch),
    which switches the module's model to inference mode, declares `global model` (it raised
    UnboundLocalError: the assignment made `model` local)."""
    r = t2j(_GLOBAL_SCRIPT)
    assert not errors(r), r.findings
    assert ("opt_state = optimizer.init(eqx.filter(model, eqx.is_array))\n\n\n@eqx.filter_jit\n"
            "def train_step(model, opt_state, data, target):\n") in r.output, r.output
    assert "def train(epoch):\n    global model, opt_state\n    model = eqx.nn.inference_mode(model, False)\n" in r.output
    assert "def test(epoch):\n    global model\n    model = eqx.nn.inference_mode(model, True)\n" in r.output
    assert "        model, opt_state, loss = train_step(model, opt_state, data, target)\n        train_loss += loss.item()\n" in r.output
    assert "kwargs" not in r.output
    # a function that binds the model itself is not one of these: refused as before
    other = t2j(_GLOBAL_SCRIPT.replace("    train_loss = 0\n", "    train_loss = 0\n    model = Reg()\n"))
    assert any("optimizer is not created in this function" in f.message for f in errors(other)), other.findings


_GLOBAL_RUN = """
import json, runpy, sys
if sys.argv[2] == "jax":
    sys.modules["torch"] = None
import numpy as np
ns = runpy.run_path(sys.argv[1], run_name="script")
g = ns["train"].__globals__  # the module's own globals, which train() rebinds
rng = np.random.default_rng(1)
w1, b1 = rng.standard_normal((16, 6)) * 0.4, rng.standard_normal(16) * 0.1
w2, b2 = rng.standard_normal((2, 16)) * 0.4, rng.standard_normal(2) * 0.1
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        for p, v in ((g["model"].fc1.weight, w1), (g["model"].fc1.bias, b1), (g["model"].fc2.weight, w2), (g["model"].fc2.bias, b2)):
            p.copy_(torch.tensor(v))
    read = lambda: [g["model"].fc1.weight.detach().numpy().tolist(), g["model"].fc2.bias.detach().numpy().tolist()]
else:
    import equinox as eqx, jax.numpy as jnp
    m = g["model"]
    m = eqx.tree_at(lambda m: (m.fc1.weight, m.fc1.bias, m.fc2.weight, m.fc2.bias), m,
                    tuple(jnp.asarray(v, jnp.float32) for v in (w1, b1, w2, b2)))
    g["model"] = m
    g["opt_state"] = g["optimizer"].init(eqx.filter(m, eqx.is_array))
    read = lambda: [np.asarray(g["model"].fc1.weight).tolist(), np.asarray(g["model"].fc2.bias).tolist()]
steps = []
for epoch in range(1, 4):
    g["train"](epoch)
    steps.append(read())
print(json.dumps(steps))
"""


@needs_frameworks
def test_the_module_level_training_steps_as_pytorch_does(tmp_path):
    """From the same weights, three epochs of train(epoch) (4 batches in order, Adam at module level) give
    PyTorch's weights after each epoch in the translation (float32), which runs with torch unimportable;
    and the whole translated script learns (its test loss falls)."""
    r = t2j(_GLOBAL_SCRIPT)
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(_GLOBAL_SCRIPT)
    out.write_text(r.output)
    results = []
    for path, side in ((src, "torch"), (out, "jax")):
        p = python("-c", _GLOBAL_RUN, path, side, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    import numpy as np
    for t, j in zip(*results):
        for a, b in zip(t, j):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    assert not np.allclose(results[0][0][0], results[0][2][0])  # the weights moved
    p = python("-c", NO_TORCH, out, side="jax", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    tests = [float(ln.split()[-1]) for ln in p.stdout.splitlines() if ln.startswith("test ")]
    assert len(tests) == 8 and tests[-1] < 0.5 * tests[0], tests


_DROPOUT = """
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x))


def fit(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return model


net = Net()
opt2 = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    opt2.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt2.step()
"""


def test_a_model_with_dropout_trained_by_the_written_step_gets_a_key_per_step():
    """Equinox's Dropout needs a key in training: where the trained model is known to be such a class, the
    written train_step takes `key` and the loop splits one per step (a root key before the loop when the
    scope has none), handed to the model one per example; a warning where the trained model's class is
    unknown (fit's `model`)."""
    r = t2j(_DROPOUT)
    found = [(f.severity, f.line) for f in r.findings if f.code == "unsupported-construct"]
    assert found == [(Severity.WARNING, 19)], r.findings
    assert [f.line for f in r.findings if f.code == "key-added" and "train_step takes a key" in f.message] == [29, 29]
    assert "def train_step(net, opt_state, x, y, key):\n" in r.output
    assert "jax.vmap(net)(x, key=jax.random.split(key, x.shape[0]))" in r.output
    assert ("key = jax.random.key(0)\n\n@eqx.filter_jit\ndef train_step" in r.output
            and "for _ in range(3):\n    key, step_key = jax.random.split(key)\n"
            "    net, opt_state, loss = train_step(net, opt_state, x, y, step_key)\n" in r.output), r.output
    seeded = t2j(_DROPOUT.replace("net = Net()\n", "torch.manual_seed(3)\nnet = Net()\n"))
    assert seeded.output.count("jax.random.key(") == 1  # the seeded root key; Net's split from it, none added for the loop
    assert "key, net_key = jax.random.split(key)\nnet = Net(key=net_key)\n" in seeded.output
    plain = t2j(_DROPOUT.replace("        self.drop = nn.Dropout(0.5)\n", "").replace("self.drop(self.fc(x))", "self.fc(x)"))
    assert not [f for f in plain.findings if f.code == "unsupported-construct"]
    assert "def train_step(net, opt_state, x, y):\n" in plain.output


def test_a_threaded_function_training_a_dropout_model_takes_a_key_from_its_caller():
    """train(model, loader, optimizer, epoch) on a model with dropout: the function takes `key` last, its
    caller splits its own per call (torch.manual_seed there); a caller without a key of its own is an error."""
    src = _THREADED.replace("import torch.nn.functional as F\n", "import torch.nn.functional as F\nfrom torch import nn\n\n\n"
                            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                            "        self.fc = nn.Linear(4, 3)\n        self.drop = nn.Dropout(0.5)\n\n"
                            "    def forward(self, x):\n        return self.drop(self.fc(x))\n")
    src = src.replace("def main(net, loader):\n", "def main(loader):\n    torch.manual_seed(0)\n    net = Net()\n")
    r = t2j(src)
    assert not errors(r), r.findings
    assert "def train(model, loader, optimizer, opt_state, epoch, key):\n" in r.output
    assert ("        key, train_key = jax.random.split(key)\n"
            "        net, opt_state = train(net, loader, opt, opt_state, epoch, key=train_key)\n") in r.output, r.output
    assert "            key, step_key = jax.random.split(key)\n" not in r.output  # (the function's loop is one level in)
    assert "        key, step_key = jax.random.split(key)\n        model, opt_state, loss = train_step(model, opt_state, x, y, step_key)\n" in r.output
    r = t2j(src.replace("    torch.manual_seed(0)\n", ""))
    errs = errors(r)
    assert len(errs) == 1 and "a caller has none of its own" in errs[0].message, r.findings


_BETWEEN = """
import torch
import torch.nn.functional as F


def fit(model, x, y):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    for step in range(5):
        loss = F.mse_loss(model(x), y)
        if step % 2 == 0:
            print(step, loss.item())
        optimizer.zero_grad()
        loss.backward()
        total += loss.item()
        optimizer.step()
    return model, total
"""


def test_statements_between_the_loss_and_the_step_follow_the_step_call():
    """Logging between the loss and backward() and a running total between backward() and step() (the
    VAE example's) read the loss only: they run after the train_step call, in order (they were dropped
    before: a silent loss of the total)."""
    r = t2j(_BETWEEN)
    assert not errors(r), r.findings
    loop = r.output.split("for step in range(5):\n", 1)[1]
    assert loop.startswith("        model, opt_state, loss = train_step(model, opt_state, x, y)\n"
                           "        if step % 2 == 0:\n            print(step, loss.item())\n"
                           "        total += loss.item()\n    return model, total\n"), loop


@pytest.mark.parametrize("inserted,why", [
    ("        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", "uses the model"),  # read: refused
    ("        print(model.fc.weight.grad)\n", "uses the model"),
    ("        print(optimizer.param_groups[0]['lr'])\n", "uses the optimizer"),
])
def test_a_statement_between_backward_and_step_that_needs_the_model_is_refused(inserted, why):
    src = _BETWEEN.replace("        total += loss.item()\n", inserted)
    r = t2j(src)
    errs = [f for f in errors(r) if f.code == "unsupported-construct" and f.rule != "clip-grad-norm"]
    assert len(errs) == 1 and why in errs[0].message and errs[0].line == 9, r.findings
    # (the rate read, optimizer.param_groups[0]['lr'], is the optax state's: passes/learning_rate.py)
    assert ("opt_state.hyperparams['learning_rate']" in r.output) == ("param_groups" in inserted)
    assert "loss.backward()" in r.output and "def train_step" not in r.output
    # a clip in a loop left as written is an error of its own, which says what to write with optax
    clips = [f.line for f in errors(r) if f.rule == "clip-grad-norm"]
    assert clips == ([15] if "clip_grad_norm_" in inserted else []), r.findings


def test_a_value_of_the_step_used_after_it_is_returned_from_it():
    """A value computed with the model inside the step and read after step() (it was refused): loss_fn returns
    it beside the loss (has_aux) and train_step after the loss."""
    src = _BETWEEN.replace("        loss = F.mse_loss(model(x), y)\n",
                           "        out = model(x)\n        loss = F.mse_loss(out, y)\n").replace(
        "        total += loss.item()\n", "").replace("        optimizer.step()\n",
                                                   "        optimizer.step()\n        print(out.mean())\n")
    r = t2j(src)
    assert not errors(r), r.findings
    assert "        return jnp.mean((out - y) ** 2), out\n" in r.output, r.output
    assert "    (loss, out), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(model)\n" in r.output
    assert "    return model, opt_state, loss, out\n" in r.output
    assert "        model, opt_state, loss, out = train_step(model, opt_state, x, y)\n" in r.output


def test_a_backward_inside_an_if_block_is_an_error_not_left_silently():
    """The GAN pattern: the generator's backward()/step() inside `if i % n_critic == 0:` is not a loop
    body of its own; it was left as written without a finding."""
    src = _BETWEEN.replace("        total += loss.item()\n        optimizer.step()\n",
                           "        optimizer.step()\n        if step % 2 == 0:\n            other = F.mse_loss(model(x), y)\n"
                           "            other.backward()\n")
    r = t2j(src)
    errs = errors(r)
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 18)], r.findings
    assert "other.backward() is not at the level of a loop's body" in errs[0].message
    assert "def train_step" in r.output  # the loop's own step is still rewritten


_THREADED = """
import torch
import torch.nn.functional as F


def train(model, loader, optimizer, epoch):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    print(epoch, loss.item())


def main(net, loader):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for epoch in range(3):
        train(net, loader, opt, epoch)
    return net
"""


def test_a_function_stepping_the_optimizer_it_receives_threads_its_state():
    """PyTorch's examples' layout, train(args, model, device, loader, optimizer, epoch) called once per
    epoch: the function takes opt_state after the optimizer and returns (model, opt_state); each call
    rebinds both (run as a whole in the mnist_script fixture, verified against PyTorch)."""
    r = t2j(_THREADED)
    assert not errors(r), r.findings
    assert "def train(model, loader, optimizer, opt_state, epoch):\n" in r.output
    assert "    print(epoch, loss.item())\n    return model, opt_state\n" in r.output
    assert "        net, opt_state = train(net, loader, opt, opt_state, epoch)\n" in r.output
    assert "opt_state = opt.init(eqx.filter(net, eqx.is_array))" in r.output


@pytest.mark.parametrize("change", [
    ("    print(epoch, loss.item())\n", "    return loss.item()\n"),  # it returns a value
    ("        train(net, loader, opt, epoch)\n", "        last = train(net, loader, opt, epoch)\n"),  # a value used
    ("    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n",
     "    opt = torch.optim.SGD(other.parameters(), lr=0.1)\n"),  # an optimizer over another model
    ("    return net\n", "    return net, train\n"),  # the function used as a value
])
def test_a_threaded_function_must_be_only_called_and_return_nothing(change):
    r = t2j(_THREADED.replace(*change))
    assert any("optimizer is not created in this function" in f.message for f in errors(r)), r.findings
    assert "def train_step" not in r.output


LOAD_DATA = """import numpy as np
import torch

data = torch.load("series.pt")
train = torch.from_numpy(data[1:, :-1])
np.save("out.npy", np.asarray(train) * 2)
"""


def test_a_torch_load_of_numpy_data_is_read_without_torch():
    r = t2j(LOAD_DATA)
    assert [(f.severity, f.code) for f in r.findings] == [(Severity.WARNING, "unsupported-construct")], r.findings
    assert "data = load_pickled_arrays(\"series.pt\")" in r.output and "def load_pickled_arrays(path):" in r.output
    assert "import torch" not in r.output and "torch.from_numpy" not in r.output, r.output


@pytest.mark.parametrize("text", [
    "import torch\nckpt = torch.load('m.pt')\nmodel.load_state_dict(ckpt['model'])\n",
    "import torch\ndata = torch.load('d.pt')\nx = torch.from_numpy(data)\ny = data + 1\n",
])
def test_a_torch_load_of_anything_else_is_still_an_error(text):
    r = t2j(text)
    assert [f.code for f in r.findings if f.severity is Severity.ERROR] == ["unsupported-construct"], r.findings
    assert "load_pickled_arrays" not in r.output


@needs_frameworks
def test_the_numpy_data_torch_saved_is_read_by_the_translation(tmp_path):
    """The file torch.save wrote (numpy arrays inside its zip archive) read with PyTorch blocked; a file holding a
    tensor fails loudly."""
    import numpy as np
    import torch
    series = np.random.default_rng(3).standard_normal((4, 9))
    torch.save(series, tmp_path / "series.pt")
    (tmp_path / "jax_side.py").write_text(t2j(LOAD_DATA).output)
    p = python("-c", NO_TORCH, "jax_side.py", side="jax", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    # (jnp.asarray keeps float32 unless jax_enable_x64: the values agree to float32's precision)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), series[1:, :-1] * 2, rtol=1e-6)
    torch.save(torch.ones(3), tmp_path / "series.pt")
    p = python("-c", NO_TORCH, "jax_side.py", side="jax", cwd=tmp_path, timeout=300)
    assert p.returncode != 0 and "holds a PyTorch tensor" in p.stderr, p.stderr[-3000:]


# --- LBFGS: step(closure) ----------------------------------------------------------------------------------

LBFGS_SRC = ROOT / "tests" / "data" / "torch_lbfgs_closure.py"

_LBFGS_RUN = """
import json, runpy, sys
import numpy as np
path, side, scale, spread = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
rng = np.random.default_rng(0)
x = rng.standard_normal((20, 3)) * spread
y = scale * np.sin(x @ rng.standard_normal(3))[:, None]
w, b = rng.standard_normal((8, 3)) * 0.3, rng.standard_normal(8) * 0.1
w2, b2 = rng.standard_normal((1, 8)) * 0.1, rng.standard_normal(1) * 0.1
prep = type(sys)("lbfgs_prep")
g0 = None
if side == "torch":
    import torch
    torch.set_default_dtype(torch.float64)
    def prepare(net):
        global g0
        with torch.no_grad():
            for p, v in ((net.fc.weight, w), (net.fc.bias, b), (net.out.weight, w2), (net.out.bias, b2)):
                p.copy_(torch.tensor(v))
        loss = torch.nn.functional.mse_loss(net(prep.x), prep.y)
        g0 = sum(float(g.abs().sum()) for g in torch.autograd.grad(loss, list(net.parameters())))
        return net
    prep.x, prep.y = torch.tensor(x), torch.tensor(y)
else:
    sys.modules["torch"] = None
    import jax
    jax.config.update("jax_enable_x64", True)
    import equinox as eqx, jax.numpy as jnp
    def prepare(net):
        return eqx.tree_at(lambda m: (m.fc.weight, m.fc.bias, m.out.weight, m.out.bias), net,
                           tuple(jnp.asarray(v) for v in (w, b, w2, b2)))
    prep.x, prep.y = jnp.asarray(x), jnp.asarray(y)
prep.prepare = prepare
sys.modules["lbfgs_prep"] = prep
g = runpy.run_path(path, run_name="__main__")
print(json.dumps(dict(losses=g["losses"], g0=g0)))
"""


def test_an_lbfgs_closure_step_becomes_max_iter_train_step_calls():
    """`def closure(): zero_grad; loss; backward; return loss` + `optimizer.step(closure)` → a loop of max_iter
    calls of the written train_step over optax.lbfgs(linesearch=None) (PyTorch's default has no line search;
    history_size → memory_size), the closure's logging after each call; an approximate warning at the step says
    what differs from PyTorch's iterations."""
    r = t2j(LBFGS_SRC.read_text())
    assert not errors(r), r.findings
    assert "optimizer = optax.lbfgs(learning_rate=0.8, memory_size=100, linesearch=None)\n" in r.output
    assert ("for i in range(2):\n    for _ in range(20):  # torch.optim.LBFGS's max_iter: its iterations in one "
            "step(closure)\n        net, opt_state, loss = train_step(net, opt_state)\n        losses.append(loss.item())\n") \
        in r.output, r.output
    assert "def closure" not in r.output and "    optimizer.step(" not in r.output
    warned = [f for f in r.findings if f.code == "approximate" and "optax.lbfgs" in f.message]
    assert len(warned) == 1 and warned[0].line == 31 and "min(1, 1/sum(|grad|))" in warned[0].message
    fewer = t2j(LBFGS_SRC.read_text().replace("lr=0.8)", "lr=0.8, max_iter=5, history_size=7)"))
    assert "for _ in range(5):" in fewer.output and "memory_size=7, linesearch=None" in fewer.output


@pytest.mark.parametrize("change", [
    ("lr=0.8)", "lr=0.8, line_search_fn='strong_wolfe')"),  # a line search: not optax's
    ("    optimizer.step(closure)\n", "    optimizer.step(closure)\n    print(closure)\n"),  # the closure used again
    ("        return loss\n", "        return loss.item()\n"),
])
def test_other_lbfgs_steps_stay_refused(change):
    r = t2j(LBFGS_SRC.read_text().replace(*change))
    assert any(f.rule == "lbfgs" for f in errors(r)), r.findings  # the optimizer's refusal
    assert any("loss.backward() is not at the level" in f.message for f in errors(r)), r.findings
    assert "torch.optim.LBFGS(" in r.output and "optax.lbfgs(learning_rate" not in r.output


@needs_frameworks
def test_the_lbfgs_steps_are_pytorchs_until_pytorch_stops_early(tmp_path):
    """Float64, two step(closure) calls of 20 iterations each: where the first gradient's L1 norm is at most 1,
    every loss PyTorch's closure computed (across both steps: the memory carries over) is the translation's, to
    1e-9; where it is above 1, PyTorch's first iteration is scaled by 1/sum(|grad|) and the second loss differs,
    as the warning says."""
    import numpy as np
    out = tmp_path / "out.py"
    out.write_text(t2j(LBFGS_SRC.read_text()).output)
    runs = {}
    for case, args in (("exact", ("0.1", "0.2")), ("scaled", ("1", "0.5"))):
        for path, side in ((LBFGS_SRC, "torch"), (out, "jax")):
            p = python("-c", _LBFGS_RUN, path, side, *args, side=side, timeout=300)
            assert p.returncode == 0, p.stderr[-3000:]
            runs[case, side] = json.loads(p.stdout.strip().splitlines()[-1])
    t, j = runs["exact", "torch"], runs["exact", "jax"]
    assert t["g0"] <= 1 and 20 < len(t["losses"]) <= 40 and len(j["losses"]) == 40
    np.testing.assert_allclose(j["losses"][:len(t["losses"])], t["losses"], rtol=1e-9)
    t, j = runs["scaled", "torch"], runs["scaled", "jax"]
    assert t["g0"] > 1
    np.testing.assert_allclose(j["losses"][0], t["losses"][0], rtol=1e-12)
    assert abs(j["losses"][1] - t["losses"][1]) > 1e-3 * t["losses"][1]


def _module_level_lbfgs() -> str:
    """LBFGS_SRC with its one step(closure) at module level, written as a notebook cell writes it: several
    statements on a line (the optimizer created beside the loss, the closure's body on one line)."""
    text = LBFGS_SRC.read_text()
    head = text[:text.index("criterion = nn.MSELoss()")]
    return head + ("criterion = nn.MSELoss(); optimizer = torch.optim.LBFGS(net.parameters(), lr=0.8)\n"
                   "losses = []\n"
                   "def closure():\n"
                   "    optimizer.zero_grad(); out = net(x); loss = criterion(out, y); losses.append(loss.item()); "
                   "loss.backward(); return loss\n"
                   "optimizer.step(closure); done = True\n")


@needs_frameworks
def test_an_lbfgs_step_at_module_level_written_on_few_lines_is_pytorchs(tmp_path):
    """The step(closure) outside any loop (a block: the module's statements), `;`-joined statements in the closure,
    the optimizer created on a line beside another statement (its state and train_step then written after that
    line, not lost): max_iter train_step calls, each statement on its own line, and the same losses as PyTorch's
    to 1e-9 (float64, first gradient's L1 norm under 1)."""
    import numpy as np
    src = tmp_path / "src.py"
    src.write_text(_module_level_lbfgs())
    r = t2j(src.read_text())
    assert not errors(r), r.findings
    assert "optimizer = optax.lbfgs(learning_rate=0.8, memory_size=100, linesearch=None)\n" \
           "opt_state = optimizer.init(eqx.filter(net, eqx.is_array))\n" in r.output, r.output
    assert ("for _ in range(20):  # torch.optim.LBFGS's max_iter: its iterations in one step(closure)\n"
            "    net, opt_state, loss = train_step(net, opt_state)\n    losses.append(loss.item())\n"
            "done = True\n") in r.output, r.output
    assert "def closure" not in r.output and "def train_step(net, opt_state):" in r.output
    out = tmp_path / "out.py"
    out.write_text(r.output)
    runs = {}
    for path, side in ((src, "torch"), (out, "jax")):
        p = python("-c", _LBFGS_RUN, path, side, "0.1", "0.2", side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        runs[side] = json.loads(p.stdout.strip().splitlines()[-1])
    t, j = runs["torch"], runs["jax"]
    assert t["g0"] <= 1 and 10 < len(t["losses"]) <= 20 and len(j["losses"]) == 20
    np.testing.assert_allclose(j["losses"][:len(t["losses"])], t["losses"], rtol=1e-9)


# --- the model's key comes from the root key torch.manual_seed makes (issue 10: as an Equinox user writes it) ---

SEEDED = '''import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def main(seed):
    torch.manual_seed(seed)
    if seed >= 0:
        model = Net()
    return model


def other():
    model = Net()
    print(model)
'''


@pytest.mark.skipif(importlib.util.find_spec("jax") is None or importlib.util.find_spec("equinox") is None,
                    reason="needs jax and equinox")
def test_model_key_is_split_from_the_root_key_in_its_scope():
    import jax
    import numpy as np

    r = t2j(SEEDED)
    assert not errors(r)
    main = r.output.split("def main")[1].split("def other")[0]
    assert "key, model_key = jax.random.split(key)\n        model = Net(key=model_key)" in main
    assert "model = Net(key=jax.random.key(0))" in r.output.split("def other")[1]  # no root key in that scope
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    model = ns["main"](5)
    expect = ns["Net"](key=jax.random.split(jax.random.key(5))[1])
    assert np.array_equal(np.asarray(model.fc.weight), np.asarray(expect.fc.weight))
    assert not np.array_equal(np.asarray(model.fc.weight), np.asarray(ns["main"](6).fc.weight))


_LOADER_A = ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nx = torch.zeros(8, 2)\n"
             "for (b,) in DataLoader(TensorDataset(x), batch_size=4):\n    print(b.sum())\n")
_LOADER_B = ("import torch\nfrom torch.utils.data import TensorDataset\nx = torch.zeros(8, 2)\n"
             "ds = TensorDataset(x)\nprint(len(ds), ds[0][0].sum())\n")


def test_data_helpers_parsed_once_give_the_outputs_of_a_fresh_parse():
    """data.finish parses the helpers' text (the helpers an output needs, as the file spells numpy) once per process
    and inserts the same statements into every output: the outputs are those of a cold cache, file after file."""
    from fwport.packs.torch2jax import data

    data._helper_statements.cache_clear()
    cold = {k: t2j(v).output for k, v in (("a", _LOADER_A), ("b", _LOADER_B))}
    data._helper_statements.cache_clear()
    warm = [(k, t2j(v).output) for k, v in (("a", _LOADER_A), ("b", _LOADER_B), ("a", _LOADER_A), ("b", _LOADER_B))]
    assert all(out == cold[k] for k, out in warm)
    assert data._helper_statements.cache_info().hits == 2  # parsed once per text (the helpers a file needs)
    assert "class NumpyLoader" in cold["a"] and "class ArrayDataset" in cold["a"]
    assert "class ArrayDataset" in cold["b"] and "NumpyLoader" not in cold["b"]
