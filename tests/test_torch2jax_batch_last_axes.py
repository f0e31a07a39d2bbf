"""torch2jax: an ``nn.Softmax(dim=-k)`` attribute (``self.attend``, vit-pytorch's scalable_vit and cvt) given a tensor
whose batch axis is not first (grouped outermost by an einops pattern, ``(b x y) h n n``; or moved by a transpose).
The layer acts along an axis counted from the end, so for one example it is the same layer wherever the batch axis
is, provided that axis is not the batch's and (for a plain position) the batch axis comes before it; then the
per-example translation takes it (it was refused, and the module written batched or left with an error). A batch axis
after the dim (one example's axis -k would be another) is still refused. Each translation is verified against
PyTorch (fwport verify: forward and gradients, weights transferred)."""
from __future__ import annotations

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox", "einops")

WINDOWS = '''
import torch
import torch.nn as nn
from einops import rearrange


class LocalAttention(nn.Module):
    def __init__(self, dim=8, heads=2, dim_head=4, patch_size=2):
        super().__init__()
        inner = heads * dim_head
        self.patch_size = patch_size
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_kv = nn.Linear(dim, inner * 2, bias=False)
        self.attend = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(0.0)
        self.to_out = nn.Linear(inner, dim)

    def forward(self, fmap):
        b, n, d = fmap.shape
        h, p = self.heads, self.patch_size
        x = rearrange(fmap, 'b (w p) d -> (b w) p d', p=p)
        q = self.to_q(x)
        k, v = self.to_kv(x).chunk(2, dim=-1)
        q, k, v = map(lambda t: rearrange(t, '(b w) p (h d) -> (b w h) p d', h=h, w=n // p), (q, k, v))
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        attn = self.attend(dots)
        attn = self.dropout(attn)
        out = torch.matmul(attn, v)
        out = rearrange(out, '(b w h) p d -> b (w p) (h d)', h=h, w=n // p)
        return self.to_out(out)
'''


def test_a_last_axis_softmax_given_grouped_rows_is_per_example():
    r = t2j(WINDOWS)
    assert errors(r) == [], r.findings
    assert "batched module" not in r.output  # the per-example form (before: refused there, written batched)
    assert "rearrange(fmap, '(w p) d -> w p d', p=p)" in r.output
    assert "attn = self.attend(dots)" in r.output
    assert "lambda x: jax.nn.softmax(x, axis=-1)" in r.output


@needs_frameworks
def test_a_last_axis_softmax_given_grouped_rows_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, WINDOWS, "LocalAttention", ["float64[3,6,8]"])


MOVED = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 6)
        self.attend = nn.Softmax(dim=DIM)

    def forward(self, x):
        h = self.proj(x.view(x.size(0), 3, 4))
        h = h.transpose(0, T)
        return self.attend(h).transpose(0, T)
'''


def test_a_last_axis_softmax_after_the_batch_axis_is_per_example():
    # (N, 3, 6) → (3, N, 6): the softmax's axis 2 comes after the batch axis, one example's axis -1 is PyTorch's
    r = t2j(MOVED.replace("DIM", "-1").replace("T", "1"))
    assert errors(r) == [], r.findings
    assert "batched module" not in r.output
    assert "jax.nn.softmax(x, axis=-1)" in r.output


@needs_frameworks
def test_a_last_axis_softmax_after_the_batch_axis_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, MOVED.replace("DIM", "-1").replace("T", "1"), "Net", ["float64[3,12]"])


def test_a_softmax_whose_axis_comes_before_the_batch_axis_is_refused_per_example():
    # (N, 3, 6) → (6, 3, N): dim -2 is PyTorch's axis 1, one example's (6, 3) axis 0; dim -1 is the batch axis itself.
    # Neither is written per example: the module is written batched (whole-batch, as PyTorch computes it)
    for dim in ("-1", "-2"):
        r = t2j(MOVED.replace("DIM", dim).replace("T", "2"))
        assert errors(r) == [], r.findings
        assert "# batched module:" in r.output


@needs_frameworks
def test_a_softmax_whose_axis_comes_before_the_batch_axis_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, MOVED.replace("DIM", "-2").replace("T", "2"), "Net", ["float64[3,12]"])
