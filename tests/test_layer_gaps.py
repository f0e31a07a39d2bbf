"""Issue 8's functional-API and layer gaps (task lay18): each construct translated exactly, checked against
Keras, or an explicit finding.

- a layer without a rule that reads the features of a channels-first Flatten in a Sequential;
- ``model.get_layer(...)`` on a translated model;
- ``tf.random.Generator.from_seed(s)`` and its draws.
"""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")


def tr(src: str, **opts):
    return translate_source(textwrap.dedent(src).lstrip("\n"), PACK, **opts)


def codes(result, severity=None):
    return [f.code for f in result.findings if severity is None or f.severity == severity]


def messages(result, severity=None):
    return [f.message for f in result.findings if severity is None or f.severity == severity]


# --- a layer without a rule after a channels-first Flatten --------------------------------------------

_UNKNOWN_AFTER_FLATTEN = '''
from tensorflow import keras
from tensorflow.keras import layers


class FirstHalf(keras.layers.Layer):
    """Order-dependent: keeps the first half of the features, scaled by their position."""

    def call(self, x):
        n = x.shape[-1] // 2
        return x[:, :n] * 2.0


def build():
    return keras.Sequential([
        keras.Input(shape=(6, 5, 3)),
        layers.Conv2D(4, 3),
        layers.Flatten(),
        FirstHalf(),
    ])
'''


def test_a_layer_without_a_rule_after_a_channels_first_flatten_sees_keras_order():
    """A layer of the file (no rule) reading the Flatten of a map converted to channels-first had received the
    features in torch's (c, h, w) order, silently: the Flatten now moves the channels last first (an info
    says why), and the output is Keras's, checked numerically on an order-dependent layer."""
    from conv_numerics import assert_close, compare_model
    src = textwrap.dedent(_UNKNOWN_AFTER_FLATTEN).lstrip("\n")
    r = tr(src)
    assert not codes(r, Severity.ERROR)
    assert "ChannelsLastReshape((-1,))" in r.output and "nn.Flatten()" not in r.output
    assert any("is read by FirstHalf, a layer fwport has no rule for" in m for m in messages(r, Severity.INFO))
    k, t = compare_model(src, r.output, "build()", (2, 6, 5, 3), layout_in="nchw", layout_out="same")
    assert k.shape == t.shape == (2, 24)
    assert_close(k, t, rtol=1e-5)


def test_a_dense_before_the_unknown_layer_keeps_nn_flatten():
    """A Dense between the Flatten and the layer without a rule reorders its kernel rows (exact already): the
    Flatten stays nn.Flatten(), and the unknown layer sees the Dense's outputs, which have no order to fix."""
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers
        from mylib import Mystery


        def build():
            return keras.Sequential([keras.Input(shape=(6, 5, 3)), layers.Conv2D(3, 3), layers.Flatten(),
                                     layers.Dense(8), Mystery()])
    ''')
    assert "nn.Flatten()" in r.output and "ChannelsLastReshape" not in r.output
    assert not any("no rule for" in m for m in messages(r))


def test_an_imported_layer_without_a_rule_after_the_flatten_is_not_silent():
    """An imported layer fwport does not know, at the end of a channels-first Sequential after a Flatten: the
    Flatten gives it Keras's order (an info names it), where it had been nn.Flatten() without a word."""
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers
        from mylib import Mystery


        def build():
            return keras.Sequential([keras.Input(shape=(6, 5, 3)), layers.Conv2D(3, 3), layers.Flatten(),
                                     layers.Dropout(0.2), Mystery()])
    ''')
    assert "ChannelsLastReshape((-1,))" in r.output and "nn.Flatten()" not in r.output
    assert any("is read by Mystery" in m for m in messages(r, Severity.INFO))
