"""A layer class of this file whose call returns a literal tuple, unpacked in a functional model (keras-io cait:
``attn_output, attn_scores = ClassAttention(projection_dim, num_heads, dropout_rate)(x1)``, the scores an output of
the model): the forward unpacks what the translated module returns, as Keras's call gives it (was: the model left as
written, "fwport unpacks the tensors a helper returns"). Verified against Keras with the weights transferred (forward
and gradients of both outputs)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors
from runners import Warm

SRC = '''
import tensorflow as tf
import keras
from keras import layers


class Attn(layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.q = layers.Dense(units)
        self.k = layers.Dense(units)

    def call(self, x):
        scores = tf.nn.softmax(tf.matmul(self.q(x), self.k(x), transpose_b=True), axis=-1)
        return tf.matmul(scores, x), scores


def build():
    inputs = keras.Input(shape=(5, 4))
    x = layers.Dense(4)(inputs)
    attn_output, attn_scores = Attn(6)(x)
    x = layers.Add()([attn_output, x])
    out = layers.Dense(2)(x)
    return keras.Model(inputs, [out, attn_scores])
'''


def _tx(src: str):
    return translate_source(src, "m.py", "tf2torch", {"keras": 3})


def test_a_layer_class_s_tuple_is_unpacked_as_keras_unpacks_it(tmp_path):
    r = _tx(SRC)
    assert not _errors(r), _errors(r)
    assert "        attn_output, attn_scores = self.attn(x)\n" in r.output
    assert "        return out, attn_scores\n" in r.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[3,5,4]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert [o["ok"] for o in cert["results"]["outputs"]] == [True, True]  # the scores compared too


def test_a_tuple_of_another_length_stays_an_error():
    src = SRC.replace("attn_output, attn_scores = Attn(6)(x)", "attn_output, attn_scores, more = Attn(6)(x)")
    assert src != SRC
    errors = _errors(_tx(src))
    assert any("fwport unpacks the tensors a helper returns" in e for e in errors), errors


def test_a_layer_class_with_returns_of_several_shapes_stays_an_error():
    src = SRC.replace("        return tf.matmul(scores, x), scores\n",
                      "        if x.shape[-1] == 3:\n            return x\n        return tf.matmul(scores, x), scores\n")
    assert src != SRC
    errors = _errors(_tx(src))
    assert any("fwport unpacks the tensors a helper returns" in e for e in errors), errors


LAYER_SCALE = '''
import tensorflow as tf
import keras
from keras import layers


class LayerScale(layers.Layer):
    def __init__(self, init_values: float, projection_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.gamma = tf.Variable(init_values * tf.ones((projection_dim,)))

    def call(self, x, training=False):
        return x * self.gamma


def build():
    inputs = keras.Input(shape=(5, 4))
    x = layers.Dense(6)(inputs)
    x = LayerScale(0.1, 6)(x)
    return keras.Model(inputs, x)
'''


def test_a_layer_s_own_tf_variable_has_a_weight_record_verify_moves(tmp_path):
    """cait's LayerScale: ``self.gamma = tf.Variable(...)`` becomes the nn.Parameter ``gamma`` and gets a weight
    record (rule variable, "." to "."), so verify moves Keras's value into it (was: "torch parameters no weight map
    writes: layer_scale.gamma")."""
    r = _tx(LAYER_SCALE)
    assert not _errors(r), _errors(r)
    assert "self.gamma = nn.Parameter(" in r.output and ", requires_grad=False)" in r.output  # Keras 3: untrained
    assert sorted((w.scope, w.source, w.target) for w in r.layers if w.rule == "variable") == [
        ("LayerScale", "gamma", "gamma"), ("build", "layers[2].gamma", "layer_scale.gamma")]
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(LAYER_SCALE)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[3,5,4]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def _step(tmp_path, src: str, out: str, keras: int):
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    return verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[3,5,4]"],
                          checks=("forward", "grad", "step"), device="cpu", keras=keras), Warm.session())


