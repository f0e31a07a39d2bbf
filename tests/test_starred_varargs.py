"""A call that unpacks an iterable into the source's ``*args`` (``nn.Sequential(*layers)``, ``tf.einsum(eq, *xs)``)
is bound as Python binds it: ``*x`` after every named positional can only feed ``*args``. A rule emitted as a plain
call keeps the star; a call transform gets it only when it says it handles one (``call_transform(name,
starred=True)``), else the call is refused on its line as before. Both translations are run and compared with the
source framework."""
from __future__ import annotations

import json
import textwrap

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs
from runners import python, verify_torch2jax

needs_frameworks = needs("torch", "jax", "equinox", "tensorflow")

SEQ = '''
import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        layers = [nn.Linear(4, 4) for _ in range(n)]
        self.body = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Tanh(), *[nn.Linear(4, 4), nn.ReLU()], nn.Linear(4, 2))

    def forward(self, x):
        return self.head(self.body(x))
'''

EINSUM = '''
import tensorflow as tf


def contract(eq, xs):
    return tf.einsum(eq, *xs)
'''


def translate(src, direction):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", direction)


def verified(tmp_path, src: str, model: str, shape: str) -> dict:
    """``fwport verify`` (forward and gradients, float64) of ``src`` against its torch2jax translation."""
    (tmp_path / "orig.py").write_text(textwrap.dedent(src).lstrip("\n"))
    (tmp_path / "jax_out.py").write_text(translate(src, "torch2jax").output)
    return verify_torch2jax(tmp_path / "orig.py", tmp_path / "jax_out.py", model, [shape])


def test_sequential_of_unpacked_layers_becomes_an_equinox_sequential_of_them():
    r = translate(SEQ, "torch2jax")
    assert not errors(r), r.findings
    assert "self.body = eqx.nn.Sequential(layers)" in r.output  # Sequential takes any iterable of layers
    assert "self.head = eqx.nn.Sequential([eqx.nn.Lambda(jnp.tanh), *[" in r.output


@needs_frameworks
def test_sequential_of_unpacked_layers_verifies_against_pytorch(tmp_path):
    cert = verified(tmp_path, SEQ, "Stack", "float32[5,4]")
    assert cert["verdict"] == "pass", str(cert)[:3000]
    assert cert["results"]["outputs"] and cert["results"]["gradients"]


def test_plain_rule_keeps_the_star():
    r = translate(EINSUM, "tf2torch")
    assert not errors(r), r.findings
    assert "torch.einsum(eq, *xs)" in r.output


RUN = '''
import json, sys
import numpy as np
ns = {}
exec(open(sys.argv[1]).read(), ns)
rng = np.random.default_rng(0)
a, b, c = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4,))
mod = __import__(sys.argv[2])
xs = [mod.constant(v) for v in (a, b, c)] if sys.argv[2] == "tensorflow" else [mod.tensor(v) for v in (a, b, c)]
print(json.dumps(np.asarray(ns["contract"]("ij,jk,k->i", xs)).tolist()))
'''


@needs_frameworks
def test_unpacked_einsum_operands_compute_what_tensorflow_does(tmp_path):
    orig, trans = tmp_path / "orig.py", tmp_path / "trans.py"
    orig.write_text(textwrap.dedent(EINSUM))
    trans.write_text(translate(EINSUM, "tf2torch").output)
    got = {}
    for path, fw in ((orig, "tensorflow"), (trans, "torch")):
        p = python("-c", RUN, path, fw, side="keras" if fw == "tensorflow" else "torch", timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        got[fw] = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(got["torch"]) == 2
    assert got["torch"] == pytest.approx(got["tensorflow"], rel=1e-6)


@pytest.mark.parametrize("src, direction, api", [
    # a call transform that does not handle `*x`: refused on its line, left as written
    ("import torch\n\n\ndef f(shape):\n    return torch.zeros(*shape)\n", "torch2jax", "torch.zeros"),
    # `*x` before the named positionals are all given can feed any of them: not bound
    ("import tensorflow as tf\n\n\ndef f(xs):\n    return tf.einsum(*xs)\n", "tf2torch", "tensorflow.einsum"),
    ("import torch\nfrom torch import nn\n\n\ndef f(kw):\n    return nn.Sequential(**kw)\n", "torch2jax",
     "torch.nn.Sequential"),
])
def test_unpacking_that_cannot_be_bound_is_refused_on_its_line(src, direction, api):
    r = translate(src, direction)
    errs = errors(r)
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "return" in text)
    assert [(e.line, e.code) for e in errs] == [(line, "unsupported-construct")], r.findings
    assert f"*args/**kwargs in a call to {api} cannot be bound statically" in errs[0].message
    assert src.splitlines()[line - 1] in r.output.splitlines()  # the call left as written (under its marker)


NESTED = '''
import torch
from torch import nn


class G(nn.Module):
    def __init__(self, width=4):
        super().__init__()

        def block(i, o, normalize=True):
            layers = [nn.Linear(i, o)]
            if normalize:
                layers.append(nn.LayerNorm(o))
            layers.append(nn.ReLU())
            return layers

        self.model = nn.Sequential(*block(width + 1, 8, normalize=False), *block(2 * 4, 3))
        {extra}

    def forward(self, x):
        return self.model(x)
'''


def test_unrolled_helper_takes_arithmetic_arguments_and_each_layer_gets_a_key():
    r = translate(NESTED.replace("{extra}", ""), "torch2jax")
    assert not errors(r), r.findings
    out = r.output
    assert "def block" not in out  # written out where the Sequential spreads it, then removed
    assert "eqx.nn.Linear(width + 1, 8, key=key1)" in out and "eqx.nn.Linear(2 * 4, 3, key=key2)" in out


@needs_frameworks
def test_unrolled_helper_verifies_against_pytorch(tmp_path):
    cert = verified(tmp_path, NESTED.replace("{extra}", ""), "G", "float32[3,5]")
    assert cert["verdict"] == "pass", str(cert)[:3000]


def test_a_function_inside_init_that_is_still_called_takes_a_key():
    # block(...) called on its own (not spread into a Sequential): it takes `*, key`, the call a split of its own
    # (a builder read otherwise than as a call keeps its error: tests/test_torch2jax_local_builders.py)
    r = translate(NESTED.replace("{extra}", "self.extra = nn.Sequential(*block(width, 2)[:1])"), "torch2jax")
    assert not errors(r), r.findings
    assert "def block(i, o, normalize=True, *, key):" in r.output
    assert "layers = [eqx.nn.Linear(i, o, key=key)]" in r.output
    assert "self.extra = eqx.nn.Sequential(block(width, 2, key=key3)[:1])" in r.output


SPREAD = '''
import torch.nn as nn


def block(i, o, normalize=True):
    layers = [nn.Linear(i, o)]
    if normalize:
        layers.append(nn.LayerNorm(o))
    layers += [nn.Tanh()]
    return layers


class Net(nn.Module):
    def __init__(self, flag=True):
        super().__init__()
        self.b = nn.Sequential(*block(4, 8, normalize=flag), nn.Linear(8, 3), *block(3, 2))

    def forward(self, x):
        return self.b(x)
'''


@needs_frameworks
def test_spread_of_a_keyed_helper_with_a_runtime_condition_verifies_against_pytorch(tmp_path):
    r = translate(SPREAD, "torch2jax")
    assert not errors(r), r.findings
    assert "*block(4, 8, normalize=flag, key=" in r.output  # the flag is known only when the model is built
    cert = verified(tmp_path, SPREAD, "Net", "float32[3,4]")
    assert cert["verdict"] == "pass", str(cert)[:3000]
