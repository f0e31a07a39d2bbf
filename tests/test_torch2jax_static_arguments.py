"""A model called outside its class with Python values beside the batch (``seq(x, future=future)`` of PyTorch's
time-sequence example, ``model(x, 2)``): jax.vmap maps every argument it is given and fails on a number, so
such values are closed over (``functools.partial``) or given ``in_axes=None``; arrays stay mapped. Translated,
run with torch unimportable, compared in float64 with the original."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import SIDE_HEAD, saved_arrays

pytest.importorskip("torch")
pytest.importorskip("jax")

SOURCE = '''
import torch
import torch.nn as nn


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([-0.5, -0.25, 0.25, 0.5]))

    def forward(self, input, future=0, scale=None):
        outputs = []
        h = torch.zeros(input.size(0), 4, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h = torch.tanh(h * self.w + input_t)
            outputs += [h]
        for i in range(future):
            h = torch.tanh(h * self.w)
            outputs += [h]
        out = torch.cat(outputs, dim=1)
        return out if scale is None else out * scale


def predict(model, x, steps):
    return model(x, future=steps)


torch.manual_seed(0)
seq = Sequence()
seq.double()
x = torch.linspace(-1, 1, 15, dtype=torch.double).view(3, 5)
s = torch.linspace(1, 2, 3, dtype=torch.double).view(3, 1)
future = 4
longer = future * 2 + 1
kept = seq(x, future=future)
positional = seq(x, 2)
both = seq(x, future=longer, scale=s)
called = predict(seq, x, 3)
'''


def test_python_values_beside_the_batch_are_not_mapped(tmp_path):
    src = textwrap.dedent(SOURCE).lstrip("\n")
    r = translate_source(src, "f.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    assert "jax.vmap(functools.partial(seq, future=future))(x)" in out
    assert "jax.vmap(seq, in_axes=(0, None))(x, 2)" in out
    assert "jax.vmap(functools.partial(seq, future=longer))(x, scale=s)" in out  # the array stays mapped
    assert "jax.vmap(functools.partial(model, future=steps))(x)" in out  # forward's default: a Python int
    told = [f.message for f in r.findings if f.code == "batch-axis"]
    assert any("future is a Python value holding no batch" in m for m in told), told
    (tmp_path / "orig.py").write_text(src)
    (tmp_path / "jax.py").write_text(out)
    driver = SIDE_HEAD + "np.savez(sys.argv[3], *[np.asarray(getattr(ns[k], 'detach', lambda: ns[k])()) for k in ('kept', 'positional', 'both', 'called')])\n"
    t, j = (saved_arrays(driver, side, tmp_path / path, tmp_path / f"{side}.npz")
            for side, path in (("torch", "orig.py"), ("jax", "jax.py")))
    assert [a.shape for a in j] == [a.shape for a in t] == [(3, 36), (3, 28), (3, 56), (3, 32)]
    for a, b in zip(t, j):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_unknown_and_array_arguments_stay_mapped():
    """A keyword of unknown kind with no Python default (a mask) and a positional array are mapped, as before; an
    argument-less vmap of only Python positionals is left as written (nothing to map)."""
    src = ("import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n        self.l = nn.Linear(4, 4)\n\n"
           "    def forward(self, x, mask=None, n=1):\n        return self.l(x) * n if mask is None else self.l(x) * mask\n\n"
           "def f(m, x, mask, k):\n    return m(x, mask=mask), m(x, x), m(x, n=k)\n\n"
           "m = M()\ny = m(3.0, 2)\n")
    r = translate_source(src, "f.py", "torch2jax")
    out = r.output
    assert "jax.vmap(m)(x, mask=mask)" in out and "jax.vmap(m)(x, x)" in out
    assert "jax.vmap(functools.partial(m, n=k))(x)" in out
    assert "jax.vmap(m)(3.0, 2)" in out
