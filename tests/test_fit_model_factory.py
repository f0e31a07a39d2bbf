"""A model compiled inside a factory function and fitted by its caller (`def build_model(...): ...;
model.compile(...); return model`, then `m = build_model(...)`; `m.fit(...)`): the factory returns the optimizer
and loss beside the model, one of each per model built. A call that takes only the model (`return build_model()`
in another function) gets it alone, with a warning; a factory given as a value (to a tuner) stays an error.

Numbers: two models of one factory, each fitted, against Keras (history, evaluate, weights after fit)."""
from __future__ import annotations

import textwrap

from fwport.core.pipeline import translate_source
from helpers import error_lines as errors
from helpers import needs

TWO_MODELS = '''
import numpy as np
import keras
from keras import layers


def build_model(units, lr):
    model = keras.Sequential([keras.Input((4,)), layers.Dense(units, activation="tanh"), layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr, momentum=0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["sparse_categorical_accuracy"])
    return model


def build_default():
    return build_model(5, 0.1)


small = build_model(8, 0.2)
big = build_model(16, 0.05)
spare = build_default()


def train(x, y):
    h_small = small.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    h_big = big.fit(x, y, epochs=3, batch_size=16, shuffle=False, verbose=0)
    return [h_small.history, h_big.history], [small.evaluate(x, y, verbose=0), big.evaluate(x, y, verbose=0)]
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(5)
x = rng.normal(size=(32, 4)).astype("float32")
y = ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)).astype("int64")
models = {"small": (small, 8), "big": (big, 16)}
weights = {k: [(rng.normal(size=(4, u)) * 0.5).astype("float32"), np.zeros(u, "float32"),
               (rng.normal(size=(u, 3)) * 0.5).astype("float32"), np.zeros(3, "float32")]
           for k, (_, u) in models.items()}
if sys.argv[2] == "torch":
    import torch
    linears = {k: [l for l in m.modules() if isinstance(l, torch.nn.Linear)] for k, (m, _) in models.items()}
    with torch.no_grad():
        for k, W in weights.items():
            for l, (kernel, bias) in zip(linears[k], (W[:2], W[2:])):
                l.weight.copy_(torch.tensor(kernel).T)
                l.bias.copy_(torch.tensor(bias))
    kernels = lambda k: [l.weight.detach().numpy().T.tolist() for l in linears[k]]
    spare_units = [l for l in spare.modules() if isinstance(l, torch.nn.Linear)][0].out_features
else:
    for k, (m, _) in models.items():
        m.set_weights(weights[k])
    kernels = lambda k: [l.get_weights()[0].tolist() for l in models[k][0].layers if l.get_weights()]
    spare_units = spare.layers[0].units
histories, evaluations = train(x, y)
print("RESULT " + json.dumps({name: {"history": h, "evaluate": e, "kernels": kernels(name)}
                              for name, h, e in zip(("small", "big"), histories, evaluations)}
                             | {"spare_units": spare_units}))
'''


def _translate(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")


def _line(src: str, text: str) -> int:
    """The line of ``src`` (as _translate reads it) that holds ``text``."""
    lines = textwrap.dedent(src).lstrip("\n").splitlines()
    return next(i for i, ln in enumerate(lines, 1) if text in ln)


def _warnings(r) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in r.findings if f.severity.value == "warning"]


def test_factory_called_twice_binds_one_optimizer_per_model():
    r = _translate(TWO_MODELS)
    assert errors(r) == [], errors(r)
    out = r.output
    assert "    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.5)" in out
    assert "    return model, optimizer, loss_fn\n" in out
    assert "small, small_optimizer, small_loss_fn = build_model(8, 0.2)" in out
    assert "big, big_optimizer, big_loss_fn = build_model(16, 0.05)" in out
    assert "fit(small, small_optimizer, small_loss_fn, x, y" in out and "fit(big, big_optimizer, big_loss_fn, x, y" in out


def test_factory_call_that_takes_the_model_alone_is_indexed_and_warned():
    r = _translate(TWO_MODELS)
    assert "    return build_model(5, 0.1)[0]\n" in r.output
    assert "spare = build_default()\n" in r.output
    taken = [(line, m) for line, m in _warnings(r) if "here the model alone is taken" in m]
    assert [line for line, _ in taken] == [_line(TWO_MODELS, "return build_model(5, 0.1)")], _warnings(r)
    assert "returns model, optimizer, loss_fn" in taken[0][1]


