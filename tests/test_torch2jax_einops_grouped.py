"""torch2jax: einops patterns grouping PyTorch's batch axis outermost with other axes (task t2jmerge): window and
head attention's ``'b (w p) d -> (b w) p d'``, ``'(b w) p (h d) -> (b w h) p d'`` and back. One example's tensor
holds the other factors of the group (``(b h) n d`` of one example is ``(h) n d``), so the batch name goes from its
group on both sides, einsum / matmul / softmax over the other axes are as written, and the value merged back
(``'(b w h) p d -> b (w p) (h d)'``) returns to a plain position. Grouping it inside (``'(n b)'``) stays an error.
Each translation is verified against PyTorch with transferred weights."""
from __future__ import annotations

import pytest

from helpers import error_findings as errors, needs, per_example, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox", "einops")


WINDOWS = '''
import torch
import torch.nn as nn
from torch import einsum
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
        self.to_out = nn.Linear(inner, dim)

    def forward(self, fmap):
        b, n, d = fmap.shape
        h, p = self.heads, self.patch_size
        x = rearrange(fmap, 'b (w p) d -> (b w) p d', p=p)
        q = self.to_q(x)
        k, v = self.to_kv(x).chunk(2, dim=-1)
        q, k, v = map(lambda t: rearrange(t, '(b w) p (h d) -> (b w h) p d', h=h, w=n // p), (q, k, v))
        dots = einsum('b i d, b j d -> b i j', q, k) * self.scale
        attn = dots.softmax(dim=-1)
        out = einsum('b i j, b j d -> b i d', attn, v)
        out = rearrange(out, '(b w h) p d -> b (w p) (h d)', h=h, w=n // p)
        return self.to_out(out)
'''


def test_a_group_with_the_batch_outermost_is_written_for_one_example():
    r = t2j(WINDOWS)
    assert errors(r) == [], r.findings
    assert "rearrange(fmap, '(w p) d -> w p d', p=p)" in r.output
    assert "rearrange(t, 'w p (h d) -> (w h) p d', h=h, w=n // p)" in r.output
    # the einsum's letter b indexes one example's windows and heads: the equation as written
    assert "jnp.einsum('b i d, b j d -> b i j', q, k)" in r.output
    assert "jax.nn.softmax(dots, axis=-1)" in r.output
    assert "rearrange(out, '(w h) p d -> (w p) (h d)', h=h, w=n // p)" in r.output


@needs_frameworks
def test_a_group_with_the_batch_outermost_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, WINDOWS, "LocalAttention", ["float64[3,6,8]"])


GRID = '''
import torch
import torch.nn as nn
from einops import rearrange, repeat


class Block(nn.Module):
    def __init__(self, dim=6, heads=2, w=2):
        super().__init__()
        self.heads = heads
        self.w = w
        self.scale = (dim // heads) ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.bias = nn.Parameter(torch.randn(heads, w * w, w * w))
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        batch, height, width, _ = x.shape
        w = self.w
        x = rearrange(x, 'b (x w1) (y w2) d -> b x y w1 w2 d', w1=w, w2=w)
        x = rearrange(x, 'b x y w1 w2 d -> (b x y) (w1 w2) d')
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), (q, k, v))
        sim = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        sim = sim + self.bias
        attn = sim.softmax(dim=-1)
        out = torch.matmul(attn, v)
        out = rearrange(out, 'b h (w1 w2) d -> b w1 w2 (h d)', w1=w, w2=w)
        out = self.out(out)
        out = rearrange(out, '(b x y) ... -> b x y ...', x=height // w, y=width // w)
        return rearrange(out, 'b x y w1 w2 d -> b (x w1) (y w2) d').sum(dim=(1, 2))
'''


def test_a_grid_of_windows_keeps_the_batch_grouped_through_heads_and_back():
    r = t2j(GRID)
    assert errors(r) == [], r.findings
    assert "'x y w1 w2 d -> (x y) (w1 w2) d'" in r.output
    assert "'(x y) ... -> x y ...'" in r.output


