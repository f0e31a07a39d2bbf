"""torch2jax GAN loops as pytorch/examples' dcgan writes them (tests/data/torch_gan_summed.py): the discriminator's
``errD_real.backward()`` and ``errD_fake.backward()`` before one ``optimizerD.step()`` (the gradients add up) become
one loss_fn returning their sum; D(x), read with ``.item()`` between the two losses, comes out of the step as an aux
value; the label filled in place between the losses stays between them (moved before the step, the real loss would
read the fake label); the generator's loss, which reaches the generator only through the ``fake`` computed for the
discriminator, computes it again inside its loss_fn. The loop is run on both sides from the same weights (the
translation with torch unimportable) and compared: weights, every loss and every D(x) / D(G(z)) read."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python
from test_torch2jax_gan import _RUN_N_CRITIC

pytest.importorskip("torch")
pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parent.parent
SUMMED = ROOT / "tests" / "data" / "torch_gan_summed.py"
# the n_critic runner, reading this loop's values too
_RUN = _RUN_N_CRITIC.replace('g_losses=g["g_losses"],', 'g_losses=g["g_losses"], d_losses=g["d_losses"], d_xs=g["d_xs"],')


def _translate(src: str) -> tuple[str, list]:
    r = translate_source(src, "x.py", pack="torch2jax")
    return r.output, r.findings


def _errors(findings) -> list:
    return [f for f in findings if f.severity is Severity.ERROR]


def test_two_backwards_before_one_step_become_one_loss_of_their_sum():
    text, findings = _translate(SUMMED.read_text())
    assert not _errors(findings), findings
    assert ".backward()" not in text and ".zero_grad()" not in text and ".step()" not in text
    # the discriminator: one loss_fn, the sum returned, D(x) an aux value taken .item() of after the step
    assert ("        D_x = output.mean()\n        label = jnp.full_like(label, fake_label)\n"
            "        output = jax.vmap(discriminator)(jax.lax.stop_gradient(fake))\n"
            "        errD_fake = criterion(output, label)\n"
            "        return errD_real + errD_fake, (D_x, label, output)\n") in text, text
    # the comment above the removed discriminator.zero_grad() stays, above the statement now in its place
    assert "for i, (real, z) in enumerate(batches):\n    # train with real\n    label = jnp.full(" in text, text
    assert ("    discriminator, opt_state_D, errD, D_x, label, output = train_step_D(discriminator, opt_state_D, real, "
            "label, fake)\n    D_x = D_x.item()\n") in text
    # the generator: `fake` computed again from the generator inside its loss_fn
    assert ("    def loss_fn(generator):\n        fake = jax.vmap(generator)(z)\n"
            "        output = jax.vmap(discriminator)(fake)\n") in text
    assert any(f.code == "idiom-replaced" and "errD_real.backward(), errD_fake.backward() before optimizerD.step() as "
               "errD.backward() (errD = errD_real + errD_fake)" in f.message for f in findings), findings
    assert any(f.code == "idiom-replaced" and "fake = generator(z) computed again in optimizerG's step" in f.message
               for f in findings), findings


# relativistic_gan's generator step: the generator called after its zero_grad(), then a block, then the loss
_AFTER_A_BLOCK = ("    generator.zero_grad()\n", "    generator.zero_grad()\n    fake = generator(z)\n"
                  "    if i < 0:\n        print('never')\n")


def test_a_value_computed_before_a_block_in_the_step_is_computed_again_in_its_loss():
    text, findings = _translate(SUMMED.read_text().replace(*_AFTER_A_BLOCK))
    assert not _errors(findings), findings
    assert ("    def loss_fn(generator):\n        fake = jax.vmap(generator)(z)\n"
            "        output = jax.vmap(discriminator)(fake)\n") in text, text


@pytest.mark.parametrize("change", [None, _AFTER_A_BLOCK])
def test_the_summed_gan_trains_as_pytorch_does(tmp_path, change):
    import numpy as np
    src = SUMMED.read_text() if change is None else SUMMED.read_text().replace(*change)
    text, _ = _translate(src)
    out, orig = tmp_path / "out.py", tmp_path / "src.py"
    out.write_text(text)
    orig.write_text(src)
    results = []
    for path, side in ((orig, "torch"), (out, "jax")):
        p = python("-c", _RUN, path, side, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    t, j = results
    assert len(t["g_losses"]) == len(j["g_losses"]) == 5
    assert not np.allclose(t["d_xs"][0][0], t["d_xs"][0][1])  # D(x) and D(G(z)) differ: a swap would show
    for k in ("g0", "g3", "d0", "g_losses", "d_losses", "d_xs", "last_fake"):
        np.testing.assert_allclose(j[k], t[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_without_the_sum_written_the_step_sums_under_a_name_of_its_own():
    src = SUMMED.read_text().replace("    errD = errD_real + errD_fake\n", "").replace(
        "    d_losses.append(errD.item())\n", "    d_losses.append(errD_real.item() + errD_fake.item())\n")
    text, findings = _translate(src)
    assert not _errors(findings), findings
    # the losses the loop reads after the step come out of it (aux values)
    assert "    (errD_real_total, (D_x, errD_fake, errD_real, label, output)), grads = " in text, text
    assert "        return errD_real + errD_fake, (D_x, errD_fake, errD_real, label, output)\n" in text


@pytest.mark.parametrize("change, why", [
    # the gradients cleared between the two backward() calls: the step reads the second loss's alone
    (("    errD_real.backward()\n", "    errD_real.backward()\n    optimizerD.zero_grad()\n"), "training loop"),
    # the first loss assigned again after its backward(): the sum would read the new value
    (("    D_x = output.mean().item()\n", "    D_x = output.mean().item()\n    errD_real = errD_real * 2\n"),
     "backward()"),
])
def test_sums_fwport_cannot_prove_stay_errors(change, why):
    src = SUMMED.read_text()
    old, new = change
    assert old in src
    text, findings = _translate(src.replace(old, new))
    assert any(why in f.message for f in _errors(findings)), findings


@pytest.mark.parametrize("change", [
    # `z` changed between the discriminator's `fake = generator(z)` and the generator's loss
    ("    generator.zero_grad()\n", "    generator.zero_grad()\n    z = z * 2\n"),
])
def test_a_value_fwport_cannot_compute_again_is_an_error_not_a_silent_loop(change):
    src = SUMMED.read_text()
    assert change[0] in src
    text, findings = _translate(src.replace(*change))
    assert any("no statement computing errG calls generator" in f.message for f in _errors(findings)), findings


# BatchNorm in the generator (dcgan's): `fake` computed again in the generator's loss_fn from the state the loop
# holds, its new state dropped: in training mode the output uses the batch's statistics (not the state given), and
# PyTorch updated the running statistics once, when the discriminator's step computed `fake`
_BATCHNORM = ("nn.Tanh(), nn.Identity()", "nn.BatchNorm1d(8), nn.Tanh()")
# the runner also reads the generator's running mean and the batches it counted (eqx: the state's hidden mean,
# an average from zero with the same momentum, and its counter)
_RUN_BN = _RUN.replace("print(json.dumps(dict(", """if side == "torch":
    bn = g["generator"].model[1]
    stats = [bn.running_mean.numpy().tolist(), int(bn.num_batches_tracked)]
