"""``x += y`` on a tensor of a functional model (keras-io's cct: ``encoded_patches += position_embeddings``), in
the builder, a helper or a loop written out: Keras makes a new tensor, torch's ``+=`` writes into the old one (a
name bound to it, ``skip = x``, would change too, and autograd may refuse it), so forward has ``x = x + y``."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import Warm

SRC = '''
from tensorflow import keras
from tensorflow.keras import layers


def block(x, units):
    h = layers.Dense(units)(x)
    h *= 0.5
    x += h
    return x


def build(units=4):
    inputs = keras.Input(shape=(6, 4))
    x = layers.Dense(units)(inputs)
    skip = x
    x += layers.Dense(units, activation="relu")(x)
    x -= skip * 2 + 1
    for _ in range(2):
        x += layers.Dense(units)(x)
    x = block(x, units)
    x /= 4
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, [outputs, skip])
'''


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


@pytest.mark.parametrize("keras", [3, 2])
def test_an_augmented_assignment_on_a_tensor_is_a_new_tensor_as_in_keras(tmp_path, keras):
    r = _tx(SRC, keras)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "+=" not in out and "-=" not in out and "*=" not in out and "/=" not in out
    assert "x = x + torch.relu(self.fc2(x))\n        x = x - (skip * 2 + 1)\n" in out
    assert "        x = x + self.fc3(x)\n        x = x + self.fc4(x)\n" in out  # the loop written out
    assert "h = h * 0.5\n        x = x + h\n" in out  # the helper's class
    assert "x = x / 4\n" in out
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[2,6,4]"],
                          checks=("forward", "grad"), device="cpu", keras=keras), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_an_augmented_assignment_on_a_builder_value_stays_a_value_step():
    # filters *= 2 in a loop written out: the int steps, as before (not a tensor)
    r = _tx(SRC.replace("    for _ in range(2):\n        x += layers.Dense(units)(x)\n",
                        "    n = 2\n    for _ in range(2):\n        n *= 2\n        x = layers.Dense(n)(x)\n"
                        "    x = layers.Dense(units)(x)\n"))
    assert not _errors(r), _errors(r)
    assert "nn.Linear(units, 4)" in r.output and "nn.Linear(4, 8)" in r.output
