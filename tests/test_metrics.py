"""Keras metric objects → the small running-sum classes fwport writes into the file: each fed the same
batches in Keras and in its translation (two subprocesses, TensorFlow blocked on the torch side),
result() compared after one batch, after two, and after reset_state() and a third."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import run_side

pytest.importorskip("tensorflow")

SOURCE = '''
import tensorflow as tf
from tensorflow import keras

metrics = {
    "binary": keras.metrics.BinaryAccuracy(threshold=0.3),
    "binary_default": keras.metrics.BinaryAccuracy(),
    "accuracy": keras.metrics.Accuracy(),
    "mae": keras.metrics.MeanAbsoluteError(),
    "mse": keras.metrics.MeanSquaredError(),
    "rmse": keras.metrics.RootMeanSquaredError(),
    "mape": keras.metrics.MeanAbsolutePercentageError(),
    "top2": keras.metrics.TopKCategoricalAccuracy(k=2),
    "sparse_top2": keras.metrics.SparseTopKCategoricalAccuracy(k=2),
    "sparse_top5": keras.metrics.SparseTopKCategoricalAccuracy(),
    "precision": keras.metrics.Precision(),
    "recall": keras.metrics.Recall(thresholds=0.6),
    "tp": keras.metrics.TruePositives(name="tp"),
    "fp": keras.metrics.FalsePositives(thresholds=0.3),
    "tn": keras.metrics.TrueNegatives(),
    "fn": keras.metrics.FalseNegatives(thresholds=0.7),
    "auc": keras.metrics.AUC(),
    "auc_pr": keras.metrics.AUC(curve="PR", num_thresholds=50),
    "auc_pr_minoring": keras.metrics.AUC(curve="PR", summation_method="minoring"),
    "auc_logits_majoring": keras.metrics.AUC(num_thresholds=7, summation_method="majoring", from_logits=True),
}
'''

# what each metric is fed: (y_true, y_pred) per batch, built from one seeded generator
DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import metrics
rng = np.random.default_rng(3)


def batch(n):
    probs = rng.random((n, 1)).astype("float32")
    labels01 = (rng.random((n, 1)) > 0.5).astype("float32")
    scores = rng.normal(size=(n, 6)).astype("float32")
    scores[0, :] = 0.5  # a row of ties: in the top k, as tf.math.in_top_k counts them
    classes = rng.integers(0, 6, n)
    onehot = np.eye(6, dtype="float32")[classes]
    ints = rng.integers(0, 3, (n, 4)).astype("float32")
    reg_true, reg_pred = rng.normal(size=(n, 3)).astype("float32"), rng.normal(size=(n, 3)).astype("float32")
    reg_true[0, 0] = 0.0  # MAPE's epsilon
    return {"binary": (labels01, probs), "binary_default": (labels01[:, 0], probs), "accuracy": (ints, np.round(ints * rng.random((n, 4)) * 1.5).astype("float32")),
            "mae": (reg_true, reg_pred), "mse": (reg_true, reg_pred), "rmse": (reg_true, reg_pred), "mape": (reg_true, reg_pred),
            "top2": (onehot, scores), "sparse_top2": (classes, scores), "sparse_top5": (classes[:, None], scores),
            "precision": (labels01, probs), "recall": (labels01[:, 0], probs[:, 0]),
            "tp": (labels01, probs), "fp": (labels01[:, 0], probs), "tn": (labels01, probs[:, 0]), "fn": (labels01, probs),
            "auc": (labels01, probs), "auc_pr": (labels01[:, 0], probs), "auc_pr_minoring": (labels01, probs[:, 0]),
            "auc_logits_majoring": (labels01, probs * 6 - 3)}


out = {k: [] for k in metrics}
batches = [batch(10), batch(7), batch(5)]
for i, b in enumerate(batches):
    if i == 2:
        for m in metrics.values():
            m.reset_state()
    for k, m in metrics.items():
        if k == "precision" and i == 1:
            out[k].append(float(np.asarray(m(*b[k]))))  # calling the object updates it too
            continue
        m.update_state(*b[k])
        out[k].append(float(np.asarray(m.result())))
print("RESULT " + json.dumps(out))
'''


def _run(tmp_path, side: str, code: str) -> dict:
    return run_side(tmp_path / side, side, code, DRIVER, timeout=300)


def test_translated_metrics_give_keras_results(tmp_path):
    src = textwrap.dedent(SOURCE).lstrip("\n")
    r = translate_source(src, "model.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "keras" not in r.output.split("metrics = {")[1]
    keras_out, torch_out = _run(tmp_path, "keras", src), _run(tmp_path, "torch", r.output)
    assert sorted(torch_out) == sorted(keras_out)
    for k in keras_out:
        np.testing.assert_allclose(torch_out[k], keras_out[k], rtol=1e-6, atol=1e-6, err_msg=k)
    # the cases must tell the metrics apart from trivial ones: neither 0 nor 1 everywhere
    for k in ("binary", "accuracy", "top2", "sparse_top2", "precision", "recall", "auc", "auc_pr"):
        assert any(0.0 < v < 1.0 for v in keras_out[k]), (k, keras_out[k])
    # the counts differ from batch to batch and from each other (each threshold and side is exercised)
    for k in ("tp", "fp", "tn", "fn"):
        assert len(set(keras_out[k])) >= 2 and max(keras_out[k]) > 0, (k, keras_out[k])
    assert len({tuple(keras_out[k]) for k in ("tp", "fp", "tn", "fn")}) == 4


def test_a_list_of_thresholds_is_refused():
    src = "from tensorflow import keras\nm = keras.metrics.Precision(thresholds=[0.3, 0.7])\n"
    r = translate_source(src, "m.py")
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert len(errs) == 1 and "one threshold" in errs[0].message and errs[0].line == 2
