"""Keras helpers that a functional builder evaluates on numbers known where the model is built (keras-io's mobilevit
inverted_residual_block, the MobileNetV2 block): ``layers.ZeroPadding2D(padding=imagenet_utils.correct_pad(m, 3))``
is written as the padding correct_pad returns for ``m``'s spatial sizes (odd or even: the padding differs), and
``if tf.math.equal(x.shape[-1], output_channels) and strides == 1:`` is decided as ``==`` would be (was: "padding
must be a literal", "cannot be decided where the model is built"). Verified against Keras with the weights
transferred (forward and gradients)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors
from runners import Warm

SRC = '''
import tensorflow as tf
from keras.src.applications import imagenet_utils  # (Keras 3: correct_pad is not public)
from tensorflow import keras
from tensorflow.keras import layers


def inverted_residual_block(x, expanded_channels, output_channels, strides=1):
    m = layers.Conv2D(expanded_channels, 1, padding="same", use_bias=False)(x)
    m = layers.BatchNormalization()(m)
    m = layers.Activation("swish")(m)
    if strides == 2:
        m = layers.ZeroPadding2D(padding=imagenet_utils.correct_pad(m, 3))(m)
    m = layers.DepthwiseConv2D(3, strides=strides, padding="same" if strides == 1 else "valid", use_bias=False)(m)
    m = layers.BatchNormalization()(m)
    m = layers.Conv2D(output_channels, 1, padding="same", use_bias=False)(m)
    if tf.math.equal(x.shape[-1], output_channels) and strides == 1:
        return layers.Add()([m, x])
    return m


def build():
    inputs = keras.Input((SIZE, SIZE + 2, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    x = inverted_residual_block(x, expanded_channels=8, output_channels=4)
    x = inverted_residual_block(x, expanded_channels=8, output_channels=6, strides=2)
    x = inverted_residual_block(x, expanded_channels=12, output_channels=6, strides=2)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''


def _tx(src: str):
    return translate_source(src, "m.py", "tf2torch")


@pytest.mark.parametrize("size", [9, 10])
def test_correct_pad_and_tf_equal_are_computed_where_the_model_is_built_and_match_keras(tmp_path, size):
    src = SRC.replace("SIZE", str(size))
    r = _tx(src)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "correct_pad" not in out and "tf.math.equal" not in out, out
    # torch's ZeroPad2d takes (left, right, top, bottom); Keras's correct_pad pads 1 less before an even size
    first = "nn.ZeroPad2d(1)" if size % 2 else "nn.ZeroPad2d((0, 1, 0, 1))"  # SIZE x SIZE+2
    assert first in out and "nn.ZeroPad2d((0, 1, 1, 1))" in out, out  # then 5 x 6 either way
    assert out.count("return m + x") == 1, out  # the residual of the first block only (4 == 4, strides 1)
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()",
                          inputs=[f"float32[2,{size},{size + 2},3]"], checks=("forward", "grad"), device="cpu"),
                  Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_correct_pad_of_a_tensor_of_unknown_rank_stays_refused():
    src = SRC.replace("SIZE", "9").replace("imagenet_utils.correct_pad(m, 3)", "imagenet_utils.correct_pad(m, k)") \
        .replace("strides=1):\n", "strides=1, k=None):\n")
    errors = _errors(_tx(src))
    assert any("correct_pad" in e for e in errors), errors
    assert any("left as written" in e for e in errors), errors


def test_tf_equal_on_a_size_known_only_at_run_time_stays_refused():
    src = SRC.replace("SIZE", "9").replace('keras.Input((9, 9 + 2, 3))', 'keras.Input((9, 9 + 2, None))') \
        .replace('layers.Conv2D(4, 3, padding="same")(inputs)', "inputs")
    errors = _errors(_tx(src))
    assert any("`x.shape[-1]` cannot be decided" in e for e in errors), errors
    assert any("left as written" in e for e in errors), errors
