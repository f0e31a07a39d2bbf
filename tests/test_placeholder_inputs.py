"""keras.Input of a known batch and shape used outside a functional model (a placeholder given to a model call,
as tests of subclassed models do to read the output's shape): an error naming the torch.zeros(...) to give instead,
whose shape and dtype are the symbolic tensor's (checked against Keras)."""
from __future__ import annotations

import re

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings

SOURCE = '''
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.d = tf.keras.layers.Dense(3)

    def call(self, x):
        return self.d(tf.cast(x, tf.float32))


def test_shape():
    batch_size = 4
    ids = tf.keras.layers.Input(shape=(10,), dtype=tf.int32, batch_size=batch_size, name="ids")
    values = tf.keras.Input(shape=(2, 5), batch_size=3)
    return Net()(ids).shape, Net()(values).shape
'''


def test_a_placeholder_input_is_an_error_naming_the_tensor_to_give():
    r = translate_source(SOURCE, "m.py")
    errs = [f for f in error_findings(r) if "keras.Input(" in f.message]
    assert [f.line for f in errs] == [16, 17] and all(f.code == "unsupported-construct" for f in errs), r.findings
    assert not [f for f in error_findings(r) if f.code == "no-rule"], r.findings
    given = [re.search(r"give (torch\.zeros\(.*?\)) and call", f.message).group(1) for f in errs]
    assert given == ["torch.zeros((batch_size, 10), dtype=torch.int32)", "torch.zeros((3, 2, 5))"]
    torch = pytest.importorskip("torch")
    keras = pytest.importorskip("keras")
    import tensorflow as tf
    want = [keras.Input(shape=(10,), dtype=tf.int32, batch_size=4), keras.Input(shape=(2, 5), batch_size=3)]
    for text, k in zip(given, want):
        t = eval(text, {"torch": torch, "batch_size": 4})
        assert tuple(t.shape) == tuple(k.shape) and str(t.dtype).removeprefix("torch.") == k.dtype


def test_an_input_of_an_unknown_batch_keeps_the_guidance():
    r = translate_source(SOURCE.replace("batch_size=3", "name='v'"), "m.py")
    assert [f.code for f in error_findings(r) if f.line == 17] == ["no-rule"], r.findings
