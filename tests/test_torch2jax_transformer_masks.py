"""Masks around PyTorch's transformer layers in JAX (issue 10): nn.Transformer.generate_square_subsequent_mask on the
class (written out as jnp.triu of a -inf array) and on an instance (the Transformer helper's static method) give
PyTorch's float causal mask."""
from __future__ import annotations

import importlib.util
import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from tests.runners import torch_and_jax

MISSING = [m for m in ("torch", "jax", "equinox") if importlib.util.find_spec(m) is None]
needs_frameworks = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} installed")


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "torch2jax")


def errors(r):
    return [f for f in r.findings if f.severity is Severity.ERROR]


SQUARE = '''
import torch
from torch import nn


def masks(n):
    return [nn.Transformer.generate_square_subsequent_mask(n),
            torch.nn.Transformer.generate_square_subsequent_mask(n + 1, device="cpu", dtype=torch.float32)]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                          dim_feedforward=16, batch_first=True)

    def forward(self, x):
        return x + self.transformer.generate_square_subsequent_mask(x.size(1))
'''

_SQUARE_BODY = """
x = np.random.default_rng(0).normal(size=(2, 5, 5))
if side == "torch":
    out = [m.numpy() for m in ns["masks"](4)] + [ns["Model"]()(torch.tensor(x)).detach().numpy()]
else:
    out = [np.asarray(m) for m in ns["masks"](4)] + [np.asarray(jax.vmap(ns["Model"](key=jax.random.PRNGKey(0)))(jnp.asarray(x)))]
np.save(OUT, np.concatenate([np.asarray(o, np.float64).ravel() for o in out]))
"""


@needs_frameworks
def test_square_subsequent_mask_is_pytorch_s_on_the_class_and_on_an_instance(tmp_path):
    import numpy as np
    r = t2j(SQUARE)
    assert not errors(r), r.findings
    assert "jnp.triu(jnp.full((n, n), -jnp.inf), k=1)" in r.output
    assert "def generate_square_subsequent_mask(sz, device=None, dtype=None):" in r.output  # the helper's
    torch_out, jax_out = torch_and_jax(tmp_path, textwrap.dedent(SQUARE), r.output, _SQUARE_BODY)
    assert np.isinf(torch_out).any() and torch_out.shape == jax_out.shape
    np.testing.assert_array_equal(jax_out, torch_out)
