"""torch2jax gaps of t2j31: in-place changes of a model's arrays inside functions (a model read as a global is
rebuilt with eqx.tree_at and the global rebound; anything else is an error, not silence)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from runners import python


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
    p = python("-c", _CHECK, tmp_path / "t.py", tmp_path / "want.npz", side="jax", timeout=300)
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


# --- the parameters() loop maps every floating array of the model: fwport's own layers must hold no other -----------

EVERY_LAYER = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.lstm = nn.LSTM(6, 5, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(6, 3, batch_first=True)
        self.rnn = nn.RNN(6, 3, batch_first=True)
        self.cell = nn.RNNCell(6, 3)
        self.attn = nn.MultiheadAttention(6, 2, batch_first=True)
        self.enc = nn.TransformerEncoderLayer(6, 2, dim_feedforward=8, batch_first=True)
        self.dec = nn.TransformerDecoderLayer(6, 2, dim_feedforward=8, batch_first=True)
        self.emb = nn.Embedding.from_pretrained(torch.ones(5, 6))
        self.emb2 = nn.Embedding.from_pretrained(torch.ones(5, 6), freeze=False)
        self.bn = nn.BatchNorm1d(6)
        self.ln = nn.LayerNorm(6)
        self.gn = nn.GroupNorm(2, 6)
        self.conv = nn.Conv1d(6, 4, 3)
        self.up = nn.Upsample(scale_factor=2)
        self.shuffle = nn.PixelShuffle(2)
        self.pad = nn.ReflectionPad2d(1)
        self.drop = nn.Dropout2d(0.3)
        self.drop1 = nn.Dropout(0.1)

    def forward(self, x):
        return self.ln(self.fc(x))


model = Net()
'''

_LEAVES = '''
import sys, json, runpy
sys.modules["torch"] = None
import jax, equinox as eqx
m = runpy.run_path(sys.argv[1])["model"]
out, states = {}, {}
for path, leaf in jax.tree_util.tree_leaves_with_path(m, is_leaf=lambda x: isinstance(x, eqx.nn.StateIndex)):
    top = path[0].name
    if isinstance(leaf, eqx.nn.StateIndex):
        states[top] = states.get(top, 0) + 1
    elif eqx.is_inexact_array(leaf):
        out.setdefault(top, []).append([jax.tree_util.keystr(path), int(leaf.size)])
print(json.dumps([out, states]))
'''


def test_the_parameters_loop_maps_only_what_pytorch_calls_parameters(tmp_path):
    """``for p in model.parameters(): p.data.mul_(2)`` becomes a tree_map over every floating array of the Equinox
    model (a layer's state, eqx.nn.StateIndex, left whole). Exact only if the translated layers, Equinox's and the
    ones fwport writes into the file (StackedLSTM, MultiheadAttentionWithWeights, TransformerEncoderLayer,
    PretrainedEmbedding, Upsample, Pad, ChannelDropout...), hold no floating array PyTorch does not count among
    parameters(): a buffer, a mask, a running statistic kept as a plain field would be changed too. Each layer's
    floating arrays are counted against PyTorch's parameters (the recurrent layers sum PyTorch's two biases: one
    bias, and GRU's bias_n of the hidden size)."""
    import json
    torch = pytest.importorskip("torch")
    pytest.importorskip("equinox")
    src = EVERY_LAYER.lstrip("\n") + "for p in model.parameters():\n    p.data.mul_(2.0)\n"
    r = _t(src)
    assert not _errors(r), [f.message for f in _errors(r)]
    assert "model = jax.tree_util.tree_map(lambda p: p * 2.0 if eqx.is_inexact_array(p) else p, model" in r.output
    (tmp_path / "t.py").write_text(r.output)
    p = python("-c", _LEAVES, tmp_path / "t.py", side="jax", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    arrays, states = json.loads(p.stdout.splitlines()[-1])
    ns: dict = {}
    exec(compile(src, "f.py", "exec"), ns)
    for name, layer in ns["model"].named_children():
        want = sum(q.numel() for k, q in layer.named_parameters() if not k.startswith("bias_hh"))
        if name == "gru":
            want += layer.hidden_size * layer.num_layers
        got = arrays.get(name, [])
        assert sum(n for _, n in got) == want, (name, got)
        for path, _ in got:
            assert path.rsplit(".", 1)[-1] in ("weight", "bias", "weight_ih", "weight_hh", "bias_n"), path
    assert set(arrays) <= {n for n, _ in ns["model"].named_children()}
    # BatchNorm's running statistics are a state, not a field the loop would change
    assert states == {"bn": 2} and sum(b.numel() for b in ns["model"].buffers()) > 0


def test_a_global_model_the_function_rebinds_to_something_else_is_not_rewritten():
    # `global model` then `model = make()`: which class the global holds at the change is not proven
    src = _HEAD.lstrip("\n") + ("\n\ndef make():\n    return Net()\n\n\ndef bump(v):\n    global model\n"
                                "    model = make()\n    model.fc.weight += v\n")
    r = _t(src)
    assert "tree_at(lambda m: m.fc" not in r.output
    assert [f.line for f in _errors(r)] == [src.splitlines().index("    model.fc.weight += v") + 1]
