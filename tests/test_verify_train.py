"""``fwport verify --check train`` can fail: plant each known training-code bug (an optimizer default
left at torch's, a probability loss given logits, a missing clip, a momentum dropped) in a correct
translation and check that the trained parameters or the losses no longer match. One warm pair of
framework subprocesses serves every case."""
from __future__ import annotations

from pathlib import Path

import pytest

from fwport.core.pipeline import translate_source
from fwport.verify import Options, verify

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "tf2torch"

# a softmax classifier trained on probabilities (Keras's default from_logits=False) with SGD + momentum
SOFTMAX_SGD = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([
    keras.Input(shape=(10,)),
    layers.Dense(16, activation="tanh"),
    layers.Dense(4, activation="softmax"),
])
loss_fn = keras.losses.SparseCategoricalCrossentropy()
optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)


def train_step(x, y):
    with tf.GradientTape() as tape:
        probs = model(x, training=True)
        loss = loss_fn(y, probs)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
'''


def _train(session, original: Path, translated: Path, batch: list[str], steps: int = 4) -> dict:
    return verify(Options(str(original), str(translated), "model", checks=("train",), device="cpu",
                          batch=batch, steps=steps), session)


def _planted(tmp_path: Path, good: str, old: str, new: str) -> Path:
    assert old in good, f"the translation changed: {old!r} not found; update the planted bug"
    path = tmp_path / "planted.py"
    path.write_text(good.replace(old, new))
    return path


def _failed(cert: dict) -> set[str]:
    return {e["name"] for e in cert["results"]["train"] if not e["ok"]}


# --- Adam (tape_classifier: SparseCategoricalCrossentropy(from_logits=True) + Adam) ------------------

CLASSIFIER = FIXTURES / "tape_classifier"
CLASSIFIER_BATCH = ["float32[16,20]", "int64[16]:5"]


def test_adam_translation_trains_like_keras(session):
    cert = _train(session, CLASSIFIER / "model.py", CLASSIFIER / "expected.py", CLASSIFIER_BATCH)
    assert cert["verdict"] == "pass", cert["problems"]
    assert cert["train"]["optimizer"] == "torch.optim.Adam"
    names = {e["name"] for e in cert["results"]["train"]}
    assert {"loss at step 1", "loss at step 4", "0.weight", "4.bias"} <= names


def test_adam_epsilon_left_at_torch_default_is_caught(session, tmp_path):
    good = (CLASSIFIER / "expected.py").read_text()
    cert = _train(session, CLASSIFIER / "model.py", _planted(tmp_path, good, ", eps=1e-07", ""), CLASSIFIER_BATCH)
    assert cert["verdict"] == "mismatch"
    # tiny gradients are where epsilon matters: some trained parameter, not only a loss, differs
    assert any(not n.startswith("loss") for n in _failed(cert)), _failed(cert)


# --- label smoothing (CategoricalCrossentropy(from_logits=True, label_smoothing=...)) ---------------------

SMOOTHED = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([
    keras.Input(shape=(10,)),
    layers.Dense(16, activation="tanh"),
    layers.Dense(4),
])
loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.2)
optimizer = keras.optimizers.SGD(learning_rate=0.5)


def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(tf.one_hot(y, 4), logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
'''


def test_label_smoothing_trains_like_keras_and_a_dropped_smoothing_is_caught(session, tmp_path):
    """Keras smooths the one-hot targets (y * (1 - s) + s / classes), as torch's CrossEntropyLoss(label_smoothing=s)
    does: the translation trains like Keras, and with the smoothing left out the trained weights differ."""
    original = tmp_path / "smoothed.py"
    original.write_text(SMOOTHED)
    good = translate_source(SMOOTHED, "smoothed.py").output
    assert "loss_fn = nn.CrossEntropyLoss(label_smoothing=0.2)" in good
    batch = ["float32[8,10]", "int64[8]:4"]
    (tmp_path / "good.py").write_text(good)
    cert = _train(session, original, tmp_path / "good.py", batch)
    assert cert["verdict"] == "pass", cert["problems"] or _failed(cert)
    planted = _planted(tmp_path, good, "nn.CrossEntropyLoss(label_smoothing=0.2)", "nn.CrossEntropyLoss()")
    cert = _train(session, original, planted, batch)
    assert cert["verdict"] == "mismatch"
    assert {"0.weight", "2.weight"} & _failed(cert), _failed(cert)


