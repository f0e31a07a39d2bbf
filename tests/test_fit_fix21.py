"""Training-code gaps of issue 9 (session 21): compile's confusion-matrix metrics beside a sparse categorical
cross-entropy (Keras's own fit fails there: the translation refuses it, naming the compile, and the written metric
classes stop with a ValueError on labels and outputs of different sizes instead of an index error).

Numbers: the Keras program is run (subprocess) to show it fails as the refusal says."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.packs.tf2torch.passes import fitloop
from helpers import error_lines as errors

SPARSE_AUC = '''
import numpy as np
import keras

x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
y = np.random.default_rng(1).integers(0, 2, size=(32,))
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=[METRIC])
history = model.fit(x, y, epochs=1, batch_size=8, verbose=0)
'''


@pytest.mark.parametrize("metric, name", [("keras.metrics.AUC()", "auc"), ("keras.metrics.Precision()", "precision"),
                                          ("keras.metrics.TruePositives(name='tp')", "tp")])
def test_confusion_metric_with_sparse_labels_is_refused_at_the_compile(metric, name):
    r = translate_source(textwrap.dedent(SPARSE_AUC.replace("METRIC", metric)).lstrip("\n"), "model.py")
    found = errors(r)
    compile_errors = [(line, m) for line, m in found if m.startswith("model.compile(...) is a Keras model method")]
    assert len(compile_errors) == 1, found
    line, message = compile_errors[0]
    assert line == 7  # the compile's line
    assert f"metrics [{name!r}] with a sparse categorical cross-entropy" in message
    assert "ValueError" in message


def test_confusion_metric_with_one_hot_labels_is_still_written():
    src = SPARSE_AUC.replace("METRIC", "keras.metrics.AUC()").replace("sparse_categorical", "categorical")
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    assert errors(r) == []
    assert "class AUC:" in r.output and "_value_by_value(\"AUC\", y_true, y_pred)" in r.output


def test_keras_fails_on_auc_with_sparse_labels(tmp_path):
    """What the refusal says: Keras 3's own fit stops with a ValueError on a 2-unit softmax with integer labels."""
    src = textwrap.dedent(SPARSE_AUC.replace("METRIC", "keras.metrics.AUC()")).lstrip("\n")
    (tmp_path / "prog.py").write_text(src)
    p = subprocess.run([sys.executable, str(tmp_path / "prog.py")], capture_output=True, text=True, timeout=300,
                       env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin",
                            "HOME": str(tmp_path), "KERAS_BACKEND": "tensorflow"})
    assert p.returncode != 0
    assert "ValueError" in p.stderr and "segment_ids" in p.stderr, p.stderr[-2000:]


def test_written_confusion_metrics_raise_a_value_error_on_mismatched_sizes():
    torch = pytest.importorskip("torch")
    ns = {"torch": torch}
    exec(fitloop.metric_classes({"AUC", "Precision", "TruePositives"}, lambda *_: None), ns)
    y = torch.tensor([0, 1, 1, 0])
    p = torch.tensor([[0.7, 0.3], [0.2, 0.8], [0.4, 0.6], [0.9, 0.1]])
    for cls in ("AUC", "Precision", "TruePositives"):
        with pytest.raises(ValueError, match=f"{cls}: labels of shape \\(4,\\) against outputs of shape \\(4, 2\\)"):
            ns[cls]().update_state(y, p)
    # one-hot labels of the same shape: computed (every positive scored above every negative: an AUC of 1)
    auc = ns["AUC"]()
    auc.update_state(torch.nn.functional.one_hot(y, 2), p)
    assert float(auc.result()) == pytest.approx(1.0, abs=1e-6)
