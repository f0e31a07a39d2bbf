"""A layer class of this file called on several tensors in a functional model converted to channels-first (keras-io's
gaugan: ``x = ResBlock(filters=1024)(x, mask)``, a SPADE block given the feature map and the segmentation map). The
class's body keeps Keras's channels-last layout (the subclass pass), so each map is moved to it for the call
(``x.movedim(1, -1)``) and what comes out is moved back (``.movedim(-1, 1)``), as a call on one tensor already was;
a call() parameter named ``mask`` that the body reads is an ordinary argument when nothing in the file attaches a
Keras mask (the translated forward keeps it). An elementwise TensorFlow function with a scalar argument beside the
map (``tf.nn.leaky_relu(x, 0.2)``) is followed on a channels-first map. Verified against Keras 2 and Keras 3 with
the weights transferred (forward and gradients)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors
from runners import Warm

SRC = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Modulate(layers.Layer):
    def __init__(self, filters, **kwargs):
        super().__init__(**kwargs)
        self.filters = filters

    def build(self, input_shape):
        self.conv = layers.Conv2D(self.filters, 3, padding="same")
        self.conv_gamma = layers.Conv2D(self.filters, 1)

    def call(self, input_tensor, mask):
        gamma = self.conv_gamma(mask)
        mean = tf.reduce_mean(input_tensor, axis=-1, keepdims=True)
        return self.conv(tf.nn.leaky_relu(input_tensor, 0.2)) * gamma + mean


def build():
    latent = keras.Input(shape=(8,))
    mask = keras.Input(shape=(4, 6, 3))
    x = layers.Dense(4 * 6 * 5)(latent)
    x = layers.Reshape((4, 6, 5))(x)
    x = layers.Conv2D(5, 3, padding="same")(x)
    x = Modulate(7)(x, mask)
    x = tf.nn.leaky_relu(x, 0.2)
    x = Modulate(4)(x, mask=mask)
    x = layers.Conv2D(2, 3, padding="same")(x)
    return keras.Model([latent, mask], x)
'''
# Keras 3: no TensorFlow function on a KerasTensor in the builder
SRC3 = SRC.replace("    x = tf.nn.leaky_relu(x, 0.2)\n", "    x = layers.LeakyReLU(0.2)(x)\n").replace(
    "from tensorflow import keras\nfrom tensorflow.keras import layers", "import keras\nfrom keras import layers")


def _tx(src: str, version: int):
    return translate_source(src, "m.py", "tf2torch", {"keras": version})


@pytest.mark.parametrize("version", [2, 3])
def test_a_layer_class_on_several_maps_of_a_channels_first_model_computes_what_keras_does(tmp_path, version):
    src = SRC if version == 2 else SRC3
    r = _tx(src, version)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "x = self.modulate1(x.movedim(1, -1), mask.movedim(1, -1)).movedim(-1, 1)" in out
    assert "x = self.modulate2(x.movedim(1, -1), mask=mask.movedim(1, -1)).movedim(-1, 1)" in out
    assert "def forward(self, input_tensor, mask):" in out
    if version == 2:
        assert "x = F.leaky_relu(x, negative_slope=0.2)" in out
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()",
                          inputs=["float32[2,8]", "float32[2,4,6,3]"], checks=("forward", "grad"), device="cpu",
                          keras=version), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_a_flattened_map_given_to_a_layer_class_with_several_tensors_is_refused():
    # a map of known shape flattened channels-first: its features are in (c, h, w) order, not Keras's (h, w, c)
    src = SRC.replace("    x = Modulate(7)(x, mask)\n", "    x = Modulate(7)(layers.Flatten()(x), mask)\n")
    errors = _errors(_tx(src, 2))
    assert any("Modulate, a layer of this file whose body keeps Keras's channels-last layout, on a flattened "
               "channels-first feature map" in e for e in errors), errors


def test_a_mask_argument_is_refused_where_the_file_attaches_keras_masks():
    # with an Embedding(mask_zero=True) in the file, call()'s mask is Keras's mask, which forward does not take
    src = SRC + "\n\nemb = layers.Embedding(10, 4, mask_zero=True)\n"
    errors = _errors(_tx(src, 2))
    assert any("mask: the translated Modulate.forward takes no mask" in e for e in errors), errors
