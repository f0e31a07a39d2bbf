"""A loss object called on a prediction written as an expression, ``loss_fn(y, model(x))`` (issue 9): Keras
matches labels of shape (n,) or (n, 1) to the predictions, torch does not (sparse labels of shape (n, 1) crash
nn.CrossEntropyLoss; (n,) targets of (n, 1) predictions crash nn.BCEWithLogitsLoss and broadcast to (n, n) in
nn.MSELoss, a silently wrong loss). The translation binds the prediction to a name on a line before the statement
(``y_pred = model(x)``) and gives the labels its shape, as it does for a prediction already named.

Numbers: the losses computed by Keras and by the translation (TensorFlow unimportable there) from the same weights
on the same inputs, in subprocesses, compared.
"""
from __future__ import annotations

import textwrap

import numpy as np

from helpers import error_findings
from runners import keras_and_torch

from fwport.core.pipeline import translate_source

SRC = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3)])
scalar = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(1)])
sparse = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
bce = keras.losses.BinaryCrossentropy(from_logits=True)
mse = keras.losses.MeanSquaredError()


def losses(x, y_sparse, y_binary, y_value):
    first = sparse(y_sparse, model(x, training=False))
    both = bce(y_binary, scalar(x)) + mse(y_value, scalar(x) * 2.0)
    return [float(first), float(both)]
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
W = [rng.normal(size=(4, 3)).astype("float32"), rng.normal(size=3).astype("float32"),
     rng.normal(size=(4, 1)).astype("float32"), rng.normal(size=1).astype("float32")]
x = rng.normal(size=(8, 4)).astype("float32")
y_sparse = rng.integers(0, 3, size=(8, 1))  # (n, 1): Keras drops the trailing axis
y_binary = (rng.random(8) > 0.5).astype("float32")  # (n,) for (n, 1) predictions
y_value = rng.normal(size=8).astype("float32")
if sys.argv[2] == "torch":
    import torch
    for m, (k, b) in zip((model[0], scalar[0]), (W[:2], W[2:])):
        with torch.no_grad():
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    args = [torch.tensor(a) for a in (x, y_sparse, y_binary, y_value)]
else:
    model.set_weights(W[:2])
    scalar.set_weights(W[2:])
    args = [x, y_sparse, y_binary, y_value]
print("RESULT " + json.dumps(losses(*args)))
'''


def _tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\\n"), "model.py")
    assert translate_source(r.output, "model.py").output == r.output
    return r


def test_the_prediction_is_named_and_the_labels_take_its_shape():
    r = _tx(SRC)
    assert error_findings(r) == []
    out = r.output
    assert "    model.eval()\n    y_pred = model(x)\n    first = sparse(y_pred.movedim(-1, 1), " \
           "y_sparse.long().reshape(y_pred.shape[:-1]))" in out
    assert "    y_pred = scalar(x)\n    y_pred_ = scalar(x) * 2.0\n" in out  # one name each, in their order
    assert "bce(y_pred, y_binary.float().view_as(y_pred)) + mse(y_pred_, y_value.view_as(y_pred_))" in out


def test_losses_of_prediction_expressions_match_keras(tmp_path):
    r = _tx(SRC)
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SRC), r.output, DRIVER)
    np.testing.assert_allclose(torch_out, keras_out, rtol=1e-5, atol=1e-6)


def test_a_prediction_in_a_lambda_stays_with_a_warning():
    src = SRC.replace("    return [float(first), float(both)]", "    return lambda: sparse(y_sparse, model(x))")
    r = _tx(src)
    assert "lambda: sparse(model(x).movedim(-1, 1), y_sparse.long())" in r.output
    assert any(f.code == "shape-unknown" and "y_pred = ..." in f.message for f in r.findings)


def test_a_subscript_of_a_name_is_read_again_not_bound():
    src = SRC.replace("    return [float(first), float(both)]", "    preds = [scalar(x)]\n"
                      "    return mse(y_value, preds[0]) + mse(y_value, preds[-1])")
    out = _tx(src).output
    assert "mse(preds[0], y_value.view_as(preds[0])) + mse(preds[-1], y_value.view_as(preds[-1]))" in out
