"""``tf.constant`` of strings: a str / bytes literal, a list of them, or any value with
``dtype=tf.string`` becomes ``np.array(value, dtype=object)``, what TensorFlow's string tensor's ``.numpy()`` is
(strings stay Python strings in a translation), with a warning that the elements are str where TensorFlow's are
bytes. Before, a literal of strings became ``torch.tensor("...")`` (a TypeError when run) and ``dtype=tf.string``
an error.

Numbers: the program runs under TensorFlow and translated (TensorFlow unimportable there); the shapes and the
elements (TensorFlow's bytes decoded) agree, and so do a gather by an argmax (the kio tf_serving pattern: a label
looked up by the predicted class) and tf.strings.lower of the constant. ``x.dtype == tf.string`` (``!=``) becomes
a test of the NumPy dtype kind (strings.py), True for such an array and False for a torch tensor, as TensorFlow's
for string and numeric tensors."""
from __future__ import annotations

import textwrap

from runners import keras_and_torch

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SOURCE = '''
import tensorflow as tf

names = ["cat", "dog", "Émile"]
labels = tf.constant(names, dtype=tf.string)
grid = tf.constant([["a", "b"], ["c", "d"]])
word = tf.constant("Hello")
raw = tf.constant(b"xy")
again = tf.constant(names, dtype="string")


def predicted(logits, labels=labels):
    return tf.gather(labels, tf.argmax(logits, axis=-1))


def lowered():
    return tf.strings.lower(labels)


numbers = tf.constant([1.0, 2.0])
counts = tf.constant([[1, 2]])


def is_text(x):
    return x.dtype == tf.string


def not_text(x):
    return (tf.string != x.dtype)
'''

DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from model import *


def text(v):
    v = np.asarray(v.numpy() if hasattr(v, "numpy") else v, dtype=object)  # (TensorFlow's scalar: bytes)
    return {"shape": list(v.shape), "values": [e.decode("utf-8") if isinstance(e, bytes) else e for e in v.ravel()]}


logits = [[0.1, 0.7, 0.2], [0.9, 0.0, 0.1], [0.0, 0.1, 0.3]]
if sys.argv[2] == "torch":
    import torch
    logits = torch.tensor(logits)
else:
    import tensorflow as tf
    logits = tf.constant(logits)
out = {k: text(v) for k, v in dict(labels=labels, grid=grid, word=word, raw=raw, again=again,
                                   predicted=predicted(logits), lowered=lowered()).items()}
out["checks"] = [[is_text(v), not_text(v)] for v in (labels, grid, word, raw, numbers, counts, logits)]
print("RESULT " + json.dumps(out))
'''


def test_string_constants_match_tensorflow(tmp_path):
    r = translate_source(textwrap.dedent(SOURCE), "model.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "tensorflow" not in r.output, r.output
    assert 'labels = np.array(names, dtype=object)' in r.output
    assert "torch.tensor(\"Hello\")" not in r.output
    warned = [f for f in r.findings if f.code == "idiom-replaced" and "of strings" in f.message]
    assert len(warned) == 5 and all(f.severity is Severity.WARNING for f in warned)
    tf_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SOURCE), r.output, DRIVER)
    assert tf_out == torch_out
    assert tf_out["predicted"] == {"shape": [3], "values": ["dog", "cat", "Émile"]}
    assert tf_out["grid"]["shape"] == [2, 2] and tf_out["word"]["shape"] == []
    assert tf_out["checks"] == [[True, False]] * 4 + [[False, True]] * 3
    assert 'getattr(x.dtype, "kind", None) in ("O", "S", "U")' in r.output


def test_refused_string_constants_stay_errors():
    src = ('import tensorflow as tf\na = tf.constant(["a", 1])\nb = tf.constant([["a"], ["b", "c"]])\n'
           'c = tf.constant(["a", "b"], shape=[2, 1])\n')
    r = translate_source(src, "m.py")
    errors = [f.message for f in r.findings if f.severity is Severity.ERROR]
    assert len(errors) == 3, errors
    assert "strings mixed with other values" in errors[0] and "rows of different lengths" in errors[1]
    assert "shape=[2, 1] on a string constant" in errors[2]
    assert "np.array" not in r.output
