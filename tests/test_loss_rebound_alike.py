"""Loss objects the written loops call in torch's order. A loss object's name bound more than once, each time to a loss of the same class, from_logits and reduction
(deep-learning-with-python's chapter07: ``loss_fn = keras.losses.SparseCategoricalCrossentropy()`` in
one cell for a GradientTape loop, again in a later cell for a model's train_step). Whichever binding a call sees,
its arguments are adapted the same way (torch's (input, target) order, labels as the loss takes them), so each
binding becomes its torch loss and each call is adapted; before, the second binding made every call unfollowed
(an error on each binding). Bindings that differ (from_logits, the class, the reduction) stay errors. A loss object created and called at once,
``keras.losses.X(...)(y_true, y_pred)`` (TensorFlow's distributed tutorials, with reduction=NONE), is called as a
named one; before, it was refused.

Numbers: the program trains under Keras 3 and translated (TensorFlow unimportable there) from the same weights on
fixed data, and the losses of every step and the trained kernels agree."""
from __future__ import annotations

import textwrap

import numpy as np
from runners import keras_and_torch

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

REBOUND = '''
import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                          layers.Dense(3, activation="softmax")])
loss_fn = keras.losses.SparseCategoricalCrossentropy()
optimizer = keras.optimizers.SGD(learning_rate=0.3)


def train_step(inputs, targets):
    with tf.GradientTape() as tape:
        predictions = model(inputs, training=True)
        loss = loss_fn(targets, predictions)
    gradients = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(gradients, model.trainable_weights))
    return loss


loss_fn = keras.losses.SparseCategoricalCrossentropy()


def second_step(inputs, targets):
    with tf.GradientTape() as tape:
        loss = loss_fn(targets, model(inputs, training=True)) * 0.5
    gradients = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(gradients, model.trainable_weights))
    return loss
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
W = [(rng.normal(size=(10, 16)) * 0.5).astype("float32"), np.zeros(16, "float32"),
     (rng.normal(size=(16, 3)) * 0.5).astype("float32"), np.zeros(3, "float32")]
x = rng.normal(size=(32, 10)).astype("float32")
y = ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)).astype("int64")
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
    xs, ys = torch.tensor(x), torch.tensor(y)
else:
    model.set_weights(W)
    kernels = lambda: [l.get_weights()[0].tolist() for l in model.layers]
    xs, ys = x, y
losses = [float(train_step(xs[:16], ys[:16])) for _ in range(3)]
losses += [float(second_step(xs[16:], ys[16:])) for _ in range(3)]
print("RESULT " + json.dumps({"losses": losses, "kernels": kernels()}))
'''


def tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    again = translate_source(r.output, "model.py")
    assert again.output == r.output, "translating the output again must change nothing"
    return r


def errors(r) -> list[str]:
    return [f.message for f in r.findings if f.severity == Severity.ERROR]


def test_a_loss_rebound_alike_trains_as_keras(tmp_path):
    r = tx(REBOUND)
    assert errors(r) == [], errors(r)
    assert "keras" not in r.output.replace("Keras", "")
    assert r.output.count("loss_fn = nn.CrossEntropyLoss()") == 2, r.output
    keras_out, torch_out = keras_and_torch(tmp_path, REBOUND, r.output, DRIVER)
    assert len(keras_out["losses"]) == 6
    assert keras_out["losses"][0] != keras_out["losses"][2]  # it trains
    np.testing.assert_allclose(torch_out["losses"], keras_out["losses"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_rebindings_that_differ_stay_errors():
    for second in ("keras.losses.SparseCategoricalCrossentropy(from_logits=True)",
                   "keras.losses.CategoricalCrossentropy()",
                   "keras.losses.SparseCategoricalCrossentropy(reduction=None)"):
        src = REBOUND.replace("\nloss_fn = keras.losses.SparseCategoricalCrossentropy()\n\n\ndef second",
                              f"\nloss_fn = {second}\n\n\ndef second")
        assert src != REBOUND
        r = tx(src)
        assert any("cannot follow this loss object's calls" in m for m in errors(r)), (second, errors(r))


INLINE = '''
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(10,)), keras.layers.Dense(3)])
optimizer = keras.optimizers.SGD(learning_rate=0.3)


def train_step(x, y):
    with tf.GradientTape() as tape:
        predictions = model(x, training=True)
        per_example_loss = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)(y, predictions)
        loss = tf.reduce_sum(per_example_loss) / 16.0
        loss += keras.losses.MeanSquaredError()(tf.cast(y, "float32") * 0.5, predictions[:, 0])
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return per_example_loss


def second_step(x, y):
    return train_step(x, y)
'''

INLINE_DRIVER = DRIVER.replace("(rng.normal(size=(10, 16)) * 0.5).astype(\"float32\"), np.zeros(16, \"float32\"),\n     "
                               "(rng.normal(size=(16, 3)) * 0.5)", "(rng.normal(size=(10, 3)) * 0.5)").replace(
    ", np.zeros(3, \"float32\")]", ", np.zeros(3, \"float32\")]\nW = W[:1] + W[-1:]").replace(
    "(W[:2], W[2:])", "(W,)").replace("losses = [float(train_step(xs[:16], ys[:16])) for _ in range(3)]",
                                      "arr = lambda t: (t.detach() if hasattr(t, 'detach') else t).numpy().tolist()\n"
                                      "losses = [arr(train_step(xs[:16], ys[:16])) for _ in range(3)]").replace(
    "losses += [float(second_step(xs[16:], ys[16:])) for _ in range(3)]",
    "losses += [arr(second_step(xs[16:], ys[16:])) for _ in range(3)]")


def test_a_loss_object_created_and_called_at_once_trains_as_keras(tmp_path):
    assert INLINE_DRIVER.count("W = W[:1] + W[-1:]") == 1 and "(W,)" in INLINE_DRIVER
    r = tx(INLINE)
    assert errors(r) == [], errors(r)
    assert "keras" not in r.output.replace("Keras", "")
    assert 'nn.CrossEntropyLoss(reduction="none")(predictions' in r.output, r.output
    keras_out, torch_out = keras_and_torch(tmp_path, INLINE, r.output, INLINE_DRIVER)
    assert np.shape(keras_out["losses"]) == (6, 16)  # the per-sample losses of each step
    np.testing.assert_allclose(torch_out["losses"], keras_out["losses"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    assert not np.allclose(keras_out["losses"][0], keras_out["losses"][2])  # it trains


def test_a_loss_created_and_called_with_a_sample_weight_stays_an_error():
    r = tx(INLINE.replace("(y, predictions)\n", "(y, predictions, sample_weight=y)\n"))
    assert any("cannot follow this loss object's calls" in m for m in errors(r)), errors(r)
