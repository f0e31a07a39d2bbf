"""A function of the file that builds a keras.Sequential by ``add`` calls and returns it (pix2pix's
``downsample(filters, size, apply_batchnorm=True)``), called on a tensor of a functional model
(``downsample(64, 4, False)(x)``, or ``d = downsample(64, 4)`` then ``d(x)``): the Sequential that call
builds is a layer of the model, its ``if``
statements decided by the call's arguments (passes/functional.py). Verified against Keras."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_lines as _errors
from runners import Warm

PACK = load_pack("tf2torch")

PIX2PIX = '''
import tensorflow as tf

WIDTH = 8


def downsample(filters, size, apply_batchnorm=True, strides=2):
    """Conv2D => BatchNorm => LeakyReLU."""
    initializer = tf.random_normal_initializer(0., 0.02)
    result = tf.keras.Sequential()
    result.add(
        tf.keras.layers.Conv2D(filters, size, strides=strides, padding="same",
                               kernel_initializer=initializer, use_bias=False))
    if apply_batchnorm:
        result.add(tf.keras.layers.BatchNormalization())
    elif size > 100:
        result.add(tf.keras.layers.Dropout(0.5))
    result.add(tf.keras.layers.LeakyReLU())
    return result


def Discriminator(base=WIDTH):
    inp = tf.keras.layers.Input(shape=[16, 16, 3], name="input_image")
    tar = tf.keras.layers.Input(shape=[16, 16, 3], name="target_image")
    x = tf.keras.layers.concatenate([inp, tar])
    down1 = downsample(base, 4, False)(x)
    down2 = downsample(2 * base, 4)(down1)
    last = downsample(filters=WIDTH, size=3, strides=1)
    down3 = last(down2)
    x = tf.keras.layers.Flatten()(down3)
    x = tf.keras.layers.Dense(1)(x)
    return tf.keras.Model(inputs=[inp, tar], outputs=x)
'''


def _tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    assert translate_source(r.output, "m.py", PACK).output == r.output
    return r


def test_a_sequential_factory_called_on_a_tensor_is_an_nn_sequential_named_after_it():
    r = _tx(PIX2PIX)
    assert _errors(r) == []
    out = r.output
    assert "self.downsample1 = nn.Sequential(nn.Conv2d(6, base, 4, stride=2, padding=1, bias=False), " \
           "nn.LeakyReLU(negative_slope=0.3))" in out  # apply_batchnorm=False: no BatchNorm
    assert "self.downsample2 = nn.Sequential(nn.Conv2d(base, (2 * base), 4, stride=2, padding=1, bias=False), " \
           "nn.BatchNorm2d((2 * base)" in out
    assert "down2 = self.downsample2(down1)" in out
    assert "self.last = nn.Sequential(nn.Conv2d((2 * base), WIDTH, 3, " in out and "nn.BatchNorm2d(WIDTH" in out
    assert "down3 = self.last(down2)" in out
    assert "def downsample" not in out  # built in __init__: the factory is gone
    assert "tf." not in out and "keras" not in out


def test_a_sequential_factory_verifies(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    r = _tx(PIX2PIX)
    (tmp_path / "m.py").write_text(textwrap.dedent(PIX2PIX).lstrip("\n"))
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "Discriminator()",
                          inputs=["float32[2,16,16,3]", "float32[2,16,16,3]"], checks=("forward", "grad"),
                          device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_a_sequential_factory_also_used_outside_the_model_is_kept():
    r = _tx(PIX2PIX + '''

block = downsample(4, 3)
''')
    # the model is followed; the factory stays for its other use (the sequential pass's findings on it)
    assert not any("left as written" in m for _, m in _errors(r))
    assert "self.downsample1 = nn.Sequential(" in r.output
    assert "def downsample(filters, size, apply_batchnorm=True, strides=2):" in r.output


@pytest.mark.parametrize("body, what", [
    ("    if tf.random.uniform(()) > 0.5:\n        result.add(tf.keras.layers.ReLU())\n",
     "cannot be decided where the model is built"),
    ("    result.trainable = False\n", "fwport follows a Sequential factory whose statements after "
                                     "keras.Sequential() are result.add(layer) calls"),
    ("    result.add(tf.keras.layers.Conv2D(filters, 3), name='x')\n", "result.add(layer) calls"),
])
def test_what_a_sequential_factory_does_besides_adding_layers_is_an_error_at_its_call(body, what):
    src = f'''
import tensorflow as tf


def block(filters):
    result = tf.keras.Sequential()
    result.add(tf.keras.layers.Conv2D(filters, 3))
{body}    return result


def build():
    inputs = tf.keras.Input(shape=(8, 8, 3))
    x = block(4)(inputs)
    return tf.keras.Model(inputs, x)
'''
    r = _tx(src)
    errs = _errors(r)
    at = src.lstrip("\n").split("\n").index("    x = block(4)(inputs)") + 1
    assert any(line == at and m.startswith("in block(...): ") for line, m in errs), errs
    assert any(what in m for _, m in errs), errs
    assert any("left as written" in m for _, m in errs)
    assert "def block(filters):" in r.output


def test_a_tensor_given_to_a_sequential_factory_is_an_error():
    r = _tx('''
import tensorflow as tf


def block(x, filters):
    result = tf.keras.Sequential()
    result.add(tf.keras.layers.Dense(filters))
    return result


def build():
    inputs = tf.keras.Input(shape=(8,))
    x = block(inputs, 4)(inputs)
    return tf.keras.Model(inputs, x)
''')
    assert any("a tensor of the model (or a value read from one) given to block(...), a Sequential factory" in m
               for _, m in _errors(r))


IN_A_HELPER = '''
from tensorflow import keras
from tensorflow.keras import layers


def conv_bn(filters, batchnorm=True):
    block = keras.Sequential()
    block.add(layers.Conv2D(filters, 3, padding="same"))
    if batchnorm:
        block.add(layers.BatchNormalization())
    block.add(layers.ReLU())
    return block


def residual(x, filters):
    y = conv_bn(filters)(x)
    y = conv_bn(filters, batchnorm=False)(y)
    return layers.add([x, y])


def build():
    inputs = keras.Input(shape=(8, 8, 4))
    x = residual(inputs, 4)
    x = residual(x, 4)
    outputs = layers.Dense(3)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, outputs)
'''


def test_a_sequential_factory_called_in_a_helper_verifies(tmp_path):
    r = _tx(IN_A_HELPER)
    assert _errors(r) == []
    # the model keeps Keras's layout: the block runs channels-first inside, its map moved in and back
    assert 'self.conv_bn1 = nn.Sequential(nn.Conv2d(4, 4, 3, padding="same"), nn.BatchNorm2d(4' in r.output
    assert "y = self.conv_bn1(x.movedim(-1, 1)).movedim(1, -1)" in r.output
    assert "def conv_bn" not in r.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(IN_A_HELPER).lstrip("\n"))
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[2,8,8,4]"],
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
