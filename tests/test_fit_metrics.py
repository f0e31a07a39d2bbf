"""compile(metrics=[...several...]) in the written-out fit loop (issue 9): the metric objects compile is given
(strings, keras.metrics objects, a name bound to a literal list of them) become a dict {Keras's name: metric}
beside the optimizer and the loss, which the generated fit / evaluate reset every epoch and update with
(y, the model's outputs) of every batch; their results join the History under Keras's names and evaluate
returns [loss, *metrics] in Keras's order.

Numbers: each program is trained two epochs by Keras and by its translation from the same weights on fixed
data (shuffle=False; subprocesses, TensorFlow unimportable in the torch one), and the histories and evaluate
results are compared.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from runners import python
from test_fit_callbacks import DRIVER, _run, errors, tx

from fwport.core.pipeline import translate_source

TOP_K = '''
import numpy as np
import pytest
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(
    optimizer=keras.optimizers.SGD(learning_rate=0.3),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[
        keras.metrics.SparseCategoricalAccuracy(name="acc"),
        keras.metrics.SparseTopKCategoricalAccuracy(2, name="top-2-accuracy"),
        "accuracy",
    ],
)


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_several_metric_objects_match_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, TOP_K, DRIVER)
    kh, th = keras_out["history"], torch_out["history"]
    names = ["acc", "top-2-accuracy", "accuracy"]
    assert sorted(th) == sorted(kh) == sorted(["loss", *names, "val_loss", *(f"val_{n}" for n in names)])
    for k in kh:
        assert len(th[k]) == len(kh[k]) == 2
        np.testing.assert_allclose(th[k], kh[k], rtol=2e-4, atol=1e-5, err_msg=k)
    assert len(keras_out["evaluate"]) == len(torch_out["evaluate"]) == 4  # [loss, *metrics] in compile's order
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=1e-5)
    assert kh["top-2-accuracy"] != kh["acc"]  # the metrics differ: the comparison tells them apart


# a `metrics = [...]` list name of confusion-matrix counts, precision and recall (keras-io's imbalanced_classification)
COUNTS = '''
import numpy as np
import pytest
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"),
                          layers.Dense(1, activation="sigmoid")])
metrics = [
    keras.metrics.FalseNegatives(name="fn"),
    keras.metrics.FalsePositives(name="fp"),
    keras.metrics.TrueNegatives(),
    keras.metrics.TruePositives(name="tp"),
    keras.metrics.Precision(name="precision"),
    keras.metrics.Recall(name="recall"),
]
model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy", metrics=metrics)


def train(x, y):
    history = model.fit(x, y, validation_data=(x[:24], y[:24]), epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, batch_size=20, verbose=0)
'''

BINARY_DRIVER = (DRIVER.replace("(16, 3)", "(16, 1)").replace('np.zeros(3, "float32")', 'np.zeros(1, "float32")')
                 .replace('y = ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)).astype("int64")',
                          'y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("float32")')
                 .replace("y[48:] = rng.integers(0, 3, 16)", 'y[48:] = rng.integers(0, 2, 16).astype("float32")')
                 .replace('"kernels": kernels()', '"kernels": kernels(), "state": [float(m.result()) for m in metrics]'))


def test_a_named_list_of_counts_precision_and_recall_matches_keras(tmp_path):
    assert BINARY_DRIVER.count("(16, 1)") == 1 and '"state"' in BINARY_DRIVER
    keras_out, torch_out = _run(tmp_path, COUNTS, BINARY_DRIVER)
    kh, th = keras_out["history"], torch_out["history"]
    names = ["fn", "fp", "true_negatives", "tp", "precision", "recall"]  # TrueNegatives(): Keras's default name
    assert sorted(th) == sorted(kh) == sorted(["loss", *names, "val_loss", *(f"val_{n}" for n in names)])
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=2e-4, atol=1e-5, err_msg=k)
    assert kh["tp"][0] + kh["fn"][0] + kh["fp"][0] + kh["true_negatives"][0] == 64  # counts over the epoch
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=1e-5)
    # the list's own objects are the compiled metrics: after evaluate they hold its counts, as in Keras
    np.testing.assert_allclose(torch_out["state"], keras_out["state"], rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(torch_out["state"], torch_out["evaluate"][1:], rtol=1e-6)


def test_the_translation_binds_the_metrics_by_their_keras_names():
    out = tx(COUNTS).output
    assert "tensorflow" not in out and "keras.metrics.TruePositives(" not in out
    assert ('model_metrics = {\n    "fn": metrics[0],\n    "fp": metrics[1],\n    "true_negatives": metrics[2],\n'
            '    "tp": metrics[3],\n    "precision": metrics[4],\n    "recall": metrics[5],\n}\n') in out
    assert "fit(model, optimizer, loss_fn, model_metrics, x, y, batch_size=16, epochs=2" in out
    assert "evaluate(model, loss_fn, model_metrics, x, y, batch_size=20, verbose=0)" in out
    top = tx(TOP_K).output
    assert ('metrics = {\n    "acc": SparseCategoricalAccuracy(),\n    "top-2-accuracy": SparseTopKCategoricalAccuracy(k=2),\n'
            '    "accuracy": SparseCategoricalAccuracy(),\n}\n') in top


def _compile_errors(src: str) -> list[str]:
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    return [m for _, m in errors(r) if m.startswith("model.compile(...) is a Keras model method")]


def test_metrics_the_loop_cannot_compute_keep_the_compile_error():
    base = COUNTS.replace("metrics=metrics)", "metrics=METRICS)")
    # a list changed after it is bound, a metric of no (y_true, y_pred), a string fwport has no class for,
    # and two metrics of one name: the compile (and its fit) stay Keras, with the reason
    for metrics, why in (('metrics', "is not a name bound once, before the compile, to a literal list"),
                         ('[keras.metrics.Mean(), "mae"]', "is not a Keras metric object of y_true and y_pred"),
                         ('["mae", "auc"]', "the metric 'auc' is not translated"),
                         ('["mae", keras.metrics.MeanAbsoluteError(name="mae")]', "two compiled metrics have one name")):
        src = base.replace("METRICS", metrics)
        if metrics == "metrics":
            src = src.replace("model.compile(", "metrics.append(keras.metrics.AUC())\nmodel.compile(")
        msgs = _compile_errors(src)
        assert len(msgs) == 1 and why in msgs[0], (metrics, msgs)


FACTORY = '''
import numpy as np
import pytest
from tensorflow import keras


def get_model():
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse",
                  metrics=["mae", keras.metrics.MeanSquaredError(name="mse")])
    return model


reg = get_model()
'''


def test_a_model_factory_returns_its_metrics_beside_the_optimizer_and_loss(tmp_path):
    """The factory returns the metric dict too; the caller's fit / evaluate update it. Run without TensorFlow:
    evaluate's [loss, mae, mse] are those of predict's outputs, by hand (the loss is the mse)."""
    r = tx(FACTORY + '''

def train(batches, x, y):
    h = reg.fit(batches, epochs=2, verbose=0)
    return h.history, reg.evaluate(x, y, verbose=0), reg.predict(x)
''')
    assert errors(r) == [], errors(r)
    out = r.output
    assert 'metrics = {"mae": MeanAbsoluteError(), "mse": MeanSquaredError()}' in out
    assert "return model, optimizer, loss_fn, metrics" in out
    assert "reg, reg_optimizer, reg_loss_fn, reg_metrics = get_model()" in out
    assert "fit(reg, reg_optimizer, reg_loss_fn, reg_metrics, batches, epochs=2, verbose=0)" in out
    script = "import sys\nsys.modules['tensorflow'] = sys.modules['keras'] = None\n" + out + textwrap.dedent('''
        rng = np.random.default_rng(0)
        x = rng.normal(size=(40, 3)).astype("float32")
        y = (x @ np.array([1.0, -2.0, 0.5], "float32") + 0.3).astype("float32")
        batches = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 40, 8)]
        h, ev, p = train(batches, x, y)
        assert list(h) == ["loss", "mae", "mse"] and all(len(v) == 2 for v in h.values()), h
        assert h["loss"][1] < h["loss"][0]
        # the training loss and the mse metric see the same outputs of every batch
        assert np.allclose(h["loss"], h["mse"], rtol=1e-5), h
        err = p.reshape(-1) - y
        want = [float(np.mean(err ** 2)), float(np.mean(np.abs(err))), float(np.mean(err ** 2))]
        assert np.allclose(ev, want, rtol=1e-5, atol=1e-7), (ev, want)
        print("ok")
    ''')
    (tmp_path / "run.py").write_text(script)
    p = python(tmp_path / "run.py", side="torch", timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-3000:]


def test_the_metric_dict_takes_a_name_the_file_does_not_use():
    """`from sklearn import metrics` (or a parameter, a use anywhere): the dict is bound under another name,
    never over the file's own."""
    src = '''
        from sklearn import metrics
        from tensorflow import keras

        model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
        model.compile(loss="mse", metrics=["mae", "mse"])


        def score(x, y):
            model.fit(x, y, verbose=0)
            return metrics.r2_score(y, model.predict(x))
        '''
    out = tx(src).output
    assert 'model_metrics = {"mae": MeanAbsoluteError(), "mse": MeanSquaredError()}' in out
    assert "fit(model, optimizer, loss_fn, model_metrics, x, y, verbose=0)" in out
    assert "return metrics.r2_score(y, predict(model, x))" in out


