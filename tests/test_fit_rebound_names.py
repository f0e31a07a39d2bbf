"""A functional model of several inputs and outputs whose input / output names the file binds again elsewhere (issue 9,
tf2torch: Deep Learning with Python's chapter 7, both editions: `priority = layers.Dense(1, name="priority")(features)`
builds the ticket model, then a subclass's call binds `priority` again and a later cell unpacks
`priority, department = model(...)`; `title = keras.Input(..., name="title")` alike). Keras keys a dict of losses,
metrics, labels and inputs by the name= of the layer (or keras.Input) whose output the keras.Model(...) statement
was given, so the name fwport reads is the binding that statement sees: the last one before it in its scope (each
binding counted: unpackings, for / with targets too), which must be a layer's call with a literal name=; where it is
anything else the compile and the fit stay errors, as before (a name bound once keeps reading its one binding).

Numbers: the program trained two epochs by Keras and by its translation from the same weights on fixed data
(shuffle=False; subprocesses, TensorFlow unimportable on the torch side): histories, evaluate and the kernels after
training agree within 2e-4 (runners.compare_fit).
"""
from __future__ import annotations

import textwrap

from runners import compare_fit, keras_and_torch
from test_fit_callbacks import errors, tx
from test_fit_multi_output import KEYS, TWO_IN, TWO_IN_DRIVER

# the names bound again: inside a function (its own scope), and at the module's top after the model by an unpacking
REBOUND = TWO_IN + '''

def split(batch):
    left = batch["left"]
    out_a = batch["out_a"]
    return left, out_a


out_a, out_b = None, None
right = None
'''


def test_names_bound_again_after_the_model_train_as_keras(tmp_path):
    trans = tx(REBOUND)
    assert errors(trans) == [], errors(trans)
    assert "fit(model, optimizer, loss_fn, [x, x[:, 2:]], [ya, yb]," in trans.output
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(REBOUND), trans.output, TWO_IN_DRIVER)
    compare_fit(keras_out, torch_out, KEYS)


def _errors_on(src: str, what: str) -> list[str]:
    return [m for _, m in errors(tx(src)) if m.startswith(what)]


def test_a_name_the_model_sees_bound_to_something_else_stays_an_error():
    # the output the model is given is an unnamed layer's (Keras names it dense_N), bound to the same name
    unnamed = REBOUND.replace('out_b = layers.Dense(1, activation="sigmoid", name="out_b")(h)\n',
                              'out_b = layers.Dense(1, activation="sigmoid", name="out_b")(h)\n'
                              'out_b = layers.Activation("linear")(out_b)\n')
    assert any("does not know the name of each" in m for m in _errors_on(unnamed, "model.compile"))
    # an unpacking before the layer's call: the call is the binding the model sees
    unpacked = REBOUND.replace('out_a = layers.Dense(1, name="out_a")(h)',
                               'out_a, spare = None, 1\nout_a = layers.Dense(1, name="out_a")(h)')
    assert errors(tx(unpacked)) == []
    # an input bound again, last to an unnamed keras.Input (Keras names it input_layer_N): the dict of inputs is refused
    unnamed_input = REBOUND.replace('right = keras.Input(shape=(2,), name="right")',
                                    'right = keras.Input(shape=(2,), name="right")\nright = keras.Input(shape=(2,))')
    assert any("does not know the names of model's inputs" in m for m in _errors_on(unnamed_input, "model.fit"))
