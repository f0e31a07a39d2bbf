"""The functional pass on a model built inside a for / while / try statement: not followed, and the error at
keras.Model(...) says so and what to write (a builder function called in the block), which fwport then
translates. (A model built in a module-level ``with strategy.scope():`` block is followed: see
test_functional_with_blocks.py.)"""
from __future__ import annotations

import textwrap

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


IN_LOOP = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

strategy = tf.distribute.MirroredStrategy()
for _ in range(1):
    inputs = keras.Input(shape=(6,))
    x = layers.Dense(4, activation="relu")(inputs)
    model = keras.Model(inputs, layers.Dense(3)(x))
'''

BUILDER = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    inputs = keras.Input(shape=(6,))
    x = layers.Dense(4, activation="relu")(inputs)
    return keras.Model(inputs, layers.Dense(3)(x))


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
'''


def test_a_model_built_inside_a_for_statement_is_an_error_saying_what_to_write():
    r = tx(IN_LOOP)
    errs = [f for f in r.findings if f.severity.value == "error"]
    said = [f for f in errs if "built inside a for statement" in f.message]
    assert [f.line for f in said] == [9] and "def build_model()" in said[0].message
    assert any("left as written" in f.message for f in errs)
    assert not any("the inputs of keras.Model must be names" in f.message for f in errs)


def test_the_builder_the_error_suggests_is_translated():
    r = tx(BUILDER)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "nn.Linear(6, 4)" in r.output and "model = build_model()" in r.output and "keras" not in r.output
