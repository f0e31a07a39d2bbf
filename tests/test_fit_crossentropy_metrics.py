"""compile(metrics=[...]) naming a cross-entropy (issue 9): the strings 'binary_crossentropy',
'categorical_crossentropy', 'sparse_categorical_crossentropy' (Keras: the loss function's mean over the epoch, a
MeanMetricWrapper of it) and the keras.metrics cross-entropy objects become written classes the generated fit /
evaluate update per batch. Where the model ends in the sigmoid / softmax whose logits the loop splits off for the
loss, the metrics take those logits too, as Keras's take the logits its activation keeps (saturated outputs tell
the two apart: the weights below are large enough that some do).

Numbers: each program is trained two epochs by Keras and by its translation from the same weights on fixed data
(shuffle=False; subprocesses, TensorFlow unimportable in the torch one), and the histories, evaluate results and
weights are compared. Sparse labels are given as (n, 1), which Keras squeezes.
"""
from __future__ import annotations

import numpy as np
from runners import compare_fit
from test_fit_callbacks import _run, errors, tx

from fwport.core.finding import Severity

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(2)
OUT = int(sys.argv[3]) if len(sys.argv) > 3 else OUTPUTS
W = [(rng.normal(size=(10, 16)) * SCALE).astype("float32"), np.zeros(16, "float32"),
     (rng.normal(size=(16, OUTPUTS)) * SCALE).astype("float32"), np.zeros(OUTPUTS, "float32")]
x = rng.normal(size=(60, 10)).astype("float32")
if LABELS == "binary":
    y = (x[:, :1] + 0.3 * x[:, 1:2] > 0).astype("float32")
    y[::7] = 1 - y[::7]  # some confidently wrong predictions: saturated losses
elif LABELS == "sparse":
    y = ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)).reshape(-1, 1)
    y[::7] = (y[::7] + 1) % 3
else:
    y = np.eye(3, dtype="float32")[(x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)]
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    model.set_weights(W)
    kernels = lambda: [l.get_weights()[0].tolist() for l in model.layers if l.get_weights()]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels()}))
'''

BINARY = '''
from tensorflow import keras
from tensorflow.keras import layers

OUTPUTS, SCALE, LABELS = 1, 6.0, "binary"
model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                          layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01), loss="binary_crossentropy",
              metrics=["binary_crossentropy", keras.metrics.BinaryCrossentropy(name="bce"), "accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, batch_size=25, verbose=0)
'''

SPARSE = '''
from tensorflow import keras
from tensorflow.keras import layers

OUTPUTS, SCALE, LABELS = 3, 4.0, "sparse"
model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                          layers.Dense(3, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
              metrics=["sparse_categorical_crossentropy", keras.metrics.SparseCategoricalCrossentropy(name="sce")])


def train(x, y):
    history = model.fit(x, y, validation_data=(x[:20], y[:20]), epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

# a loss that splits off no logits (mse): the metric takes the probabilities, Keras's values while they do not
# saturate (small weights here), and a warning says where they would differ
CATEGORICAL = '''
from tensorflow import keras
from tensorflow.keras import layers

OUTPUTS, SCALE, LABELS = 3, 0.4, "onehot"
model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                          layers.Dense(3, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss="mse",
              metrics=["categorical_crossentropy", keras.metrics.CategoricalCrossentropy(name="cce", label_smoothing=0.1)])


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_binary_crossentropy_metrics_take_the_logits_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, BINARY, DRIVER)
    names = ["binary_crossentropy", "bce", "accuracy"]
    compare_fit(keras_out, torch_out, ["loss", *names, "val_loss", *(f"val_{n}" for n in names)], atol=1e-5)
    kh = keras_out["history"]
    # saturated outputs: the loss of the logits is far above the clipped probabilities' (about 16 at most each)
    assert max(kh["binary_crossentropy"]) > 2.0
    np.testing.assert_allclose(kh["binary_crossentropy"], kh["bce"], rtol=1e-6)


def test_sparse_crossentropy_metrics_with_labels_of_shape_n_1(tmp_path):
    keras_out, torch_out = _run(tmp_path, SPARSE, DRIVER)
    names = ["sparse_categorical_crossentropy", "sce"]
    compare_fit(keras_out, torch_out, ["loss", *names, "val_loss", *(f"val_{n}" for n in names)], atol=1e-5)


def test_categorical_crossentropy_metric_of_probabilities(tmp_path):
    keras_out, torch_out = _run(tmp_path, CATEGORICAL, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "categorical_crossentropy", "cce"], atol=1e-5)
    kh = keras_out["history"]
    assert abs(kh["cce"][0] - kh["categorical_crossentropy"][0]) > 1e-3  # the label smoothing shows


def test_the_translation_says_what_it_does():
    out = tx(BINARY).output
    assert '"binary_crossentropy": BinaryCrossentropy()' in out and '"bce": BinaryCrossentropy()' in out
    assert "metric.update_state(yb, pred, logits=logits)" in out
    r = tx(CATEGORICAL)
    assert errors(r) == []
    assert "metric.update_state(yb, pred, logits=logits)" not in r.output  # no logits split off here
    assert any(f.severity is Severity.WARNING and "the metric 'categorical_crossentropy'" in f.message
               for f in r.findings)


# keras-io's / tensorflow docs' imbalanced classification: a model factory whose metrics= parameter defaults to a
# module-level list of metric objects, which no call gives
FACTORY = '''
from tensorflow import keras
from tensorflow.keras import layers

OUTPUTS, SCALE, LABELS = 1, 3.0, "binary"
METRICS = [
    keras.metrics.BinaryCrossentropy(name="cross entropy"),
    keras.metrics.MeanSquaredError(name="Brier score"),
    keras.metrics.AUC(name="prc", curve="PR"),
]


def make_model(metrics=METRICS, output_bias=None):
    model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                              layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=keras.losses.BinaryCrossentropy(),
                  metrics=metrics)
    return model


model = make_model()


def train(x, y):
    history = model.fit(x, y, validation_data=(x[:20], y[:20]), epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_a_factory_parameter_defaulting_to_a_metric_list(tmp_path):
    keras_out, torch_out = _run(tmp_path, FACTORY, DRIVER)
    names = ["cross entropy", "Brier score", "prc"]
    compare_fit(keras_out, torch_out, ["loss", *names, "val_loss", *(f"val_{n}" for n in names)], atol=1e-5)


def test_a_call_giving_the_metrics_parameter_keeps_the_error():
    r = tx(FACTORY.replace("model = make_model()", "model = make_model(metrics=['mse'])"))
    assert any("metrics=metrics: metrics is not a name bound once" in m for _, m in errors(r)), errors(r)
    r = tx(FACTORY.replace("model = make_model()", "model = make_model(METRICS[:1])"))
    assert any("metrics=metrics: metrics is not a name bound once" in m for _, m in errors(r)), errors(r)


def test_a_factory_model_keeps_the_errors_of_its_keras_attributes():
    # `model, optimizer, loss_fn = make_model()`: still the model, whose .layers an nn.Module lacks (it was silent)
    r = tx(FACTORY + "\nmodel.layers[-1].bias.assign([0.0])\nlast = model.layers[-1]\n")
    said = [m for _, m in errors(r) if "model.layers is a Keras model attribute" in m]
    assert len(said) == 2, errors(r)
    assert "model, optimizer, loss_fn, model_metrics = make_model()" in r.output
