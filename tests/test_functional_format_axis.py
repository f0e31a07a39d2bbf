"""A builder's BatchNormalization given ``axis=bn_axis`` (Keras's ResNet50 and its copies:
``bn_axis = 3 if backend.image_data_format() == 'channels_last' else 1``, or the same choice as an ``if``
statement decided where the model is built): the name holds a known int there (``_Builder.known_ints``; the
format read decided as Keras's default, 'channels_last', in a file that never sets it), written in place as the
literal axis (``_Builder._known_axis``), so the model is followed instead of left as written. A file that sets the
format keeps the error, as does an axis the builder does not know. Each translated model is verified against
Keras (weights moved by the records)."""
from __future__ import annotations

import textwrap

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_findings as _errors
from runners import keras3_verified

PACK = load_pack("tf2torch")

IFEXP = '''
from tensorflow import keras
from tensorflow.keras import layers, backend


def build(num_classes):
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    inputs = keras.Input(shape=(8, 8, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = layers.BatchNormalization(axis=bn_axis, momentum=0.9, epsilon=1e-5)(x)
    x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))
'''

IF_STATEMENT = '''
from tensorflow import keras
from tensorflow.keras import layers
from tensorflow.keras import backend as K


def build(num_classes):
    inputs = keras.Input(shape=(8, 8, 3))
    if K.image_data_format() == "channels_first":
        x = layers.Permute((3, 1, 2))(inputs)
        bn_axis = 1
    else:
        x = inputs
        bn_axis = 3
    x = layers.Conv2D(5, 3, padding="same")(x)
    x = layers.BatchNormalization(axis=bn_axis)(x)
    x = layers.Conv2D(4, 1)(x)
    x = layers.BatchNormalization(axis=bn_axis)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))
'''

HELPER = '''
from tensorflow import keras
from tensorflow.keras import layers, backend


def block(input_tensor, filters):
    if backend.image_data_format() == "channels_last":
        bn_axis = 3
    else:
        bn_axis = 1
    x = layers.Conv2D(filters, 3, padding="same")(input_tensor)
    x = layers.BatchNormalization(axis=bn_axis)(x)
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(filters, 1)(x)
    x = layers.BatchNormalization(axis=bn_axis)(x)
    return layers.add([x, input_tensor])


def build(num_classes):
    inputs = keras.Input(shape=(8, 8, 4))
    x = block(inputs, 4)
    x = block(x, 4)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))
'''

SETS_FORMAT = '''
from tensorflow import keras
from tensorflow.keras import layers, backend

backend.set_image_data_format("channels_first")


def build(num_classes):
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    inputs = keras.Input(shape=(3, 8, 8))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = layers.BatchNormalization(axis=bn_axis)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))
'''

PARAMETER = '''
from tensorflow import keras
from tensorflow.keras import layers


def build(num_classes, bn_axis):
    inputs = keras.Input(shape=(8, 8, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = layers.BatchNormalization(axis=bn_axis)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))


model = build(3, int(input()))
'''


def _tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def _verify(tmp_path, src: str, out: str, model: str, shape: str) -> dict:
    return keras3_verified(tmp_path, textwrap.dedent(src).lstrip("\n"), out, model, shape)


def test_bn_axis_chosen_by_a_conditional_expression_on_the_format_is_the_literal_axis(tmp_path):
    r = _tx(IFEXP)
    assert not _errors(r), _errors(r)
    assert "nn.BatchNorm2d(4, momentum=0.1, eps=1e-5)" in r.output and "bn_axis" not in r.output[
        r.output.index("nn.BatchNorm2d("):]
    assert "left as written" not in r.output and "keras" not in r.output
    warned = [f for f in r.findings if f.code == "default-differs" and "image_data_format" in f.message]
    assert [f.line for f in warned] == [6]  # once, at the read (the rule pass's warning on the kept statement)
    cert = _verify(tmp_path, IFEXP, r.output, "build(3)", "float32[2,8,8,3]")
    assert len(cert["results"]["gradients"]) == 2 + 2 + 2  # the convolution, the norm's gamma / beta, the Dense


def test_bn_axis_chosen_by_an_if_statement_on_the_format_is_the_literal_axis(tmp_path):
    r = _tx(IF_STATEMENT)
    assert not _errors(r), _errors(r)
    assert r.output.count("nn.BatchNorm2d(") == 2 and "Permute" not in r.output and "keras" not in r.output
    assert any(f.code == "if-decided" for f in r.findings)
    cert = _verify(tmp_path, IF_STATEMENT, r.output, "build(3)", "float32[2,8,8,3]")
    assert len(cert["results"]["gradients"]) == 2 * 2 + 2 * 2 + 2


def test_bn_axis_bound_under_a_helpers_if_on_the_format_is_the_literal_axis_below_it(tmp_path):
    # (the helper's decided if: its branch followed in its place, the statements below it reading its values)
    r = _tx(HELPER)
    assert not _errors(r), _errors(r)
    assert r.output.count("nn.BatchNorm2d(4") == 2 and "bn_axis" not in r.output and "keras" not in r.output
    cert = _verify(tmp_path, HELPER, r.output, "build(3)", "float32[2,8,8,4]")
    assert len(cert["results"]["gradients"]) == 2 * (2 * 2 + 2 * 2) + 2


def test_a_file_that_sets_the_format_keeps_bn_axis_an_error():
    r = _tx(SETS_FORMAT)
    said = [f.message for f in _errors(r)]
    assert any("axis=bn_axis" in m for m in said), said
    assert any("left as written" in m for m in said), said


def test_an_axis_the_builder_does_not_know_stays_an_error():
    r = _tx(PARAMETER)
    said = [f.message for f in _errors(r)]
    assert any("axis=bn_axis" in m for m in said), said
