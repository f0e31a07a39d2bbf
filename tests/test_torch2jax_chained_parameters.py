"""torch2jax optimizers over several models' parameters chained together (PyTorch-GAN's cyclegan, discogan, unit:
``torch.optim.Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()))``; ``list(a.parameters()) +
list(b.parameters())``): one optax optimizer over the tuple of the models, its state initialised from the tuple's arrays,
and one train_step differentiating the loss with respect to the tuple. tests/data/torch_chained_parameters.py is run on
both sides in float64 from the same weights (the translation with torch unimportable) and compared after each step:
the weights of the three models and the losses. Shapes the tuple step does not cover stay errors saying why."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

pytest.importorskip("torch")
pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parent.parent
CHAINED = ROOT / "tests" / "data" / "torch_chained_parameters.py"

_RUN = """import json, runpy, sys
import numpy as np
path, side = sys.argv[1:3]
rng = np.random.default_rng(0)
shapes = {"G": [(8, 3), (3, 8)], "D": [(8, 3), (1, 8)]}  # each model's Linear layers, in order
names = ("G_AB", "G_BA", "D_B")
init = {(m, j): (rng.standard_normal(s) * 0.5, rng.standard_normal(s[0]) * 0.1)
        for m in names for j, s in enumerate(shapes[m[0]])}
data = [(rng.standard_normal((6, 3)), rng.standard_normal((6, 3))) for _ in range(4)]
prep = type(sys)("chain_prep")
if side == "torch":
    import torch
    torch.set_default_dtype(torch.float64)
    linears = lambda m: [l for l in m.model if isinstance(l, torch.nn.Linear)]
    def prepare(*models):
        with torch.no_grad():
            for (m, j), (w, b) in init.items():
                layer = linears(models[names.index(m)])[j]
                layer.weight.copy_(torch.tensor(w)); layer.bias.copy_(torch.tensor(b))
        return models
    prep.batches = [(torch.tensor(a), torch.tensor(b)) for a, b in data]
    read = lambda l: l.weight.detach().numpy().tolist() + [l.bias.detach().numpy().tolist()]
else:
    sys.modules["torch"] = None
    import jax
    jax.config.update("jax_enable_x64", True)
    import equinox as eqx, jax.numpy as jnp
    linears = lambda m: [l for l in m.model.layers if isinstance(l, eqx.nn.Linear)]
    def prepare(*models):
        models = list(models)
        for (m, j), (w, b) in init.items():
            k = names.index(m)
            i = [n for n, l in enumerate(models[k].model.layers) if isinstance(l, eqx.nn.Linear)][j]
            models[k] = eqx.tree_at(lambda t: (t.model.layers[i].weight, t.model.layers[i].bias), models[k],
                                    (jnp.asarray(w), jnp.asarray(b)))
        return models
    prep.batches = [(jnp.asarray(a), jnp.asarray(b)) for a, b in data]
    read = lambda l: np.asarray(l.weight).tolist() + [np.asarray(l.bias).tolist()]
prep.prepare = prepare
sys.modules["chain_prep"] = prep
g = runpy.run_path(path, run_name="__main__")
print(json.dumps(dict(weights={m: [read(l) for l in linears(g[m])] for m in names}, losses=g["losses"],
                      initial={m: init[(m, 0)][0].tolist() for m in names[:2]})))
