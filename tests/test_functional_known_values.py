"""Values the functional pass reads where the model is built. A helper that unpacks a parameter given a list or tuple of literals at its call
(ResNet's ``filters1, filters2, filters3 = filters`` in identity_block / conv_block, called as
``identity_block(x, 3, [64, 64, 256], ...)``): each name is the item the call gives, written in place as a
literal argument is, one class per variant. A Reshape's target_shape held by a builder name bound to a tuple of
known ints (captcha_ocr's ``new_shape = ((img_width // 4), (img_height // 4) * 64)``). Each model is verified against Keras (weights moved by the records)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

RESNET = '''
from tensorflow import keras
from tensorflow.keras import layers


def identity_block(input_tensor, kernel_size, filters, stage):
    filters1, filters2, filters3 = filters
    x = layers.Conv2D(filters1, (1, 1))(input_tensor)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(filters2, kernel_size, padding="same")(x)
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(filters3, (1, 1))(x)
    x = layers.add([x, input_tensor])
    return layers.Activation("relu")(x)


def build():
    inputs = keras.Input(shape=(8, 8, 6))
    x = identity_block(inputs, 3, [4, 5, 6], stage=2)
    x = identity_block(x, 3, (2, 3, 6), stage=3)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''


def _tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def _errors(r) -> list:
    return [f for f in r.findings if f.severity.value == "error"]


def _verify(tmp_path, src: str, out: str, model: str, shape: str):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(src).lstrip("\n"))
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=[shape],
                          checks=("forward", "grad"), device="cpu", keras=3))
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    return cert


def test_a_helper_unpacking_a_list_argument_is_one_class_per_list_and_computes_what_keras_does(tmp_path):
    r = _tx(RESNET)
    assert not _errors(r), _errors(r)
    out = r.output
    first = out[out.index("class IdentityBlock("):out.index("class IdentityBlock2(")]
    second = out[out.index("class IdentityBlock2("):out.index("class Build(")]
    assert "nn.Conv2d(6, 4, (1, 1))" in first and "nn.Conv2d(5, 6, (1, 1))" in first
    assert "nn.Conv2d(6, 2, (1, 1))" in second and "nn.Conv2d(3, 6, (1, 1))" in second
    assert "filters" not in out
    cert = _verify(tmp_path, RESNET, out, "build()", "float32[2,8,8,6]")
    assert len(cert["results"]["gradients"]) == 2 * (3 * 2 + 2) + 2  # six convolutions, two norms, one Dense


def test_an_unpacked_name_bound_again_below_stays_refused():
    src = RESNET.replace('    x = layers.Conv2D(filters3, (1, 1))(x)\n',
                         '    filters3 = filters3 + 0\n    x = layers.Conv2D(filters3, (1, 1))(x)\n')
    r = _tx(src)
    msgs = [f.message for f in _errors(r)]
    assert any("`filters1, filters2, filters3 = [4, 5, 6]` is not followed" in m for m in msgs), msgs
    assert "class Build(" not in r.output


def test_an_unpacking_of_the_wrong_length_stays_refused():
    r = _tx(RESNET.replace("[4, 5, 6]", "[4, 5]"))
    msgs = [f.message for f in _errors(r)]
    assert any("`filters1, filters2, filters3 = [4, 5]` is not followed" in m for m in msgs), msgs


OCR = '''
from tensorflow import keras
from tensorflow.keras import layers

img_width = 16
img_height = 8


def build_model():
    input_img = layers.Input(shape=(img_width, img_height, 1), name="image")
    x = layers.Conv2D(4, (3, 3), activation="relu", padding="same", name="Conv1")(input_img)
    x = layers.MaxPooling2D((2, 2), name="pool1")(x)
    x = layers.Conv2D(6, (3, 3), activation="relu", padding="same", name="Conv2")(x)
    x = layers.MaxPooling2D((2, 2), name="pool2")(x)
    new_shape = ((img_width // 4), (img_height // 4) * 6)
    x = layers.Reshape(target_shape=new_shape, name="reshape")(x)
    x = layers.Dense(5, activation="relu", name="dense1")(x)
    x = layers.Bidirectional(layers.LSTM(3, return_sequences=True))(x)
    output = layers.Dense(4, activation="softmax", name="dense2")(x)
    return keras.Model(input_img, output, name="ocr_model_v1")
'''


def test_a_reshape_to_a_builder_name_holding_known_sizes_computes_what_keras_does(tmp_path):
    r = _tx(OCR)
    assert not _errors(r), _errors(r)
    assert "nn.Unflatten(1, (4, 12))" in r.output
    cert = _verify(tmp_path, OCR, r.output, "build_model()", "float32[2,16,8,1]")
    assert len(cert["results"]["gradients"]) == 2 * 2 + 2 + 2 * 3 + 2  # two convolutions, two Dense, two LSTMs


def test_a_reshape_name_bound_again_below_its_tuple_stays_refused():
    src = OCR.replace("    x = layers.Reshape(", "    new_shape = new_shape[::-1] + new_shape[:0]\n    x = layers.Reshape(")
    r = _tx(src)
    assert any("target_shape must be a tuple" in f.message for f in _errors(r)), r.findings
