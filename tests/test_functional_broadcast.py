"""Elementwise ops (``layers.add``, ``Add``, ``Multiply``, ``x * gate + x``) between feature maps of a functional
model converted to channels-first, with sizes unknown where the model is built (keras-io's
image_classification_from_scratch and edsr: ``keras.Input(shape=(None, None, 3))``, or a residual whose size
comes out of a 'same' pooling): operands of one rank are permuted alike, so torch's broadcasting pairs the same
axes as Keras's whatever the sizes; operands of different (or unknown) ranks are still refused."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors
from runners import Warm

# reduced from keras-io vision/image_classification_from_scratch.py (make_model) and vision/edsr.py (ResBlock)
SRC = '''
from tensorflow import keras
from tensorflow.keras import layers


def res_block(inputs):
    x = layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    x = layers.Conv2D(16, 3, padding="same")(x)
    return layers.Add()([inputs, x])


def make_model(num_classes=3):
    inputs = keras.Input(shape=(None, None, 3))
    x = layers.Conv2D(8, 3, strides=2, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    previous = x
    for size in [8, 16]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(previous)
        x = layers.add([x, residual])
        previous = x
    x = res_block(x)
    gate = layers.Conv2D(1, 1, activation="sigmoid")(x)
    x = x * gate + x
    x = layers.Multiply()([x, gate])
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(num_classes)(x)
    return keras.Model(inputs, [outputs, gate])
'''


def _tx(src: str):
    return translate_source(src, "m.py", "tf2torch")


def test_elementwise_ops_on_maps_of_unknown_sizes_are_followed_and_match_keras(tmp_path):
    r = _tx(SRC)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "x = x + residual\n" in out and "return inputs + x\n" in out
    assert "x = x * gate + x\n        x = x * gate\n" in out
    # the sizes broadcasting gives are known after it: the 1-channel gate's conv, the Dense
    assert "nn.Conv2d(16, 1, 1)" in out and "nn.Linear(16, num_classes)" in out
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "make_model()",
                          inputs=["float32[2,13,10,3]"], checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


@pytest.mark.parametrize("op", ["layers.Add()([x, v])", "x + v"])
def test_an_elementwise_op_between_ranks_stays_refused_in_a_channels_first_model(op):
    # (h, w, 8) + (8,): Keras pairs the vector with the channels (the last axis), torch would pair it with w
    src = SRC.replace("    x = x * gate + x\n", f"    v = layers.Dense(16)(layers.GlobalAveragePooling2D()(x))\n"
                                                 f"    x = {op}\n")
    errors = _errors(_tx(src))
    assert any("unknown or different ranks" in e for e in errors), errors
    assert any("left as written" in e for e in errors), errors


# reduced from keras-io vision/edsr.py (make_model): `x = x_new = ...`, a chain of assignments, one tensor bound to
# both names; the residual blocks and the Adds on maps of unknown height and width
EDSR = '''
from tensorflow import keras
from tensorflow.keras import layers


def res_block(inputs):
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    x = layers.Conv2D(8, 3, padding="same")(x)
    x = layers.Add()([inputs, x])
    return x


def make_model(num_of_residual_blocks=2):
    input_layer = layers.Input(shape=(None, None, 3))
    x = layers.Rescaling(scale=1.0 / 255)(input_layer)
    x = x_new = layers.Conv2D(8, 3, padding="same")(x)
    for _ in range(num_of_residual_blocks):
        x_new = res_block(x_new)
    x_new = layers.Conv2D(8, 3, padding="same")(x_new)
    x = layers.Add()([x, x_new])
    output_layer = layers.Conv2D(3, 3, padding="same")(x)
    return keras.Model(input_layer, output_layer)
'''


def test_a_chained_assignment_binds_the_tensor_to_each_name_and_matches_keras(tmp_path):
    r = _tx(EDSR)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "x = x_new = self.conv1(x)\n" in out and "x = x + x_new\n" in out
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(EDSR)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "make_model()",
                          inputs=["float32[2,9,6,3]"], checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_a_chained_assignment_of_something_else_than_a_tensor_is_refused():
    errors = _errors(_tx(EDSR.replace("x = x_new = layers.Conv2D(8, 3, padding=\"same\")(x)",
                                      "x = x_new = layers.Conv2D(8, 3, padding=\"same\")(x).shape")))
    assert any("left as written" in e for e in errors), errors
