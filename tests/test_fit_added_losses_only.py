"""A model whose layers call add_loss, compiled with an optimizer and no loss: Keras (3.15) trains it on the added
terms alone, its History's "loss" their sum (with the weight regularizers' penalties: model.losses). The translation
plans such a compile as the loss kind "added": the written fit / evaluate take x alone (y=None) and their loss is the
sum of every module's ``added_losses`` (the terms of that forward), the regularizers' penalties added as ever.

Numbers: a subclassed model (add_loss in a layer, in a layer nested in another layer, and in the model's own call; a
kernel regularizer) is trained two epochs by Keras and by its translation from the same weights (subprocesses): the
History's losses per epoch, val_loss, evaluate and the kernels after training agree; without the terms they differ."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from helpers import error_lines as errors
from runners import compare_fit, keras_and_torch, python, run_side

SRC = '''
import numpy as np
import keras
from keras import layers


class ActivityPenalty(layers.Layer):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * keras.ops.mean(keras.ops.square(inputs)))
        return inputs


class Block(layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = layers.Dense(units, kernel_regularizer=keras.regularizers.l2(0.02))
        self.penalty = ActivityPenalty(0.5)

    def call(self, x):
        return self.penalty(self.dense(x))


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = layers.Dense(5, activation="tanh")
        self.p1 = ActivityPenalty(0.1)
        self.block = Block(3)

    def call(self, x):
        self.add_loss(0.05 * keras.ops.mean(keras.ops.abs(x)))
        return self.block(self.p1(self.d1(x)))


net = Net()
net.compile(optimizer=keras.optimizers.SGD(learning_rate=LR))


def train(x):
    h = net.fit(x, batch_size=4, epochs=2, shuffle=False, verbose=0, validation_split=0.25)
    return h.history, net.evaluate(x, verbose=0)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(1)
W = [(rng.normal(size=(4, 5)) * 0.5).astype("float32"), (rng.normal(size=5) * 0.1).astype("float32"),
     (rng.normal(size=(5, 3)) * 0.5).astype("float32"), (rng.normal(size=3) * 0.1).astype("float32")]
x = rng.normal(size=(14, 4)).astype("float32")
if sys.argv[2] == "torch":
    import torch
    net(torch.zeros(1, 4))  # (the lazy linears take their input sizes)
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:]), strict=True):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    net(x[:1])
    net.set_weights(W)
    kernels = lambda: [w.numpy().tolist() for w in net.weights if len(w.shape) == 2]
h, ev = train(x)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels()}))
'''


MEASURED = '''
import numpy as np
import keras
from keras import layers


class ActivityPenalty(layers.Layer):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * keras.ops.mean(keras.ops.square(inputs)))
        return inputs


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = layers.Dense(5, activation="tanh")
        self.p1 = ActivityPenalty(0.1)
        self.d2 = layers.Dense(3)
        self.p2 = ActivityPenalty(0.5)

    def call(self, x):
        return self.p2(self.d2(self.p1(self.d1(x))))


net = Net()
net.compile(optimizer=keras.optimizers.SGD(learning_rate=LR))
x = np.random.default_rng(0).normal(size=(12, 4)).astype("float32")
h = net.fit(x, batch_size=4, epochs=2, shuffle=False, verbose=0)
'''



def _src(lr: float = 0.3) -> str:
    return textwrap.dedent(SRC).lstrip("\n").replace("LR", repr(lr))


def test_a_loss_less_compile_trains_on_the_added_terms_as_keras(tmp_path):
    src = _src()
    r = translate_source(src, "model.py")
    assert errors(r) == [], errors(r)
    out = r.output
    assert "loss = sum(t.sum() for m in model.modules() for t in vars(m).pop(\"added_losses\", ()))" in out
    assert "def fit(model, optimizer, loss_fn, x, y=None, " in out
    assert "loss_fn = None" in out and "fit(net, optimizer, loss_fn, x, batch_size=4" in out
    keras_out, torch_out = keras_and_torch(tmp_path, src, out, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "val_loss"])
    assert keras_out["history"]["loss"][1] < keras_out["history"]["loss"][0]  # it trains
    # the terms are the loss: with their rates 0 only the regularizer's penalty is left, and the losses fall
    zero = src.replace("ActivityPenalty(0.1)", "ActivityPenalty(0.0)").replace("ActivityPenalty(0.5)", "ActivityPenalty(0.0)")
    zero = zero.replace("self.add_loss(0.05 * ", "self.add_loss(0.0 * ")
    assert zero.count("0.0") >= 3
    (tmp_path / "zero").mkdir()
    keras_zero, torch_zero = keras_and_torch(tmp_path / "zero", zero, translate_source(zero, "model.py").output, DRIVER)
    compare_fit(keras_zero, torch_zero, ["loss", "val_loss"])
    assert keras_out["history"]["loss"][0] > keras_zero["history"]["loss"][0] + 0.05


def _keras2_src() -> str:
    """The model in tf.keras code for Keras 2 (tf_keras), evaluate in batches of 3 (14 samples: 3 + ... + 2)."""
    src = "# fwport: keras=2\n" + _src().replace("import keras\nfrom keras import layers",
                                                 "import tensorflow as tf\nfrom tensorflow import keras\n"
                                                 "from tensorflow.keras import layers")
    src = src.replace("keras.ops.mean(keras.ops.square(inputs))", "tf.reduce_mean(tf.square(inputs))")
    src = src.replace("keras.ops.mean(keras.ops.abs(x))", "tf.reduce_mean(tf.abs(x))")
    src = src.replace("net.evaluate(x, verbose=0)", "net.evaluate(x, batch_size=3, verbose=0)")
    assert "keras.ops" not in src and "batch_size=3" in src
    return src


def test_keras2_averages_the_added_terms_over_the_batches(tmp_path):
    """tf_keras 2.21 with no compiled loss: no batch size weighs the History's loss metric (nor evaluate's), so it is
    the plain mean over the batches (here 4, 4 and 2 training samples); the written loop of Keras 2 code divides by
    the number of batches. The Keras 3 weighing (by samples) would differ by about 0.01 here."""
    src = _keras2_src()
    r = translate_source(src, "model.py")
    assert errors(r) == [], errors(r)
    assert "total += loss.item() * 1" in r.output and "math.ceil(len(x) / batch_size)" in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, src, r.output, DRIVER, TF_USE_LEGACY_KERAS="1")
    compare_fit(keras_out, torch_out, ["loss", "val_loss"])
    # (Keras 3's weighing gives another number for these batches: the difference is measured, not assumed)
    k3 = translate_source(src.replace("# fwport: keras=2\n", "# fwport: keras=3\n"), "model.py").output
    (tmp_path / "k3").mkdir()
    _, torch_k3 = keras_and_torch(tmp_path / "k3", src, k3, DRIVER, TF_USE_LEGACY_KERAS="1")
    assert abs(torch_k3["history"]["loss"][0] - keras_out["history"]["loss"][0]) > 1e-3


def test_a_comment_that_names_add_loss_does_not_keep_the_call_an_error():
    # (the call is the one add_loss of the method; a comment or docstring naming it is no second call)
    src = _src().replace("    def call(self, inputs):\n", "    def call(self, inputs):\n        # Keras collects it: self.add_loss()\n")
    assert "# Keras collects it" in src
    r = translate_source(src, "model.py")
    assert errors(r) == [], errors(r)
    assert "self.added_losses = getattr(self, \"added_losses\", []) + [self.rate * torch.mean(torch.square(inputs))]" in r.output


def test_a_model_only_predicted_with_still_translates():
    # (a predict of a model never compiled has no loss plan at all: the check for the loss-less kind passes it by)
    src = textwrap.dedent('''
        import numpy as np
        import keras
        from keras import layers

        model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(2)])
        print(model.predict(np.zeros((3, 4), "float32"), verbose=0))
    ''').lstrip("\n")
    r = translate_source(src, "model.py")
    assert not [f for f in r.findings if f.code == "internal-error"], r.findings
    assert "def predict(model, x" in r.output and "predict(model, np.zeros((3, 4), \"float32\"), verbose=0)" in r.output


def test_a_conditional_add_loss_in_a_loss_less_compile_trains_as_keras(tmp_path):
    # a term under an if is listed when it is made (main kept it an error): Keras's evaluate and val_loss have
    # none of the layers' conditional terms, only the model's own and the regularizer's. (The model's call takes
    # training: Keras 3.15 passes fit's training=True to the layers only through a model whose call has the
    # parameter; without it they get None, and torch's self.training is True: measured, not add_loss's matter)
    src = _src().replace("    def call(self, inputs):\n        self.add_loss(",
                         "    def call(self, inputs, training=None):\n        if training:\n            self.add_loss(")
    src = src.replace("    def call(self, x):\n        self.add_loss(", "    def call(self, x, training=None):\n        self.add_loss(")
    assert "if training:" in src and "def call(self, x, training=None):" in src
    r = translate_source(src, "model.py")
    assert errors(r) == [], errors(r)
    assert "        if self.training:\n            self.added_losses = getattr(self, \"added_losses\", []) + [" in r.output
    assert not [f for f in r.findings if f.severity.name == "WARNING"], r.findings
    keras_out, torch_out = keras_and_torch(tmp_path, src, r.output, DRIVER)
    compare_fit(keras_out, torch_out, ["loss", "val_loss"])


def test_a_term_on_training_in_a_model_whose_call_takes_no_training_is_a_warning(tmp_path):
    # Keras 3.15 gives the layers of a model whose call has no training parameter training=None in fit: the term
    # under `if training:` is not made (Keras's losses are those without it), where torch's self.training is True
    src = _src().replace("    def call(self, inputs):\n        self.add_loss(",
                         "    def call(self, inputs, training=None):\n        if training:\n            self.add_loss(")
    r = translate_source(src, "model.py")
    said = [(f.severity.name, f.line) for f in r.findings if "a call without a training parameter" in f.message]
    assert said == [("WARNING", 13)], r.findings
    conditional = run_side(tmp_path / "conditional", "keras", src, DRIVER, "keras")
    unmade = _src().replace("        self.add_loss(self.rate * keras.ops.mean(keras.ops.square(inputs)))\n", "")
    assert unmade != _src()
    without = run_side(tmp_path / "without", "keras", unmade, DRIVER, "keras")
    np.testing.assert_allclose(conditional["history"]["loss"], without["history"]["loss"], rtol=1e-6)
    # the model's call with training=None passes it on: the term is made in fit, and no warning
    passed = src.replace("    def call(self, x):\n        self.add_loss(", "    def call(self, x, training=None):\n        self.add_loss(")
    assert not [f for f in translate_source(passed, "model.py").findings if f.severity.name == "WARNING"]


def test_an_add_loss_in_a_nested_function_keeps_the_loss_less_compile_an_error():
    # the subclass pass keeps no term made in a nested function (its add_loss stays an error): the loop would have none
    src = _src().replace("    def call(self, inputs):\n        self.add_loss(",
                         "    def call(self, inputs):\n        def penalize():\n            self.add_loss(")
    src = src.replace("keras.ops.square(inputs)))\n        return inputs",
                      "keras.ops.square(inputs)))\n        penalize()\n        return inputs")
    assert "penalize()" in src
    r = translate_source(src, "model.py")
    lines = src.splitlines()
    errs = dict(errors(r))
    compile_at = next(i for i, s in enumerate(lines) if s.startswith("net.compile(")) + 1
    assert "reproduce only where every add_loss is a statement self.add_loss(term)" in errs.get(compile_at, ""), errs
    assert any("torch modules have no add_loss" in m for m in errs.values()), errs


def test_metrics_beside_a_loss_less_compile_stay_an_error():
    src = _src().replace("learning_rate=0.3)", "learning_rate=0.3), metrics=[\"mae\"]")
    r = translate_source(src, "model.py")
    lines = src.splitlines()
    errs = dict(errors(r))
    compile_at = next(i for i, s in enumerate(lines) if s.startswith("net.compile(")) + 1
    assert "add_loss alone), and metrics= beside it are not translated" in errs.get(compile_at, ""), errs


def test_a_loss_less_compile_in_a_file_with_training_code_of_its_own_stays_an_error():
    src = _src() + textwrap.dedent('''

        import tensorflow as tf


        def step(x, optimizer):
            with tf.GradientTape() as tape:
                loss = sum(net.losses)
            optimizer.apply_gradients(zip(tape.gradient(loss, net.trainable_variables), net.trainable_variables))
    ''')
    r = translate_source(src, "model.py")
    lines = src.splitlines()
    errs = dict(errors(r))
    compile_at = next(i for i, s in enumerate(lines) if s.startswith("net.compile(")) + 1
    assert "Keras then trains the model on the terms its layers give add_loss alone" in errs.get(compile_at, ""), errs
    # (without add_loss in the file the reason stays the plain one)
    plain = translate_source(src.replace("self.add_loss(", "print("), "model.py")
    assert not any("add_loss alone" in f.message for f in plain.findings)
    assert any(f.line == compile_at and f.message.endswith("no loss is given)") for f in plain.findings)


@pytest.mark.parametrize("lr", [0.0, 0.3])
def test_keras_trains_a_loss_less_compile_on_the_added_terms_alone(tmp_path, lr):
    """The fact the written loop reproduces, measured in Keras alone: with a learning rate of 0 the History's loss is,
    per epoch, the mean over the batches of the sum of both layers' terms (computed here in numpy from the weights);
    with 0.3 it falls."""
    src = textwrap.dedent(MEASURED).lstrip("\n").replace("LR", repr(lr))
    src += textwrap.dedent('''
        import json
        W = [w.numpy().tolist() for w in net.weights]
        print("WEIGHTS " + json.dumps(W))
        print("LOSS " + json.dumps(h.history["loss"]))
    ''')
    (tmp_path / "model.py").write_text(src)
    out = python(tmp_path / "model.py", side="keras", timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    got = {k: json.loads(v) for k, v in (line.split(" ", 1) for line in out.stdout.splitlines()
                                         if line.startswith(("WEIGHTS ", "LOSS ")))}
    loss = got["LOSS"]
    assert len(loss) == 2
    if lr == 0.0:
        k1, b1, k2, b2 = (np.asarray(w, dtype=np.float64) for w in got["WEIGHTS"])
        x = np.random.default_rng(0).normal(size=(12, 4)).astype("float32").astype(np.float64)
        terms = []
        for start in range(0, 12, 4):
            h1 = np.tanh(x[start:start + 4] @ k1 + b1)
            o = h1 @ k2 + b2
            terms.append(0.1 * np.mean(h1 ** 2) + 0.5 * np.mean(o ** 2))
        np.testing.assert_allclose(loss, [np.mean(terms)] * 2, rtol=1e-5)
    else:
        assert loss[1] < loss[0]
