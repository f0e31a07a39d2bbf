"""Sparse categorical cross-entropy of labels of shape (n, 1) (issue 9): Keras drops a trailing label axis of size 1
(its backend squeezes a target of the output's rank whose last axis is 1); torch's cross_entropy takes (n,) targets
and refuses (n, 1) ones. The translation reshapes the labels to the predictions' shape less the class axis, which is
Keras's squeeze for (n, 1) (and (n, T, 1) of sequences) and nothing for (n,).

Numbers: the loss object, the loss functions of probabilities and of logits, on (n,), (n, 1) and (n, T, 1) labels,
computed by Keras and by the translation in separate subprocesses.
"""
from __future__ import annotations

import textwrap

import numpy as np
from runners import keras_and_torch
from test_fit_callbacks import errors, tx

SOURCE = '''
import tensorflow as tf
from tensorflow import keras

loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def losses(y, logits, probs):
    a = loss_obj(y, logits)
    b = keras.losses.sparse_categorical_crossentropy(y, probs)
    c = tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
    return a, b, c
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
out = {}
for name, shape, outputs in [("n", (12,), (12, 3)), ("n1", (12, 1), (12, 3)), ("nt1", (4, 5, 1), (4, 5, 3))]:
    logits = rng.normal(size=outputs).astype("float32") * 2
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    y = rng.integers(0, 3, size=shape)
    if sys.argv[2] == "torch":
        import torch
        y, logits, probs = torch.tensor(y), torch.tensor(logits), torch.tensor(probs)
    out[name] = [np.asarray(v).tolist() for v in losses(y, logits, probs)]
print("RESULT " + json.dumps(out))
'''


def test_sparse_labels_of_shape_n_1_match_keras(tmp_path):
    r = tx(SOURCE)
    assert errors(r) == []
    assert "y.long().reshape(logits.shape[:-1])" in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SOURCE), r.output, DRIVER)
    assert sorted(keras_out) == sorted(torch_out) == ["n", "n1", "nt1"]
    for k in keras_out:
        for a, b in zip(keras_out[k], torch_out[k], strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=k)
    assert np.shape(keras_out["nt1"][1]) == (4, 5)  # per step of each sequence, as Keras gives it