else:
    bn = g["generator"].model.layers[1]
    stats = [np.asarray(g["state"].get(bn.batch_state_index)[0]).tolist(), int(g["state"].get(bn.batch_counter))]
print(json.dumps(dict(stats=stats, """)


def test_a_generator_with_batchnorm_computes_fake_again_with_its_state_dropped():
    text, findings = _translate(SUMMED.read_text().replace(*_BATCHNORM))
    assert not _errors(findings), findings
    assert ("    def loss_fn(generator):\n        fake, _ = jax.vmap(generator, axis_name=\"batch\", in_axes=(0, None), "
            "out_axes=(0, None))(z, state)\n") in text, text
    assert "train_step_G(generator, opt_state_G, z, state, discriminator, label)\n" in text, text
    assert any(f.code == "idiom-replaced" and "fake = generator(z) computed again in optimizerG's step from the "
               "layer state the loop holds, its new state dropped" in f.message for f in findings), findings


def test_a_generator_with_batchnorm_trains_as_pytorch_does(tmp_path):
    import numpy as np
    src = SUMMED.read_text().replace(*_BATCHNORM)
    text, _ = _translate(src)
    out, orig = tmp_path / "out.py", tmp_path / "src.py"
    out.write_text(text)
    orig.write_text(src)
    results = []
    for path, side in ((orig, "torch"), (out, "jax")):
        p = python("-c", _RUN_BN, path, side, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    t, j = results
    assert len(t["g_losses"]) == len(j["g_losses"]) == 5
    assert t["stats"][1] == j["stats"][1] == 5  # one update of the statistics per iteration, not two
    np.testing.assert_allclose(j["stats"][0], t["stats"][0], rtol=1e-4, atol=1e-5, err_msg="running mean")
    for k in ("g0", "g3", "d0", "g_losses", "d_losses", "d_xs", "last_fake"):
        np.testing.assert_allclose(j[k], t[k], rtol=1e-4, atol=1e-5, err_msg=k)
