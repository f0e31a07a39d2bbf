"""model.train_on_batch / test_on_batch / predict_on_batch on a compiled model (issue 9): the written
train_on_batch (one update of fit's step on the whole batch), evaluate and predict on one batch.

Keras 3's train_on_batch resets the metrics every call and returns the batch's loss and metrics, computed from
the outputs before the update: a float, a list [loss, *metrics], or a dict with return_dict=True; test_on_batch
likewise in inference mode; predict_on_batch a NumPy array.

Numbers: each program makes several train_on_batch calls, from the same initial weights, in Keras and in its
translation (subprocesses, TensorFlow unimportable in the torch one): the returned values, test_on_batch's,
predict_on_batch's outputs and the kernels after training are compared (SGD and Adam).
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from runners import compare_fit
from test_fit_callbacks import DRIVER, _run, errors, tx

SGD = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3, momentum=0.5),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = {"loss": [], "accuracy": []}
    for start in range(0, 48, 16):
        loss, accuracy = model.train_on_batch(x[start:start + 16], y[start:start + 16])
        history["loss"].append(loss)
        history["accuracy"].append(accuracy)
    logs = model.train_on_batch(x[:16], y[:16], return_dict=True)
    history["loss"].append(logs["loss"])
    history["accuracy"].append(logs["accuracy"])
    history["predict"] = model.predict_on_batch(x[48:]).tolist()
    return history, [*model.test_on_batch(x[48:], y[48:]), model.test_on_batch(x, y, return_dict=True)["accuracy"]]
'''

ADAM = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
# (epsilon: Keras adds Adam's before the bias correction, torch after it, a warning of the translation, which
# moves these kernels by 3e-4 at the default 1e-7; not what this case tests)
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.02, epsilon=1e-12), loss="mse")


def train(x, y):
    onehot = np.eye(3, dtype="float32")[y]
    losses = [model.train_on_batch(x[:32], onehot[:32]) for _ in range(6)]
    logs = model.train_on_batch(x[32:], onehot[32:], return_dict=True)
    return {"loss": losses, "logs": [logs["loss"]]}, model.test_on_batch(x, onehot)
'''


def test_train_on_batch_with_sgd_and_accuracy_equals_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SGD, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "accuracy", "predict"])
    kh = keras_out["history"]
    assert len(set(kh["loss"])) == 4 and all(isinstance(v, float) for v in kh["loss"])  # the model moved each call


def test_train_on_batch_with_adam_and_a_scalar_loss_equals_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, ADAM, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "logs"])
    assert isinstance(torch_out["evaluate"], float) and isinstance(keras_out["evaluate"], float)
    kh = keras_out["history"]["loss"]
    assert kh[-1] < kh[0] - 1e-2  # the loss each call returns is the batch's before that update


def test_the_translation_calls_the_written_functions():
    r = tx(SGD)
    assert errors(r) == []
    out = r.output
    assert "def train_on_batch(model, optimizer, loss_fn, x, y, return_dict=False):" in out
    assert "train_on_batch(model, optimizer, loss_fn, x[start:start + 16], y[start:start + 16])" in out
    assert "train_on_batch(model, optimizer, loss_fn, x[:16], y[:16], return_dict=True)" in out
    assert "predict(model, x[48:], verbose=0)" in out and "evaluate(model, loss_fn, x[48:], y[48:], verbose=0)" in out
    assert "keras" not in out


def test_a_file_without_train_on_batch_gets_no_such_function():
    assert "def train_on_batch" not in tx(SGD.split("\n\ndef train")[0] + "\nmodel.fit(np.zeros((4, 10)), np.zeros(4))\n").output


def test_sample_weight_of_a_loss_the_loop_cannot_weigh_is_an_error_naming_the_call():
    src = ADAM.replace('loss="mse")', "loss=my_loss)").replace("def train(x, y):", "def my_loss(y_true, y_pred):\n"
                                                                 "    return (y_true - y_pred) ** 4\n\n\ndef train(x, y):")
    src = src.replace("model.train_on_batch(x[:32], onehot[:32])", "model.train_on_batch(x[:32], onehot[:32], sample_weight=w)")
    errs = errors(tx(src))
    assert any("sample_weight= is not translated (the generated fit / evaluate / train_on_batch weigh" in m for _, m in errs), errs


# sample_weight= in train_on_batch / test_on_batch / evaluate: measured (Keras 3.15 and tf_keras 2.21) each sample's
# loss times its weight, summed and divided by the batch size (not by the weights' sum); compile's metrics unweighted
WEIGHTED_SGD = SGD.replace(
    "        loss, accuracy = model.train_on_batch(x[start:start + 16], y[start:start + 16])",
    "        loss, accuracy = model.train_on_batch(x[start:start + 16], y[start:start + 16],\n"
    "                                              sample_weight=w[start:start + 16])").replace(
    "    logs = model.train_on_batch(x[:16], y[:16], return_dict=True)",
    "    logs = model.train_on_batch(x[:16], y[:16], sample_weight=w[:16], return_dict=True)").replace(
    "    return history, [*model.test_on_batch(x[48:], y[48:]), model.test_on_batch(x, y, return_dict=True)[\"accuracy\"]]",
    "    return history, [*model.test_on_batch(x[48:], y[48:], sample_weight=w[48:]), model.test_on_batch(x, y)[0],\n"
    "                     *model.evaluate(x, y, sample_weight=w, batch_size=7, verbose=0)]").replace(
    "def train(x, y):\n", "def train(x, y):\n    w = (np.arange(64) % 5 * 0.5).astype(\"float32\")  # (zeros too)\n")

WEIGHTED_ADAM = ADAM.replace("model.train_on_batch(x[:32], onehot[:32])",
                             "model.train_on_batch(x[:32], onehot[:32], sample_weight=np.linspace(0, 2, 32))").replace(
    "model.test_on_batch(x, onehot)", "model.test_on_batch(x, onehot, sample_weight=np.linspace(2, 0, 64))")


@pytest.mark.parametrize("keras2", [False, True], ids=["keras3", "keras2"])
def test_sample_weight_weighs_each_samples_loss_as_keras(tmp_path, keras2):
    from runners import keras_and_torch

    for name, src, keys in (("sgd", WEIGHTED_SGD, ["loss", "accuracy", "predict"]), ("adam", WEIGHTED_ADAM,
                                                                                      ["loss", "logs"])):
        assert src.count("sample_weight=") == (4 if name == "sgd" else 2)
        if keras2:
            src = "# fwport: keras=2\n" + textwrap.dedent(src).lstrip("\n")
        trans = tx(src)
        assert errors(trans) == [], errors(trans)
        assert "per_sample.reduction = \"none\"" in trans.output
        env = {"TF_USE_LEGACY_KERAS": "1"} if keras2 else {}
        (tmp_path / name).mkdir()
        keras_out, torch_out = keras_and_torch(tmp_path / name, textwrap.dedent(src), trans.output, DRIVER, **env)
        compare_fit(keras_out, torch_out, keys)
        if name == "sgd":  # [test_on_batch weighted: loss, accuracy; unweighted loss; evaluate weighted: loss, accuracy]
            ev = keras_out["evaluate"]
            assert abs(ev[2] - ev[3]) > 1e-3 and 0 <= ev[4] <= 1  # the weights count


def test_a_function_of_the_file_named_train_on_batch_keeps_its_name():
    src = SGD.replace("def train(x, y):", "def train_on_batch(x, y):\n    return model.train_on_batch(x, y)\n\n\ndef train(x, y):")
    out = tx(src).output
    assert "def model_train_on_batch(model, optimizer, loss_fn, x, y, return_dict=False):" in out
    assert "def train_on_batch(x, y):\n    return model_train_on_batch(model, optimizer, loss_fn, x, y)" in out


SEVERAL_OUTPUTS = '''
import numpy as np
import keras
from keras import layers

inputs = keras.Input(shape=(4,))
h = layers.Dense(8, activation="relu")(inputs)
a = layers.Dense(1, name="out_a")(h)
b = layers.Dense(3, name="out_b")(h)
model = keras.Model(inputs, [a, b])
model.compile(optimizer="sgd", loss={"out_a": "mse", "out_b": "sparse_categorical_crossentropy"})
x = np.zeros((8, 4), "float32")
ya, yb = np.zeros((8, 1), "float32"), np.zeros((8,), "int64")
model.fit(x, [ya, yb], epochs=1)
model.train_on_batch(x, [ya, yb])
model.test_on_batch(x, [ya, yb])
'''


def test_train_on_batch_of_a_model_of_several_outputs_is_an_error():
    """The loss-per-output loops write fit / evaluate / predict only: a train_on_batch there is refused at its
    line (it had become a call of a function the file did not define); test_on_batch is the written evaluate in Keras 2
    (each output's loss averaged by samples), an error in Keras 3 (the one batch's per-output losses, where the written
    evaluate averages them over batches of 32: test_fit_multi_output)."""
    r = tx(SEVERAL_OUTPUTS)
    lines = SEVERAL_OUTPUTS.lstrip("\n").splitlines()
    line = lines.index("model.train_on_batch(x, [ya, yb])") + 1
    said = [f for f in r.findings if f.severity == "error"]
    assert said and {f.line for f in said} == {line, line + 1}
    assert all("several outputs" in f.message for f in said)
    assert "def train_on_batch" not in r.output
    r = tx("# fwport: keras=2\n" + SEVERAL_OUTPUTS.lstrip("\n"))
    assert [f.line for f in r.findings if f.severity == "error"] == [line + 1]
    assert "evaluate(model, loss_fn, x, [ya, yb], verbose=0)" in r.output
