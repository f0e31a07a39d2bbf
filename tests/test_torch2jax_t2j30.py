"""torch2jax gaps of t2j30: the module bindings clashes.py reads come from the shared binding walker."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import libcst as cst
import pytest

from fwport.core.pipeline import translate_source
from fwport.packs.torch2jax import clashes


def _t(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def _errors(r):
    return [f for f in r.findings if f.severity.value == "error"]


# --- numerical comparison: torch here, the translation in a subprocess without torch; forward and gradients ------

_JAX_SIDE = '''
import sys, runpy
sys.modules["torch"] = None
ns = runpy.run_path(sys.argv[1])
import numpy, jax, jax.numpy as jnp, equinox as eqx
data = numpy.load(sys.argv[2])
model = ns[sys.argv[3]](key=jax.random.key(0))


def at(path):
    def get(m):
        for part in path.split("."):
            m = m.layers[int(part)] if part.isdigit() else getattr(m, part)
            while type(m).__name__ == "PerVector":
                m = m.layer
        return m
    return get


names = [k[2:] for k in data.files if k.startswith("w:")]
for name in names:
    model = eqx.tree_at(at(name), model, jnp.asarray(data["w:" + name]).reshape(at(name)(model).shape))
x, c = jnp.asarray(data["x"]), jnp.asarray(data["c"])
y = jax.vmap(model)(x)
assert y.shape == data["y"].shape, (y.shape, data["y"].shape)
worst = float(numpy.max(numpy.abs(numpy.asarray(y) - data["y"])))
gm = eqx.filter_grad(lambda m: jnp.sum(jax.vmap(m)(x) * c))(model)
gx = jax.grad(lambda x: jnp.sum(jax.vmap(model)(x) * c))(x)
grads = max(float(numpy.max(numpy.abs(numpy.asarray(gx) - data["gx"]))), *(
    float(numpy.max(numpy.abs(numpy.asarray(at(n)(gm)).reshape(data["g:" + n].shape) - data["g:" + n]))) for n in names))
print(worst, grads)
'''


def _compare(tmp_path, src: str, cls: str, x) -> tuple[float, float]:
    """The largest differences between the PyTorch module ``cls`` of ``src`` and its translation on the batch ``x``:
    of the outputs, and of the gradients of sum(y * c) (a fixed random c) with respect to every parameter and the
    input; the PyTorch parameters moved into the translation by name."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("jax")
    pytest.importorskip("equinox")
    import numpy as np
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "f.py", "torch2jax")
    assert not _errors(r), [f.message for f in _errors(r)]
    ns: dict = {}
    exec(compile(src, "f.py", "exec"), ns)
    torch.manual_seed(0)
    model = ns[cls]().eval()
    xt = torch.from_numpy(x).requires_grad_(True)
    y = model(xt)
    c = np.random.default_rng(7).normal(size=tuple(y.shape)).astype(np.float32)
    (y * torch.from_numpy(c)).sum().backward()
    arrays = {"x": x, "c": c, "y": y.detach().numpy(), "gx": xt.grad.numpy()}
    for k, v in model.named_parameters():
        arrays[f"w:{k}"], arrays[f"g:{k}"] = v.detach().numpy(), v.grad.numpy()
    np.savez(tmp_path / "data.npz", **arrays)
    (tmp_path / "t.py").write_text(r.output)
    p = subprocess.run([sys.executable, "-c", _JAX_SIDE, str(tmp_path / "t.py"), str(tmp_path / "data.npz"), cls],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    a, b = p.stdout.split()[-2:]
    return float(a), float(b)


class _Ctx:
    def __init__(self, source: str):
        self.analyses = {"parsed": (cst.parse_module(source), source)}


# --- 1. module bindings through fwport/core/bindings.py -------------------------------------------------------

BINDINGS = '''\
import numpy as onp, os.path
from jax import numpy as jnp
from . import sibling
if os.path.exists("x"):
    for np, k in []:
        pass
with open("f") as eqx:
    pass
try:
    pass
except ValueError as optax:
    pass
print(jax := 1)
squares = [v * v for v in range(3)]
del squares


def f():
    global counter
    local = 1
    counter = 2


class A:
    attr = 3

    def m(self):
        global state
        state = 4
'''


def test_module_bindings_are_read_by_the_shared_walker():
    b = clashes.module_bindings(_Ctx(BINDINGS))
    assert b["onp"] == [(1, 1, "numpy")] and b["os"] == [(1, 1, "os")]
    assert b["jnp"] == [(2, 1, "jax.numpy")] and b["sibling"] == [(3, 1, "..sibling")]
    assert b["np"] == [(5, 9, None)] and b["k"] == [(5, 13, None)]  # a for target inside an if: the name's place
    assert b["eqx"] == [(7, 19, None)] and b["optax"] == [(11, 22, None)] and b["jax"] == [(13, 7, None)]
    assert b["squares"] == [(14, 1, None)]  # (its `del` is no binding; `v` is the comprehension's own)
    assert b["counter"] == [(19, 12, None)] and b["state"] == [(28, 16, None)]  # `global` in a function, a method
    assert b["f"] and b["A"] and "local" not in b and "attr" not in b and "v" not in b and "self" not in b


def test_a_global_declared_in_a_function_clashes_with_the_output():
    r = _t("import torch\n\n\ndef setup():\n    global jnp\n    jnp = 3\n\n\nx = torch.zeros(3)\n")
    e = [f for f in _errors(r) if "binds `jnp`" in f.message]
    assert len(e) == 1 and e[0].line == 5


# --- 2. a Sequential given a value of unknown rank: its per-vector layers mapped as a plain Linear is ---------------

TOKENS_SEQUENTIAL = '''
import torch
import torch.nn as nn


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.LayerNorm(4), nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))

    def forward(self, h):
        return torch.tanh(self.mlp(h))


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        h = x * 2.0
        return self.inner(h)
'''


@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 2, 3, 4), (5, 4)], ids=["tokens", "grid", "vector"])
def test_a_sequential_given_an_unknown_rank_maps_its_per_vector_layers(tmp_path, shape):
    import numpy as np
    r = _t(TOKENS_SEQUENTIAL)
    assert "eqx.nn.Sequential([PerVector(eqx.nn.LayerNorm(4)), PerVector(eqx.nn.Linear(4, 8, key=key1)), " in r.output
    assert ", PerVector(eqx.nn.Linear(8, 4, key=key2))])" in r.output
    assert not [f for f in r.findings if f.severity.value != "info"]  # (it warned before: a plain Linear did not)
    fwd, grad = _compare(tmp_path, TOKENS_SEQUENTIAL, "Outer", np.random.default_rng(0).normal(size=shape).astype(np.float32))
    assert fwd < 1e-5 and grad < 1e-4
