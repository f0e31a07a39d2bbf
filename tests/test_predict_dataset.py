"""model.predict of a tf.data pipeline (issue 9): Keras runs the model on each batch of the dataset (its first item
where the elements are (x, y) tuples) and concatenates the outputs. The written predict does the same where a call
gives it a dataset (the translated pipeline), and keeps the arrays' batching for the other calls.

Numbers: the same model (weights set by the driver) predicts a dataset of inputs, a dataset of (x, y) given as x=,
and the array itself, in Keras and in the translation (separate subprocesses); every output is compared.
"""
from __future__ import annotations

import textwrap

import numpy as np
from runners import keras_and_torch
from test_fit_callbacks import errors, tx

SOURCE = '''
import numpy as np
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                          keras.layers.Dense(2, activation="softmax")])


def predictions(x, y):
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    test_ds = tf.data.Dataset.from_tensor_slices(x).batch(7)
    return [model.predict(test_ds, verbose=0), model.predict(x=ds, verbose=0), model.predict(x, batch_size=5)]
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(4)
W = [rng.normal(size=(4, 8)).astype("float32"), rng.normal(size=8).astype("float32"),
     rng.normal(size=(8, 2)).astype("float32"), rng.normal(size=2).astype("float32")]
x = rng.normal(size=(45, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
else:
    model.set_weights(W)
print("RESULT " + json.dumps([np.asarray(p).tolist() for p in predictions(x, y)]))
'''


def test_predict_of_a_dataset_matches_keras(tmp_path):
    r = tx(SOURCE)
    assert errors(r) == []
    assert "inputs = (b[0] if isinstance(b, (tuple, list)) else b for b in x)" in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SOURCE), r.output, DRIVER)
    assert len(keras_out) == len(torch_out) == 3
    for a, b in zip(keras_out, torch_out, strict=True):
        assert np.shape(a) == np.shape(b) == (45, 2)
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_predict_of_arrays_only_keeps_the_plain_function():
    r = tx(SOURCE.replace("model.predict(test_ds, verbose=0), model.predict(x=ds, verbose=0), ", ""))
    assert "def predict(model, x, batch_size=None, verbose=1):" in r.output
    assert "isinstance(x, (" not in r.output
