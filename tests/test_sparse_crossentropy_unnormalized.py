"""Sparse categorical cross-entropy of predictions that are not a distribution (a model without a softmax on its
output, from_logits left False): Keras clips them to [1e-7, 1 - 1e-7], takes their log and gives it to a softmax
cross-entropy, which renormalises them, -log(p_y / sum(p)). The translation gives torch.log(p.clamp(...)) to
nn.CrossEntropyLoss / F.cross_entropy, which computes the same; nn.NLLLoss / F.nll_loss of it (-log p_y) would not.

Numbers: the loss object, the per-sample function and a compiled model's evaluate and one fit epoch, computed by
Keras 3 and tf_keras and by the translation (TensorFlow unimportable there) on rows summing to less and more than
1, with values above 1 and near 0, compared.
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

scce = keras.losses.SparseCategoricalCrossentropy()
classes = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(3)])
classes.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")


def losses(y, q):
    return [scce(y, q), keras.losses.sparse_categorical_crossentropy(y, q)]


def evaluated(y, q):
    return classes.evaluate(q, y, batch_size=len(q), verbose=0)


def trained(y, q):
    return classes.fit(q, y, batch_size=len(q), epochs=2, verbose=0).history["loss"]
'''

KERAS2 = SRC.replace("import keras\nfrom keras import layers", "import tf_keras as keras\nfrom tf_keras import layers")

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
q = np.array([[0.2, 0.9, 0.5], [0.1, 0.3, 1.4], [0.05, 0.05, 0.1], [2.0, 1e-9, 0.5], [0.3, 0.3, 0.4]] * 2, "float32")
y = np.array([1, 2, 0, 1, 2, 0, 1, 2, 0, 1])
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        classes[0].weight.copy_(torch.eye(3))
        classes[0].bias.zero_()
    values = [v.detach().numpy().tolist() for v in losses(torch.tensor(y), torch.tensor(q))]
else:
    classes.set_weights([np.eye(3, dtype="float32"), np.zeros(3, "float32")])
    values = [np.asarray(v).tolist() for v in losses(y, q)]
print("RESULT " + json.dumps({"losses": values, "evaluate": evaluated(y, q), "fit": trained(y, q)}))
'''


def _tx(src: str) -> str:
    r = translate_source(textwrap.dedent(src).lstrip("\\n"), "model.py")
    assert error_findings(r) == [], error_findings(r)
    return r.output


@pytest.mark.parametrize("src", [SRC, KERAS2], ids=["keras3", "tf_keras"])
def test_sparse_crossentropy_of_unnormalised_predictions_matches_keras(tmp_path, src):
    if src is KERAS2:
        pytest.importorskip("tf_keras")
    out = _tx(src)
    assert "nn.NLLLoss" not in out and "nll_loss" not in out
    keras_out, torch_out = keras_and_torch(tmp_path, src, out, DRIVER)
    # the renormalisation matters here: -log(p_y) alone differs from Keras's per-sample loss by more than 0.3
    q = np.array([[0.2, 0.9, 0.5], [0.1, 0.3, 1.4], [0.05, 0.05, 0.1], [2.0, 1e-9, 0.5], [0.3, 0.3, 0.4]] * 2)
    y = np.array([1, 2, 0, 1, 2, 0, 1, 2, 0, 1])
    unnormalised = -np.log(np.clip(q, 1e-7, 1 - 1e-7)[np.arange(10), y])
    assert np.abs(unnormalised - keras_out["losses"][1]).max() > 0.3
    np.testing.assert_allclose(torch_out["losses"][0], keras_out["losses"][0], rtol=1e-6)
    np.testing.assert_allclose(torch_out["losses"][1], keras_out["losses"][1], rtol=1e-6, atol=2.5e-7)
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=1e-6)
    np.testing.assert_allclose(torch_out["fit"], keras_out["fit"], rtol=1e-5)
