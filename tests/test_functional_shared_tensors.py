"""A module-level functional model built over tensors of a model above it (issue 8): chapter07's
``new_model = keras.Model([title, text_body, tags], [priority, department, difficulty])`` over the ticket
classifier's outputs and ``features = model.layers[4].output``; keras-io's transformer, ``keras.Model([encoder_inputs,
decoder_inputs], decoder([decoder_inputs, encoder_outputs]))`` over the encoder's output, calling the decoder model on
a list. Both models are translated: the model above gets a method computing the tensors read (``upto_...``), the
model below calls it on that very module (its layers shared, as Keras shares them) and its weight records name the
shared layers at their Keras indices. What cannot be followed so stays an error, never two calls where Keras has one
graph."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages
from runners import keras3_verified

PACK = load_pack("tf2torch")

TICKETS = '''
import keras
from keras import layers

title = keras.Input(shape=(20,), name="title")
tags = keras.Input(shape=(5,), name="tags")
features = layers.Concatenate()([title, tags])
features = layers.Dense(16, activation="relu")(features)
features = layers.Dropout(0.3)(features)
priority = layers.Dense(1, activation="sigmoid", name="priority")(features)
department = layers.Dense(4, activation="softmax", name="department")(features)
model = keras.Model(inputs=[title, tags], outputs=[priority, department])

model.summary()

hidden = model.layers[4].output
difficulty = layers.Dense(3, activation="softmax", name="difficulty")(hidden)
new_model = keras.Model(inputs=[title, tags], outputs=[priority, department, difficulty])
'''

SEQ2SEQ = '''
import keras
from keras import layers

encoder_inputs = keras.Input(shape=(6, 8), name="encoder_inputs")
x = layers.Dense(16, activation="relu")(encoder_inputs)
encoder_outputs = layers.Dense(12)(x)
encoder = keras.Model(encoder_inputs, encoder_outputs)

decoder_inputs = keras.Input(shape=(6, 8), name="decoder_inputs")
encoded_seq_inputs = keras.Input(shape=(6, 12), name="decoder_state_inputs")
x = layers.Dense(12)(decoder_inputs)
x = layers.Add()([x, encoded_seq_inputs])
x = layers.Dropout(0.5)(x)
decoder_outputs = layers.Dense(5, activation="softmax")(x)
decoder = keras.Model([decoder_inputs, encoded_seq_inputs], decoder_outputs)

decoder_outputs = decoder([decoder_inputs, encoder_outputs])
transformer = keras.Model([encoder_inputs, decoder_inputs], decoder_outputs, name="transformer")
'''


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def records(r, scope: str) -> list[tuple[str, str]]:
    return [(x.source, x.target) for x in r.layers if x.scope == scope]


def test_a_model_over_the_tensors_of_a_model_above_calls_a_method_of_it():
    r = tr(TICKETS)
    assert error_messages(r) == []
    out = r.output
    # one method, one call, the names of the model above in it (hidden is its features)
    assert "    def upto_department_priority_features(self, title, tags):\n" in out
    assert "        department, priority, hidden = self.model.upto_department_priority_features(title, tags)\n" in out
    assert "self.model = model" in out and "keras" not in out and ".layers[4]" not in out
    assert out.count("nn.Linear(16, 1)") == 1  # the shared layers: created once, in the model above
    # the shared layers at the indices Keras's new_model.layers gives them, below the model's attribute
    assert records(r, "new_model") == [("layers[3]", "model.fc"), ("layers[5]", "model.priority"),
                                       ("layers[6]", "model.department"), ("layers[7]", "difficulty")]


def test_a_model_called_on_a_list_and_a_tensor_of_a_model_above():
    r = tr(SEQ2SEQ)
    assert error_messages(r) == []
    out = r.output
    assert "encoder_outputs = self.encoder.upto_encoder_outputs(encoder_inputs)" in out
    assert "decoder_outputs = self.decoder(decoder_inputs, encoder_outputs)" in out
    assert records(r, "transformer") == [("layers[1]", "encoder.fc1"), ("layers[3]", "encoder.fc2"),
                                         ("layers[4].layers[1]", "decoder.fc1"), ("layers[4].layers[5]", "decoder.fc2")]


def test_what_is_not_followed_stays_an_error():
    # tensors of two models above: two calls would draw two dropout masks where Keras's graph draws one
    two = tr(TICKETS + '''
urgency = layers.Dense(2, name="urgency")(difficulty)
third = keras.Model(inputs=[title, tags], outputs=[urgency, priority])
''')
    assert "class Third" not in two.output and any(m.startswith("difficulty: ") for m in error_messages(two))
    assert any(m.startswith("this functional model is left as written") for m in error_messages(two))
    # the output of a layer whose output the model above binds to a name it binds again
    again = tr(TICKETS.replace("model.layers[4].output", "model.layers[3].output"))
    assert any("model.layers[3].output: the output of a layer of model, a model above" in m
               for m in error_messages(again)), error_messages(again)
    # the decoder given fewer tensors than it has inputs
    short = tr(SEQ2SEQ.replace("decoder([decoder_inputs, encoder_outputs])", "decoder([decoder_inputs])"))
    assert any("called on a list of tensors" in m and "1 tensors for its 2 inputs" in m for m in error_messages(short))
    # the model below not given the input the tensors of the model above depend on (Keras refuses it too)
    missing = tr(SEQ2SEQ.replace("keras.Model([encoder_inputs, decoder_inputs], decoder_outputs",
                                 "keras.Model([decoder_inputs], decoder_outputs"))
    assert any("computed from encoder_inputs, which this model does not take" in m for m in error_messages(missing))
    assert "upto_" not in missing.output  # (no method for a model left as written)


@pytest.mark.parametrize("src, model, shapes", [
    (TICKETS, "model", ["float32[4,20]", "float32[4,5]"]),
    (TICKETS, "new_model", ["float32[4,20]", "float32[4,5]"]),
    (SEQ2SEQ, "encoder", ["float32[3,6,8]"]),
    (SEQ2SEQ, "transformer", ["float32[3,6,8]", "float32[3,6,8]"]),
])
def test_the_models_compute_and_train_as_keras(tmp_path, src, model, shapes):
    cert = keras3_verified(tmp_path, textwrap.dedent(src).lstrip("\n"), tr(src).output, model, shapes,
                           checks=("forward", "grad", "step"))
    weights = {"model": 6, "new_model": 8, "encoder": 4, "transformer": 8}[model]
    assert len(cert["results"]["gradients"]) == weights  # the shared layers' weights mapped and compared too
