"""``tf.equal(x.shape[0], 0)`` and its siblings compare a shape element, a Python int in torch, where
``torch.eq`` wants a tensor first: the translation is Python's operator, which compares an int with an int
or, broadcast, with a tensor. TensorFlow runs the original and torch the translation, each in its own
subprocess, on one input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''import tensorflow as tf


def compare(x):
    empty = tf.equal(x.shape[0], 0)
    not_three = tf.math.not_equal(tf.shape(x)[1], 3)
    short = tf.less(x.shape[1], tf.reduce_sum(x, axis=0))
    wide = tf.greater_equal(x.shape[-1], 2)
    big = tf.greater(tf.reduce_max(x), x.shape[0])
    at_most = tf.less_equal(x, x.shape[1])
    return [empty, not_three, short, wide, big, at_most]
'''

_RUN = r'''
import json, sys
import numpy as np
fw, src = sys.argv[1], open(sys.argv[2]).read()
ns = {}
exec(compile(src, "cmp.py", "exec"), ns)
x = np.array([[0.5, 3.0, -1.0], [2.5, 4.0, 1.0]], np.float32)
if fw == "tf":
    import tensorflow as tf
    out = ns["compare"](tf.constant(x))
    out = [np.asarray(o).tolist() for o in out]
else:
    import torch
    out = ns["compare"](torch.from_numpy(x))
    out = [o.tolist() if isinstance(o, torch.Tensor) else o for o in out]
print(json.dumps(out))
'''


def _run(fw: str, path) -> list:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", KERAS_BACKEND="tensorflow")
    proc = subprocess.run([sys.executable, "-c", _RUN, fw, str(path)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_comparisons_of_shape_elements_are_python_operators():
    r = translate_source(SRC, "cmp.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "empty = x.shape[0] == 0" in r.output and "wide = x.shape[-1] >= 2" in r.output, r.output
    assert "torch.eq" not in r.output, r.output


def test_comparisons_of_shape_elements_match_tensorflow(tmp_path):
    for mod in ("tensorflow", "torch"):
        if find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    r = translate_source(SRC, "cmp.py")
    (tmp_path / "tf.py").write_text(SRC)
    (tmp_path / "torch.py").write_text(r.output)
    want, got = _run("tf", tmp_path / "tf.py"), _run("torch", tmp_path / "torch.py")
    assert got == want
    assert want[0] is False and want[2] == [False, True, False], want  # both outcomes occur
