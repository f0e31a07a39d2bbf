"""fit / evaluate / predict of a functional model of several inputs (issue 9): Keras takes x as a list of
arrays in the order of the model's inputs, or a dict keyed by the inputs' names; the written loops batch every
array with the same indices and call ``model(*xb)`` (the generated forward takes the inputs in that order).

Numbers: each program is trained two epochs by Keras and by its translation from the same weights on fixed
data (shuffle=False, validation_split: the held-out tail of every array; subprocesses, TensorFlow unimportable in
the torch one): the histories, evaluate, predict and the kernels after training are compared.
"""
from __future__ import annotations

from runners import compare_fit
from test_fit_callbacks import _run, errors, tx

from fwport.core.pipeline import translate_source

LISTED = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

a = keras.Input(shape=(6,), name="left")
b = keras.Input(shape=(4,), name="right")
h = layers.Concatenate()([layers.Dense(8, activation="tanh")(a), b])
out = layers.Dense(3)(h)
model = keras.Model([a, b], out)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(xa, xb, y):
    history = model.fit([xa, xb], y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate([xa, xb], y, verbose=0), model.predict([xa, xb], verbose=0)
'''

# the same model given a dict keyed by the inputs' names, in another order than the inputs'
KEYED = LISTED.replace("model.fit([xa, xb], y,", 'model.fit({"right": xb, "left": xa}, y,').replace(
    "model.evaluate([xa, xb], y,", 'model.evaluate({"right": xb, "left": xa}, y,')

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
W = [(rng.normal(size=(6, 8)) * 0.5).astype("float32"), np.zeros(8, "float32"),
     (rng.normal(size=(12, 3)) * 0.5).astype("float32"), np.zeros(3, "float32")]
xa = rng.normal(size=(64, 6)).astype("float32")
xb = rng.normal(size=(64, 4)).astype("float32")
y = ((xa[:, 0] > 0).astype("int64") + (xb[:, 1] > 0.5)).astype("int64")
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, bias) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(bias))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    model.set_weights(W)
    kernels = lambda: [w.tolist() for w in model.get_weights()[::2]]
h, ev, pred = train(xa, xb, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "predict": np.asarray(pred).tolist(),
                              "kernels": kernels()}))
'''


def _compare(keras_out, torch_out):
    compare_fit(keras_out, torch_out, ["accuracy", "loss", "val_accuracy", "val_loss"])


def test_a_list_of_inputs_trains_as_keras_trains_it(tmp_path):
    keras_out, torch_out = _run(tmp_path, LISTED, DRIVER)
    _compare(keras_out, torch_out)
    assert keras_out["history"]["loss"][1] < keras_out["history"]["loss"][0]  # it trained


def test_a_dict_of_inputs_is_matched_by_the_inputs_names(tmp_path):
    out = tx(KEYED).output
    assert "fit(model, optimizer, loss_fn, [xa, xb], y," in out
    assert "evaluate(model, loss_fn, [xa, xb], y," in out
    keras_out, torch_out = _run(tmp_path, KEYED, DRIVER)
    _compare(keras_out, torch_out)


def test_the_written_loop_batches_every_array_alike():
    out = tx(LISTED).output
    assert "xb, yb = [a[batch] for a in x], y[batch]" in out and "pred = model(*xb)" in out
    assert "x, y = [as_float32(a) for a in x], as_float32(y)" in out
    assert "predict(model, [xa, xb], verbose=0)" in out


def test_a_dict_without_the_inputs_names_keeps_the_error():
    src = KEYED.replace(', name="left"', "")
    errs = errors(tx(src))
    assert any("does not know the names of model's inputs" in m for _, m in errs), errs
    src = KEYED.replace('"right": xb', '"other": xb')
    errs = errors(tx(src))
    assert any("whose keys are not the names of model's inputs (left, right)" in m for _, m in errs), errs


def test_a_model_whose_inputs_fwport_does_not_know_keeps_the_error():
    src = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers


class Two(keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = layers.Dense(3)

    def call(self, inputs):
        return self.fc(inputs[0] + inputs[1])


model = Two()
model.compile(optimizer="sgd", loss="mse")


def train(xa, xb, y):
    return model.fit([xa, xb], y, epochs=2)
'''
    errs = errors(tx(src))
    assert any("fwport does not know how model takes them" in m for _, m in errs), errs
    # a list of another length than the model's inputs
    errs = errors(tx(LISTED.replace("model.fit([xa, xb], y,", "model.fit([xa, xb, xa], y,")))
    assert any("and model takes 2 inputs" in m for _, m in errs), errs


def test_the_binding_the_call_sees_decides():
    # keras-io's lstm_seq2seq: the model is trained, saved and loaded again under its name; the fit sees the
    # functional model of two inputs bound above it
    head = LISTED.split("\n\ndef train")[0]
    src = head + '''
xa, xb, y = np.ones((8, 6)), np.ones((8, 4)), np.zeros(8, "int64")
model.fit([xa, xb], y, epochs=2)
model.save("saved.keras")
model = keras.models.load_model("saved.keras")
'''
    assert "fit(model, optimizer, loss_fn, [xa, xb], y, epochs=2)" in tx(src).output
    # a function's call may run after the rebinding: it sees every binding of the module, and keeps the error
    errs = errors(tx(LISTED + '\nmodel = keras.models.load_model("saved.keras")\n'))
    assert any("fwport does not know how model takes them" in m for _, m in errs), errs
    # inside a function that binds the name itself to something fwport does not follow, the error stays
    src = LISTED.replace("def train(xa, xb, y):", '''def train(xa, xb, y):
    model = keras.models.load_model("saved.keras")''')
    errs = errors(translate_source(src.lstrip("\n"), "model.py"))
    assert any("fwport does not know how model takes them" in m for _, m in errs), errs


def test_a_model_of_several_outputs_keeps_the_errors():
    # Keras's predict gives one array per output, the loss is computed per output: the written loops do neither
    src = LISTED.replace("out = layers.Dense(3)(h)\nmodel = keras.Model([a, b], out)",
                         "out = layers.Dense(3)(h)\nmodel = keras.Model([a, b], [out, h])")
    errs = errors(translate_source(src.lstrip("\n"), "model.py"))
    # (its second output, h, has no layer name=: the compile of a loss per output is refused first)
    assert any("fwport does not know the name of each" in m for _, m in errs), errs
    # outputs named, the compile planned: the fit of several inputs and outputs is written out
    # (tests/test_fit_multi_output.py::test_several_inputs_and_several_outputs measures it)
    named = src.replace('h = layers.Concatenate()(', 'h = layers.Concatenate(name="h")(').replace(
        "out = layers.Dense(3)(h)", 'out = layers.Dense(3, name="out")(h)').replace(', metrics=["accuracy"]', "")
    r = translate_source(named.lstrip("\n"), "model.py")
    assert not any("model.fit(" in m for _, m in errors(r)), errors(r)
    assert "pred = model(*xb)" in r.output and 'loss_fn = {"out": ' in r.output
    assert any(m.startswith("model.predict(...) is a Keras model method") for _, m in errs), errs
    # a model of one input and several outputs, never compiled: its predict stays an error too
    src = """
import numpy as np
import keras
from keras import layers

a = keras.Input(shape=(4,))
h = layers.Dense(5)(a)
model = keras.Model(a, [layers.Dense(2)(h), h])
first, second = model.predict(np.ones((3, 4)))
"""
    errs = errors(translate_source(src.lstrip("\n"), "model.py"))
    assert any(m.startswith("model.predict(...) is a Keras model method") for _, m in errs), errs