def test_keras_3_does_not_train_a_layer_s_own_tf_variable(tmp_path):
    """Keras 3 tracks only its own variables (add_weight, keras.Variable): a raw ``tf.Variable`` attribute of a
    Layer is not in ``model.trainable_variables`` (nor trainable_weights, so fit leaves it alone): the translation's
    nn.Parameter gets requires_grad=False and one SGD step over the trainable variables (verify's step check, which
    updates Keras's ``model.trainable_variables``) moves the same weights on both sides (was: gamma trained by torch
    only, "step: layer_scale.gamma"). The same check fails on a translation that trains gamma."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    r = _tx(LAYER_SCALE)
    assert any("Keras 3 tracks only its own variables" in f.message for f in r.findings)
    cert = _step(tmp_path, LAYER_SCALE, r.output, 3)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    trained = r.output.replace(", requires_grad=False)", ")")
    assert trained != r.output
    cert = _step(tmp_path, LAYER_SCALE, trained, 3)
    assert cert["verdict"] != "pass" and "gamma" in str(cert.get("problems") or cert.get("first_diverging")), cert


LAYER_SCALE_2 = LAYER_SCALE.replace("import keras\nfrom keras import layers\n",
                                    "import tf_keras as keras\nfrom tf_keras import layers\n")


def test_keras_2_trains_a_layer_s_own_tf_variable(tmp_path):
    """tf_keras (Keras 2) tracks a tf.Variable attribute as a weight of the layer (trainable per its flag, and fit
    trains it): the translation keeps the trainable nn.Parameter, and one step moves gamma as Keras 2 does."""
    pytest.importorskip("torch")
    pytest.importorskip("tf_keras")
    assert LAYER_SCALE_2 != LAYER_SCALE
    r = translate_source(LAYER_SCALE_2, "m.py", "tf2torch", {"keras": 2})
    assert not _errors(r), _errors(r)
    gamma = [line for line in r.output.splitlines() if "self.gamma = " in line]
    assert gamma and "requires_grad=False" not in gamma[0], gamma
    assert not any("Keras 3 tracks only its own variables" in f.message for f in r.findings)
    cert = _step(tmp_path, LAYER_SCALE_2, r.output, 2)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    frozen = r.output.replace(gamma[0], gamma[0][:-1] + ", requires_grad=False)")
    cert = _step(tmp_path, LAYER_SCALE_2, frozen, 2)
    assert cert["verdict"] != "pass", cert


MHA_SCORES = '''
import keras
from keras import layers


def build():
    q = keras.Input(shape=(5, 8))
    v = keras.Input(shape=(7, 8))
    x, w = layers.MultiHeadAttention(num_heads=2, key_dim=4)(q, v, return_attention_scores=True)
    x = layers.Dense(3)(x)
    return keras.Model([q, v], [x, w])
'''


def test_attention_scores_unpacked_where_the_layer_is_called_are_its_second_output(tmp_path):
    """``x, w = MultiHeadAttention(...)(q, v, return_attention_scores=True)``: the module (KerasMultiHeadAttention)
    returns (output, scores) as Keras does; unpacked there, both are tensors of the model (was: refused)."""
    r = _tx(MHA_SCORES)
    assert not _errors(r), _errors(r)
    assert "        x, w = self.multi_head_attention(q, v, return_attention_scores=True)\n" in r.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(MHA_SCORES)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()",
                          inputs=["float32[2,5,8]", "float32[2,7,8]"], checks=("forward", "grad"), device="cpu",
                          keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert [o["ok"] for o in cert["results"]["outputs"]] == [True, True]  # the scores compared too


def test_attention_scores_not_unpacked_at_the_call_stay_an_error():
    src = MHA_SCORES.replace("    x, w = layers.MultiHeadAttention(num_heads=2, key_dim=4)(q, v, "
                             "return_attention_scores=True)\n",
                             "    both = layers.MultiHeadAttention(num_heads=2, key_dim=4)(q, v, "
                             "return_attention_scores=True)\n    x, w = both[0], both[1]\n")
    assert src != MHA_SCORES
    errors = _errors(_tx(src))
    assert any("return_attention_scores=True only where the call's two outputs are unpacked" in e
               for e in errors), errors
