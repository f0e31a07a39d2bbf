"""Writes into a slice of a tensor (`pe[:, 0::2] = torch.sin(...)`, `mask[i, :i] = 1` in a loop, `t[0] += 2`)
→ `pe = pe.at[:, 0::2].set(...)` where the rebinding is exact (fwport/packs/torch2jax/inplace.py): in functions,
at module level and in a module's __init__ (a positional-encoding table, whose tensor methods the tensor-method pass
now translates there too); a write into a tensor another name may hold is an error; numpy arrays, lists and dicts
keep their item assignment. Run against PyTorch."""
from __future__ import annotations

import importlib.util
import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import torch_and_jax

MISSING = [m for m in ("jax", "torch", "equinox") if importlib.util.find_spec(m) is None]


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "torch2jax")


SRC = '''
import math

import numpy as np
import torch
import torch.nn as nn


def table(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    pe = pe.unsqueeze(0).transpose(0, 1)
    return pe


def masks(n):
    mask = torch.zeros(n, n)
    for i in range(n):
        mask[i, :i] = 1.0
        if i % 2:
            mask[i, i] += 0.5
    t = torch.ones(n)
    t[0] *= 3.0
    t[1:] -= 0.25
    a = np.zeros(3)
    a[0] = 1.0
    return mask, t, a


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=50):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[:x.size(1)]
'''


def test_writes_become_at_updates():
    r = t2j(SRC)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    assert "torch" not in out
    assert out.count("pe = pe.at[:, 0::2].set(jnp.sin(position * div_term))") == 2  # the function and __init__
    assert "        mask = mask.at[i, :i].set(1.0)" in out and "mask = mask.at[i, i].add(0.5)" in out
    assert "t = t.at[0].multiply(3.0)" in out and "t = t.at[1:].subtract(0.25)" in out
    assert "    a[0] = 1.0" in out  # numpy keeps its item assignment
    assert ".unsqueeze(" not in out and ".float()" not in out  # __init__'s tensor methods translated too


def test_a_write_into_a_tensor_another_name_holds_is_an_error():
    r = t2j('''
        import torch


        def f():
            t = torch.zeros(3)
            u = t
            t[0] = 1.0
            return t, u
    ''')
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 7)]
    assert "no item assignment" in errs[0].message


@pytest.mark.skipif(bool(MISSING), reason=f"needs {MISSING}")
def test_the_writes_compute_what_pytorch_computes(tmp_path):
    import numpy as np
    body = '''
pe = ns["table"](12, 6)
mask, t, a = ns["masks"](5)
m = ns["PositionalEncoding"](6)
x = np.linspace(-1, 1, 2 * 7 * 6).reshape(2, 7, 6)
if side == "torch":
    y = m(torch.tensor(x)).detach().numpy()
    pe, mask, t = (v.numpy() for v in (pe, mask, t))
else:
    y = np.asarray(jax.vmap(m)(x))
np.save(OUT, np.concatenate([np.ravel(v) for v in (pe, mask, t, a, y)]))
'''
    t, j = torch_and_jax(tmp_path, textwrap.dedent(SRC).lstrip("\n"), t2j(SRC).output, body)
    np.testing.assert_allclose(j, t, rtol=1e-6, atol=1e-6)


PARAMS = '''
import torch


def zero_first(x: torch.Tensor, v):
    x[:, 0] = v
    x[..., 1] += 1
    return x


def scale(x):
    x[:, 1] *= 2
    return x


def tag(d, lst):
    d["a"] = 1
    lst[0] = 2
    return d, lst
'''


def test_a_write_into_a_parameter_is_rebound_where_it_is_a_tensor_and_a_warning_elsewhere():
    r = t2j(PARAMS)
    assert "    x = x.at[:, 0].set(v)\n    x = x.at[..., 1].add(1)\n" in r.output
    assert "    x[:, 1] *= 2\n" in r.output  # not known to be a tensor: kept, with the warning saying what to write
    warnings = [(f.code, f.line) for f in r.findings if f.severity is Severity.WARNING]
    assert warnings == [("unsupported-construct", 11)], r.findings
    w = next(f for f in r.findings if f.line == 11)
    assert "if x is a tensor" in w.message and "`x = x.at[:, 1].multiply(2)`" in w.message
    # a dict's key and a list's index are no array's: no finding
    assert '    d["a"] = 1\n    lst[0] = 2\n' in r.output


def test_a_rebound_tensor_parameter_not_returned_warns_that_the_caller_s_is_unchanged():
    r = t2j('''
        import torch


        def clear(x: torch.Tensor):
            x[:, 0] = 0
        ''')
    assert "    x = x.at[:, 0].set(0)\n" in r.output
    assert [(f.code, f.line) for f in r.findings if f.severity is Severity.WARNING] == [("approximate", 5)], r.findings


@pytest.mark.skipif(bool(MISSING), reason=f"needs {MISSING}")
def test_the_rebound_parameter_writes_compute_what_pytorch_computes(tmp_path):
    import numpy as np
    body = '''
x = np.linspace(-1, 1, 12).reshape(3, 4)
if side == "torch":
    y = ns["zero_first"](torch.tensor(x), 5.0).numpy()
else:
    y = np.asarray(ns["zero_first"](jnp.asarray(x), 5.0))
np.save(OUT, y)
'''
    t, j = torch_and_jax(tmp_path, textwrap.dedent(PARAMS).lstrip("\n"), t2j(PARAMS).output, body)
    assert (t[:, 0] == 5).all()
    np.testing.assert_allclose(j, t, rtol=1e-12, atol=1e-12)
