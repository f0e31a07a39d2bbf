"""Sizes of ZeroPadding2D / UpSampling2D / Cropping2D read where the model is built, and leftovers the output no longer
keeps (issue 8).

- padding / size / cropping from a module constant (``PAD``, ``SIZE``), a tuple built from constants and a helper's
  parameters (``(pad, PAD)``), arithmetic on a builder's parameter with a default (``image_size // 4``), and
  UpSampling2D's ``size`` given by a builder's parameter without a default (keras-io's ddim ``get_network(image_size,
  ...)``: ``UpSampling2D(size=image_size)``), written as torch's ``scale_factor`` as it is (Keras's int or (rows,
  cols) is torch's scale_factor in the same order). Each model verified against Keras. A padding fwport cannot read
  keeps its error, and then the functional model left as written gets no stray ``from torch import nn``.
- ``reg = keras.regularizers.l2(...)`` followed into regularization_loss(): its line is no longer a dead
  ``reg = KerasRegularizer(...)`` (with the helper written for it) but a comment; the penalty checked against Keras's
  ``model.losses``.
- ``x.shape.as_list()`` / ``x.get_shape().as_list()`` on a value of unknown type → ``list(x.shape)``, run without
  TensorFlow and compared with TensorFlow's result.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import keras3_forward_verified as _verify

CONSTANTS = '''
import keras
from keras import layers

PAD = 2
SIZE = (2, 3)


def block(x, pad=1, up=2):
    x = layers.ZeroPadding2D(padding=pad)(x)
    x = layers.UpSampling2D(size=up)(x)
    x = layers.ZeroPadding2D(padding=(pad, PAD))(x)
    return x


def build(image_size=8):
    inputs = keras.Input(shape=(image_size, image_size, 3))
    x = layers.ZeroPadding2D(padding=PAD)(inputs)
    x = layers.UpSampling2D(size=SIZE)(x)
    x = layers.Cropping2D(cropping=(1, PAD))(x)
    x = block(x, pad=3)
    x = layers.UpSampling2D(size=image_size // 4)(x)
    x = layers.Conv2D(4, 3)(x)
    return keras.Model(inputs, x)


model = build()
'''

# keras-io generative/ddim.py and the DLwP chapter 17 notebook: the noise variance upsampled to the image size
PARAMETER = '''
import keras
from keras import layers

IMAGE_SIZE = 6


def get_network(image_size, width):
    noise = keras.Input(shape=(1, 1, 3))
    e = layers.UpSampling2D(size=image_size, interpolation="nearest")(noise)
    x = layers.Conv2D(width, 3, padding="same")(e)
    return keras.Model(noise, x)


model = get_network(IMAGE_SIZE, 5)
'''

REGULARIZER = '''
import keras
from keras import layers

reg = keras.regularizers.l2(1e-2)

model = keras.Sequential([
    keras.Input(shape=(6,)),
    layers.Dense(8, activation="relu", kernel_regularizer=reg),
    layers.Dense(2, kernel_regularizer=reg),
])
'''

AS_LIST = '''
import tensorflow as tf


def last_rows(x):
    dims = x.shape.as_list()
    return tf.reshape(x, [-1, dims[-1]])


def tail(x):
    return x.get_shape().as_list()[1:]
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def test_padding_upsampling_cropping_from_constants_and_parameters(tmp_path):
    r = _tx(CONSTANTS)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "keras" not in out
    assert "nn.ZeroPad2d((2, 2, 3, 3))" in out  # (pad, PAD) with pad=3: Keras's (rows, cols), torch's (l, r, t, b)
    assert "nn.Upsample(scale_factor=(2, 3))" in out and "nn.ZeroPad2d((-2, -2, -1, -1))" in out
    assert "nn.Upsample(scale_factor=image_size // 4)" in out
    _verify(tmp_path, CONSTANTS, out, "model", "float32[2,8,8,3]")


def test_upsampling_size_given_by_a_builder_parameter(tmp_path):
    r = _tx(PARAMETER)
    assert not _errors(r), _errors(r)
    assert "nn.Upsample(scale_factor=image_size)" in r.output
    _verify(tmp_path, PARAMETER, r.output, "model", "float32[2,1,1,3]")


def test_a_padding_fwport_cannot_read_keeps_its_error_and_adds_no_torch_import():
    src = CONSTANTS.replace("cropping=(1, PAD)", "cropping=((1, 0), (0, 1)) if PAD else 0")
    r = _tx(src)
    assert any("cropping must be a literal" in m for m in _errors(r)), _errors(r)
    assert any("left as written" in m for m in _errors(r))
    assert "torch" not in r.output and "layers.Cropping2D" in r.output


def test_a_followed_regularizer_name_leaves_no_dead_line(tmp_path):
    r = _tx(REGULARIZER)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "KerasRegularizer" not in out and "\nreg =" not in out
    assert "# reg = keras.regularizers.l2(1e-2)" in out
    pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(out, "t.py", "exec"), namespace)
    tmodel = namespace["model"]
    rng = np.random.default_rng(0)
    kernels = [rng.standard_normal((6, 8)).astype("float32"), rng.standard_normal((8, 2)).astype("float32")]
    with torch.no_grad():
        for i, k in zip((0, 2), kernels):
            tmodel[i].weight.copy_(torch.as_tensor(k.T))
    penalty = float(tmodel.regularization_loss().detach())
    np.save(tmp_path / "k0.npy", kernels[0])
    np.save(tmp_path / "k1.npy", kernels[1])
    (tmp_path / "m.py").write_text(REGULARIZER)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {str(tmp_path)!r})
        from m import model
        for l, k in zip(model.layers, [np.load({str(tmp_path / 'k0.npy')!r}), np.load({str(tmp_path / 'k1.npy')!r})]):
            l.kernel.assign(k)
        print(float(sum(model.losses)))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-2000:]
    expected = float(done.stdout.strip().splitlines()[-1])
    assert penalty == pytest.approx(expected, rel=1e-5)


def test_shape_as_list_of_an_unknown_value(tmp_path):
    r = _tx(AS_LIST)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "dims = list(x.shape)" in out and "return list(x.shape)[1:]" in out
    assert "as_list" not in out and "tensorflow" not in out
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    namespace: dict = {}
    exec(compile(out, "t.py", "exec"), namespace)
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    original: dict = {}
    exec(compile(AS_LIST, "m.py", "exec"), original)
    np.testing.assert_array_equal(namespace["last_rows"](torch.as_tensor(x)).numpy(),
                                  original["last_rows"](tf.constant(x)).numpy())
    assert namespace["tail"](torch.as_tensor(x)) == original["tail"](tf.constant(x)) == [3, 4]
