"""``fwport verify --check step`` neutralises the random noise layers on both sides (their draws cannot match across
frameworks): GaussianNoise (stddev 0), GaussianDropout / AlphaDropout (rate 0) as the Dropout layers. A model with
them passes; a training-mode bug in a noise layer's translation still fails the step check."""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from fwport.verify import Options, verify

ORIGINAL = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(6,)),
        layers.Dense(8, activation="selu"),
        layers.GaussianNoise(0.5),
        layers.GaussianDropout(0.3),
        layers.AlphaDropout(0.2),
        layers.Dense(3),
    ])
'''


def _verify(session, tmp_path, text):
    (tmp_path / "model.py").write_text(ORIGINAL)
    (tmp_path / "out.py").write_text(text)
    return verify(Options(str(tmp_path / "model.py"), str(tmp_path / "out.py"), "build_model",
                          checks=("forward", "grad", "step"), device="cpu"), session)


def test_noise_layers_are_neutral_in_the_step_check(session, tmp_path):
    out = translate_source(ORIGINAL, "model.py").output
    assert "GaussianNoise(0.5)" in out and "GaussianDropout(0.3)" in out and "nn.AlphaDropout(0.2)" in out
    cert = _verify(session, tmp_path, out)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_a_training_mode_bug_in_a_noise_layer_still_fails_the_step(session, tmp_path):
    out = translate_source(ORIGINAL, "model.py").output
    old = "return x + torch.randn_like(x) * self.stddev if self.training else x"
    assert old in out
    cert = _verify(session, tmp_path, out.replace(old, "return x * 1.1 + torch.randn_like(x) * self.stddev if "
                                                        "self.training else x"))
    assert cert["verdict"] == "mismatch"
    failed = {g for g, es in cert["results"].items() if g not in ("layers", "loading") for e in es if not e.get("ok")}
    assert failed == {"step"}, failed  # the forward and gradients (inference mode) match: only the step sees the bug
