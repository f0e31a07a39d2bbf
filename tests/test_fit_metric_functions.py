"""compile(metrics=[keras.metrics.binary_accuracy, ...]): a Keras metric *function* given itself (issue 9, tf2torch:
fchollet's first-edition 3.5, the TF docs' r1 keras guide, speech_commands). Keras wraps it in a MeanMetricWrapper
named after the function, the same numbers as the metric string of that name (tf_keras's mse / mae / mape aliases
are the functions mean_squared_error ... and are named so): the written loop's metric of that name.

Numbers: a model trained two epochs by Keras and by its translation from the same weights on fixed data
(subprocesses, TensorFlow unimportable on the torch side): histories (the metrics under the functions' names),
evaluate and the kernels agree.
"""
from __future__ import annotations

from runners import compare_fit
from test_fit_callbacks import _run, errors, tx

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers, metrics

model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8, activation="tanh"),
                          layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=keras.losses.binary_crossentropy,
              metrics=[metrics.binary_accuracy, keras.metrics.mae])


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(11)
W = [[rng.normal(size=s).astype("float32"), rng.normal(size=s[1]).astype("float32") * 0.1] for s in [(6, 8), (8, 1)]]
x = rng.normal(size=(40, 6)).astype("float32")
y = (x[:, :1] + 0.5 * x[:, 1:2] > 0).astype("float32")
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, W):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    dense = [l for l in model.layers if l.get_weights()]
    for l, w in zip(dense, W):
        l.set_weights(w)
    kernels = lambda: [l.get_weights()[0].tolist() for l in dense]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels()}))
'''


def test_metric_functions_train_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOURCE, DRIVER)
    compare_fit(keras_out, torch_out, ["binary_accuracy", "loss", "mean_absolute_error"], atol=1e-5)
    assert len(keras_out["evaluate"]) == 3
    assert 0 < keras_out["history"]["binary_accuracy"][-1] < 1


def test_the_translation_names_the_metrics_after_the_functions():
    r = tx(SOURCE)
    assert errors(r) == []
    assert "tensorflow" not in r.output  # (`from tensorflow.keras import metrics` goes: fit's `metrics` is its own)
    assert '"binary_accuracy": BinaryAccuracy()' in r.output and '"mean_absolute_error": MeanAbsoluteError()' in r.output
    # an alias is named after the function it is (keras.metrics.mse is mean_squared_error)
    alias = tx(SOURCE.replace("keras.metrics.mae", "keras.metrics.mse"))
    assert '"mean_squared_error": MeanSquaredError()' in alias.output


def test_another_metric_function_keeps_the_error():
    r = tx(SOURCE.replace("keras.metrics.mae", "keras.metrics.poisson"))
    assert any(f.severity.name == "ERROR" and "keras.metrics.poisson" in f.message for f in r.findings), \
        [f.message for f in r.findings]
