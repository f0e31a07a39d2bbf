"""fwport torch2jax: training loops in the spellings of mixed precision and kept graphs, read as the plain step.

``with <autocast>:`` around the loss statements (a ``torch.autocast(...)`` call, or nanoGPT's ``ctx = nullcontext()
if ... else torch.amp.autocast(...)``) is unwrapped; a GradScaler's ``scaler.scale(loss).backward()``,
``scaler.unscale_(opt)``, ``scaler.step(opt)``, ``scaler.update()`` become ``loss.backward()`` and ``opt.step()`` (its
binding removed); ``loss.backward(retain_graph=True)`` of the loop's one backward() becomes ``loss.backward()``;
gradient accumulation (``loss.backward()`` each batch, ``optimizer.step(); optimizer.zero_grad()`` under
``if (i + 1) % accum == 0:``) becomes a train_step adding the gradients up in a pytree (``grads_acc``) and applying
the update to their sum where the condition holds. Each
rewritten loop trains as PyTorch does from the same weights (both sides in subprocesses, losses and outputs compared).
Refused with why: a kept graph a later iteration goes through (a hidden state not detached), a loop whose only
backward() keeps its graph and steps nothing, a scaler read otherwise, and gradient accumulation where the
gradients may not be clear when the loop starts, something reads the model before the update, the condition calls
something, or the summed gradients are clipped.
"""
from __future__ import annotations

import json

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs
from runners import python

needs_frameworks = needs("torch", "jax", "equinox", "optax")

HEAD = '''\
from contextlib import nullcontext

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1, 1, 6).reshape(3, 2))
        self.b = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return torch.tanh(x @ self.w + self.b)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
x = torch.linspace(-2, 2, 12).reshape(4, 3)
y = torch.linspace(0, 1, 8).reshape(4, 2)
losses = []
'''

LOOPS = {
    "autocast_name": '''\
device_type = "cpu"
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
for i in range(4):
    with ctx:
        loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
''',
    "autocast_off": '''\
for i in range(4):
    optimizer.zero_grad()
    with torch.autocast("cpu", enabled=False):
        out = model(x)
        loss = ((out - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
''',
    "grad_scaler": '''\
scaler = torch.amp.GradScaler("cpu")
for i in range(4):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    losses.append(loss.item())
''',
    "grad_scaler_clip": '''\
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
for i in range(4):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean() * 4
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    scaler.step(optimizer)
    scaler.update()
    losses.append(loss.item())
''',
    "retain_graph": '''\
for i in range(4):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward(retain_graph=True)
    optimizer.step()
    losses.append(loss.item())
''',
    # the loss one of a tuple (nanoGPT's `logits, loss = model(X, Y)`), the next batch fetched before backward()
    "tuple_loss": '''\
xb = x
for i in range(4):
    out, loss = model(xb), ((model(xb) - y) ** 2).mean()
    xb = x * (1 + (i + 1) % 3)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
''',
    # gradient accumulation: the gradients of `accum` batches added up, the update under the condition
    "accumulation": '''\
accum = 2
optimizer.zero_grad()
for i in range(7):
    loss = ((model(x * (1 + i % 3)) - y) ** 2).mean() / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
    losses.append(loss.item())
''',
    # per epoch, its leftover gradients (3 batches, accum 2) cleared by the zero_grad() before the next epoch's loop
    "accumulation_epochs": '''\
accum = 2
for epoch in range(3):
    optimizer.zero_grad()
    for i in range(3):
        loss = ((model(x * (1 + i)) - y) ** 2).mean() / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            losses.append(-1.0)
        losses.append(loss.item())
''',
}

TAIL = "trained = model(x)\n"


def t2j(text: str):
    return translate_source(text, "train.py", "torch2jax")


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_the_loop_becomes_one_train_step_call(name):
    src = HEAD + LOOPS[name] + TAIL
    r = t2j(src)
    assert not errors(r), r.findings
    out = r.output
    assert "    model, opt_state, loss = train_step(model, opt_state" in out \
        or "model, opt_state, grads_acc, loss = train_step(model, opt_state, grads_acc" in out, out
    assert "backward" not in out and "scaler" not in out and "torch" not in out and "with " not in out, out
    assert "zero_grad" not in out and ".step()" not in out, out
    line = next(k for k, ln in enumerate(src.splitlines(), 1) if ln.lstrip().startswith("for i in range("))
    assert name == "tuple_loss" or any(f.code == "idiom-replaced" and f.line == line and ("training step read with" in f.message
                                                                   or "gradient accumulation" in f.message)
               for f in r.findings), r.findings