# --- RMSprop (tape_regression_rmsprop: MSE + RMSprop with momentum) -----------------------------------

REGRESSION = FIXTURES / "tape_regression_rmsprop"
REGRESSION_BATCH = ["float32[32,12]", "float32[32]"]


@pytest.mark.parametrize("old, new", [
    # epsilon "moved inside the root" by hand: sqrt(1e-7) outside is not Keras's epsilon inside
    ("eps=1e-07", "eps=0.000316"),
    # rho not carried over: torch's alpha default 0.99
    ("alpha=0.9, ", ""),
    # the learning rate dropped: torch's RMSprop default 0.01
    ("lr=0.005, ", ""),
], ids=["epsilon-moved-inside", "rho-left-at-torch-default", "lr-left-at-torch-default"])
def test_rmsprop_bugs_are_caught(session, tmp_path, old, new):
    good = (REGRESSION / "expected.py").read_text()
    cert = _train(session, REGRESSION / "model.py", _planted(tmp_path, good, old, new), REGRESSION_BATCH)
    assert cert["verdict"] == "mismatch"
    assert {"0.weight", "0.bias"} & _failed(cert)


def test_mse_target_shape_bug_is_caught(session, tmp_path):
    """(N,) targets against (N, 1) predictions: without view_as torch broadcasts to (N, N)."""
    good = (REGRESSION / "expected.py").read_text()
    cert = _train(session, REGRESSION / "model.py", _planted(tmp_path, good, "y.view_as(pred)", "y"),
                  REGRESSION_BATCH)
    assert cert["verdict"] == "mismatch"
    assert "loss at step 1" in _failed(cert)


# --- l2 kernel regularizers in a tape step (tape_regression_l2: loss + tf.add_n(model.losses)) ----------

REGULARIZED = FIXTURES / "tape_regression_l2"
PENALTY = ' + torch.stack([m.regularization_loss() for m in model.modules() if hasattr(m, "regularization_loss")]).sum(dim=0)'


def test_l2_penalty_in_a_tape_step_trains_like_keras(session):
    cert = _train(session, REGULARIZED / "model.py", REGULARIZED / "expected.py", REGRESSION_BATCH, steps=5)
    assert cert["verdict"] == "pass", cert["problems"] or _failed(cert)
    names = {e["name"] for e in cert["results"]["train"]}
    assert {"loss at step 1", "loss at step 5", "fc1.weight", "fc2.weight"} <= names, names


@pytest.mark.parametrize("old, new", [
    (PENALTY, ""),  # model.losses dropped: the loss and the kernels' updates lack the penalty
    ("0.05 * self.fc1.weight", "0.025 * self.fc1.weight"),  # l2(λ) read as λ/2·Σw² (as in weight-decay papers)
], ids=["penalty-dropped", "penalty-halved"])
def test_l2_penalty_bugs_are_caught(session, tmp_path, old, new):
    good = (REGULARIZED / "expected.py").read_text()
    cert = _train(session, REGULARIZED / "model.py", _planted(tmp_path, good, old, new), REGRESSION_BATCH, steps=5)
    assert cert["verdict"] == "mismatch"
    assert {"loss at step 1", "fc1.weight"} <= _failed(cert), _failed(cert)


def test_model_losses_sum_in_a_tape_step_is_the_modules_penalties():
    """sum(model.losses) (and tf.add_n) read the list of the modules' regularization_loss(); a model with no
    regularizer gives an empty list, as Keras's model.losses is."""
    src = (REGULARIZED / "model.py").read_text().replace("tf.add_n(model.losses)", "sum(model.losses)")
    out = translate_source(src, "model.py").output
    assert ('loss = mse(pred, y.view_as(pred)) + sum([m.regularization_loss() for m in model.modules() '
            'if hasattr(m, "regularization_loss")])') in out
    assert "sum(model.losses)" not in out


