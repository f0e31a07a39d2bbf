"""Categorical cross-entropy of predictions that are not a distribution (a model without a softmax on its output,
from_logits left False): Keras divides them by their sum over the classes, clips them to [1e-7, 1 - 1e-7], then
takes -sum(y log p), in that order. nn.CrossEntropyLoss / F.cross_entropy of torch.log(p.clamp(...)) clipped first
and renormalised after: a row with a value above 1 - 1e-7 or below 1e-7 differed ([0.1, 0.3, 1.4]: Keras 0.4133,
that 0.4559). The translation writes Keras's formula (CategoricalCrossentropyLoss, categorical_crossentropy).

Numbers: the loss object (with and without label smoothing, reduction 'sum'), the per-sample function, a loss of an
expression prediction, a compiled model's evaluate and two fit epochs, computed by Keras 3 and tf_keras and by the
translation (TensorFlow unimportable there) on rows summing to less and more than 1, with values above 1, 0 and
exact 1, compared. Binary cross-entropy of probabilities at 0 and 1 likewise (Keras clips them as nn.BCELoss of
p.clamp(1e-7, 1 - 1e-7) does; Keras 2 adds 1e-7 in the logs, Keras2BCELoss).
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from helpers import error_findings
from runners import keras_and_torch

from fwport.core.pipeline import translate_source

SRC = '''
import numpy as np
import keras
from keras import layers

cce = keras.losses.CategoricalCrossentropy()
smoothed = keras.losses.CategoricalCrossentropy(label_smoothing=0.1)
summed = keras.losses.CategoricalCrossentropy(reduction="sum")
bce = keras.losses.BinaryCrossentropy()
classes = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(3)])
classes.compile(optimizer="sgd", loss="categorical_crossentropy")


def losses(y, q):
    return [cce(y, q), smoothed(y, q), summed(y, q), keras.losses.categorical_crossentropy(y, q),
            cce(y, classes(q))]


def binary(y, q):
    return [bce(y, q), keras.losses.binary_crossentropy(y, q)]


def evaluated(y, q):
    return classes.evaluate(q, y, batch_size=len(q), verbose=0)


def trained(y, q):
    return classes.fit(q, y, batch_size=len(q), epochs=2, verbose=0).history["loss"]
'''

KERAS2 = SRC.replace("import keras\nfrom keras import layers", "import tf_keras as keras\nfrom tf_keras import layers")

ROWS = [[0.1, 0.3, 1.4], [0.2, 0.9, 0.5], [0.0, 0.0, 1.0], [2.0, 0.0, 0.5], [0.05, 0.05, 0.1], [0.0, 1.0, 0.0]] * 2
LABELS = [2, 1, 2, 0, 1, 0] * 2
BINARY = [[0.0, 1.0, 0.5], [1.0, 0.0, 1e-9], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
BINARY_LABELS = [[0.0, 1.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 1.0]]

DRIVER = f'''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
q = np.array({ROWS!r}, "float32")
y = np.eye(3, dtype="float32")[{LABELS!r}]
y[1] = [0.2, 0.5, 0.3]  # a soft label
bq, by = np.array({BINARY!r}, "float32"), np.array({BINARY_LABELS!r}, "float32")
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        classes[0].weight.copy_(torch.eye(3))
        classes[0].bias.zero_()
        values = [v.detach().numpy().tolist() for v in losses(torch.tensor(y), torch.tensor(q))]
    bvalues = [v.detach().numpy().tolist() for v in binary(torch.tensor(by), torch.tensor(bq))]
else:
    classes.set_weights([np.eye(3, dtype="float32"), np.zeros(3, "float32")])
    values = [np.asarray(v).tolist() for v in losses(y, q)]
    bvalues = [np.asarray(v).tolist() for v in binary(by, bq)]
print("RESULT " + json.dumps({{"losses": values, "binary": bvalues, "evaluate": evaluated(y, q), "fit": trained(y, q)}}))
'''


def _tx(src: str) -> str:
    r = translate_source(textwrap.dedent(src).lstrip("\\n"), "model.py")
    assert error_findings(r) == [], error_findings(r)
    return r.output


def _clip_first(y, q):
    """What the translation computed before: the log of the clipped predictions, renormalised (log_softmax)."""
    logq = np.log(np.clip(q, 1e-7, 1 - 1e-7))
    logq = logq - np.log(np.exp(logq).sum(-1, keepdims=True))
    return -(y * logq).sum(-1)


@pytest.mark.parametrize("src", [SRC, KERAS2], ids=["keras3", "tf_keras"])
def test_categorical_crossentropy_of_unnormalised_predictions_matches_keras(tmp_path, src):
    if src is KERAS2:
        pytest.importorskip("tf_keras")
    out = _tx(src)
    assert "nn.CrossEntropyLoss(" not in out and "F.cross_entropy(" not in out and "torch.log(q" not in out
    assert out.count("classes(q)") == 1  # the expression prediction is computed once
    keras_out, torch_out = keras_and_torch(tmp_path, src, out, DRIVER)
    # the order matters here: clipping first and renormalising after differs from Keras by more than 0.04
    y = np.eye(3)[LABELS]
    y[1] = [0.2, 0.5, 0.3]
    assert np.abs(_clip_first(y, np.array(ROWS)) - keras_out["losses"][3]).max() > 0.04
    q = np.array(ROWS)  # Keras's order: divided by the sum, clipped, logged
    np.testing.assert_allclose(keras_out["losses"][3], -(y * np.log(np.clip(q / q.sum(-1, keepdims=True), 1e-7,
                                                                           1 - 1e-7))).sum(-1), rtol=1e-5, atol=3e-8)
    for i, (t, k) in enumerate(zip(torch_out["losses"], keras_out["losses"])):
        np.testing.assert_allclose(t, k, rtol=1e-6, atol=1e-7, err_msg=f"loss {i}")
    for i, (t, k) in enumerate(zip(torch_out["binary"], keras_out["binary"])):
        np.testing.assert_allclose(t, k, rtol=1e-6, atol=1e-7, err_msg=f"binary loss {i}")
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=1e-6)
    np.testing.assert_allclose(torch_out["fit"], keras_out["fit"], rtol=1e-5)
