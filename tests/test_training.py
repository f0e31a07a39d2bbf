"""The training pass (fwport/packs/tf2torch/passes/training.py): GradientTape steps, the training flag,
optimizers over the model's parameters, loss calls in torch's order; and what it refuses, once,
with a message saying what to write. Numbers are checked by tests/test_verify_train.py and the
fixtures tape_classifier, tape_regression_rmsprop and loss_values."""
from __future__ import annotations

from collections import Counter

from fwport.core.pipeline import translate_source
from helpers import error_counts as _errors
from runners import python

HEAD = '''import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
'''

STEP = '''

def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
'''


def _t(src: str):
    return translate_source(src, "t.py")


def test_tape_step_becomes_zero_grad_backward_step():
    r = _t(HEAD + "loss_fn = keras.losses.MeanSquaredError()\noptimizer = keras.optimizers.SGD(0.1)\n" + STEP)
    assert not _errors(r), r.findings
    assert '''def train_step(x, y):
    optimizer.zero_grad()
    model.train()
    y_pred = model(x)
    loss = loss_fn(y_pred, y.view_as(y_pred))
    loss.backward()
    optimizer.step()
    return loss
''' in r.output
    assert "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)" in r.output
    assert "tensorflow" not in r.output and "keras" not in r.output


def test_translation_is_a_fixpoint_and_keeps_lines():
    src = HEAD + "loss_fn = keras.losses.Huber()\noptimizer = keras.optimizers.Adam()\n" + STEP
    r = _t(src)
    again = translate_source(r.output, "t.py")
    assert again.output == r.output
    # findings point at the source's lines: the tape line and the model call
    lines = {f.message.split(" ")[0]: f.line for f in r.findings if f.code == "idiom-replaced"}
    assert lines == {"tf.GradientTape": 10, "training=True": 11, "loss_fn(y,": 11}


def test_training_flag_variable_and_false():
    src = HEAD + '''

def run(x, flag):
    a = model(x, training=flag)
    b = model(x, training=False)
    return a, b
'''
    out = _t(src).output
    assert "    model.train(flag)\n    a = model(x)\n    model.eval()\n    b = model(x)\n" in out


def test_an_unresolved_callee_called_with_training_is_taken_for_a_model():
    """``training=`` is the call-mode argument of Keras models and layers, which a translated module
    does not take: a parameter, an attribute or a subscript called with it gets train()/eval(), on a
    line before the statement or (in a comprehension or lambda binding it) on the spot."""
    src = HEAD + '''

def run(layer, x):
    return layer(x, training=True)


class Trainer:
    def __init__(self, model):
        self.model = model

    def step(self, x, models):
        a = self.model(x, training=False)
        b = [m(x, training=False) for m in models]
        c = models[0](x, training=self.flag)
        return a, b, c
'''
    r = _t(src)
    assert not _errors(r), r.findings
    out = r.output
    assert "    layer.train()\n    return layer(x)\n" in out
    assert "        self.model.eval()\n        a = self.model(x)\n" in out
    assert "        b = [m.eval()(x) for m in models]\n" in out
    assert "        models[0].train(self.flag)\n        c = models[0](x)\n" in out
    notes = [f.message for f in r.findings if f.code == "idiom-replaced" and "taken for a Keras model" in f.message]
    assert len(notes) == 4
    # and the output runs: train()/eval() return the module, the mode is set on each
    import torch
    from torch import nn

    ns: dict = {}
    exec(compile(out, "t_torch.py", "exec"), ns)
    nets = [nn.Dropout(0.5), nn.Dropout(0.5)]
    t = ns["Trainer"](nn.Dropout(0.5))
    t.flag = True
    x = torch.ones(1000)
    a, b, c = t.step(x, nets)
    assert torch.equal(a, x) and torch.equal(b[0], x) and not torch.equal(c, x)
    assert nets[0].training and not nets[1].training and not t.model.training


def test_a_function_or_import_of_the_file_keeps_its_training_argument():
    src = HEAD + '''from mylib import run


def forward(x, training):
    return x


def go(x):
    return forward(x, training=True), run(x, training=True)
'''
    out = _t(src).output
    assert "return forward(x, training=True), run(x, training=True)" in out


def test_optimizer_created_before_the_model_moves_after_it():
    """A torch optimizer takes its parameters when it is created: the line moves below the model's (nothing in
    between reads it); test_optimizer_moved.py checks the training numerically and the cases that stay errors."""
    src = '''import tensorflow as tf
from tensorflow import keras

optimizer = keras.optimizers.Adam()
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
loss_fn = keras.losses.MeanSquaredError()
''' + STEP
    r = _t(src)
    assert not _errors(r), r.findings
    lines = r.output.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("optimizer = torch.optim.Adam(model.parameters()"))
    assert lines[at - 1].startswith("model = ")


