"""In-place tensor methods as statements (``y.add_(x)``, ``h.relu_()``) → the rebinding a JAX user writes
(``y = y + x``, ``h = jax.nn.relu(h)``), where nothing else holds the tensor's memory (inplace.py): translated,
run with torch unimportable, compared in float64 with the original. Where the receiver may share memory (a
parameter, a view, a loop variable), PyTorch's method also changes the other tensor: left with an error."""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import torch_and_jax

SOURCE = '''
import torch
from torch import nn


def scale(x, w):
    y = x * 2.0
    y.add_(w)
    y.sub_(w, alpha=0.5)
    y.mul_(w + 1.0)
    y.div_(3.0)
    y.pow_(2)
    y.tanh_()
    y.clamp_(min=0.1, max=0.9)
    z = torch.zeros_like(x)
    z.add_(y, alpha=2.0)
    z.exp_()
    return y, z


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.gate = nn.Parameter(torch.linspace(0.5, 1.5, 4))

    def forward(self, x):
        h = self.fc(x)
        h.mul_(self.gate)
        h.add_(x)
        h.sigmoid_()
        return h
'''

DRIVER = """
rng = np.random.default_rng(0)
x, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
W, b = rng.standard_normal((4, 4)) * 0.5, rng.standard_normal(4) * 0.1
if side == "torch":
    outs = [o.numpy() for o in ns["scale"](torch.tensor(x), torch.tensor(w))]
    m = ns["Gated"]()
    with torch.no_grad():
        m.fc.weight.copy_(torch.tensor(W)); m.fc.bias.copy_(torch.tensor(b))
    outs.append(m(torch.tensor(x)).detach().numpy())
else:
    outs = [np.asarray(o) for o in ns["scale"](jnp.asarray(x), jnp.asarray(w))]
    m = ns["Gated"](key=jax.random.key(0))
    m = eqx.tree_at(lambda m: (m.fc.weight, m.fc.bias, m.gate), m,
                    (jnp.asarray(W), jnp.asarray(b), jnp.linspace(0.5, 1.5, 4)))
    outs.append(np.asarray(jax.vmap(m)(jnp.asarray(x))))
np.save(OUT, np.stack([np.asarray(o, dtype=np.float64) for o in outs]))
"""


def test_in_place_methods_become_rebindings_that_compute_the_same(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    r = translate_source(SOURCE, "inplace.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    for line in ("y = y + w", "y = y - 0.5 * w", "y = y * (w + 1.0)", "y = y / 3.0", "y = y ** 2",
                 "z = z + 2.0 * y", "h = h * self.gate", "h = h + x"):
        assert line in out, out
    assert not re.search(r"\.[a-z]+_\(", out), out
    expected, got = torch_and_jax(tmp_path, SOURCE, out, DRIVER)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("body", [
    "def f(x):\n    x.add_(1.0)\n    return x\n",                        # a parameter: the caller's tensor too
    "def f(x):\n    y = x.view(-1)\n    y.mul_(2.0)\n    return x\n",     # a view: x changes with it
    "def f(x):\n    y = x[0]\n    y.relu_()\n    return x\n",             # an index: a view
    "def f(x):\n    y = x\n    y.add_(1.0)\n    return x\n",              # an alias
    "def f(xs):\n    for y in xs:\n        y.mul_(2.0)\n    return xs\n",  # a loop variable: an element of xs
    "def f(x):\n    y = x.detach()\n    y.add_(1.0)\n    return x\n",     # detach shares the memory
])
def test_a_receiver_that_may_share_memory_is_not_rebound(body):
    r = translate_source("import torch\n\n" + textwrap.dedent(body), "shared.py", "torch2jax")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert errors and all("_(" in f.message for f in errors), r.findings
    assert "_(" in r.output
