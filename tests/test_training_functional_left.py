"""The training code of a functional model the functional pass leaves as written (issue 9): the model stays a Keras
object, so its compile / fit / evaluate / predict stay Keras code, each with an error saying so, instead of a torch
loop over a model that has no parameters() (the training pass runs before the functional pass and asks it which
models it leaves, functional.refused_model_calls). A model that is translated keeps its written-out loop."""
from __future__ import annotations

from test_fit_callbacks import errors, tx

LEFT = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(10,))
h = layers.Dense(16, activation="tanh")(inputs)
print(h)
outputs = layers.Dense(3)(h)
model = keras.Model(inputs, outputs)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
x = np.zeros((8, 10), "float32")
y = np.zeros(8, "int64")
model.fit(x, y, epochs=2)
p = model.predict(x)
'''

WHY = "model is a functional model fwport leaves as written (the errors at its keras.Model(...) say why)"


def test_the_training_code_of_a_model_left_as_written_stays_keras_code():
    r = tx(LEFT)
    errs = errors(r)
    assert any(m.startswith("this functional model is left as written") for _, m in errs), errs
    for method in ("compile", "fit", "predict"):
        assert any(m.startswith(f"model.{method}(...) is a Keras model method, left as written: ") and WHY in m
                   for _, m in errs), (method, errs)
    assert not any("nn.Module, which has none" in m for _, m in errs), errs  # there is no translated model
    out = r.output
    assert "model.compile(optimizer=\"adam\"" in out and "model.fit(x, y, epochs=2)" in out
    assert "p = model.predict(x)" in out
    assert "= torch.optim" not in out and "def fit(" not in out and "def predict(" not in out


def test_a_builder_whose_model_is_left_leaves_its_callers_training_code():
    src = LEFT.replace('''inputs = keras.Input(shape=(10,))
h = layers.Dense(16, activation="tanh")(inputs)
print(h)
outputs = layers.Dense(3)(h)
model = keras.Model(inputs, outputs)
''', '''def build():
    inputs = keras.Input(shape=(10,))
    h = layers.Dense(16, activation="tanh")(inputs)
    print(h)
    outputs = layers.Dense(3)(h)
    return keras.Model(inputs, outputs)


model = build()
''')
    r = tx(src)
    errs = errors(r)
    assert any(m.startswith("model.fit(...) is a Keras model method") and WHY in m for _, m in errs), errs
    assert "= torch.optim" not in r.output and "def fit(" not in r.output


def test_a_translated_functional_model_keeps_its_loop():
    r = tx(LEFT.replace("print(h)\n", ""))
    assert errors(r) == [], errors(r)
    assert "optimizer = torch.optim.Adam(model.parameters()" in r.output
    assert "fit(model, optimizer, loss_fn, x, y, epochs=2)" in r.output and "p = predict(model, x)" in r.output


def test_a_model_rebound_after_the_left_one_is_trained_by_the_loop():
    src = LEFT.replace("model.compile(", '''model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(3)])
model.compile(''')
    r = tx(src)
    assert not any(WHY in m for _, m in errors(r)), errors(r)
    assert "fit(model, optimizer, loss_fn, x, y, epochs=2)" in r.output


MULTI = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(10,))
h = layers.Dense(16, activation="tanh")(inputs)
a = layers.Dense(3, name="a")(h)
b = layers.Dense(1, name="b")(h)
model = keras.Model(inputs, [a, b])
model.compile(optimizer="adam", loss=["sparse_categorical_crossentropy", "mse"], loss_weights=[1.0, 0.5])
'''


def test_losses_per_output_are_translated_or_refused_precisely():
    # a functional model of named outputs: a loss per output (tests/test_fit_multi_output.py measures the loops)
    out = tx(MULTI).output
    assert 'loss_fn = {"a": nn.CrossEntropyLoss(), "b": nn.MSELoss()}' in out
    src = MULTI.replace('loss=["sparse_categorical_crossentropy", "mse"]',
                        'loss={"a": "sparse_categorical_crossentropy", "b": "mse"}')
    assert 'loss_fn = {"a": nn.CrossEntropyLoss(), "b": nn.MSELoss()}' in tx(src).output
    # a model whose outputs fwport does not read (a subclass): the refusal gives Keras's sum
    src = MULTI.replace("model = keras.Model(inputs, [a, b])", "model = Two()").replace("inputs = keras.Input", """

class Two(keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = layers.Dense(3)

    def call(self, x):
        return self.fc(x), self.fc(x)


inputs = keras.Input""")
    errs = errors(tx(src))
    assert any(m.startswith("model.compile(...) is a Keras model method") and "loss=[...] gives a loss per output"
               in m and "times its loss_weights= factor" in m for _, m in errs), errs
    src = src.replace('loss=["sparse_categorical_crossentropy", "mse"]', 'loss="mse"')
    # one loss for the subclass's two outputs: Keras gives it to each output (tests/test_subclass_several_outputs_compile.py)
    assert any("call returns several outputs" in m and "loss_weights=" in m for _, m in errors(tx(src))), errors(tx(src))


def test_a_fit_of_a_model_from_a_factory_whose_compile_is_left_says_why():
    src = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers


def build():
    model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(3)])
    model.compile(optimizer="adam", loss=some_loss)
    return model


m = build()
m.fit(np.zeros((4, 10)), np.zeros(4), epochs=1)
'''
    errs = errors(tx(src))
    assert any(m.startswith("m.fit(...) is a Keras model method") and "m comes from build(), whose compile is left "
               "as written (loss= is neither a Keras name nor a Keras loss object" in m for _, m in errs), errs


def test_a_fit_of_a_loaded_model_says_how_to_get_its_loop():
    src = '''
import numpy as np
from tensorflow import keras

reloaded = keras.models.load_model("model.keras")
reloaded.fit(np.zeros((4, 10)), np.zeros(4), epochs=1)
'''
    errs = errors(tx(src))
    assert any(m.startswith("reloaded.fit(...) is a Keras model method") and "reloaded comes from "
               "keras.models.load_model(...), which gives back the model compiled with the optimizer and loss it was "
               "saved with" in m and "compile reloaded again in the file" in m for _, m in errs), errs
