"""A builder fwport leaves as written (keras-io's melgan: tfa's WeightNormalization) leaves with it the
helpers it calls and the helpers those call (`conv_block` → `residual_stack`): their layer calls stay Keras
code with the model, instead of one error per layer saying it is not part of a model fwport follows. A
helper a translated model also calls is still that model's."""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

MELGAN = '''
import tensorflow_addons as tfa
from tensorflow import keras
from tensorflow.keras import layers


def residual_stack(x, filters):
    c1 = layers.Conv1D(filters, 3, padding="same")(x)
    lrelu1 = layers.LeakyReLU()(c1)
    return layers.Add()([lrelu1, x])


def conv_block(x, conv_dim):
    conv_t = tfa.layers.WeightNormalization(layers.Conv1D(conv_dim, 3, padding="same"))(x)
    return residual_stack(layers.LeakyReLU()(conv_t), conv_dim)


def create_generator():
    inp = keras.Input((16, 1))
    x = conv_block(inp, 8)
    x = layers.Conv1D(1, 7, padding="same")(x)
    return keras.Model(inp, x)


generator = create_generator()
'''

NOT_FOLLOWED = "this call is not part of a model fwport follows"


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 2})


def _errors(r) -> list[str]:
    return [f.message for f in r.findings if f.severity.value == "error"]


def test_the_helpers_of_a_model_left_as_written_are_left_with_it():
    r = _tx(MELGAN)
    errors = _errors(r)
    assert not any(NOT_FOLLOWED in m for m in errors), errors
    assert any(m.startswith("this functional model is left as written") for m in errors), errors
    # both helpers stay Keras code, as written
    assert 'c1 = layers.Conv1D(filters, 3, padding="same")(x)' in r.output
    assert 'conv_t = tfa.layers.WeightNormalization(layers.Conv1D(conv_dim, 3, padding="same"))(x)' in r.output


def test_a_nested_helper_a_translated_model_also_calls_is_its():
    src = MELGAN + '''

def create_small():
    inp = keras.Input((16, 4))
    return keras.Model(inp, residual_stack(inp, 4))


small = create_small()
'''
    r = _tx(src)
    assert "class Small(nn.Module):" in r.output, r.output
    assert not any(NOT_FOLLOWED in m for m in _errors(r)), _errors(r)
