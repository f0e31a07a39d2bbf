"""A compile / fit / evaluate inside a function that receives the model (``def run_experiment(model):
model.compile(...); model.fit(...)``, keras-io's most common shape): the parameter is a model where every
call of the function gives it one the file builds, or where the calls give nothing fwport follows and the
function uses it only as a model; then the compile and its fits are written out as for a module-level model
(passes/model_api.py ``_Models._given_models``). A call that gives it a model fwport leaves Keras
(keras.applications) keeps an error on each model method.

Numbers: the source trained by Keras and the translation by torch (TensorFlow unimportable there) from the
same weights; the fit's history, evaluate's result and the weights compared."""
from __future__ import annotations

import numpy as np

from test_train_step import _run, errors, tx

RUN_EXPERIMENT = '''
import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(1)
x_train = rng.normal(size=(12, 4)).astype("float32")
y_train = np.argmax(x_train[:, :3] + 0.3 * x_train[:, 1:4], axis=1)


def build():
    model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="tanh"), layers.Dense(3)])
    return model


def run_experiment(model):
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.3, momentum=0.5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")],
    )
    history = model.fit(x_train, y_train, batch_size=5, epochs=3, shuffle=False, verbose=0)
    _, accuracy = model.evaluate(x_train, y_train, verbose=0)
    return history, accuracy


classifier = build()
'''

FIT = ("h, extra = run_experiment(classifier)\n"
       "h = h if hasattr(h, 'history') else type('History', (), {'history': h})()")


