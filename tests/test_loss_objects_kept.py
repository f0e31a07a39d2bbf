"""Keras loss objects a train_step class keeps and calls itself: one given to the model's own compile
(``compile(self, optimizer, loss_fn)`` → ``self.loss_fn = loss_fn``, as keras-io's GANs write it) and one
created as an attribute (``self.probe_loss = keras.losses.X(...)``, as its contrastive-learning examples
write it). Both become ``lambda y_true, y_pred: <torch loss>(<input>, <target>)``, called in Keras's order.

Numbers: the source trained by Keras and the translation by torch (TensorFlow unimportable there), from
the same weights; per-epoch losses and the kernels compared. The base ends in a sigmoid, as the GANs'
discriminators do: Keras then takes BinaryCrossentropy on the cached logits, which equals torch's clamped
BCELoss away from saturation (semantic-traps.md, "Keras cached logits").
"""
from __future__ import annotations

import numpy as np

from test_train_step import _run, errors, tx

SRC = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

base = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="tanh"),
                         layers.Dense(3, activation="sigmoid")])
head = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3)])


class Trainer(keras.Model):
    def __init__(self, base, head):
        super().__init__()
        self.base = base
        self.head = head
        self.probe_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def compile(self, optimizer, probe_optimizer, loss_fn):
        super().compile()
        self.base_optimizer = optimizer
        self.probe_optimizer = probe_optimizer
        self.loss_fn = loss_fn

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            probs = self.base(x, training=True)
            loss = self.loss_fn(tf.one_hot(y, 3), probs)
        grads = tape.gradient(loss, self.base.trainable_weights)
        self.base_optimizer.apply_gradients(zip(grads, self.base.trainable_weights))
        with tf.GradientTape() as tape:
            logits = self.head(x, training=True)
            probe = self.probe_loss(y, logits)
        grads = tape.gradient(probe, self.head.trainable_weights)
        self.probe_optimizer.apply_gradients(zip(grads, self.head.trainable_weights))
        return {"loss": loss, "probe": probe}


trainer = Trainer(base, head)
trainer.compile(
    optimizer=keras.optimizers.SGD(learning_rate=0.5),
    probe_optimizer=keras.optimizers.SGD(learning_rate=0.3),
    loss_fn=keras.losses.BinaryCrossentropy(),
)
'''


def test_loss_objects_kept_by_a_train_step_class_are_called_in_keras_order(tmp_path):
    r = tx(SRC)
    assert errors(r) == []
    assert "loss_fn=lambda y_true, y_pred: nn.BCELoss()(" in r.output
    assert "self.probe_loss = lambda y_true, y_pred: nn.CrossEntropyLoss()(" in r.output
    keras_out, torch_out = _run(tmp_path, SRC, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,)), ("k2", (4, 3)), ("b2", (3,))],
        "n": 12, "width": 4, "x_map": "\ny = rng.integers(0, 3, size=12).astype('int64')",
        "models": "(base, head)",
        "fit": "h = trainer.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)\nextra = None"})
    assert sorted(torch_out["history"]) == ["loss", "probe"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_kept_loss_object_called_otherwise_stays_an_error():
    """self.loss_fn(y, p, sample_weight) (keras-io's endpoint_layer_pattern) or a compile parameter also given
    on to super().compile: the lambda would not take it, so the loss object keeps its error naming the line."""
    src = SRC.replace("loss = self.loss_fn(tf.one_hot(y, 3), probs)",
                      "loss = self.loss_fn(tf.one_hot(y, 3), probs, sample_weight=None)")
    r = tx(src)
    assert [(line, m.split(":")[0]) for line, m in errors(r)] == [(42, "BinaryCrossentropy(...)")], errors(r)
    src = SRC.replace("super().compile()", "super().compile(loss=loss_fn)").replace(
        "self.probe_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)",
        "self.probe_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)\n        print(self.probe_loss.name)")
    lines = [line for line, m in errors(tx(src)) if "torch losses take (input, target)" in m]
    assert lines == [15, 43], errors(tx(src))
