"""torch2jax APIs of the PT corpus that were refused: nn.ParameterList → a list of arrays, nn.InstanceNorm2d
with an arithmetic channel count, the tensor method ``.topk`` outside the module classes. Each translation is run
against PyTorch (verify, or both sides on the same input) and compared."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import both_sides, verify_model

pytest.importorskip("torch")
pytest.importorskip("jax")


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def errors(r):
    return [f for f in r.findings if f.severity is Severity.ERROR]


PARAMETER_LIST = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.slots = nn.ParameterList([nn.Parameter(torch.randn(n, 4)) for n in (2, 3)])
        self.scales = nn.ParameterList([])
        for i in range(2):
            self.scales.append(nn.ParameterList([
                nn.Parameter(torch.ones(4) * (i + 0.5)),
                nn.Parameter(torch.randn(4)),
            ]))

    def forward(self, x):
        for s, (a, b) in zip(self.slots, self.scales):
            x = x * a + b + s.sum(0)
        return x
'''


def test_parameter_list_is_a_list_of_trained_arrays(tmp_path):
    r = t2j(PARAMETER_LIST)
    assert "ParameterList" not in r.output and "self.scales = []" in r.output
    assert "self.scales.append([" in r.output
    cert = verify_model(tmp_path, PARAMETER_LIST, "Net", ["float64[5,4]"])
    assert cert["verdict"] == "pass"


INSTANCE_NORM = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, dim=3):
        super().__init__()
        self.conv = nn.Conv2d(dim, dim * 2, 3, padding=1)
        self.norm = nn.InstanceNorm2d(dim * 2, eps=1e-3)
        self.up = nn.InstanceNorm2d(dim * 2 - 1 + 1, affine=True)

    def forward(self, x):
        return self.up(self.norm(self.conv(x)) * 2.0)
'''


def test_instance_norm_of_an_arithmetic_channel_count(tmp_path):
    r = t2j(INSTANCE_NORM)
    assert "eqx.nn.GroupNorm(dim * 2, dim * 2, eps=1e-3, channelwise_affine=False)" in r.output, r.output
    assert "eqx.nn.GroupNorm(dim * 2 - 1 + 1, dim * 2 - 1 + 1, channelwise_affine=True)" in r.output, r.output
    verify_model(tmp_path, INSTANCE_NORM, "Net", ["float64[2,3,5,6]"])


def test_instance_norm_of_a_call_is_still_refused():
    r = t2j(INSTANCE_NORM.replace("nn.InstanceNorm2d(dim * 2, eps", "nn.InstanceNorm2d(int(dim * 2), eps"))
    assert any("written twice" in f.message for f in errors(r)), r.findings


TOPK = '''
import torch


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        return [correct[:k].reshape(-1).float().sum(0) * (100.0 / batch_size) for k in topk]


def tops(x):
    v, i = x.topk(3)
    w, j = x.topk(k=2, dim=0, sorted=False)
    u, h = x.topk(2, -1, largest=True)
    return v, i, w, j, u, h


def named(x):
    return x.topk(2, dim=0).values, x.topk(3).indices, torch.topk(x, 2).indices
'''


def test_topk_method_outside_modules(tmp_path):
    r = t2j(TOPK)
    assert ".topk(" not in r.output
    assert "jax.lax.top_k(output, maxk, axis=1)" in r.output and "jax.lax.top_k(x, 3)" in r.output
    assert "jax.lax.top_k(x, 2, axis=0)[0], jax.lax.top_k(x, 3)[1], jax.lax.top_k(x, 2)[1]" in r.output, r.output
    torch_out, jax_out = both_sides(tmp_path, TOPK, """
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5))
    target = rng.integers(0, 5, size=6)
    out = list(ns["accuracy"](conv(x), conv(target), topk=(1, 3))) + list(ns["tops"](conv(x))) + list(ns["named"](conv(x)))
    np.savez(sys.argv[3], *[np.asarray(o) for o in out])
    """)
    assert len(torch_out) == len(jax_out) == 11
    for a, b in zip(torch_out, jax_out):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-12)


def test_topk_method_smallest_is_not_translated():
    r = t2j(TOPK.replace("x.topk(3)", "x.topk(3, largest=False)"))
    assert [f.line for f in errors(r) if ".topk(" in f.message] == [15, 22], r.findings
    assert "x.topk(3, largest=False)\n" in r.output and "x.topk(3, largest=False).indices" in r.output


PRELU = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, c=3):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.act = nn.PReLU()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.PReLU(init=0.1), nn.Conv2d(c, 4, 1))

    def forward(self, x):
        return self.body(self.act(self.conv(x)))
'''


def test_prelu_one_slope_in_and_out_of_a_sequential(tmp_path):
    r = t2j(PRELU)
    assert "self.act = PReLU()" in r.output and "PReLU(init=0.1), eqx" in r.output and "class PReLU(eqx.Module)" in r.output
    verify_model(tmp_path, PRELU, "Net", ["float64[2,3,5,6]"])


def test_prelu_slope_per_channel_is_refused():
    r = t2j(PRELU.replace("self.act = nn.PReLU()", "self.act = nn.PReLU(c)"))
    assert any(f.code == "unsupported-argument" and "per channel" in f.message and f.line == 9 for f in errors(r)), \
        r.findings

