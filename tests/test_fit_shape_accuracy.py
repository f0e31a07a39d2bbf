"""compile(loss=<a loss function>, metrics=["accuracy"]) (save_and_restore_models.ipynb's
``loss=tf.keras.losses.sparse_categorical_crossentropy``): Keras picks the accuracy from the shapes of the labels
and outputs, as the written ShapeAccuracy metric object does; the compile is written out with it (it was refused).

Numbers: the source trained by Keras and the translation by torch (TensorFlow unimportable there) from the same
weights; the fit's history (loss, accuracy), evaluate's result and the weights compared."""
from __future__ import annotations

import numpy as np
import pytest

from test_train_step import _run, errors, tx

SRC = '''
import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(3)
x_train = rng.normal(size=(12, 4)).astype("float32")
labels = np.argmax(x_train[:, :3] + 0.3 * x_train[:, 1:4], axis=1)
y_train = LABELS

classifier = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="tanh"),
                               layers.Dense(3, activation="softmax")])
classifier.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3), loss=keras.losses.LOSS,
                   metrics=["accuracy"])


def experiment():
    history = classifier.fit(x_train, y_train, batch_size=5, epochs=3, shuffle=False, verbose=0)
    return history, classifier.evaluate(x_train, y_train, verbose=0)
'''


@pytest.mark.parametrize("loss, labels", [
    ("sparse_categorical_crossentropy", "labels"),
    ("categorical_crossentropy", 'np.eye(3, dtype="float32")[labels]'),
])
def test_accuracy_beside_a_loss_function_is_keras_s_pick(tmp_path, loss, labels):
    src = SRC.replace("LOSS", loss).replace("LABELS", labels)
    r = tx(src)
    assert errors(r) == [], errors(r)
    assert 'metrics = {"accuracy": ShapeAccuracy()}\n' in r.output
    keras_out, torch_out = _run(tmp_path, src, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,))],
        "n": 12, "width": 4, "x_map": "", "models": "(classifier,)",
        "fit": "h, extra = experiment()\nh = h if hasattr(h, 'history') else type('History', (), {'history': h})()"})
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == ["accuracy", "loss"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    assert len(set(keras_out["history"]["accuracy"])) > 1 or 0 < keras_out["history"]["accuracy"][0] < 1
    np.testing.assert_allclose(torch_out["extra"], keras_out["extra"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
