"""torch2jax loops where one loss's backward() is stepped by several optimizers, each over one model's parameters (the
seq2seq tutorials' ``encoder_optimizer`` / ``decoder_optimizer``): one train_step whose loss_fn takes the models as a
tuple, differentiated together, each model updated by its own optimizer. tests/data/torch_one_loss_two_optimizers.py
is run on both sides from the same weights (the translation with torch unimportable) and compared: the weights of
both models after each optimizer's steps, the losses and the encoder output read after the last step. Shapes the
joint step does not cover stay errors naming why."""
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
JOINT = ROOT / "tests" / "data" / "torch_one_loss_two_optimizers.py"

_RUN = """import json, runpy, sys
import numpy as np
path, side = sys.argv[1:3]
rng = np.random.default_rng(0)
shapes = {"e0": (8, 3), "e2": (4, 8), "d0": (8, 4), "d2": (3, 8)}
init = {k: (rng.standard_normal(s) * 0.5, rng.standard_normal(s[0]) * 0.1) for k, s in shapes.items()}
data = [(rng.standard_normal((6, 3)), rng.standard_normal((6, 3))) for _ in range(3)]
prep = type(sys)("joint_prep")
if side == "torch":
    import torch
    def prepare(e, d):
        with torch.no_grad():
            for layer, k in ((e.model[0], "e0"), (e.model[2], "e2"), (d.model[0], "d0"), (d.model[2], "d2")):
                layer.weight.copy_(torch.tensor(init[k][0])); layer.bias.copy_(torch.tensor(init[k][1]))
        return e, d
    prep.batches = [(torch.tensor(x, dtype=torch.float32), torch.tensor(t, dtype=torch.float32)) for x, t in data]
    read = lambda m, i: m.model[i].weight.detach().numpy().tolist()
else:
    sys.modules["torch"] = None
    import equinox as eqx, jax.numpy as jnp
    def prepare(e, d):
        for m, i, k in ((0, 0, "e0"), (0, 2, "e2"), (1, 0, "d0"), (1, 2, "d2")):
            w, b = (jnp.asarray(v, jnp.float32) for v in init[k])
            if m == 0:
                e = eqx.tree_at(lambda t: (t.model.layers[i].weight, t.model.layers[i].bias), e, (w, b))
            else:
                d = eqx.tree_at(lambda t: (t.model.layers[i].weight, t.model.layers[i].bias), d, (w, b))
        return e, d
    prep.batches = [(jnp.asarray(x, jnp.float32), jnp.asarray(t, jnp.float32)) for x, t in data]
    read = lambda m, i: np.asarray(m.model.layers[i].weight).tolist()
prep.prepare = prepare
sys.modules["joint_prep"] = prep
g = runpy.run_path(path, run_name="__main__")
print(json.dumps(dict(e0=read(g["encoder"], 0), e2=read(g["encoder"], 2), d0=read(g["decoder"], 0),
                      d2=read(g["decoder"], 2), losses=g["losses"], last_hidden=g["last_hidden"])))
"""


def _translate(src: str) -> tuple[str, list]:
    r = translate_source(src, "x.py", pack="torch2jax")
    return r.output, r.findings


def _errors(findings) -> list:
    return [f for f in findings if f.severity is Severity.ERROR]


def test_one_loss_stepped_by_two_optimizers_becomes_one_train_step_over_both_models():
    text, findings = _translate(JOINT.read_text())
    assert not _errors(findings), findings
    assert ".backward()" not in text and ".zero_grad()" not in text and ".step()" not in text
    assert ("def train_step_encoder_decoder(encoder, decoder, opt_state_encoder, opt_state_decoder, x, target):\n"
            "    def loss_fn(models):\n        encoder, decoder = models\n") in text, text
    assert ("    (loss, hidden), (grads_encoder, grads_decoder) = eqx.filter_value_and_grad(loss_fn, has_aux=True)"
            "((encoder, decoder))\n") in text
    assert "encoder_optimizer.update(grads_encoder, opt_state_encoder, eqx.filter(encoder, eqx.is_array))" in text
    assert "decoder_optimizer.update(grads_decoder, opt_state_decoder, eqx.filter(decoder, eqx.is_array))" in text
    assert ("    encoder, decoder, opt_state_encoder, opt_state_decoder, loss, hidden = train_step_encoder_decoder("
            "encoder, decoder, opt_state_encoder, opt_state_decoder, x, target)\n") in text
    # the step is written after both optimizers' states (it reads both optimizers)
    assert text.index("opt_state_decoder = decoder_optimizer.init(") < text.index("def train_step_encoder_decoder")
    assert any(f.code == "idiom-replaced" and "one train_step differentiating loss with respect to (encoder, decoder)"
               in f.message for f in findings), findings


