"""``layers.Lambda(fn)([a, b])`` in a functional model (keras-io's siamese networks: the euclidean distance of
two towers): the Lambda module called on the list, the function translated where it is defined; the layers
after it are lazy (its output's shape is not known). Checked against Keras with ``fwport verify``."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

SIAMESE = '''
import tensorflow as tf
import keras
from keras import layers


def euclidean_distance(vects):
    x, y = vects
    sum_square = tf.math.reduce_sum(tf.math.square(x - y), axis=1, keepdims=True)
    return tf.math.sqrt(tf.math.maximum(sum_square, keras.backend.epsilon()))


def build():
    input_1 = layers.Input((6,))
    input_2 = layers.Input((6,))
    dense = layers.Dense(4, activation="tanh")
    tower_1 = dense(input_1)
    tower_2 = dense(input_2)
    merge_layer = layers.Lambda(euclidean_distance)([tower_1, tower_2])
    normal_layer = layers.BatchNormalization()(merge_layer)
    output_layer = layers.Dense(1, activation="sigmoid")(normal_layer)
    return keras.Model(inputs=[input_1, input_2], outputs=output_layer)
'''

STACKED = '''
import keras
from keras import layers


def build():
    a = keras.Input(shape=(5,))
    b = keras.Input(shape=(5,))
    x = layers.Dense(3)(a)
    y = layers.Dense(3)(b)
    joined = layers.Lambda(lambda t: t[0] * t[1] + t[0])((x, y))
    return keras.Model([a, b], layers.Dense(2)(joined))
'''


def _translate(src: str) -> str:
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    return r.output


def test_the_lambda_module_is_called_on_the_list():
    out = _translate(SIAMESE)
    assert "merge_layer = self.fn([tower_1, tower_2])" in out, out
    assert "def euclidean_distance(vects):\n    x, y = vects\n    sum_square = torch.sum(" in out, out
    assert "joined = self.fn((x, y))" in _translate(STACKED)


def test_a_lambda_on_a_list_of_a_non_tensor_is_refused():
    src = SIAMESE.replace("([tower_1, tower_2])", "([tower_1, 2.0])")
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    errors = [f.message for f in r.findings if f.severity.value == "error"]
    assert any(m.startswith("2.0: not a tensor of the functional model") for m in errors), errors
    assert any(m.startswith("this functional model is left as written") for m in errors), errors


@pytest.mark.parametrize("src", [SIAMESE, STACKED], ids=["siamese", "lambda-on-tuple"])
def test_it_computes_what_keras_computes(session, tmp_path, src):
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify

    src = textwrap.dedent(src).lstrip("\n")
    shape = "6" if "(6,)" in src else "5"
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(_translate(src))
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build",
                          inputs=[f"float32[4,{shape}]", f"float32[4,{shape}]"], checks=("forward", "grad"),
                          device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems")
