"""Weights set and read by hand on a translated model's layers: ``model.get_layer("conv").set_weights([k, b])``,
``get_weights()``, ``model.layers[-1].bias.assign(...)`` (a focal / imbalanced-data bias init), ``layer.kernel.assign``.

Keras hands the arrays over in its own order and layout (a Dense's kernel is (in, out), a Conv2D's HWIO); the
translation copies each into its torch parameter moved by the rule's weight map, and gives them back moved the other
way. Checked by running the program in Keras and its translation in torch: the same outputs, the same arrays read."""
from __future__ import annotations

import textwrap

import numpy as np

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from test_layer_gaps import _run

PACK = load_pack("tf2torch")


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), PACK)


def errors(result) -> list[str]:
    return [f.message for f in result.findings if f.severity == Severity.ERROR]


PROGRAM = '''
import numpy as np
import keras
from keras import layers


def build():
    inp = keras.Input(shape=(6, 6, 3))
    x = layers.Conv2D(4, (3, 2), name="conv")(inp)
    x = layers.BatchNormalization(name="bn")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(5, activation="relu", name="hidden")(x)
    out = layers.Dense(2, use_bias=False, name="head")(x)
    return keras.Model(inp, out)


model = build()
rng = np.random.default_rng(0)
model.get_layer("conv").set_weights([rng.standard_normal((3, 2, 3, 4)), rng.standard_normal(4)])
model.get_layer("bn").set_weights([rng.uniform(0.5, 1.5, 4), rng.standard_normal(4), rng.standard_normal(4),
                                   rng.uniform(0.5, 2.0, 4)])
hidden = [rng.standard_normal((4, 5)), rng.standard_normal(5)]
model.get_layer("hidden").set_weights(hidden)
model.get_layer(name="head").set_weights([rng.standard_normal((5, 2))])
model.get_layer("hidden").bias.assign(np.log([0.5, 1.0, 2.0, 3.0, 4.0]))
model.get_layer("hidden").kernel.assign(model.get_layer("hidden").kernel * 2.0)
conv_weights = model.get_layer("conv").get_weights()
head_weights = model.get_layer("head").get_weights()

seq = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(4, activation="relu"),
                        layers.Dense(1, activation="sigmoid")])
seq.layers[0].set_weights([rng.standard_normal((3, 4)), rng.standard_normal(4)])
seq.layers[-1].set_weights([rng.standard_normal((4, 1)), np.zeros(1)])
seq.layers[-1].bias.assign(np.log([3 / 10]))
last = seq.layers[-1].get_weights()
'''


