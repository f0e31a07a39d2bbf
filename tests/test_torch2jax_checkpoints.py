"""fwport torch2jax: checkpoint dicts, and a second training loop of one optimizer.

``torch.save({'epoch': e, 'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'loss': l}, f)``
(a dict display, or a name bound once to one) → ``save_checkpoint(f, {..., 'model': model, 'optimizer':
opt_state, ...}, trees=('model', 'optimizer'))``, and ``ck = torch.load(f)`` read only as ``ck['key']``, its
models and optimizer restored by ``X.load_state_dict(ck['key'])`` → ``ck = load_checkpoint(f, {'model': model,
'optimizer': opt_state})`` and ``model = ck['model']`` / ``opt_state = ck['optimizer']``. The two helpers are
written into the output: one pickle of the plain values and of each pytree's eqx.tree_serialise_leaves bytes (so
that a load may ask for some of the pytrees only: a sampling script restores the model alone).

Checked here: the helpers round-trip under JAX alone (leaves and values equal, a tree not in ``like``
left out); a script that trains, saves, reloads and resumes gives PyTorch's numbers (both sides in subprocesses);
what is not such a checkpoint stays refused; a second loop stepping the same optimizer with the same loss calls
the same train_step, one with another loss (or an optimizer made again with other arguments) is an error.
"""
from __future__ import annotations


import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs
from runners import printed_json, python

needs_frameworks = needs("torch", "jax", "equinox", "optax")

SRC = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
x = torch.linspace(-1, 1, 12).reshape(4, 3)
y = torch.ones(4, 2)
for epoch in range(3):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
torch.save({'epoch': epoch, 'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'loss': loss.item()},
           "ckpt.pt")
state = {
    'net': model.state_dict(),
    'acc': 0.5,
}
torch.save(state, "best.pt")
saved = model(x)
for epoch in range(3, 5):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
continued = model(x)

model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
fresh = model(x)
checkpoint = torch.load("ckpt.pt")
model.load_state_dict(checkpoint['model'])
optimizer.load_state_dict(checkpoint['optimizer'])
start_epoch = checkpoint['epoch'] + 1
last_loss = checkpoint['loss']
loaded = model(x)
for epoch in range(start_epoch, 5):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
resumed = model(x)
best = torch.load("best.pt")
model.load_state_dict(best['net'])
best_acc = best['acc']
restored = model(x)
'''


def t2j(text: str):
    return translate_source(text, "train.py", "torch2jax")


def test_a_checkpoint_dict_is_saved_and_loaded_with_the_helpers():
    r = t2j(SRC)
    assert not errors(r), r.findings
    out = r.output
    assert "def save_checkpoint(path, checkpoint, trees):" in out and "def load_checkpoint(path, like):" in out
    assert ("save_checkpoint(\"ckpt.pt\", {'epoch': epoch, 'model': model, 'optimizer': opt_state, "
            "'loss': loss.item()}, trees=('model', 'optimizer'))\n") in out, out
    assert "state = {\n    'net': model,\n    'acc': 0.5,\n}\nsave_checkpoint(\"best.pt\", state, trees=('net',))\n" in out
    assert ("checkpoint = load_checkpoint(\"ckpt.pt\", {'model': model, 'optimizer': opt_state})\n"
            "model = checkpoint['model']\nopt_state = checkpoint['optimizer']\n"
            "start_epoch = checkpoint['epoch'] + 1\n") in out, out
    assert "best = load_checkpoint(\"best.pt\", {'net': model})\nmodel = best['net']\nbest_acc = best['acc']\n" in out
    # the loops after the first step the same optimizer with the same loss: the one train_step, called again
    assert out.count("def train_step(") == 1 and out.count("= train_step(model, opt_state)") == 3, out
    assert "torch" not in out


_ROUND_TRIP = '''
import sys, runpy
sys.modules["torch"] = None
import equinox as eqx, jax, jax.numpy as jnp, numpy as np, optax
ns = runpy.run_path(sys.argv[1])  # the translation: its helpers
save, load = ns["save_checkpoint"], ns["load_checkpoint"]
model = eqx.nn.MLP(3, 2, 8, 2, key=jax.random.key(1))
opt = optax.adam(0.1)
opt_state = opt.init(eqx.filter(model, eqx.is_array))
grads = jax.tree_util.tree_map(jnp.ones_like, eqx.filter(model, eqx.is_array))
_, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_array))
save("rt.ckpt", {"epoch": 7, "name": "run", "model": model, "opt": opt_state, "loss": jnp.float32(0.25)},
     trees=("model", "opt"))
