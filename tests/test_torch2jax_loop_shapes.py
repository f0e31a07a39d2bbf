"""fwport torch2jax: training loops whose step is written in an equivalent order or spelling.

Rewritten as the usual shape (zero_grad, the loss, backward, step), each checked against PyTorch (both sides in
subprocesses, the same initial parameters): ``model.zero_grad()`` of the model the optimizer trains,
``zero_grad(set_to_none=True)``, and ``optimizer.zero_grad()`` after ``optimizer.step()`` where the gradients
are clear when the loop starts. Refused with why: that zero_grad where an earlier backward() left gradients or an
iteration may skip it (``continue``), and gradient accumulation (the step under ``if (i + 1) % k == 0:``) where the
gradients may not be clear when the loop starts (rewritten otherwise: test_torch2jax_loop_variants.py).
"""
from __future__ import annotations

import json

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs
from runners import python

needs_frameworks = needs("torch", "jax", "equinox", "optax")

HEAD = '''\
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
    "model_zero_grad": '''\
for i in range(4):
    model.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
''',
    "set_to_none": '''\
for i in range(4):
    optimizer.zero_grad(set_to_none=True)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
''',
    "zero_grad_after_step": '''\
for i in range(4):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.item())
''',
}

TAIL = "trained = model(x)\n"


def t2j(text: str):
    return translate_source(text, "train.py", "torch2jax")


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_the_loop_becomes_one_train_step_call(name):
    r = t2j(HEAD + LOOPS[name] + TAIL)
    assert not errors(r), r.findings
    out = r.output
    assert "    model, opt_state, loss = train_step(model, opt_state)\n" in out, out
    assert "zero_grad" not in out and "backward" not in out and "torch" not in out
    assert any(f.code == "idiom-replaced" and f.line == HEAD.count("\n") + 1 and "training step read with" in f.message
               for f in r.findings), r.findings


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


@needs_frameworks
def test_the_rewritten_loops_train_as_pytorch_does(tmp_path):
    import numpy as np
    paths = {"torch": {}, "jax": {}}
    for name, loop in LOOPS.items():
        src = HEAD + loop + TAIL
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
    for name in LOOPS:
        t, j = got["torch"][name], got["jax"][name]
        np.testing.assert_allclose(j["losses"], t["losses"], rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(j["trained"], t["trained"], rtol=1e-5, atol=1e-6, err_msg=name)
        assert t["losses"][-1] < t["losses"][0]
    # the check can fail: gradients never cleared (PyTorch adds them up) train differently
    src = HEAD + LOOPS["zero_grad_after_step"].replace("    optimizer.zero_grad()\n", "") + TAIL
    (tmp_path / "kept.py").write_text(src)
    p = python("-c", _RUN, "torch", json.dumps({"kept": str(tmp_path / "kept.py")}), side="torch", cwd=tmp_path,
               env={"JAX_PLATFORMS": "cpu"}, timeout=300, check=True)
    kept = json.loads(p.stdout.strip().splitlines()[-1])["kept"]
    assert not np.allclose(kept["losses"], got["jax"]["zero_grad_after_step"]["losses"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("before, why", [
    # an earlier backward() left gradients that the first iteration adds to
    ("((model(x) - y) ** 2).mean().backward()\n", None),
    # an iteration may skip the zero_grad: the next one adds to its gradients
    (None, "    if i == 1:\n        continue\n"),
])
def test_a_zero_grad_after_the_step_is_kept_where_gradients_may_not_be_clear(before, why):
    loop = LOOPS["zero_grad_after_step"]
    if why:
        loop = loop.replace("    optimizer.step()\n", why + "    optimizer.step()\n")
    src = HEAD + (before or "") + loop + TAIL
    r = t2j(src)
    line = src.splitlines().index("for i in range(4):") + 1
    assert any(e.line == line and "a training loop is rewritten when" in e.message for e in errors(r)), r.findings


def test_a_zero_grad_of_another_model_is_not_taken_for_the_optimizers():
    src = HEAD.replace("model = Net()\n", "model = Net()\nother = Net()\n") + \
        LOOPS["model_zero_grad"].replace("model.zero_grad()", "other.zero_grad()") + TAIL
    r = t2j(src)
    line = src.splitlines().index("for i in range(4):") + 1
    assert any(e.line == line and "a training loop is rewritten when" in e.message for e in errors(r)), r.findings


def test_gradient_accumulation_is_refused_with_what_to_write():
    # (an epoch's last gradients, fewer than accum, add up with the next epoch's first ones: no zero_grad before the
    # loop; tests/test_torch2jax_loop_variants.py has those rewritten)
    src = HEAD + '''\
accum = 2
for epoch in range(2):
    for i in range(3):
        loss = ((model(x) - y) ** 2).mean() / accum
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
''' + TAIL
    r = t2j(src)
    errs = errors(r)
    line = src.splitlines().index("    for i in range(3):") + 1
    assert [e.line for e in errs] == [line], r.findings
    assert "gradient accumulation" in errs[0].message and "`if (i + 1) % accum == 0:`" in errs[0].message
    assert "optax.MultiSteps(optimizer, every_k_schedule=k)" in errs[0].message
    assert "may not be clear when the loop starts" in errs[0].message


def test_a_step_under_another_condition_is_not_called_accumulation():
    # (word_language_model: the step or a hand-written update, chosen by a flag; zero_grad under the same flag)
    src = HEAD + '''\
use_optimizer = True
for i in range(4):
    if use_optimizer:
        optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if use_optimizer:
        optimizer.step()
''' + TAIL
    errs = errors(t2j(src))
    assert errs and not any("gradient accumulation" in e.message for e in errs), errs