REGRESSION_ACCURACY = COUNTS.replace("metrics=metrics)", 'metrics=["accuracy"])').replace(
    'loss="binary_crossentropy"', 'loss="mse"')


def test_accuracy_beside_a_regression_loss_is_the_binary_one_for_one_output(tmp_path):
    """metrics=["accuracy"] with loss="mse" and one output column: Keras picks the binary accuracy (threshold
    0.5); the loop's argmax of a single column always agreed (an accuracy of 1.0 whatever the model did)."""
    assert 'loss="mse"' in REGRESSION_ACCURACY and 'metrics=["accuracy"]' in REGRESSION_ACCURACY
    keras_out, torch_out = _run(tmp_path, REGRESSION_ACCURACY, BINARY_DRIVER.replace(
        ', "state": [float(m.result()) for m in metrics]', ""))
    kh, th = keras_out["history"], torch_out["history"]
    assert sorted(th) == sorted(kh) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=2e-4, atol=1e-5, err_msg=k)
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=1e-5)
    assert 0.0 < keras_out["evaluate"][1] < 1.0  # not the constant an argmax over one column gives


# metric functions of the file given to compile (keras-io's edsr PSNR, mirnet peak_signal_noise_ratio): Keras wraps
# each in a MeanMetricWrapper named after the function
FUNCTIONS = '''
import numpy as np
import pytest
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


def root_mean_squared(y_true, y_pred):
    return tf.sqrt(tf.reduce_mean(tf.square(y_true - y_pred), axis=-1))


def first_error(y_true, y_pred):
    return tf.reduce_mean(tf.abs(y_true[:, 0] - y_pred[:, 0]))


model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="mse", metrics=[root_mean_squared, first_error])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, batch_size=20, verbose=0)
'''

