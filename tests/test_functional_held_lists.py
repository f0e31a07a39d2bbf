"""A builder's list of layers that it only iterates (pix2pix's generator: ``down_stack = [downsample(64, 4), ...]``
then ``for down in down_stack: x = down(x)``) and a list it appends the model's tensors to (``skips = []``,
``skips.append(x)``, ``skips = reversed(skips[:-1])``, ``for up, skip in zip(up_stack, skips)``): the loops are
written out, one module per item of the layer list (``self.down_stack_0``, ...; an item iterated twice is the same
module) and one forward name per appended tensor (``skips_0 = x``). Verified against Keras. A list read any other
way (``len(down_stack)``, ``skips[0]``) keeps the error it had."""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import keras3_forward_verified as _verify

UNET = '''
import keras
from keras import layers


def downsample(filters, apply_batchnorm=True):
    result = keras.Sequential()
    result.add(layers.Conv2D(filters, 3, strides=2, padding="same", use_bias=False))
    if apply_batchnorm:
        result.add(layers.BatchNormalization())
    result.add(layers.LeakyReLU())
    return result


def upsample(filters):
    result = keras.Sequential()
    result.add(layers.Conv2DTranspose(filters, 3, strides=2, padding="same"))
    result.add(layers.ReLU())
    return result


def Generator():
    down_stack = [downsample(4, apply_batchnorm=False), downsample(8), downsample(8)]
    up_stack = [upsample(8), upsample(4)]
    last = layers.Conv2DTranspose(3, 3, strides=2, padding="same", activation="tanh")
    concat = layers.Concatenate()
    inputs = layers.Input(shape=[16, 16, 3])
    x = inputs
    skips = []
    for down in down_stack:
        x = down(x)
        skips.append(x)
    skips = reversed(skips[:-1])
    for up, skip in zip(up_stack, skips):
        x = up(x)
        x = concat([x, skip])
    x = last(x)
    return keras.Model(inputs=inputs, outputs=x)


generator = Generator()
'''

SHARED = '''
import keras
from keras import layers


def build():
    blocks = [layers.Dense(6, activation="relu"), layers.Dense(6)]
    inputs = keras.Input(shape=(6,))
    x = inputs
    for block in blocks:
        x = block(x)
    for block in blocks:
        x = block(x)
    return keras.Model(inputs, x)


model = build()
'''

OTHER_READS = '''
import keras
from keras import layers


def build():
    blocks = [layers.Dense(6), layers.Dense(6)]
    inputs = keras.Input(shape=(6,))
    x = inputs
    for block in blocks:
        x = block(x)
    print(len(blocks))
    return keras.Model(inputs, x)


model = build()
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def test_a_unet_of_layer_lists_and_skip_tensors(tmp_path):
    r = _tx(UNET)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "keras" not in out
    assert "self.down_stack_2 = nn.Sequential(" in out and "self.up_stack_1 = nn.Sequential(" in out
    # the skips in reverse, the deepest left out
    assert "torch.cat([x, skips_1], dim=1)" in out and "torch.cat([x, skips_0], dim=1)" in out
    assert "skips_2], dim=1)" not in out
    _verify(tmp_path, UNET, out, "generator", "float32[2,16,16,3]")


def test_a_layer_list_iterated_twice_shares_its_modules(tmp_path):
    r = _tx(SHARED)
    assert not _errors(r), _errors(r)
    out = r.output
    assert out.count("nn.Linear(6, 6)") == 2
    assert out.count("self.blocks_0(x)") == 2
    _verify(tmp_path, SHARED, out, "model", "float32[3,6]")


def test_a_layer_list_read_otherwise_keeps_the_error():
    r = _tx(OTHER_READS)
    assert any("block(...) is called on tensors of the functional model" in m for m in _errors(r)), _errors(r)
