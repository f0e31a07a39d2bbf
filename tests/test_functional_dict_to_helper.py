"""A functional model's dict of keras.Input given to a helper function of the file (keras-io's structured-data
examples: ``features = encode_inputs(inputs)``, the helper looping over the dict's keys with a StringLookup on the
string features): the error names the helper and the dict, says what fwport follows (a helper called on tensors),
and, where some inputs are strings, that torch has no string tensors and their lookups are preprocessing."""
from __future__ import annotations

import textwrap

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

STRUCTURED = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

NUMERIC = ["age", "hours"]
CATEGORICAL = {"city": ["a", "b", "c"]}
FEATURES = NUMERIC + list(CATEGORICAL)


def create_model_inputs():
    inputs = {}
    for name in FEATURES:
        if name in NUMERIC:
            inputs[name] = layers.Input(name=name, shape=(), dtype=tf.float32)
        else:
            inputs[name] = layers.Input(name=name, shape=(), dtype=tf.string)
    return inputs


def encode_inputs(inputs):
    encoded = []
    for name in inputs:
        if name in CATEGORICAL:
            lookup = layers.StringLookup(vocabulary=CATEGORICAL[name], output_mode="binary")
            encoded.append(lookup(tf.expand_dims(inputs[name], -1)))
        else:
            encoded.append(tf.expand_dims(inputs[name], -1))
    return layers.concatenate(encoded)


def create_model():
    inputs = create_model_inputs()
    features = encode_inputs(inputs)
    outputs = layers.Dense(1)(features)
    return keras.Model(inputs=inputs, outputs=outputs)
'''


def _errors(src: str) -> list[tuple[str, str]]:
    src = textwrap.dedent(src).lstrip("\n")
    lines = src.split("\n")
    r = translate_source(src, "m.py", PACK)
    return [(lines[f.line - 1].strip(), f.message) for f in r.findings if f.severity.value == "error"]


def test_a_dict_of_inputs_given_to_a_helper_says_what_is_followed_and_that_strings_are_preprocessing():
    errors = _errors(STRUCTURED)
    at = [m for line, m in errors if line == "features = encode_inputs(inputs)"]
    assert len(at) == 1, errors
    assert at[0].startswith("encode_inputs(...) is given inputs, the model's dict of keras.Input (3 of them): fwport "
                            "follows a function of this file called on tensors"), at
    assert "encode_inputs(inputs[\"age\"], ...)" in at[0], at
    assert "and 'city' is a string input (dtype string): torch has no string tensors" in at[0], at
    assert not [m for _, m in errors if "used as a value" in m], errors
    assert any(m.startswith("this functional model is left as written") for _, m in errors)


def test_numeric_inputs_only_say_nothing_of_strings():
    src = STRUCTURED.replace("dtype=tf.string", "dtype=tf.int64")
    at = [m for line, m in _errors(src) if line == "features = encode_inputs(inputs)"]
    assert len(at) == 1 and "string" not in at[0], at


def test_a_literal_dict_of_inputs_is_named_too():
    src = STRUCTURED.replace("    inputs = create_model_inputs()\n",
                             '    inputs = {"age": keras.Input(shape=(), name="age"), '
                             '"city": keras.Input(shape=(), dtype="string", name="city")}\n')
    at = [m for line, m in _errors(src) if line == "features = encode_inputs(inputs)"]
    assert len(at) == 1 and "(2 of them)" in at[0] and "'city' is a string input" in at[0], at
