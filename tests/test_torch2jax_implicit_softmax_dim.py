"""Softmax without dim: PyTorch picks the dim from the input's rank (0 for a 1- or 3-D input, 1 otherwise), JAX
takes the last axis. nn.Softmax() in a module (one example) is written with axis 0, PyTorch's dim 1 of a batch of
vectors or of maps, with a warning naming the 3-D batch it cannot follow; F.softmax(x) whose rank is unknown is
refused (an error). The module's translation is run with torch unimportable and compared in float64."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import SIDE_HEAD, saved_arrays

SOURCE = '''
import torch
import torch.nn as nn


class Probs(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5, dtype=torch.double))
        self.sm = nn.Softmax()

    def forward(self, x):
        return self.sm(x * self.scale)


model = Probs()
maps = torch.linspace(-2, 2, 2 * 3 * 4 * 5, dtype=torch.double).view(2, 3, 4, 5).sin()
vectors = torch.linspace(-1, 3, 2 * 6, dtype=torch.double).view(2, 6).cos()
over_channels = model(maps)
over_features = model(vectors)
'''


def translate(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def test_a_softmax_module_without_dim_takes_pytorchs_implicit_dim():
    r = translate(SOURCE)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "self.sm = eqx.nn.Lambda(lambda x: jax.nn.softmax(x, axis=0))" in r.output, r.output
    told = [f.message for f in r.findings if f.code == "approximate" and "nn.Softmax() without dim" in f.message]
    assert told and "a 3-D batch (N, L, C)" in told[0], r.findings


def test_a_softmax_module_without_dim_computes_pytorchs_output(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    src = textwrap.dedent(SOURCE).lstrip("\n")
    (tmp_path / "orig.py").write_text(src)
    (tmp_path / "jax.py").write_text(translate(SOURCE).output)
    driver = SIDE_HEAD + ("np.savez(sys.argv[3], *[np.asarray(getattr(ns[k], 'detach', lambda: ns[k])()) "
                          "for k in ('over_channels', 'over_features')])\n")
    t, j = (saved_arrays(driver, side, tmp_path / path, tmp_path / f"{side}.npz")
            for side, path in (("torch", "orig.py"), ("jax", "jax.py")))
    assert [a.shape for a in j] == [a.shape for a in t] == [(2, 3, 4, 5), (2, 6)]
    np.testing.assert_allclose(t[0].sum(axis=1), 1.0, rtol=1e-12)  # PyTorch normalised the channels
    for a, b in zip(t, j):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call", ["F.softmax(scores)", "F.log_softmax(scores)", "torch.softmax(scores)"])
def test_a_softmax_function_without_dim_is_refused(call):
    r = translate(f"import torch\nimport torch.nn.functional as F\n\ny = {call}\n")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.code for f in errors] == ["unsupported-argument"], r.findings
    assert "without dim: PyTorch picks the dim from the input's rank" in errors[0].message
    assert f"y = {call}" in r.output  # left as written, under its comment


def test_a_softmax_function_with_dim_is_translated():
    r = translate("import torch.nn.functional as F\n\ny = F.softmax(scores, 1)\n")
    assert not r.findings, r.findings
    assert "y = jax.nn.softmax(scores, axis=1)" in r.output