ONE_HOT_DRIVER = DRIVER.replace('y[48:] = rng.integers(0, 3, 16)', 'y[48:] = rng.integers(0, 3, 16)\ny = np.eye(3, dtype="float32")[y]')


def test_metric_functions_of_the_file_match_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, FUNCTIONS, ONE_HOT_DRIVER)
    kh, th = keras_out["history"], torch_out["history"]
    names = ["root_mean_squared", "first_error"]
    assert sorted(th) == sorted(kh) == sorted(["loss", *names, "val_loss", *(f"val_{n}" for n in names)])
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=2e-4, atol=1e-5, err_msg=k)
    # evaluate in batches of 20 over 64 samples: the scalar metric counts each batch once, as Keras's Mean does
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=1e-5)
    assert "MeanMetricWrapper(root_mean_squared)" in tx(FUNCTIONS).output


def test_keras2_metric_function_gets_labels_of_the_outputs_rank(tmp_path):
    """Keras 2's compile gives 1-D labels of 2-D outputs a trailing axis (match_dtype_and_rank) and its
    MeanMetricWrapper casts both to float32 (a trailing axis of size 1 dropped where the ranks differ): labels (n,)
    of outputs (n, 1) reach the function as (n, 1), whose axis=-1 mean is then per sample; Keras 3's gives them as
    they are."""
    pytest.importorskip("tf_keras")
    src = (FUNCTIONS.replace("from tensorflow import keras", "import tf_keras as keras")
           .replace("from tensorflow.keras import layers", "from tf_keras import layers")
           .replace("layers.Dense(3)])", "layers.Dense(1)])")
           .replace("y_true[:, 0] - y_pred[:, 0]", "y_true - y_pred"))
    driver = BINARY_DRIVER.replace('"state": [float(m.result()) for m in metrics]', '"state": 0')
    assert "MeanMetricWrapper(root_mean_squared, keras2=True)" in tx(src).output
    keras_out, torch_out = _run(tmp_path, src, driver)
    kh, th = keras_out["history"], torch_out["history"]
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=2e-4, atol=1e-5, err_msg=k)
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=1e-5)
