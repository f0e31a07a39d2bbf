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
