"""A functional model calling, on its tensors, a model fwport does not translate: another functional model of
the file left as written (keras-io's siamese_network: `embedding = Model(base_cnn.input, output)` left, then
`embedding(anchor_input)`), the model a builder left as written returns, a keras.applications model or its
preprocess_input (TensorFlow's transfer_learning tutorial): the error says which it is and what to do, not
that only helper functions are followed."""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

SIAMESE = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

inp = keras.Input(shape=(8,))
hidden = layers.Dense(4)(inp)
out = layers.Lambda(lambda t: tf.py_function(lambda a: a, [t], tf.float32))(hidden)
embedding = keras.Model(inp, out)

anchor = keras.Input(shape=(8,))
positive = keras.Input(shape=(8,))
distance = layers.subtract([embedding(anchor), embedding(positive)])
siamese = keras.Model([anchor, positive], distance)
'''

BUILT = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


def get_embedding():
    inp = keras.Input(shape=(8,))
    out = layers.Lambda(lambda t: tf.py_function(lambda a: a, [t], tf.float32))(layers.Dense(4)(inp))
    return keras.Model(inp, out)


embedding = get_embedding()
anchor = keras.Input(shape=(8,))
siamese = keras.Model(anchor, layers.Dense(2)(embedding(anchor)))
'''

PRETRAINED = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

preprocess_input = tf.keras.applications.mobilenet_v2.preprocess_input
base_model = tf.keras.applications.MobileNetV2(input_shape=(32, 32, 3), include_top=False, weights=None)
inputs = keras.Input(shape=(32, 32, 3))
x = preprocess_input(inputs)
x = base_model(x, training=False)
x = layers.GlobalAveragePooling2D()(x)
outputs = layers.Dense(1)(x)
model = keras.Model(inputs, outputs)
'''

ONLY_HELPERS = "only helper functions defined at the top of this file are followed"


def _errors(src: str) -> list[str]:
    r = translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 2})
    return [f.message for f in r.findings if f.severity.value == "error"]


def test_a_functional_model_left_as_written_called_by_another_is_named_as_such():
    errors = _errors(SIAMESE)
    assert any(m.startswith("embedding(...): embedding is a functional model of this file that fwport leaves as "
                            "written") for m in errors), errors
    assert not any(ONLY_HELPERS in m for m in errors), errors


def test_the_model_a_builder_left_as_written_returns_is_named_as_such():
    errors = _errors(BUILT)
    assert any(m.startswith("embedding(...): embedding is the functional model get_embedding(...) builds, which "
                            "fwport leaves as written") for m in errors), errors
    assert not any(ONLY_HELPERS in m for m in errors), errors


def test_a_pretrained_model_and_its_preprocess_input_are_named_as_such():
    errors = _errors(PRETRAINED)
    assert any(m.startswith("preprocess_input(...): preprocess_input is "
                            "keras.applications.mobilenet_v2.preprocess_input") for m in errors), errors
    assert not any(ONLY_HELPERS in m for m in errors), errors


def test_a_pretrained_model_called_after_a_followed_op_is_named_as_such():
    errors = _errors(PRETRAINED.replace("x = preprocess_input(inputs)", "x = inputs * 2.0 - 1.0"))
    assert any(m.startswith("base_model(...): base_model is a pretrained MobileNetV2 (keras.applications)")
               for m in errors), errors
    assert not any(ONLY_HELPERS in m for m in errors), errors


SUB = "a model made of layers of base (from its input to a layer's output, sharing its weights)"

FEATURES = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

inp = keras.Input(shape=(8,), name="image")
hidden = layers.Dense(4, name="dense1")(inp)
out = layers.Dense(2)(hidden)
base = keras.Model(inp, out)
'''


def test_a_sub_model_of_a_translated_model_is_translated():
    # (tests/test_functional_extractors.py runs it against Keras)
    src = FEATURES + 'features = keras.Model(base.input, base.get_layer("dense1").output)\n'
    assert _errors(src) == []
    out = translate_source(src, "f.py", load_pack("tf2torch")).output
    assert "def upto_dense1(self, inp):" in out and "return self.base.upto_dense1(inp)" in out


def test_a_sub_model_of_a_model_left_as_written_stays_with_it():
    left = FEATURES.replace("out = layers.Dense(2)(hidden)",
                            "out = layers.Lambda(lambda t: tf.py_function(lambda a: a, [t], tf.float32))(hidden)")
    errors = _errors(left + 'features = keras.Model(base.get_layer(name="image").input, '
                            'base.get_layer("dense1").output)\n')
    assert any(m.startswith('base.get_layer(name="image").input: ' + SUB + ": base is a functional model of this "
                            "file that fwport leaves as written") for m in errors), errors


def test_a_sub_model_of_a_loaded_model_says_it_is_not_translated():
    src = FEATURES + 'loaded = keras.models.load_model("m.h5")\n' \
        'features = keras.Model(loaded.input, loaded.get_layer("dense1").output)\n'
    errors = _errors(src)
    assert any(m.startswith("loaded.input: " + SUB.replace("of base", "of loaded") + ": loaded is not a model fwport "
                            "translates here") for m in errors), errors
