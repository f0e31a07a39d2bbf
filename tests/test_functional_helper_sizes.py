"""The functional pass on a helper whose result has a size written with the helper's own names (its class
parameters ``x_size1`` for a size read from ``x.shape``, its symbolic parameter ``filters``): the builder's class
names that size with its own expressions (``(dim * 2) * 2``, ``width * 2``), never the helper's, which are not
defined there (a NameError when the translated model is built, with no finding). Each model is built in both
frameworks, the Keras weights moved by the records, and the outputs compared."""
from __future__ import annotations

import re
import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

HEAD = '''
from tensorflow import keras
from tensorflow.keras import layers
'''

# a size read from the input (x.shape[-1]) the caller gives as an expression: the class parameter x_size1
SHAPE_READ = HEAD + '''

def block(x, filters):
    h = layers.Dense(filters, activation="relu")(x)
    return layers.Dense(x.shape[-1] * 2)(h)


def build(dim):
    inputs = keras.Input(shape=(dim * 2,))
    x = block(inputs, 16)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''

# a symbolic parameter of the helper (filters, given the builder's width) in its result's size
SYMBOLIC = HEAD + '''

def block(x, filters):
    return layers.Dense(filters * 2, activation="relu")(x)


def build(width):
    inputs = keras.Input(shape=(8,))
    x = block(inputs, width)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''

# sizes of a rank-3 input used in Reshape and Dense, the caller's size `dim + 1` (parenthesized where it is used)
RESHAPE = HEAD + '''

def block(x, filters):
    h = layers.Dense(filters)(x)
    h = layers.Dense(x.shape[1] * x.shape[2] * 2)(layers.Flatten()(h))
    return layers.Reshape((x.shape[1], x.shape[2] * 2))(h)


def build(seq, dim):
    inputs = keras.Input(shape=(seq, dim + 1))
    x = block(inputs, 4)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''

# a helper that returns two tensors: both sizes named in the caller's scope
MULTI = HEAD + '''

def block(x, filters):
    h = layers.Dense(filters, activation="relu")(x)
    return layers.Dense(x.shape[-1] * 2)(h), h


def build(dim):
    inputs = keras.Input(shape=(dim + 1,))
    x, skip = block(inputs, 16)
    outputs = layers.Concatenate()([layers.Dense(3)(x), skip])
    return keras.Model(inputs, outputs)
'''


@pytest.mark.parametrize("src, make, shape, leaked", [
    (SHAPE_READ, "build(3)", (4, 6), "x_size1"),
    (SYMBOLIC, "build(5)", (4, 8), "filters"),
    (RESHAPE, "build(3, 2)", (2, 3, 3), "x_size2"),
    (MULTI, "build(2)", (4, 3), "x_size1"),
], ids=["shape-read", "symbolic", "reshape", "multi"])
def test_a_helpers_result_size_is_named_in_the_callers_class_and_computes_what_keras_does(src, make, shape, leaked):
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    import numpy as np
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    out = r.output
    builder = out[out.index("class Build("):]
    assert not re.search(rf"\b{leaked}\b", builder), builder  # the helper's name is not defined there
    kns: dict = {}
    exec(compile(src, "m.py", "exec"), kns)
    tns: dict = {}
    exec(compile(out, "t.py", "exec"), tns)
    kmodel, tmodel = eval(make, kns), eval(make, tns)  # (the NameError was here)
    tmodel.eval()
    assert r.layers
    for rec in r.layers:
        assert rec.rule == "dense"
        kernel, bias = (w.numpy() for w in eval(f"kmodel.{rec.source}").weights)
        module = tmodel.get_submodule(rec.target)
        assert tuple(module.weight.shape) == kernel.T.shape
        with torch.no_grad():
            module.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.T)))
            module.bias.copy_(torch.from_numpy(bias))
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    want = kmodel(tf.constant(x), training=False).numpy()
    with torch.no_grad():
        got = tmodel(torch.from_numpy(x)).numpy()
    assert got.shape == want.shape
    assert abs(got - want).max() < 1e-5
