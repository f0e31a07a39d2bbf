"""A functional model that calls on its tensors a name fwport does not follow as a layer says what binds the name
(real code: a TensorFlow Hub / TextVectorization / keras_hub layer bound above, a Sequential factory given run-time
sizes, the variable of a loop over a list of layers, a Python builtin, a size read from a tensor whose size is not
known there) instead of "only helper functions defined at the top of this file are followed"; the model is still
left as written under its error."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors

HEAD = '''
import tensorflow as tf
import tensorflow_hub as hub
from tensorflow import keras
from tensorflow.keras import layers

'''

CASES = {
    "bound in a module-level model": ('''
encoder = hub.KerasLayer("https://tfhub.dev/some/encoder/1")
inputs = keras.Input(shape=(8,))
x = encoder(inputs)
outputs = layers.Dense(2)(x)
model = keras.Model(inputs, outputs)
''', "encoder is bound to `hub.KerasLayer("),
    "a loop variable": ('''
def build(stack):
    inputs = keras.Input(shape=(8,))
    x = inputs
    for block in stack:
        x = block(x)
    return keras.Model(inputs, x)
''', "block is the variable of `for ... in stack`"),
    "a builtin": ('''
def build():
    a = keras.Input(shape=(8,))
    b = keras.Input(shape=(8,))
    x = sum([a, b])
    return keras.Model([a, b], x)
''', "the Python builtin sum(...) on tensors of the model is not followed"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unfollowed_callee_is_named_with_what_binds_it(case):
    src, expected = CASES[case]
    r = translate_source(HEAD + src, "m.py", "tf2torch")
    errors = _errors(r)
    assert any(expected in e for e in errors), errors
    assert not any("only helper functions defined at the top" in e for e in errors), errors
    assert any("this functional model is left as written" in e for e in errors), errors
    assert "keras.Model(" in r.output and "(nn.Module):" not in r.output, r.output


def test_a_size_of_an_unknown_axis_read_by_a_builtin_is_named_as_such():
    src = HEAD + '''
def build():
    inputs = keras.Input(shape=(None, None, 3))
    x = layers.Conv2D(4, 3)(inputs)
    n = int(x.shape[1] * x.shape[2] / 2)
    x = layers.Reshape((2, n, 4))(x)
    outputs = layers.Dense(2)(x)
    return keras.Model(inputs, outputs)
'''
    errors = _errors(translate_source(src, "m.py", "tf2torch"))
    assert any(e.startswith("int(x.shape[1] * x.shape[2] / 2): a size of a tensor of the model that fwport does not "
                            "know where the model is built (x: (None, None, None, 4)") for e in errors), errors
