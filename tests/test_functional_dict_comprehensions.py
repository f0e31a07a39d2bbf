"""A functional model's dict of inputs written as a comprehension (issue 8, func32; keras-io's multimodal_entailment:
``{feature: keras.Input(shape=(128,), dtype=tf.int32, name=feature) for feature in bert_input_features}``, the
structured-data examples' ``{f: keras.Input(shape=(1,), name=f) for f in FEATURES}``) over names known where the
model is built (a literal list, a module constant, a name the builder binds once to a literal and only iterates) is
the dict literal it builds; ``[inputs[f] for f in FEATURES]`` its tensors in that order, for a merge. Each followed
form is run against Keras (forward and gradients, weights moved by fwport verify); a comprehension over anything else
keeps an error that says what is followed, and the model is left as written."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages
from runners import Warm

PACK = load_pack("tf2torch")


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def verified(tmp_path, src: str, out: str, model: str, inputs: list[str]) -> dict:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(src).lstrip("\n"))
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=inputs,
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    return {e["name"]: e["source"] for e in cert["results"]["gradients"]}


HEAD = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers
'''

# the structured-data form: a module constant of feature names, the tensors concatenated in that order
FEATURES = HEAD + '''
FEATURES = ["age", "hours", "rate"]


def create_model(units=4):
    inputs = {f: keras.Input(shape=(1,), name=f) for f in FEATURES}
    x = layers.concatenate([inputs[f] for f in FEATURES])
    x = layers.Dense(units, activation="relu")(x)
    outputs = layers.Dense(1)(x)
    return keras.Model(inputs, outputs)
'''

# multimodal_entailment's form: the names a literal the builder binds, the keys not in sorted order
LOCAL_NAMES = HEAD + '''

def create_text_encoder(units=3):
    bert_input_features = ["word_ids", "mask", "type_ids"]
    inputs = {
        feature: keras.Input(shape=(5,), name=feature)
        for feature in bert_input_features
    }
    words = layers.Dense(units, name="words")(inputs["word_ids"])
    rest = layers.Dense(units, name="rest")(layers.concatenate([inputs["mask"], inputs["type_ids"]]))
    outputs = layers.Dense(2)(layers.concatenate([words, rest]))
    return keras.Model(inputs, outputs, name="text_encoder")
'''


def test_a_comprehension_over_a_module_constant_is_the_dict_of_inputs():
    r = tx(FEATURES)
    assert not error_messages(r), error_messages(r)
    out = r.output
    assert "def forward(self, inputs):" in out
    assert 'x = torch.cat([inputs["age"], inputs["hours"], inputs["rate"]], dim=-1)' in out
    assert "nn.Linear(3, units)" in out  # the sizes known: three inputs of one feature each
    (info,) = r.models
    assert info.input_keys == ("age", "hours", "rate")
    assert "keras" not in out and "tensorflow" not in out


def test_a_comprehension_over_a_module_constant_verifies(tmp_path):
    r = tx(FEATURES)
    grads = verified(tmp_path, FEATURES, r.output, "create_model", ["float32[4,1]"] * 3)
    assert grads["fc1.weight"] == "layers[4].kernel"  # three InputLayers, the Concatenate, then the Dense


def test_a_comprehension_over_a_list_the_builder_binds_verifies(tmp_path):
    r = tx(LOCAL_NAMES)
    assert not error_messages(r), error_messages(r)
    out = r.output
    assert 'words = self.words(inputs["word_ids"])' in out
    (info,) = r.models
    assert info.input_keys == ("word_ids", "mask", "type_ids")
    verified(tmp_path, LOCAL_NAMES, out, "create_text_encoder", ["float32[2,5]"] * 3)


def test_a_module_level_comprehension_verifies(tmp_path):
    src = HEAD + '''
NAMES = ("a", "b")
inputs = {n: keras.Input(shape=(4,), name=n) for n in NAMES}
x = layers.Add()([inputs["a"], inputs["b"]])
outputs = layers.Dense(2)(x)
model = keras.Model(inputs=inputs, outputs=outputs)
'''
    r = tx(src)
    assert not error_messages(r), error_messages(r)
    assert "def forward(self, inputs):" in r.output
    (info,) = r.models
    assert info.input_keys == ("a", "b")
    verified(tmp_path, src, r.output, "model", ["float32[3,4]", "float32[3,4]"])


@pytest.mark.parametrize("change", [
    # the list changed before the comprehension reads it: not the literal it was bound to
    ('    bert_input_features = ["word_ids", "mask", "type_ids"]\n',
     '    bert_input_features = ["word_ids", "mask", "type_ids"]\n    bert_input_features.append("extra")\n'),
    # a builder parameter: not known where the model is built
    ("def create_text_encoder(units=3):\n    bert_input_features = [\"word_ids\", \"mask\", \"type_ids\"]\n",
     "def create_text_encoder(bert_input_features, units=3):\n"),
    # a comprehension that filters
    ("for feature in bert_input_features\n", "for feature in bert_input_features if feature\n"),
])
def test_a_comprehension_not_followed_is_an_error_and_the_model_is_left_as_written(change):
    src = LOCAL_NAMES.replace(*change)
    assert src != LOCAL_NAMES
    r = tx(src)
    messages = error_messages(r)
    assert any(m.startswith("keras.Input(...) in a dict comprehension: fwport follows one whose key is its only "
                            "for's name, over a list of names known where the model is built") for m in messages), \
        messages
    assert any(m.startswith("this functional model is left as written") for m in messages), messages
    assert "keras.Model(inputs, outputs" in r.output  # the model as written


def test_a_list_comprehension_of_other_names_is_not_the_dict_s_tensors():
    # a name that is not an input of the dict: the merge keeps its error
    src = FEATURES.replace('FEATURES = ["age", "hours", "rate"]',
                           'FEATURES = ["age", "hours", "rate"]\nOTHER = ["age", "weight"]').replace(
        "[inputs[f] for f in FEATURES]", "[inputs[f] for f in OTHER]")
    r = tx(src)
    messages = error_messages(r)
    assert any(m.startswith("concatenate: fwport follows merges of a literal list of tensors") for m in messages), \
        messages
    assert any(m.startswith("this functional model is left as written") for m in messages), messages
