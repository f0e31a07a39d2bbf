"""model.fit(x, y, sample_weight=w) in the written-out fit loop (issue 9). Keras (3, run here) multiplies each
training sample's loss (the mean over its values) by its weight and divides the batch's sum by the batch size
(not by the sum of the weights); the compiled metrics stay unweighted; validation_split holds out the last
samples' weights with them, and those weigh val_loss (as the third element of validation_data=(x, y, w) does);
class_weight beside it is an error (Keras 3 refuses the two together; Keras 2 multiplies them).

Numbers: each program is trained by Keras and by its translation from the same weights on fixed data
(shuffle=False; subprocesses, TensorFlow unimportable in the torch one): histories, evaluate and kernels after
training compared. The unweighted run of the same program differs (a dropped sample_weight would show).
"""
from __future__ import annotations

import numpy as np
from runners import compare_fit
from test_fit_callbacks import DRIVER, _run, errors, tx

SPARSE = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    w = np.linspace(0.1, 3.0, len(x)).astype("float32") ** 2
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0,
                        sample_weight=w)
    return history.history, model.evaluate(x, y, verbose=0)
'''

# one-hot labels, MSE: validation_data with its own weights
BOTH = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer="sgd", loss="mse")


def train(x, y):
    onehot = np.eye(3, dtype="float32")[y]
    w = np.where(np.arange(len(x)) % 3 == 0, 4.0, 0.5).astype("float32")
    history = model.fit(x, onehot, epochs=2, batch_size=16, shuffle=False, verbose=0, sample_weight=w,
                        validation_data=(x[:24], onehot[:24], w[:24] * 2))
    return history.history, model.evaluate(x, onehot, verbose=0)
'''


def test_sample_weight_weighs_the_training_and_held_out_losses_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SPARSE, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "accuracy", "val_loss", "val_accuracy"])
    # the weights count: the unweighted run trains to another loss and other kernels
    (tmp_path / "plain").mkdir()
    plain, _ = _run(tmp_path / "plain", SPARSE.replace(",\n                        sample_weight=w)", ")"), DRIVER)
    assert abs(plain["history"]["loss"][0] - keras_out["history"]["loss"][0]) > 1e-2
    assert abs(plain["history"]["val_loss"][0] - keras_out["history"]["val_loss"][0]) > 1e-2
    assert not np.allclose(plain["kernels"][0], keras_out["kernels"][0], atol=1e-3)


def test_validation_data_weights_weigh_val_loss(tmp_path):
    keras_out, torch_out = _run(tmp_path, BOTH, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "val_loss"])
    (tmp_path / "plain").mkdir()
    unweighted_val = BOTH.replace(", w[:24] * 2)", ")")
    plain, _ = _run(tmp_path / "plain", unweighted_val, DRIVER)
    assert abs(plain["history"]["val_loss"][0] - keras_out["history"]["val_loss"][0]) > 1e-3


def test_the_translation_passes_sample_weight_to_the_written_fit():
    out = tx(SPARSE).output
    assert "sample_weight=w)" in out and "sample_weight[batch]" in out
    fit = out.split("def fit(")[1].split("\n\n\n")[0]
    assert "validation_split" in fit and "sample_weight[split:]" in fit and "keras" not in fit


def test_a_loss_the_loop_cannot_weigh_keeps_the_error_once():
    src = SPARSE.replace("keras.losses.SparseCategoricalCrossentropy(from_logits=True)", "keras.losses.KLDivergence()")
    errs = errors(tx(src))
    assert len(errs) == 1, errs
    assert "sample_weight= is not translated" in errs[0][1] and "cross-entropy, MSE, MAE or Huber" in errs[0][1], errs


def test_class_weight_beside_sample_weight_is_one_error():
    src = BOTH.replace("sample_weight=w,", "sample_weight=w, class_weight={2: 6.0},")
    errs = errors(tx(src))
    assert len(errs) == 1 and "Keras 3 refuses them together" in errs[0][1], errs
