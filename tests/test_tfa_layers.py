"""TensorFlow Addons layers fwport translates, checked numerically. tfa does not install next to TensorFlow
2.16+, so the Keras side computes what tfa's code computes with TensorFlow's own ops: tfa.layers.GELU calls
tfa.activations.gelu(x, approximate) (tf.nn.gelu in its last releases; before, the tanh formula written out)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

GELU = '''
import tensorflow as tf
import tensorflow_addons as tfa


def build(flag):
    return tfa.layers.GELU(), tfa.layers.GELU(approximate=False), tfa.layers.GELU(approximate=flag)
'''


def test_tfa_gelu_default_is_the_tanh_form():
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    r = translate_source(GELU, "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "tfa" not in r.output and "nn.GELU(approximate='tanh')" in r.output, r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    x = np.random.default_rng(0).normal(0, 3, (4, 7)).astype("float32")
    t = tf.constant(x)
    tanh_form = 0.5 * t * (1.0 + tf.tanh(tf.sqrt(2.0 / tf.cast(math.pi, t.dtype)) * (t + 0.044715 * tf.pow(t, 3))))
    for flag in (True, False):
        default, exact, given = (m(torch.tensor(x)).numpy() for m in ns["build"](flag))
        np.testing.assert_allclose(default, tf.nn.gelu(t, approximate=True).numpy(), rtol=0, atol=2e-6)
        np.testing.assert_allclose(default, tanh_form.numpy(), rtol=0, atol=2e-6)
        np.testing.assert_allclose(exact, tf.nn.gelu(t, approximate=False).numpy(), rtol=0, atol=2e-6)
        np.testing.assert_allclose(given, tf.nn.gelu(t, approximate=flag).numpy(), rtol=0, atol=2e-6)
    # the two forms differ by more than the tolerance: the test would catch the wrong default
    assert np.abs(tf.nn.gelu(t, approximate=True).numpy() - tf.nn.gelu(t, approximate=False).numpy()).max() > 1e-4
