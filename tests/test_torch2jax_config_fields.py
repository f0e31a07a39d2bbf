"""A configuration object a module holds (nanoGPT's ``self.config = config``, a ``@dataclass``) in torch2jax: a static
field of the Equinox module, the dataclass made frozen (hashable) so that ``eqx.filter_jit`` can key its cache on it;
scalars read from it are static too. An assignment to a field of the frozen configuration is an error, a dataclass
that sets its own fields is left a leaf with a warning, and a parameter read otherwise stays a plain field."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from helpers import by, error_texts, needs, t2j
from runners import both_sides

NET = """
import torch
import torch.nn as nn
from dataclasses import dataclass


@dataclass
class NetConfig:
    n_in: int = 4
    n_hidden: int = 8
    n_out: int = 3
    scale: float = 0.5
    act: str = "tanh"


class Net(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.n_out = config.n_out
        self.fc1 = nn.Linear(config.n_in, config.n_hidden)
        self.fc2 = nn.Linear(config.n_hidden, config.n_out + 1)

    def forward(self, x):
        h = self.fc1(x)
        h = torch.tanh(h) if self.config.act == "tanh" else torch.relu(h)
        return self.fc2(h)[:, :self.n_out] * self.config.scale
"""


def test_a_held_configuration_is_a_static_field_of_a_frozen_dataclass():
    r = t2j(NET)
    assert not error_texts(r), error_texts(r)
    assert "@dataclass(frozen=True)\nclass NetConfig:" in r.output
    assert "    config: NetConfig = eqx.field(static=True)\n" in r.output
    assert "    n_out: int = eqx.field(static=True)\n" in r.output
    assert any(f.code == "idiom-replaced" and "frozen=True" in f.message for f in by(r, Severity.INFO)), r.findings


@needs("torch", "equinox")
@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_a_module_holding_a_configuration_runs_under_filter_jit_as_pytorch(tmp_path, act):
    """The translated model under eqx.filter_jit (forward) and eqx.filter_grad (inside filter_jit) gives PyTorch's
    output and gradient, with PyTorch's weights; the configuration's `act` picks the branch as in PyTorch."""
    body = f"""
    import os
    cfg = ns["NetConfig"](n_hidden=6, scale=0.25, act="{act}")
    x = np.random.default_rng(0).standard_normal((5, 4))
    weights = os.path.join(os.path.dirname(sys.argv[3]), "weights.npz")
    names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    if side == "torch":
        torch.set_default_dtype(torch.float64)  # as JAX's side computes
        torch.manual_seed(0)
        model = ns["Net"](cfg)
        np.savez(weights, **{{k: v.detach().numpy() for k, v in model.state_dict().items()}})
        out = model(conv(x))
        out.sum().backward()
        arrays = [out.detach().numpy(), model.fc1.weight.grad.numpy(), model.fc2.bias.grad.numpy()]
    else:
        import equinox as eqx
        w = np.load(weights)
        model = ns["Net"](cfg, key=jax.random.key(1))
        model = eqx.tree_at(lambda m: [m.fc1.weight, m.fc1.bias, m.fc2.weight, m.fc2.bias], model,
                            [conv(w[k]) for k in names])
        out = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(model, conv(x))
        grads = eqx.filter_jit(eqx.filter_grad(lambda m, x: jax.vmap(m)(x).sum()))(model, conv(x))
        assert grads.config == cfg and hash(grads.config) == hash(cfg)  # static: carried, not differentiated
        arrays = [np.asarray(out), np.asarray(grads.fc1.weight), np.asarray(grads.fc2.bias)]
    np.savez(sys.argv[3], *arrays)
    """
    t, j = both_sides(tmp_path, NET, body)
    assert t[0].shape == (5, 3)
    for a, b in zip(t, j, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-8)


def test_assigning_a_field_of_the_frozen_configuration_outside_a_method_is_an_error():
    """A frozen dataclass refuses an assignment at run time: in __init__, or a script's `cfg.x = v` on a
    configuration it built, the translation says so at the assignment."""
    src = textwrap.dedent(NET).lstrip("\n").replace(
        "        self.n_out = config.n_out\n", "        self.n_out = config.n_out\n        self.config.scale = 2.0\n")
    src += textwrap.dedent("""

    def build():
        cfg = NetConfig()
        cfg.n_hidden = 5
        return Net(cfg)
    """)
    r = t2j(src)
    lines = src.splitlines()
    at = [lines.index("        self.config.scale = 2.0") + 1, lines.index("    cfg.n_hidden = 5") + 1]
    errs = error_texts(r)
    assert [e.split(" ")[0] for e in errs] == [f"L{n}" for n in at], errs
    assert all("frozen" in e and "dataclasses.replace" in e for e in errs), errs


RESCALE = NET + """
    def rescale(self, scale):
        self.config.scale = scale


def rescaled():
    model = Net(NetConfig())
    model.rescale(0.125)
    return model
"""


def test_a_method_assigning_a_configuration_field_returns_a_new_model(tmp_path):
    """nanoGPT's crop_block_size sets `self.config.block_size`: model surgery, the method returning a new model
    whose configuration is a copy (dataclasses.replace) with the new value; the configuration is then a leaf (what
    eqx.tree_at replaces), hashable for eqx.filter_jit. Under JAX alone: the new model computes with the new scale,
    the old one with its own."""
    from runners import python
    r = t2j(RESCALE)
    assert not error_texts(r), error_texts(r)
    assert "    config: NetConfig\n" in r.output and "@dataclass(frozen=True)" in r.output
    assert "model = eqx.tree_at(lambda m: m.config, model, dataclasses.replace(model.config, scale=scale))" in r.output
    assert "    model = model.rescale(0.125)\n" in r.output
    assert any(f.code == "idiom-replaced" and "dataclasses.replace" in f.message for f in by(r, Severity.WARNING))
    (tmp_path / "m_jax.py").write_text(r.output)
    check = """import sys, jax, jax.numpy as jnp, equinox as eqx
sys.modules["torch"] = None
import m_jax
old = m_jax.Net(m_jax.NetConfig(), key=jax.random.key(0))
new = old.rescale(0.125)
assert (old.config.scale, new.config.scale) == (0.5, 0.125)
x = jax.random.normal(jax.random.key(1), (3, 4))
run = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))
assert jnp.allclose(run(new, x) * 4, run(old, x), rtol=1e-6)
assert m_jax.rescaled().config.scale == 0.125
print("ok")
"""
    p = python("-c", check, side="torch2jax-jax", cwd=tmp_path, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_a_dataclass_setting_its_own_fields_stays_a_leaf_with_a_warning():
    src = NET.replace('    act: str = "tanh"\n', '    act: str = "tanh"\n\n    def __post_init__(self):\n'
                      '        self.n_hidden = max(self.n_hidden, 1)\n')
    r = t2j(src)
    assert "@dataclass\nclass NetConfig:" in r.output
    assert "    config: object\n" in r.output
    assert any("__post_init__" in f.message and "filter_jit" in f.message for f in by(r, Severity.WARNING)), r.findings


@pytest.mark.parametrize("change", [
    ("self.config.act ==", "self.config.weight.act =="),  # read for an attribute the dataclass has not
    ("self.fc1(x)", "self.config(self.fc1(x))"),  # called: a module, not a configuration
    ("        self.config = config\n", "        config = make(config)\n        self.config = config\n"),  # rebound
])
def test_a_parameter_read_otherwise_is_not_a_static_configuration(change):
    r = t2j(NET.replace(*change))
    assert "config: NetConfig" not in r.output and "frozen=True" not in r.output


def test_an_annotated_configuration_parameter_is_recognised():
    """The annotation names the class (the reads alone would not: `width` is no field of it)."""
    src = NET.replace("def __init__(self, config):", "def __init__(self, config: NetConfig, width=2):")
    r = t2j(src)
    assert "    config: NetConfig = eqx.field(static=True)\n" in r.output
    assert "@dataclass(frozen=True)" in r.output


SETS = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, skip=(1,)):
        super().__init__()
        self.skip = set(skip)
        self.fc = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for i, f in enumerate(self.fc):
            if i not in self.skip:
                x = torch.tanh(f(x))
        return x
"""