def test_weights_set_and_read_by_layer_name_match_keras():
    """get_layer(name).set_weights of a Conv2D (HWIO → OIHW), a BatchNormalization (its moving statistics too), a
    Dense given a list held in a name, a Dense without bias; kernel / bias assigned through get_layer; a
    Sequential's model.layers[0] / [-1] set, and its last bias assigned: outputs and get_weights() equal Keras's."""
    r = tr(PROGRAM)
    assert not errors(r), errors(r)
    out = r.output
    assert ("with torch.no_grad():\n    model.conv.weight.copy_(torch.as_tensor(rng.standard_normal((3, 2, 3, 4)))"
            ".permute(3, 2, 0, 1))\n    model.conv.bias.copy_(torch.as_tensor(rng.standard_normal(4)))") in out
    assert "    model.hidden.weight.copy_(torch.as_tensor(hidden[0]).T)\n" in out
    assert "conv_weights = [model.conv.weight.permute(2, 3, 1, 0).detach().cpu().numpy()" in out
    assert "head_weights = [model.head.weight.T.detach().cpu().numpy()]" in out
    assert "seq[2].bias.data.copy_(" in out and "get_layer" not in out and ".layers" not in out
    tail = '''
import json
x = np.random.default_rng(1).standard_normal((2, 6, 6, 3)).astype("float32")
x2 = np.random.default_rng(2).standard_normal((3, 3)).astype("float32")
'''
    keras_tail = tail + '''
print(json.dumps({"out": np.asarray(model(x, training=False)).tolist(), "seq": np.asarray(seq(x2)).tolist(),
                  "conv": [w.tolist() for w in conv_weights], "head": [w.tolist() for w in head_weights],
                  "last": [w.tolist() for w in last]}))
'''
    torch_tail = tail + '''
model.eval()
with torch.no_grad():
    print(json.dumps({"out": model(torch.as_tensor(x)).numpy().tolist(), "seq": seq(torch.as_tensor(x2)).numpy().tolist(),
                      "conv": [w.tolist() for w in conv_weights], "head": [w.tolist() for w in head_weights],
                      "last": [w.tolist() for w in last]}))
'''
    k = _run("keras", textwrap.dedent(PROGRAM), keras_tail)
    t = _run("torch", out, torch_tail)
    for key in ("conv", "head", "last"):
        assert [np.shape(w) for w in t[key]] == [np.shape(w) for w in k[key]], key
        for a, b in zip(k[key], t[key]):
            np.testing.assert_allclose(np.array(b), np.array(a), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.array(t["out"]), np.array(k["out"]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.array(t["seq"]), np.array(k["seq"]), rtol=1e-5, atol=1e-6)
    assert abs(np.array(k["last"][1])[0] - np.log(0.3)) < 1e-6  # (the assigned bias, read back)


def test_weights_by_position_fwport_cannot_place_are_errors():
    """Too few arrays for the layer (Keras raises), a use_bias not known before run time, a Dense whose kernel rows
    a channels-first Flatten reorders, an LSTM's gates: each an error naming the line, the call left as written."""
    r = tr('''
        import numpy as np
        import keras
        from keras import layers

        use_bias = np.random.rand() > 0.5


        def build():
            inp = keras.Input(shape=(6, 6, 3))
            x = layers.Conv2D(4, 3, name="conv")(inp)
            y = layers.Flatten()(x)
            y = layers.Dense(3, use_bias=use_bias, name="odd")(y)
            z = layers.Reshape((16, 4))(x)
            z = layers.LSTM(2, name="rnn")(z)
            out = layers.Dense(2, name="flat")(layers.Concatenate()([y, z]))
            return keras.Model(inp, out)


        model = build()
        model.get_layer("conv").set_weights([np.zeros((3, 3, 3, 4))])
        model.get_layer("odd").set_weights([np.zeros((64, 3)), np.zeros(3)])
        w = model.get_layer("rnn").get_weights()
    ''')
    errs = errors(r)
    assert any('model.get_layer("conv")' in m and "1 array given to a layer of 2 (kernel, bias)" in m
               for m in errs), errs
    assert any('model.get_layer("odd")' in m and "use_bias=use_bias changes which weights the Dense has" in m
               for m in errs), errs
    assert any('model.get_layer("rnn")' in m and "not of a LSTM" in m for m in errs), errs
    code = [line for line in r.output.splitlines() if not line.lstrip().startswith("#")]
    assert sum("get_layer(" in line for line in code) == 3
    assert "torch.no_grad" not in r.output


ALIASED = '''
import numpy as np
import tensorflow as tf

model = tf.keras.Sequential([
    tf.keras.Input(shape=(5,), dtype="int32"),
    tf.keras.layers.Embedding(20, 4),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(3, activation="relu"),
    tf.keras.layers.Dense(1),
])
rng = np.random.default_rng(0)
e = model.layers[0]
e.set_weights([rng.standard_normal((20, 4))])
d = model.layers[2]
d.set_weights([rng.standard_normal((20, 3)), rng.standard_normal(3)])
model.layers[-1].set_weights([rng.standard_normal((3, 1)), rng.standard_normal(1)])
table = e.get_weights()[0]
kernel = d.get_weights()[0]
'''


def test_weights_of_a_layer_bound_to_a_name_from_model_layers_match_keras():
    """e = model.layers[0]; e.set_weights / e.get_weights(): the name holds the module with the layer's weights, and
    its arrays go in and come out in Keras's layout (the Dense kernel (in, out)): the same table, kernel and output."""
    r = tr(ALIASED)
    assert not errors(r), errors(r)
    assert "e = model[0]" in r.output and "kernel = [d.weight.T.detach().cpu().numpy()" in r.output
    tail = '''
import json
x = np.array([[1, 2, 3, 4, 19], [0, 5, 5, 7, 8]], dtype="int32")
'''
    keras_tail = tail + '''
print(json.dumps({"out": np.asarray(model(x)).tolist(), "table": table.tolist(), "kernel": kernel.tolist()}))
'''
    torch_tail = tail + '''
with torch.no_grad():
    print(json.dumps({"out": model(torch.as_tensor(x, dtype=torch.long)).numpy().tolist(), "table": table.tolist(),
                      "kernel": kernel.tolist()}))
'''
    k = _run("keras", textwrap.dedent(ALIASED), keras_tail)
    t = _run("torch", r.output, torch_tail)
    for key in ("table", "kernel"):
        np.testing.assert_allclose(np.array(t[key]), np.array(k[key]), rtol=1e-6, atol=1e-6)
    assert np.shape(t["kernel"]) == (20, 3)
    np.testing.assert_allclose(np.array(t["out"]), np.array(k["out"]), rtol=1e-5, atol=1e-5)
