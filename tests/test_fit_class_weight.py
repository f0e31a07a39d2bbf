"""model.fit(..., class_weight={...}) in the written-out fit loop (issue 9): Keras gives each training sample
the weight of its label (the argmax of a one-hot row, a rounded value otherwise; 1.0 for a label the dict
lacks), multiplies the sample's loss by it and divides the batch's sum by the batch size; the compiled metrics
and the validation loss stay unweighted.

Numbers: each program is trained two epochs by Keras and by its translation from the same weights on fixed
data (shuffle=False; subprocesses, TensorFlow unimportable in the torch one): the histories (the weighted
training loss, the unweighted validation loss and accuracy), evaluate and the kernels after training are
compared. Without the weights the same runs differ (the cases would tell a dropped class_weight).
"""
from __future__ import annotations

import numpy as np
from runners import compare_fit
from test_fit_callbacks import DRIVER, _run, errors, tx
from test_fit_metrics import BINARY_DRIVER

SPARSE = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0,
                        class_weight={0: 0.25, 1: 4.0})
    return history.history, model.evaluate(x, y, verbose=0)
'''

# keras-io's imbalanced_classification: a sigmoid output, binary_crossentropy, metric objects, callbacks
BINARY = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                          layers.Dense(1, activation="sigmoid")])
metrics = [keras.metrics.FalseNegatives(name="fn"), keras.metrics.Precision(name="precision")]
# (epsilon: Keras adds Adam's before the bias correction, torch after it (a warning of the translation); tiny
# weighted gradients would show that difference, which is not what this case tests)
model.compile(optimizer=keras.optimizers.Adam(1e-2, epsilon=1e-12), loss="binary_crossentropy", metrics=metrics)
weight_for_0, weight_for_1 = 1.0 / 40, 1.0 / 24
class_weight = {0: weight_for_0, 1: weight_for_1}


def train(x, y):
    history = model.fit(x, y, validation_data=(x[:24], y[:24]), epochs=2, batch_size=16, shuffle=False, verbose=0,
                        callbacks=[keras.callbacks.EarlyStopping(patience=5)], class_weight=class_weight)
    return history.history, model.evaluate(x, y, batch_size=20, verbose=0)
'''

# one-hot labels: the weight of each row's argmax; MSE
ONE_HOT = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer="sgd", loss="mse")


def train(x, y):
    onehot = np.eye(3, dtype="float32")[y]
    history = model.fit(x, onehot, epochs=2, batch_size=16, shuffle=False, verbose=0, class_weight={2: 6.0})
    return history.history, model.evaluate(x, onehot, verbose=0)
'''


def test_sparse_labels_weighted_as_keras_weighs_them(tmp_path):
    keras_out, torch_out = _run(tmp_path, SPARSE, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "accuracy", "val_loss", "val_accuracy"])
    # the weights count: the unweighted run of the same program trains to other kernels and another loss
    plain, _ = _run(tmp_path / "plain", SPARSE.replace(",\n                        class_weight={0: 0.25, 1: 4.0})", ")"),
                    DRIVER) if (tmp_path / "plain").mkdir() is None else (None, None)
    assert abs(plain["history"]["loss"][0] - keras_out["history"]["loss"][0]) > 1e-2
    assert not np.allclose(plain["kernels"][0], keras_out["kernels"][0], atol=1e-3)


def test_binary_probabilities_with_metrics_and_callbacks_weighted_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, BINARY, BINARY_DRIVER)
    names = ["fn", "precision"]
    compare_fit(keras_out, torch_out, ["loss", *names, "val_loss", *(f"val_{n}" for n in names)])
    kh = keras_out["history"]
    assert abs(kh["loss"][1] - kh["val_loss"][1]) > 1e-2  # the training loss is weighted, the validation loss not


def test_one_hot_labels_weighted_by_their_argmax(tmp_path):
    keras_out, torch_out = _run(tmp_path, ONE_HOT, DRIVER)
    compare_fit(keras_out, torch_out, ["loss"])


def test_the_translation_passes_class_weight_to_the_written_fit():
    out = tx(BINARY).output
    assert "class_weight=class_weight)" in out and "def class_weights(y, class_weight):" in out
    assert "per_sample.reduction = \"none\"" in out and "keras" not in out.split("def fit(")[1].split("\n\n\n")[0]


def test_a_loss_the_loop_cannot_weigh_keeps_the_error():
    src = SPARSE.replace("keras.losses.SparseCategoricalCrossentropy(from_logits=True)", "keras.losses.KLDivergence()")
    errs = errors(tx(src))
    assert any("class_weight= is not translated" in m and "cross-entropy, MSE, MAE or Huber" in m for _, m in errs), errs
