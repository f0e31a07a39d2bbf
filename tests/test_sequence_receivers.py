"""A Python list or tuple where a TensorFlow / Keras op takes a tensor (``keras.ops.expand_dims([token_id],
axis=0)``, from a Keras 3 notebook of the dev set): TensorFlow converts it (numbers to a new tensor, tensors
stacked); torch's ``x.unsqueeze`` / ``torch.f(input)`` need a tensor. A display of number literals becomes
``torch.tensor([...])`` (checked against TensorFlow numerically here); one of anything else is refused with an
error at its line, not written as ``([token_id]).unsqueeze(0)``, which raised AttributeError at run time with no
finding."""
from __future__ import annotations

import textwrap

import numpy as np

from fwport.core.pipeline import translate_source
from helpers import error_lines, needs
from runners import keras_and_torch


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "tf2torch")


UNKNOWN = """
import keras
import tensorflow as tf

def step(token_id, a, b):
    ids = keras.ops.expand_dims([token_id], axis=0)
    pair = tf.expand_dims((a, b), -1)
    many = tf.expand_dims([t for t in a], 0)
    return ids, pair, many
"""


def test_a_list_of_unknown_values_is_refused_at_its_line():
    r = tx(UNKNOWN)
    errors = error_lines(r)
    assert [line for line, _ in errors] == [5, 6, 7], errors
    assert all("cannot tell what the list holds" in m and "torch.stack" in m for _, m in errors), errors
    out = r.output
    assert ".unsqueeze(" not in out  # no call on a list
    assert "keras.ops.expand_dims([token_id], axis=0)" in out and "tf.expand_dims((a, b), -1)" in out
    assert out.count("# fwport: unsupported-construct: expand_dims(") == 3


NUMBERS = """
import keras
import tensorflow as tf

def values():
    return [tf.expand_dims([1.5, -2.0, 3.25], -1), keras.ops.expand_dims([4, 5], axis=0),
            tf.expand_dims([[1.0, 2.0], [3.0, 4.0]], 1)]
"""

DRIVER = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from model import values
out = [np.asarray(v) for v in values()]
print("RESULT " + json.dumps([{"shape": list(v.shape), "values": v.tolist(), "kind": v.dtype.kind} for v in out]))
'''


@needs("tensorflow", "torch")
def test_a_list_of_numbers_becomes_a_tensor_as_tensorflow_converts_it(tmp_path):
    r = tx(NUMBERS)
    assert error_lines(r) == [], error_lines(r)
    assert "torch.tensor([1.5, -2.0, 3.25]).unsqueeze(-1)" in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(NUMBERS), r.output, DRIVER)
    assert [o["shape"] for o in torch_out] == [o["shape"] for o in keras_out] == [[3, 1], [1, 2], [2, 1, 2]]
    for k, t in zip(keras_out, torch_out):
        np.testing.assert_array_equal(np.array(t["values"]), np.array(k["values"]))
        assert t["kind"] == k["kind"]  # floats stay floats, ints ints
