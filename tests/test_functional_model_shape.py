"""``keras.Input(shape=M.output.shape[1:])``: a model's input shaped by another model of the file (keras-io's vq_vae:
``keras.Input(shape=get_encoder(latent_dim).output.shape[1:])``; ``M.input_shape[1:]`` / ``M.output_shape[1:]``
likewise). Where fwport translates ``M`` above it (a module-level model, or a builder called with literal ints or
this builder's own parameters), the shape comes from that model's size propagation and the model translates; any
other shape expression keeps the one shape-unknown error. Likewise ``input_shape = (224, 224, 3)`` bound in the builder
and then ``keras.Input(shape=input_shape)`` (tensorflow/examples' profiling resnet_model): the tuple of ints the name
holds there, until a statement binds it again."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import keras3_forward_verified as _verify

BUILDERS = '''
import keras
from keras import layers


def get_encoder(latent_dim=16):
    encoder_inputs = keras.Input(shape=(12, 12, 1))
    x = layers.Conv2D(8, 3, activation="relu", strides=2, padding="same")(encoder_inputs)
    encoder_outputs = layers.Conv2D(latent_dim, 1, padding="same")(x)
    return keras.Model(encoder_inputs, encoder_outputs, name="encoder")


def get_decoder(latent_dim=16):
    latent_inputs = keras.Input(shape=get_encoder(latent_dim).output.shape[1:])
    x = layers.Conv2DTranspose(8, 3, activation="relu", strides=2, padding="same")(latent_inputs)
    decoder_outputs = layers.Conv2DTranspose(1, 3, padding="same")(x)
    return keras.Model(latent_inputs, decoder_outputs, name="decoder")
'''

MODULE = '''
import keras
from keras import layers

inputs = keras.Input(shape=(10,))
hidden = layers.Dense(6, activation="tanh")(inputs)
body = keras.Model(inputs, hidden)

head_inputs = keras.Input(shape=body.output_shape[1:])
outputs = layers.Dense(3)(head_inputs)
head = keras.Model(head_inputs, outputs)
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def test_an_input_shaped_by_a_builders_model_called_with_this_builders_parameter(tmp_path):
    r = _tx(BUILDERS)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "keras" not in out
    # (6, 6, latent_dim): the encoder's output, its size named by the decoder's own parameter
    assert "nn.ConvTranspose2d(latent_dim, 8, 3, stride=2)" in out
    assert "# latent_inputs: (batch, 6, 6, latent_dim) channels-last" in out
    _verify(tmp_path, BUILDERS, out, "get_decoder(5)", "float32[2,6,6,5]")


def test_an_input_shaped_by_a_module_level_models_output_shape(tmp_path):
    r = _tx(MODULE)
    assert not _errors(r), _errors(r)
    assert "nn.Linear(6, 3)" in r.output
    _verify(tmp_path, MODULE, r.output, "head", "float32[2,6]")


@pytest.mark.parametrize("shape", [
    "get_encoder(latent_dim * 2).output.shape[1:]",  # a size computed from the parameter: not followed
    "get_encoder(latent_dim).output.shape[2:]",  # not the shape without its batch
    "unknown_model.output.shape[1:]",  # a model fwport does not translate here
])
def test_another_shape_of_a_model_keeps_one_shape_unknown_error(shape):
    r = _tx(BUILDERS.replace("get_encoder(latent_dim).output.shape[1:]", shape))
    errs = _errors(r)
    assert any("keras.Input without a shape fwport can read" in e for e in errs), errs
    assert sum("keras.Input without a shape" in e for e in errs) == 1, errs


LOCAL = '''
import tensorflow as tf
from tensorflow.keras import layers

C = 3


def build(batch_size=None):
    input_shape = (10, 10, C)
    img_input = layers.Input(shape=input_shape, batch_size=batch_size)
    x = layers.Conv2D(4, 3, activation="relu")(img_input)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(2)(x)
    return tf.keras.Model(img_input, x)
'''


def test_an_input_shaped_by_a_tuple_the_builder_binds(tmp_path):
    r = _tx(LOCAL)
    assert not _errors(r), _errors(r)
    assert "nn.Conv2d(C, 4, 3)" in r.output and "nn.Linear(4, 2)" in r.output  # (C: the module constant)
    assert "# img_input: (batch, 10, 10, C) channels-last" in r.output
    _verify(tmp_path, LOCAL, r.output, "build()", "float32[2,10,10,3]")


@pytest.mark.parametrize("rebind", [
    "    input_shape = make_shape()\n",  # bound again to a value not known here
    "    input_shape += (1,)\n",  # changed
])
def test_a_tuple_bound_again_before_the_input_keeps_one_shape_unknown_error(rebind):
    src = LOCAL.replace("    img_input = ", rebind + "    img_input = ")
    r = _tx(src)
    errs = _errors(r)
    assert sum("keras.Input without a shape fwport can read" in e for e in errs) == 1, errs


UNKNOWN = '''
import keras
from keras import layers


class Doubled(layers.Layer):
    def call(self, x):
        return x * 2.0


def get_head(units=4):
    head_inputs = keras.Input(shape=(units,))
    return keras.Model(head_inputs, layers.Dense(3)(head_inputs))


def get_model(units=4):
    head = get_head(units)
    inputs = keras.Input(shape=(6,))
    x = layers.Dense(units, activation="relu")(inputs)
    x = Doubled()(x)
    return keras.Model(inputs, head(x))
'''


def test_a_builders_model_called_on_a_tensor_of_unknown_shape_in_keras_layout(tmp_path):
    # vq_vae's get_vqvae: decoder(vq_layer(encoder_outputs)), the layer class's output shape unknown to fwport
    r = _tx(UNKNOWN)
    assert not _errors(r), _errors(r)
    assert "self.head = get_head(units)" in r.output and "self.head(x)" in r.output
    _verify(tmp_path, UNKNOWN, r.output, "get_model()", "float32[2,6]")


def test_a_builders_model_on_a_tensor_of_unknown_shape_in_a_channels_first_graph_stays_an_error():
    # there a map would move to Keras's layout for the call, and an unknown shape does not say whether it is one
    src = UNKNOWN.replace("keras.Input(shape=(6,))", "keras.Input(shape=(8, 8, 2))").replace(
        'layers.Dense(units, activation="relu")(inputs)',
        'layers.GlobalAveragePooling2D()(layers.Conv2D(units, 3)(inputs))')
    errs = _errors(_tx(src))
    assert any("the model get_head called on a tensor of shape None" in e for e in errs), errs