def test_accumulated_gradients_are_a_pytree_added_up_and_applied_under_the_condition():
    r = t2j(HEAD + LOOPS["accumulation_epochs"] + TAIL)
    out = r.output
    assert "    grads_acc = None\n    for i in range(3):\n" in out, out
    assert "zero_grad" not in out and "if (i + 1) % accum == 0:\n            losses.append(-1.0)" in out, out
    assert "model, opt_state, grads_acc, loss = train_step(model, opt_state, grads_acc, (i + 1) % accum == 0, " in out
    assert "grads = jax.tree_util.tree_map(jnp.add, grads_acc, grads)" in out and "    if not apply:\n" in out
    assert any(f.code == "idiom-replaced" and "gradient accumulation" in f.message for f in r.findings)


@pytest.mark.parametrize("change, why", [
    # gradients an earlier epoch left (3 batches, accum 2) add up with the first ones: no zero_grad before the loop
    (("    optimizer.zero_grad()\n    for i", "    for i"), "may not be clear when the loop starts"),
    # a statement before the update reads the model PyTorch has not updated yet
    (("        if (i + 1)", "        print(model(x))\n        if (i + 1)"), "reads model or its gradients"),
    # a condition that calls something, evaluated again where the step is called
    (("if (i + 1) % accum == 0:", "if (i + 1) % accum == 0 and should_step(i):"), "condition reads more than names"),
    # a clipping of the summed gradients before the step
    (("            optimizer.step()\n", "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
      "            optimizer.step()\n"), "does not start with the step"),
])
def test_accumulation_is_refused_where_it_would_differ(change, why):
    src = HEAD + LOOPS["accumulation_epochs"].replace(*change) + TAIL
    assert src != HEAD + LOOPS["accumulation_epochs"] + TAIL
    r = t2j(src)
    line = src.splitlines().index("    for i in range(3):") + 1
    errs = [e for e in errors(r) if e.line == line]
    assert errs and "gradient accumulation" in errs[0].message and why in errs[0].message, errors(r)


def test_what_differs_is_said():
    r = t2j(HEAD + LOOPS["grad_scaler"] + TAIL)
    assert any(f.severity == Severity.INFO and "GradScaler" in f.message and "inf or NaN" in f.message
               for f in r.findings), r.findings
    # an autocast call switched on: the loss computes in float32 here
    src = HEAD + LOOPS["autocast_off"].replace('"cpu", enabled=False', '"cpu", dtype=torch.bfloat16') + TAIL
    r = t2j(src)
    assert not errors(r), r.findings
    line = src.splitlines().index('    with torch.autocast("cpu", dtype=torch.bfloat16):') + 1
    assert any(f.severity == Severity.WARNING and f.code == "approximate" and f.line == line
               and "no autocast" in f.message for f in r.findings), r.findings
    assert not any(f.code == "approximate" for f in t2j(HEAD + LOOPS["autocast_off"] + TAIL).findings)


_RUN = '''
import sys, json, runpy
import numpy as np
side, paths = sys.argv[1], json.loads(sys.argv[2])
if side == "jax":
    sys.modules["torch"] = None
out = {}
for name, path in paths.items():
    ns = runpy.run_path(path, run_name="__main__")
    t = ns["trained"]
    out[name] = {"trained": np.asarray(t.detach() if side == "torch" else t).tolist(),
                 "losses": [float(v) for v in ns["losses"]]}
print(json.dumps(out))
'''


def _train(tmp_path, sources: dict) -> dict:
    paths = {"torch": {}, "jax": {}}
    for name, src in sources.items():
        for side, text in (("torch", src), ("jax", t2j(src).output)):
            path = tmp_path / f"{name}_{side}.py"
            path.write_text(text)
            paths[side][name] = str(path)
    got = {}
    for side in ("torch", "jax"):
        p = python("-c", _RUN, side, json.dumps(paths[side]), side=side, timeout=300, cwd=tmp_path,
                   env={"JAX_PLATFORMS": "cpu"})
        assert p.returncode == 0, p.stderr[-3000:]
        got[side] = json.loads(p.stdout.strip().splitlines()[-1])
    return got


