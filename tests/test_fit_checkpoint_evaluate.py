"""evaluate of a model ``keras.models.load_model(path)`` gives back where a ``keras.callbacks.ModelCheckpoint(path)`` of
``M.fit(...)`` in the same file wrote it (issue 9, tf2torch: Deep Learning with Python's chapter 8, both editions:
``test_model = keras.models.load_model("convnet_from_scratch.keras"); test_model.evaluate(test_dataset)``). The load
already becomes ``load_checkpointed(M, path)`` (a copy of M holding the file's weights); Keras's checkpoint saves the
whole model with its compile (loss, metrics), which load_model restores, so the loaded model's evaluate is the written
evaluate with the compile that fit trains with (the last compile of M before it). Where that fit's compile is left as
written, or a compile between the fit and the evaluate may bind its loss's name again, the evaluate's error says so; a load bound in another scope than the evaluate keeps the error that fwport does
not know the loaded model's compile.

Numbers: a model fit five epochs with a save_best_only checkpoint on val_loss, loaded back and evaluated by Keras and by
its translation from the same weights on fixed data (subprocesses, TensorFlow unimportable on the torch side): the
[loss, accuracy] agree, and they are the best epoch's model's, not the last epoch's.
"""
from __future__ import annotations

import numpy as np

from dense_setup import driver
from test_fit_callbacks import _run, errors, tx

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers
from setup import x, y, start

model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8, activation="tanh"),
                          layers.Dense(3, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=2.0), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
start(model)
callbacks = [keras.callbacks.ModelCheckpoint(filepath="best.keras", save_best_only=True, monitor="val_loss")]
history = model.fit(x, y, epochs=5, batch_size=8, shuffle=False, validation_split=0.25, callbacks=callbacks,
                    verbose=0)
last = model.evaluate(x, y, verbose=0)
test_model = keras.models.load_model("best.keras")
after = test_model.evaluate(x, y, verbose=0)
'''

DRIVER = driver(3, '''from model import after, last, history
val = history["val_loss"] if sys.argv[2] == "torch" else history.history["val_loss"]
print("RESULT " + json.dumps({"after": [float(v) for v in after], "last": [float(v) for v in last],
                              "val_loss": [float(v) for v in val]}))
''')


def test_the_checkpointed_models_evaluate_is_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOURCE, DRIVER)
    np.testing.assert_allclose(torch_out["val_loss"], keras_out["val_loss"], rtol=2e-4, atol=1e-6)
    best = int(np.argmin(keras_out["val_loss"]))
    assert best < len(keras_out["val_loss"]) - 1  # the file holds an earlier epoch's model than the final one
    for side in (keras_out, torch_out):
        assert len(side["after"]) == 2  # [loss, accuracy]: the compile's metric, restored with the model
        assert abs(side["after"][0] - side["last"][0]) > 1e-3
    np.testing.assert_allclose(torch_out["after"], keras_out["after"], rtol=2e-4, atol=1e-6)
    assert 0 < keras_out["after"][1] < 1


def test_the_translation_evaluates_with_the_fits_compile():
    r = tx(SOURCE)
    assert errors(r) == []
    assert 'test_model = load_checkpointed(model, "best.keras")' in r.output
    assert "after = evaluate(test_model, loss_fn, x, y, verbose=0)" in r.output


NOTEBOOK = '''
from tensorflow import keras
from tensorflow.keras import layers
from setup import x, y

model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(3, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=1, verbose=0)
model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8), layers.Dense(3, activation="softmax")])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
callbacks = [keras.callbacks.ModelCheckpoint(filepath="large.keras", save_best_only=True)]
model.fit(x, y, epochs=2, validation_split=0.25, callbacks=callbacks, verbose=0)
test_model = keras.models.load_model("large.keras")
test_loss, test_acc = test_model.evaluate(x, y)
'''


def _evaluate_errors(src: str) -> list:
    return [f.message for f in tx(src).findings if f.severity.name == "ERROR" and "test_model.evaluate" in f.message]


def test_a_notebooks_load_takes_the_compile_of_the_fit_that_saved_it():
    r = tx(NOTEBOOK)
    assert errors(r) == []
    # the second compile's loop (its loss object): the one the checkpointing fit trains with
    fit_line = next(line for line in r.output.splitlines() if "callbacks=callbacks" in line)
    fit_name = fit_line.split("(")[0].split()[-1]
    evaluate_line = next(line for line in r.output.splitlines() if line.startswith("test_loss, test_acc = "))
    assert evaluate_line.split("= ")[1].startswith(fit_name.replace("fit", "evaluate") + "(test_model, loss_fn")


def test_other_loads_keep_the_error():
    left = SOURCE.replace('optimizer=keras.optimizers.SGD(learning_rate=2.0)', 'optimizer=make_optimizer()')
    said = _evaluate_errors("def make_optimizer():\n    return object()\n" + left)
    assert said and "ModelCheckpoint of model.fit(...) wrote, whose compile is left as written" in said[0]
    elsewhere = SOURCE.replace("after = test_model.evaluate(x, y, verbose=0)",
                               "def score():\n    return test_model.evaluate(x, y, verbose=0)")
    assert any("comes from keras.models.load_model" in m for m in _evaluate_errors(elsewhere))
    # compiled again after the checkpointing fit (its loss_fn bound to another loss): the loaded model's evaluate would
    # read the later compile's loss
    again = SOURCE.replace("last = model.evaluate(x, y, verbose=0)",
                           "model.compile(optimizer='adam', loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1))"
                           "\nlast = model.evaluate(x, y, verbose=0)")
    said = _evaluate_errors(again)
    assert said and "a compile after that fit, before this evaluate" in said[0]
    weights = SOURCE.replace('monitor="val_loss")', 'monitor="val_loss", save_weights_only=True)')
    assert _evaluate_errors(weights)  # a weights file: Keras's load_model does not read it, fwport leaves it
