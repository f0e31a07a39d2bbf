"""compile(loss=<a loss per output>, loss_weights=...) of a model of several outputs (issue 9): the written loop
does not compute it yet, so the compile and its fits stay refused (never a loop of one loss); the error gives the sum
Keras computes, each output's loss times its loss_weights= factor (1.0 where none is given), a dict's keys the
outputs' names, a list in the outputs' order."""
from __future__ import annotations

import textwrap

from helpers import error_findings

from fwport.core.pipeline import translate_source

SRC = '''
import keras
from keras import layers

inputs = keras.Input(shape=(4,))
h = layers.Dense(8, activation="tanh")(inputs)
out_a = layers.Dense(1, name="out_a")(h)
out_b = layers.Dense(1, activation="sigmoid", name="out_b")(h)
model = keras.Model(inputs, [out_a, out_b])
model.compile(optimizer="sgd", loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights={"out_b": 0.5})


def train(x, ya, yb):
    return model.fit(x, {"out_a": ya, "out_b": yb}, epochs=2, verbose=0).history
'''


def _compile_error(src: str) -> str:
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    errors = [f.message for f in error_findings(r) if f.message.startswith("model.compile(...)")]
    assert len(errors) == 1, error_findings(r)
    assert "model.compile(" in r.output and "model.fit(" in r.output  # left as written, with the errors
    return errors[0]


def test_a_dict_of_losses_is_refused_with_keras_weighted_sum():
    msg = _compile_error(SRC)
    assert "a loss per output" in msg and "each dict key the name of the output" in msg
    assert msg.endswith(': 1.0 * "mse"(out_a) + 0.5 * "binary_crossentropy"(out_b))'), msg


def test_a_list_of_losses_with_a_list_of_weights():
    src = SRC.replace('loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights={"out_b": 0.5}',
                      'loss=["mse", "mae"], loss_weights=[2, 0.25]')
    msg = _compile_error(src)
    assert "in the order of the model's outputs" in msg
    assert msg.endswith(': 2 * "mse"(outputs[0]) + 0.25 * "mae"(outputs[1]))'), msg


def test_weights_not_literal_give_the_rule_only():
    msg = _compile_error(SRC.replace('loss_weights={"out_b": 0.5}', "loss_weights=weights"))
    assert "1.0 where it has none" in msg and "* " not in msg.split("as Keras sums them")[-1]
