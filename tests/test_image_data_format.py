"""``backend.image_data_format()`` (keras resnet_model.py: ``if backend.image_data_format() == 'channels_first':``
in the builder and its helpers). Keras reads it from keras.json; a file that never calls set_image_data_format runs
with Keras's default 'channels_last' unless the user's keras.json says otherwise, which fwport also assumes for a
Conv2D's data_format=None: the test is decided as 'channels_last', with a warning saying so. A file that sets the
format keeps the error (the value read depends on where in the run)."""
from __future__ import annotations

import textwrap

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from test_functional_structures import verified

PACK = load_pack("tf2torch")

SRC = '''
from tensorflow import keras
from tensorflow.keras import backend, layers


def block(x, filters):
    x = layers.Conv2D(filters, 3, padding="same")(x)
    if backend.image_data_format() == "channels_first":
        x = layers.BatchNormalization(axis=1)(x)
    else:
        x = layers.BatchNormalization(axis=3)(x)
    return layers.ReLU()(x)


def build():
    inputs = keras.Input((8, 8, 3))
    x = block(inputs, 4)
    x = block(x, 6)
    if backend.image_data_format() == "channels_first":
        x = layers.GlobalAveragePooling2D(data_format="channels_first")(x)
    else:
        x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(2)(x))
'''
WARNING = "reads Keras's configuration: decided as 'channels_last', Keras's default, which this file never changes"


def _tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def test_the_image_data_format_is_decided_channels_last_with_a_warning(tmp_path):
    r = _tx(SRC)
    assert [f.message for f in r.findings if f.severity.value == "error"] == []
    warned = sorted(f.line for f in r.findings if f.severity.value == "warning" and WARNING in f.message)
    assert warned == [16, 17, 18], r.findings  # the helper's test at each call site, the builder's at its line
    assert "nn.BatchNorm2d(4, momentum=0.01, eps=0.001)" in r.output and "channels_first" not in r.output
    src = textwrap.dedent(SRC).lstrip("\n")
    grads = verified(tmp_path, src, r.output, "build()", ["float32[2,8,8,3]"])
    assert grads, grads


def test_a_file_that_sets_the_image_data_format_keeps_the_error():
    src = SRC.replace("def build():", 'keras.backend.set_image_data_format("channels_last")\n\n\ndef build():')
    r = _tx(src)
    errors = [f.message for f in r.findings if f.severity.value == "error"]
    assert any("cannot be decided where the model is built" in m for m in errors), errors
    assert not any(WARNING in f.message for f in r.findings)
    assert "class Build(nn.Module)" not in r.output


def test_outside_a_model_the_rule_warns_or_refuses():
    plain = "from tensorflow.keras import backend as K\n\naxis = 1 if K.image_data_format() == 'channels_first' else -1\n"
    r = _tx(plain)
    assert "axis = 1 if 'channels_last' == 'channels_first' else -1" in r.output
    assert [f.severity.value for f in r.findings if f.code == "default-differs"] == ["warning"]
    r = _tx(plain + "K.set_image_data_format('channels_first')\n")
    assert "K.image_data_format() == 'channels_first'" in r.output
    assert any(f.severity.value == "error" and "this file sets the image data format" in f.message for f in r.findings)
