"""Training-code gaps of issue 9 (session 21): compile's confusion-matrix metrics beside a sparse categorical
cross-entropy (Keras's own fit fails there: the translation refuses it, naming the compile, and the written metric
classes stop with a ValueError on labels and outputs of different sizes instead of an index error).

Numbers: the Keras program is run (subprocess) to show it fails as the refusal says."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from fwport.packs.tf2torch.passes import fitloop
from helpers import error_lines as errors

SPARSE_AUC = '''
import numpy as np
import keras

x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
y = np.random.default_rng(1).integers(0, 2, size=(32,))
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=[METRIC])
history = model.fit(x, y, epochs=1, batch_size=8, verbose=0)
'''


@pytest.mark.parametrize("metric, name", [("keras.metrics.AUC()", "auc"), ("keras.metrics.Precision()", "precision"),
                                          ("keras.metrics.TruePositives(name='tp')", "tp")])
def test_confusion_metric_with_sparse_labels_is_refused_at_the_compile(metric, name):
    r = translate_source(textwrap.dedent(SPARSE_AUC.replace("METRIC", metric)).lstrip("\n"), "model.py")
    found = errors(r)
    compile_errors = [(line, m) for line, m in found if m.startswith("model.compile(...) is a Keras model method")]
    assert len(compile_errors) == 1, found
    line, message = compile_errors[0]
    assert line == 7  # the compile's line
    assert f"metrics [{name!r}] with a sparse categorical cross-entropy" in message
    assert "ValueError" in message


def test_confusion_metric_with_one_hot_labels_is_still_written():
    src = SPARSE_AUC.replace("METRIC", "keras.metrics.AUC()").replace("sparse_categorical", "categorical")
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    assert errors(r) == []
    assert "class AUC:" in r.output and "_value_by_value(\"AUC\", y_true, y_pred)" in r.output


def test_keras_fails_on_auc_with_sparse_labels(tmp_path):
    """What the refusal says: Keras 3's own fit stops with a ValueError on a 2-unit softmax with integer labels."""
    src = textwrap.dedent(SPARSE_AUC.replace("METRIC", "keras.metrics.AUC()")).lstrip("\n")
    (tmp_path / "prog.py").write_text(src)
    p = subprocess.run([sys.executable, str(tmp_path / "prog.py")], capture_output=True, text=True, timeout=300,
                       env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin",
                            "HOME": str(tmp_path), "KERAS_BACKEND": "tensorflow"})
    assert p.returncode != 0
    assert "ValueError" in p.stderr and "segment_ids" in p.stderr, p.stderr[-2000:]


def test_written_confusion_metrics_raise_a_value_error_on_mismatched_sizes():
    torch = pytest.importorskip("torch")
    ns = {"torch": torch}
    exec(fitloop.metric_classes({"AUC", "Precision", "TruePositives"}, lambda *_: None), ns)
    y = torch.tensor([0, 1, 1, 0])
    p = torch.tensor([[0.7, 0.3], [0.2, 0.8], [0.4, 0.6], [0.9, 0.1]])
    for cls in ("AUC", "Precision", "TruePositives"):
        with pytest.raises(ValueError, match=f"{cls}: labels of shape \\(4,\\) against outputs of shape \\(4, 2\\)"):
            ns[cls]().update_state(y, p)
    # one-hot labels of the same shape: computed (every positive scored above every negative: an AUC of 1)
    auc = ns["AUC"]()
    auc.update_state(torch.nn.functional.one_hot(y, 2), p)
    assert float(auc.result()) == pytest.approx(1.0, abs=1e-6)


# a model factory that binds its optimizer itself, after the model, and compiles with it (keras-io's ctc_asr)
FACTORY = '''
import numpy as np
import keras
from keras import layers


def build_model(units):
    inputs = keras.Input((4,))
    x = layers.Dense(units, activation="tanh")(inputs)
    outputs = layers.Dense(3)(x)
    model = keras.Model(inputs, outputs)
    opt = keras.optimizers.SGD(learning_rate=0.2, momentum=0.5)
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["sparse_categorical_accuracy"])
    return model


model = build_model(8)


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

FACTORY_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
W = [(rng.normal(size=(4, 8)) * 0.5).astype("float32"), np.zeros(8, "float32"),
     (rng.normal(size=(8, 3)) * 0.5).astype("float32"), np.zeros(3, "float32")]
x = rng.normal(size=(32, 4)).astype("float32")
y = ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)).astype("int64")
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    model.set_weights(W)
    kernels = lambda: [l.get_weights()[0].tolist() for l in model.layers if l.get_weights()]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels()}))
'''


