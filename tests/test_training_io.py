"""Training-side runtime and I/O APIs of issue 9 (the most used ones bench/coverage.py --scope training
listed as untranslated): each translated one is executed without TensorFlow and compared with what
TensorFlow / Keras computes; each one fwport does not translate is an error that says what to write."""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _translate(src: str, errors_ok: bool = False):
    r = translate_source(textwrap.dedent(src).lstrip(), "train.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    if not errors_ok:
        assert not errors, [f.message for f in errors]
        imports = [ln for ln in r.output.splitlines() if ln.startswith(("import ", "from "))]
        assert not [ln for ln in imports if "tensorflow" in ln or "keras" in ln], r.output
    return r


def _run(src: str, **env) -> dict:
    """Translate ``src`` and execute the translation with ``env`` in its globals (TensorFlow unused)."""
    ns = dict(env)
    exec(compile(_translate(src).output, "translated.py", "exec"), ns)
    return ns


# --- APIs with no faithful translation: an error with guidance --------------------------------------

def test_tfrecord_and_file_readers_are_errors_with_guidance():
    r = _translate('''
        import tensorflow as tf

        spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.VarLenFeature(tf.int64)}


        def parse(example):
            return tf.io.parse_single_example(example, spec)


        ds = tf.data.TFRecordDataset(["a.tfrecord"]).map(parse)
        lines = tf.data.TextLineDataset("a.txt").skip(1)
        files = tf.data.Dataset.list_files("imgs/*.jpg")
        feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))
        csv = tf.data.experimental.make_csv_dataset("a.csv", batch_size=4)
        kind = tf.train.Example
    ''', errors_ok=True)
    errors = {(f.line, f.message.split(":")[0].split()[0]) for f in r.findings if f.severity is Severity.ERROR}
    by_line = {}
    for f in r.findings:
        if f.severity is Severity.ERROR:
            by_line.setdefault(f.line, []).append(f.message)
    assert sorted(by_line) == [3, 7, 10, 11, 12, 13, 14, 15], by_line
    assert len(by_line[3]) == 2 and len(by_line[13]) == 2  # each call its own error
    for line, messages in by_line.items():
        for message in messages:
            assert "no tf2torch translation" in message or "no translation:" in message, message
    assert "torch.utils.data.Dataset" in by_line[10][0] and "tfrecord" in by_line[10][0]
    assert "open(f" in by_line[11][0] and "glob.glob" in by_line[12][0] and "pandas.read_csv" in by_line[14][0]
    assert "tf.train.Example" in by_line[15][0]
    assert errors  # and the file is left as written where it is refused
    assert "tf.data.TFRecordDataset([\"a.tfrecord\"])" in r.output


# --- keras.metrics functions: the losses' per-sample functions ---------------------------------------

def test_metric_functions_are_the_per_sample_losses():
    keras = pytest.importorskip("keras")
    rng = np.random.default_rng(0)
    y = rng.normal(size=(5, 3)).astype("float32")
    p = rng.normal(size=(5, 3)).astype("float32")
    probs = rng.random((5, 3)).astype("float32")
    onehot = np.eye(3, dtype="float32")[rng.integers(0, 3, 5)]
    classes = rng.integers(0, 3, 5)
    import torch
    ns = _run('''
        import tensorflow as tf
        from tensorflow import keras

        mae = keras.metrics.mean_absolute_error(y, p)
        mse = tf.keras.metrics.mean_squared_error(y, p)
        bce = keras.metrics.binary_crossentropy(onehot, probs)
        cce = keras.metrics.categorical_crossentropy(onehot, probs)
        scce = keras.metrics.sparse_categorical_crossentropy(classes, probs, from_logits=True)
    ''', y=torch.tensor(y), p=torch.tensor(p), probs=torch.tensor(probs), onehot=torch.tensor(onehot),
        classes=torch.tensor(classes))
    want = {"mae": keras.metrics.mean_absolute_error(y, p), "mse": keras.metrics.mean_squared_error(y, p),
            "bce": keras.metrics.binary_crossentropy(onehot, probs),
            "cce": keras.metrics.categorical_crossentropy(onehot, probs),
            "scce": keras.metrics.sparse_categorical_crossentropy(classes, probs, from_logits=True)}
    for k, v in want.items():
        assert tuple(ns[k].shape) == (5,), k
        np.testing.assert_allclose(ns[k].numpy(), np.asarray(v), rtol=1e-5, atol=1e-6, err_msg=k)


# --- tf.config -----------------------------------------------------------------------------------------

def test_list_logical_devices_counts_the_devices():
    import torch
    r = _translate('''
        import tensorflow as tf

        logical = tf.config.list_logical_devices("GPU")
        cpus = tf.config.experimental.list_logical_devices("CPU")
    ''')
    assert any("LogicalDevice" in f.message for f in r.findings)
    ns = {}
    exec(r.output, ns)
    assert len(ns["logical"]) == torch.cuda.device_count() and len(ns["cpus"]) == 1