def test_fit_of_a_model_taken_alone_stays_an_error():
    src = TWO_MODELS + "\n\ndef train_spare(x, y):\n    return spare.fit(x, y, epochs=1, verbose=0)\n"
    r = _translate(src)
    fits = [(line, m) for line, m in errors(r) if "spare.fit(" in m]
    at = _line(src, "spare.fit(")
    assert [line for line, _ in fits] == [at], errors(r)
    assert not [m for line, m in errors(r) if line != at]  # the factory's other calls are still written


def test_factory_given_as_a_value_stays_an_error():
    """A tuner (keras_tuner.RandomSearch(build_model, ...)) calls the factory itself and expects a Keras model."""
    src = TWO_MODELS + "\n\nsearch = dict(hypermodel=build_model)\n"
    r = _translate(src)
    compile_errors = [(line, m) for line, m in errors(r) if m.startswith("model.compile(...) is a Keras model method")]
    assert [line for line, _ in compile_errors] == [_line(src, "model.compile(")], errors(r)
    assert "build_model is used other than by calling it" in compile_errors[0][1]
    # the marker above the compile left as written, in the output
    assert r.output.split("    model.compile(")[0].splitlines()[-1].startswith(
        "    # fwport: unsupported-construct: model.compile(...) is a Keras model method")


def test_factory_called_nowhere_stays_an_error():
    src = TWO_MODELS.split("\n\ndef build_default")[0] + "\n"
    r = _translate(src)
    compile_errors = [(line, m) for line, m in errors(r) if m.startswith("model.compile(...) is a Keras model method")]
    assert [line for line, _ in compile_errors] == [_line(src, "model.compile(")], errors(r)
    assert "build_model() is called nowhere in this file" in compile_errors[0][1]
    # the marker above the compile left as written, in the output
    assert r.output.split("    model.compile(")[0].splitlines()[-1].startswith(
        "    # fwport: unsupported-construct: model.compile(...) is a Keras model method")


@needs("tensorflow", "torch")
def test_two_models_of_one_factory_train_as_in_keras(tmp_path):
    from runners import compare_fit, keras_and_torch
    r = _translate(TWO_MODELS)
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(TWO_MODELS), r.output, DRIVER)
    assert keras_out["spare_units"] == torch_out["spare_units"] == 5
    for name in ("small", "big"):
        compare_fit(keras_out[name], torch_out[name], ["loss", "sparse_categorical_accuracy"])
        assert keras_out[name]["history"]["loss"][-1] < keras_out[name]["history"]["loss"][0]  # it trained


# the factory's optimizer has a learning-rate schedule: the factory returns its LambdaLR beside the optimizer
SCHEDULED = TWO_MODELS.replace(
    "optimizer=keras.optimizers.SGD(learning_rate=lr, momentum=0.5)",
    "optimizer=keras.optimizers.SGD(\n        learning_rate=keras.optimizers.schedules.ExponentialDecay(lr, decay_steps=3, "
    "decay_rate=0.5))")


def test_factory_with_a_scheduled_optimizer_returns_its_scheduler():
    assert SCHEDULED != TWO_MODELS
    r = _translate(SCHEDULED)
    assert errors(r) == [], errors(r)
    out = r.output
    assert "    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, " in out
    assert "    return model, optimizer, scheduler, loss_fn\n" in out
    assert "small, small_optimizer, small_scheduler, small_loss_fn = build_model(8, 0.2)" in out
    assert "fit(big, big_optimizer, big_scheduler, big_loss_fn, x, y" in out


@needs("tensorflow", "torch")
def test_two_scheduled_models_of_one_factory_train_as_in_keras(tmp_path):
    from runners import compare_fit, keras_and_torch
    r = _translate(SCHEDULED)
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SCHEDULED), r.output, DRIVER)
    for name in ("small", "big"):
        compare_fit(keras_out[name], torch_out[name], ["loss", "sparse_categorical_accuracy"])
