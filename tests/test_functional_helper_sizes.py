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
from runners import Warm

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


# the other way round: keras.Input(shape=input_shape) (a builder parameter) given to a helper whose first call on it
# does not show the rank (a layer held by a name): the helper's class must not read the builder's input_shape
HELD = HEAD + '''

def block(x, filters):
    conv = layers.Conv2D(filters, 3, padding="same")
    h = conv(x)
    return layers.Conv2D({size}, 1)(h)


def build(input_shape):
    inputs = keras.Input(shape=input_shape)
    x = block(inputs, 4)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''


def test_a_size_of_the_builders_input_shape_read_in_a_helper_is_an_error_on_the_call_line():
    r = translate_source(textwrap.dedent(HELD.format(size="x.shape[-1]")).lstrip("\n"), "m.py", PACK)
    errs = [(f.code, f.line) for f in r.findings if f.severity.value == "error"]
    assert ("shape-unknown", 13) in errs, r.findings
    assert "input_shape[" not in r.output


def test_a_helper_given_the_builders_input_shape_builds_without_its_name_and_computes_what_keras_does():
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    import numpy as np
    src = textwrap.dedent(HELD.format(size="2")).lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    block = r.output[r.output.index("class Block("):r.output.index("class Build(")]
    assert "input_shape" not in block, block  # (it was nn.Conv2d(input_shape[-1], ...): a NameError)
    kns: dict = {}
    exec(compile(src, "m.py", "exec"), kns)
    tns: dict = {}
    exec(compile(r.output, "t.py", "exec"), tns)
    kmodel, tmodel = kns["build"]((6, 6, 3)), tns["build"]((6, 6, 3))
    tmodel.eval()
    x = np.random.default_rng(0).standard_normal((2, 6, 6, 3)).astype("float32")
    with torch.no_grad():
        tmodel(torch.from_numpy(x))  # (the lazy convolution takes its input channels)
    assert len(r.layers) == 3
    for rec in r.layers:
        kernel, bias = (w.numpy() for w in eval(f"kmodel.{rec.source}").weights)
        weight = kernel.T if rec.rule == "dense" else kernel.transpose(3, 2, 0, 1)
        module = tmodel.get_submodule(rec.target)
        assert tuple(module.weight.shape) == weight.shape
        with torch.no_grad():
            module.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight)))
            module.bias.copy_(torch.from_numpy(bias))
    want = kmodel(tf.constant(x), training=False).numpy()
    with torch.no_grad():
        got = tmodel(torch.from_numpy(x)).numpy()
    assert got.shape == want.shape
    assert abs(got - want).max() < 1e-5


# a helper that rebinds its tensor parameter and then reads its size: Keras reads the latest value's size (16, then
# 32 in the loop), not the size the parameter had at the call (which was written in before: a smaller layer, no finding)
REBOUND = HEAD + '''

def block(x, filters):
    x = layers.Dense(filters)(x)
    return layers.Dense(x.shape[-1] * 2)(x)


def build():
    inputs = keras.Input(shape=(5,))
    x = block(inputs, 16)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''

REBOUND_LOOP = HEAD + '''

def block(x, filters):
    for i in range(2):
        x = layers.Dense(x.shape[-1] * 2)(x)
    return x


def build(dim):
    inputs = keras.Input(shape=(dim + 1,))
    x = block(inputs, 16)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''


@pytest.mark.parametrize("src, make, shape, widths", [
    (REBOUND, "build()", (4, 5), [16, 32, 3]),
    (REBOUND_LOOP, "build(2)", (4, 3), [6, 12, 3]),
], ids=["rebound", "rebound-in-a-loop"])
def test_the_size_of_a_rebound_tensor_parameter_is_that_of_its_latest_value(src, make, shape, widths):
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    import numpy as np
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    kns: dict = {}
    exec(compile(src, "m.py", "exec"), kns)
    tns: dict = {}
    exec(compile(r.output, "t.py", "exec"), tns)
    kmodel, tmodel = eval(make, kns), eval(make, tns)
    tmodel.eval()
    assert sorted(int(eval(f"m.{rec.source}", {"m": kmodel}).units) for rec in r.layers) == sorted(widths)
    for rec in r.layers:
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


# keras-io's eanet external_attention: the sizes unpacked from x.shape (the batch axis bound to `_`)
UNPACKED = HEAD + '''

def block(x, units):
    _, num_patch, channel = x.shape
    h = layers.Dense(units, activation="relu")(x)
    h = layers.Dense(channel)(h)
    return layers.Reshape((num_patch * channel,))(h)


def build():
    inputs = keras.Input(shape=(4, 6))
    x = block(inputs, 8)
    return keras.Model(inputs, layers.Dense(3)(x))
'''


def test_sizes_unpacked_from_a_tensors_shape_in_a_helper_are_its_known_sizes(tmp_path):
    r = translate_source(UNPACKED, "m.py", PACK, {"keras": 3})
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "self.fc2 = nn.Linear(8, 6)" in r.output and "x.shape" not in r.output
    # the batch axis named: its size is known only at run time, the statement stays refused
    named = translate_source(UNPACKED.replace("_, num_patch", "b, num_patch"), "m.py", PACK, {"keras": 3})
    assert any("b, num_patch, channel = x.shape: fwport follows a functional model written as" in f.message
               for f in named.findings if f.severity.value == "error"), named.findings
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(UNPACKED)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[3,4,6]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