def test_optimizer_created_before_the_model_and_read_in_between_is_one_error():
    src = '''import tensorflow as tf
from tensorflow import keras

optimizer = keras.optimizers.Adam()
print(optimizer)
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
loss_fn = keras.losses.MeanSquaredError()
''' + STEP
    r = _t(src)
    assert _errors(r) == Counter({("unsupported-construct", 4): 1}), r.findings
    msg = next(f.message for f in r.findings if f.line == 4 and f.severity.value == "error")
    assert "created before model" in msg and "move it after" in msg and "optimizer is read in between" in msg
    assert "optimizer = keras.optimizers.Adam()" in r.output


def test_optimizer_in_a_function_over_a_module_model():
    src = HEAD + "loss_fn = keras.losses.MeanSquaredError()\n" + '''

def fit(xs, ys):
    optimizer = keras.optimizers.RMSprop(learning_rate=0.01)
    for x, y in zip(xs, ys):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
'''
    r = _t(src)
    assert not _errors(r), r.findings
    assert "optimizer = torch.optim.RMSprop(model.parameters(), lr=0.01, alpha=0.9, eps=1e-07)" in r.output
    assert "        loss.backward()\n        optimizer.step()\n" in r.output


def test_optimizer_without_apply_gradients_is_an_error():
    r = _t(HEAD + "\nopt = keras.optimizers.Adam()\n")
    msgs = [f.message for f in r.findings if f.severity.value == "error"]
    assert any("cannot tell which" in m and "opt = keras.optimizers.Adam()" in m for m in msgs), msgs


def test_compile_fit_evaluate_predict_become_the_written_out_loop():
    src = HEAD + '''model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")


def run(x, y):
    h = model.fit(x, y, epochs=2, validation_split=0.25, verbose=0)
    return h.history["val_loss"], model.evaluate(x, y), model.predict(x, batch_size=8)
'''
    r = _t(src)
    assert not _errors(r), r.findings
    out = r.output
    assert "optimizer = torch.optim.SGD(model.parameters(), lr=0.05)\nloss_fn = nn.MSELoss()\n" in out
    assert "h = fit(model, optimizer, loss_fn, x, y, epochs=2, verbose=0, validation_split=0.25)" in out
    assert 'return h["val_loss"], evaluate(model, loss_fn, x, y), predict(model, x, batch_size=8)' in out
    assert translate_source(out, "t.py").output == out  # a fixpoint


