"""``keras.models.load_model(path)`` of the file a ``keras.callbacks.ModelCheckpoint(path)`` of the same file writes
(issue 9, tf2torch: keras-io's timeseries_classification_from_scratch, active_learning_review_classification). Keras's
checkpoint saves the whole model there (save_weights_only=False); the written ModelCheckpoint saves the model's
state_dict, which torch.load(path, weights_only=False), load_model's usual translation, returned as a dict, not a
model. The pair now gives ``load_checkpointed(model, path)``: a copy of the model whose fit has that checkpoint,
holding the file's weights; where fwport cannot tell which model (no fit with it in load_model's function, several) the
load is an error naming the file, and a weights-only checkpoint (which Keras's load_model does not read either) or
another path leaves load_model as it was.

Numbers: a model fit five epochs with a save_best_only checkpoint on val_loss, loaded back and called on fixed data
by Keras and by its translation from the same weights (subprocesses, TensorFlow unimportable on the torch side): the
loaded model's outputs agree, and they are the best epoch's (not the last epoch's) where the best is earlier.
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
model.compile(optimizer=keras.optimizers.SGD(learning_rate=2.0), loss="sparse_categorical_crossentropy")
start(model)
checkpoint = keras.callbacks.ModelCheckpoint("best.keras", save_best_only=True)
history = model.fit(x, y, epochs=5, batch_size=8, shuffle=False, validation_split=0.25, callbacks=[checkpoint],
                    verbose=0)
last = model.predict(x, verbose=0)
reloaded = keras.models.load_model("best.keras")
'''

DRIVER = driver(3, '''from model import reloaded, last, history, x
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        out = reloaded(torch.tensor(x)).numpy()
    val = history["val_loss"]
else:
    out = reloaded(x).numpy()
    val = history.history["val_loss"]
print("RESULT " + json.dumps({"loaded": out.tolist(), "last": [list(map(float, r)) for r in last],
                              "val_loss": [float(v) for v in val]}))
''')


def test_the_checkpointed_model_loads_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOURCE, DRIVER)
    np.testing.assert_allclose(torch_out["val_loss"], keras_out["val_loss"], rtol=2e-4, atol=1e-6)
    best = int(np.argmin(keras_out["val_loss"]))
    assert best < len(keras_out["val_loss"]) - 1  # the best epoch is not the last: the file is not the final model
    np.testing.assert_allclose(torch_out["loaded"], keras_out["loaded"], rtol=2e-4, atol=1e-5)
    assert np.abs(np.array(keras_out["loaded"]) - np.array(keras_out["last"])).max() > 1e-3


def test_the_translation_loads_into_the_checkpointed_model():
    r = tx(SOURCE)
    assert errors(r) == []
    assert 'reloaded = load_checkpointed(model, "best.keras")' in r.output
    assert "loaded.load_state_dict(torch.load(filepath))" in r.output


def _load_errors(src: str) -> list:
    return [f.message for f in tx(src).findings if f.severity.name == "ERROR" and "load_model" in f.message]


def test_an_unknown_model_is_an_error_and_other_files_load_as_before():
    in_function = SOURCE.replace('reloaded = keras.models.load_model("best.keras")',
                                 'def restore():\n    return keras.models.load_model("best.keras")')
    assert any("state_dict" in m for m in _load_errors(in_function))
    weights = SOURCE.replace('save_best_only=True)', 'save_best_only=True, save_weights_only=True)')
    r = tx(weights)
    assert "load_checkpointed" not in r.output and 'torch.load("best.keras", weights_only=False)' in r.output
    other = SOURCE.replace('load_model("best.keras")', 'load_model("other.keras")')
    assert 'torch.load("other.keras", weights_only=False)' in tx(other).output


NOTEBOOK = '''
from tensorflow import keras
from tensorflow.keras import layers
from setup import x, y

small = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(3, activation="softmax")])
small.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
callbacks = [keras.callbacks.ModelCheckpoint("small.keras", save_best_only=True)]
small.fit(x, y, epochs=2, validation_split=0.25, callbacks=callbacks, verbose=0)
first = keras.models.load_model("small.keras")
large = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8), layers.Dense(3, activation="softmax")])
large.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
callbacks = [keras.callbacks.ModelCheckpoint("large.keras", save_best_only=True)]
large.fit(x, y, epochs=2, validation_split=0.25, callbacks=callbacks, verbose=0)
second = keras.models.load_model("large.keras")
again = keras.models.load_model("small.keras")
'''


def test_each_load_takes_the_model_its_checkpoint_saved():
    # a notebook's blocks: the name `callbacks` bound again to each model's checkpoint
    r = tx(NOTEBOOK)
    assert errors(r) == []
    assert 'first = load_checkpointed(small, "small.keras")' in r.output
    assert 'second = load_checkpointed(large, "large.keras")' in r.output
    assert 'again = load_checkpointed(small, "small.keras")' in r.output
