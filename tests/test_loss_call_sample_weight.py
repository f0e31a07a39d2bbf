"""Calls of a named loss object with Keras's other argument forms: ``loss_fn(y, logits, sample_weight=w)`` (keras-io's
masked_language_modeling, TensorFlow-2.x-Tutorials' A2C) and ``loss_object(y_true=y, y_pred=p)`` (TensorFlow's
custom_training_walkthrough). The arguments are bound to (y_true, y_pred, sample_weight); a weighted call of Keras's
mean reduction becomes ``weighted_loss(loss_fn, input, target, w)``, written into the file (the elements' losses times
the weights over their number, as Keras weighs; a weight of shape (n, 1) for per-sample losses of shape (n,) dropped to
(n,), as Keras squeezes it), the plain loss where the weight is a name holding None.

Numbers: a GradientTape step trained under Keras 3 and translated (TensorFlow unimportable there) from the same weights,
with weights of shape (n,), (n, 1) and None, and a regression loss called by keywords; the losses of every step and the
kernel after training agree."""
from __future__ import annotations

import textwrap

import numpy as np
from runners import keras_and_torch

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''
import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(4)])
optimizer = keras.optimizers.SGD(learning_rate=0.5)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
mse = keras.losses.MeanSquaredError()


def train_step(x, y, weights=None):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(y, logits, sample_weight=weights)
    grads = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    return loss


def regression_loss(x, targets, weights):
    return mse(y_true=targets, y_pred=model(x), sample_weight=weights)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(5)
K, b = (rng.normal(size=(6, 4)) * 0.5).astype("float32"), np.zeros(4, "float32")
x = rng.normal(size=(8, 6)).astype("float32")
y = rng.integers(0, 4, size=8)
w = rng.uniform(0.0, 3.0, size=8).astype("float32")
targets = rng.normal(size=(8, 4)).astype("float32")
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor(K).T)
        model[0].bias.copy_(torch.tensor(b))
    x, y, w, targets = (torch.tensor(a) for a in (x, y, w, targets))
    kernel = lambda: model[0].weight.detach().numpy().T.tolist()
else:
    model.layers[0].set_weights([K, b])
    kernel = lambda: model.layers[0].get_weights()[0].tolist()
losses = [float(train_step(x, y, w)) for _ in range(2)]
losses += [float(train_step(x, y, w[:, None])) for _ in range(2)]
losses += [float(train_step(x, y)) for _ in range(2)]
losses.append(float(regression_loss(x, targets, w)))
print("RESULT " + json.dumps({"losses": losses, "kernel": kernel()}))
'''


def test_weighted_and_keyword_loss_calls_train_as_keras(tmp_path):
    src = textwrap.dedent(SRC).lstrip("\\n")
    r = translate_source(src, "model.py")
    assert [f.message for f in r.findings if f.severity == Severity.ERROR] == []
    assert translate_source(r.output, "model.py").output == r.output
    assert "if weights is None else weighted_loss(loss_fn, logits.movedim(-1, 1), " in r.output
    assert "def weighted_loss(loss_fn, input, target, sample_weight):" in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, src, r.output, DRIVER)
    assert len(set(np.round(keras_out["losses"][:6], 4))) == 6  # it trains
    np.testing.assert_allclose(torch_out["losses"], keras_out["losses"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(torch_out["kernel"], keras_out["kernel"], rtol=1e-4, atol=1e-5)


def test_a_weighted_call_of_another_reduction_stays_an_error():
    src = textwrap.dedent(SRC).lstrip("\\n").replace("SparseCategoricalCrossentropy(from_logits=True)",
                                                     "SparseCategoricalCrossentropy(from_logits=True, reduction=None)")
    r = translate_source(src, "model.py")
    found = [f.message for f in r.findings if f.severity == Severity.ERROR]
    assert any("only loss(y_true, y_pred[, sample_weight]) is translated" in m for m in found), found
