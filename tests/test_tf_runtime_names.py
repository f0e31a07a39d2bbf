"""TensorFlow / Keras names of issues 8 and 9 with no faithful torch counterpart (TensorSpec, TensorShape,
ragged tensors, DTensor, TensorFlow Lite, logical devices): each use is an error at its line whose message says what a PyTorch program writes instead,
never "no rule yet"."""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''
import tensorflow as tf
from tensorflow import keras

spec = tf.TensorSpec(shape=[None, 3], dtype=tf.float32)
shape = tf.TensorShape([None, 4])
rows = tf.ragged.constant([[1, 2], [3]])
mesh = tf.experimental.dtensor.create_mesh([("batch", 2)])
interpreter = tf.lite.Interpreter(model_path="model.tflite")
converter = tf.lite.TFLiteConverter.from_saved_model("saved")
converter.optimizations = [tf.lite.Optimize.DEFAULT]
strategy = tf.distribute.OneDeviceStrategy("/gpu:0")
tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=1024)])
constraint = keras.constraints.get(config)
rng = tf.random.Generator.from_seed(123, alg="philox")
'''

EXPECTED = {  # line → a phrase of the guidance
    4: "torch.export.export",
    5: "torch.Size",
    6: "pad_sequence",
    7: "torch.distributed.tensor",
    8: "ExecuTorch",
    9: "ExecuTorch",
    10: "ExecuTorch",
}
# line 13, keras.constraints.get, translates (the KerasConstraint helper: test_con25_constraints);
# keras.regularizers.serialize translates (KerasRegularizer.serialize: test_reg23_custom_regularizers);
# line 14, tf.random.Generator.from_seed, translates (rngs.py): a warning that the streams differ; line 11,
# OneDeviceStrategy, is one replica (passes/runtime.py): a warning that says how to compute on its device; line 12,
# a logical device configuration (a memory cap) in a file that never counts logical devices, is removed with an
# info finding (runtime.py: dropping it changes no number; test_distribute_idioms)


def test_names_without_counterpart_are_errors_with_guidance():
    r = translate_source(textwrap.dedent(SRC).lstrip("\n"), "m.py")
    by_line: dict[int, list[str]] = {}
    for f in r.findings:
        if f.severity is Severity.ERROR:
            by_line.setdefault(f.line, []).append(f.message)
    assert sorted(by_line) == sorted(EXPECTED), by_line
    for line, phrase in EXPECTED.items():
        for message in by_line[line]:
            assert "rule yet" not in message, message
            assert "no tf2torch translation" in message or "no translation:" in message, message
        assert any(phrase in m for m in by_line[line]), (line, by_line[line])
    assert [f.line for f in r.findings if f.code == "random-stream"] == [14]
    assert [f.line for f in r.findings if f.severity is Severity.WARNING and "model.to(device)" in f.message] == [11]
    assert "rng = torch.Generator().manual_seed(123)" in r.output
    assert "constraint = KerasConstraint(config)" in r.output
    assert [f.line for f in r.findings if f.severity is Severity.INFO and "set_logical_device_configuration" in f.message] == [12]
    assert "set_logical_device_configuration" not in r.output


SETTINGS = '''
import tensorflow as tf
import tensorflow.experimental.numpy as tnp

tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="all")
tf.config.run_functions_eagerly(True)
if debug:
    tf.config.experimental_run_functions_eagerly(True)
done = True
'''


def test_eager_and_numpy_behaviour_switches_are_removed():
    """run_functions_eagerly (torch is eager, @tf.function is removed) goes with an info finding; NumPy behaviour
    (its dtype promotion is not torch's: int32 + float32 is float64 in NumPy's) with a warning saying so."""
    r = translate_source(SETTINGS.lstrip("\n"), "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "tf." not in r.output and "tnp" not in r.output and "if debug:\n    pass\ndone = True" in r.output, r.output
    found = sorted((f.line, f.severity.value, f.code) for f in r.findings if f.code == "idiom-replaced")
    assert found == [(4, "warning", "idiom-replaced"), (5, "info", "idiom-replaced"), (7, "info", "idiom-replaced")]
    [warning] = [f for f in r.findings if f.severity is Severity.WARNING]
    assert "float64" in warning.message and "torch" in warning.message
    ns = {"debug": True}
    exec(compile(r.output, "translated.py", "exec"), ns)
    assert ns["done"]


DIVIDE = '''
import tensorflow as tf
from keras import ops