def test_model_losses_in_a_file_with_add_loss_is_an_error():
    """Keras's model.losses also lists the terms layers give add_loss (errors of their own in a file with a tape
    step): the list of the modules' penalties alone would lack them, so the read is an error naming its line."""
    src = (REGULARIZED / "model.py").read_text().replace("def build_model():", """class Penalty(layers.Layer):
    def call(self, inputs):
        self.add_loss(0.01 * tf.reduce_sum(inputs))
        return inputs


def build_model():""").replace("    outputs = layers.Dense(1", "    h = Penalty()(h)\n    outputs = layers.Dense(1")
    r = translate_source(src, "model.py")
    found = [(f.line, f.severity.value) for f in r.findings if f.message.startswith("model.losses: Keras lists")]
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "tf.add_n(model.losses)" in t)
    assert found == [(line, "error")], found
    assert "tf.add_n(model.losses)" not in r.output and "torch.stack(model.losses)" in r.output
    step = r.output.split("def train_step")[1]
    assert "    loss = mse(pred, y.view_as(pred)) + torch.stack(model.losses).sum(dim=0)\n" in step  # left as written


# --- probabilities (softmax model, from_logits=False) and SGD momentum ------------------------------

@pytest.fixture(scope="module")
def softmax_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("softmax")
    (d / "model.py").write_text(SOFTMAX_SGD)
    r = translate_source(SOFTMAX_SGD, "model.py")
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    (d / "good.py").write_text(r.output)
    return d, r.output


def test_probability_loss_and_sgd_momentum_train_like_keras(session, softmax_files):
    d, good = softmax_files
    assert "nn.CrossEntropyLoss()" in good and "torch.log(probs.clamp(1e-7, 1 - 1e-7))" in good
    assert "torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)" in good
    cert = _train(session, d / "model.py", d / "good.py", ["float32[8,10]", "int64[8]:4"])
    assert cert["verdict"] == "pass", cert["problems"]


@pytest.mark.parametrize("old, new", [
    # from_logits ignored: torch's CrossEntropyLoss applies a second softmax to the probabilities
    ("torch.log(probs.clamp(1e-7, 1 - 1e-7))", "probs"),
    # the momentum dropped (plain SGD)
    (", momentum=0.9)", ")"),
], ids=["probabilities-fed-to-a-logits-loss", "momentum-dropped"])
def test_softmax_sgd_bugs_are_caught(session, softmax_files, tmp_path, old, new):
    d, good = softmax_files
    text = good.replace(old, new)
    assert old in good, f"the translation changed: {old!r} not found; update the planted bug"
    cert = _train(session, d / "model.py", _write(tmp_path, text), ["float32[8,10]", "int64[8]:4"])
    assert cert["verdict"] == "mismatch"
    assert _failed(cert)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "planted.py"
    path.write_text(text)
    return path


CLIPPED_SGD = '''
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(6,)), keras.layers.Dense(3)])
loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.SGD(learning_rate=0.5)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    grads, norm = tf.clip_by_global_norm(grads, 0.05)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
'''


def test_global_norm_clipping_trains_like_keras_and_a_dropped_clip_is_caught(session, tmp_path):
    (tmp_path / "model.py").write_text(CLIPPED_SGD)
    good = translate_source(CLIPPED_SGD, "model.py").output
    (tmp_path / "good.py").write_text(good)
    batch = ["float32[8,6]", "float32[8,3]"]
    assert _train(session, tmp_path / "model.py", tmp_path / "good.py", batch)["verdict"] == "pass"
    line = "    norm = nn.utils.clip_grad_norm_(model.parameters(), 0.05)\n"
    cert = _train(session, tmp_path / "model.py", _planted(tmp_path, good, line, ""), batch)
    assert cert["verdict"] == "mismatch" and {"0.weight", "0.bias"} <= _failed(cert)


OPTIMIZER_CLIPPING = '''
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(6,)), keras.layers.Dense(3)])
loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.SGD(learning_rate=0.5, {clip})


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
'''


@pytest.mark.parametrize("clip, line", [
    ("global_clipnorm=0.05", "    nn.utils.clip_grad_norm_(model.parameters(), 0.05)\n"),
    ("clipvalue=0.01", "    nn.utils.clip_grad_value_(model.parameters(), 0.01)\n"),
])
def test_optimizer_clipping_trains_like_keras_and_a_dropped_clip_is_caught(session, tmp_path, clip, line):
    src = OPTIMIZER_CLIPPING.replace("{clip}", clip)
    (tmp_path / "model.py").write_text(src)
    good = translate_source(src, "model.py").output
    (tmp_path / "good.py").write_text(good)
    batch = ["float32[8,6]", "float32[8,3]"]
    assert _train(session, tmp_path / "model.py", tmp_path / "good.py", batch)["verdict"] == "pass"
    cert = _train(session, tmp_path / "model.py", _planted(tmp_path, good, line, ""), batch)
    assert cert["verdict"] == "mismatch" and "0.weight" in _failed(cert)