def test_a_model_given_to_a_function_that_compiles_and_fits_it_trains_as_keras(tmp_path):
    r = tx(RUN_EXPERIMENT)
    assert "    optimizer = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.5)\n" in r.output
    assert "    history = fit(model, optimizer, loss_fn, x_train, y_train, batch_size=5" in r.output
    keras_out, torch_out = _run(tmp_path, RUN_EXPERIMENT, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,))],
        "n": 12, "width": 4, "x_map": "", "models": "(classifier,)", "fit": FIT})
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == ["acc", "loss"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(torch_out["extra"], keras_out["extra"], rtol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_the_model_name_bound_elsewhere_does_not_hide_the_parameter():
    # `model` is also a local of build(): the parameter is still the model its callers give
    r = tx(RUN_EXPERIMENT.replace("classifier = build()", "classifier = build()\nrun_experiment(classifier)"))
    assert errors(r) == [], errors(r)
    assert "    model.compile(" not in r.output and "= model.fit(" not in r.output


def test_a_parameter_used_only_as_a_model_and_called_nowhere_is_a_model():
    src = RUN_EXPERIMENT.replace("classifier = build()\n", "")
    r = tx(src)
    assert errors(r) == [], errors(r)
    assert "    _, accuracy = evaluate(model, loss_fn, x_train, y_train, verbose=0)\n" in r.output


def test_a_parameter_used_otherwise_with_unknown_callers_is_not_taken_for_a_model():
    # the callers give what fwport does not follow and the function reads model.name: not surely a model;
    # the compile stays (its optimizer's error says what to write)
    src = RUN_EXPERIMENT.replace("    return history, accuracy", "    return history, accuracy, model.name")
    src = src.replace("classifier = build()", "classifier = load()\nrun_experiment(classifier)")
    r = tx(src)
    assert "    model.compile(\n" in r.output
    assert any("SGD(...): a torch optimizer takes the parameters" in m for _, m in errors(r)), errors(r)


def test_a_model_fwport_leaves_keras_keeps_an_error_on_each_method():
    src = RUN_EXPERIMENT.replace("classifier = build()",
                                 "classifier = keras.applications.MobileNetV2(weights=None)\n"
                                 "run_experiment(classifier)")
    r = tx(src)
    errs = errors(r)
    lines = {line for line, m in errs if "model is a parameter of run_experiment(), and a call gives it "
             "keras.applications.MobileNetV2(...), which fwport does not translate" in m}
    assert lines == {16, 21, 22}, errs  # compile, fit, evaluate
    assert "    model.compile(\n" in r.output


NAMED_LOSS = '''
import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(2)
x_train = rng.normal(size=(10, 4)).astype("float32")
y_train = np.eye(3, dtype="float32")[np.argmax(x_train[:, :3] - 0.5 * x_train[:, 1:4], axis=1)]
loss_fn = keras.losses.CategoricalCrossentropy(label_smoothing=0.1)


def run_experiment(model):
    optimizer = keras.optimizers.SGD(learning_rate=0.5)
    model.compile(optimizer=optimizer, loss=loss_fn, metrics=["accuracy"])
    history = model.fit(x_train, y_train, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return history, model.evaluate(x_train, y_train, verbose=0)


classifier = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="relu"),
                               layers.Dense(3, activation="softmax")])
'''


def test_a_loss_object_given_to_compile_by_name_is_the_loss_the_loop_calls(tmp_path):
    """``loss=loss_fn``, a name bound once to a Keras loss object (probabilities, label smoothing): that
    binding becomes the torch loss, the loop calls it (its input normalised, clipped and logged as Keras does)."""
    r = tx(NAMED_LOSS)
    assert "loss_fn = CategoricalCrossentropyLoss(label_smoothing=0.1)\n" in r.output
    assert "    history = fit(model, optimizer, loss_fn, x_train, y_train, batch_size=4" in r.output
    keras_out, torch_out = _run(tmp_path, NAMED_LOSS, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,))],
        "n": 10, "width": 4, "x_map": "", "models": "(classifier,)", "fit": FIT})
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == ["accuracy", "loss"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=2e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(torch_out["extra"], keras_out["extra"], rtol=2e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_loss_name_bound_twice_or_with_a_reduction_stays_an_error():
    r = tx(NAMED_LOSS.replace("loss_fn = keras.losses.CategoricalCrossentropy(label_smoothing=0.1)",
                              "loss_fn = keras.losses.CategoricalCrossentropy(reduction='sum')"))
    assert any("model.compile(...) is a Keras model method" in m and "loss= is neither" in m
               for _, m in errors(r)), errors(r)


HINGE = '''
import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(3)
x_train = rng.normal(size=(10, 4)).astype("float32")
y_train = np.eye(3, dtype="float32")[np.argmax(x_train[:, :3], axis=1)]
classifier = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="tanh"), layers.Dense(3)])
classifier.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2), loss=keras.losses.hinge,
                   metrics=[keras.metrics.CategoricalAccuracy(name="acc")])


def run():
    history = classifier.fit(x_train, y_train, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return history, classifier.evaluate(x_train, y_train, verbose=0)
'''

OWN_LOSS = '''
import numpy as np
import tensorflow as tf
import keras
from keras import layers

rng = np.random.default_rng(4)
x_train = rng.normal(size=(10, 4)).astype("float32")
y_train = (x_train @ np.array([1.0, -1.0, 0.5, 2.0], dtype="float32")).astype("float32")


def charbonnier_loss(y_true, y_pred):
    return tf.reduce_mean(tf.sqrt(tf.square(y_true - y_pred) + 1e-6))


def run_experiment(model):
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss=charbonnier_loss, metrics=["mae"])
    history = model.fit(x_train, y_train, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return history, model.evaluate(x_train, y_train, verbose=0)


regressor = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="tanh"), layers.Dense(1)])
'''


def _same_training(keras_out, torch_out, keys):
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == keys
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=2e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(torch_out["extra"], keras_out["extra"], rtol=2e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_keras_loss_function_given_to_compile_trains_as_keras(tmp_path):
    """``loss=keras.losses.hinge`` (one-hot labels of 0 and 1, which Keras takes as -1 and 1): the loop calls
    the written hinge() in Keras's order and averages its per-sample values."""
    r = tx(HINGE)
    assert "loss_fn = lambda y_true, y_pred: hinge(y_true, y_pred)\n" in r.output
    keras_out, torch_out = _run(tmp_path, HINGE, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,))],
        "n": 10, "width": 4, "x_map": "", "models": "(classifier,)",
        "fit": FIT.replace("run_experiment(classifier)", "run()")})
    _same_training(keras_out, torch_out, ["acc", "loss"])


