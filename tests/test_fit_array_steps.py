"""steps_per_epoch= / validation_steps= / evaluate(steps=) with arrays (issue 9). Keras (2 and 3, checked) reads
the first steps batches of the arrays for evaluate and for validation, and one epoch of fit takes the first
steps_per_epoch batches; over several epochs the two Keras differ (Keras 3 runs on through one pass and ends an
epoch early where it runs out; Keras 2 cycles through the samples), which the written fit does not follow: an error.
The written loop used to read every batch whatever the steps.

Numbers: the program is trained by Keras 3 and by its translation from the same weights (subprocesses, TensorFlow
unimportable on the torch side): history, evaluate and kernels compared; reading every batch gives another loss.
"""
from __future__ import annotations

from runners import compare_fit
from test_fit_callbacks import DRIVER, _run, errors, tx

SRC = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0, steps_per_epoch=2,
                        validation_data=(x[32:], y[32:]), validation_steps=1)
    return history.history, model.evaluate(x, y, batch_size=16, steps=3, verbose=0)
'''


def test_the_first_steps_batches_of_arrays_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SRC, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "accuracy", "val_loss", "val_accuracy"])
    (tmp_path / "all").mkdir()
    every, _ = _run(tmp_path / "all", SRC.replace(", steps_per_epoch=2", ""), DRIVER)
    assert abs(every["history"]["loss"][0] - keras_out["history"]["loss"][0]) > 1e-3


def test_steps_per_epoch_with_arrays_over_several_epochs_is_an_error():
    errs = errors(tx(SRC.replace("epochs=1,", "epochs=3,")))
    assert len(errs) == 1 and "steps_per_epoch= with arrays over several epochs" in errs[0][1], errs