@needs_frameworks
def test_the_rewritten_loops_train_as_pytorch_does(tmp_path):
    import numpy as np
    got = _train(tmp_path, {name: HEAD + loop + TAIL for name, loop in LOOPS.items()})
    for name in LOOPS:
        t, j = got["torch"][name], got["jax"][name]
        np.testing.assert_allclose(j["losses"], t["losses"], rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(j["trained"], t["trained"], rtol=1e-5, atol=1e-6, err_msg=name)
        assert t["losses"][-1] < t["losses"][0], name
    # the check can fail: without the unscaling, PyTorch's step reads gradients 1024 times larger
    clipped = got["torch"]["grad_scaler_clip"]["losses"]
    src = HEAD + LOOPS["grad_scaler_clip"].replace("    scaler.unscale_(optimizer)\n", "") + TAIL
    scaled = _train(tmp_path, {"scaled": src})["torch"]["scaled"]["losses"]
    assert not np.allclose(scaled, clipped, rtol=1e-5, atol=1e-6)


def _loop_error(src: str):
    r = t2j(src)
    line = src.splitlines().index("for i in range(4):") + 1
    return [e for e in errors(r) if e.line == line]


def test_a_graph_a_later_iteration_goes_through_is_refused():
    # h carries the graph of the earlier iterations: PyTorch's gradients go back through them
    src = HEAD + '''\
h = torch.zeros(4, 2)
for i in range(4):
    optimizer.zero_grad()
    h = 0.5 * h + model(x)
    loss = ((h - y) ** 2).mean()
    loss.backward(retain_graph=True)
    optimizer.step()
    losses.append(loss.item())
''' + TAIL
    errs = _loop_error(src)
    assert errs and "retain_graph=True" in errs[0].message, errors(t2j(src))


def test_a_loop_whose_only_backward_keeps_its_graph_is_not_left_silently():
    # (before: a backward() with arguments was not taken for a training step at all, and nothing was said)
    src = HEAD + '''\
h = torch.zeros(4, 2)
for i in range(4):
    h = 0.5 * h + model(x)
    loss = ((h - y) ** 2).mean()
    loss.backward(retain_graph=True)
''' + TAIL
    errs = _loop_error(src)
    assert errs and "a training loop is rewritten when" in errs[0].message, errors(t2j(src))


def test_a_scaler_read_otherwise_is_kept_and_refused():
    src = HEAD + LOOPS["grad_scaler"].replace("    scaler.update()\n",
                                              "    scaler.update()\n    print(scaler.get_scale())\n") + TAIL
    assert _loop_error(src), t2j(src).findings
    assert "scaler" in t2j(src).output


@needs("jax", "equinox")
def test_a_loop_counter_the_loss_reads_is_said_to_recompile_the_step():
    """eqx.filter_jit keeps a Python int argument static: one compilation per value of the counter (measured)."""
    import equinox as eqx
    import jax.numpy as jnp

    src = HEAD + (
        "for epoch in range(3):\n"
        "    optimizer.zero_grad()\n"
        "    loss = ((model(x) - y) ** 2).mean() * (2.0 if epoch > 0 else 1.0)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n") + TAIL
    r = t2j(src)  # (a test of it: a Python bool, static; only arithmetic passes it traced, test_torch2jax_keys32)
    line = src.splitlines().index("for epoch in range(3):") + 1
    said = [f for f in r.findings if f.severity == Severity.WARNING and "a Python int" in f.message]
    assert [f.line for f in said] == [line] and "jnp.asarray(epoch)" in said[0].message, r.findings
    assert "train_step(model, opt_state, epoch" in r.output or ", epoch)" in r.output, r.output
    arithmetic = t2j(src.replace("(2.0 if epoch > 0 else 1.0)", "(1.0 + epoch)"))
    assert not [f for f in arithmetic.findings if f.severity == Severity.WARNING and "a Python int" in f.message]
    assert ", jnp.asarray(epoch)" in arithmetic.output, arithmetic.output
    # the finding's claim, checked: a Python int compiles once per value, a traced array once
    traced = []

    @eqx.filter_jit
    def step(x, i):
        traced.append(1)
        return x * (1.0 + i)
    for i in range(3):
        step(jnp.ones(2), i)
    assert len(traced) == 3
    for i in range(3):
        step(jnp.ones(2), jnp.asarray(i))
    assert len(traced) == 4
    # a loop that reads no counter in its loss says nothing of it
    plain = HEAD + LOOPS["tuple_loss"] + TAIL
    assert not [f for f in t2j(plain).findings if "a Python int" in f.message]
