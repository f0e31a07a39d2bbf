"""``tf.nn.depth_to_space`` on a feature map of a functional model converted to channels-first (keras-io's
super_resolution_sub_pixel: ``outputs = tf.nn.depth_to_space(x, upscale_factor)``): TensorFlow splits the channels
as (r, r, C), torch's pixel_shuffle as (C, r, r), so it is written out as an unflatten/permute that is exact; the
block size a literal or a builder parameter (read from the module in forward). (Keras 2 code: Keras 3 refuses a
TensorFlow function on a KerasTensor.)"""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors
from runners import Warm

# reduced from keras-io vision/super_resolution_sub_pixel.py (get_model), with 3 channels so that the order of
# the channels the block is taken from shows
SRC = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


def get_model(upscale_factor=3, channels=3):
    inputs = keras.Input(shape=(None, None, channels))
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(inputs)
    x = layers.Conv2D(channels * (upscale_factor**2), 3, padding="same")(x)
    outputs = tf.nn.depth_to_space(x, upscale_factor)
    y = layers.Conv2D(12, 1)(inputs)
    y = tf.nn.depth_to_space(y, block_size=2)
    y = layers.Conv2D(2, 1)(y)
    return keras.Model(inputs, [outputs, y])
'''


def _tx(src: str):
    return translate_source(src, "m.py", "tf2torch", {"keras": 2})


def test_depth_to_space_is_written_out_exactly_in_a_channels_first_model(tmp_path):
    r = _tx(SRC)
    assert not _errors(r), _errors(r)
    out = r.output
    assert ("outputs = x.unflatten(1, (self.upscale_factor, self.upscale_factor, -1)).permute(0, 3, 4, 1, 5, 2)"
            ".flatten(4, 5).flatten(2, 3)") in out
    assert "y.unflatten(1, (2, 2, -1))" in out and "nn.Conv2d(3, 2, 1)" in out  # 12 channels / 2**2 after it
    assert "pixel_shuffle" not in out and "tf." not in out.split("class ")[1]
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "get_model()",
                          inputs=["float32[2,5,7,3]"], checks=("forward", "grad"), device="cpu", keras=2), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


@pytest.mark.parametrize("call,why", [
    ("tf.nn.depth_to_space(y, 2, data_format='NCHW')", "only NHWC"),
    ("tf.nn.depth_to_space(y, 2 if y is None else 3)", "block_size="),
])
def test_depth_to_space_that_cannot_be_written_out_is_refused(call, why):
    errors = _errors(_tx(SRC.replace("tf.nn.depth_to_space(y, block_size=2)", call)))
    assert any(why in e for e in errors), errors
    assert any("left as written" in e for e in errors), errors
