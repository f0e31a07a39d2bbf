"""torch2jax: per-example forms of batch-axis code seen in real models (vit-pytorch's ats_vit, vat, cct; DETR): a
keyword-only forward input (``forward(self, x, *, mask)``) is an input like the others, so its einops patterns
(``rearrange(mask, 'b j -> b 1 1 j')``) get the per-example pattern; a Sequential's layer given as a name bound before
it (FiLM's ``proj``) is known, so the Rearrange after it may move the batch axis; a module-level function whose
dimensions count the batch axis (``drop_path``'s ``x.shape[0]``, ``x.mean(1)``) is refused where one example would
reach it, which makes its caller a batched module where it can be one (silently wrong before). Each translation is
verified against PyTorch (forward and gradients, ``fwport verify``). A dimension held by a field ``__init__`` sets
negative (normalized_vit's ``L2Norm``: ``l2norm(t, dim=self.dim)``) counts from the end; a refusal names the
expression reading the input's sizes (look_vit's ``t.shape[1:]``), not a grid built from them."""
from __future__ import annotations

import pytest

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox", "einops")


KWONLY = '''
import torch
import torch.nn as nn
from einops import rearrange


class Attention(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, *, mask=None):
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), qkv)
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        if mask is not None:
            dots_mask = rearrange(mask, 'b i -> b 1 i 1') * rearrange(mask, 'b j -> b 1 1 j')
            dots = dots.masked_fill(~dots_mask, -1e9)
        attn = dots.softmax(dim=-1)
        out = rearrange(torch.matmul(attn, v), 'b h n d -> b n (h d)')
        return self.to_out(out)


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.attn = Attention(dim)
        self.plain = Attention(dim)
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        x = rearrange(x, 'b (n d) -> b n d', d=8)
        mask = x[..., 0] > -0.5
        x = self.attn(x, mask=mask) + x
        x = self.plain(x) + x
        return self.head(x.mean(dim=1))
'''


def test_a_keyword_only_input_gets_the_per_example_patterns():
    r = t2j(KWONLY)
    assert errors(r) == []
    assert "rearrange(mask, 'i -> 1 i 1') * rearrange(mask, 'j -> 1 1 j')" in r.output
    assert "def __call__(self, x, *, mask=None):" in r.output


def test_a_keyword_only_input_of_the_model_itself_is_per_example():
    # no caller in the file: the model's own keyword-only input holds the batch axis first, as x does
    r = t2j(KWONLY.split("\n\nclass Net")[0])
    assert errors(r) == []
    assert "rearrange(mask, 'i -> 1 i 1') * rearrange(mask, 'j -> 1 1 j')" in r.output


@needs_frameworks
def test_a_keyword_only_input_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, KWONLY, "Net", ["float64[3,40]"])


FILM = '''
import torch
import torch.nn as nn
from einops.layers.torch import Rearrange


class FiLM(nn.Module):
    def __init__(self, dim):
        super().__init__()
        proj = nn.Linear(dim, dim * 2)
        self.to_gamma_beta = nn.Sequential(
            proj,
            Rearrange('b (two d) -> two b 1 d', two=2)
        )

    def forward(self, tokens, cond):
        gamma, beta = self.to_gamma_beta(cond)
        return tokens * gamma + beta


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.emb = nn.Linear(3, dim)
        self.film = FiLM(dim)

    def forward(self, tokens, cond):
        return self.film(tokens, self.emb(cond)).sum(dim=1)
'''


def test_a_layer_named_before_its_sequential_lets_the_batch_axis_move():
    # vit-pytorch's FiLM: the Sequential's Linear is a local name (initialised in place afterwards); the Rearrange
    # after it moves the batch axis to dimension 1, which batch.py follows where the Sequential is called
    r = t2j(FILM)
    assert errors(r) == []
    assert "'(two d) -> two 1 d', two=2" in r.output
    alone = t2j(FILM.replace("        proj = nn.Linear(dim, dim * 2)\n", "").replace("proj,", "nn.Linear(dim, dim * 2),"))
    assert errors(alone) == [] and "'(two d) -> two 1 d', two=2" in alone.output  # as written inline


