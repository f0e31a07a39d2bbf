"""A cross-entropy of probabilities on a Sequential whose last layer is its sigmoid / softmax (issue 9): Keras
(TensorFlow backend) computes the loss from the logits its activation keeps on the outputs, so a saturated
prediction's loss keeps growing with its logit and its gradient stays alive. The written fit / evaluate take
logits = model[:-1](x) and the loss in its logits form (BCEWithLogitsLoss / CrossEntropyLoss), the outputs
model[-1](logits) for the metrics.

Numbers: each program is trained two epochs by Keras and by its translation from the same weights (the last
kernel scaled so that logits reach about ±40: saturated outputs) on fixed data (shuffle=False; subprocesses,
TensorFlow unimportable in the torch one); histories, evaluate and the kernels after training are compared.
The probability form (clipped to [1e-7, 1 - 1e-7]) would give a loss near 16 for those saturated, wrong outputs.
"""
from __future__ import annotations

import numpy as np
from test_fit_callbacks import DRIVER, _run, tx
from test_fit_metrics import BINARY_DRIVER

from fwport.core.pipeline import translate_source

SATURATED = DRIVER.replace("(rng.normal(size=(16, 3)) * 0.5)", "(rng.normal(size=(16, 3)) * 20.0)")
# (an Activation layer has no weights: the kernels of the layers that have them)
SATURATED_LAYERS = SATURATED.replace("for l in model.layers]", "for l in model.layers if l.get_weights()]")
SATURATED_BINARY = BINARY_DRIVER.replace("(rng.normal(size=(16, 1)) * 0.5)", "(rng.normal(size=(16, 1)) * 20.0)")

SOFTMAX = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                          layers.Dense(3, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

SIGMOID = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                          layers.Dense(1, activation="sigmoid")])
metrics = [keras.metrics.Precision(name="precision")]
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=keras.losses.BinaryCrossentropy(),
              metrics=metrics)


def train(x, y):
    history = model.fit(x, y, validation_data=(x[:24], y[:24]), epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, batch_size=20, verbose=0)
'''

# one-hot labels, an Activation layer of its own after the last Dense
ONE_HOT = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3),
                          layers.Activation("softmax")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="categorical_crossentropy")


def train(x, y):
    onehot = np.eye(3, dtype="float32")[y]
    history = model.fit(x, onehot, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, onehot, verbose=0)
'''


def _compare(keras_out, torch_out):
    kh, th = keras_out["history"], torch_out["history"]
    assert sorted(th) == sorted(kh)
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=2e-4, atol=1e-5, err_msg=k)
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=1e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)


def test_sparse_cross_entropy_of_saturated_softmax_outputs_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOFTMAX, SATURATED)
    _compare(keras_out, torch_out)
    assert keras_out["history"]["loss"][0] > 17  # beyond what clipped probabilities can give (-log 1e-7 = 16.1)


def test_binary_cross_entropy_of_saturated_sigmoid_outputs_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SIGMOID, SATURATED_BINARY)
    _compare(keras_out, torch_out)
    assert keras_out["history"]["loss"][0] > 5  # saturated, wrong outputs: far from a probability loss's values


def test_categorical_cross_entropy_after_an_activation_layer_as_keras(tmp_path):
    assert SATURATED_LAYERS != SATURATED
    keras_out, torch_out = _run(tmp_path, ONE_HOT, SATURATED_LAYERS)
    _compare(keras_out, torch_out)
    assert keras_out["history"]["loss"][0] > 17


def test_the_loop_takes_the_logits_and_the_loss_their_form():
    r = tx(SIGMOID)
    out = r.output
    assert "loss_fn = nn.BCEWithLogitsLoss()" in out and "nn.BCELoss" not in out
    assert out.count("logits = model[:-1](xb)") == 2 and out.count("pred = model[-1](logits)") == 2  # fit, evaluate
    assert not [f for f in r.findings if "of probabilities" in f.message]


def test_a_model_that_gains_layers_keeps_the_probabilities_and_the_warning():
    src = SIGMOID.replace("model.compile(", "model.add(layers.Lambda(lambda t: t * 0.5))\nmodel.compile(")
    r = tx(src)
    assert "logits = model[:-1]" not in r.output
    assert any("of probabilities" in f.message for f in r.findings)


# keras-io's mixup: the Sequential made by a builder function, the name bound to it twice
BUILT = '''
from tensorflow import keras
from tensorflow.keras import layers


def get_training_model():
    model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                              layers.Dense(3, activation="softmax")])
    return model


model = get_training_model()
model.compile(loss="categorical_crossentropy", optimizer="adam")
model = get_training_model()
model.compile(loss="categorical_crossentropy", optimizer="adam")


def train(x, y):
    return model.fit(x, y, epochs=1)
'''


def test_a_sequential_made_by_a_builder_function_gives_its_logits_too():
    r = tx(BUILT)
    assert "logits = model[:-1](xb)" in r.output and "nn.NLLLoss" not in r.output
    assert r.output.count("loss_fn = nn.CrossEntropyLoss()") == 2
    assert not [f for f in r.findings if "of probabilities" in f.message]
    # a builder that adds a layer after the list: its last module may be anything; the probabilities stay
    grown = BUILT.replace("    return model", "    model.add(layers.Dense(2))\n    return model")
    r = translate_source(grown.lstrip("\n"), "model.py")  # (not tx: this output is no fixpoint yet, .detach() added)
    assert "logits = model[:-1]" not in r.output
    assert any("of probabilities" in f.message for f in r.findings)
    # a name bound to a Sequential ending in softmax and to another model: not told which; the probabilities stay
    other = BUILT.replace("model = get_training_model()\nmodel.compile(", "model = keras.Sequential([layers.Dense(3)])\n"
                          "model.compile(", 1)
    assert "logits = model[:-1]" not in tx(other).output