fresh = eqx.nn.MLP(3, 2, 8, 2, key=jax.random.key(2))
fresh_state = opt.init(eqx.filter(fresh, eqx.is_array))
got = load("rt.ckpt", {"model": fresh, "opt": fresh_state})
assert got["epoch"] == 7 and got["name"] == "run" and float(got["loss"]) == 0.25, got
for a, b in ((model, got["model"]), (opt_state, got["opt"])):
    la, lb = jax.tree_util.tree_leaves(eqx.filter(a, eqx.is_array)), jax.tree_util.tree_leaves(eqx.filter(b, eqx.is_array))
    assert len(la) == len(lb) > 0 and all(np.array_equal(u, v) for u, v in zip(la, lb))
assert not all(np.array_equal(u, v) for u, v in zip(jax.tree_util.tree_leaves(eqx.filter(fresh, eqx.is_array)),
                                                    jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))))
only = load("rt.ckpt", {"model": fresh})  # the model alone (a sampling script): the optimizer's state left out
assert "opt" not in only and only["epoch"] == 7
assert all(np.array_equal(u, v) for u, v in zip(jax.tree_util.tree_leaves(eqx.filter(only["model"], eqx.is_array)),
                                                jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))))
print("ok")
'''


@needs_frameworks
def test_the_helpers_round_trip_under_jax_alone(tmp_path):
    (tmp_path / "out.py").write_text(t2j(SRC).output.split("\nclass Net")[0])  # the imports and the helpers
    p = python("-c", _ROUND_TRIP, tmp_path / "out.py", side="jax", timeout=300, cwd=tmp_path,
               env={"JAX_PLATFORMS": "cpu"})
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-3000:]


_RUN = '''
import sys, json, runpy
import numpy as np
side, path = sys.argv[1:3]
if side == "jax":
    sys.modules["torch"] = None
ns = runpy.run_path(path, run_name="__main__")
out = {k: np.asarray(ns[k].detach() if side == "torch" else ns[k]).tolist()
       for k in ("saved", "continued", "fresh", "loaded", "resumed", "restored")}
out.update({k: float(ns[k]) for k in ("start_epoch", "last_loss", "best_acc")})
print(json.dumps(out))
'''


@needs_frameworks
def test_training_saving_reloading_and_resuming_as_pytorch_does(tmp_path):
    import numpy as np
    for side in ("torch_side", "jax_side"):
        (tmp_path / side).mkdir()
    (tmp_path / "orig.py").write_text(SRC)
    (tmp_path / "translated.py").write_text(t2j(SRC).output)
    got = {}
    for side, path in (("torch", "orig.py"), ("jax", "translated.py")):
        printed = printed_json(_RUN, side, tmp_path / path, side=f"torch2jax-{side}", cwd=tmp_path / f"{side}_side",
                               env={"JAX_PLATFORMS": "cpu"})
        got[side] = {k: np.array(v) for k, v in printed.items()}
    t, j = got["torch"], got["jax"]
    # the initialisations differ (PyTorch's and JAX's draws): compare each side's own history
    for v in (t, j):
        np.testing.assert_allclose(v["loaded"], v["saved"], rtol=1e-6, atol=1e-7)  # the model saved, restored
        np.testing.assert_allclose(v["restored"], v["saved"], rtol=1e-6, atol=1e-7)
        assert not np.allclose(v["fresh"], v["saved"], atol=1e-3)
        # resuming with the optimizer's restored state continues the run exactly (a fresh Adam state would not)
        np.testing.assert_allclose(v["resumed"], v["continued"], rtol=1e-5, atol=1e-6)
        assert v["start_epoch"] == 3 and v["best_acc"] == 0.5
    assert t["last_loss"] > 0 and j["last_loss"] > 0


@needs_frameworks
def test_a_fresh_optimizer_state_would_not_resume_the_run(tmp_path):
    """The check above can fail: without the optimizer's state restored, Adam restarts its moments."""
    src = SRC.replace("optimizer.load_state_dict(checkpoint['optimizer'])\n", "")
    out = t2j(src).output
    assert "opt_state = checkpoint['optimizer']" not in out
    (tmp_path / "translated.py").write_text(out)
    printed = printed_json(_RUN, "jax", tmp_path / "translated.py", side="torch2jax-jax", cwd=tmp_path,
                           env={"JAX_PLATFORMS": "cpu"})
    import numpy as np
    v = {k: np.array(x) for k, x in printed.items()}
    assert not np.allclose(v["resumed"], v["continued"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change", [
    # a scheduler's state: no pytree the translation keeps
    ("optimizer.load_state_dict(checkpoint['optimizer'])\n",
     "optimizer.load_state_dict(checkpoint['optimizer'])\nscheduler.load_state_dict(checkpoint['scheduler'])\n"),
    # the checkpoint read whole, or with a computed key
    ("last_loss = checkpoint['loss']\n", "last_loss = checkpoint['loss']\nprint(checkpoint)\n"),
    ("last_loss = checkpoint['loss']\n", "last_loss = checkpoint[key]\n"),
    # keys dropped on load (strict=False): not the same restore
    ("model.load_state_dict(checkpoint['model'])\n", "model.load_state_dict(checkpoint['model'], strict=False)\n"),
])
def test_a_load_that_is_not_such_a_checkpoint_stays_an_error(change):
    src = SRC.replace(*change)
    assert src != SRC
    r = t2j(src)
    line = src.splitlines().index('checkpoint = torch.load("ckpt.pt")') + 1
    assert any(e.line == line and "torch.load(...) reads a pickle" in e.message for e in errors(r)), r.findings


def test_an_optimizer_created_after_the_load_is_refused():
    # its opt_state (the like the loader reads the optimizer's state into) does not exist yet at the load
    src = SRC + '''

