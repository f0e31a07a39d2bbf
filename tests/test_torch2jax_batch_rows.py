"""torch2jax: a view whose first size is the batch size times the example's leading sizes (the language model's
``out.reshape(out.size(0) * out.size(1), out.size(2))``, ``x.view(B * T, C)`` after ``B, T, C = x.size()``):
PyTorch's rows are the examples' rows in turn, so one example's view is ``(T, C)`` and the result holds the batch axis
merged outermost into its first dimension. Each translation is verified against PyTorch (forward and gradients,
``fwport verify``); a view whose batch size is not a factor of the first size stays an error."""
from __future__ import annotations

import pytest

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox")


LM = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, v=11, dim=8):
        super().__init__()
        self.embed = nn.Embedding(v, dim)
        self.lstm = nn.LSTM(dim, dim, 1, batch_first=True)
        self.linear = nn.Linear(dim, v)

    def forward(self, x):
        x = self.embed(x)
        out, (h, c) = self.lstm(x)
        VIEW
        return self.linear(out)
'''

VIEWS = {
    "sizes": ("out = out.reshape(out.size(0)*out.size(1), out.size(2))", "out.reshape(out.shape[0], out.shape[1])"),
    "unpacked": ("B, T, C = out.size()\n        out = out.reshape(B * T, C)", "out.reshape(T, C)"),
    "shape and -1": ("out = out.reshape(out.shape[1] * out.shape[0], -1)", "out.reshape(out.shape[0], -1)"),
}


@pytest.mark.parametrize("view, expected", VIEWS.values(), ids=VIEWS.keys())
def test_the_batch_size_as_a_factor_of_the_first_size_is_dropped(view, expected):
    r = t2j(LM.replace("VIEW", view))
    assert errors(r) == []
    assert expected in r.output
    assert "returns 0 merged outermost into 0" in r.output  # the vmapped rows are reshaped back to PyTorch's


@needs_frameworks
@pytest.mark.parametrize("view", [v for v, _ in VIEWS.values()], ids=VIEWS.keys())
def test_per_example_rows_verify_against_pytorch(tmp_path, view):
    cert = verify_model(tmp_path, LM.replace("VIEW", view), "Net", ["int64[3,5]:11"])
    assert cert["batch_axis"]["out_axes"] == ["grouped:0"]  # (N * L, V): the examples the outer factor of the rows


def test_a_batch_size_not_a_factor_of_the_first_size_stays_an_error():
    r = t2j(LM.replace("VIEW", "out = out.view(out.size(1), out.size(0) * out.size(2))"))
    assert any(f.code == "batch-axis" for f in errors(r)), r.findings


SHAPES = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x, m):
        batch, n, d = x.shape
        w = self.fc(x)
        if m.shape == (batch, n):
            w = w * m[..., None]
        if w.shape != (batch, n, d):
            w = w * 0.0
        w = F.softmax(w.flatten(1), dim=-1).view(w.size())
        return w.reshape(x.shape)
'''

CNN = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        output = self.conv(x)
        output = output.view(output.size()[0], -1)
        return self.fc(output)
'''


def test_shapes_compared_and_viewed_with_the_batch_size_are_one_examples():
    r = t2j(SHAPES)
    assert errors(r) == []
    assert "if m.shape == (n,):" in r.output and "if w.shape != (n, d):" in r.output
    assert ".reshape(w.shape)" in r.output and "w.reshape(x.shape)" in r.output
    r = t2j(CNN)
    assert errors(r) == []
    assert "output.reshape(-1)" in r.output


@needs_frameworks
@pytest.mark.parametrize("source, inputs", [(SHAPES, ["float64[3,4,8]", "float64[3,4]"]), (CNN, ["float64[2,1,8,8]"])],
                         ids=["shapes", "size()[0]"])
def test_shapes_with_the_batch_size_verify_against_pytorch(tmp_path, source, inputs):
    verify_model(tmp_path, source, "Net", inputs)


def test_a_shape_compared_without_the_batch_size_first_is_left_alone():
    r = t2j(SHAPES.replace("if m.shape == (batch, n):", "if m.shape == (n, batch):"))
    # (the batch size elsewhere than the batch axis's place: no per-example form; PyTorch's layout or an error)
    assert "m.shape == (n,)" not in r.output and "m.shape == (batch,)" not in r.output
    assert errors(r) or "batched module" in r.output
