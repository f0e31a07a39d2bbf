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
from runners import compare_fit
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
    compare_fit(keras_out, torch_out, list(keras_out["history"]), atol=1e-5)


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


# a Sequential of feature maps (per-pixel classes) that the translation makes channels-first: its outputs are
# moved back to Keras's channels-last layout where the written loop reads them (the loss's class axis, accuracy,
# predict), where before the loss moved the last axis (the width) to dim 1: a shape error, or silently wrong
# where width and classes agree in size
SEGMENT = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(5, 3, 2)), layers.Conv2D(3, 1), layers.Activation("softmax")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)


def predicted(x):
    return model.predict(x, verbose=0).tolist()
'''

SEGMENT_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
k, b = (rng.normal(size=(1, 1, 2, 3)) * 3.0).astype("float32"), (rng.normal(size=3) * 0.1).astype("float32")
x = rng.normal(size=(8, 5, 3, 2)).astype("float32")
y = rng.integers(0, 3, size=(8, 5, 3))
if sys.argv[2] == "torch":
    import torch
    conv = model[0]
    x_cf = torch.zeros(1, 2, 5, 3)
    model(x_cf)  # builds the lazy module
    with torch.no_grad():
        conv.weight.copy_(torch.tensor(k).permute(3, 2, 0, 1))
        conv.bias.copy_(torch.tensor(b))
    kernels = lambda: [conv.weight.detach().permute(2, 3, 1, 0).numpy().tolist()]
else:
    model.layers[0].set_weights([k, b])
    kernels = lambda: [model.layers[0].get_weights()[0].tolist()]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels(), "predict": predicted(x[:3])}))
'''


def test_a_channels_first_feature_map_model_is_read_in_keras_layout(tmp_path):
    trans = tx(SEGMENT)
    assert "pred, logits = pred.movedim(1, -1), logits.movedim(1, -1)" in trans.output
    k, t = _run(tmp_path, SEGMENT, SEGMENT_DRIVER)
    _compare(k, t)
    assert np.asarray(k["predict"]).shape == (3, 5, 3, 3)  # channels-last, as Keras gives them
    np.testing.assert_allclose(t["predict"], k["predict"], rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(t["kernels"], k["kernels"], rtol=2e-4, atol=1e-5)
    assert 0.2 < k["history"]["accuracy"][0] < 0.8  # a per-pixel mean (it was a count per image: above 1)


def test_sparse_labels_of_shape_n_by_1_as_keras(tmp_path):
    # CIFAR-10's labels come as (n, 1): Keras takes them for a sparse cross-entropy and its accuracy; the loop
    # reshapes them to the outputs' positions (CrossEntropyLoss refused them; the accuracy compared (n,) with (n, 1))
    driver = SATURATED.replace("h, ev = train(x, y)", "h, ev = train(x, y[:, None])")
    assert driver != SATURATED
    keras_out, torch_out = _run(tmp_path, SOFTMAX, driver)
    _compare(keras_out, torch_out)
    assert 0.0 < keras_out["history"]["accuracy"][0] <= 1.0
