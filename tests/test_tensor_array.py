"""tf.TensorArray → the TensorArray helper class written into the file (TensorFlow's eager semantics): one program
run by TensorFlow and its translation by torch, every read compared (values, dtypes, shapes)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

PROGRAM = '''import json
import numpy as np
import tensorflow as tf


def encode(x):
    return tf.reduce_sum(x, axis=0) * 2.0


def encode_batch(images):
    labels = tf.TensorArray(dtype=tf.float32, size=len(images), dynamic_size=True)
    for i in range(len(images)):
        labels = labels.write(i, encode(images[i]))
    return labels.stack()


@tf.function
def cumulative(x):
    out = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    total = tf.zeros_like(x[0])
    for i in range(3):
        total = total + x[i]
        out = out.write(i, total)
    return out.stack(), out.size()


images = tf.constant(np.arange(24, dtype=np.float32).reshape(3, 2, 4) / 7.0)
outs = [encode_batch(images), *cumulative(images[:, 0])]
ta = tf.TensorArray(tf.float32, size=4, element_shape=(2,))
ta = ta.write(0, [1.5, 2.5]).write(2, tf.constant([3.0, 4.0]))
outs.append(ta.read(2))      # read clears the slot (clear_after_read)
outs.append(ta.stack())      # slots 1, 2 (cleared) and 3: zeros of the element shape
ints = tf.TensorArray(tf.int32, size=3, clear_after_read=False).unstack(tf.constant([[1, 2], [3, 4], [5, 6]]))
outs += [ints.read(1), ints.read(1), ints.gather([2, 0]), ints.concat(), ints.size()]
sc = tf.TensorArray(tf.int64, size=2, dynamic_size=True).scatter([3, 1], tf.constant([7, 8], tf.int64))
outs += [sc.stack(), tf.TensorArray(tf.float32, size=0, element_shape=[2, 3]).stack()]
try:
    tf.TensorArray(tf.float32, size=1).write(1, 0.0)
    grew = "grew"
except Exception:
    grew = "refused"
print(json.dumps([[str(np.asarray(o).dtype), list(np.asarray(o).shape), np.asarray(o).ravel().tolist()] for o in outs]
                 + [grew]))
'''


def test_tensor_array_reads_as_tensorflow_does():
    res = translate_source(PROGRAM, "ta.py")
    assert not [f for f in res.findings if f.severity is Severity.ERROR], res.findings
    assert "tf.TensorArray(" not in res.output and "import tensorflow" not in res.output, res.output
    assert "class TensorArray" in res.output, res.output
    if find_spec("tensorflow") is None or find_spec("torch") is None:
        pytest.skip("tensorflow / torch are not installed")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    runs = []
    for src in (PROGRAM, res.output):
        proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:] + "\n" + src
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    want, got = runs
    assert want[-1] == got[-1] == "refused"
    assert len(want) == len(got) == 13
    for k, (w, g) in enumerate(zip(want[:-1], got[:-1])):
        assert w[:2] == g[:2], (k, w, g, res.output)  # dtype and shape
        assert g[2] == pytest.approx(w[2], rel=1e-6, abs=1e-6), (k, w, g)
