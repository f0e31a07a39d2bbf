"""A draw from PyTorch's global generator in code no jax.random key reaches (outside the module classes, in a file
that sets no torch.manual_seed, where no `key` is defined) takes a root key of its scope, with a warning (keys.py;
tests/test_torch2jax_keys.py): before, it became `jax.random.normal(key, ...)` reading a `key` nothing defines (a
NameError when it ran), then an error. Where a key does reach the draw the translation is unchanged, and runs."""
from __future__ import annotations

import importlib.util

import pytest

from fwport.core.finding import Severity
from helpers import error_findings as errors, t2j
from runners import python

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")


KEYLESS = '''
import torch


def test():
    y = torch.randn(1, 3, 32, 32)
    return y, torch.randint(0, 10, (4,))


class RandomData:
    def __init__(self, size):
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]


noise = torch.randperm(5)
'''


def test_draws_no_key_reaches_take_a_root_key_of_their_scope_with_a_warning():
    # (until session 12 an error each, the call left as written: tests/test_torch2jax_keys.py runs them now)
    r = t2j(KEYLESS)
    assert not errors(r), r.findings
    warned = sorted((f.line, f.rule) for f in r.findings if f.severity is Severity.WARNING)
    assert warned == [(5, ""), (11, ""), (14, "")], r.findings
    out = r.output.splitlines()
    assert "    key = jax.random.key(0)  # fwport: PyTorch drew from its global generator here; seed fixed at 0" in out
    assert "    return y, jax.random.randint(subkey, (4,), 0, 10)" in out
    assert "noise = jax.random.permutation(key, 5)" in out  # the module's one draw: its root key


KEYED = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return x @ self.w + torch.randn_like(x)


def sample(key, n):
    return torch.rand(n, 2)


def outer(key):
    def inner():
        return torch.randn(3)
    return inner()
'''

SEEDED = '''
import torch

torch.manual_seed(0)
x = torch.randn(3)
'''


@needs_jax
@pytest.mark.parametrize("src, call", [
    (KEYED, "print(sample(jax.random.key(1), 5).shape, outer(jax.random.key(2)).shape, "
            "Net(key=jax.random.key(0))(jnp.ones((2, 4)), key=jax.random.key(3)).shape)"),
    (SEEDED, "print(x.shape)"),
])
def test_draws_a_key_reaches_are_translated_and_run(tmp_path, src, call):
    r = t2j(src)
    assert not errors(r), r.findings
    path = tmp_path / "t.py"
    path.write_text(r.output + "\n\nimport jax.numpy as jnp\n" + call + "\n")
    blocked = "import sys; sys.modules['torch'] = None; exec(open(sys.argv[1]).read())"
    p = python("-c", blocked, path, side="jax", timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    if src is KEYED:
        assert p.stdout.split("\n")[0] == "(5, 2) (3,) (2, 4)"
    else:
        assert p.stdout.strip() == "(3,)"
