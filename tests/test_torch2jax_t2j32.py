"""torch2jax gaps of t2j32: ``t.to(v)`` outside a forward's batched path. A ``v`` fwport cannot tell a dtype, a device
or a tensor is an error (it was left as written with no finding: a jax array has no ``.to``); ``.to(y.dtype)`` and
``.to(dtype=d)`` are casts; ``.to(rank)`` / ``.to(self.gpu_id)`` / ``.to(DEVICE)`` are device moves, removed."""
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


UNKNOWN = '''
import torch


def f(q, *rest):
    dtype = rest[-1]
    a = torch.ones(3).to(q)
    b = torch.arange(4).to(dtype)
    return a, b


x = torch.zeros(2)
w = torch.ones(2).to(x)
'''


def test_a_to_of_an_argument_fwport_cannot_tell_is_an_error():
    src = textwrap.dedent(UNKNOWN).lstrip("\n")
    r = _t(src)
    lines = src.splitlines()
    want = [lines.index(s) + 1 for s in ("    a = torch.ones(3).to(q)", "    b = torch.arange(4).to(dtype)",
                                         "w = torch.ones(2).to(x)")]
    got = [f.line for f in _errors(r) if "cannot tell whether" in f.message and "a dtype, a device or a tensor" in f.message]
    assert got == want, [(f.line, f.message) for f in r.findings]
    assert "# fwport: unsupported-construct: torch.ones(3).to(q): fwport cannot tell whether q is" in r.output


KNOWN = '''
import torch
import torch.nn as nn

x = torch.arange(6).reshape(2, 3) * 0.5
y = torch.arange(3).to(x.dtype) * 1.5
dt = (x * 2).dtype
z = torch.ones(2, 3).to(dtype=dt) + 0.25
h = torch.ones(3).to(torch.float16)
DEVICE = torch.device("cpu")
v = (x + 1).to(DEVICE)
device = torch.device("cpu")
u = (x - 1).to(device)
model = nn.Linear(3, 2).to(DEVICE)


def distributed(batch, rank, gpu_id):
    return batch.to(rank) + batch.to(gpu_id)
'''

_RUN = ("import sys, runpy, numpy\nsys.modules['torch'] = None\nns = runpy.run_path(sys.argv[1])\n"
        "numpy.savez(sys.argv[2], **{k: numpy.asarray(ns[k]) for k in 'yzhvu'})\n"
        "print(' '.join(str(numpy.asarray(ns[k]).dtype) for k in 'yzhvu'))\n")


def test_casts_and_device_moves_are_translated_and_compute_pytorchs_values(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    import numpy as np
    src = textwrap.dedent(KNOWN).lstrip("\n")
    r = _t(src)
    assert not _errors(r), [(f.line, f.message) for f in _errors(r)]
    assert "y = jnp.arange(3).astype(x.dtype) * 1.5" in r.output
    assert "z = jnp.ones((2, 3)).astype(dt) + 0.25" in r.output
    assert "return batch + batch\n" in r.output, r.output
    assert ".to(" not in r.output, r.output
    ns: dict = {}
    exec(compile(src, "f.py", "exec"), ns)
    (tmp_path / "t.py").write_text(r.output)
    p = subprocess.run([sys.executable, "-c", _RUN, str(tmp_path / "t.py"), str(tmp_path / "got.npz")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = np.load(tmp_path / "got.npz")
    dtypes = p.stdout.split()
    for i, k in enumerate("yzhvu"):
        want = ns[k].numpy()
        assert dtypes[i] == str(want.dtype), (k, dtypes[i], want.dtype)
        assert got[k].shape == want.shape and np.max(np.abs(got[k] - want)) < 1e-6, k
