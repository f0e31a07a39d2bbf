"""Keras's weight regularizers in a compiled model's written fit / evaluate (issue 9): Keras adds the layers'
penalties (model.losses) to the loss it trains and reports; the translated model's classes get a
regularization_loss() (passes/regularizers.py) and the written loop adds their sum, so training and the
reported losses match Keras's. Trained two epochs by Keras and by the translation from the same weights
(subprocesses, TensorFlow unimportable in the torch one); histories, evaluate and the kernels compared."""
from __future__ import annotations

from test_fit_activation_logits import _compare
from helpers import error_lines as errors
from runners import keras_and_torch
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
        self.base = layers.Dense(16, activation="tanh", kernel_regularizer=keras.regularizers.l2(0.05))
        self.head = layers.Dense(3, kernel_regularizer=keras.regularizers.l2(0.02),
                                 bias_regularizer=keras.regularizers.l1(0.01))

    def call(self, x):
        return self.head(self.base(x))


model = Net()
model.build((None, 10))
model.base.trainable = False
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''
# the subclass model is built by a first call before its weights are set (Keras's Dense and torch's LazyLinear)
FROZEN_DRIVER = MODULES_DRIVER.replace("    with torch.no_grad():\n", "    model(torch.zeros(1, 10))\n    with torch.no_grad():\n"
                                       ).replace("    model.set_weights(W)", "    model(x[:1])\n    model.set_weights(W)")
# Keras 2 (tf_keras) of the same program
FROZEN_KERAS2 = FROZEN.replace("import keras\nfrom keras import layers", "import tf_keras as keras\nfrom tf_keras import layers")


def _penalty(kernels):
    import numpy as np
    (k1, k2) = (np.array(k) for k in kernels)
    return 0.05 * (k1 ** 2).sum(), 0.02 * (k2 ** 2).sum()


def test_a_frozen_layers_penalty_leaves_the_loss_in_keras3_only(tmp_path):
    """Keras 3 sums the regularizers of trainable weights only (Layer._get_regularization_losses walks
    trainable_weights: a frozen layer's penalty leaves model.losses, so fit's loss); Keras 2 keeps every term.
    In a Keras 3 file that sets a trainable flag, regularization_loss() counts each term under `if
    <weight>.requires_grad:` (trainable = False became requires_grad_(False)); in a Keras 2 file every term.
    Trained and evaluated by Keras 3, by tf_keras and by the two translations from the same weights."""
    import numpy as np

    trans = tx(FROZEN)
    assert "        if self.base[0].weight.requires_grad:\n            loss = loss + 0.05 * self.base[0].weight" in trans.output
    assert "        if self.head.bias.requires_grad:\n            loss = loss + 0.01 * self.head.bias.abs().sum()" \
        in trans.output
    assert not [f for f in trans.findings if f.code == "approximate" and "frozen" in f.message]
    (tmp_path / "k3").mkdir()
    keras_out, torch_out = keras_and_torch(tmp_path / "k3", FROZEN, trans.output, FROZEN_DRIVER)
    _compare(keras_out, torch_out)
    # the frozen kernel did not move; Keras 3's evaluate holds the head's penalty only
    np.testing.assert_allclose(keras_out["kernels"][0], np.array(torch_out["kernels"][0]), atol=0)
    base_pen, head_pen = _penalty(keras_out["kernels"])
    assert base_pen > 0.1  # large enough that counting it would break the comparison above

    trans2 = tx(FROZEN_KERAS2)
    assert errors(trans2) == [] and errors(trans) == []
    assert "requires_grad:" not in trans2.output and "loss = 0.05 * self.base[0].weight.square().sum()" in trans2.output
    (tmp_path / "k2").mkdir()
    keras2_out, torch2_out = keras_and_torch(tmp_path / "k2", FROZEN_KERAS2, trans2.output, FROZEN_DRIVER,
                                             TF_USE_LEGACY_KERAS="1")
    _compare(keras2_out, torch2_out)
    # Keras 2's loss holds the frozen layer's penalty too: its evaluate exceeds Keras 3's by about it
    assert keras2_out["evaluate"] > keras_out["evaluate"] + 0.5 * base_pen

    # a file that freezes nothing keeps the plain sum
    unfrozen = tx(FROZEN.replace("model.base.trainable = False\n", "")).output
    assert "requires_grad:" not in unfrozen and "loss = 0.05 * self.base[0].weight.square().sum()" in unfrozen


SEQUENTIAL = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers, regularizers

model = keras.Sequential([
    keras.Input(shape=(10,)),
    layers.Dense(16, activation="tanh", kernel_regularizer=regularizers.l2(0.01)),
    layers.Dense(3, kernel_regularizer="l1", bias_regularizer=regularizers.l2(0.05)),
])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_a_module_level_sequentials_regularizers_are_a_function_beside_it_that_fit_adds(tmp_path):
    trans = tx(SEQUENTIAL)
    assert "def model_regularization_loss(model=model):" in trans.output
    assert "model.regularization_loss = model_regularization_loss" in trans.output
    assert "loss = 0.01 * model[0].weight.square().sum()" in trans.output
    assert "0.01 * model[2].weight.abs().sum()" in trans.output and "0.05 * model[2].bias.square().sum()" in trans.output
    keras_out, torch_out = _run(tmp_path, SEQUENTIAL, DRIVER)
    _compare(keras_out, torch_out)
    unregularized = SEQUENTIAL.replace(', kernel_regularizer=regularizers.l2(0.01)', '').replace(
        ', kernel_regularizer="l1", bias_regularizer=regularizers.l2(0.05)', '')
    (tmp_path / "plain").mkdir()
    plain_keras, _ = _run(tmp_path / "plain", unregularized, DRIVER)
    assert keras_out["history"]["loss"][0] > plain_keras["history"]["loss"][0] + 0.02


MODULE_FUNCTIONAL = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers, regularizers

wd = 0.01
inputs = keras.Input(shape=(10,))
x = layers.Dense(16, activation="tanh", kernel_regularizer=regularizers.l2(wd))(inputs)
outputs = layers.Dense(3, kernel_regularizer=regularizers.l2(0.05), bias_regularizer=regularizers.l1(0.01))(x)
model = keras.Model(inputs, outputs)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_a_module_level_functional_models_regularizers_are_its_class_method(tmp_path):
    trans = tx(MODULE_FUNCTIONAL)
    assert "    def regularization_loss(self):" in trans.output
    assert "wd * self." in trans.output, trans.output
    keras_out, torch_out = _run(tmp_path, MODULE_FUNCTIONAL, MODULES_DRIVER)
    _compare(keras_out, torch_out)
    unregularized = MODULE_FUNCTIONAL.replace(", kernel_regularizer=regularizers.l2(wd)", "").replace(
        ", kernel_regularizer=regularizers.l2(0.05), bias_regularizer=regularizers.l1(0.01)", "")
    (tmp_path / "plain").mkdir()
    plain_keras, _ = _run(tmp_path / "plain", unregularized, MODULES_DRIVER)
    assert keras_out["history"]["loss"][0] > plain_keras["history"]["loss"][0] + 0.02
