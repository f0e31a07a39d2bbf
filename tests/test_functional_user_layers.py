"""A layer class of the file (its body kept in Keras's channels-last layout by the subclass pass) called
on a feature map of a functional model converted to channels-first: the map goes in channels-last and
what comes out is moved back (passes/functional.py). Verified against Keras (forward and gradients)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import Warm

PACK = load_pack("tf2torch")

GATED = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class ChannelGate(layers.Layer):
    def call(self, x):
        return tf.nn.relu(x) * tf.reduce_mean(x, axis=-1, keepdims=True)


def build():
    inputs = keras.Input(shape=(8, 8, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = ChannelGate()(x)
    x = layers.Conv2D(5, 3)(x)
    outputs = layers.Dense(2)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, outputs)
'''


def _tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    assert translate_source(r.output, "m.py", PACK).output == r.output
    return r


def test_a_layer_of_the_file_on_a_channels_first_map_is_called_channels_last():
    r = _tx(GATED)
    assert [f for f in r.findings if f.severity.value == "error"] == []
    assert "x = self.channel_gate(x.movedim(1, -1)).movedim(-1, 1)" in r.output
    assert "inputs = inputs.permute(0, 3, 1, 2)" in r.output  # the model itself stays channels-first


def test_a_layer_of_the_file_on_a_channels_first_map_verifies(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    r = _tx(GATED)
    (tmp_path / "m.py").write_text(textwrap.dedent(GATED).lstrip("\n"))
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[2,8,8,3]"],
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
