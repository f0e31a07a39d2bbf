"""torch2jax: a layer bound to a local name, given to a container, then re-initialised in place (vit-pytorch's vat,
vaat and vat_siglip FiLM: ``proj = nn.Linear(dim, dim * 2)``, ``self.to_gamma_beta = nn.Sequential(proj,
Rearrange(...))``, ``nn.init.zeros_(proj.weight)``). PyTorch's change reaches the layer inside the Sequential; an Equinox
Sequential holds the value it was given, so the re-initialisation moves up, right after the layer is built, where
nothing in between reads the layer but as a layer a container holds (it was a `no-rule` or `unsupported-construct`
error). The layer wrapped by ranks.py (``PerVector(...)``) has its arrays under ``.layer``. The JAX model's arrays and
outputs are compared with PyTorch's, each initialised by its own code (no weights transferred). A read of the layer's
values in between keeps the error."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import error_findings as errors, needs, t2j
from runners import torch_and_jax

needs_frameworks = needs("torch", "jax", "equinox", "einops")

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
        nn.init.zeros_(proj.weight)
        nn.init.constant_(proj.bias, 0.5)

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


def test_a_reinitialisation_after_a_container_took_the_layer_moves_up():
    r = t2j(FILM)
    assert errors(r) == [], r.findings
    lines = [ln.strip() for ln in r.output.splitlines()]
    built = next(i for i, ln in enumerate(lines) if ln.startswith("proj = "))
    # right after the layer, before the Sequential takes it; the layer is wrapped (PerVector): its arrays under .layer
    assert lines[built + 1] == "proj = eqx.tree_at(lambda m: m.layer.weight, proj, jnp.zeros(proj.layer.weight.shape))"
    assert lines[built + 2] == "proj = eqx.tree_at(lambda m: m.layer.bias, proj, jnp.full_like(proj.layer.bias, 0.5))"
    assert lines[built + 3] == "self.to_gamma_beta = eqx.nn.Sequential(["
    assert "nn.init" not in r.output
    assert any(f.code == "idiom-replaced" and "moves up" in f.message for f in r.findings)


@needs_frameworks
def test_a_reinitialisation_moved_up_gives_pytorchs_arrays_and_outputs(tmp_path):
    body = '''
rng = np.random.default_rng(0)
tokens, cond = rng.normal(size=(3, 5, 8)), rng.normal(size=(3, 3))
if side == "torch":
    torch.manual_seed(0)
    net = ns["Net"]()
    with torch.no_grad():
        out = net(torch.tensor(tokens), torch.tensor(cond)).numpy()
    w = net.film.to_gamma_beta[0].weight.detach().numpy()
    b = net.film.to_gamma_beta[0].bias.detach().numpy()
else:
    import einops._backends as eb  # (torch is blocked on this side: einops would try its backend first)
    eb._loaded_backends.setdefault("jax", eb.JaxBackend())
    net = ns["Net"](key=jax.random.key(0))
    out = np.asarray(jax.vmap(net)(jnp.asarray(tokens), jnp.asarray(cond)))
    w = np.asarray(net.film.to_gamma_beta.layers[0].layer.weight)
    b = np.asarray(net.film.to_gamma_beta.layers[0].layer.bias)
np.save(OUT, np.concatenate([out.ravel(), w.ravel(), b.ravel()]))
'''
    torch_out, jax_out = torch_and_jax(tmp_path, FILM, t2j(FILM).output, body)
    assert torch_out.shape == jax_out.shape
    np.testing.assert_allclose(jax_out, torch_out, rtol=1e-12, atol=1e-12)
    assert np.all(torch_out[-16:] == 0.5) and np.all(torch_out[-16 - 128:-16] == 0)  # PyTorch's own re-initialisation


@pytest.mark.parametrize("between, init", [
    ("        self.w0 = proj.weight * 2\n", "nn.init.zeros_(proj.weight)"),  # the layer's values read in between
    ("        scale = 0.5\n", "nn.init.constant_(proj.bias, scale)"),  # the value bound in between
    ("        for scale in (0.5,):\n            pass\n", "nn.init.constant_(proj.bias, scale)"),  # ... by a loop
    ("        self.again = nn.Sequential(self.to_gamma_beta)\n", "nn.init.zeros_(proj.weight)"),  # its holder read
])
def test_a_reinitialisation_that_cannot_move_up_stays_an_error(between, init):
    src = FILM.replace("        nn.init.zeros_(proj.weight)\n        nn.init.constant_(proj.bias, 0.5)\n",
                       between + "        " + init + "\n")
    assert init in src
    r = t2j(src)
    assert [f.message for f in errors(r) if "after it is used" in f.message], r.findings