@needs_frameworks
def test_a_grid_of_windows_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, GRID, "Block", ["float64[2,4,4,6]"])


REFUSED = {
    "inner": ("rearrange(x, 'b n d -> (n b) d')", "not outermost"),
    "reduced": ("reduce(y, '(b n) d -> n d', 'sum', n=3)", "reduces it away"),
    "ellipsis": ("rearrange(y, '... d -> d ...')", "'...'"),
    "named-reduced": ("reduce(y, 'm d -> d', 'sum')", "reduces away the axis m"),
    "named-inner": ("rearrange(y, 'm d -> (d m)')", "not outermost"),
}


@pytest.mark.parametrize("call, message", REFUSED.values(), ids=REFUSED.keys())
def test_a_group_one_example_cannot_hold_is_an_error(call, message):
    src = f'''
import torch.nn as nn
from einops import rearrange, reduce


class Net(nn.Module):
    def forward(self, x):
        y = rearrange(x, 'b n d -> (b n) d')
        return {call}
'''
    r = t2j(per_example(src))  # (an LSTM held: per example)
    found = [f for f in errors(r) if f.code == "batch-axis"]
    assert any(message in f.message for f in found), r.findings


def test_a_result_grouped_outermost_says_where_the_batch_axis_is():
    src = """
import torch.nn as nn
from einops import rearrange


class Net(nn.Module):
    def forward(self, x):
        return rearrange(x, 'b n d -> (b n) d')
"""
    r = t2j(src)
    assert errors(r) == [], r.findings
    # one example's (n, d) vmapped over axis 0 is (b, n, d): axes 0 and 1 merged give PyTorch's (b n) d
    assert "out_axes=0" in r.output and "0 merged outermost into 0" in r.output, r.output


# --- modules given the rows of a grouped axis (vivit's factorized transformer: frames, then tokens) --------------

FACTORIZED = '''
import torch
import torch.nn as nn
from einops import rearrange


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(0.1),
                                 nn.Linear(hidden, dim))

    def forward(self, x):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(dim, dim), nn.Dropout(0.1))

    def forward(self, x):
        x = self.norm(x)
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), (q, k, v))
        attn = torch.matmul(q, k.transpose(-1, -2)).softmax(dim=-1)
        out = rearrange(torch.matmul(attn, v), 'b h n d -> b n (h d)')
        return self.to_out(out)


class Factorized(nn.Module):
    def __init__(self, dim=8, depth=2):
        super().__init__()
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([Attention(dim), Attention(dim), FeedForward(dim, 16)]))
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        batch, frames, seq, _ = x.shape
        for spatial_attn, temporal_attn, ff in self.layers:
            x = rearrange(x, 'b f n d -> (b f) n d')
            x = spatial_attn(x) + x
            x = rearrange(x, '(b f) n d -> (b n) f d', b=batch, f=frames)
            x = temporal_attn(x) + x
            x = ff(x) + x
            x = rearrange(x, '(b n) f d -> b f n d', b=batch, n=seq)
        return self.head(x.mean(dim=(1, 2)))
'''


def test_a_module_given_grouped_rows_is_mapped_over_them():
    r = t2j(FACTORIZED)
    assert errors(r) == [], r.findings
    call = r.output.split("class Factorized")[1]
    assert "jax.vmap(lambda _w0, _wk: spatial_attn(_w0, key=_wk), in_axes=(0, 0))(x, " in call, call
    # one key per row, split from the loop's key (each iteration its own)
    assert "jax.random.split(key=draw_key1, num=x.shape[0])" in call, call
    # the modules themselves are written for one row (their input's batch axis first)
    attention = r.output.split("class Attention")[1].split("class ")[0]
    assert "'n (h d) -> h n d'" in attention


@needs_frameworks
def test_a_module_given_grouped_rows_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, FACTORIZED, "Factorized", ["float64[2,3,4,8]"])


# --- slices, concatenation, permutes and layers along the other axes -----------------------------------------------

