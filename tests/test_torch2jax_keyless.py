"""A draw from PyTorch's global generator in code no jax.random key reaches (outside the module classes, in a file
that sets no torch.manual_seed, where no `key` is defined) is an error on its line, the call left as written: before,
it became `jax.random.normal(key, ...)` reading a `key` nothing defines (a NameError when it ran) with only an info
finding. Where a key does reach the draw the translation is unchanged, and runs."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "torch2jax")


def errors(r):
    return [f for f in r.findings if f.severity is Severity.ERROR]


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


def test_draws_no_key_reaches_are_errors_on_their_lines_left_as_written():
    r = t2j(KEYLESS)
    errs = errors(r)
    assert sorted((e.line, e.rule) for e in errs) == [(5, "randn"), (6, "randint"), (11, "rand"), (11, "rand"),
                                                      (14, "randperm")], r.findings
    assert all("no jax.random key reaches this code" in e.message and "give the function a `key` argument"
               in e.message for e in errs)
    code_lines = [x for x in r.output.splitlines() if not x.strip().startswith("#")]
    assert not [x for x in code_lines if "jax.random" in x], r.output
    for line in ("    y = torch.randn(1, 3, 32, 32)", "noise = torch.randperm(5)"):
        assert line in r.output.splitlines()


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
    p = subprocess.run([sys.executable, "-c", blocked, str(path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    if src is KEYED:
        assert p.stdout.split("\n")[0] == "(5, 2) (3,) (2, 4)"
    else:
        assert p.stdout.strip() == "(3,)"
