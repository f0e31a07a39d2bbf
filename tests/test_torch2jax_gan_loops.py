"""torch2jax GAN loops whose gradients are cleared otherwise than by each optimizer's own zero_grad() in its step.

yunjey's pytorch-tutorial clears both optimizers with a ``reset_grad()`` helper before each backward(); pytorch/examples'
dcgan clears with ``netD.zero_grad()`` / ``netG.zero_grad()``. Each optimizer's gradients at its step() are those of its
own loss, so each step becomes its own train_step; the helper, no longer called, goes. The loop of
tests/data/torch_gan_reset_grad.py is run on both sides from the same weights (the translation with torch
unimportable) and compared: the weights after five steps of each optimizer, the generator losses, its last output.
A body where a step's gradients add up over an earlier backward() (softmax_gan: the generator cleared once, before
the discriminator's backward(), which reaches the generator too) stays an error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python
from test_torch2jax_gan import _RUN_N_CRITIC

ROOT = Path(__file__).resolve().parent.parent
RESET = ROOT / "tests" / "data" / "torch_gan_reset_grad.py"


def _translate(src: str) -> tuple[str, list]:
    r = translate_source(src, "x.py", pack="torch2jax")
    return r.output, r.findings


def _errors(findings) -> list:
    return [f for f in findings if f.severity is Severity.ERROR]


def test_a_reset_grad_helper_is_read_as_each_optimizers_zero_grad():
    text, findings = _translate(RESET.read_text())
    assert not _errors(findings), findings
    assert "def reset_grad" not in text and "reset_grad()\n" not in text
    assert ".zero_grad()" not in text and ".backward()" not in text
    assert ("discriminator, opt_state_d, d_loss = train_step_d(discriminator, opt_state_d, real, real_labels, fake, "
            "fake_labels)\n") in text
    assert "generator, opt_state_g, g_loss, fake = train_step_g(generator, opt_state_g, z, discriminator, real_labels)\n" \
        in text
    assert any(f.code == "idiom-replaced" and "reset_grad() as d_optimizer.zero_grad(), g_optimizer.zero_grad()"
               in f.message for f in findings), findings


def test_the_reset_grad_gan_trains_as_pytorch_does(tmp_path):
    import numpy as np
    text, _ = _translate(RESET.read_text())
    out = tmp_path / "out.py"
    out.write_text(text)
    results = []
    for path, side in ((RESET, "torch"), (out, "jax")):
        p = python("-c", _RUN_N_CRITIC, path, side, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    t, j = results
    assert len(t["g_losses"]) == len(j["g_losses"]) == 5
    for k in ("g0", "g3", "d0", "g_losses", "last_fake"):
        np.testing.assert_allclose(j[k], t[k], rtol=1e-4, atol=1e-5, err_msg=k)


_LOOP = RESET.read_text().split("g_losses = []\n")[1]


@pytest.mark.parametrize("change", [
    # softmax_gan: the generator cleared once at the top; the discriminator's backward() reaches it too
    (("    reset_grad()\n    d_loss.backward()", "    g_optimizer.zero_grad()\n    d_optimizer.zero_grad()\n"
      "    d_loss.backward()"), ("    reset_grad()\n    g_loss.backward()", "    g_loss.backward()")),
    # a clearing between the generator's backward() and its step()
    (("    g_loss.backward()\n    g_optimizer.step()", "    g_loss.backward()\n    reset_grad()\n    g_optimizer.step()"),),
    # the helper clears an optimizer this loop does not step
    (("    g_optimizer.zero_grad()\n\n\ng_losses", "    g_optimizer.zero_grad()\n    e_optimizer.zero_grad()\n\n\n"
      "g_losses"),),
])
def test_clearings_that_let_gradients_add_up_stay_errors(change):
    src = RESET.read_text()
    for old, new in change:
        assert old in src
        src = src.replace(old, new)
    text, findings = _translate(src)
    assert any("training loop" in f.message or "backward()" in f.message for f in _errors(findings)), findings


def test_two_backwards_before_one_step_is_an_error_saying_to_step_on_their_sum():
    """dcgan's critic: errD_real.backward() and errD_fake.backward() add up before one step(); where fwport cannot
    write their sum (the first loss assigned again after its backward(): the sum would read the new value), an error
    naming both losses (not the rewrite of the first alone, which would drop the second's gradients). The sums it
    writes: tests/test_torch2jax_gan_sums.py."""
    src = RESET.read_text().replace(
        "    d_loss = d_loss_real + d_loss_fake\n    reset_grad()\n    d_loss.backward()\n",
        "    reset_grad()\n    d_loss_real.backward()\n    d_loss_real = d_loss_real * 2\n    d_loss_fake.backward()\n")
    text, findings = _translate(src)
    errs = _errors(findings)
    assert any("d_loss_fake.backward() adds its gradients to d_loss_real's before d_optimizer.step()" in f.message
               for f in errs), findings
    assert "train_step_d" not in text


@pytest.mark.parametrize("change, why", [
    # softmax_gan / bicyclegan: the graph kept for a later backward() whose step reads both losses' gradients
    (("    d_loss.backward()\n", "    d_loss.backward(retain_graph=True)\n"), "keeps the graph for a later backward()"),
    # vit-pytorch's smoke tests: backward() and nothing that uses the gradients
    (("    d_optimizer.step()\n", ""), "nothing in this loop steps an optimizer"),
    # word_language_model: the step under an if / else
    (("    d_optimizer.step()\n", "    if i >= 0:\n        d_optimizer.step()\n"), "sits in a nested block"),
])
def test_a_loop_not_rewritten_says_why(change, why):
    src = RESET.read_text()
    old, new = change
    assert old in src
    if not why.startswith("keeps"):  # the discriminator's step alone
        src = src.replace("    g_optimizer.step()\n", "")
    text, findings = _translate(src.replace(old, new))
    assert any("a training loop is rewritten when" in f.message and why in f.message for f in _errors(findings)), \
        findings
