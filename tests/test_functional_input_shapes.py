"""``keras.Input(shape=...)`` shapes that are known where the model is built, though not a literal tuple: a slice of a
module-level shape written with ``None`` for its unknown sizes (tensorflow/docs' video_classification:
``input_shape = (None, 10, HEIGHT, WIDTH, 3)`` then ``layers.Input(shape=(input_shape[1:]))``), and a shape built
with ``tuple([...])`` joined to a module constant (keras-io's semantic_image_clustering:
``keras.Input(shape=tuple([k_neighbours]) + input_shape)``). Each is read by the size reader (dims.Sizes.shape) and
the model translates, verified against Keras; a slice of a shape fwport does not know keeps the shape-unknown error."""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import keras3_forward_verified as _verify

SLICED = '''
import keras
from keras import layers

HEIGHT = 8
WIDTH = 6
input_shape = (None, 4, HEIGHT, WIDTH, 3)


def build():
    inp = layers.Input(shape=(input_shape[1:]))
    x = layers.Conv3D(5, 3, padding="same", activation="relu")(inp)
    x = layers.GlobalAveragePooling3D()(x)
    out = layers.Dense(2)(x)
    return keras.Model(inp, out)


model = build()
'''

JOINED = '''
import keras
from keras import layers

image_shape = (8, 6, 3)
k_neighbours = 2


def build():
    inp = keras.Input(shape=tuple([k_neighbours]) + image_shape[:2] + (3,))
    x = layers.Reshape((k_neighbours * 8, 6, 3))(inp)
    x = layers.Conv2D(4, 3)(x)
    x = layers.Flatten()(x)
    return keras.Model(inp, layers.Dense(3)(x))


model = build()
'''

UNKNOWN = '''
import keras
import numpy as np
from keras import layers

x_train = np.zeros((4, 5, 3))


def build():
    inp = layers.Input(shape=x_train.shape[1:])
    return keras.Model(inp, layers.Dense(2)(inp))


model = build()
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def test_a_slice_of_a_module_shape_with_none_sizes(tmp_path):
    r = _tx(SLICED)
    assert not _errors(r), _errors(r)
    assert "keras" not in r.output
    assert "nn.Conv3d(3, 5, 3, padding=\"same\")" in r.output
    assert "nn.Linear(5, 2)" in r.output
    _verify(tmp_path, SLICED, r.output, "model", "float32[2,4,8,6,3]")


def test_a_shape_built_with_tuple_and_joined_to_a_sliced_constant(tmp_path):
    r = _tx(JOINED)
    assert not _errors(r), _errors(r)
    assert "nn.Linear(4 * 14 * 4, 3)" in r.output or "nn.Linear(224, 3)" in r.output
    _verify(tmp_path, JOINED, r.output, "model", "float32[2,2,8,6,3]")


def test_a_slice_of_a_data_arrays_shape_keeps_the_error():
    r = _tx(UNKNOWN)
    assert any("keras.Input without a shape fwport can read" in m for m in _errors(r)), _errors(r)
