"""TorchScript markers in eager code: ``@torch.jit.ignore`` / ``unused`` / ``export`` (bare or called) only tell
the TorchScript compiler what to skip, and ``torch.jit.is_scripting()`` / ``is_tracing()`` are False when the code
runs as Python: removed and False in the translation, which computes what PyTorch computes eagerly (checked
numerically, torch unimportable on the JAX side). ``torch.jit.script`` keeps the function itself, with a warning (jit-script.toml, backends.py)."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import torch_and_jax

SOURCE = '''
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    @torch.jit.ignore
    def no_weight_decay(self):
        return {"fc.bias"}

    @torch.jit.unused
    def debug(self, x):
        return x

    @torch.jit.ignore(drop=True)
    def extra(self):
        return 1

    def forward(self, x):
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            return self.fc(x)
        return torch.sin(self.fc(x) * torch.pi) + torch.e
'''

DRIVER = """
rng = np.random.default_rng(0)
x, W, b = rng.standard_normal((2, 4)), rng.standard_normal((3, 4)), rng.standard_normal(3)
if side == "torch":
    m = ns["Head"]()
    with torch.no_grad():
        m.fc.weight.copy_(torch.tensor(W)); m.fc.bias.copy_(torch.tensor(b))
    out = m(torch.tensor(x)).detach().numpy()
else:
    m = eqx.tree_at(lambda m: (m.fc.weight, m.fc.bias), ns["Head"](key=jax.random.key(0)), (jnp.asarray(W), jnp.asarray(b)))
    out = np.asarray(jax.vmap(m)(jnp.asarray(x)))
np.save(OUT, out)
"""


def test_torchscript_markers_are_removed_and_the_eager_branch_computes_the_same(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    r = translate_source(SOURCE, "head.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "jit" not in r.output and "torch" not in r.output, r.output
    assert "if False or False:" in r.output and "jnp.pi" in r.output and "jnp.e" in r.output
    expected, got = torch_and_jax(tmp_path, SOURCE, r.output, DRIVER)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_torch_jit_script_is_the_function_itself_with_a_warning():
    # (t2jmisc: it was an error; the scripted function computes what the eager one does, so the translation keeps
    # the function and a warning says where jax.jit goes; numerically checked in test_torch2jax_t2jmisc.py)
    r = translate_source("import torch\n\n\n@torch.jit.script\ndef f(x):\n    return x + 1\n", "s.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "torch" not in r.output and "def f(x):" in r.output
    assert any(f.severity is Severity.WARNING and "jax.jit" in f.message and f.line == 4 for f in r.findings)
