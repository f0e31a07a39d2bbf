"""Keras 2's fit_generator / evaluate_generator / predict_generator (Deep Learning with Python's first edition, the
TensorFlow course notebooks): fit / evaluate / predict of the generator, which is what Keras 2 runs for them
(their own parameter order bound; evaluate_generator and predict_generator print nothing by default); the written
loops read steps_per_epoch batches of a generator each epoch, going on where the last epoch stopped, as Keras does.
(A generator as validation_data with validation_steps is left out: Keras 2's enqueuer thread reads ahead of the
steps it evaluates, so which batches each epoch's validation sees varies from run to run in Keras itself.)

Numbers: the source trained by Keras 2 (tf_keras) and the translation by torch (TensorFlow unimportable there)
from the same weights; the fit's history, the evaluation, and the weights compared."""
from __future__ import annotations

import numpy as np

from test_train_step import _run, errors, tx

SRC = '''
import numpy as np
import tf_keras as keras
from tf_keras import layers

rng = np.random.default_rng(4)
x_train = rng.normal(size=(12, 4)).astype("float32")
y_train = (x_train[:, :2] * 0.5 + x_train[:, 2:]).astype("float32")


def batches(batch_size):
    while True:
        for i in range(0, len(x_train), batch_size):
            yield x_train[i:i + batch_size], y_train[i:i + batch_size]


regressor = keras.Sequential([layers.Dense(5, activation="tanh", input_shape=(4,)), layers.Dense(2)])
regressor.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="mse", metrics=["mae"])


def experiment():
    history = regressor.fit_generator(batches(5), 2, epochs=3, verbose=0, validation_data=(x_train[:6], y_train[:6]))
    return history, regressor.evaluate_generator(batches(5), steps=3)
'''


def test_the_generator_methods_are_the_written_loops_and_train_as_keras_2(tmp_path):
    r = tx(SRC)
    assert errors(r) == [], errors(r)
    assert ("    history = fit(regressor, optimizer, loss_fn, batches(5), epochs=3, verbose=0, "
            "validation_data=(x_train[:6], y_train[:6]), steps_per_epoch=2)\n") in r.output
    assert "evaluate(regressor, loss_fn, batches(5), verbose=0, steps=3)" in r.output
    keras_out, torch_out = _run(tmp_path, SRC, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 2)), ("b1", (2,))],
        "n": 12, "width": 4, "x_map": "", "models": "(regressor,)",
        "fit": "h, extra = experiment()\nh = h if hasattr(h, 'history') else type('History', (), {'history': h})()"})
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == ["loss", "mae", "val_loss", "val_mae"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(torch_out["extra"], keras_out["extra"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_predict_generator_with_steps_is_an_error():
    # the written predict takes arrays, not steps of a generator
    src = SRC.replace("steps=3)\n", "steps=3), regressor.predict_generator(batches(6), 2)\n")
    assert any("predict_generator(batches(6), 2): steps= is not translated" in m for _, m in errors(tx(src)))


def test_an_argument_of_keras_1_is_an_error():
    src = SRC.replace("verbose=0, validation_data", "nb_epoch=3, validation_data")
    assert any("fit_generator" in m for _, m in errors(tx(src))), errors(tx(src))