def test_generated_fit_keeps_keras_semantics(tmp_path):
    """Run the written-out loop (torch only): the validation samples are the last ones, taken before
    shuffling; the history holds per-epoch averages; evaluate and predict run in inference mode."""
    src = HEAD + '''model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])


def train(x, y):
    return model.fit(x, y), model.evaluate(x, y), model.predict(x)
'''
    out = _t(src).output
    assert "keras" not in out
    script = out + '''
import numpy as np
torch.manual_seed(0)
x = np.random.default_rng(0).normal(size=(40, 4)).astype("float64")
y = np.arange(40) % 2
h = fit(model, optimizer, loss_fn, x, y, epochs=3, batch_size=7, validation_split=0.25, verbose=0)
assert sorted(h) == ["accuracy", "loss", "val_accuracy", "val_loss"], sorted(h)
assert all(len(v) == 3 for v in h.values())
last = evaluate(model, loss_fn, x[30:], y[30:], verbose=0)
# the same numbers, up to float32 rounding of a summed loss (the model's initial weights are random)
assert abs(last[0] - h["val_loss"][-1]) <= 1e-6 * max(1.0, abs(last[0])), (last, h["val_loss"])
assert abs(last[1] - h["val_accuracy"][-1]) < 1e-6, (last, h["val_accuracy"])
assert evaluate(model, loss_fn, x[:10], y[:10], verbose=0) != last
p = predict(model, x, batch_size=7)
assert isinstance(p, np.ndarray) and p.shape == (40, 2) and p.dtype == np.float32
print("ok")
'''
    (tmp_path / "run.py").write_text(script)
    proc = python(tmp_path / "run.py", side="torch", timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_compile_the_loop_cannot_reproduce_stays_a_model_api_error():
    r = _t(HEAD + 'model.compile(optimizer="adam", loss="mse", metrics=["mae", "auc"])\nmodel.fit(x, y)\n')
    msgs = [f.message for f in r.findings if f.severity.value == "error"]
    assert any(m.startswith("model.compile(...) is a Keras model method") for m in msgs), msgs
    assert any(m.startswith("model.fit(...) is a Keras model method") for m in msgs), msgs
    # the compile's error says why the written-out loop does not reproduce it
    assert any("but not this one: the metric 'auc' is not translated" in m for m in msgs), msgs


SEVERAL_COMPILES = """import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

rng = np.random.default_rng(0)
x = rng.normal(size=(32, 4)).astype("float32")
y = (np.arange(32) % 3).astype("int64")
t = x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32")

model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
h1 = model.fit(x, y, epochs=2, batch_size=8, verbose=0)

model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3)])
model.compile(optimizer="rmsprop", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
h2 = model.fit(x, y, epochs=1, batch_size=8, verbose=0)

reg = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(1, kernel_initializer="zeros")])
reg.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="mse")
h3 = reg.fit(x, t, epochs=1, batch_size=32, shuffle=False, verbose=0)
"""

CHECK_SEVERAL = """
with torch.no_grad():  # torch initialises its own way: from zeros, one more epoch of the regression's fit
    reg[0].weight.zero_()
    reg[0].bias.zero_()
fit_2(reg, reg_optimizer, reg_loss_fn, x, t, epochs=1, batch_size=32, shuffle=False, verbose=0)
w = reg[0].weight.detach().numpy().ravel()
# one step of full-batch SGD from zero weights on mean((x @ w + b - t)^2): w = 0.1 * 2 * x.T @ t / N
want = 0.1 * 2 * x.T @ t / len(x)
assert np.allclose(w, want, rtol=1e-5, atol=1e-6), (w, want)
assert len(h1["loss"]) == 2 and len(h2["loss"]) == 1 and "accuracy" in h2 and list(h3) == ["loss"]
print("ok")
"""


def test_several_compiles_each_fit_uses_the_last_compile_of_its_model(tmp_path):
    """A notebook compiles one model after another: each compile becomes its optimizer and loss (a
    second model's under its own names), each fit calls the functions written for its loss (compiles
    whose loops are the same text share them), and the regression's one full-batch SGD step is the
    one Keras takes (checked against the formula)."""
    r = _t(SEVERAL_COMPILES)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    out = r.output
    assert out.count("\ndef fit(") == 1 and out.count("\ndef fit_2(") == 1 and "def fit_3" not in out
    assert out.count("\ndef as_float32(") == 1  # the array conversion is written once
    assert "optimizer = torch.optim.Adam(model.parameters()" in out
    assert "optimizer = torch.optim.RMSprop(model.parameters()" in out
    assert "reg_optimizer = torch.optim.SGD(reg.parameters(), lr=0.1)" in out
    assert "h2 = fit(model, optimizer, loss_fn, x, y" in out
    assert "h3 = fit_2(reg, reg_optimizer, reg_loss_fn, x, t" in out
    (tmp_path / "run.py").write_text("import sys\nsys.modules['tensorflow'] = None\n" + out + CHECK_SEVERAL)
    proc = python(tmp_path / "run.py", side="torch", timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


FACTORY = """import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(0)
x = rng.normal(size=(40, 6)).astype("float32")
y = (np.arange(40) % 4).astype("int64")


def get_model(units=8):
    model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(units, activation="relu"), layers.Dense(4)])
    model.compile(optimizer="rmsprop", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


model = get_model()
h = model.fit(x, y, epochs=2, batch_size=8, validation_split=0.25, verbose=0)
small = get_model(4)
score = small.evaluate(x, y, verbose=0)
"""


def test_a_model_factory_returns_its_optimizer_and_loss_beside_the_model(tmp_path):
    """`def get_model(): ... model.compile(...); return model` (Chollet's and the TF tutorials' way): the
    factory returns (model, optimizer, loss_fn) and each `m = get_model()` binds the three, m's fits
    use them; run without TensorFlow, each model trains with its own optimizer."""
    r = _t(FACTORY)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    out = r.output
    assert "    return model, optimizer, loss_fn\n" in out
    assert "model, optimizer, loss_fn = get_model()" in out
    assert "small, small_optimizer, small_loss_fn = get_model(4)" in out
    assert "h = fit(model, optimizer, loss_fn, x, y" in out and "score = evaluate(small, small_loss_fn, x, y" in out
    check = """
assert small_optimizer is not optimizer and small_optimizer.param_groups[0]["params"][0] is small[0].weight
assert len(h["loss"]) == 2 and len(h["val_accuracy"]) == 2 and len(score) == 2
print("ok")
"""
    (tmp_path / "run.py").write_text("import sys\nsys.modules['tensorflow'] = sys.modules['keras'] = None\n"
                                     + out + check)
    proc = python(tmp_path / "run.py", side="torch", timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
    # a call that takes the model alone (`get_model().fit(...)`) gets the model, and its fit the error; the
    # factory's other calls keep their optimizer and loss
    r = _t(FACTORY + "get_model().fit(x, y)\n")
    msgs = [(f.line, f.message) for f in r.findings if f.severity.value == "error"]
    assert [line for line, _ in msgs] == [21] and msgs[0][1].startswith("get_model()[0].fit(...) is a Keras model"), msgs
    assert "model, optimizer, loss_fn = get_model()" in r.output and "get_model()[0].fit(x, y)" in r.output


MIXED_LAYOUTS = """import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

x = np.random.default_rng(0).normal(size=(8, 6, 6, 1)).astype("float32")
y = np.arange(8) % 3


def build():
    inp = keras.Input((6, 6, 1))
    h = layers.Conv2D(2, 3)(inp)
    return keras.Model(inp, layers.Dense(3)(layers.Flatten()(h)))


fm = build()
fm.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
fm.fit(x, y, epochs=1, verbose=0)
cnn = keras.Sequential([keras.Input((6, 6, 1)), layers.Conv2D(2, 3), layers.Flatten(), layers.Dense(3)])
cnn.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
cnn.fit(x, y, epochs=1, verbose=0)
scores = fm.evaluate(x, y, verbose=0), cnn.evaluate(x, y, verbose=0)
"""


def test_a_functional_model_and_a_channels_first_sequential_get_their_own_fit(tmp_path):
    """A functional model keeps Keras's layout and a Sequential CNN takes NCHW: the same loss, but the
    Sequential's fit moves the images channels-first and the functional model's does not."""
    r = _t(MIXED_LAYOUTS)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    out = r.output
    assert "fit(fm, optimizer, loss_fn, x, y" in out and "fit_2(cnn, cnn_optimizer, cnn_loss_fn, x, y" in out
    assert out.count("\ndef channels_first(") == 1 and "__fwport" not in out
    fit_1 = out[out.index("\ndef fit("):out.index("\ndef evaluate(")]
    fit_2 = out[out.index("\ndef fit_2("):out.index("\ndef evaluate_2(")]
    assert "channels_first(x)" not in fit_1 and "channels_first(x)" in fit_2
    (tmp_path / "run.py").write_text("import sys\nsys.modules['tensorflow'] = None\n" + out
                                     + "\nassert all(isinstance(s, float) for s in scores), scores\nprint('ok')\n")
    proc = python(tmp_path / "run.py", side="torch", timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_tapes_it_does_not_translate_are_one_error_each():
    src = HEAD + '''loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.SGD(0.1)


def unwatched(x, y):
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def returned(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return grads
'''
    r = _t(src)
    errors = [f for f in r.findings if f.severity.value == "error"]
    tape_errors = [f for f in errors if f.message.startswith("tf.GradientTape")]
    assert [f.line for f in tape_errors] == [10, 17], errors
    assert "watch_accessed_variables" in tape_errors[0].message and "used after the step" in tape_errors[1].message
    # the rule pass does not report the same tape again as no-rule
    assert not [f for f in errors if f.code == "no-rule" and "GradientTape" in f.message]
    assert r.output.count("# fwport: unsupported-construct: tf.GradientTape") == 2


def test_a_persistent_tape_with_one_gradient_is_a_plain_step():
    """persistent=True changes nothing where one gradient is taken (keras-io cyclegan and gan_ada take
    several: tests/test_train_step.py)."""
    r = _t(HEAD + '''loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.SGD(0.1)


def persistent(x, y):
    with tf.GradientTape(persistent=True) as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
''')
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "    optimizer.zero_grad()\n" in r.output and "    loss.backward()\n    optimizer.step()\n" in r.output


def test_loss_calls_follow_torch_order_and_a_loss_whose_calls_are_unknown_is_refused():
    src = HEAD + '''ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
bce = keras.losses.BinaryCrossentropy()


def losses(x, y):
    logits = model(x)
    direct = keras.losses.MeanSquaredError()(y, logits)
    unknown = [keras.losses.MeanSquaredError()]
    return ce(y, logits) + bce(y, tf.sigmoid(logits)), direct, unknown
'''
    r = _t(src)
    # a prediction written as an expression is bound to a name first, whose shape the labels take
    assert "    y_pred = torch.sigmoid(logits)\n" in r.output
    assert "ce(logits.movedim(-1, 1), y.long().reshape(logits.shape[:-1])) + bce(y_pred.clamp(1e-7, 1 - 1e-7), y.float().view_as(y_pred))" in r.output
    # a loss object created and called at once is called as a named one (numbers:
    # tests/test_loss_rebound_alike.py); one in a list is not followed
    assert "direct = nn.MSELoss()(logits, y.view_as(logits))" in r.output
    msgs = [f.message for f in r.findings if f.severity.value == "error"]
    assert any(m.startswith("MeanSquaredError(...): torch losses take (input, target)") for m in msgs), msgs


def test_loss_with_sample_weight_is_refused():
    src = HEAD + "loss_fn = keras.losses.MeanSquaredError()\nv = loss_fn(y, p, sample_weight=w)\n"
    r = _t(src)
    assert any("sample_weight" in f.message for f in r.findings if f.severity.value == "error")
    assert "loss_fn(y, p, sample_weight=w)" in r.output


def test_seeds():
    src = "import tensorflow as tf\nimport keras\n\ntf.random.set_seed(1)\nkeras.utils.set_random_seed(2)\n"
    out = _t(src).output
    # tf.random.set_seed seeds TensorFlow alone; keras.utils.set_random_seed also Python's random and NumPy
    assert out.startswith("import torch\n\n\ndef set_random_seed(seed):\n")
    assert out.endswith("\n\ntorch.manual_seed(1)\nset_random_seed(2)\n")


def test_compile_of_a_model_made_elsewhere():
    """A name the file never binds (a model from another module, a snippet) is compiled and fitted
    at module level: translated; a model compiled inside a function that does not train it there
    keeps Keras's compile (the optimizer would be a local a torch module cannot carry)."""
    snippet = ("import tensorflow as tf\nmodel.compile(optimizer='adam', loss='binary_crossentropy'); "
               "result = model.fit(x, tf.constant([0., 1.]), epochs=1, verbose=0).history\n")
    out = _t(snippet).output
    assert out.endswith("optimizer = torch.optim.Adam(model.parameters(), eps=1e-07)\nloss_fn = nn.BCELoss()\n"
                        "result = fit(model, optimizer, loss_fn, x, torch.tensor([0., 1.]), epochs=1, verbose=0)\n")
    assert "\ndef fit(model, optimizer, loss_fn" in out
    inside = ('import tensorflow as tf\n\n\ndef compile_model(model):\n'
              '    model.compile(optimizer="adam", loss="mse")\n    return model\n')
    assert 'model.compile(optimizer="adam", loss="mse")' in _t(inside).output


def test_global_norm_clipping_in_a_tape_step():
    src = HEAD + '''loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.SGD(0.1)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    grads, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
'''
    r = _t(src)
    assert not _errors(r), r.findings
    assert ("    loss.backward()\n    nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    optimizer.step()\n"
            in r.output)
    assert [f.line for f in r.findings if "clip_by_global_norm" in f.message] == [13]


def test_optimizer_clipping_of_a_compile_goes_into_the_written_fit():
    """The compile's optimizer clips in the written-out loop, between backward() and step(); given to the
    compile of a model with its own train_step (a factory, which cannot clip), it stays an error."""
    r = _t(HEAD + 'model.compile(optimizer=keras.optimizers.Adam(global_clipnorm=1.0), loss="mse")\n'
           "model.fit(x, y)\n")
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    lines = [ln.strip() for ln in r.output.splitlines()]
    at = lines.index("loss.backward()")
    assert lines[at + 1:at + 3] == ["nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "optimizer.step()"]
    r = _t("import tensorflow as tf\nfrom tensorflow import keras\n\n"
           "gan.compile(optimizer=keras.optimizers.Adam(global_clipnorm=1.0))\n")
    assert any(f.severity.value == "error" and f.message.startswith("global_clipnorm: torch optimizers do not clip")
               for f in r.findings), r.findings


def test_a_fit_on_a_factory_model_fwport_cannot_match_is_an_error():
    # the fit comes before both bindings of `model`: no compile to use, and its binding is rewritten
    # (`model, optimizer, loss_fn = get_model()`), so it must not be left silently
    r = _t(FACTORY.replace("model = get_model()\n", "model.fit(x, y)\nmodel = get_model()\nmodel = get_model()\n", 1))
    errs = [(f.line, f.message) for f in r.findings if f.severity.value == "error"]
    assert any("model.fit(x, y): model comes from a model factory" in m for _, m in errs), errs
    assert "# fwport: unsupported-construct: model.fit(x, y): model comes from a model factory" in r.output
