"""TensorFlow 2's tf.initializers.* are Keras's initializers (tf.initializers.Zeros is
keras.initializers.Zeros): as add_weight's initializer= they give the parameter Keras's values. The
layer is built in TensorFlow and its translation in torch, each in its own subprocess, on one input."""
from __future__ import annotations

import json
from importlib.util import find_spec

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

SRC = '''import tensorflow as tf
from tensorflow import keras


class Scale(keras.layers.Layer):
    def __init__(self, n):
        super().__init__()
        self.b = self.add_weight(shape=(n,), initializer=tf.initializers.Zeros(), trainable=True)
        self.g = self.add_weight(shape=(2, n), initializer=tf.initializers.Ones())
        self.c = self.add_weight(shape=(n,), initializer=tf.initializers.Constant(0.5))

    def call(self, x):
        return x * self.g + self.b + self.c
'''

_RUN = r'''
import json, sys
import numpy as np
fw, src = sys.argv[1], open(sys.argv[2]).read()
ns = {}
exec(compile(src, "layer.py", "exec"), ns)
x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
layer = ns["Scale"](3)
if fw == "tf":
    import tensorflow as tf
    y = layer(tf.constant(x)).numpy()
else:
    import torch
    y = layer(torch.from_numpy(x)).detach().numpy()
print(json.dumps(y.tolist()))
'''


def _run(fw: str, path) -> np.ndarray:
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "KERAS_BACKEND": "tensorflow"}
    proc = python("-c", _RUN, fw, path, side="keras" if fw == "tf" else "torch", env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return np.array(json.loads(proc.stdout.strip().splitlines()[-1]), np.float32)


def test_tf_initializers_in_add_weight_give_keras_values(tmp_path):
    for mod in ("tensorflow", "torch"):
        if find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    r = translate_source(SRC, "layer.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "nn.Parameter(torch.zeros(n))" in r.output and "tf." not in r.output, r.output
    (tmp_path / "tf.py").write_text(SRC)
    (tmp_path / "torch.py").write_text(r.output)
    want, got = _run("tf", tmp_path / "tf.py"), _run("torch", tmp_path / "torch.py")
    np.testing.assert_array_equal(got, want)
    assert want.shape == (2, 3)


# Keras 2's add_weight takes the name first (add_weight(name, shape, dtype, initializer, ...)); Keras 3's
# takes the shape first and refuses a positional name: a positional name marks the file as Keras 2 code
KERAS2_SRC = '''import tensorflow as tf
from tensorflow import keras


class Scale(keras.layers.Layer):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def build(self, input_shape):
        self.g = self.add_weight("g", shape=(2, self.n), initializer=tf.initializers.Constant(1.5))
        self.b = self.add_weight("b", (self.n,), "float32", tf.initializers.Constant(0.25))

    def call(self, x):
        return x * self.g + self.b
'''


def test_keras2_positional_add_weight_name_binds_with_keras2_signature(tmp_path):
    for mod in ("tf_keras", "torch"):
        if find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    r = translate_source(KERAS2_SRC, "layer.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert r.version == 2, r.findings
    # the original runs under Keras 2 (tf_keras), as it was written for
    (tmp_path / "tf.py").write_text(KERAS2_SRC.replace("from tensorflow import keras", "import tf_keras as keras"))
    (tmp_path / "torch.py").write_text(r.output)
    want, got = _run("tf", tmp_path / "tf.py"), _run("torch", tmp_path / "torch.py")
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert want.shape == (2, 3)


def test_keras3_positional_add_weight_name_is_an_error():
    r = translate_source("# fwport: keras=3\n" + KERAS2_SRC, "layer.py")
    errors = [f for f in r.findings if f.severity == Severity.ERROR]
    assert errors and "name" in errors[0].message and "keyword" in errors[0].message, r.findings
