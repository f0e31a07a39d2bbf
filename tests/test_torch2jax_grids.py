"""torch2jax: torch.meshgrid (PyTorch's default indexing is "ij", jnp's "xy": always written), F.normalize (the
norm clamped at eps; dim=1 by default, one less in a module's per-example __call__), torch.finfo, nn.L1Loss and
einops's Reduce layer (its pattern for one example).
The translation is run under JAX (PyTorch hidden) and compared with what PyTorch computes on the same inputs."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import per_example

pytest.importorskip("torch")
pytest.importorskip("jax")

SOURCE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops.layers.torch import Reduce


def grids(h, w):
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w))
    pos = torch.stack(torch.meshgrid((torch.arange(h), torch.arange(w)), indexing="ij"), dim=-1)
    u, v = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="xy")
    axes = [torch.arange(h), torch.arange(w)]
    s, r = torch.meshgrid(*axes)  # the operands unpacked: spread as written, the indexing still "ij"
    return y * 10 + x, pos, u * 10 + v, s * 10 + r


def l2norm(t):
    return F.normalize(t, dim=-1)


def limits(t):
    return -torch.finfo(t.dtype).max, torch.finfo(torch.float16).eps, torch.finfo().tiny


criterion = nn.L1Loss()
total = torch.nn.L1Loss(reduction="sum")


class Norms(nn.Module):
    def forward(self, x):
        a = F.normalize(x)
        b = F.normalize(x, p=1.0, dim=2, eps=0.5)
        return a, b, l2norm(x)


class Pools(nn.Module):
    def __init__(self):
        super().__init__()
        self.gap = nn.Sequential(Reduce('b c h w -> b c', 'mean'))
        self.pool = Reduce('b (h p1) (w p2) -> b (h w)', 'max', p1=2, p2=2)

    def forward(self, x):
        return self.gap(x), self.pool(x[:, 0])
'''

_RUN = r'''
import json, sys, runpy
import numpy as np
rng = np.random.default_rng(0)
x = rng.standard_normal((3, 4, 5)).astype(np.float32)
x[0, :, 1] = 0.0  # a zero vector: the clamp keeps it zero
x4 = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
p, t = rng.standard_normal((6, 7)).astype(np.float32), rng.standard_normal((6, 7)).astype(np.float32)
if sys.argv[1] == "torch":
    import torch
    ns = runpy.run_path(sys.argv[2])
    T = torch.from_numpy
    outs = ns["Norms"]()(T(x)) + ns["Pools"]()(T(x4))
    res = {"grids": [g.tolist() for g in ns["grids"](3, 4)], "norms": [o.tolist() for o in outs],
           "l2": ns["l2norm"](T(p)).tolist(), "limits": [float(v) for v in ns["limits"](T(p))],
           "l1": [float(ns["criterion"](T(p), T(t))), float(ns["total"](T(p), T(t)))]}
else:
    class NoTorch:  # the translation must not need PyTorch (torch left out of sys.modules: einops looks there)
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "torch":
                raise ImportError("PyTorch is hidden")
    sys.meta_path.insert(0, NoTorch())
    import jax, jax.numpy as jnp
    ns = runpy.run_path(sys.argv[2])
    outs = jax.vmap(ns["Norms"]())(jnp.asarray(x)) + jax.vmap(ns["Pools"]())(jnp.asarray(x4))
    res = {"grids": [np.asarray(g).tolist() for g in ns["grids"](3, 4)], "norms": [np.asarray(o).tolist() for o in outs],
           "l2": np.asarray(ns["l2norm"](jnp.asarray(p))).tolist(),
           "limits": [float(v) for v in ns["limits"](jnp.asarray(p))],
           "l1": [float(ns["criterion"](jnp.asarray(p), jnp.asarray(t))), float(ns["total"](jnp.asarray(p), jnp.asarray(t)))]}
print(json.dumps(res))
'''


def _run(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", _RUN, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def translated():
    return translate_source(SOURCE, "m.py", pack="torch2jax")


def test_translated_without_errors(translated):
    assert [f for f in translated.findings if f.severity == Severity.ERROR] == []
    out = translated.output
    assert 'jnp.meshgrid(jnp.arange(h), jnp.arange(w), indexing="ij")' in out  # PyTorch's default, written
    assert "jnp.linalg.norm(x, axis=0, keepdims=True), 1e-12)" in out  # dim=1 of the batch → axis 0 of one example
    assert "jnp.linalg.norm(x, ord=1.0, axis=1, keepdims=True), 0.5)" in out
    assert "import torch" not in out


def test_results_match_pytorch(translated, tmp_path):
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(SOURCE)
    out.write_text(translated.output)
    tr, jx = _run("torch", str(src)), _run("jax", str(out))
    for a, b in zip(tr["grids"], jx["grids"]):
        assert np.array_equal(np.array(a), np.array(b))
    for a, b in zip(tr["norms"], jx["norms"]):
        np.testing.assert_allclose(np.array(b), np.array(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(jx["l2"]), np.array(tr["l2"]), rtol=1e-5, atol=1e-6)
    assert jx["limits"] == tr["limits"]
    np.testing.assert_allclose(jx["l1"], tr["l1"], rtol=1e-5)


def test_a_batch_dimension_given_to_normalize_in_a_module_is_refused():
    src = ("import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass N(nn.Module):\n"
           "    def forward(self, x):\n        return F.normalize(x, dim=0)\n")
    r = translate_source(per_example(src), "m.py", pack="torch2jax")  # (an LSTM held: per example)
    errors = [f for f in r.findings if f.severity == Severity.ERROR]
    assert len(errors) == 1 and errors[0].code == "batch-axis" and "F.normalize" in errors[0].message
