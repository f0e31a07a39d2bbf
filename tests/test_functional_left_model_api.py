"""Keras model methods and attributes on a functional model fwport leaves as written (model_api.py): the model stays a
Keras object, so ``model.get_layer(...)``, ``model.summary()``, ``model.trainable_variables``, ``model.save_weights``
stay Keras code with an error saying the model is left as written, not that "the translated model is an nn.Module"
(it is not), and never a torch idiom (``print(model, ...parameters())``, ``torch.save(model.state_dict())``) that would
fail on the Keras object. Models the pass translates keep their translations."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

LEFT = "is a functional model fwport leaves as written (the errors at its keras.Model(...) say why)"
NN_MODULE = "the translated model is an nn.Module"

MODULE_LEVEL = '''
import tensorflow as tf
import keras
from keras import layers

inputs = keras.Input(shape=(4,))
x = layers.Dense(8)(inputs)
x = layers.Lambda(lambda t: tf.py_function(lambda a: a, [t], tf.float32))(x)
model = keras.Model(inputs, x)
dense = model.get_layer("dense")
model.summary()
w = model.trainable_variables
n = model.count_params()
model.save_weights("a.weights.h5")
'''

BUILDERS = '''
import tensorflow as tf
import keras
from keras import layers


def build():
    inputs = keras.Input(shape=(4,))
    x = layers.Dense(8)(inputs)
    x = layers.Lambda(lambda t: tf.py_function(lambda a: a, [t], tf.float32))(x)
    return keras.Model(inputs, x)


def build_ok():
    inputs = keras.Input(shape=(4,))
    return keras.Model(inputs, layers.Dense(8)(inputs))


model = build()
ok = build_ok()
dense = model.get_layer("dense")
layer = build().get_layer("dense")
model.summary()
ok.summary()
print(ok.get_layer("dense"))
'''


def _translate(src: str):
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    lines = src.split("\n")
    errors = {}
    for f in r.findings:
        if f.severity.value == "error":
            errors.setdefault(lines[f.line - 1].strip(), []).append(f.message)
    return r.output, errors


@pytest.mark.parametrize("line, what", [
    ('dense = model.get_layer("dense")', "model.get_layer(...) is a Keras model method, left as written: model "),
    ("model.summary()", "model.summary(...) is a Keras model method, left as written: model "),
    ("w = model.trainable_variables", "model.trainable_variables is a Keras model attribute, left as written: model "),
    ("n = model.count_params()", "model.count_params(...) is a Keras model method, left as written: model "),
    ('model.save_weights("a.weights.h5")', "model.save_weights(...) is a Keras model method, left as written: model "),
])
def test_a_module_level_model_left_as_written_keeps_its_keras_calls(line, what):
    out, errors = _translate(MODULE_LEVEL)
    assert "\n" + line + "\n" in out, out  # as written: no torch idiom on a Keras object
    assert [m for m in errors[line] if m.startswith(what + LEFT)], errors[line]
    assert not [m for m in errors[line] if NN_MODULE in m], errors[line]


def test_a_builders_model_left_as_written_keeps_its_keras_calls_and_a_translated_ones_are_translated():
    out, errors = _translate(BUILDERS)
    for line in ('dense = model.get_layer("dense")', 'layer = build().get_layer("dense")', "model.summary()"):
        assert "\n" + line + "\n" in out, out
        assert any(LEFT in m and NN_MODULE not in m for m in errors[line]), errors[line]
    # the model the pass translates: its methods are an nn.Module's
    assert "ok.summary()" not in errors and 'print(ok, "\\nTrainable params:"' in out, out
    assert any(NN_MODULE in m for m in errors['print(ok.get_layer("dense"))'])
