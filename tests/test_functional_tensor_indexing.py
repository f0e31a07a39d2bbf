"""Basic indexing of a tensor of a functional model (keras-io's getting_started ``outputs[:, 0, :]``, the class
token; deep-learning-with-python's object detection ``x[..., :5]`` / ``x[..., 5:]``): ints and slices known where
the model is built, the batch axis whole, are read by torch as written, and the sizes after them are followed (was:
"this operation on tensors of the functional model is not followed"). Verified against Keras with the weights
transferred (forward and gradients). Where the axes are not Keras's (a feature map of a model converted to
channels-first), or the index is not such a value, the model stays refused."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors
from runners import Warm

SRC = '''
import keras
from keras import layers

FIRST = 1


def build():
    inputs = keras.Input(shape=(7, 6))
    x = layers.Dense(10)(inputs)
    cls = x[:, 0, :]
    boxes = x[..., :4]
    scores = x[:, FIRST:, 4::2]
    boxes = layers.Flatten()(boxes)
    scores = layers.GlobalAveragePooling1D()(scores)
    outputs = layers.Concatenate()([layers.Dense(3)(cls), layers.Dense(2)(boxes), scores])
    return keras.Model(inputs, outputs)
'''


def _tx(src: str):
    return translate_source(src, "m.py", "tf2torch")


def test_indexed_tensors_are_read_as_written_and_match_keras(tmp_path):
    r = _tx(SRC)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "cls = x[:, 0, :]" in out and "boxes = x[..., :4]" in out and "scores = x[:, FIRST:, 4::2]" in out, out
    assert "nn.Linear(10, 3)" in out and "nn.Linear(28, 2)" in out, out  # (10,) and 7 x 4 flattened: sizes followed
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[2,7,6]"],
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


@pytest.mark.parametrize("index, why", [
    ("x[0]", "it indexes the first (batch) dimension"),
    ("x[:, ::-1]", "a positive step"),
    ("x[:, n]", "known where the model is built"),
])
def test_an_index_that_cannot_be_read_as_written_stays_refused(index, why):
    src = SRC.replace("cls = x[:, 0, :]", f"n = keras.ops.argmax(x)\n    cls = {index}")
    errors = _errors(_tx(src))
    assert any(e.startswith(f"{index}: indexing a tensor of the functional model") and why in e for e in errors), errors
    assert any("left as written" in e for e in errors), errors


def test_an_index_of_a_channels_first_feature_map_stays_refused():
    src = '''
import keras
from keras import layers


def build():
    inputs = keras.Input(shape=(8, 8, 3))
    x = layers.Conv2D(6, 3)(inputs)
    x = x[..., :2]
    outputs = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, outputs)
'''
    errors = _errors(_tx(src))
    assert any(e.startswith("x[..., :2]: indexing a tensor") and "channels-first" in e for e in errors), errors