# --- Keras's clipping of probabilities (loss_values: a plain loss function, forward check) ------------

def test_missing_probability_clip_is_caught(session, tmp_path):
    case = FIXTURES / "loss_values"
    good = (case / "expected.py").read_text()
    opts = dict(checks=("forward",), device="cpu", kind="function")
    name = "sparse_from_saturated_probabilities"
    inputs = ["float32[6,5]", "int64[6]:5"]
    ok = verify(Options(str(case / "model.py"), str(case / "expected.py"), name, inputs=inputs, **opts), session)
    assert ok["verdict"] == "pass", ok["problems"]
    bad = _planted(tmp_path, good, "torch.log(p.clamp(1e-7, 1 - 1e-7))", "torch.log(p)")
    cert = verify(Options(str(case / "model.py"), str(bad), name, inputs=inputs, **opts), session)
    assert cert["verdict"] == "mismatch"


def test_cli_train_check_needs_the_step_arguments(tmp_path):
    """`fwport verify --check train` without --batch is a usage error (exit 2) that says what to give."""
    from click.testing import CliRunner

    from fwport.verify.cli import verify_command

    r = CliRunner().invoke(verify_command, [str(CLASSIFIER / "model.py"), str(CLASSIFIER / "expected.py"),
                                            "--model", "model", "--check", "train"])
    assert r.exit_code == 2, r.output
    assert "--batch 'float32[8,20]'" in r.output


# --- a learning-rate schedule with per-variable clipping (schedule_clipping: compile/fit, Adam) --------

SCHEDULED = FIXTURES / "schedule_clipping"
SCHEDULED_BATCH = ["float32[16,10]", "int64[16]:3"]


@pytest.mark.parametrize("old, new, why", [
    ("            scheduler.step()\n", "", "the schedule never stepped: the first rate throughout"),
    ("scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule)",
     "scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_schedule(step + 1))",
     "the schedule evaluated one step late (stepped before optimizer.step())"),
    ("            for param in model.parameters():\n                nn.utils.clip_grad_norm_(param, 0.05)\n",
     "            nn.utils.clip_grad_norm_(model.parameters(), 0.05)\n",
     "clipnorm read as a global clip"),
])
def test_schedule_and_clipping_bugs_are_caught(session, tmp_path, old, new, why):
    good = (SCHEDULED / "expected.py").read_text()
    cert = _train(session, SCHEDULED / "model.py", _planted(tmp_path, good, old, new), SCHEDULED_BATCH, steps=3)
    assert cert["verdict"] == "mismatch", why
    assert _failed(cert), why


# --- a Model subclass with train_step / test_step, fit with validation_data (train_step_evaluate) -------

EVALUATED = FIXTURES / "train_step_evaluate"


def test_validation_without_metric_reset_is_caught(session, tmp_path):
    """TrainStepModule.evaluate resets the metrics before calling test_step, as Keras does: without the
    reset the validation loss averages in the epoch's training losses."""
    good = (EVALUATED / "expected.py").read_text()
    old = "        for metric in getattr(self, \"metrics\", []):\n            metric.reset_state()\n        if hasattr(x, \"shape\"):  # arrays: batches of samples\n            xs = torch.as_tensor(x)\n            xs = xs.float() if xs.is_floating_point() else xs\n            ys"
    new = "        if hasattr(x, \"shape\"):  # arrays: batches of samples\n            xs = torch.as_tensor(x)\n            xs = xs.float() if xs.is_floating_point() else xs\n            ys"
    cert = verify(Options(str(EVALUATED / "model.py"), str(_planted(tmp_path, good, old, new)), "net",
                          checks=("train",), device="cpu", batch=["float32[16,6]", "float32[16,1]"], steps=3), session)
    assert cert["verdict"] == "mismatch"
    assert {"loss at step 1", "loss at step 2", "loss at step 3"} & _failed(cert)


