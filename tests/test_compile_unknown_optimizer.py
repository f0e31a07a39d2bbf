"""A compile whose optimizer= fwport does not follow says what it is (training._unknown_optimizer): a class of the
file (keras-io's gradient_centralization GCRMSprop), an optimizer without a torch counterpart (TensorFlow Addons'
LAMB: barlow_twins, perceiver), a function's parameter (keras_tuner's keras_code(units, optimizer, ...)), what a
function of the file returns. Each stays the compile's error (the loop is not written), now with that detail."""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from helpers import error_messages

HEAD = '''import numpy as np
from tensorflow import keras

x = np.zeros((8, 3), "float32")
y = np.zeros((8, 1), "float32")
'''


def _compile_error(src: str) -> str:
    messages = [m for m in error_messages(translate_source(HEAD + src, "f.py")) if ".compile(...)" in m]
    assert messages, error_messages(translate_source(HEAD + src, "f.py"))
    return messages[0]


def test_a_class_of_the_file():
    m = _compile_error('''
class Centralized(keras.optimizers.RMSprop):
    pass


optimizer = Centralized(learning_rate=1e-3)
model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
model.compile(optimizer=optimizer, loss="mse")
model.fit(x, y)
''')
    assert "optimizer is Centralized(...), a class of the file, which fwport has no torch optimizer for" in m, m


def test_an_addons_optimizer_without_a_rule():
    m = _compile_error('''import tensorflow_addons as tfa

model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
model.compile(optimizer=tfa.optimizers.LAMB(learning_rate=1e-3), loss="mse")
model.fit(x, y)
''')
    assert "(tfa.optimizers.LAMB(...), which fwport has no torch optimizer for" in m, m


def test_a_function_parameter():
    m = _compile_error('''
def train(units, optimizer):
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(units)])
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(x, y)


train(1, keras.optimizers.Adam())
''')
    assert "optimizer is a parameter of train(), whose callers' values fwport does not follow" in m, m


def test_what_a_function_returns():
    m = _compile_error('''
def make_optimizer():
    return keras.optimizers.Adam(1e-3)


optimizer = make_optimizer()
model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
model.compile(optimizer=optimizer, loss="mse")
model.fit(x, y)
''')
    assert "optimizer is what make_optimizer() returns, which fwport does not follow into the compile" in m, m
