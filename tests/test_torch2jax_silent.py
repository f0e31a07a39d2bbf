"""torch2jax: translations with no error finding that failed at run time (task t2jsil). A module of the file holding
another module class of the file whose forward threads a BatchNorm state takes and passes that state itself (it was
called without it: ``__call__() missing ... 'state'``, vit-pytorch's cvt.py); a per-vector layer (Linear, LayerNorm)
given the user's input, whose per-example rank nothing in the file says, is called for one vector with a warning
saying so, once per forward; a convolution's or pooling's result has the rank Equinox's layer gives (one example),
which later per-vector layers read. Each translation that runs is verified against PyTorch."""
from __future__ import annotations

from helpers import by, error_findings as errors, needs, t2j
from runners import verify_model

from fwport.core.finding import Severity

needs_frameworks = needs("torch", "jax", "equinox")


NESTED_STATE = '''
import torch
import torch.nn as nn


class DepthWise(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(dim_in, dim_in, 3, padding=1, groups=dim_in),
            nn.BatchNorm2d(dim_in),
            nn.Conv2d(dim_in, dim_out, 1),
        )

    def forward(self, x):
        return self.net(x)


class Attn(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.to_q = DepthWise(dim, dim)
        self.to_kv = DepthWise(dim, dim * 2)

    def forward(self, x):
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=1))
        return q * k + v
'''


def test_a_module_holding_a_stateful_class_of_the_file_threads_the_state():
    r = t2j(NESTED_STATE)
    assert errors(r) == [], r.findings
    call = r.output.split("class Attn")[1]
    assert "def __call__(self, x, state):" in call
    assert "self.to_q(x, state)" in call and "self.to_kv(x, state)" in call
    assert call.rstrip().endswith("return q * k + v, state")


@needs_frameworks
def test_a_module_holding_a_stateful_class_of_the_file_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, NESTED_STATE, "Attn", ["float32[3,4,6,6]"], dtype="float32")


MLP = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 5)
        self.norm = nn.LayerNorm(5)
        self.out = nn.Linear(5, 2)

    def forward(self, x):
        y = self.norm(torch.tanh(self.proj(x)))
        return self.out(y)
'''


def test_a_per_vector_layer_given_the_users_input_of_unknown_rank_is_warned_once():
    r = t2j(MLP)
    assert errors(r) == [], r.findings
    warned = [f for f in by(r, Severity.WARNING) if f.code == "batch-axis"]
    assert [f.line for f in warned] == [13], warned  # the first such call of the forward, not every layer after it
    assert "one vector per example" in warned[0].message and "jnp.vectorize(self.proj" in warned[0].message
    assert "self.proj(x)" in r.output  # called as written: one vector per example


@needs_frameworks
def test_a_per_vector_layer_given_the_users_vector_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, MLP, "Net", ["float64[3,4]"])


POOLED = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.LayerNorm(2), nn.Linear(2, 3))

    def forward(self, x):
        return self.head(self.body(x))
'''


def test_a_per_vector_layer_after_a_pooling_of_unknown_input_is_mapped_over_the_feature_map():
    r = t2j(POOLED)
    assert errors(r) == [] and not [f for f in by(r, Severity.WARNING) if f.code == "batch-axis"], r.findings
    assert "PerVector(eqx.nn.LayerNorm(2))" in r.output and "PerVector(eqx.nn.Linear(2, 3" in r.output


@needs_frameworks
def test_a_per_vector_layer_after_a_pooling_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, POOLED, "Net", ["float64[2,3,6,6]"])


TOKENS = '''
import torch
import torch.nn as nn


def table(n, dim, dtype=torch.float32):
    pe = torch.arange(n * dim).reshape(n, dim) / (n * dim)
    return pe.type(dtype)


class Net(nn.Module):
    def __init__(self, n=5, dim=4, heads=2):
        super().__init__()
        self.heads = heads
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, n + 1, dim))
        self.register_buffer("fixed", table(n + 1, dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, _, h = *x.shape, self.heads
        cls_tokens = self.cls_token.expand(b, -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        x += self.pos_embedding[:, :(n + 1)]
        x = x + self.fixed
        return self.proj(x).reshape(b, n + 1, h, -1).sum(dim=-1)
'''


def test_a_vit_style_forward_is_written_for_one_example():
    r = t2j(TOKENS)
    assert errors(r) == [], r.findings
    assert "return pe.astype(dtype)" in r.output  # x.type(dtype) of a name holding a dtype: a cast
    assert "n, _, h = *x.shape, self.heads" in r.output  # the batch size's name goes with the batch axis
    assert "x += self.pos_embedding[0, :(n + 1)]" in r.output  # a parameter built (1, n, d): its size-1 axis indexed away


@needs_frameworks
def test_a_vit_style_forward_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, TOKENS, "Net", ["float64[3,5,4]"])


MOVED_CAST = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.pe = nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        device = x.device
        return x + self.pe.to(device, dtype=x.dtype)
'''


def test_a_move_with_a_cast_is_the_cast_alone():
    r = t2j(MOVED_CAST)
    assert errors(r) == [], r.findings
    assert "return x + self.pe.astype(x.dtype)" in r.output  # (left as written: a jax array has no .to)
    assert "device" not in r.output.split("def __call__")[1]


@needs_frameworks
def test_a_move_with_a_cast_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, MOVED_CAST, "Net", ["float64[2,3,4]"])
