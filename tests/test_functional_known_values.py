"""Values the functional pass reads where the model is built. A helper that unpacks a parameter given a list or tuple of literals at its call
(ResNet's ``filters1, filters2, filters3 = filters`` in identity_block / conv_block, called as
``identity_block(x, 3, [64, 64, 256], ...)``): each name is the item the call gives, written in place as a
literal argument is, one class per variant. A Reshape's target_shape held by a builder name bound to a tuple of
known ints (captcha_ocr's ``new_shape = ((img_width // 4), (img_height // 4) * 64)``). A helper's list of known
values only iterated and indexed (adamatch's ``conv_params = [[3, 3, stride, "same"], ...]`` in wide_basic), a
helper's alias of a parameter (``n_bottleneck_plane = n_output_plane``), and a helper's argument that is an item of
a builder's list of known ints (``n_stages[1]``). Each model is verified against Keras (weights moved by the records)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_findings as _errors
from runners import keras3_verified

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


def _verify(tmp_path, src: str, out: str, model: str, shape: str) -> dict:
    return keras3_verified(tmp_path, textwrap.dedent(src).lstrip("\n"), out, model, shape)


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
    assert any("`filters1, filters2, filters3 = filters` is not followed" in m for m in msgs), msgs  # quoted as written (tfleft)
    assert "class Build(" not in r.output


def test_an_unpacking_of_the_wrong_length_stays_refused():
    r = _tx(RESNET.replace("[4, 5, 6]", "[4, 5]"))
    msgs = [f.message for f in _errors(r)]
    assert any("`filters1, filters2, filters3 = filters` is not followed" in m for m in msgs), msgs


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


WRN = '''
from tensorflow import keras
from tensorflow.keras import layers

DEPTH = 16
WIDTH_MULT = 2


def wide_basic(x, n_input_plane, n_output_plane, stride):
    conv_params = [[3, 3, stride, "same"], [3, 3, (1, 1), "same"]]
    n_bottleneck_plane = n_output_plane
    for i, v in enumerate(conv_params):
        if i == 0:
            if n_input_plane != n_output_plane:
                x = layers.BatchNormalization()(x)
                x = layers.Activation("relu")(x)
                convs = x
            else:
                convs = layers.BatchNormalization()(x)
                convs = layers.Activation("relu")(convs)
            convs = layers.Conv2D(n_bottleneck_plane, (v[0], v[1]), strides=v[2], padding=v[3], use_bias=False)(convs)
        else:
            convs = layers.BatchNormalization()(convs)
            convs = layers.Activation("relu")(convs)
            convs = layers.Conv2D(n_bottleneck_plane, (v[0], v[1]), strides=v[2], padding=v[3], use_bias=False)(convs)
    if n_input_plane != n_output_plane:
        shortcut = layers.Conv2D(n_output_plane, (1, 1), strides=stride, padding="same", use_bias=False)(x)
    else:
        shortcut = x
    return layers.Add()([convs, shortcut])


def block_series(x, n_input_plane, n_output_plane, count, stride):
    x = wide_basic(x, n_input_plane, n_output_plane, stride)
    for i in range(2, int(count + 1)):
        x = wide_basic(x, n_output_plane, n_output_plane, stride=1)
    return x


def get_network():
    n = (DEPTH - 4) / 6
    n_stages = [4, 3 * WIDTH_MULT]
    inputs = keras.Input(shape=(8, 8, 3))
    x = layers.Conv2D(n_stages[0], (3, 3), padding="same")(inputs)
    x = block_series(x, n_stages[0], n_stages[0], 2, (1, 1))
    x = block_series(x, n_input_plane=n_stages[0], n_output_plane=n_stages[1], count=n, stride=(2, 2))
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''


def test_a_helpers_list_of_known_values_iterated_and_indexed_is_written_out_and_computes_what_keras_does(tmp_path):
    r = _tx(WRN)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "conv_params" not in out and "v[" not in out and "n_bottleneck_plane" not in out
    assert "n_stages" not in out[out.index("class WideBasic"):out.index("class Network(")]
    assert "nn.Conv2d(4, 6, (3, 3), stride=(2, 2), bias=False)" in out  # stride (2, 2) taken from the list
    cert = _verify(tmp_path, WRN, out, "get_network()", "float32[2,8,8,3]")
    assert len(cert["results"]["gradients"]) == 2 + 4 * (2 * 2 + 2) + 1 + 2  # 4 blocks of 2 convs, 2 norms


@pytest.mark.parametrize("change", [
    ("    for i, v in enumerate(conv_params):", "    conv_params.append([3, 3, 1, 'same'])\n    for i, v in enumerate(conv_params):"),
    ("    for i, v in enumerate(conv_params):", "    conv_params[0] = [3, 3, 1, 'same']\n    for i, v in enumerate(conv_params):"),
], ids=["appended", "item-assigned"])
def test_a_helpers_list_changed_below_stays_refused(change):
    r = _tx(WRN.replace(*change))
    msgs = [f.message for f in _errors(r)]
    assert any("`conv_params = [[3, 3, stride, \"same\"], [3, 3, (1, 1), \"same\"]]` is not followed" in m
               for m in msgs), msgs


# a name bound again below in a helper (width = width * 2): the statements below read the new value (they were
# given the first one: nn.Linear(5, 3) where Keras builds Dense(6), with no finding)
REBOUND = '''
from tensorflow import keras
from tensorflow.keras import layers


def block(x, units):
    width = units
    width = width * 2
    return layers.Dense(width)(x)


def build():
    inputs = keras.Input(shape=(5,))
    outputs = block(inputs, 3)
    return keras.Model(inputs, outputs)
'''


def test_a_helpers_known_value_bound_again_is_read_with_its_new_value(tmp_path):
    r = _tx(REBOUND)
    assert not _errors(r), _errors(r)
    assert "nn.Linear(5, 6)" in r.output
    _verify(tmp_path, REBOUND, r.output, "build()", "float32[2,5]")
    stepped = _tx(REBOUND.replace("width = width * 2", "width += 3"))  # not a plain assignment: refused, not wrong
    assert "nn.Linear(5, 3)" not in stepped.output
    assert any("is not followed inside a helper" in f.message and f.line == 13 for f in _errors(stepped)), \
        stepped.findings
    # the statement as written in the message, not the copy with the known value written in (`3 += 3`)
    assert any("`width += 3` is not followed" in f.message for f in _errors(stepped)), stepped.findings


# the same for a size unpacked from x.shape and bound again (channel = channel * 2): Dense(6), not Dense(3)
REBOUND_SIZE = '''
from tensorflow import keras
from tensorflow.keras import layers


def block(x):
    _, n, c = x.shape
    c = c * 2
    return layers.Dense(c)(x)


def build():
    inputs = keras.Input(shape=(4, 3))
    outputs = block(inputs)
    return keras.Model(inputs, outputs)
'''


def test_a_helpers_unpacked_size_bound_again_is_read_with_its_new_value(tmp_path):
    r = _tx(REBOUND_SIZE)
    assert not _errors(r), _errors(r)
    assert "nn.Linear(3, 6)" in r.output
    _verify(tmp_path, REBOUND_SIZE, r.output, "build()", "float32[2,4,3]")
    stepped = _tx(REBOUND_SIZE.replace("c = c * 2", "c += 3"))
    assert "nn.Linear(3, 3)" not in stepped.output
    assert any(f.line == 13 for f in _errors(stepped)), stepped.findings


def test_a_helper_statement_refused_is_quoted_as_written_not_with_the_call_sites_arguments():
    # resnet_model.py: `conv_name_base = 'res' + str(stage) + block + '_branch'` was quoted with the literal arguments
    # of the call site written in (`'res' + str(2) + 'a' + '_branch'`)
    # (str() is computed where the model is built now: repr() is not)
    src = REBOUND.replace("    width = units\n    width = width * 2\n", "    label = 'res' + repr(units)\n    width = units\n")
    r = _tx(src)
    assert any("`label = 'res' + repr(units)` is not followed" in f.message for f in _errors(r)), r.findings


NAMES = '''
from tensorflow import keras
from tensorflow.keras import layers


def identity_block(input_tensor, filters, stage, block):
    conv_name_base = 'res' + str(stage) + block + '_branch'
    bn_name_base = 'bn' + str(stage) + block + '_branch'
    x = layers.Conv2D(filters, (1, 1), use_bias=False, name=conv_name_base + '2a')(input_tensor)
    x = layers.BatchNormalization(axis=3, name=bn_name_base + '2a')(x)
    x = layers.Activation('relu')(x)
    x = layers.Conv2D(filters, (3, 3), padding='same', name=conv_name_base + '2b')(x)
    x = layers.add([x, input_tensor])
    return layers.Activation('relu')(x)


def build():
    inputs = layers.Input(shape=(8, 8, 4))
    x = identity_block(inputs, 4, stage=2, block='a')
    x = identity_block(x, 4, stage=2, block='b')
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''


def test_a_helpers_layer_names_built_with_str_are_computed_and_the_model_computes_what_keras_does(tmp_path):
    # tensorflow/examples' resnet_model.py: `conv_name_base = 'res' + str(stage) + block + '_branch'` (16 errors)
    r = _tx(NAMES)
    assert not _errors(r), r.findings
    assert "class IdentityBlock(nn.Module)" in r.output and "conv_name_base" not in r.output
    cert = _verify(tmp_path, NAMES, r.output, "build()", "float32[2,8,8,4]")
    assert len(cert["results"]["gradients"]) == 12  # (two blocks: conv, bn gamma and beta, conv and bias; the head)
