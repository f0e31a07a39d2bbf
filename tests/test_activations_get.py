"""keras.activations.get, keras.ops.convert_to_numpy and tf.print, run: each activation name through Keras (2 and 3) and through
the translation (no TensorFlow in its process), compared numerically; tf.print's stream."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

NAMES = ["relu", "relu6", "sigmoid", "tanh", "softmax", "log_softmax", "elu", "selu", "softplus", "softsign",
         "swish", "silu", "gelu", "mish", "leaky_relu", "hard_sigmoid", "exponential", "linear", None]
KERAS3_ONLY = ["hard_silu", "hard_swish"]

# the layer's activation comes from a constructor parameter (the helper), the literal calls from the rule
PROGRAM = '''
import json
import numpy as np
import tensorflow as tf
from tensorflow import keras


class Act(keras.layers.Layer):
    def __init__(self, activation=None):
        super().__init__()
        self.activation = keras.activations.get(activation)

    def call(self, x):
        return self.activation(x)


x = np.linspace(-4.0, 4.0, 24).reshape(2, 12).astype("float32")
out = {}
for name in NAMES:
    out[str(name)] = np.asarray(Act(name)(tf.constant(x))).tolist()
out["literal-gelu"] = np.asarray(keras.activations.get("gelu")(tf.constant(x))).tolist()
out["literal-leaky"] = np.asarray(keras.activations.get("leaky_relu")(tf.constant(x))).tolist()
out["literal-softmax"] = np.asarray(keras.activations.get("softmax")(tf.constant(x))).tolist()
out["literal-none"] = np.asarray(keras.activations.get(None)(tf.constant(x))).tolist()
try:
    Act("no_such_activation")
    out["unknown"] = "accepted"
except ValueError:
    out["unknown"] = "ValueError"
NUMPY
tf.print("printed", 3, sep="|")
print(json.dumps(out))
'''

_BLOCK = '''
import runpy, sys
for name in ("tensorflow", "keras", "tf_keras"):
    sys.modules[name] = None
runpy.run_path(sys.argv[1], run_name="__main__")
'''


def _run(path, block: bool, keras2: bool):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    if keras2:
        env["TF_USE_LEGACY_KERAS"] = "1"
    if block:  # the translation, in the torch worker (TensorFlow unimportable)
        proc = python("-c", _BLOCK, path, side="torch", env=env, timeout=300)
    else:  # a process of its own: tf.print writes to the process's standard error (file descriptor 2)
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("torch") is None,
                    reason="needs TensorFlow and PyTorch")
@pytest.mark.parametrize("version", [3, 2])
def test_every_activation_name_computes_as_keras(tmp_path, version):
    if version == 2 and importlib.util.find_spec("tf_keras") is None:
        pytest.skip("needs tf-keras")
    names = NAMES + (KERAS3_ONLY if version == 3 else [])
    numpy = ('out["numpy"] = keras.ops.convert_to_numpy(Act("tanh")(tf.constant(x))).tolist()\n'
             'out["numpy-list"] = keras.ops.convert_to_numpy([[1.0, 2.0]]).tolist()')  # Keras 3 has keras.ops
    program = PROGRAM.replace("NAMES", repr(names)).replace("NUMPY", numpy if version == 3 else "")
    r = translate_source(program.lstrip(), "acts.py", "tf2torch", {"keras": version})
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    helper = "keras_activation" if version == 3 else "keras2_activation"
    assert f"self.activation = {helper}(activation)" in r.output
    assert "nn.GELU()(" in r.output and "nn.LeakyReLU(negative_slope=0.2)(" in r.output  # the literal names
    assert 'print("printed", 3, sep="|", file=sys.stderr)' in r.output
    src, out = tmp_path / "tf_acts.py", tmp_path / "torch_acts.py"
    src.write_text(program)
    out.write_text(r.output)
    (want, tf_err), (got, torch_err) = _run(src, False, version == 2), _run(out, True, False)
    assert "printed|3" in tf_err and "printed|3" in torch_err  # both print to standard error
    assert set(got) == set(want)
    import numpy as np
    for key in want:
        if key == "unknown":
            assert got[key] == want[key] == "ValueError"
            continue
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
    if version == 3:
        assert 'convert_to_numpy(Act("tanh")' in r.output and want["numpy-list"] == got["numpy-list"] == [[1.0, 2.0]]
    # the names whose forms differ between the versions did differ: the test would see a wrong table
    x = -4.0
    assert want["hard_sigmoid"][0][0] == pytest.approx(0.0) and want["hard_sigmoid"][0][5] == pytest.approx(
        max(0.0, 0.2 * (x + 5 * 8 / 23) + 0.5) if version == 2 else max(0.0, (x + 5 * 8 / 23 + 3) / 6), abs=1e-6)


def test_literal_names_become_modules_and_unknown_literals_are_refused():
    src = ("from tensorflow import keras\n"
           "a = keras.activations.get('leaky_relu')\nb = keras.activations.get(None)\n"
           "c = keras.activations.get('no_such')\n")
    r = translate_source(src, "m.py", "tf2torch", {"keras": 3})
    assert "a = nn.LeakyReLU(negative_slope=0.2)" in r.output and "b = nn.Identity()" in r.output
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert len(errors) == 1 and errors[0].line == 4 and "'no_such'" in errors[0].message
    r2 = translate_source(src.replace("leaky_relu", "hard_sigmoid"), "m.py", "tf2torch", {"keras": 2})
    assert any("hard_sigmoid" in f.message and f.line == 2 for f in r2.findings if f.severity is Severity.ERROR)
