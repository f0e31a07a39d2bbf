"""Keras 3's custom ``train_step`` calling the model's own ``self.compute_loss(x=x, y=y, y_pred=y_pred)``
(the class does not define it): the written TrainStepModule gives compute_loss as Keras 3's Trainer does,
compile's loss of (y, y_pred[, sample_weight]) plus each of self.losses summed (the layers' weight
regularizer penalties). Numbers: the source trained by Keras 3, the translation by torch, from the same
weights; the loss each step returns (History) and the weights after the fit compared. (The step returns it
as "total": Keras 3's fit logs its own metrics instead of a step's results whose keys are exactly theirs, here
its never-updated "loss" tracker, which TrainStepModule does not reproduce.)
"""
from __future__ import annotations

import numpy as np

from test_train_step import _run, errors, tx

NET = '''
import tensorflow as tf
import keras
from keras import layers


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = layers.Dense(5, activation="tanh", kernel_regularizer=keras.regularizers.l2(0.05))
        self.d2 = layers.Dense(3)

    def call(self, x):
        return self.d2(self.d1(x))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"total": loss}


net = Net()
net.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3, momentum=0.5),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
'''

# keras-io's pattern with a sample weight (a mask of the labels)
WEIGHTED = NET.replace(
    "            loss = self.compute_loss(x=x, y=y, y_pred=y_pred)",
    "            mask = tf.cast(tf.math.not_equal(y, 0), \"float32\")\n"
    "            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=mask)")

LABELS = "\ny = np.argmax(x[:, :3] + 0.3 * x[:, 1:4], axis=1)"
DRIVER = {
    "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,))],
    "n": 8, "width": 4,
    "x_map": LABELS + "\n_ = net(x[:1] if 'torch' not in sys.argv[2] else __import__('torch').tensor(x[:1]))",
    "models": "([*net.modules()] if 'torch' in sys.argv[2] else net,)",
    "fit": "h = net.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)\nextra = None"}


def _same(keras_out, torch_out):
    assert sorted(keras_out["history"]) == sorted(torch_out["history"]) == ["total"]
    np.testing.assert_allclose(torch_out["history"]["total"], keras_out["history"]["total"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_compute_loss_with_a_regularizer_trains_as_keras3(tmp_path):
    keras_out, torch_out = _run(tmp_path, NET, DRIVER)
    _same(keras_out, torch_out)
    # the penalty counts: without it the loss would be the cross-entropy alone
    out = tx(NET).output
    assert "    def compute_loss(self, x=None, y=None, y_pred=None, training=True):" in out
    assert "        loss = self.compute_loss(x=x, y=y, y_pred=y_pred)\n" in out


def test_compute_loss_with_a_sample_weight_trains_as_keras3(tmp_path):
    assert WEIGHTED != NET
    keras_out, torch_out = _run(tmp_path, WEIGHTED, DRIVER)
    _same(keras_out, torch_out)
    out = tx(WEIGHTED).output
    assert "    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):" in out
    assert "def weighted_loss(loss_fn, input, target, sample_weight):" in out


def _messages(src: str) -> list[str]:
    return [m for _, m in errors(tx(src))]


def test_what_is_not_followed_stays_an_error():
    # compute_metrics: not translated
    msgs = _messages(NET.replace('        return {"total": loss}',
                                 '        return self.compute_metrics(x, y, y_pred)'))
    assert any(m.startswith("self.compute_metrics: ") for m in msgs), msgs
    # self.metrics beside compute_loss: Keras 3's "loss" tracker, which compute_loss does not update
    msgs = _messages(NET.replace('        return {"total": loss}',
                                 '        return {m.name: m.result() for m in self.metrics}'))
    assert any("compute_loss does not update" in m for m in msgs), msgs
    # arguments compute_loss does not take
    msgs = _messages(NET.replace("self.compute_loss(x=x, y=y, y_pred=y_pred)", "self.compute_loss(y, y_pred)"))
    assert any(m.startswith("self.compute_loss: ") and "no y or no y_pred" in m for m in msgs), msgs
    # no compile: no loss to compute
    msgs = _messages(NET.split("net = Net()")[0])
    assert any("no compile of a Net in this file" in m for m in msgs), msgs


def test_a_class_with_its_own_compute_loss_keeps_it():
    src = NET.replace("    def train_step(self, data):",
                      "    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):\n"
                      "        return tf.reduce_mean(tf.square(y_pred))\n\n    def train_step(self, data):")
    r = tx(src)
    assert "    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):\n" in r.output
    assert not any(m.startswith("self.compute_loss") for _, m in errors(r))
