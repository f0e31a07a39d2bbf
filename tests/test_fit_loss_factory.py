"""compile(loss=<a factory of the file called there>) (keras-io's siamese_contrastive:
``def loss(margin=1): def contrastive_loss(y_true, y_pred): ...; return contrastive_loss`` and
``siamese.compile(loss=loss(margin=margin), ...)``): the compile binds what the factory returns (``loss_fn =
loss(margin=margin)``) and the written loop calls it as the file's own loss function (was: compile, fit and evaluate
left as written).

Numbers: the source trained by Keras and the translation by torch (TensorFlow unimportable there) from the same
weights; the fit's history (loss, accuracy), evaluate's result and the weights compared."""
from __future__ import annotations

import numpy as np

from test_train_step import _run, errors, tx

SRC = '''
import numpy as np
import tensorflow as tf
import keras
from keras import layers

rng = np.random.default_rng(3)
x_train = rng.normal(size=(12, 4)).astype("float32")
y_train = (x_train[:, 0] + 0.5 * x_train[:, 1] > 0).astype("float32")
margin = 0.8

classifier = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="tanh"),
                               layers.Dense(1, activation="sigmoid")])


def loss(margin=1):
    """A factory: the loss function it returns keeps the margin."""

    def contrastive_loss(y_true, y_pred):
        square_pred = tf.math.square(y_pred)
        margin_square = tf.math.square(tf.math.maximum(margin - (y_pred), 0))
        return tf.math.reduce_mean((1 - y_true) * square_pred + (y_true) * margin_square)

    return contrastive_loss


classifier.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss=loss(margin=margin),
                   metrics=["accuracy"])


def experiment():
    history = classifier.fit(x_train, y_train, batch_size=5, epochs=3, shuffle=False, verbose=0)
    return history, classifier.evaluate(x_train, y_train, verbose=0)
'''


def test_a_loss_factory_s_function_trains_as_keras_trains_it(tmp_path):
    r = tx(SRC)
    assert errors(r) == [], errors(r)
    assert "loss_fn = loss(margin=margin)\n" in r.output
    assert "loss_fn(*keras_loss_args(yb, pred))" in r.output
    keras_out, torch_out = _run(tmp_path, SRC, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 1)), ("b1", (1,))],
        "n": 12, "width": 4, "x_map": "", "models": "(classifier,)",
        "fit": "h, extra = experiment()\nh = h if hasattr(h, 'history') else type('History', (), {'history': h})()"})
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == ["accuracy", "loss"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    assert len(set(np.round(keras_out["history"]["loss"], 6))) == 3  # the loss moved
    np.testing.assert_allclose(torch_out["extra"], keras_out["extra"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_factory_that_returns_elsewhere_stays_an_error():
    """Two returns (the function returned depends on a value): not followed, the compile stays an error."""
    src = SRC.replace("    return contrastive_loss\n", "    if margin > 2:\n        return None\n"
                      "    return contrastive_loss\n")
    assert src != SRC
    r = tx(src)
    assert any("loss= is neither" in m for _, m in errors(r)), errors(r)
    assert "loss_fn = loss(" not in r.output
