"""A configuration object of a type the file does not define that a module holds (``self.config = config``, an
argparse.Namespace or SimpleNamespace) in torch2jax. Held whole it would be a leaf of the Equinox module that
``eqx.filter_jit`` cannot hash ("unhashable type"). Read for plain attributes only, each attribute read is copied into
a field of its own (static where its type is known: an ``add_argument`` of the file, a condition, a comparison with a
string, arithmetic with an integer); read otherwise, or annotated with a class of another file, a warning says it must
be hashable."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from helpers import by, error_texts, needs, t2j
from runners import both_sides

NET = """
import argparse

import torch
import torch.nn as nn


def parse(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--d_in", type=int, default=4)
    parser.add_argument("--d_hidden", type=int, default=6)
    parser.add_argument("--act", default="tanh")
    parser.add_argument("--residual", action="store_true")
    parser.add_argument("--scale", type=float, default=0.5)
    return parser.parse_args(argv)


class Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.fc = nn.Linear(config.d_in, config.d_hidden)

    def forward(self, x):
        h = self.fc(x)
        return torch.tanh(h) if self.config.act == "tanh" else torch.relu(h)


class Net(nn.Module):
    def __init__(self, config, n_out):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.residual = nn.Linear(config.d_hidden, config.d_hidden)
        self.out = nn.Linear(config.d_hidden, n_out)

    def forward(self, x):
        h = self.encoder(x)
        if self.config.residual:
            h = h + self.residual(h)
        return self.out(h)[:, :self.config.d_hidden - 3] * self.config.scale
"""


def test_a_held_namespace_is_a_field_per_attribute_read():
    r = t2j(NET)
    assert not error_texts(r), error_texts(r)
    assert "    config: " not in r.output and "self.config." not in r.output
    for field in ("act: str", "residual: bool", "d_hidden: int", "scale: float"):  # (Encoder's, then Net's)
        name, kind = field.split(": ")
        assert f"    {field} = eqx.field(static=True)\n" in r.output \
            or f"    config_{name}: {kind} = eqx.field(static=True)\n" in r.output, (field, r.output)
    # `residual` is a layer of Net: the flag read of the configuration is config_residual
    assert "        self.config_residual = config.residual\n" in r.output
    assert "        if self.config_residual:\n            h = h + self.residual(h)\n" in r.output
    assert "torch.tanh(h) if self.act == \"tanh\"" in r.output.replace("jnp.tanh", "torch.tanh")
    assert any(f.code == "idiom-replaced" and "argparse.Namespace" in f.message for f in by(r, Severity.INFO))


def test_a_parameter_annotated_argparse_namespace_is_copied_too():
    r = t2j(NET.replace("def __init__(self, config, n_out):", "def __init__(self, config: argparse.Namespace, n_out):"))
    assert "    config_residual: bool = eqx.field(static=True)\n" in r.output and "self.config." not in r.output
    assert not any("hashable" in f.message for f in by(r, Severity.WARNING)), r.findings


def test_a_type_the_file_does_not_tell_leaves_a_plain_field():
    """Without the add_argument lines `scale` (multiplying a tensor) may be anything: a plain field, a Python value
    beside the arrays (eqx.filter_jit hashes it; a list would be a pytree node), not a static one."""
    src = NET.replace('    parser.add_argument("--scale", type=float, default=0.5)\n', "")
    r = t2j(src)
    assert "    scale: object\n" in r.output and "        self.scale = config.scale\n" in r.output, r.output


@needs("torch", "equinox")
@pytest.mark.parametrize("argv", [[], ["--act", "relu", "--residual"]])
def test_a_module_holding_a_namespace_runs_under_filter_jit_as_pytorch(tmp_path, argv):
    """The translated model, built from the argparse.Namespace the file parses, under eqx.filter_jit (forward) and
    eqx.filter_grad (inside filter_jit) gives PyTorch's output and gradients with PyTorch's weights; the flags pick
    the branches as in PyTorch."""
    body = f"""
    import os
    config = ns["parse"]({argv!r})
    x = np.random.default_rng(0).standard_normal((5, 4))
    weights = os.path.join(os.path.dirname(sys.argv[3]), "weights.npz")
    names = ["encoder.fc.weight", "encoder.fc.bias", "residual.weight", "residual.bias", "out.weight", "out.bias"]
    if side == "torch":
        torch.set_default_dtype(torch.float64)  # as JAX's side computes
        torch.manual_seed(0)
        model = ns["Net"](config, 5)
        np.savez(weights, **{{k: v.detach().numpy() for k, v in model.state_dict().items()}})
        out = model(conv(x))
        out.square().sum().backward()
        arrays = [out.detach().numpy(), model.encoder.fc.weight.grad.numpy(), model.out.weight.grad.numpy()]
    else:
        import equinox as eqx
        w = np.load(weights)
        model = ns["Net"](config, 5, key=jax.random.key(1))
        model = eqx.tree_at(lambda m: [m.encoder.fc.weight, m.encoder.fc.bias, m.residual.weight, m.residual.bias,
                                       m.out.weight, m.out.bias], model, [conv(w[k]) for k in names])
        out = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(model, conv(x))
        grads = eqx.filter_jit(eqx.filter_grad(lambda m, x: jnp.square(jax.vmap(m)(x)).sum()))(model, conv(x))
        arrays = [np.asarray(out), np.asarray(grads.encoder.fc.weight), np.asarray(grads.out.weight)]
    np.savez(sys.argv[3], *arrays)
    """
    t, j = both_sides(tmp_path, NET, body)
    assert t[0].shape == (5, 3)
    for a, b in zip(t, j, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-8)


IMPORTED = """
import torch
import torch.nn as nn

from myproject.configs import ModelConfig


class Net(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.fc = nn.Linear(config.d_in, config.d_out)

    def forward(self, x):
        return self.fc(x) * self.config.scale
"""


@pytest.mark.parametrize("relative", [False, True])
def test_a_configuration_of_another_file_is_static_with_a_warning_at_its_line(relative):
    src = IMPORTED.replace("from myproject.configs", "from .configs") if relative else IMPORTED
    r = t2j(src)
    line = textwrap.dedent(src).lstrip("\n").splitlines().index("        self.config = config") + 1
    warnings = [f for f in by(r, Severity.WARNING) if "ModelConfig" in f.message]
    assert [f.line for f in warnings] == [line], r.findings
    assert "hashable" in warnings[0].message and "frozen=True" in warnings[0].message
    assert "    config: ModelConfig = eqx.field(static=True)\n" in r.output


@pytest.mark.parametrize("change", [
    ("* self.config.scale", "* self.config.model.scale"),  # an attribute of an attribute: perhaps another object
    ("return self.out(h)", "return self.out(h, self.config)"),  # passed whole
])
def test_a_namespace_read_otherwise_stays_with_a_warning(change):
    src = NET.replace(*change)
    r = t2j(src)
    line = textwrap.dedent(src).lstrip("\n").splitlines().index("        self.config = config", 30) + 1
    warnings = [f for f in by(r, Severity.WARNING) if "eqx.filter_jit must hash" in f.message]
    assert [f.line for f in warnings] == [line], r.findings
    assert "self.config_residual" not in r.output


def test_a_held_layer_or_tensor_is_no_configuration():
    src = """
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, block, table):
            super().__init__()
            self.block = block
            self.table = table
            self.width = table.shape[1]

        def forward(self, x):
            return self.block(x) + self.table.weight[0]
    """
    r = t2j(src)
    assert not any("filter_jit" in f.message for f in r.findings), r.findings
    assert "self.block = block" in r.output and "self.table = table" in r.output
