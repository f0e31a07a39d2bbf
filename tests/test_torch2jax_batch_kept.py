"""torch2jax: code that keeps PyTorch's batch axis only to reshape or regroup around it, translated for one example
(issue 10, on real code): vit-pytorch's ``q, k, v = (rearrange(t, 'b n (h d) -> b h n d', h=h) for t in qkv)``, a
generator over the parts of a chunk, gets the per-example pattern as ``map(lambda t: ..., qkv)`` does; a loop over a
batched tensor itself stays an error (it goes over the examples). Each translation is verified against PyTorch
(forward and gradients, ``fwport verify``)."""
from __future__ import annotations


import pytest

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox", "einops")


VIT = '''
import torch
import torch.nn as nn
from einops import rearrange
from einops.layers.torch import Rearrange


class Attention(nn.Module):
    def __init__(self, dim, heads=4, dim_head=8):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim=-1)
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)

    def forward(self, x):
        x = self.norm(x)
        QKV
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        attn = self.attend(dots)
        out = torch.matmul(attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)


class Net(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.to_patch = nn.Sequential(Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1=4, p2=4),
                                      nn.Linear(48, dim))
        self.attn = Attention(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, img):
        x = self.to_patch(img)
        x = self.attn(x) + x
        return self.head(x.mean(dim=1))
'''

GENERATORS = {
    "named parts": "qkv = self.to_qkv(x).chunk(3, dim=-1)\n"
                   "        q, k, v = (rearrange(t, 'b n (h d) -> b h n d', h=self.heads) for t in qkv)",
    "chunk itself": "q, k, v = [rearrange(t, 'b n (h d) -> b h n d', h=self.heads) "
                    "for t in self.to_qkv(x).chunk(3, dim=-1)]",
}


@pytest.mark.parametrize("qkv", GENERATORS.values(), ids=GENERATORS.keys())
def test_a_comprehension_over_parts_gets_the_per_example_pattern(qkv):
    r = t2j(VIT.replace("QKV", qkv))
    assert errors(r) == []
    assert "rearrange(t, 'n (h d) -> h n d', h=self.heads) for t in" in r.output
    assert "rearrange(out, 'h n d -> n (h d)')" in r.output


@needs_frameworks
@pytest.mark.parametrize("qkv", GENERATORS.values(), ids=GENERATORS.keys())
def test_a_comprehension_over_parts_verifies_against_pytorch(tmp_path, qkv):
    verify_model(tmp_path, VIT.replace("QKV", qkv), "Net", ["float64[2,3,8,8]"])


def test_a_comprehension_over_a_batched_tensor_is_still_refused():
    """``for t in x`` goes over PyTorch's batch axis: one example per t, not a part. (With a Softmax over dim=-1 the
    module would be batched, the loop PyTorch's as written: tests/test_torch2jax_batched.py; dim=3 keeps it per
    example.)"""
    r = t2j(VIT.replace("QKV", "q, k, v = (rearrange(t, 'n (h d) -> h n d', h=self.heads) for t in "
                               "self.to_qkv(x))").replace("nn.Softmax(dim=-1)", "nn.Softmax(dim=3)"))
    assert any("goes over its dimension 0, the batch axis" in f.message for f in errors(r)), r.findings


# --- einops layers whose pattern starts with '...' on both sides ------------------------------------------------

HEADS = '''
import torch
import torch.nn as nn
from einops.layers.torch import Rearrange, Reduce


class Net(nn.Module):
    def __init__(self, dim=8, num_classes=5):
        super().__init__()
        self.conv = nn.Conv2d(3, dim, 3, padding=1)
        self.to_logits = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            Rearrange('... () () -> ...'),
            nn.Linear(dim, num_classes)
        )
        self.gate = nn.Sequential(nn.Linear(num_classes, 1), Rearrange('... () -> ...'))

    def forward(self, x):
        logits = self.to_logits(self.conv(x))
        return logits * self.gate(logits).unsqueeze(-1)
'''

TOKENS = '''
import torch
import torch.nn as nn
from einops.layers.torch import Rearrange, Reduce


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.to_patch = nn.Sequential(Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1=2, p2=2),
                                      nn.Linear(12, dim),
                                      Rearrange('... (d one) -> ... d one', one=1),
                                      Reduce('... d one -> ... d', 'mean'),
                                      nn.LayerNorm(dim),
                                      nn.Linear(dim, 4))

    def forward(self, x):
        return self.to_patch(x)
'''


def test_an_einops_layer_with_a_leading_ellipsis_keeps_its_pattern():
    """CvT's and LeViT's ``Rearrange('... () () -> ...')``: the batch axis is among the axes '...' stands for."""
    r = t2j(HEADS)
    assert errors(r) == []
    assert "eqx.nn.Lambda(lambda x: einops.rearrange(x, '... () () -> ...'))" in r.output
    assert "eqx.nn.Lambda(lambda x: einops.rearrange(x, '... () -> ...'))" in r.output


def test_the_rank_after_a_leading_ellipsis_pattern_is_followed():
    """(tokens, d) → (tokens, d, 1) → (tokens, d): the LayerNorm and Linear after it get tokens, mapped over them."""
    r = t2j(TOKENS)
    assert errors(r) == []
    assert "einops.reduce(x, '... d one -> ... d', 'mean')), PerVector(eqx.nn.LayerNorm(dim)), " \
           "PerVector(eqx.nn.Linear(dim, 4" in r.output


@needs_frameworks
@pytest.mark.parametrize("source, shape", [(HEADS, "float64[2,3,6,6]"), (TOKENS, "float64[2,3,4,4]")],
                         ids=["heads", "tokens"])
def test_leading_ellipsis_layers_verify_against_pytorch(tmp_path, source, shape):
    verify_model(tmp_path, source, "Net", [shape])
