"""A layer taken out of a translated model by the forms Keras code reaches it with — a name bound to
``model.get_layer("x")``, ``model.layers[k]`` of a functional model (negative too; Keras's list there holds the
InputLayer), ``m.get_layer(...)`` on a function's parameter every call gives one model — used for its weights
(frozen, get / set_weights, ``.kernel``, one layer's weights copied into another's): the torch module holding them, each weight in Keras's layout. Checked
against Keras by running both programs; and the forms fwport cannot give stay errors."""
from __future__ import annotations

import textwrap

import numpy as np

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), PACK)


def errors(result) -> list[str]:
    return [f.message for f in result.findings if f.severity == Severity.ERROR]


FORMS = '''
import numpy as np
import keras
from keras import layers


def build():
    inp = keras.Input(shape=(6, 6, 3))
    x = layers.Conv2D(4, 3, activation="relu", name="conv")(inp)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(5, activation="tanh", name="hidden")(x)
    out = layers.Dense(2, name="head")(x)
    return keras.Model(inp, out)


def freeze(m):
    m.get_layer("hidden").trainable = False
    return m.get_layer(name="hidden").get_weights()


rng = np.random.default_rng(0)
model = build()
conv = model.get_layer("conv")
conv.set_weights([rng.standard_normal((3, 3, 3, 4)), rng.standard_normal(4)])
conv_back = conv.get_weights()
head = model.layers[-1]
head.set_weights([rng.standard_normal((5, 2)), rng.standard_normal(2)])
model.layers[-2].set_weights([rng.standard_normal((4, 5)), rng.standard_normal(5)])
head_kernel = model.layers[-1].kernel
model.layers[1].trainable = False
hidden_back = freeze(model)
twin = build()
twin.get_layer("head").set_weights(model.get_layer("head").get_weights())
twin_head = twin.get_layer("head").get_weights()
'''


def test_layer_lookups_used_for_weights_compute_what_keras_computes():
    """Each form set weights (a Conv2D's HWIO kernel, Dense kernels), read them back, froze layers: the model's
    output, the arrays read back, the kernel read and each layer's trainable weights are Keras's."""
    from test_layer_gaps import _run
    r = tr(FORMS)
    assert not errors(r), errors(r)
    out = r.output
    assert "conv = model.conv\n" in out and "head = model.head\n" in out and "get_layer" not in out
    assert "model.conv.requires_grad_(False)" in out and "m.hidden.requires_grad_(False)" in out
    assert ".layers" not in out
    assert "twin.head.load_state_dict(model.head.state_dict())" in out
    x = "np.random.default_rng(1).standard_normal((2, 6, 6, 3)).astype('float32')"
    keras_tail = f'''
import json
x = {x}
print(json.dumps({{"y": np.asarray(model(x)).tolist(), "conv": [a.tolist() for a in conv_back],
                  "hidden": [a.tolist() for a in hidden_back], "kernel": np.asarray(head_kernel).tolist(),
                  "twin": [a.tolist() for a in twin_head],
                  "trainable": [len(l.trainable_weights) for l in model.layers]}}))
'''
    torch_tail = f'''
import json
x = torch.as_tensor({x})
mods = [None, model.conv, model.gap, model.hidden, model.head]
print(json.dumps({{"y": model(x).detach().numpy().tolist(), "conv": [a.tolist() for a in conv_back],
                  "hidden": [a.tolist() for a in hidden_back], "kernel": head_kernel.detach().numpy().tolist(),
                  "twin": [a.tolist() for a in twin_head],
                  "trainable": [0 if m is None else sum(p.requires_grad for p in m.parameters()) for m in mods]}}))
'''
    k = _run("keras", textwrap.dedent(FORMS), keras_tail)
    t = _run("torch", out, torch_tail)
    np.testing.assert_allclose(np.array(t["y"]), np.array(k["y"]), rtol=1e-5, atol=1e-5)
    for key in ("conv", "hidden", "twin"):
        assert len(t[key]) == len(k[key]) == 2
        for a, b in zip(t[key], k[key]):
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.array(t["kernel"]), np.array(k["kernel"]), rtol=1e-6, atol=1e-6)
    assert t["trainable"] == k["trainable"] == [0, 0, 0, 0, 2]


