"""torch2jax: more translations with no error finding that failed at run time (task t2jsil2, vit-pytorch's cross_vit and
parallel_vit). ``nn.Linear(...) if c else nn.Identity()`` assigned to an attribute is a per-vector layer to the rank
analysis (both keep the rank, and the Identity mapped over tokens is still the identity), so a sequence reaching it
is mapped over; a lambda in ``__init__`` building a module class that draws its initial values
(``attn_block = lambda: Attention(...)``) becomes a local builder ``def`` taking ``*, key``, so the class takes the key
its callers give it (its constructor had none: ``got an unexpected keyword argument 'key'``). Each translation is
verified against PyTorch."""
from __future__ import annotations

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox")


PROJECTED = '''
import torch
import torch.nn as nn


class Proj(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.proj_in = nn.Linear(a, b) if a != b else nn.Identity()
        self.proj_out = nn.Identity() if a == b else nn.Linear(b, a)

    def forward(self, x):
        return self.proj_out(torch.tanh(self.proj_in(x)))


class Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.wide = Proj(dim, 6)
        self.same = Proj(dim, dim)

    def forward(self, x):
        b = x.shape[0]
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1)
        return self.same(self.wide(x))
'''


def test_a_linear_or_identity_given_tokens_is_mapped_over_them():
    r = t2j(PROJECTED)
    assert errors(r) == [], r.findings
    call = r.output.split("class Proj")[1].split("def __call__")[1]
    assert "self.proj_in(" not in call.replace("vmap(self.proj_in)", "").replace("(self.proj_in, ", ""), call
    assert "self.proj_out(" not in call.replace("vmap(self.proj_out)", "").replace("(self.proj_out, ", ""), call


@needs_frameworks
def test_a_linear_or_identity_given_tokens_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, PROJECTED, "Net", ["float64[3,5,4]"])


LAMBDA_BUILT = '''
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.tanh(self.fc(x))


class Stack(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        block = lambda: Block(dim)
        self.layers = nn.ModuleList([block() for _ in range(depth)])
        self.last = block()

    def forward(self, x):
        for layer in self.layers:
            x = layer(x) + x
        return self.last(x)


class Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.stack = Stack(dim, 2)

    def forward(self, x):
        return self.stack(x)
'''


def test_a_lambda_building_a_drawing_class_becomes_a_keyed_builder():
    r = t2j(LAMBDA_BUILT)
    assert errors(r) == [], r.findings
    init = r.output.split("class Stack")[1].split("def __call__")[0]
    assert "def __init__(self, dim, depth, *, key):" in init, init
    assert "def block(*, key):" in init and "return Block(dim, key=key)" in init, init
    assert "lambda" not in init, init
    assert "Stack(dim, 2, key=key)" in r.output


@needs_frameworks
def test_a_lambda_building_a_drawing_class_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, LAMBDA_BUILT, "Net", ["float64[3,4]"])


@needs("torch", "jax")
def test_torch_pad_crops_at_a_negative_size_as_pytorch_does():
    import jax.numpy as jnp
    import numpy as np
    import torch
    import torch.nn.functional as F

    from fwport.packs.torch2jax.layers import HELPERS
    scope = {"jnp": jnp}
    exec(HELPERS["torch_pad"], scope)
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    for mode in ("constant", "reflect", "replicate", "circular"):
        for pad in ((-1, 2, 1, -1), (-2, 0, 0, 0), (1, -1, 0, 0), (0, 0, -1, -1), (2, 1, -3, 1)):
            want = F.pad(torch.from_numpy(x), pad, mode=mode).numpy()
            got = np.asarray(scope["torch_pad"](jnp.asarray(x), pad, mode=mode))
            assert got.shape == want.shape and np.array_equal(got, want), (mode, pad, got.shape, want.shape)
    want = F.pad(torch.from_numpy(x), (1, -2), value=7.0).numpy()
    assert np.array_equal(np.asarray(scope["torch_pad"](jnp.asarray(x), (1, -2), value=7.0)), want)


SHIFTED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.shifts = ((1, -1, 0, 0), (-1, 1, 0, 0), (0, 0, 1, -1), (0, 0, -1, 1))

    def forward(self, x):
        shifted = list(map(lambda shift: F.pad(x, shift), self.shifts))
        return torch.cat((x, *shifted), dim=1)
'''


@needs_frameworks
def test_a_shift_by_negative_pads_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, SHIFTED, "Net", ["float64[2,3,4,5]"])


TEMPERATURE = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.temperature = nn.Parameter(torch.log(torch.tensor(dim ** -0.5)))
        self.gate = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return x * self.temperature.exp() + self.gate.sigmoid() * x.tanh()
'''


def test_an_elementwise_method_of_a_parameter_is_the_jnp_function():
    r = t2j(TEMPERATURE)
    assert errors(r) == [], r.findings
    assert "jnp.exp(self.temperature)" in r.output and "jax.nn.sigmoid(self.gate)" in r.output, r.output
    assert ".exp()" not in r.output and ".sigmoid()" not in r.output


@needs_frameworks
def test_an_elementwise_method_of_a_parameter_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, TEMPERATURE, "Net", ["float64[3,4]"])


PARALLEL = '''
import torch
import torch.nn as nn


class Parallel(nn.Module):
    def __init__(self, *fns):
        super().__init__()
        self.fns = nn.ModuleList(fns)

    def forward(self, x):
        return sum([fn(x) for fn in self.fns])


class FeedForward(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 6), nn.GELU(), nn.Linear(6, dim))
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        return self.out(self.net(x))


class Net(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        ff = lambda: FeedForward(dim)
        self.ffs = Parallel(*[ff() for _ in range(2)])

    def forward(self, x):
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        return self.ffs(x) + x
'''


def test_a_class_built_by_another_whose_calls_are_not_followed_takes_any_rank():
    r = t2j(PARALLEL)
    assert errors(r) == [], r.findings
    ff = r.output.split("class FeedForward")[1].split("class Net")[0]
    assert "PerVector(eqx.nn.LayerNorm(dim))" in ff and 'jnp.vectorize(self.out, signature="(n)->(m)")' in ff, ff


@needs_frameworks
def test_a_class_built_by_another_whose_calls_are_not_followed_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, PARALLEL, "Net", ["float64[3,5,4]"])
