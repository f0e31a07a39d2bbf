"""A notebook's compile / fit cells (issue 9): ``optimizer = keras.optimizers.X(...)`` bound again before each
``model.compile(optimizer=optimizer, ...)`` at the module's top level. Each binding becomes the torch optimizer
over the model's parameters, and each written fit takes the one its compile was given; where a fit would see
another binding than its compile did (or the optimizer is created before the model), the compile keeps a
precise error.

Numbers: the program builds a model, the driver gives it fixed weights (Keras and torch alike), then the
program's top-level cells train it with one optimizer and then with another (subprocesses, TensorFlow
unimportable in the torch one): both histories and the kernels after training are compared.
"""
from __future__ import annotations

import textwrap

import numpy as np
from test_fit_callbacks import errors, tx
from runners import keras_and_torch

CELLS = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

rng = np.random.default_rng(1)
x = rng.normal(size=(64, 10)).astype("float32")
y = ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)).astype("int64")
model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
# -- cells --
optimizer = keras.optimizers.SGD(learning_rate=0.3)
model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
first = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)

optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
second = model.fit(x, y, epochs=3, batch_size=16, shuffle=False, verbose=0)
histories = [first.history, second.history]
'''

# the program's cells run in two parts: the model is built, the driver sets its weights, the cells train it
DRIVER = '''
import json, sys
import numpy as np
source = open(sys.argv[1] + "/model.py").read()
head, cells = source.split("# -- cells --")
scope = {"__name__": "model"}
exec(compile(head, "model.py", "exec"), scope)
model = scope["model"]
rng = np.random.default_rng(2)
W = [(rng.normal(size=(10, 16)) * 0.5).astype("float32"), np.zeros(16, "float32"),
     (rng.normal(size=(16, 3)) * 0.5).astype("float32"), np.zeros(3, "float32")]
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    model.set_weights(W)
    kernels = lambda: [l.get_weights()[0].tolist() for l in model.layers]
exec(compile("\\n" * head.count("\\n") + cells, "model.py", "exec"), scope)
print("RESULT " + json.dumps({"histories": scope["histories"], "kernels": kernels()}))
'''


def test_each_fit_trains_with_the_optimizer_its_compile_was_given(tmp_path):
    trans = tx(CELLS)
    assert errors(trans) == [], errors(trans)
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(CELLS), trans.output, DRIVER)
    assert [len(h["loss"]) for h in torch_out["histories"]] == [2, 3]
    for kh, th in zip(keras_out["histories"], torch_out["histories"]):
        np.testing.assert_allclose(th["loss"], kh["loss"], rtol=2e-4, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)
    # the second optimizer counts: with the first one's setting the same cells end elsewhere
    same = CELLS.replace("learning_rate=0.05, momentum=0.9", "learning_rate=0.3")
    (tmp_path / "same").mkdir()
    plain, _ = keras_and_torch(tmp_path / "same", textwrap.dedent(same), tx(same).output, DRIVER)
    assert abs(plain["histories"][1]["loss"][-1] - keras_out["histories"][1]["loss"][-1]) > 1e-3


def test_each_binding_is_created_over_the_model_parameters():
    out = tx(CELLS).output
    assert out.count("optimizer = torch.optim.SGD(model.parameters(), lr=") == 2
    assert "momentum=0.9)" in out and out.count("= fit(model, optimizer, loss_fn, x, y,") == 2
    assert "functools" not in out


def test_an_optimizer_bound_again_before_a_fit_of_the_earlier_compile_is_refused():
    # the second fit trains with the first compile's optimizer in Keras; the written one would take the new binding
    src = CELLS.replace("second = model.fit(", "model.compile(optimizer=optimizer, loss='mse')\nsecond = model.fit(")
    src = src.replace(
        "optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)\n"
        "model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n",
        "optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)\n"
        "again = model.fit(x, y, epochs=1, verbose=0)\n")
    errs = errors(tx(src))
    assert any(m.startswith("model.compile(...) is a Keras model method") and
               "optimizer=optimizer: optimizer is bound again before a model.fit(...) that trains with this "
               "compile's optimizer" in m for _, m in errs), errs


def test_an_optimizer_created_before_its_model_is_refused():
    src = CELLS.replace(
        "optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)\n",
        "optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)\n"
        "model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(3)])\n")
    errs = errors(tx(src))
    assert any("the optimizer this compile is given is not created after model is built" in m
               and "create it after `model = ...`" in m for _, m in errs), errs


def test_one_optimizer_name_for_two_models_is_refused():
    src = CELLS.replace(
        "optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)\nmodel.compile(",
        "other = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(3)])\n"
        "optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)\nother.compile(")
    src = src.replace("second = model.fit(", "second = other.fit(")
    errs = errors(tx(src))
    assert any("optimizer is given to the compiles of" in m and "its own name" in m for _, m in errs), errs


def test_a_fit_after_a_compile_left_as_written_says_why_and_is_not_given_a_later_loop():
    # the first compile is left as written: its fit must not become the loop of the second compile (which the
    # file reaches only later), and its error names the compile's reason
    src = CELLS.replace("optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))\nfirst",
                        "optimizer=optimizer, loss=losses.focal)\nfirst")
    r = tx(src)
    errs = errors(r)
    assert any(m.startswith("model.fit(...) is a Keras model method") and "the model.compile(...) before it is "
               "left as written (loss= is neither a Keras name nor a Keras loss object" in m
               for _, m in errs), errs
    assert "first = model.fit(x, y" in r.output and "second = fit(model, optimizer, loss_fn, x, y" in r.output
