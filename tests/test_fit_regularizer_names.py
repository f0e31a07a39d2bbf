"""Regularizers given by a name and Sequentials built where a class cannot hold them: a name bound once
to keras.regularizers.l2(...) (in the function that builds the model, or at module level), a module constant as the
factor; a Sequential built in a top-level function (bound once to a local name, or returned) or bound again at
module level gets its penalty function written beside it (``def model_regularization_loss(model=model)`` and
``model.regularization_loss = ...``), which the written fit adds as Keras adds model.losses.

Numbers: each model trained two epochs by Keras and by its translation from the same weights (subprocesses); the
histories (with the penalty: larger than the unregularized model's), evaluate and kernels agree."""
from __future__ import annotations

from helpers import error_lines as errors
from test_fit_activation_logits import _compare
from test_fit_callbacks import DRIVER, _run, tx

RETURNED = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers


def create_model():
    regularizer = keras.regularizers.L2(0.02)
    return keras.Sequential([keras.Input(shape=(10,)),
                             layers.Dense(16, activation="tanh", kernel_regularizer=regularizer),
                             layers.Dense(3, kernel_regularizer=regularizer, bias_regularizer=regularizer)])


model = create_model()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

REBOUND = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers, regularizers

WEIGHT_DECAY = 0.03
reg = regularizers.l2(WEIGHT_DECAY)

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(4, kernel_regularizer=reg), layers.Dense(3)])
model = keras.Sequential([keras.Input(shape=(10,)),
                          layers.Dense(16, activation="tanh", kernel_regularizer=regularizers.l1(WEIGHT_DECAY)),
                          layers.Dense(3, kernel_regularizer=reg)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def _regularized_more(tmp_path, src, keras_out, plain_src):
    (tmp_path / "plain").mkdir()
    plain_keras, _ = _run(tmp_path / "plain", plain_src, DRIVER)
    assert keras_out["history"]["loss"][0] > plain_keras["history"]["loss"][0] + 0.02


def test_a_returned_sequential_with_a_regularizer_bound_in_its_function(tmp_path):
    out = tx(RETURNED).output
    assert "    model = nn.Sequential(" in out and "    model.regularization_loss = model_regularization_loss" in out
    assert "    return model" in out
    keras_out, torch_out = _run(tmp_path, RETURNED, DRIVER)
    _compare(keras_out, torch_out)
    _regularized_more(tmp_path, RETURNED, keras_out, RETURNED.replace(", kernel_regularizer=regularizer", "").replace(
        ", bias_regularizer=regularizer", ""))


def test_a_module_level_sequential_bound_again_and_a_module_level_regularizer_name(tmp_path):
    out = tx(REBOUND).output
    assert out.count("model.regularization_loss = model_regularization_loss") == 2
    assert "WEIGHT_DECAY * model[0].weight.abs().sum()" in out
    keras_out, torch_out = _run(tmp_path, REBOUND, DRIVER)
    _compare(keras_out, torch_out)
    _regularized_more(tmp_path, REBOUND, keras_out, REBOUND.replace(
        ', kernel_regularizer=regularizers.l1(WEIGHT_DECAY)', '').replace(", kernel_regularizer=reg)", ")"))


def test_a_local_model_of_a_function_and_what_stays_refused():
    src = RETURNED.replace("    return keras.Sequential(", "    model = keras.Sequential(").replace(
        "bias_regularizer=regularizer)])\n", "bias_regularizer=regularizer)])\n    return model\n")
    out = tx(src).output
    assert "def model_regularization_loss(model=model):" in out and errors(tx(src)) == []
    # a regularizer name bound twice in the function: not followed, the layer's rule says why
    twice = src.replace("    regularizer = keras.regularizers.L2(0.02)\n",
                        "    regularizer = keras.regularizers.L2(0.02)\n    regularizer = keras.regularizers.L1(0.02)\n")
    assert any("kernel_regularizer=regularizer" in m for _, m in errors(tx(twice)))