SLICES = '''
import torch
import torch.nn as nn
from einops import rearrange


class Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.conv = nn.Conv1d(dim // 2, dim // 2, 1)

    def forward(self, x):
        t = rearrange(x, 'b n (h d) -> (b h) n d', h=2)
        first = t[:, :1]
        rest = t[:, 1:]
        rest = torch.cat((rest[..., :1] * 2, rest[..., 1:]), dim=-1)
        t = torch.cat((first, rest), dim=1)
        t = self.conv(t.permute(0, 2, 1)).softmax(dim=-1).permute(0, 2, 1)
        return rearrange(t, '(b h) n d -> b n (h d)', h=2)
'''


def test_slices_and_joins_along_other_axes_are_as_written():
    r = t2j(SLICES)
    assert errors(r) == [], r.findings
    assert "first = t[:, :1]" in r.output and "rest[..., :1] * 2" in r.output
    assert "jnp.concatenate((first, rest), axis=1)" in r.output
    assert "jnp.transpose(t, (0, 2, 1))" in r.output


@needs_frameworks
def test_slices_and_joins_along_other_axes_verify_against_pytorch(tmp_path):
    verify_model(tmp_path, SLICES, "Net", ["float64[2,3,4]"])


@pytest.mark.parametrize("line, message", [
    ("return t[0]", "t[0]"),
    ("return torch.cat((t, t), dim=0)", "torch.cat"),
    ("return t.sum(dim=0)", ".sum"),
], ids=["index", "cat", "sum"])
def test_what_reaches_the_grouped_axis_is_an_error(line, message):
    src = f'''
import torch
import torch.nn as nn
from einops import rearrange


class Net(nn.Module):
    def forward(self, x):
        t = rearrange(x, 'b n (h d) -> (b h) n d', h=2)
        {line}
'''
    r = t2j(per_example(src))  # (an LSTM held: per example)
    assert any(f.code == "batch-axis" and message in f.message for f in errors(r)), r.findings


# --- einops.einsum naming the batch axis (vit-pytorch's wwt) ------------------------------------------------------

EINSUM = '''
import torch
import torch.nn as nn
from einops import einsum, rearrange


class Net(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, _ = x.shape  # (its rank: fwport vmaps to_qkv by it)
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), (q, k, v))
        sim = einsum(q, k, 'b h i d, b h j d -> b h i j')
        attn = sim.softmax(dim=-1)
        out = einsum(attn, v, 'b h i j, b h j d -> b h i d')
        w = rearrange(out, 'b h n d -> (b h) n d')
        w = einsum(w, w, 'r i d, r j d -> r i j').softmax(dim=-1)
        out = einsum(w, rearrange(out, 'b h n d -> (b h) n d'), 'r i j, r j d -> r i d')
        return self.out(rearrange(out, '(b h) n d -> b n (h d)', h=self.heads))
'''


def test_einops_einsum_drops_the_batch_name_from_every_operand():
    r = t2j(EINSUM)
    assert errors(r) == [], r.findings
    assert "einsum(q, k, 'h i d, h j d -> h i j')" in r.output
    assert "einsum(attn, v, 'h i j, h j d -> h i d')" in r.output
    # grouped operands: the name at the grouped axis holds one example's rows, as written
    assert "einsum(w, w, 'r i d, r j d -> r i j')" in r.output


@needs_frameworks
def test_einops_einsum_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, EINSUM, "Net", ["float64[2,3,8]"])


def test_einops_einsum_summing_over_the_batch_axis_is_an_error():
    src = EINSUM.replace("'b h i d, b h j d -> b h i j'", "'b h i d, b h j d -> h i j'")
    r = t2j(per_example(src))  # (an LSTM held: per example)
    assert any(f.code == "batch-axis" and "einops.einsum" in f.message for f in errors(r)), r.findings


def test_einops_einsum_with_the_batch_axis_in_a_leading_ellipsis_is_as_written():
    src = EINSUM.replace("'b h i d, b h j d -> b h i j'", "'... i d, ... j d -> ... i j'")
    r = t2j(src)
    assert errors(r) == [], r.findings
    assert "einsum(q, k, '... i d, ... j d -> ... i j')" in r.output