@needs("torch", "equinox")
def test_a_set_nothing_changes_is_a_static_frozenset_and_runs_under_filter_jit(tmp_path):
    """A set is no pytree node (a leaf eqx.filter_jit cannot hash): one nothing changes becomes a static frozenset
    and the model gives PyTorch's output under eqx.filter_jit; one a method changes stays, with a warning."""
    r = t2j(SETS)
    assert "    skip: frozenset = eqx.field(static=True)\n" in r.output
    assert "        self.skip = frozenset(skip)\n" in r.output
    changed = SETS.replace("        self.fc =", "        self.seen = set()\n        self.fc =") + (
        "\n    def remember(self, n):\n        self.seen.add(n)\n")
    r = t2j(changed)
    assert "        self.seen = set()\n" in r.output and "    seen: object\n" in r.output
    assert any("self.seen" in f.message and "filter_jit" in f.message for f in by(r, Severity.WARNING)), r.findings
    body = """
    import os
    x = np.random.default_rng(0).standard_normal((5, 4))
    weights = os.path.join(os.path.dirname(sys.argv[3]), "weights.npz")
    if side == "torch":
        torch.set_default_dtype(torch.float64)
        torch.manual_seed(0)
        model = ns["Net"](skip=(0, 2))
        np.savez(weights, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
        out = model(conv(x)).detach().numpy()
    else:
        import equinox as eqx
        w = np.load(weights)
        model = ns["Net"](skip=(0, 2), key=jax.random.key(1))
        model = eqx.tree_at(lambda m: [m.fc[1].weight, m.fc[1].bias], model, [conv(w["fc.1.weight"]), conv(w["fc.1.bias"])])
        out = np.asarray(eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(model, conv(x)))
    np.savez(sys.argv[3], out)
    """
    t, j = both_sides(tmp_path, SETS, body)
    np.testing.assert_allclose(j[0], t[0], rtol=1e-6, atol=1e-8)
