"""A builder statement applying a layer or not by a conditional expression (keras-io's cait / deit:
``x = LayerScale(init_values, dim)(x) if init_values else x``, ``StochasticDepth(p)(x) if p else x``) is the
``if`` statement it means: decided where the model is built when the file gives the builder one value (pinned),
kept in the class (``__init__`` and ``forward``) when it gives several. Each variant is checked against Keras
by ``fwport verify`` (weights moved by name). A test fwport cannot follow leaves the statement refused."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_findings as _errors
from runners import Warm

SRC = '''
import tensorflow as tf
import keras
from keras import layers


class LayerScale(layers.Layer):
    def __init__(self, init_values, projection_dim, **kwargs):
        super().__init__(**kwargs)
        self.gamma = self.add_weight(shape=(projection_dim,), initializer="ones")
        self.init_values = init_values

    def call(self, x):
        return x * self.gamma * self.init_values


def block(dim, init_values, drop_rate):
    inputs = keras.Input((5, dim))
    x = layers.Dense(dim)(inputs)
    x = (
        LayerScale(init_values, dim)(x)
        if init_values
        else x
    )
    y = layers.Dropout(drop_rate)(x) if drop_rate else layers.Dense(dim)(x)
    outputs = layers.Add()([inputs, y])
    return keras.Model(inputs, outputs)


scaled = block(8, 0.5, 0.1)
plain = block(8, 0.0, 0.0)
'''

ONE = SRC.replace("plain = block(8, 0.0, 0.0)\n", "")


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def test_a_conditional_layer_on_parameters_given_several_values_is_kept_in_the_class():
    r = _tx(SRC)
    assert not _errors(r), r.findings
    assert ("        if init_values:\n            self.layer_scale = LayerScale(init_values, dim)\n"
            "        if drop_rate:\n            self.dropout = nn.Dropout(drop_rate)\n        else:\n"
            "            self.fc2 = nn.LazyLinear(dim)\n") in r.output  # (after a layer class: size unknown)
    assert ("        if self.init_values:\n            x = self.layer_scale(x)\n"
            "        if self.drop_rate:\n            y = self.dropout(x)\n        else:\n"
            "            y = self.fc2(x)\n        outputs = inputs + y\n") in r.output
    kept = [f for f in r.findings if f.code == "if-kept"]
    assert [f.line for f in kept] == [20, 25]  # (at the statements as written)


def test_a_conditional_layer_on_a_pinned_value_is_decided_where_the_model_is_built():
    r = _tx(ONE)
    assert not _errors(r), r.findings
    assert "if init_values:" not in r.output and "if self." not in r.output
    assert "if init_values != 0.5:\n            raise ValueError" in r.output  # (pinned: built for that value)
    assert "        x = self.layer_scale(x)\n        y = self.dropout(x)\n" in r.output
    assert "self.fc2" not in r.output  # (the branch Keras does not build)
    decided = [f.message for f in r.findings if f.code == "if-decided"]
    assert len(decided) == 2 and "`if init_values:`" in decided[0] and "`if drop_rate:`" in decided[1]


@pytest.mark.parametrize("src, model", [(SRC, "block(8, 0.5, 0.1)"), (SRC, "block(8, 0.0, 0.0)"),
                                        (ONE, "block(8, 0.5, 0.1)")])
def test_each_variant_computes_what_keras_does(tmp_path, src, model):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(_tx(src).output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[4,5,8]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    grads = {e["name"]: e["source"] for e in cert["results"]["gradients"]}
    # the first Dense; LayerScale's gamma where init_values; the second Dense where no dropout
    assert len(grads) == (3 if "0.5" in model else 4), grads
    if "0.5" in model:
        assert any(k.endswith("gamma") for k in grads), grads


def test_a_test_on_a_value_computed_in_the_builder_stays_refused():
    r = _tx(SRC.replace("        if init_values\n", "        if x.shape[-1] > 4\n"))
    errs = [f.message for f in _errors(r)]
    assert any("this functional model is left as written" in m for m in errs), errs
    assert any("this operation on tensors of the functional model is not followed" in m for m in errs), errs
    assert "class Block" not in r.output


HELPER = '''
import keras
from keras import layers


def block(x, units, rate):
    x = layers.Dense(units)(x)
    x = layers.Dropout(rate)(x) if rate else x
    y = layers.LayerNormalization()(x) if units > 4 else layers.Dense(units)(x)
    return y


def build():
    inputs = keras.Input((6,))
    x = block(inputs, 8, 0.1)
    x = block(x, 4, 0.0)
    outputs = layers.Dense(2)(x)
    return keras.Model(inputs, outputs)
'''


def test_a_helpers_conditional_layer_on_literal_arguments_takes_its_branch_and_computes_what_keras_does(tmp_path):
    r = _tx(HELPER)
    assert not _errors(r), r.findings
    # block(inputs, 8, 0.1): Dropout and LayerNormalization; block(x, 4, 0.0): no Dropout, the Dense
    assert ("        x = self.fc1(x)\n        x = self.dropout(x)\n        y = self.norm(x)\n") in r.output
    assert ("        x = self.fc1(x)\n        y = self.fc2(x)\n        return y\n") in r.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(HELPER)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[4,6]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert len(cert["results"]["gradients"]) == 10  # (four Dense and a LayerNorm, two weights each)


def test_a_helpers_conditional_layer_on_a_tensor_stays_refused():
    r = _tx(HELPER.replace("if rate else x", "if x.shape[0] else x"))  # (the batch size: unknown)
    errs = [f.message for f in _errors(r)]
    assert any("this functional model is left as written" in m for m in errs), errs
    assert any("if x.shape[0] else x" in m for m in errs), errs
