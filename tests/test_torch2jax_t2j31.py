"""torch2jax gaps of t2j31: in-place changes of a model's arrays inside functions (a model read as a global is
rebuilt with eqx.tree_at and the global rebound; anything else is an error, not silence)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fwport.core.pipeline import translate_source


def _t(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def _errors(r):
    return [f for f in r.findings if f.severity.value == "error"]


_HEAD = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(torch.tanh(self.fc(x)))


torch.manual_seed(0)
model = Net()
'''

GLOBAL_UPDATES = _HEAD + '''

def bump(v):
    with torch.no_grad():
        model.fc.weight += v


def scale(s):
    global model
    model.out.bias.data.mul_(s)


def clip(c):
    for p in model.parameters():
        p.data.clamp_(-c, c)


def step(epochs):
    for _ in range(epochs):
        bump(0.125)
        scale(-1.5)
    clip(0.3)


step(2)
'''

_CHECK = ("import sys, runpy, numpy\nsys.modules['torch'] = None\nns = runpy.run_path(sys.argv[1])\n"
          "want = numpy.load(sys.argv[2])\nm = ns['model']\nworst = 0.0\n"
          "for k in want.files:\n    a = m\n    for part in k.split('.'):\n        a = getattr(a, part)\n"
          "    a = numpy.asarray(a)\n    assert a.size == want[k].size, k\n"
          "    worst = max(worst, float(numpy.max(numpy.abs(a.reshape(want[k].shape) - want[k]))))\n"
          "print(len(want.files), worst)\n")


def _same_parameters(tmp_path, src: str, r) -> tuple[int, float]:
    """(how many arrays, the largest difference) between the parameters PyTorch's ``model`` ends with after running
    ``src`` and the translation's (run in a subprocess where torch cannot be imported), with the same initial ones."""
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    import numpy as np
    ns: dict = {}
    exec(compile(src, "f.py", "exec"), ns)
    want = {k: v.detach().numpy() for k, v in ns["model"].named_parameters()}
    np.savez(tmp_path / "want.npz", **want)
    # the same initial parameters on both sides: the translation starts from PyTorch's (by name, with eqx.tree_at)
    init: dict = {}
    exec(compile(src.split("\n\ndef ")[0], "f.py", "exec"), init)
    start = {k: v.detach().numpy() for k, v in init["model"].named_parameters()}
    np.savez(tmp_path / "start.npz", **start)
    out = r.output.replace("model = Net(key=model_key)\n", "model = Net(key=model_key)\n"
                           "import numpy as _np\n_s = _np.load(" + repr(str(tmp_path / "start.npz")) + ")\n"
                           "for _k in _s.files:\n    _a, _b = _k.split('.')\n"
                           "    model = eqx.tree_at(lambda m: getattr(getattr(m, _a), _b), model, jnp.asarray(_s[_k]))\n", 1)
    assert out != r.output, r.output
    (tmp_path / "t.py").write_text(out)
    p = subprocess.run([sys.executable, "-c", _CHECK, str(tmp_path / "t.py"), str(tmp_path / "want.npz")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    n, worst = p.stdout.split()[-2:]
    return int(n), float(worst)


def test_a_global_model_changed_in_place_inside_functions_is_rebuilt(tmp_path):
    src = GLOBAL_UPDATES.lstrip("\n")
    r = _t(src)
    assert not _errors(r), [f.message for f in _errors(r)]
    # each function rebinds the global (declared where PyTorch's code read it without `global`)
    assert ("def bump(v):\n    global model\n    model = eqx.tree_at(lambda m: m.fc.weight, model, "
            "model.fc.weight + v)\n") in r.output
    assert ("def scale(s):\n    global model\n    model = eqx.tree_at(lambda m: m.out.bias, model, "
            "model.out.bias * s)\n") in r.output
    assert "def clip(c):\n    global model\n    model = jax.tree_util.tree_map(" in r.output
    assert r.output.count("global model") == 3
    n, worst = _same_parameters(tmp_path, src, r)
    assert n == 4 and worst < 1e-6


@pytest.mark.parametrize("case", ["parameter", "held-by-object", "nested", "in-init", "aliased"])
def test_in_place_changes_fwport_cannot_rebind_are_errors(case):
    """Each of these changed the arrays of a model that the function cannot rebind for its caller: before, the
    statement was left as written with no finding (it fails at run time: an Equinox module is frozen)."""
    if case == "parameter":
        src, line = _HEAD + "\n\ndef bump(m, v):\n    with torch.no_grad():\n        m.fc.weight += v\n", \
            "        m.fc.weight += v"
    elif case == "held-by-object":
        src, line = _HEAD + ("\n\nclass Trainer:\n    def __init__(self, model):\n        self.model = model\n\n"
                             "    def bump(self, v):\n        self.model.fc.bias.data = v\n"), "        self.model.fc.bias.data = v"
    elif case == "nested":
        src, line = _HEAD + ("\n\ndef outer():\n    net = Net()\n\n    def inner(v):\n        net.fc.weight += v\n"
                             "    inner(1.0)\n    return net\n"), "        net.fc.weight += v"
    elif case == "in-init":
        src, line = _HEAD.replace("self.out = nn.Linear(4, 2)\n", "self.out = nn.Linear(4, 2)\n"
                                  "        self.fc.weight.data += 1.0\n"), "        self.fc.weight.data += 1.0"
    else:  # `w` holds the old array: PyTorch changes it too, a rebuilt model would leave it stale
        src, line = _HEAD + "\n\ndef bump(v):\n    w = model.fc.weight\n    model.fc.weight += v\n    return w\n", \
            "    model.fc.weight += v"
    src = src.lstrip("\n")
    r = _t(src)
    e = _errors(r)
    at = src.splitlines().index(line) + 1
    assert [f.line for f in e if "an Equinox module and its arrays are immutable" in f.message] == [at], \
        [(f.line, f.message) for f in e]
    assert "tree_at(lambda m: m.fc" not in r.output


# --- a device unpacked beside a starred name goes with its value (it stayed: x.device fails on a traced example) --

DEVICE_STARRED = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        n, *rest, device = 3, 2.0, 0.5, x.device
        *scale, device2 = 1.5, x.device
        pos = torch.arange(4, device=device).to(device2)
        return self.fc(x) * scale[0] + pos * n + rest[0] - rest[1]
'''


def test_a_device_unpacked_beside_a_starred_name_goes(tmp_path):
    import numpy as np
    from test_torch2jax_t2j30 import _compare
    r = _t(DEVICE_STARRED)
    assert not _errors(r), [f.message for f in _errors(r)]
    assert "        n, *rest = 3, 2.0, 0.5\n        *scale, = (1.5,)\n        pos = jnp.arange(4)\n" in r.output
    assert ".device" not in r.output
    fwd, grad = _compare(tmp_path, DEVICE_STARRED, "Net", np.random.default_rng(5).normal(size=(3, 4)).astype(np.float32))
    assert fwd < 1e-5 and grad < 1e-4