def test_a_name_bound_twice_is_no_known_layer():
    twice = FILM.replace("        proj = nn.Linear(dim, dim * 2)\n",
                         "        proj = nn.Linear(dim, dim * 2)\n        proj = nn.Linear(dim, dim * 2)\n")
    r = t2j(twice)
    assert any("Rearrange('b (two d) -> two b 1 d')" in f.message for f in errors(r)), r.findings


@needs_frameworks
def test_a_layer_named_before_its_sequential_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, FILM, "Net", ["float64[3,5,8]", "float64[3,3]"])


HELPER = '''
import torch
import torch.nn as nn


def drop_path(x, drop_prob: float = 0., training: bool = False):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = keep_prob + torch.rand(shape, dtype=x.dtype, device=x.device)
    random_tensor.floor_()
    return x.div(keep_prob) * random_tensor


def pooled(x):
    return x.mean(1) - x.sum(dim=-1, keepdim=True).mean(1)


def scaled(x):
    return pooled(x) * 2


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 3)
        ACT

    def forward(self, x):
        x = drop_path(self.fc(x), 0.0, self.training)
        return self.head(scaled(x))
'''


def test_a_function_written_for_the_batch_makes_its_caller_a_batched_module():
    # drop_path's x.shape[0] and pooled's x.mean(1) count the batch axis: per example they would take another axis
    # (silently wrong before); the module calling them takes the whole batch instead, as PyTorch's code does
    r = t2j(HELPER.replace("ACT", ""))
    assert errors(r) == []
    assert "batched module" in r.output and "jnp.mean(x, axis=1)" in r.output


def test_a_function_written_for_the_batch_is_an_error_where_its_caller_stays_per_example():
    r = t2j(HELPER.replace("ACT", "self.act = nn.Softmax(dim=1)"))  # (a layer a batched module does not hold)
    said = [f.message for f in errors(r)]
    assert any(m.startswith("drop_path() is a function of this file") and "x.shape[0]" in m for m in said), said
    assert any(m.startswith("scaled() is a function of this file") and "pooled(x)" in m for m in said), said
    assert "batched module" not in r.output


def test_a_function_counting_no_axis_is_called_as_written():
    r = t2j(HELPER.replace("ACT", "").replace("x.mean(1) - x.sum(dim=-1, keepdim=True).mean(1)", "x * 3")
            .replace("(x.shape[0],) + (1,) * (x.ndim - 1)", "x.shape[-1:]"))
    assert errors(r) == [] and "batched module" not in r.output


@needs_frameworks
def test_a_function_written_for_the_batch_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, HELPER.replace("ACT", ""), "Net", ["float64[3,5,8]"])


def test_a_dimension_given_as_a_parameter_counts_where_the_call_leaves_it_non_negative():
    r = t2j('''
import torch.nn as nn
import torch.nn.functional as F


def l2norm(t, dim=-1):
    return F.normalize(t, dim=dim, p=2)


def masked_mean(t, dim=1):
    return t.mean(dim=dim)


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.act = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.l(x)
        a = l2norm(x) + l2norm(x, -1) + masked_mean(x, dim=-1)
        b = l2norm(x, dim=0) + masked_mean(x)
        return a + b
''')
    said = [(f.message.split("()")[0], f.line) for f in errors(r)]
    assert said == [("l2norm", 22), ("masked_mean", 22)], r.findings


FIELD_DIM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def l2norm(t, dim=-1):
    return F.normalize(t, dim=dim, p=2)


class L2Norm(nn.Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, t):
        return l2norm(t, dim=self.dim)


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = L2Norm(NORM)
        self.act = nn.Softmax(dim=1)

    def forward(self, x):
        return self.act(self.norm(self.fc(x)))
