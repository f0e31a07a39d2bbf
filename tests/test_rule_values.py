"""The rule pass (fwport/core/engine.py, ``_as_value``) on a source function used as a value, not called, in
tf2torch (torch2jax: tests/test_torch2jax_init.py): translated where its rule's translation of a one-argument
call is a plain call, and computing what TensorFlow computes; otherwise left as a residue error."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SOURCE = '''import tensorflow as tf


def get(name):
    if name == "relu":
        return tf.nn.relu
    if name == "sigmoid":
        return tf.math.sigmoid
    return tf.nn.gelu


ACTS = {"tanh": tf.tanh}
'''

_RUN = r'''
import json, runpy, sys
import numpy as np
side, path = sys.argv[1], sys.argv[2]
if side == "torch":
    sys.modules["tensorflow"] = None  # the translation must not need TensorFlow
    import torch
    conv = lambda a: torch.from_numpy(a)
else:
    import tensorflow as tf
    conv = lambda a: tf.constant(a)
ns = runpy.run_path(path)
x = conv(np.random.default_rng(0).standard_normal((4, 5)))
fns = [ns["get"](n) for n in ("relu", "sigmoid", "gelu")] + [ns["ACTS"]["tanh"]]
print(json.dumps([np.asarray(f(x)).tolist() for f in fns]))
'''


def _run(side: str, path) -> list:
    p = subprocess.run([sys.executable, "-c", _RUN, side, str(path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_tf_functions_used_as_values_compute_what_tensorflow_computes(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    import numpy as np
    r = translate_source(SOURCE, "m.py", pack="tf2torch")
    assert [f for f in r.findings if f.severity == Severity.ERROR] == []
    assert "tf." not in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(SOURCE)
    out.write_text(r.output)
    for a, b in zip(_run("torch", out), _run("tf", src)):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-6, atol=1e-7)


def test_a_function_whose_call_needs_more_than_its_input_stays_a_residue():
    # tf.nn.softmax(x) has no PyTorch call without a dim: the rule's one-argument call is not a plain call
    r = translate_source("import tensorflow as tf\n\n\ndef f():\n    return tf.nn.softmax\n", "m.py", pack="tf2torch")
    assert [f.code for f in r.findings if f.severity == Severity.ERROR] == ["residue"]
    assert "return tf.nn.softmax" in r.output


def test_an_argument_of_a_source_call_is_left_to_its_rule():
    # Dense's activation is the layer rule's to translate (here into nn.ReLU())
    r = translate_source("import tensorflow as tf\n\nlayer = tf.keras.layers.Dense(3, activation=tf.nn.relu)\n",
                         "m.py", pack="tf2torch")
    assert "nn.ReLU()" in r.output and "F.relu" not in r.output
