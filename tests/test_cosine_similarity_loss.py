"""keras.losses.CosineSimilarity → the CosineSimilarityLoss module written into the output: minus the cosine of
each side l2-normalised as Keras does (x / max(norm, 1e-6)), meaned over the batch; compared with Keras on random
rows, a zero row and rows of tiny norm, per sample and reduced, along the last axis and along axis 1."""
from __future__ import annotations

import textwrap

import numpy as np

from fwport.core.pipeline import translate_source
from helpers import needs
from runners import keras_and_torch

SRC = '''
from tensorflow import keras

cos = keras.losses.CosineSimilarity()
cos_rows = keras.losses.CosineSimilarity(axis=1, reduction=None)


def values(y_true, y_pred):
    return cos(y_true, y_pred), cos_rows(y_true, y_pred)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import values
rng = np.random.default_rng(0)
y_true = rng.normal(size=(5, 4, 3)).astype("float32")
y_pred = rng.normal(size=(5, 4, 3)).astype("float32")
y_true[0] = 0.0                      # a zero vector: cosine 0 on both sides, no NaN
y_pred[1] *= 1e-9                    # norms below the floor (Keras 3: 1e-7)
if sys.argv[2] == "torch":
    import torch
    y_true, y_pred = torch.tensor(y_true), torch.tensor(y_pred)
a, b = values(y_true, y_pred)
print("RESULT " + json.dumps({"mean": float(a), "rows": np.asarray(b).tolist()}))
'''


KERAS2 = SRC.replace("from tensorflow import keras", "import tf_keras as keras").replace("reduction=None", 'reduction="none"')


def _translated(src: str = SRC):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "tf2torch")
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    return r.output


def test_the_loss_objects_become_the_written_module():
    out = _translated()
    assert "class CosineSimilarityLoss(nn.Module):" in out
    assert "cos = CosineSimilarityLoss()" in out and "cos_rows = CosineSimilarityLoss(axis=1, reduction=\"none\")" in out
    assert "cos(y_pred, y_true" in out  # torch's order: input, target


@needs("tensorflow", "torch")
def test_cosine_similarity_loss_equals_keras(tmp_path):
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SRC), _translated(), DRIVER)
    _agree(keras_out, torch_out)


@needs("tf_keras", "torch")
def test_keras2_normalises_with_its_own_floor(tmp_path):
    """tf_keras normalises with tf.math.l2_normalize, x / max(norm, 1e-6), Keras 3 with x / max(norm, 1e-7)."""
    out = _translated(KERAS2)
    assert "cos = Keras2CosineSimilarityLoss()" in out and "class CosineSimilarityLoss(nn.Module):" in out
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(KERAS2), out, DRIVER)
    _agree(keras_out, torch_out)


def _agree(keras_out: dict, torch_out: dict) -> None:
    np.testing.assert_allclose(torch_out["mean"], keras_out["mean"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(torch_out["rows"], keras_out["rows"], rtol=1e-5, atol=1e-6)
    rows = np.asarray(keras_out["rows"])
    assert rows.shape == (5, 3) and np.all(rows[0] == 0)  # the zero vector's cosine
    assert np.abs(rows[1]).max() < 0.1  # below the norm floor Keras's cosine shrinks: the floor is compared


# the function form (one value per sample, minus the cosine), along the last axis and along axis 1, and the metric
# object (plus the cosine, a running mean over two batches)
FUNCTIONS = '''
from tensorflow import keras

cosine = keras.metrics.CosineSimilarity(axis=1)


def values(y_true, y_pred):
    cosine.update_state(y_true[:2], y_pred[:2])
    cosine.update_state(y_true[2:], y_pred[2:])
    return (keras.losses.cosine_similarity(y_true, y_pred), keras.losses.cosine_similarity(y_true, y_pred, axis=1),
            cosine.result())
'''

FUNCTIONS_DRIVER = DRIVER.replace(
    'a, b = values(y_true, y_pred)\nprint("RESULT " + json.dumps({"mean": float(a), "rows": np.asarray(b).tolist()}))',
    'a, b, c = values(y_true, y_pred)\n'
    'print("RESULT " + json.dumps({"last": np.asarray(a).tolist(), "rows": np.asarray(b).tolist(), "metric": float(c)}))')


@needs("tensorflow", "torch")
def test_the_function_and_the_metric_equal_keras_in_sign_and_axis(tmp_path):
    out = _translated(FUNCTIONS)
    assert "cosine_similarity(y_true, y_pred, axis=1)" in out and "cosine = CosineSimilarity(axis=1)" in out
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(FUNCTIONS), out, FUNCTIONS_DRIVER)
    for k in ("last", "rows", "metric"):
        np.testing.assert_allclose(torch_out[k], keras_out[k], rtol=1e-5, atol=1e-6, err_msg=k)
    last, rows = np.asarray(keras_out["last"]), np.asarray(keras_out["rows"])
    assert last.shape == (5, 4) and rows.shape == (5, 3)  # the axis summed away is the one given
    # the metric is plus the mean cosine along axis 1, the loss minus it
    np.testing.assert_allclose(keras_out["metric"], -rows.mean(), rtol=1e-5)
    assert abs(keras_out["metric"]) > 1e-2


@needs("tf_keras", "torch")
def test_the_keras2_function_normalises_with_its_own_floor(tmp_path):
    src = FUNCTIONS.replace("from tensorflow import keras", "import tf_keras as keras")
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "tf2torch")
    assert "keras2_cosine_similarity(y_true, y_pred, axis=1)" in r.output
    assert any("CosineSimilarity metric in Keras 2 code" in f.message for f in r.findings)
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(src), r.output, FUNCTIONS_DRIVER)
    for k in ("last", "rows"):  # (the metric: Keras 3's floor, the warning; rows[1] is below both floors)
        np.testing.assert_allclose(torch_out[k], keras_out[k], rtol=1e-5, atol=1e-6, err_msg=k)


# compile's strings: the loss (minus the cosine, meaned) and the metric (plus it) of the written fit / evaluate
COMPILED = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss="cosine_similarity",
              metrics=["cosine_similarity"])


def train(x, y):
    targets = np.eye(3, dtype="float32")[y] + 0.3 * x[:, :3]
    history = model.fit(x, targets, validation_split=0.25, epochs=3, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, targets, verbose=0)
'''


@needs("tensorflow", "torch")
def test_compile_strings_train_as_keras_trains(tmp_path):
    from runners import compare_fit
    from test_fit_callbacks import DRIVER as FIT_DRIVER, _run
    keras_out, torch_out = _run(tmp_path, COMPILED, FIT_DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "cosine_similarity", "val_loss", "val_cosine_similarity"])
    kh = keras_out["history"]
    np.testing.assert_allclose(kh["cosine_similarity"], -np.asarray(kh["loss"]), rtol=1e-5)  # the signs
    assert kh["loss"][-1] < kh["loss"][0] < 0