def f(x, y):
    return tf.math.divide_no_nan(x, y) + ops.divide_no_nan(x, y) * 2.0
'''

_TF_GRADS = '''
import json, sys
import tensorflow as tf
ns = {}
exec(sys.argv[1], ns)
x, y = (tf.Variable(v) for v in json.loads(sys.argv[2]))
with tf.GradientTape() as tape:
    out = ns["f"](x, y)
    total = tf.reduce_sum(out)
gx, gy = tape.gradient(total, [x, y])
print(json.dumps([out.numpy().tolist(), gx.numpy().tolist(), gy.numpy().tolist()]))
'''

_TORCH_GRADS = '''
import json, sys
import torch
ns = {}
exec(sys.argv[1], ns)
x, y = (torch.tensor(v, requires_grad=True) for v in json.loads(sys.argv[2]))
out = ns["f"](x, y)
out.sum().backward()
print(json.dumps([out.detach().numpy().tolist(), x.grad.numpy().tolist(), y.grad.numpy().tolist()]))
'''


def test_divide_no_nan_values_and_gradients_match_tensorflow():
    """0 where the denominator is 0, and gradients 0 there (not NaN), in both frameworks."""
    import json
    import os
    import subprocess
    import sys

    import numpy as np
    import pytest
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    r = translate_source(DIVIDE.lstrip("\n"), "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "return divide_no_nan(x, y) + divide_no_nan(x, y) * 2.0" in r.output and "import tensorflow" not in r.output \
        and "keras" not in r.output, r.output
    inputs = json.dumps([[1.5, -2.0, 0.0, 3.0, -1.0], [0.5, 0.0, 0.0, -4.0, 2.0]])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", KERAS_BACKEND="tensorflow")
    got = []
    for runner, src in ((_TF_GRADS, DIVIDE), (_TORCH_GRADS, r.output)):
        p = subprocess.run([sys.executable, "-c", runner, src, inputs], capture_output=True, text=True, env=env,
                           timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        got.append(json.loads(p.stdout.strip().splitlines()[-1]))
    want, ours = got
    for w, g in zip(want, ours):
        assert not np.isnan(g).any()
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert want[0][1] == 0.0 and want[2][1] == 0.0  # the zero denominator: value and gradient 0


TFDS_BAR = '''
import tensorflow as tf
import tensorflow_datasets as tfds

tfds.disable_progress_bar()
if quiet:
    tfds.disable_progress_bar()
bar = tfds.disable_progress_bar()
done = True
'''


def test_tfds_disable_progress_bar_statement_is_removed():
    """tfds.disable_progress_bar() as a statement is removed with an info finding (nothing to translate); as the
    value of an assignment it is not a settings statement and keeps its no-rule error (tfmisc24)."""
    r = translate_source(TFDS_BAR.lstrip("\n"), "m.py")
    removed = sorted((f.line, f.severity.value) for f in r.findings if f.code == "idiom-replaced")
    assert removed == [(4, "info"), (6, "info")], r.findings
    assert [(f.line, f.code) for f in r.findings if f.severity is Severity.ERROR] == [(7, "no-rule")], r.findings
    assert "if quiet:\n    pass\n" in r.output and "tfds.disable_progress_bar()" in r.output.split("if quiet")[1]
    r2 = translate_source(TFDS_BAR.lstrip("\n").replace("bar = tfds.disable_progress_bar()\n", ""), "m.py")
    assert not [f for f in r2.findings if f.severity is Severity.ERROR], r2.findings
    assert "tfds" not in r2.output and "tf." not in r2.output, r2.output
    ns = {"quiet": True}
    exec(compile(r2.output, "translated.py", "exec"), ns)
    assert ns["done"]