def test_factory_with_its_own_named_optimizer_is_written_and_matches_keras(tmp_path):
    from runners import compare_fit, keras_and_torch
    r = translate_source(textwrap.dedent(FACTORY).lstrip("\n"), "model.py")
    assert errors(r) == [], errors(r)
    assert "    opt = torch.optim.SGD(model.parameters()" in r.output
    assert "return model, opt, loss_fn" in r.output and "model, opt, loss_fn = build_model(8)" in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(FACTORY), r.output, FACTORY_DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "sparse_categorical_accuracy"])
    assert keras_out["history"]["loss"][1] < keras_out["history"]["loss"][0]  # it trained


def test_factory_optimizer_bound_before_its_model_is_still_refused():
    src = FACTORY.replace("    model = keras.Model(inputs, outputs)\n    opt = keras.optimizers.SGD(learning_rate=0.2, "
                          "momentum=0.5)\n", "    opt = keras.optimizers.SGD(learning_rate=0.2, momentum=0.5)\n"
                          "    model = keras.Model(inputs, outputs)\n")
    assert src != FACTORY
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    assert any("model factory with an optimizer bound elsewhere" in m
               for _, m in errors(r)), errors(r)


# ReduceLROnPlateau / LearningRateScheduler add the learning rate to the epoch's logs, which Keras's History records
PLATEAU = '''
import numpy as np
import keras
from keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["sparse_categorical_accuracy"])
callbacks = [CALLBACK]


def train(x, y):
    history = model.fit(x, y, epochs=4, batch_size=16, callbacks=callbacks, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


@pytest.mark.parametrize("callback", [
    # every epoch a plateau (no decrease by 10): the rate halves after each, from the second epoch's logs on
    'keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=10.0)',
    "keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.7 if epoch else lr)",
])
def test_learning_rate_callbacks_log_the_rate_as_keras(tmp_path, callback):
    from runners import compare_fit, keras_and_torch
    from test_fit_callbacks import DRIVER
    src = PLATEAU.replace("CALLBACK", callback)
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    assert errors(r) == [], errors(r)
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(src), r.output, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "sparse_categorical_accuracy", "learning_rate"])
    rates = keras_out["history"]["learning_rate"]
    assert len(rates) == 4 and rates[-1] < rates[0]  # the rate changed, and the History shows it
    assert torch_out["history"]["learning_rate"] == rates  # float32 rates, as Keras keeps them


def test_keras2_callbacks_log_the_rate_as_lr():
    src = PLATEAU.replace("CALLBACK", "keras.callbacks.ReduceLROnPlateau(monitor='loss')").replace(
        "import keras\nfrom keras import layers", "from tensorflow import keras\nfrom tensorflow.keras import layers")
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py", None, {"keras": 2})
    assert "ReduceLROnPlateau(monitor='loss', log_name=\"lr\")" in r.output, r.output[-1500:]


# a finite dataset with steps_per_epoch: Keras 3 runs one iterator on across epochs; where it runs out mid-epoch it
# warns, ends that epoch short and starts the data over at the next; where it runs out at an epoch's end, the next
# epoch starts it over without a word
STEPS = '''
import numpy as np
import tensorflow as tf
import keras
from keras import layers

model = keras.Sequential([keras.Input(shape=(2,)), layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01), loss="mse")


def train(x, y):
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2)
    history = model.fit(dataset, steps_per_epoch=2, epochs=4, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

STEPS_DRIVER = '''
import json, sys, warnings
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
n = int(sys.argv[3])
x = np.arange(2 * n, dtype="float32").reshape(n, 2) / 10
y = np.arange(1, n + 1, dtype="float32").reshape(n, 1)
w, b = np.array([[0.3], [-0.2]], "float32"), np.zeros(1, "float32")
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor(w).T)
        model[0].bias.zero_()
    kernels = lambda: [model[0].weight.detach().numpy().T.tolist()]
else:
    model.set_weights([w, b])
    kernels = lambda: [model.layers[0].get_weights()[0].tolist()]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    h, ev = train(x, y)
ran_out = sum("ran out of data" in str(c.message) for c in caught)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels(), "ran_out": ran_out}))
'''


@pytest.mark.parametrize("samples, ran_out", [(10, 1), (8, 0)])  # 5 batches (runs out in epoch 3), 4 (at its start)
def test_finite_dataset_with_steps_per_epoch_starts_over_as_keras(tmp_path, samples, ran_out):
    from runners import run_side
    r = translate_source(textwrap.dedent(STEPS).lstrip("\n"), "model.py")
    assert errors(r) == [], errors(r)
    src = textwrap.dedent(STEPS)
    keras_out = run_side(tmp_path / "keras", "keras", src, STEPS_DRIVER, "keras", str(samples))
    torch_out = run_side(tmp_path / "torch", "torch", r.output, STEPS_DRIVER, "torch", str(samples))
    assert keras_out["ran_out"] == torch_out["ran_out"] == ran_out
    assert len(keras_out["history"]["loss"]) == 4
    np.testing.assert_allclose(torch_out["history"]["loss"], keras_out["history"]["loss"], rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(torch_out["kernels"], keras_out["kernels"], rtol=2e-4, atol=2e-6)
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=1e-6)
