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


FROZEN = '''
import keras
from keras import layers


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.base = layers.Dense(8, kernel_regularizer=keras.regularizers.l2(0.01))
        self.head = layers.Dense(1)

    def call(self, x):
        return self.head(self.base(x))


model = Net()
model.base.trainable = False
model.compile(optimizer="adam", loss="mse")
'''


def test_a_frozen_layers_penalty_is_a_warning_in_keras3_only():
    """Keras 3 sums the regularizers of trainable weights only (a frozen layer's penalty leaves model.losses, so
    fit's loss); Keras 2 keeps it. regularization_loss() counts every term: in a Keras 3 file that freezes a
    layer, the regularized layer's line gets a warning naming the freeze."""
    from fwport import translate_source

    line = FROZEN.splitlines().index("        self.base = layers.Dense(8, kernel_regularizer=keras.regularizers.l2(0.01))") + 1
    said = [f for f in translate_source(FROZEN).findings if f.code == "approximate" and "frozen" in f.message]
    assert len(said) == 1 and said[0].line == line and "model.base.trainable = False" in said[0].message
    keras2 = FROZEN.replace("import keras\n", "from tensorflow import keras\n").replace(
        "from keras import", "from tensorflow.keras import")
    assert not [f for f in translate_source(keras2, options={"keras": 2}).findings if f.code == "approximate" and "frozen" in f.message]
    unfrozen = FROZEN.replace("model.base.trainable = False\n", "")
    assert not [f for f in translate_source(unfrozen).findings if f.code == "approximate" and "frozen" in f.message]