'''


@pytest.mark.parametrize("given", ["", "dim=-1", "-1 if torch.cuda.is_available() else -2"])
def test_a_dimension_held_by_a_field_set_negative_in_init_counts_from_the_end(given):
    # normalized_vit's L2Norm: l2norm(t, dim=self.dim), self.dim = dim, every L2Norm(...) of the file leaving it
    # negative: the same axis per example (refused before, self.dim not being a literal)
    r = t2j(FIELD_DIM.replace("NORM", given))
    assert errors(r) == [], r.findings
    assert "return l2norm(t, dim=self.dim)" in r.output and "batched module" not in r.output


@pytest.mark.parametrize("given", ["dim=0", "1", "-1 if torch.cuda.is_available() else 0"])
def test_a_field_dimension_some_call_sets_non_negative_stays_refused(given):
    r = t2j(FIELD_DIM.replace("NORM", given))
    said = [f.message for f in errors(r)]
    assert any(m.startswith("l2norm() is a function of this file") for m in said), said


def test_a_field_set_again_outside_init_is_not_followed():
    r = t2j(FIELD_DIM.replace("NORM", "").replace(
        "        return l2norm(t, dim=self.dim)", "        self.dim = 0\n        return l2norm(t, dim=self.dim)"))
    assert any(f.message.startswith("l2norm() is a function of this file") for f in errors(r)), r.findings


@needs_frameworks
def test_a_dimension_held_by_a_negative_field_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, FIELD_DIM.replace("NORM", ""), "Net", ["float64[3,8]"])


POSEMB = '''
import torch
import torch.nn as nn


def posemb_sincos_2d(t, temperature=10000):
    SIZES
    y, x = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing='ij')
    omega = torch.arange(d // 4, device=device) / (d // 4 - 1)
    omega = temperature ** -omega
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    pos = torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)
    return pos.float()


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.act = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.fc(x)
        return self.act(x + posemb_sincos_2d(x).reshape(x.shape[-3:]))
'''


def test_a_function_refused_for_the_batch_names_the_expression_reading_it():
    # look_vit's posemb_sincos_2d: the batch axis is counted where t's sizes are read; y.flatten() and torch.cat are
    # of a grid built from sizes (and temperature), the same per example, and are not what the finding names
    r = t2j(POSEMB.replace("SIZES", "h, w, d, device = *t.shape[1:], t.device"))
    said = [f.message for f in errors(r) if f.message.startswith("posemb_sincos_2d() is a function of this file")]
    assert len(said) == 1 and "(t.shape[1:])" in said[0], [f.message for f in errors(r)]
    assert "flatten" not in said[0] and "torch.cat" not in said[0], said


@pytest.mark.parametrize("sizes, one", [
    ("_, h, w, d, device = *t.shape, t.device", "    h, w, d, device = *t.shape, t.device\n"),
    ("b, h, w, d = t.shape\n    device = t.device", "    h, w, d = t.shape\n    y, x = jnp.meshgrid("),
])
def test_a_function_reading_the_batch_size_from_its_input_is_written_for_one_example(sizes, one):
    # only forward calls it, with a batched tensor: its reading of the sizes drops the batch's, as a forward's
    # (tests/test_torch2jax_batch_file_functions.py); the forward's own reshape is refused for its own reason
    r = t2j(POSEMB.replace("SIZES", sizes))
    assert one in r.output
    assert not any(f.message.startswith("posemb_sincos_2d()") for f in errors(r)), r.findings


def test_a_function_reading_only_the_last_sizes_of_its_input_is_called_as_written():
    r = t2j(POSEMB.replace("SIZES", "h, w, d, device = *t.shape[-3:], t.device"))
    assert not any(f.message.startswith("posemb_sincos_2d()") for f in errors(r)), r.findings
