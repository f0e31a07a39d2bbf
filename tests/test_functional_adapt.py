"""A module-level ``normalizer = layers.Normalization(); normalizer.adapt(data)`` above a module-level functional
model that calls the layer (Keras's structured-data examples): the functional pass moves the layer into the
generated class, so the adapt statement is written right after the model's statement, on the model's module
(``model.normalizer.adapt(data)``), with an info finding ``adapt-moved``. Where that could compute other statistics
(the data or the model's name bound again in between, the statement more than the call) the error stands. Below
the model's statement the call is rewritten in place, unless the model's name is bound again in between."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

from helpers import needs
from runners import keras_and_torch

PACK = load_pack("tf2torch")


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "adapt.py", PACK)


def errors(r) -> list[tuple[int, str]]:
    return sorted((f.line, f.message) for f in r.findings if f.severity is Severity.ERROR)


ADAPTED = '''
import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(0)
data = (rng.random((64, 4)) * np.array([1.0, 5.0, 0.1, 20.0]) + np.array([0.0, 2.0, -1.0, 7.0])).astype("float32")
normalizer = layers.Normalization()
normalizer.adapt(data)

inputs = keras.Input(shape=(4,))
x = normalizer(inputs)
outputs = layers.Dense(3, activation="tanh")(x)
model = keras.Model(inputs, outputs)
'''


def test_the_adapt_call_follows_the_model_on_its_module():
    r = tr(ADAPTED)
    assert errors(r) == []
    out = r.output
    assert "class Model(nn.Module):" in out and "self.normalizer = Normalization(4)" in out
    assert "normalizer.adapt(data)\n" not in out.replace("model.normalizer.adapt(data)\n", "")
    assert out.index("model = Model()\nmodel.normalizer.adapt(data)\n") > out.index("data = (rng.random")
    moved = [f for f in r.findings if f.code == "adapt-moved"]
    assert len(moved) == 1 and moved[0].line == 8 and moved[0].severity is Severity.INFO


@pytest.mark.parametrize("between, line", [
    ("data = data * 2", 8),                      # the data bound again before the model: other statistics
    ("model = None", 8),                         # the model's name used in between
])
def test_the_error_stands_where_moving_could_change_it(between, line):
    src = ADAPTED.replace("inputs = keras.Input", f"{between}\ninputs = keras.Input")
    r = tr(src)
    assert "class Model" not in r.output and "model.normalizer.adapt" not in r.output
    assert any(ln == line and "normalizer: a tensor or layer of the functional model used by a statement that is "
               "not part of it" in m for ln, m in errors(r))


def test_more_than_the_call_or_another_method_is_refused():
    for stmt in ("normalizer.adapt(data); print(1)", "stats = normalizer.adapt(data)", "normalizer.reset_state()"):
        r = tr(ADAPTED.replace("normalizer.adapt(data)", stmt))
        assert "class Model" not in r.output, stmt
        assert any(ln == 8 and "not part of it" in m for ln, m in errors(r)), stmt


def test_an_adapted_layer_the_model_never_calls_stays_an_error():
    # called on a tensor, but its output not on the way to the model's outputs
    r = tr(ADAPTED.replace("outputs = layers.Dense(3, activation=\"tanh\")(x)",
                           "outputs = layers.Dense(3, activation=\"tanh\")(inputs)"))
    assert "model.normalizer.adapt" not in r.output
    assert errors(r)


AFTER = ADAPTED.replace("normalizer.adapt(data)\n", "").replace(
    "model = keras.Model(inputs, outputs)\n", "model = keras.Model(inputs, outputs)\nprint(len(data))\nnormalizer.adapt(data)\n")


def test_below_the_model_the_call_is_rewritten_in_place():
    assert AFTER != ADAPTED and AFTER.count("normalizer.adapt(data)") == 1
    r = tr(AFTER)
    assert errors(r) == []
    assert "model = Model()\nprint(len(data))\nmodel.normalizer.adapt(data)\n" in r.output
    assert [f.line for f in r.findings if f.code == "adapt-moved"] == [14]
    # the model's name bound again in between: the error stands
    r = tr(AFTER.replace("print(len(data))", "model = None"))
    assert "model.normalizer.adapt" not in r.output
    assert any(ln == 14 and "normalizer: a tensor or layer of the functional model used after" in m
               for ln, m in errors(r))


DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import model as m
side = sys.argv[2]
x = np.random.default_rng(1).normal(size=(5, 4)).astype("float32") * 4 + 3
shared = sys.argv[1].rsplit("/", 1)[0] + "/dense.npz"
if side == "keras":
    dense = m.model.layers[-1]
    np.savez(shared, k=np.asarray(dense.kernel), b=np.asarray(dense.bias))
    y = np.asarray(m.model(x))
    mean, var = np.asarray(m.normalizer.mean).ravel(), np.asarray(m.normalizer.variance).ravel()
else:
    import torch
    w = np.load(shared)
    with torch.no_grad():
        m.model.fc.weight.copy_(torch.as_tensor(w["k"].T))
        m.model.fc.bias.copy_(torch.as_tensor(w["b"]))
        y = m.model(torch.as_tensor(x)).numpy()
    mean, var = m.model.normalizer.mean.numpy(), m.model.normalizer.variance.numpy()
print("RESULT " + json.dumps({"y": y.tolist(), "mean": mean.tolist(), "var": var.tolist()}))
'''


@needs("torch", "tensorflow")
@pytest.mark.parametrize("source", [ADAPTED, AFTER], ids=["above", "below"])
def test_the_translated_model_normalizes_as_keras(tmp_path, source):
    r = tr(source)
    assert errors(r) == []
    assert "self.fc = nn.Linear(4, 3)" in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(source), r.output, DRIVER)
    np.testing.assert_allclose(torch_out["mean"], keras_out["mean"], rtol=1e-5)
    np.testing.assert_allclose(torch_out["var"], keras_out["var"], rtol=1e-4)
    np.testing.assert_allclose(torch_out["y"], keras_out["y"], rtol=1e-4, atol=1e-5)
    # the statistics matter: the un-adapted output (mean 0, variance 1) differs
    assert not np.allclose(keras_out["mean"], 0.0, atol=0.5)
