"""evaluate of a model ``keras.models.load_model("path")`` gives back where the file saved a model it compiled there
itself (issue 9, tf2torch: the TF docs' regression / save_and_load notebooks, keras-io). ``model.save(path)`` becomes
``torch.save(model, path)`` and load_model ``torch.load(path, weights_only=False)``, the whole module; Keras's file
also holds the compile (loss, metrics), which load_model restores, so the loaded model's evaluate computes them: the
written evaluate with that compile's loss and metrics (a model factory's model too, where the name is bound again
elsewhere: the factory call the save sees). Anything else (a path given by a name, saved twice, a
model compiled again) keeps the error that fwport does not know the loaded model's compile (a ModelCheckpoint's file:
tests/test_fit_checkpoint_evaluate.py).

Numbers: a model trained two epochs, saved, loaded and evaluated by Keras and by its translation from the same weights
on fixed data (subprocesses, TensorFlow unimportable on the torch side): the loaded model's evaluate equals the
trained model's on each side, and the translation's equals Keras's.
"""
from __future__ import annotations

import numpy as np
import pytest

from dense_setup import driver
from test_fit_callbacks import _run, errors, tx

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers
from setup import x, y, start

model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8, activation="tanh"),
                          layers.Dense(3, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
start(model)
model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
before = model.evaluate(x, y, verbose=0)
model.save("trained.keras")
reloaded = keras.models.load_model("trained.keras")
after = reloaded.evaluate(x, y, verbose=0)
'''

DRIVER = driver(7, '''from model import before, after
print("RESULT " + json.dumps({"before": [float(v) for v in before], "after": [float(v) for v in after]}))
''')


FACTORY = '''
from tensorflow import keras
from tensorflow.keras import layers
from setup import x, y, start


def build_and_compile():
    model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8, activation="tanh"),
                              layers.Dense(3, activation="softmax")])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


dnn = build_and_compile()
start(dnn)
dnn.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
before = dnn.evaluate(x, y, verbose=0)
dnn.save("trained.keras")
reloaded = keras.models.load_model("trained.keras")
after = reloaded.evaluate(x, y, verbose=0)
'''


# the TF docs' save_and_load notebook: each cell makes a fresh model of the factory, one of them saved and loaded
FACTORY_AGAIN = FACTORY.replace("dnn = build_and_compile()\n", """dnn = build_and_compile()
dnn.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0)
dnn = build_and_compile()
""")


@pytest.mark.parametrize("src", [SOURCE, FACTORY, FACTORY_AGAIN], ids=["module", "factory", "factory-again"])
def test_the_loaded_model_evaluates_as_keras(tmp_path, src):
    keras_out, torch_out = _run(tmp_path, src, DRIVER)
    for side in (keras_out, torch_out):
        assert len(side["after"]) == 2  # [loss, accuracy]
        np.testing.assert_allclose(side["after"], side["before"], rtol=1e-6)
    np.testing.assert_allclose(torch_out["after"], keras_out["after"], rtol=2e-4, atol=1e-6)
    assert 0 < keras_out["after"][1] < 1  # (the accuracy is not trivially 0 or 1)


def test_the_translation_evaluates_with_the_saved_models_loss():
    r = tx(SOURCE)
    assert errors(r) == []
    assert 'reloaded = torch.load("trained.keras", weights_only=False)' in r.output
    assert "after = evaluate(reloaded, loss_fn, x, y, verbose=0)" in r.output
    # a factory's model: the loss its caller binds beside the saved model's name
    assert "after = evaluate(reloaded, dnn_loss_fn, x, y, verbose=0)" in tx(FACTORY).output
    # bound again: the factory call the save sees
    assert "after = evaluate(reloaded, dnn_loss_fn, x, y, verbose=0)" in tx(FACTORY_AGAIN).output


def _refused(src: str) -> list:
    r = tx(src)
    return [f.message for f in r.findings if f.severity.name == "ERROR" and "reloaded.evaluate" in f.message]


def test_another_saving_keeps_the_error():
    for src in (SOURCE.replace('model.save("trained.keras")', 'path = "trained.keras"\nmodel.save(path)').replace(
                    'load_model("trained.keras")', "load_model(path)"),  # a path given by a name
                SOURCE.replace('model.save("trained.keras")',
                               'model.save("trained.keras")\nother = keras.Sequential([layers.Dense(2)])\n'
                               'other.save("trained.keras")'),  # two models saved there
                SOURCE.replace("start(model)", "start(model)\nmodel.compile(optimizer='adam', loss='mse')"),
                # a factory's model compiled again before the save
                FACTORY_AGAIN.replace("start(dnn)", "start(dnn)\ndnn.compile(optimizer='adam', loss='mse')"),
                # another model compiled after the save (its loss may take the names the evaluate reads)
                FACTORY_AGAIN.replace("reloaded = keras.models.load_model",
                                      "other = keras.Sequential([layers.Dense(3)])\n"
                                      "other.compile(optimizer='adam', loss='mse')\nreloaded = keras.models.load_model"),
                ):
        assert _refused(src), src
