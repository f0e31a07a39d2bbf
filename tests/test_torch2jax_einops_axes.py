"""torch2jax: einops patterns naming PyTorch's batch axis anywhere (task t2jein). Inside a per-example module the
name standing at the tensor's batch position goes from both sides of the pattern (``'b n d -> n b d'`` → ``'n d ->
n d'``), with a size given for it, and the result holds the batch axis where the name stood on the right, which
what follows reads (``reduce(y, 'n b d -> b d', 'mean')`` → ``'n d -> d'``). A pattern that groups the batch axis
with others or reduces it away moves examples: an error. Each translation is verified against PyTorch."""
from __future__ import annotations

import pytest

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox", "einops")


SWAP = '''
import torch
import torch.nn as nn
from einops import rearrange, reduce


class Net(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        batch = x.shape[0]
        y = rearrange(x, 'b (n d) -> n b d', b=batch, n=4)
        y = torch.tanh(self.proj(y))
        w = y.softmax(dim=0)
        z = reduce(y * w, 'n b d -> b d', 'sum')
        return self.head(z)
'''


def test_the_batch_name_goes_from_both_sides_wherever_it_stands():
    r = t2j(SWAP)
    assert errors(r) == [], r.findings
    assert "rearrange(x, '(n d) -> n d', n=4)" in r.output
    assert "reduce(y * w, 'n d -> d', 'sum')" in r.output
    assert "batch" not in r.output.split("def __call__")[1]  # its size went with the name
    # y holds the batch axis second in PyTorch: softmax over dim 0 (the tokens) stays dim 0 for one example
    assert "jax.nn.softmax(y, axis=0)" in r.output


@needs_frameworks
def test_the_batch_name_moved_inside_the_pattern_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, SWAP, "Net", ["float64[3,24]"])


REFUSED = {
    # (grouped outermost, 'b n d -> (b n) d', is followed: tests/test_torch2jax_einops_grouped.py)
    "grouped": ("rearrange(x, 'b n d -> (n b) d')", "groups it with other axes"),
    "reduced": ("reduce(x, 'b n d -> n d', 'mean')", "reduces it away"),
    "split": ("rearrange(x, '(b h) n -> b h n', h=2)", "reads the batch axis"),
}


@pytest.mark.parametrize("call, message", REFUSED.values(), ids=REFUSED.keys())
def test_a_pattern_moving_examples_is_an_error(call, message):
    src = f'''
import torch.nn as nn
from einops import rearrange, reduce


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 3, batch_first=True)  # (held: the module stays per example, not batched)

    def forward(self, x):
        return {call}
'''
    r = t2j(src)
    found = [f for f in errors(r) if f.code == "batch-axis"]
    assert any(message in f.message for f in found), r.findings


# --- an einops layer moving the batch axis, last in a Sequential (vit-pytorch's FiLM) ----------------------------

FILM = '''
import torch
import torch.nn as nn
from einops.layers.torch import Rearrange


class FiLM(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.to_gamma_beta = nn.Sequential(nn.Linear(dim, dim * 2), Rearrange('b (two d) -> two b 1 d', two=2))

    def forward(self, tokens, cond):
        gamma, beta = self.to_gamma_beta(cond)
        return tokens * gamma + beta


class Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.film = FiLM(dim)
        self.to_cond = nn.Linear(3, dim)
        self.to_scale = nn.Sequential(nn.Linear(dim, 2 * dim), Rearrange('b (two d) -> two b d', two=2))

    def forward(self, tokens, labels):
        x = self.film(tokens, self.to_cond(labels))
        scale = self.to_scale(x.mean(dim=1))
        return x * scale.sum(dim=0).unsqueeze(1)
'''


def test_a_layer_moving_the_batch_axis_last_in_a_sequential_is_written_for_one_example():
    r = t2j(FILM)
    assert errors(r) == [], r.findings
    assert "einops.rearrange(x, '(two d) -> two 1 d', two=2)" in r.output
    assert "einops.rearrange(x, '(two d) -> two d', two=2)" in r.output
    # scale holds the batch axis second: its sum over dim 0 (the two halves) is one example's dim 0, its unsqueeze(1)
    # of (b, d) is (d,)'s unsqueeze(0)
    assert "jnp.sum(scale, axis=0)" in r.output or "scale.sum(axis=0)" in r.output, r.output
    assert "jnp.expand_dims(" in r.output and ", 0)" in r.output.split("jnp.expand_dims(")[1].split("\n")[0]


@needs_frameworks
def test_a_layer_moving_the_batch_axis_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, FILM, "Net", ["float64[2,5,4]", "float64[2,3]"])


def test_a_layer_moving_the_batch_axis_before_other_layers_is_still_refused():
    src = FILM.replace("nn.Sequential(nn.Linear(dim, dim * 2), Rearrange('b (two d) -> two b 1 d', two=2))",
                       "nn.Sequential(Rearrange('b (two d) -> two b 1 d', two=2), nn.Linear(dim // 2, dim))")
    r = t2j(src)
    assert any(f.code == "batch-axis" and "Rearrange(" in f.message for f in errors(r)), r.findings


# --- an einops result holding the batch axis second, unpacked or sliced (vit-pytorch's wwt) ----------------------

HEADS_FIRST = '''
import torch
import torch.nn as nn
from einops import rearrange
from einops.layers.torch import Rearrange


class Net(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.to_patch = nn.Sequential(Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1=2, p2=2),
                                      nn.Linear(12, dim))
        self.to_qkv = nn.Linear(dim, dim * 3)
        self.to_g = nn.Linear(dim, dim * 3)
        self.out = nn.Linear(dim, dim)

    def forward(self, img):
        x = self.to_patch(img)
        q, k, v = rearrange(self.to_qkv(x), 'b n (qkv h d) -> qkv b h n d', qkv=3, h=self.heads)
        g = rearrange(self.to_g(x), 'b n (g d) -> g b n d', g=3)
        gates, last = g[:-1], g[-1]
        gates = rearrange(gates, 'g b n d -> b g n d').sum(dim=1)
        attn = torch.matmul(q, k.transpose(-1, -2)).softmax(dim=-1)
        out = rearrange(torch.matmul(attn, v), 'b h n d -> b n (h d)')
        return self.out(out) * torch.sigmoid(gates) + last
'''


def test_an_einops_result_holding_the_batch_axis_second_is_unpacked_and_sliced_per_example():
    r = t2j(HEADS_FIRST)
    assert errors(r) == [], r.findings
    assert "'n (qkv h d) -> qkv h n d'" in r.output
    assert "gates, last = g[:-1], g[-1]" in r.output
    assert "rearrange(gates, 'g n d -> g n d').sum(axis=0)" in r.output


@needs_frameworks
def test_an_einops_result_holding_the_batch_axis_second_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, HEADS_FIRST, "Net", ["float64[2,3,4,4]"])
