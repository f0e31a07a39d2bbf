"""A PyTorch layer used as a whole model outside any module class (``model = nn.Linear(1, 1)`` in a regression
script): its construction gets a key (jax.random.key(0), or a split of the root key where the script draws) and its
calls go over the batch with jax.vmap, as for an instance of a module class; written before a draw, the root key is
made above it. A Sequential of layers there is an error saying what to write (each layer needs its own key).
Checked by running the translation with torch unimportable and comparing with PyTorch given the same weights."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import torch_and_jax

SCRIPT = '''
import torch
from torch import nn

model = nn.Linear(3, 3)
x = torch.linspace(-1.0, 1.0, 9).reshape(3, 3)
y = model(x)
'''

DRIVER = """
W = np.arange(9.0).reshape(3, 3) / 10 - 0.3
b = np.array([0.1, -0.2, 0.3])
if side == "torch":
    with torch.no_grad():
        ns["model"].weight.copy_(torch.tensor(W)); ns["model"].bias.copy_(torch.tensor(b))
    out = ns["model"](ns["x"]).detach().numpy()
else:
    m = eqx.tree_at(lambda m: (m.weight, m.bias), ns["model"], (jnp.asarray(W), jnp.asarray(b)))
    out = np.asarray(jax.vmap(m)(ns["x"]))
    assert ns["y"].shape == (3, 3)
np.save(OUT, out)
"""


def test_a_layer_used_as_a_model_gets_a_key_and_is_called_per_example(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    r = translate_source(SCRIPT, "script.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "model = eqx.nn.Linear(3, 3, key=jax.random.key(0))" in r.output, r.output
    assert "y = jax.vmap(model)(x)" in r.output, r.output
    # a square input: without the vmap, Equinox's Linear would compute W @ x, silently not PyTorch's x @ W.T
    expected, got = torch_and_jax(tmp_path, SCRIPT.replace("torch.float", "float"), r.output, DRIVER)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_a_layer_built_before_a_draw_takes_a_split_of_the_root_key_made_above_it():
    src = "import torch\nfrom torch import nn\n\nmodel = nn.Linear(3, 2)\nx = torch.randn(4, 3)\ny = model(x)\n"
    out = translate_source(src, "script.py", "torch2jax").output
    lines = [ln.split("  #")[0] for ln in out.splitlines() if ln and not ln.startswith(("import", "from"))]
    assert lines == ["key = jax.random.key(0)", "key, subkey = jax.random.split(key)",
                     "model = eqx.nn.Linear(3, 2, key=subkey)", "key, subkey = jax.random.split(key)",
                     "x = jax.random.normal(subkey, (4, 3))", "y = jax.vmap(model)(x)"], out


def test_a_sequential_of_layers_outside_a_class_takes_a_key_per_drawing_layer():
    """yunjey's GAN: `D = nn.Sequential(nn.Linear(...), nn.LeakyReLU(0.2), ...)` at module level (its training:
    tests/test_torch2jax_module_sequential.py)."""
    src = "import torch\nfrom torch import nn\n\nmodel = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))\n"
    r = translate_source(src, "script.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert ("model_key1, model_key2 = jax.random.split(jax.random.key(0), 2)\nmodel = eqx.nn.Sequential(["
            "eqx.nn.Linear(3, 4, key=model_key1), eqx.nn.Lambda(jax.nn.relu), eqx.nn.Linear(4, 2, key=model_key2)])\n"
            ) in r.output, r.output


def test_a_sequential_outside_a_class_holding_more_than_layers_is_an_error():
    src = ("import torch\nfrom torch import nn\n\n"
           "model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))\n")
    r = translate_source(src, "script.py", "torch2jax")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert len(errors) == 1 and errors[0].line == 4 and "key=" in errors[0].message and "jax.vmap" in errors[0].message