def test_layer_lookups_fwport_cannot_give_stay_errors():
    """A bound layer also called (the module holding a Dense's weights is not the layer: its activation is in
    forward), the InputLayer's weights, an index past Keras's list, a parameter two calls give different models:
    each an error, left as written."""
    r = tr('''
        import keras
        from keras import layers


        def build():
            inp = keras.Input(shape=(6,))
            x = layers.Dense(5, activation="tanh", name="hidden")(inp)
            out = layers.Dense(2, name="head")(x)
            return keras.Model(inp, out)


        def other():
            inp = keras.Input(shape=(6,))
            out = layers.Dense(2, name="hidden")(inp)
            return keras.Model(inp, out)


        def freeze(m):
            m.get_layer("hidden").trainable = False


        model = build()
        hidden = model.get_layer("hidden")
        y = hidden(model.input)
        w0 = model.layers[0].get_weights()
        w9 = model.layers[9].get_weights()
        freeze(model)
        freeze(other())
    ''')
    errs = errors(r)
    out = r.output
    assert 'hidden = model.get_layer("hidden")' in out
    assert sum("fwport does not know this layer as one module of the translation holding its weights (an "
               "InputLayer" in m for m in errs) == 2, errs
    assert "w0 = model.layers[0].get_weights()" in out and "w9 = model.layers[9].get_weights()" in out
    assert 'm.get_layer("hidden").requires_grad_(False)' in out
    assert sum("m.get_layer(...) is a Keras model method" in m and "(m is a parameter of freeze(), and the calls "
               "of it in this file give it models of different layers" in m for m in errs) == 1, errs
    assert sum("model.get_layer(...) is a Keras model method" in m and "the layer is used here as more than its "
               "weights" in m for m in errs) == 1, errs


SEQUENTIAL = '''
import numpy as np
import keras
from keras import layers


def make():
    return keras.Sequential([keras.Input((6,)), layers.Dense(4, activation="relu", name="a"), layers.Dense(3),
                             layers.Dense(2)])


m = make()
m.layers[1].trainable = False
m.layers[0].set_weights([np.linspace(-1, 1, 24).reshape(6, 4), np.array([0.1, -0.2, 0.3, 0.0])])
m.layers[-2].set_weights([np.linspace(1, -1, 12).reshape(4, 3), np.zeros(3)])
m.layers[-1].set_weights([np.arange(6.0).reshape(3, 2), np.array([0.5, -0.5])])
first = m.layers[0].get_weights()
'''


def test_layers_index_of_a_builders_sequential_is_keras_list_without_the_input():
    """``m.layers[k]`` of a Sequential a builder returns: Keras's list has no InputLayer and counts a Dense with its
    activation as one layer (the torch entries m[0], m[1] ReLU, m[2], m[3]); a negative index counts from its end.
    The frozen layers, the arrays read and the output after set_weights are Keras's."""
    from test_layer_gaps import _run
    r = tr(SEQUENTIAL)
    assert not errors(r), errors(r)
    out = r.output
    assert "m[2].requires_grad_(False)" in out and "m[3].weight.copy_(" in out and ".layers" not in out
    x = "np.linspace(-1, 1, 12).reshape(2, 6).astype('float32')"
    keras_tail = f'''
import json
print(json.dumps({{"y": np.asarray(m({x})).tolist(), "first": [a.tolist() for a in first],
                  "trainable": [len(l.trainable_weights) for l in m.layers]}}))
'''
    torch_tail = f'''
import json
print(json.dumps({{"y": m(torch.as_tensor({x})).detach().numpy().tolist(), "first": [a.tolist() for a in first],
                  "trainable": [sum(p.requires_grad for p in m[i].parameters()) for i in (0, 2, 3)]}}))
'''
    k = _run("keras", textwrap.dedent(SEQUENTIAL), keras_tail)
    t = _run("torch", out, torch_tail)
    assert t["trainable"] == k["trainable"] == [2, 0, 2]
    for a, b in zip(t["first"], k["first"]):
        np.testing.assert_array_equal(np.array(a), np.array(b))
    np.testing.assert_allclose(np.array(t["y"]), np.array(k["y"]), rtol=1e-5, atol=1e-6)
