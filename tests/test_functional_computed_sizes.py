"""A name bound in a builder or a helper to a number computed from known sizes of the model's tensors
(keras-io's mobilevit: ``num_patches = int((x.shape[1] * x.shape[2]) / patch_size)``; ``n = x.shape[1] * 2``)
is that number, as Keras computes it once from the symbolic shapes: written in place where it is read. Checked
against Keras by ``fwport verify``; a size not known where the model is built stays refused."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_findings as _errors
from runners import Warm

SRC = '''
import keras
from keras import layers

patch_size = 4


def block(x, projection_dim):
    local = layers.Conv2D(projection_dim, 1)(x)
    num_patches = int((local.shape[1] * local.shape[2]) / patch_size)
    y = layers.Reshape((patch_size, num_patches, projection_dim))(local)
    return layers.Dense(projection_dim)(y)


def build():
    inputs = keras.Input((8, 8, 3))
    x = block(inputs, 6)
    n = x.shape[1] * 2
    x = layers.Reshape((n, -1))(x)
    outputs = layers.Dense(2)(x)
    return keras.Model(inputs, outputs)


model = build()
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def test_a_number_computed_from_known_sizes_is_written_in_place():
    r = _tx(SRC)
    assert not _errors(r), r.findings
    assert "nn.Unflatten(1, (patch_size, 16, 6))" in r.output  # (8 * 8 / 4 in the helper)
    assert "nn.Unflatten(1, (8, 48))" in r.output  # (n = 4 * 2 in the builder; -1 is 48)
    assert "num_patches" not in r.output and "n = " not in r.output  # (computed where the model is built)


def test_it_computes_what_keras_does(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "t.py").write_text(_tx(SRC).output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[2,8,8,3]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert len(cert["results"]["gradients"]) == 6  # (the conv and the two Dense layers, kernel and bias each)


def test_a_size_not_known_where_the_model_is_built_stays_refused():
    r = _tx(SRC.replace("keras.Input((8, 8, 3))", "keras.Input((None, None, 3))"))
    errs = [f.message for f in _errors(r)]
    assert any("this functional model is left as written" in m for m in errs), errs
    assert any("int((" in m and "a size of a tensor of the model that fwport does not know" in m
               for m in errs), errs
    assert "class Build" not in r.output