def resume(path):
    model = Net()
    checkpoint = torch.load(path)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model.load_state_dict(checkpoint['model'])
    optimizer.load_state_dict(checkpoint['optimizer'])
    return model
'''
    r = t2j(src)
    line = src.splitlines().index("    checkpoint = torch.load(path)") + 1
    assert [e.line for e in errors(r)] == [line] and "torch.load(...) reads a pickle" in errors(r)[0].message, r.findings
    r = t2j(src.replace("    optimizer.load_state_dict(checkpoint['optimizer'])\n", ""))
    assert not errors(r), r.findings  # the model alone
    assert "    checkpoint = load_checkpoint(path, {'model': model})\n" in r.output


@pytest.mark.parametrize("change", [
    ("'model': model.state_dict(), ", "'model': model.state_dict(), 'sched': scheduler.state_dict(), "),
    ("'model': model.state_dict(), ", "**extra, 'model': model.state_dict(), "),
    ("torch.save(state, \"best.pt\")\n", "state['step'] = 3\ntorch.save(state, \"best.pt\")\n"),
])
def test_a_save_that_is_not_such_a_checkpoint_stays_an_error(change):
    src = SRC.replace(*change)
    assert src != SRC
    r = t2j(src)
    assert any(e.code == "unsupported-construct" and "torch.save(" in e.message for e in errors(r)), r.findings


_TWO_LOOPS = '''\
import torch
from torch import nn

model = nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(4, 3)
y = torch.zeros(4, 2)
for _ in range(3):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
for _ in range(3):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
'''


def test_a_second_loop_of_the_same_step_calls_the_same_train_step():
    r = t2j(_TWO_LOOPS)
    assert not errors(r), r.findings
    assert r.output.count("def train_step(") == 1 and r.output.count("= train_step(model, opt_state)") == 2, r.output
    assert "backward" not in r.output


@pytest.mark.parametrize("change", [
    ("    loss = ((model(x) - y) ** 2).mean()\n    loss.backward()\n    optimizer.step()\n",
     "    loss = ((model(x) - y) ** 2).sum()\n    loss.backward()\n    optimizer.step()\n"),
    ("y = torch.zeros(4, 2)\n", "y = torch.zeros(4, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.5)\n"),
])
def test_a_second_loop_with_another_step_is_an_error_not_left_as_written(change):
    # (before: the second loop stayed as PyTorch code with no finding)
    i = _TWO_LOOPS.rindex(change[0])
    src = _TWO_LOOPS[:i] + change[1] + _TWO_LOOPS[i + len(change[0]):] if "sum" in change[1] else \
        _TWO_LOOPS.replace(*change)
    r = t2j(src)
    second = src.splitlines().index("for _ in range(3):", src.splitlines().index("for _ in range(3):") + 1) + 1
    errs = errors(r)
    assert [e.line for e in errs] == [second] and "one train_step per optimizer" in errs[0].message, r.findings