"""

# the same optimizer over a list of both generators' parameters, SGD with momentum and PyTorch's coupled weight decay
_LISTED = (("torch.optim.Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()), lr=0.01, betas=(0.5, 0.999))",
            "torch.optim.SGD(list(G_AB.parameters()) + list(G_BA.parameters()), lr=0.05, momentum=0.9, "
            "weight_decay=0.01)"),)

# generators with a layer state (BatchNorm1d in training: the batch's statistics; the state threaded through the step.
# The running statistics are Equinox's, debiased otherwise: test_torch2jax_batchnorm_stats.py)
_BATCHNORM = (("self.model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 3))",
               "self.model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.BatchNorm1d(8), nn.Linear(8, 3))"),)


def _translate(src: str) -> tuple[str, list]:
    r = translate_source(src, "x.py", pack="torch2jax")
    return r.output, r.findings


def _errors(findings) -> list:
    return [f for f in findings if f.severity is Severity.ERROR]


def _changed(changes) -> str:
    src = CHAINED.read_text()
    for old, new in changes:
        assert old in src
        src = src.replace(old, new)
    return src


def test_an_optimizer_over_chained_parameters_trains_the_tuple_of_the_models():
    text, findings = _translate(CHAINED.read_text())
    assert not _errors(findings), findings
    code_lines = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    assert ".backward()" not in code_lines and ".zero_grad()" not in code_lines and "itertools.chain(" not in code_lines
    assert "opt_state_G = optimizer_G.init(eqx.filter((G_AB, G_BA), eqx.is_array))" in text
    assert ("    (loss_G, fake_B), (grads_G_AB, grads_G_BA) = eqx.filter_value_and_grad(loss_fn, has_aux=True)"
            "((G_AB, G_BA))\n") in text, text
    assert ("    updates, opt_state_G = optimizer_G.update((grads_G_AB, grads_G_BA), opt_state_G, "
            "eqx.filter((G_AB, G_BA), eqx.is_array))\n    G_AB, G_BA = eqx.apply_updates((G_AB, G_BA), updates)\n") in text
    assert any(f.code == "idiom-replaced" and "one update of the tuple of the models" in f.message
               for f in findings), findings


@pytest.mark.parametrize("changes", [(), _LISTED, _BATCHNORM],
                         ids=["itertools-chain-adam", "list-sum-sgd-weight-decay", "batchnorm-state"])
def test_the_chained_optimizer_trains_as_pytorch_does_in_float64(tmp_path, changes):
    import numpy as np
    src = _changed(changes)
    text, findings = _translate(src)
    assert not _errors(findings), findings
    out, orig = tmp_path / "out.py", tmp_path / "src.py"
    out.write_text(text)
    orig.write_text(src)
    results = []
    for path, side in ((orig, "torch"), (out, "jax")):
        p = python("-c", _RUN, path, side, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    t, j = results
    assert len(t["losses"]) == len(j["losses"]) == 4
    np.testing.assert_allclose(j["losses"], t["losses"], rtol=1e-10, atol=1e-12)
    for m in ("G_AB", "G_BA", "D_B"):
        assert len(t["weights"][m]) == len(j["weights"][m]) == 2
        for tl, jl in zip(t["weights"][m], j["weights"][m]):
            np.testing.assert_allclose(jl[:-1], tl[:-1], rtol=1e-10, atol=1e-12, err_msg=m)
            np.testing.assert_allclose(jl[-1], tl[-1], rtol=1e-10, atol=1e-12, err_msg=m)
    # both generators moved (an optimizer that left one of them alone would keep its initial weights)
    for m in ("G_AB", "G_BA"):
        assert not np.allclose(t["weights"][m][0][:-1], t["initial"][m], atol=1e-3), m


@pytest.mark.parametrize("change, why", [
    # one of the chained models not called by the loss: PyTorch's optimizer skips it (no gradient), optax would step it
    (("    loss_cycle = l1(G_BA(fake_B), real_A)\n", "    loss_cycle = l1(fake_B, real_A)\n"), "calls G_BA"),
    # a chained model drawing in training: the step would need a key
    (("nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 3)", "nn.Linear(3, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 3)"),
     "draws random numbers"),
    # the gradients clipped before the step
    (("    loss_G.backward()\n", "    loss_G.backward()\n    torch.nn.utils.clip_grad_norm_(G_AB.parameters(), 1.0)\n"),
     "the gradients are clipped"),
])
def test_a_chained_step_fwport_does_not_write_stays_an_error_saying_why(change, why):
    text, findings = _translate(_changed([change]))
    errs = [f.message for f in _errors(findings)]
    assert any("one loss training 2 models" in m and "(G_AB, G_BA)" in m and why in m for m in errs), findings
    assert "loss_G.backward()" in text and "def train_step_G" not in text


def test_a_chained_optimizer_stepped_in_a_function_of_the_module_is_refused():
    # the module's optimizer stepped by a function (PyTorch's VAE example's `def train(epoch)`): written for one model
    src = CHAINED.read_text().replace("losses = []\nfor i, (real_A, real_B) in enumerate(batches):\n",
                                      "losses = []\n\n\ndef train():\n"
                                      "  for i, (real_A, real_B) in enumerate(batches):\n")
    assert "def train(" in src
    text, findings = _translate(src + "\n\ntrain()\n")
    assert any("optimizer_G.step()" in f.message for f in _errors(findings)), findings
    assert "loss_G.backward()" in text and "def train_step_G" not in text


# PyTorch-GAN's unit: two encoders built with one shared block, trained by one optimizer over both
_SHARED = """import itertools
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, shared_block):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(3, 8), nn.Tanh())
        self.shared = shared_block

    def forward(self, x):
        return self.shared(self.model(x))


shared_E = nn.Linear(8, 8)
E1 = Encoder(shared_block=shared_E)
E2 = Encoder(shared_block=shared_E)
optimizer = torch.optim.Adam(itertools.chain(E1.parameters(), E2.parameters()), lr=0.01)
x1, x2 = torch.randn(4, 3), torch.randn(4, 3)
for i in range(2):
    optimizer.zero_grad()
    loss = (E1(x1) - E2(x2)).pow(2).mean()
    loss.backward()
    optimizer.step()
"""


# one chained model a part of the other
_PART = _SHARED.replace("E2 = Encoder(shared_block=shared_E)\n", "E2 = E1.shared\n")


@pytest.mark.parametrize("src, why", [
    (_SHARED, "E1 and E2 are built with the same module shared_E (nn.Linear(...))"),
    (_PART, "E2 is a part of E1 (E2 = E1.shared): in PyTorch its parameters are E1's"),
], ids=["shared-instance", "part-of-another"])
def test_chained_models_sharing_parameters_stay_an_error_saying_why(src, why):
    text, findings = _translate(src)
    errs = [f.message for f in _errors(findings)]
    assert any(why in m and "trained apart" in m for m in errs), findings
    assert "loss.backward()" in text and "def train_step" not in text
