"""A fit on a name bound again after its compile (training._rebound): the written loop would step the
optimizer made for the compiled model, whose parameters the model now bound does not share, so the
loaded model never trained. An error naming the binding; a compile after the binding translates."""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from helpers import error_messages

HEAD = '''import numpy as np
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
x = np.ones((8, 4), "float32"); y = np.ones((8, 1), "float32")
model.fit(x, y, epochs=1)
model.save("m.keras")
model = keras.models.load_model("m.keras")
'''


def test_a_fit_after_the_model_is_loaded_again_is_an_error():
    r = translate_source(HEAD + "model.fit(x, y, epochs=1)\n", "t.py")
    msgs = error_messages(r)
    assert any('model is bound again after the compile before this call (= keras.models.load_model("m.keras"))' in m
               for m in msgs), msgs
    assert [f.line for f in r.findings if "bound again" in f.message] == [10]


def test_inside_a_function_a_local_model_is_not_the_module_s_compiled_one():
    src = HEAD.replace('model = keras.models.load_model("m.keras")\n', "") + '''

def resume(path):
    model = keras.models.load_model(path)
    model.fit(x, y, epochs=1)
'''
    msgs = error_messages(translate_source(src, "t.py"))
    assert any("model is bound again after the compile" in m for m in msgs), msgs


def test_a_compile_after_the_binding_translates():
    r = translate_source(HEAD + 'model.compile(optimizer="adam", loss="mse")\nmodel.fit(x, y, epochs=1)\n', "t.py")
    assert not error_messages(r), error_messages(r)
    assert r.output.count(".parameters()") == 2  # one optimizer per compiled model


def test_predict_and_evaluate_of_the_loaded_model_translate():
    r = translate_source(HEAD + "model.evaluate(x, y)\nmodel.predict(x)\n", "t.py")
    assert not any("bound again" in m for m in error_messages(r))


FACTORY = '''import numpy as np
from tensorflow import keras


def make_model():
    m = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse")
    return m


x = np.ones((8, 4), "float32"); y = np.ones((8, 1), "float32")
model = make_model()
model.fit(x, y, epochs=1)
'''


def test_a_rebound_after_a_model_factory_s_compile_is_an_error():
    # the factory's optimizer and loss are bound beside the model it returns; a model bound after that is not it
    for again, line in (("model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])", 15),
                        ('model = keras.models.load_model("m.keras")', 15)):
        r = translate_source(FACTORY + again + "\nmodel.fit(x, y, epochs=1)\n", "t.py")
        msgs = error_messages(r)
        assert len(msgs) == 1 and "model is bound again after the compile before this call" in msgs[0], msgs
        assert [f.line for f in r.findings if "bound again" in f.message] == [line]
    # a new model from the factory: its own optimizer, translated
    r = translate_source(FACTORY + "model = make_model()\nmodel.fit(x, y, epochs=1)\n", "t.py")
    assert error_messages(r) == [], error_messages(r)
    assert r.output.count("model, model_optimizer, model_loss_fn = make_model()") == 2
