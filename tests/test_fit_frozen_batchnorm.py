"""A frozen BatchNormalization in the written fit (issue 9): Keras 3 (and Keras 2 in TF 2) runs a BatchNormalization
layer whose trainable is False in inference mode, in fit too: it normalizes with its moving statistics and leaves them
as they are. The translation freezes the parameters (requires_grad_(False)) and the written fit puts every BatchNorm
whose parameters are all frozen in eval mode after its model.train(); unfrozen again (trainable = True), it trains in
batch statistics again, as Keras's.

Numbers: a frozen feature extractor holding a BatchNormalization under a trainable head, trained two epochs by Keras
and by its translation from the same weights on fixed data (subprocesses); the histories, evaluate, predictions and
weights are compared, and the moving statistics stay at their start on both sides.
"""
from __future__ import annotations

from runners import compare_fit
from test_fit_callbacks import _run, tx

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers

base = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8), layers.BatchNormalization()])
base.trainable = False
model = keras.Sequential([base, layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01), loss="mse")


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0), model.predict(x[:5], verbose=0)
'''

# a driver's start (model.py translated or not, in the folder sys.argv[1]; sys.argv[2] the side): a Dense(8)'s and a
# Dense(1)'s weights W, and data far from a BatchNormalization's moving statistics' start (0, 1)
FIT_DATA = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(5)
W = [rng.normal(size=(6, 8)).astype("float32"), rng.normal(size=8).astype("float32"),
     rng.normal(size=(8, 1)).astype("float32"), np.zeros(1, "float32")]
x = (rng.normal(size=(48, 6)) * 2 + 3).astype("float32")
y = x[:, :1] - x[:, 1:2]
'''

DRIVER = FIT_DATA + '''
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():  # the head's lazy input size, in eval mode (no statistics moved)
        model.eval()(torch.zeros(1, 6))
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    norm = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm1d))
    stats = lambda: [norm.running_mean.tolist(), norm.running_var.tolist()]
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    model.layers[0].layers[0].set_weights(W[:2])
    model.layers[1].set_weights(W[2:])
    norm = model.layers[0].layers[1]
    stats = lambda: [np.asarray(norm.moving_mean).tolist(), np.asarray(norm.moving_variance).tolist()]
    kernels = lambda: [model.layers[0].layers[0].get_weights()[0].tolist(), model.layers[1].get_weights()[0].tolist()]
h, ev, pred = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "predict": np.asarray(pred).tolist(), "kernels": kernels(),
                              "stats": stats()}))
'''


def test_a_frozen_batchnorm_runs_in_inference_mode_in_fit(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOURCE, DRIVER)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)
    assert keras_out["stats"] == torch_out["stats"] == [[0.0] * 8, [1.0] * 8]


def test_the_fit_says_it():
    r = tx(SOURCE)
    assert "                module.eval()" in r.output
    assert any("the written fit does" in f.message for f in r.findings)
    plain = tx(SOURCE.replace("base.trainable = False\n", ""))
    assert "module.eval()" not in plain.output