# the decoder stepped first, the clearings in the other order
_SWAPPED = (("    encoder_optimizer.zero_grad()\n    decoder_optimizer.zero_grad()\n",
             "    decoder_optimizer.zero_grad()\n    encoder_optimizer.zero_grad()\n"),
            ("    encoder_optimizer.step()\n    decoder_optimizer.step()\n",
             "    decoder_optimizer.step()\n    encoder_optimizer.step()\n"))


# the seq2seq tutorials' spelling: each model cleared (its optimizer steps exactly its parameters)
_MODELS_CLEARED = (("    encoder_optimizer.zero_grad()\n    decoder_optimizer.zero_grad()\n",
                    "    encoder.zero_grad()\n    decoder.zero_grad()\n"),)


def test_each_model_cleared_is_read_as_its_optimizers_zero_grad():
    src = JOINT.read_text()
    for old, new in _MODELS_CLEARED:
        src = src.replace(old, new)
    text, findings = _translate(src)
    assert not _errors(findings), findings
    assert ".zero_grad()" not in text and "train_step_encoder_decoder(encoder, decoder, opt_state_encoder" in text
    assert any(f.code == "idiom-replaced" and "encoder.zero_grad() as encoder_optimizer.zero_grad(); decoder.zero_grad() "
               "as decoder_optimizer.zero_grad()" in f.message for f in findings), findings


@pytest.mark.parametrize("changes", [(), _SWAPPED, _MODELS_CLEARED])
def test_the_joint_step_trains_as_pytorch_does(tmp_path, changes):
    import numpy as np
    src = JOINT.read_text()
    for old, new in changes:
        assert old in src
        src = src.replace(old, new)
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
    assert len(t["losses"]) == len(j["losses"]) == 3
    # both models' weights after each optimizer's steps on the joint gradients, as in PyTorch
    for k in ("e0", "e2", "d0", "d2", "losses", "last_hidden"):
        np.testing.assert_allclose(j[k], t[k], rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("change, why", [
    # a model drawing in training: the joint step would need a key
    (("nn.Tanh(), nn.Linear(8, 3)", "nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 3)"), "draws random numbers"),
    # the gradients clipped between the backward() and the steps
    (("    loss.backward()\n", "    loss.backward()\n    torch.nn.utils.clip_grad_norm_(encoder.parameters(), 1.0)\n"),
     "the gradients are clipped"),
    # a statement between the loss and the steps reads a model
    (("    loss.backward()\n", "    loss.backward()\n    print(decoder)\n"), "a statement between the loss"),
])
def test_a_joint_step_fwport_does_not_write_stays_an_error_saying_why(change, why):
    src = JOINT.read_text()
    assert change[0] in src
    text, findings = _translate(src.replace(*change))
    errs = _errors(findings)
    assert any("one loss training 2 models" in f.message and why in f.message for f in errs), findings
    assert "loss.backward()" in text and "def train_step_encoder_decoder" not in text


# softmax_gan's shape: the discriminator's loss kept for the generator's, whose values the discriminator computed before
# its step changed its parameters in place
_STALE = """import torch
import torch.nn as nn

generator = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
discriminator = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.01)
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=0.01)
for i in range(2):
    optimizer_G.zero_grad()
    optimizer_D.zero_grad()
    z = torch.randn(6, 4)
    real = torch.randn(6, 3)
    d_real = discriminator(real)
    d_fake = discriminator(generator(z))
    d_loss = d_real.mean() - d_fake.mean()
    d_loss.backward(retain_graph=True)
    optimizer_D.step()
    g_loss = d_fake.mean()
    g_loss.backward()
    optimizer_G.step()
print("trained")
"""


@pytest.mark.parametrize("later, raises", [
    ("    g_loss = d_fake.mean()\n", True),
    # the generator's loss computed again after the step: PyTorch runs it (the gradients still add up)
    ("    g_loss = discriminator(generator(z)).mean()\n", False),
])
def test_a_kept_graph_read_after_its_models_step_says_pytorch_raises_there(later, raises):
    src = _STALE.replace("    g_loss = d_fake.mean()\n", later)
    p = python("-c", src, side="torch", timeout=300)
    assert (p.returncode != 0 and "modified by an inplace operation" in p.stderr) is raises, p.stderr[-2000:]
    assert raises or "trained" in p.stdout
    text, findings = _translate(src)
    errs = [f.message for f in _errors(findings) if "a training loop is rewritten when" in f.message]
    assert len(errs) == 1, findings
    said = ("g_loss.backward() goes back through d_fake, computed with discriminator before optimizer_D.step() changed "
            "discriminator's parameters in place: PyTorch itself raises there")
    assert (said in errs[0]) is raises, errs[0]
    assert raises or "d_loss.backward(retain_graph=True) keeps the graph for a later backward()" in errs[0]