# --- Nadam, Adamax, AdamW, Adagrad: the momentum schedule and the defaults --------------------------

NADAM_ADAMAX = '''
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(6,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(3)])
loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.{opt}


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
'''


@pytest.mark.parametrize("opt, torch_opt, old, new", [
    # torch's momentum schedule 0.96 ** (0.004 t) instead of Keras's 0.96 ** t
    ("Nadam(learning_rate=0.05)", "torch.optim.NAdam", ", momentum_decay=1.0", ""),
    # the learning rate left at torch's default 2e-3
    ("Nadam()", "torch.optim.NAdam", "lr=0.001, ", ""),
    ("Adamax(learning_rate=0.05)", "torch.optim.Adamax", "lr=0.05", "lr=0.045"),
    ("Adamax()", "torch.optim.Adamax", "lr=0.001, ", ""),
    # Keras's decoupled decay given to torch's AdamW, whose default is 0.01
    ("AdamW(learning_rate=0.05, weight_decay=0.1)", "torch.optim.AdamW", "weight_decay=0.1, ", ""),
    # Keras Adam's decoupled decay → AdamW; torch Adam's weight_decay adds wd * p to the gradient (coupled)
    ("Adam(learning_rate=0.05, weight_decay=0.1)", "torch.optim.AdamW", "torch.optim.AdamW(", "torch.optim.Adam("),
    # torch NAdam's decay is coupled unless decoupled_weight_decay=True
    ("Nadam(learning_rate=0.05, weight_decay=0.2)", "torch.optim.NAdam", ", decoupled_weight_decay=True", ""),
    # without momentum torch SGD's coupled decay takes Keras's decoupled step: a dropped decay is caught
    ("SGD(learning_rate=0.1, weight_decay=0.2)", "torch.optim.SGD", ", weight_decay=0.2", ""),
    # torch's accumulator starts at 0, Keras's at 0.1
    ("Adagrad(learning_rate=0.1)", "torch.optim.Adagrad", ", initial_accumulator_value=0.1", ""),
], ids=["nadam-momentum-decay", "nadam-lr-default", "adamax-lr", "adamax-lr-default", "adamw-decay-default",
        "adam-decay-coupled", "nadam-decay-coupled", "sgd-decay-dropped", "adagrad-accumulator-default"])
def test_nadam_adamax_adamw_adagrad_train_like_keras_and_their_bugs_are_caught(session, tmp_path, opt, torch_opt, old,
                                                                               new):
    src = NADAM_ADAMAX.replace("{opt}", opt)
    (tmp_path / "model.py").write_text(src)
    good = translate_source(src, "model.py").output
    assert f"{torch_opt}(model.parameters()" in good
    (tmp_path / "good.py").write_text(good)
    batch = ["float32[8,6]", "float32[8,3]"]
    cert = _train(session, tmp_path / "model.py", tmp_path / "good.py", batch, steps=5)
    assert cert["verdict"] == "pass", cert["problems"]
    assert cert["train"]["optimizer"] == torch_opt
    cert = _train(session, tmp_path / "model.py", _planted(tmp_path, good, old, new), batch, steps=5)
    assert cert["verdict"] == "mismatch" and {"0.weight", "2.weight"} & _failed(cert)


@pytest.mark.parametrize("opt", ["SGD(learning_rate=0.1, momentum=0.9, weight_decay=0.2)",
                                 "SGD(momentum=m, weight_decay=0.2)"])
def test_sgd_decay_with_momentum_is_refused(opt):
    """torch SGD's velocity accumulates its coupled decay, Keras's does not: an error naming the line, no output."""
    src = "m = 0.9\n" + NADAM_ADAMAX.replace("{opt}", opt)
    result = translate_source(src, "model.py")
    errors = [f for f in result.findings if f.code == "unsupported-argument" and "weight_decay" in f.message]
    assert len(errors) == 1 and errors[0].line == 8 and "p.mul_(1 - lr * wd)" in errors[0].message
    assert "torch.optim.SGD" not in result.output


def test_adam_weight_decay_none_is_plain_adam():
    result = translate_source(NADAM_ADAMAX.replace("{opt}", "Adam(weight_decay=None)"), "model.py")
    assert "torch.optim.Adam(model.parameters(), eps=1e-07)" in result.output
