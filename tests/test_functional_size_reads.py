"""A builder that reads static sizes of its tensors into names (keras-io's token_learner ``_, h, w, c =
projected_patches.shape``, wide_deep_cross_networks ``units = cross.shape[-1]``, mirnet ``channels =
list(x.shape)[-1]``): Keras gives ints there; where fwport knows them, each read below is written as its size (the
tensor exists only in forward) and the statement goes; a size it does not know (the batch axis, an unknown size),
or a name bound again where the substitution would not follow it, stays refused."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors
from runners import Warm

SRC = '''
from tensorflow import keras
from tensorflow.keras import layers


def squeeze_excite(x, ratio=2):
    channels = list(x.shape)[-1]
    s = layers.GlobalAveragePooling2D()(x)
    s = layers.Dense(channels // ratio, activation="relu")(s)
    s = layers.Dense(channels, activation="sigmoid")(s)
    return layers.Multiply()([x, layers.Reshape((1, 1, channels))(s)])


def build(num_classes=3):
    inputs = keras.Input(shape=(8, 6, 3))
    x = layers.Conv2D(4, 2, strides=2)(inputs)
    x = squeeze_excite(x)
    _, h, w, c = x.shape
    x = layers.Reshape((h * w * c,))(x)
    units = x.shape[-1]
    x = layers.Dense(units // 2)(x)
    _, n = x.shape
    x = layers.Reshape((n // 3, 3))(x)
    _, t, c = x.shape
    x = layers.Reshape((t * c,))(x)
    outputs = layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs)
'''


def _tx(src: str):
    return translate_source(src, "m.py", "tf2torch")


def test_sizes_read_from_tensors_are_written_in_and_match_keras(tmp_path):
    r = _tx(SRC)
    assert not _errors(r), _errors(r)
    out = r.output
    model = out.split("class Build")[1]
    assert "x.shape" not in model and "c = " not in model, model  # no read of a tensor __init__ does not have
    assert "ChannelsLastReshape((4 * 3 * 4,))" in out and "nn.Linear(48, 48 // 2)" in out
    assert "ChannelsLastReshape((8 * 3,))" in out  # the second `c`: the size bound again, not the first's
    assert "nn.Linear(2, 4)" in out  # the helper's list(x.shape)[-1]
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[2,8,6,3]"],
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


@pytest.mark.parametrize("read", [
    "    b = x.shape[0]\n    x = layers.Reshape((b,))(x)\n",  # the batch axis: None in Keras
    "    c = x.shape[-1]\n    for _ in range(2):\n        c = c * 2\n    x = layers.Dense(c)(x)\n",  # bound again in a loop
    "    c = x.shape[-1]\n    f = lambda y: y * c\n    x = layers.Lambda(f)(x)\n",  # read in a lambda
])
def test_a_size_read_that_cannot_be_written_in_stays_refused_and_nothing_is_half_translated(read):
    src = SRC.replace("    _, h, w, c = x.shape\n    x = layers.Reshape((h * w * c,))(x)\n",
                      read + "    x = layers.Flatten()(x)\n")
    r = _tx(src)
    errors = _errors(r)
    # (refused where it is read, or, after a layer whose output size is then unknown, as a size not known there)
    assert any(e.startswith("x.shape[") and ("not followed" in e or "does not know where the model is built" in e)
               for e in errors), errors
    assert any("left as written" in e for e in errors), errors
    body = r.output.split("def build")[1]
    assert "nn.Linear" not in body and "Reshape(" in body, r.output  # the builder stays Keras, all of it