def test_a_loss_function_of_the_file_given_to_compile_trains_as_keras(tmp_path):
    """``loss=charbonnier_loss`` (the file's own function): called as Keras calls it, the labels (N,) as (N, 1)
    beside the outputs (N, 1), its value averaged."""
    r = tx(OWN_LOSS)
    assert "    history = fit(model, optimizer, charbonnier_loss, x_train, y_train, batch_size=4" in r.output
    keras_out, torch_out = _run(tmp_path, OWN_LOSS, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 1)), ("b1", (1,))],
        "n": 10, "width": 4, "x_map": "", "models": "(regressor,)",
        "fit": FIT.replace("classifier", "regressor")})
    _same_training(keras_out, torch_out, ["loss", "mae"])


def test_a_loss_function_with_a_bare_accuracy_is_keras_s_pick_by_shapes():
    # Keras picks the accuracy from the shapes of labels and outputs (is_binary_or_sparse_categorical), as the
    # written ShapeAccuracy does (numbers: tests/test_fit_shape_accuracy.py)
    r = tx(HINGE.replace('keras.metrics.CategoricalAccuracy(name="acc")', '"accuracy"'))
    assert errors(r) == [], errors(r)
    assert 'metrics = {"accuracy": ShapeAccuracy()}\n' in r.output


def test_a_train_step_calling_its_own_compute_loss_trains_as_keras2(tmp_path):
    """A class that defines its own ``compute_loss`` (dreambooth, nl_image_search): ``self.compute_loss`` is that
    method, not Keras 3's; the ``self.compiled_loss`` it reads is Keras 2's, kept by TrainStepModule."""
    from test_train_step_compiled import LABELS, NET, _run_keras2
    from train_step_net import same_fit
    src = NET.replace('''            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)''',
                      '''            loss = self.compute_loss(y, y_pred)''')
    src = src.replace('''    def train_step(self, data):''', '''    def compute_loss(self, y, y_pred):
        half = tf.shape(y)[0] // 2
        first = self.compiled_loss(y[:half], y_pred[:half])
        return first + 0.5 * self.compiled_loss(y[half:], y_pred[half:])

    def train_step(self, data):''')
    assert "self.compute_loss(y, y_pred)" in src and "def compute_loss" in src
    r = tx(src)
    assert errors(r) == [], errors(r)
    keras_out, torch_out = _run_keras2(tmp_path, src, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,))],
        "n": 10, "width": 4, "x_map": LABELS + "\n_ = net(x[:1] if 'torch' not in sys.argv[2] else __import__('torch').tensor(x[:1]))",
        "models": "([*net.modules()] if 'torch' in sys.argv[2] else net,)",
        "fit": "h = net.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0)\nextra = None"})
    same_fit(keras_out, torch_out, ["acc", "loss"])


PREDICT = '''
import numpy as np
import keras
from keras import layers

x_test = np.random.default_rng(5).normal(size=(7, 4))
classifier = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="relu"),
                               layers.Dense(3, activation="softmax")])


def infer(model, images):
    return model.predict(images, batch_size=3, verbose=0)


def run():
    return [classifier.predict(x_test, verbose=0).tolist(), infer(classifier, x_test).tolist()]
'''


def test_predict_of_a_model_never_compiled_gives_what_keras_gives(tmp_path):
    """``model.predict(x)`` without a compile (a model of the file, or a parameter its callers give one): the
    written predict() alone — batches, inference mode, float64 input as float32, a NumPy array."""
    r = tx(PREDICT)
    assert "    return predict(model, images, batch_size=3, verbose=0)\n" in r.output
    assert "def fit(" not in r.output
    keras_out, torch_out = _run(tmp_path, PREDICT, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,))],
        "n": 2, "width": 4, "x_map": "", "models": "(classifier,)",
        "fit": "extra = run()\nh = type('History', (), {'history': {}})()"})
    np.testing.assert_allclose(np.array(torch_out["extra"]), np.array(keras_out["extra"]), rtol=1e-5, atol=1e-6)
    assert np.array(torch_out["extra"]).shape == (2, 7, 3)


def test_predict_of_several_inputs_stays_an_error():
    r = tx(PREDICT.replace("classifier.predict(x_test, verbose=0)", "classifier.predict([x_test, x_test], verbose=0)"))
    assert any("classifier.predict(...) is a Keras model method" in m for _, m in errors(r)), errors(r)
