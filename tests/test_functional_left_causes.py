"""Causes that left keras-io's functional models as written (issue 8), each now translated exactly and checked
against Keras: BatchNormalization(scale=False) (gan_ada's generator and discriminator: beta without gamma)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors

GAN_ADA = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

width = 6


def get_generator():
    noise_input = keras.Input(shape=(8,))
    x = layers.Dense(4 * 4 * width, use_bias=False)(noise_input)
    x = layers.BatchNormalization(scale=False)(x)
    x = layers.ReLU()(x)
    x = layers.Reshape(target_shape=(4, 4, width))(x)
    for _ in range(2):
        x = layers.Conv2DTranspose(width, kernel_size=4, strides=2, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization(scale=False)(x)
        x = layers.ReLU()(x)
    image_output = layers.Conv2DTranspose(3, kernel_size=4, strides=2, padding="same", activation="sigmoid")(x)
    return keras.Model(noise_input, image_output, name="generator")


shifted = keras.Sequential([keras.Input(shape=(6, 6, 3)), layers.Conv2D(4, 3),
                            layers.BatchNormalization(scale=False, momentum=0.9)])
'''


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def test_batch_norm_without_scale_keeps_a_shift_and_no_weight():
    r = _tx(GAN_ADA)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "self.bn1 = with_shift(nn.BatchNorm1d(4 * 4 * width, momentum=0.01, eps=0.001, affine=False))" in out
    assert out.count("with_shift(nn.BatchNorm2d(width, momentum=0.01, eps=0.001, affine=False))") == 2
    assert "with_shift(nn.BatchNorm2d(4, momentum=0.1, eps=0.001, affine=False))" in out
    ns: dict = {}
    exec(compile(out, "t.py", "exec"), ns)
    bn = ns["get_generator"]().bn1
    assert bn.weight is None and sorted(n for n, _ in bn.named_parameters()) == ["bias"]


def test_batch_norm_without_scale_computes_what_keras_does(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(GAN_ADA)
    (tmp_path / "t.py").write_text(_tx(GAN_ADA).output)
    for model, spec in (("get_generator", "float32[4,8]"), ("shifted", "float32[4,6,6,3]")):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=[spec],
                              checks=("forward", "grad", "step"), device="cpu", keras=3))
        # (a Keras variable no map moves, or a torch parameter none writes, is a problem: gamma must be absent)
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))
        assert cert["results"]["step"], model
