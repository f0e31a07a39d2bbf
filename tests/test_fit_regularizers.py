"""Keras's weight regularizers in a compiled model's written fit / evaluate (issue 9): Keras adds the layers'
penalties (model.losses) to the loss it trains and reports; the translated model's classes get a
regularization_loss() (passes/regularizers.py) and the written loop adds their sum, so training and the
reported losses match Keras's. Trained two epochs by Keras and by the translation from the same weights
(subprocesses, TensorFlow unimportable in the torch one); histories, evaluate and the kernels compared."""
from __future__ import annotations

from test_fit_activation_logits import _compare
from test_fit_callbacks import DRIVER, _run, tx

# any model's Linear modules in order (a functional model's class is not iterable); Keras layers with weights
MODULES_DRIVER = DRIVER.replace("for m in model if", "for m in model.modules() if").replace(
    "for l in model.layers]", "for l in model.layers if l.get_weights()]")

REGULARIZED = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers, regularizers


def build():
    inputs = keras.Input(shape=(10,))
    x = layers.Dense(16, activation="tanh", kernel_regularizer=regularizers.l2(0.01))(inputs)
    outputs = layers.Dense(3, kernel_regularizer=regularizers.l2(0.05), bias_regularizer=regularizers.l1(0.01))(x)
    return keras.Model(inputs, outputs)


model = build()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_fit_adds_the_layers_regularizers_as_keras(tmp_path):
    trans = tx(REGULARIZED)
    assert "loss = loss + sum(m.regularization_loss() for m in model.modules()" in trans.output
    keras_out, torch_out = _run(tmp_path, REGULARIZED, MODULES_DRIVER)
    _compare(keras_out, torch_out)
    # the penalty counted: without it the reported losses are smaller than Keras's by the penalty (~0.1 here)
    unregularized = REGULARIZED.replace(", kernel_regularizer=regularizers.l2(0.01)", "").replace(
        ", kernel_regularizer=regularizers.l2(0.05), bias_regularizer=regularizers.l1(0.01)", "")
    (tmp_path / "plain").mkdir()
    plain_keras, _ = _run(tmp_path / "plain", unregularized, MODULES_DRIVER)
    assert keras_out["history"]["loss"][0] > plain_keras["history"]["loss"][0] + 0.02
