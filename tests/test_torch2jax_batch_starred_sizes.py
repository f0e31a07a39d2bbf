"""torch2jax: the batch size bound beside a starred value (vit-pytorch's sep_vit: ``batch, height, width, heads, wsz =
x.shape[0], *x.shape[-2:], self.heads, self.window_size``). The names before the first star pair with the values by
position whatever the star holds, so the batch size's pair goes as in ``r, b = q, q.size(0)`` and its uses are
translated per example (a view's first size) or refused (it was a `.shape[...]: dimension 0 is the batch axis` error).
Verified against PyTorch (fwport verify, forward and gradients)."""
from __future__ import annotations

import pytest

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox")

STARRED = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, dim=3):
        super().__init__()
        self.scale = 0.5
        self.proj = nn.Linear(dim, 2)

    def forward(self, x):
        batch, height, width, scale = x.shape[0], *x.shape[-2:], self.scale
        y = x.reshape(batch, -1, height * width).mean(-1) * scale
        return self.proj(y)
'''


def test_the_batch_size_beside_a_starred_shape_goes():
    r = t2j(STARRED)
    assert errors(r) == [], r.findings
    assert "        height, width, scale = *x.shape[-2:], self.scale\n" in r.output
    assert "x.reshape(-1, height * width)" in r.output
    assert "batched module" not in r.output


@needs_frameworks
def test_the_batch_size_beside_a_starred_shape_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, STARRED, "Net", ["float64[2,3,4,5]"])


@pytest.mark.parametrize("line", [
    # after the star: which value it pairs with depends on what the star holds
    "height, width, batch, scale = *x.shape[-2:], x.shape[0], self.scale",
    # one name left beside a starred value: what remains would not unpack as one name
    "batch, scale = x.shape[0], *(self.scale,)\n        height, width = x.shape[-2:]",
])
def test_a_batch_size_not_paired_before_a_star_is_not_dropped(line):
    src = STARRED.replace("batch, height, width, scale = x.shape[0], *x.shape[-2:], self.scale", line)
    assert line in src
    r = t2j(src)
    # never dropped: refused per example, so the module is written batched (PyTorch's layout, the size as written)
    assert "x.shape[0]" in r.output
    assert errors(r) or "# batched module:" in r.output, r.output


@needs_frameworks
def test_a_batch_size_after_a_star_verifies_against_pytorch(tmp_path):
    src = STARRED.replace("batch, height, width, scale = x.shape[0], *x.shape[-2:], self.scale",
                          "height, width, batch, scale = *x.shape[-2:], x.shape[0], self.scale")
    verify_model(tmp_path, src, "Net", ["float64[2,3,4,5]"])
