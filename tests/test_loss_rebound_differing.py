"""A loss object's name bound again to a loss that differs (another class, from_logits or reduction): keras-io's
writing_a_training_loop_from_scratch and intro_to_keras_for_researchers bind ``loss_fn`` before each training loop
(SparseCategoricalCrossentropy, then BinaryCrossentropy / MeanSquaredError), adamatch a ``loss_func`` of its own in
each function. Each call is adapted to the binding it reads (training._loss_sites): a module-level call the last
binding before its statement, a call in a top-level function the binding before the calls of that def (a function
defined again reads the binding of its own calls), a call in a function that binds the name itself that function's
bindings. Where which binding a call reads is not plain (the function called from another function), every binding
stays an error.

Numbers: the program trains at its top level under Keras 3 and translated (TensorFlow unimportable there) from the
same weights, through three bindings of ``loss_fn``; the losses of every step, the kernel after training, and the
two functions' local losses agree."""
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

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(3)])
optimizer = keras.optimizers.SGD(learning_rate=0.3)
data = np.random.default_rng(0).normal(size=(16, 10)).astype("float32")
x = tf.constant(data)
y = tf.constant((data[:, 0] > 0).astype("int64") + (data[:, 1] > 0.5).astype("int64"))
targets = x[:, :3] * 0.5
model.layers[0].set_weights([np.linspace(-1, 1, 30, dtype="float32").reshape(10, 3), np.zeros(3, "float32")])

loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def train_step(inputs, labels):
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(inputs, training=True))
    grads = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    return loss


first = []
for _ in range(3):
    first.append(float(train_step(x, y)))

loss_fn = keras.losses.MeanSquaredError()
second = []
for step in range(3):
    with tf.GradientTape() as tape:
        predictions = model(x, training=True)
        loss = loss_fn(targets, predictions)
    grads = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    second.append(float(loss))


def train_step(inputs, labels):
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(inputs, training=True))
    grads = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    return loss


third = []
for _ in range(2):
    third.append(float(train_step(x, targets)))


def class_loss(labels, logits):
    loss_func = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return loss_func(labels, logits)


def sample_losses(t, p):
    loss_func = keras.losses.MeanSquaredError(reduction=None)
    return loss_func(t, p)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
labels, logits = np.array([0, 2, 1]), np.array([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0], [0.5, -2.0, 0.0]], "float32")
if sys.argv[2] == "torch":
    import torch
    labels, logits = torch.tensor(labels), torch.tensor(logits)
    kernel = model[0].weight.detach().numpy().T.tolist()
else:
    kernel = model.layers[0].get_weights()[0].tolist()
out = lambda t: np.asarray(t.detach() if hasattr(t, "detach") else t).tolist()
print("RESULT " + json.dumps({"first": first, "second": second, "third": third, "kernel": kernel,
                              "class": out(class_loss(labels, logits)),
                              "samples": out(sample_losses(logits * 0.5, logits))}))
'''


def tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    again = translate_source(r.output, "model.py")
    assert again.output == r.output, "translating the output again must change nothing"
    return r


def errors(r) -> list[str]:
    return [f.message for f in r.findings if f.severity == Severity.ERROR]


def test_each_call_of_a_rebound_loss_reads_its_binding_as_keras(tmp_path):
    r = tx(SRC)
    assert errors(r) == [], errors(r)
    out = r.output
    assert out.count("loss_fn = nn.CrossEntropyLoss()") == 1 and out.count("loss_fn = nn.MSELoss()") == 1, out
    # the first def of train_step reads the cross-entropy, the second (called after the MSE binding) the MSE
    assert "loss = loss_fn(y_pred.movedim(-1, 1), labels.long().reshape(y_pred.shape[:-1]))" in out
    assert "loss = loss_fn(y_pred, labels.view_as(y_pred))" in out
    assert 'loss_func = nn.MSELoss(reduction="none")' in out and "loss_func(p, t.view_as(p)).mean(-1)" in out
    keras_out, torch_out = keras_and_torch(tmp_path, SRC, out, DRIVER)
    assert keras_out["first"][0] > keras_out["first"][-1] and keras_out["second"][0] > keras_out["second"][-1]
    for k in ("first", "second", "third", "class", "samples"):
        np.testing.assert_allclose(torch_out[k], keras_out[k], rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(torch_out["kernel"], keras_out["kernel"], rtol=1e-4, atol=1e-5)


def test_a_rebound_loss_read_where_the_binding_is_not_plain_stays_an_error():
    # train_step called from a function: which binding it reads depends on when that function runs
    src = SRC.replace("first = []\nfor _ in range(3):\n    first.append(float(train_step(x, y)))",
                      "def run():\n    return float(train_step(x, y))\n\n\nfirst = [run() for _ in range(3)]")
    assert src != SRC
    r = tx(src)
    assert sum("cannot follow this loss object's calls" in m for m in errors(r)) == 2, errors(r)
