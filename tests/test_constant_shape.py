"""``tf.constant(value, shape=...)``: TensorFlow fills the shape with a value of one element, reshapes a
value of as many elements, and raises otherwise; the translation writes torch.full / .reshape (or, for a value it
cannot count under a literal shape, reshape(-1).broadcast_to((N,)).reshape(shape), which does all three).

Numbers: each constant computed by TensorFlow and by the translation (subprocesses, TensorFlow unimportable on the
torch side): values and dtypes agree, and a value of the wrong size raises on both sides."""
from __future__ import annotations

import textwrap

from runners import keras_and_torch

from fwport.core.pipeline import translate_source
from fwport.core.finding import Severity

SOURCE = '''
import numpy as np
import tensorflow as tf

MEAN = [0.5, 0.25, 0.125]


def make(n, mean):
    return {
        "full_float": tf.constant(0.5, shape=[2, 3]),
        "full_int": tf.constant(-1, shape=[n, 3]),
        "full_one_list": tf.constant([7], shape=[2, 2]),
        "full_dtype": tf.constant(1, shape=(3,), dtype=tf.float32),
        "reshaped": tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=(3, 2)),
        "reshaped_nested": tf.constant([[1, 2], [3, 4]], shape=[4]),
        "unknown_list": tf.constant(mean, shape=[1, 1, 3], dtype=tf.float32),
        "unknown_number": tf.constant(mean[0], shape=[1, 1, 3], dtype=tf.float32),
    }


def bad(mean):
    return tf.constant(mean, shape=[2, 2], dtype=tf.float32)
'''

DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from model import *
out = {k: [str(v.dtype).replace("torch.", "").replace("<dtype: '", "").replace("'>", ""), v.numpy().tolist()]
       for k, v in make(2, MEAN).items()}
try:
    bad([1.0, 2.0, 3.0])
    out["bad"] = "no error"
except Exception as e:
    out["bad"] = "raised"
print("RESULT " + json.dumps(out))
'''


def test_constants_with_a_shape_match_tensorflow(tmp_path):
    r = translate_source(textwrap.dedent(SOURCE), "model.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.output
    assert "torch.full([2, 3], 0.5)" in r.output
    tf_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SOURCE), r.output, DRIVER)
    assert tf_out == torch_out
    assert tf_out["bad"] == "raised"
    assert tf_out["full_int"] == ["int32", [[-1, -1, -1]] * 2]


def test_a_list_of_the_wrong_size_stays_an_error():
    r = translate_source("import tensorflow as tf\nc = tf.constant([1, 2], shape=[2, 3])\n", "m.py")
    errors = [f.message for f in r.findings if f.severity is Severity.ERROR]
    assert any("TensorFlow raises here (2 elements for a shape of 6)" in m for m in errors)
