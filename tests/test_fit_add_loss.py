"""``self.add_loss(term)`` in a layer's call (issue 9): Keras adds the terms the layers gave add_loss in a
forward to the compiled loss, in fit and in evaluate. The translation keeps the term on the module
(``self.added_losses``, a list of each call's term) and the written fit / evaluate add every module's (summed,
the terms of that forward alone) to the loss, where the file trains only through them; elsewhere (a GradientTape, a train_step, a read of ``model.losses``) the error
stays.

Numbers: a functional model with an activity penalty layer is trained two epochs by Keras and by its translation
from the same weights (subprocesses, TensorFlow unimportable in the torch one): the histories (loss with the
penalty, validation loss), evaluate and the kernels after training agree; without the penalty they do not.
"""
from __future__ import annotations

from runners import compare_fit
from test_fit_callbacks import _run, errors, tx

from fwport.core.pipeline import translate_source
from test_fit_regularizers import MODULES_DRIVER

# the Dense after the custom layer is an nn.LazyLinear (its input size is known on the first forward): built first
DRIVER = MODULES_DRIVER.replace("    linears = ", "    model(torch.zeros(1, 10))\n    linears = ")
assert DRIVER != MODULES_DRIVER

PENALIZED = '''
import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class ActivityPenalty(layers.Layer):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * tf.reduce_mean(tf.square(inputs)))
        return inputs


inputs = keras.Input(shape=(10,))
h = ActivityPenalty(0.5)(layers.Dense(16, activation="tanh")(inputs))
model = keras.Model(inputs, layers.Dense(3)(h))
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def _compare(keras_out, torch_out):
    compare_fit(keras_out, torch_out, ["accuracy", "loss", "val_accuracy", "val_loss"])


def test_fit_and_evaluate_add_the_layers_add_loss_terms_as_keras(tmp_path):
    r = tx(PENALIZED)
    out = r.output
    assert ('self.added_losses = getattr(self, "added_losses", []) + [self.rate * torch.mean(torch.square(inputs))]'
            in out)
    # an info on the add_loss line (no warning: every call's term is listed, those of the last forward read)
    said = [(f.severity.name, f.line) for f in r.findings if "self.add_loss(term)" in f.message]
    assert said == [("INFO", 13)]
    keras_out, torch_out = _run(tmp_path, PENALIZED, DRIVER)
    _compare(keras_out, torch_out)
    # the terms count: without them Keras's losses are smaller by the penalty
    (tmp_path / "plain").mkdir()
    plain, _ = _run(tmp_path / "plain", PENALIZED.replace("        self.add_loss(", "        0 * ("), DRIVER)
    assert keras_out["history"]["loss"][0] > plain["history"]["loss"][0] + 0.02
    assert keras_out["evaluate"][0] > plain["evaluate"][0] + 0.02


def test_a_file_with_training_code_of_its_own_keeps_the_error():
    src = PENALIZED + '''

def step(x, y, optimizer):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y)) + sum(model.losses)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
'''
    errs = errors(translate_source(src.lstrip("\n"), "model.py"))
    assert any("torch modules have no add_loss" in m for _, m in errs), errs


def test_a_conditional_term_is_listed_when_made():
    # (main kept it an error; numbers: test_fit_add_loss_per_forward.py)
    src = PENALIZED.replace("    def call(self, inputs):\n        self.add_loss(",
                            "    def call(self, inputs, training=None):\n        if training:\n            self.add_loss(")
    r = translate_source(src.lstrip("\n"), "model.py")
    assert errors(r) == [], errors(r)
    assert "        if self.training:\n            self.added_losses = getattr(self, \"added_losses\", []) + [" in r.output


def test_a_layer_whose_model_fwport_does_not_train_keeps_the_error():
    # no compile / fit in the file: the model is trained elsewhere, by code that would not add the term
    src = PENALIZED.split("\n\ninputs = keras.Input")[0] + "\n"
    errs = errors(translate_source(src.lstrip("\n"), "model.py"))
    assert any("torch modules have no add_loss" in m for _, m in errs), errs
