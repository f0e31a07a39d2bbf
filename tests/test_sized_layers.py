"""Layer arguments whose sizes are not written as literals (issue 8): a Reshape or a Dense built from the
builder's parameters or from sizes of the model's tensors (``x.shape[-1]``) is translated where the size is
known where torch builds the module, and refused at its line where it is not; verified against Keras."""
from __future__ import annotations

from collections import Counter

import pytest

from fwport.core.pipeline import translate_source
from runners import Warm


def _errors(r) -> Counter:
    return Counter(f.code for f in r.findings if f.severity.name == "ERROR")


def _verify(tmp_path, source: str, output: str, model: str, shape: str, checks=("forward", "grad")) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(source)
    (tmp_path / "m_torch.py").write_text(output)
    session = Warm.session()
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model, inputs=[shape],
                          checks=checks, device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


RESHAPE_SIZES = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model(seq, a, b, units):
    inputs = keras.Input(shape=(seq, a * b))
    x = layers.Reshape((-1, a, b))(inputs)
    x = layers.Dense(units)(x)
    x = layers.Reshape((-1, x.shape[-2] * x.shape[-1]))(x)
    y = layers.Dense(x.shape[-1] // 2)(x)
    outputs = layers.Dense(3)(y)
    return keras.Model(inputs, outputs)


def build_decoder(latent, target):
    z = keras.Input(shape=(latent,))
    x = layers.Dense(target[0] * target[1] * target[2])(z)
    x = layers.Reshape(target)(x)
    return keras.Model(z, x)


model = build_model(5, 4, 6, 8)
decoder = build_decoder(3, (2, 3, 4))
'''


def test_reshape_and_dense_sized_by_builder_parameters_and_tensor_shapes(tmp_path):
    r = translate_source(RESHAPE_SIZES, "m.py")
    assert not _errors(r), r.findings
    # the tensors' sizes are written where the modules are built (x does not exist in __init__)
    assert "nn.Unflatten(1, (-1, a * units))" in r.output and "x.shape" not in r.output
    assert "nn.Unflatten(1, (-1, a, b))" in r.output and "nn.Unflatten(1, tuple(target))" in r.output
    _verify(tmp_path, RESHAPE_SIZES, r.output, "build_model(5, 4, 6, 8)", "float32[2,5,24]")
    _verify(tmp_path, RESHAPE_SIZES, r.output, "build_decoder(3, (2, 3, 4))", "float32[2,3]")


def test_a_size_of_a_tensor_that_is_not_known_is_refused_at_its_line():
    src = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model(n):
    inputs = keras.Input(shape=(None, None))
    x = layers.Dense(n)(inputs)
    y = layers.Reshape((-1, x.shape[1] * 2))(x)
    return keras.Model(inputs, y)
'''
    r = translate_source(src, "m.py")
    found = [f for f in r.findings if f.severity.name == "ERROR" and "x.shape" in f.message]
    assert found and found[0].line == 9, r.findings
    assert "x.shape" in r.output and "class " not in r.output  # left as written, not a NameError in __init__


IN_PLACE = '''
from tensorflow import keras
from tensorflow.keras import layers

IMG_W, IMG_H = 8, 4


class Involution(keras.Model):
    shape_out = (6, -1)

    def __init__(self, k, groups):
        super().__init__()
        self.k, self.groups = k, groups
        self.proj = layers.Dense(k * k * groups * 6)
        self.unflat = layers.Reshape((6, self.k * self.k, 1, self.groups))
        self.flat = layers.Reshape(self.shape_out)

    def call(self, x):
        return self.flat(self.unflat(self.proj(x)))


def build():
    new_shape = ((IMG_W // 4), (IMG_H // 2) * 2)
    return keras.Sequential([keras.Input(shape=(IMG_W * IMG_H // 4,)), layers.Reshape(target_shape=new_shape),
                             layers.Dense(3)])
'''


def test_reshape_built_where_the_layer_is_reads_its_sizes_as_written(tmp_path):
    # a subclass's __init__ and a Sequential's list: torch builds the module at the very place, so
    # self.k * self.k, a class attribute and a local tuple are the values Keras reads
    r = translate_source(IN_PLACE, "m.py")
    assert not _errors(r), r.findings
    assert "nn.Unflatten(1, (6, (self.k * self.k), 1, self.groups))" in r.output
    assert "nn.Unflatten(1, tuple(self.shape_out))" in r.output and "nn.Unflatten(1, tuple(new_shape))" in r.output
    _verify(tmp_path, IN_PLACE, r.output, "Involution(2, 3)", "float32[2,5]")
    _verify(tmp_path, IN_PLACE, r.output, "build", "float32[2,8]")


def test_reshape_to_a_shape_of_unknown_rank_in_a_channels_first_chain_is_refused():
    src = '''
from tensorflow import keras
from tensorflow.keras import layers


def build(shape):
    return keras.Sequential([keras.Input(shape=(8, 8, 3)), layers.Conv2D(4, 3), layers.Reshape(shape),
                             layers.Dense(2)])
'''
    r = translate_source(src, "m.py")
    assert _errors(r), r.findings
    assert "layers.Reshape(shape)" in r.output


JOINED_SHAPES = '''
from tensorflow import keras
from tensorflow.keras import layers

IMAGE_SIZE = [6, 5]
target_shape = (6, 5)


def build_a():
    inputs = keras.Input([*IMAGE_SIZE, 3])
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = layers.Flatten()(x)
    return keras.Model(inputs, layers.Dense(2)(x))


def build_b():
    inputs = keras.Input(shape=target_shape + (3,))
    x = layers.Conv2D(4, 3)(inputs)
    x = layers.Flatten()(x)
    return keras.Model(inputs, layers.Dense(2)(x))
'''


def test_input_shapes_joined_from_module_constants_are_read(tmp_path):
    # [*IMAGE_SIZE, 3] and target_shape + (3,): sizes known here, so the Flatten → Dense sizes follow
    r = translate_source(JOINED_SHAPES, "m.py")
    assert not _errors(r), r.findings
    assert "nn.Linear(120, 2)" in r.output and "nn.Linear(48, 2)" in r.output
    _verify(tmp_path, JOINED_SHAPES, r.output, "build_a", "float32[2,6,5,3]")
    _verify(tmp_path, JOINED_SHAPES, r.output, "build_b", "float32[2,6,5,3]")
