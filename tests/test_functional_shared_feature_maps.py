"""A module-level functional model built over the tensors of a channels-first model above it (keras-io's
functional_api guide: ``encoder = keras.Model(encoder_input, encoder_output)``, then the decoder's layers on
``encoder_output`` and ``autoencoder = keras.Model(encoder_input, decoder_output)``). Both models run channels-first:
the model above gets a method computing the tensors read (``upto_...``, which moves the Keras inputs channels-first
itself), the model below calls it on the inputs as given and moves none of them again. Two models of different
layouts stay an error (the tensor read would be in the other layout)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages
from runners import keras3_verified

PACK = load_pack("tf2torch")

# the guide's autoencoder, smaller: the encoder's output is a pooled vector
POOLED = '''
import keras
from keras import layers

encoder_input = keras.Input(shape=(13, 13, 1), name="img")
x = layers.Conv2D(4, 3, activation="relu")(encoder_input)
x = layers.MaxPooling2D(2)(x)
x = layers.Conv2D(6, 3, activation="relu")(x)
encoder_output = layers.GlobalMaxPooling2D()(x)

encoder = keras.Model(encoder_input, encoder_output, name="encoder")
encoder.summary()

x = layers.Reshape((3, 2, 1))(encoder_output)
x = layers.Conv2DTranspose(5, 3, activation="relu")(x)
x = layers.UpSampling2D(2)(x)
decoder_output = layers.Conv2DTranspose(1, 3)(x)

autoencoder = keras.Model(encoder_input, decoder_output, name="autoencoder")
'''

# the tensor read is a feature map (channels-first in both models), and the model below reads the input too
FEATURE_MAP = '''
import keras
from keras import layers

image = keras.Input(shape=(9, 7, 3), name="image")
x = layers.Conv2D(5, 3, padding="same", activation="relu")(image)
features = layers.Conv2D(4, 3, strides=2, padding="same")(x)
backbone = keras.Model(image, features)

skip = layers.Conv2D(4, 1, strides=2)(image)
y = layers.Add()([features, skip])
y = layers.Conv2D(2, 3, padding="same")(y)
y = layers.Flatten()(y)
scores = layers.Dense(3)(y)
classifier = keras.Model(image, [scores, features])
'''

# the model above keeps Keras's layout (Dense only), the one below runs channels-first
MIXED = '''
import keras
from keras import layers

z_in = keras.Input(shape=(6,))
z = layers.Dense(8)(z_in)
mapper = keras.Model(z_in, z)

x = layers.Reshape((2, 2, 2))(z)
x = layers.Conv2D(3, 2)(x)
generator = keras.Model(z_in, x)
'''


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def forward_of(out: str, class_name: str) -> str:
    body = out.split(f"class {class_name}(nn.Module):")[1]
    return body.split("    def forward(")[1].split("\n\n")[0]


def test_the_model_below_calls_the_method_of_the_model_above_on_its_inputs_as_given():
    r = tr(POOLED)
    assert error_messages(r) == []
    out = r.output
    below = forward_of(out, "Autoencoder")
    # the method moves the input channels-first itself: the model below moves nothing again
    assert "encoder_output = self.encoder.upto_encoder_output(encoder_input)" in below
    assert "permute(0, 3, 1, 2)" not in below and "made channels-first once here" not in below
    assert "    def upto_encoder_output(self, encoder_input):\n        encoder_input = encoder_input.permute(0, 3, 1, 2)\n" \
        in out
    assert out.count("nn.Conv2d(1, 4, 3)") == 1  # the shared layers: created once, in the model above
    assert "import keras" not in out and "= layers." not in out


def test_an_input_the_model_below_reads_itself_is_moved_there_once():
    r = tr(FEATURE_MAP)
    assert error_messages(r) == []
    below = forward_of(r.output, "Classifier")
    assert below.index("features = self.backbone.upto_features(image)") < below.index(
        "image = image.permute(0, 3, 1, 2)")
    assert below.count("permute(0, 3, 1, 2)") == 1 and "made channels-first once here" in below


def test_models_of_different_layouts_stay_an_error():
    r = tr(MIXED)
    assert any(m.startswith("z: tensors of mapper, a model above, read by a model whose layout differs")
               for m in error_messages(r)), error_messages(r)
    assert any(m.startswith("this functional model is left as written") for m in error_messages(r))
    assert "upto_" not in r.output and "class Generator" not in r.output


@pytest.mark.parametrize("src, model, shapes, weights", [
    (POOLED, "encoder", ["float32[3,13,13,1]"], 4),
    (POOLED, "autoencoder", ["float32[3,13,13,1]"], 8),
    (FEATURE_MAP, "backbone", ["float32[2,9,7,3]"], 4),
    (FEATURE_MAP, "classifier", ["float32[2,9,7,3]"], 10),
])
def test_the_models_compute_and_train_as_keras(tmp_path, src, model, shapes, weights):
    cert = keras3_verified(tmp_path, textwrap.dedent(src).lstrip("\n"), tr(src).output, model, shapes,
                           checks=("forward", "grad", "step"))
    assert len(cert["results"]["gradients"]) == weights  # the shared layers' weights mapped and compared too
