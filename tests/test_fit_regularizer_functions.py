"""A regularizer returned by a function of the file (TF corpus resnet_model.py:
``def _gen_l2_regularizer(use_l2_regularizer=True): return regularizers.l2(L2_WEIGHT_DECAY) if use_l2_regularizer
else None`` and ``kernel_regularizer=_gen_l2_regularizer(use_l2_regularizer)``): the call is read as the expression
the function returns, its arguments in place of its parameters; a choice between a regularizer and None is the
penalty with the factor ``(λ if flag else 0.0)`` (a zero factor adds exactly 0, as no regularizer), a literal
choice its branch (was: each argument an error of the layer's rule).

Trained two epochs by Keras and by the translation from the same weights (subprocesses, TensorFlow unimportable in
the torch one), with the flag on and off; histories, evaluate and the kernels compared."""
from __future__ import annotations

import pytest

from test_fit_activation_logits import _compare
from helpers import error_lines as errors
from test_fit_callbacks import _run, tx
from test_fit_regularizers import MODULES_DRIVER

SRC = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers, regularizers

L2_WEIGHT_DECAY = 0.05


def _gen_l2_regularizer(use_l2_regularizer=True):
    """The regularizer, or None."""
    return regularizers.l2(L2_WEIGHT_DECAY) if use_l2_regularizer else None


def build(use_l2_regularizer=True):
    inputs = keras.Input(shape=(10,))
    x = layers.Dense(16, activation="tanh", kernel_regularizer=_gen_l2_regularizer(use_l2_regularizer))(inputs)
    outputs = layers.Dense(3, kernel_regularizer=_gen_l2_regularizer(False),
                           bias_regularizer=_gen_l2_regularizer(use_l2_regularizer=use_l2_regularizer))(x)
    return keras.Model(inputs, outputs)


model = build(FLAG)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_the_function_s_regularizer_is_the_class_s_penalty():
    r = tx(SRC.replace("FLAG", "True"))
    assert errors(r) == [], errors(r)
    assert "(L2_WEIGHT_DECAY if self.use_l2_regularizer else 0.0) * self.fc1.weight.square().sum()" in r.output
    assert "self.fc2.weight" not in r.output.split("def regularization_loss")[1]  # _gen_l2_regularizer(False): None


@pytest.mark.parametrize("flag", ["True", "False"])
def test_a_regularizer_function_trains_as_keras(tmp_path, flag):
    src = SRC.replace("FLAG", flag)
    keras_out, torch_out = _run(tmp_path, src, MODULES_DRIVER)
    _compare(keras_out, torch_out)
    if flag == "True":  # the penalty counted (~0.05 * sum of squares here): Keras's loss larger than without
        (tmp_path / "off").mkdir()
        off_keras, _ = _run(tmp_path / "off", SRC.replace("FLAG", "False"), MODULES_DRIVER)
        assert keras_out["history"]["loss"][0] > off_keras["history"]["loss"][0] + 0.02
