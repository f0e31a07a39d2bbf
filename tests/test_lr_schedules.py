"""Learning-rate schedules and optimizer clipping (passes/training.py, optim.py, fitloop.py).

A Keras optimizer given a schedule evaluates it at ``optimizer.iterations`` before every update; the
translation creates the torch optimizer with ``lr=1.0`` and a ``LambdaLR`` over the written-out
schedule class, stepped after every ``optimizer.step()``. The rates are compared numerically: the
rate each of the first steps of Keras's optimizer uses (read from the update of a variable with a
gradient of one under plain SGD) against the rate of the translated optimizer at the same step.
"""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

PROGRAM = '''import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(2)])
{prelude}lr_schedule = {schedule}
optimizer = keras.optimizers.SGD(learning_rate=lr_schedule)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
'''

# the TensorFlow Transformer tutorial's schedule (rate 0 at step 0: rsqrt(0) is inf, the minimum 0)
CUSTOM = '''

class CustomSchedule(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, d_model, warmup_steps=4000):
        super().__init__()
        self.d_model = d_model
        self.d_model = tf.cast(self.d_model, tf.float32)
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = tf.cast(step, dtype=tf.float32)
        arg1 = tf.math.rsqrt(step)
        arg2 = step * (self.warmup_steps ** -1.5)
        return tf.math.rsqrt(self.d_model) * tf.math.minimum(arg1, arg2)


'''

# keras-io shiftvit's warmup cosine (its hyperparameters stored as Python ints, cast with tf.cast: torch.as_tensor)
WARMUP_COSINE = '''
import numpy as np


class WarmUpCosine(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, lr_start, lr_max, warmup_steps, total_steps):
        super().__init__()
        self.lr_start = lr_start
        self.lr_max = lr_max
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.pi = tf.constant(np.pi)

    def __call__(self, step):
        cos_annealed_lr = tf.cos(
            self.pi
            * (tf.cast(step, tf.float32) - self.warmup_steps)
            / tf.cast(self.total_steps - self.warmup_steps, tf.float32)
        )
        learning_rate = 0.5 * self.lr_max * (1 + cos_annealed_lr)
        if self.warmup_steps > 0:
            slope = (self.lr_max - self.lr_start) / self.warmup_steps
            warmup_rate = slope * tf.cast(step, tf.float32) + self.lr_start
            learning_rate = tf.where(step < self.warmup_steps, warmup_rate, learning_rate)
        return tf.where(step > self.total_steps, 0.0, learning_rate, name="learning_rate")


'''

S = "keras.optimizers.schedules."
SCHEDULES = {
    "exponential": f"{S}ExponentialDecay(0.1, decay_steps=3, decay_rate=0.5)",
    "exponential-staircase": f"{S}ExponentialDecay(0.1, decay_steps=3, decay_rate=0.5, staircase=True)",
    "piecewise": f"{S}PiecewiseConstantDecay([2, 5], [0.1, 0.05, 0.01])",
    "cosine": f"{S}CosineDecay(0.1, decay_steps=6, alpha=0.2)",
    "cosine-warmup": f"{S}CosineDecay(0.0, decay_steps=5, alpha=0.1, warmup_target=0.1, warmup_steps=4)",
    "inverse-time": f"{S}InverseTimeDecay(0.1, decay_steps=2, decay_rate=0.5)",
    "inverse-time-staircase": f"{S}InverseTimeDecay(0.1, decay_steps=2, decay_rate=0.5, staircase=True)",
    "polynomial": f"{S}PolynomialDecay(0.1, decay_steps=5, end_learning_rate=0.01, power=2.0)",
    "polynomial-cycle": f"{S}PolynomialDecay(0.1, decay_steps=4, end_learning_rate=0.01, power=0.5, cycle=True)",
    "custom": "CustomSchedule(64, warmup_steps=4)",
    "warmup-cosine": "WarmUpCosine(lr_start=1e-5, lr_max=1e-3, warmup_steps=3, total_steps=9)",
}
PRELUDES = {"custom": CUSTOM, "warmup-cosine": WARMUP_COSINE}
STEPS = 12


def _program(name: str) -> str:
    return PROGRAM.format(prelude=PRELUDES.get(name, ""), schedule=SCHEDULES[name])


def _keras_rates(source: str) -> list[float]:
    keras = pytest.importorskip("keras")
    ns: dict = {}
    exec(compile(source, "<keras>", "exec"), ns)
    opt = ns["optimizer"]
    var = keras.Variable(np.zeros(1, dtype="float64"), dtype="float64")
    rates = []
    for _ in range(STEPS):  # var starts at 0 and the gradient is 1: SGD leaves var = -lr
        var.assign(np.zeros(1))
        opt.apply_gradients([(keras.ops.ones((1,), dtype="float64"), var)])
        rates.append(-float(var.numpy()[0]))
    return rates


def _torch_rates(translated: str) -> list[float]:
    torch = pytest.importorskip("torch")
    ns: dict = {}
    exec(compile(translated, "<torch>", "exec"), ns)
    opt, scheduler = ns["optimizer"], ns["scheduler"]
    param = opt.param_groups[0]["params"][0]
    rates = []
    for _ in range(STEPS):  # one SGD step with a gradient of ones, as the translated train_step takes it
        with torch.no_grad():
            param.zero_()
        param.grad = torch.ones_like(param)
        opt.step()
        scheduler.step()
        rates.append(-float(param.detach().flatten()[0]))
    return rates


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_translated_schedule_gives_the_rates_keras_uses(name):
    source = _program(name)
    r = translate_source(source, "sched.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "tensorflow" not in r.output and "keras" not in r.output.replace("keras.optimizers.schedules", "")
    assert "scheduler.step()" in r.output and "lr=1.0" in r.output
    keras_rates = _keras_rates(source)
    torch_rates = _torch_rates(r.output)
    assert len(set(np.round(keras_rates, 9))) > 1, "the schedule must change the rate within the steps compared"
    # Keras computes the schedule and casts the rate in float32
    np.testing.assert_allclose(torch_rates, keras_rates, rtol=1e-6, atol=1e-9)


def test_a_rate_one_step_off_is_caught():
    """The comparison can fail: evaluating the schedule after incrementing the step (a scheduler stepped
    before optimizer.step()) is one step off."""
    source = _program("exponential-staircase")
    r = translate_source(source, "sched.py")
    shifted = r.output.replace("scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule)",
                               "scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_schedule(s + 1))")
    assert shifted != r.output
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(_torch_rates(shifted), _keras_rates(source), rtol=1e-6, atol=1e-9)


def test_tape_step_steps_the_scheduler_after_the_optimizer_and_clips_before():
    source = PROGRAM.format(prelude="", schedule=SCHEDULES["exponential"]).replace(
        "SGD(learning_rate=lr_schedule)", "Adam(learning_rate=lr_schedule, clipnorm=0.5)")
    out = translate_source(source, "s.py").output
    body = out[out.index("def train_step"):]
    lines = [ln.strip() for ln in body.splitlines()]
    at = lines.index("loss.backward()")
    assert lines[at + 1:at + 5] == ["for param in model.parameters():", "nn.utils.clip_grad_norm_(param, 0.5)",
                                    "optimizer.step()", "scheduler.step()"]
    assert "scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule)" in out
    assert "torch.optim.Adam(model.parameters(), lr=1.0, eps=1e-07)" in out


@pytest.mark.parametrize("kind", ["clipnorm", "global_clipnorm", "clipvalue"])
def test_clipping_lines_clip_as_keras_clips(kind):
    """Keras's clipnorm clips each variable's gradient on its own (norms 3 and 4 with clipnorm 1 → 1 and
    1; a global clip gives 0.6 and 0.8): the lines the translated step runs between backward() and
    step() give Keras's clipped gradients (Keras's own clipping, as its optimizer applies it)."""
    torch = pytest.importorskip("torch")
    keras = pytest.importorskip("keras")
    source = PROGRAM.format(prelude="", schedule="0.1").replace(
        "SGD(learning_rate=lr_schedule)", f"SGD(learning_rate=lr_schedule, {kind}=1.0)")
    out = translate_source(source, "c.py").output
    body = out[out.index("def train_step"):].splitlines()
    start = next(i for i, ln in enumerate(body) if ln.strip() == "loss.backward()")
    end = next(i for i, ln in enumerate(body) if ln.strip() == "optimizer.step()")
    clip = textwrap.dedent("\n".join(body[start + 1:end]))
    assert clip.strip(), out
    ns: dict = {}
    exec(compile(out, "<torch>", "exec"), ns)
    model = ns["model"]
    weight_grad = np.zeros((2, 3), "float32")
    weight_grad[0, 0] = 4.0
    bias_grad = np.array([3.0, 0.0], "float32")
    model[0].weight.grad = torch.tensor(weight_grad)
    model[0].bias.grad = torch.tensor(bias_grad)
    exec(compile(clip, "<clip>", "exec"), ns)
    opt = getattr(keras.optimizers, "SGD")(**{kind: 1.0})
    want = [np.asarray(g) for g in opt._clip_gradients([keras.ops.convert_to_tensor(weight_grad.T),
                                                        keras.ops.convert_to_tensor(bias_grad)])]
    np.testing.assert_allclose(model[0].weight.grad.numpy().T, want[0], rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(model[0].bias.grad.numpy(), want[1], rtol=2e-6, atol=1e-7)


GAN = '''import tensorflow as tf
from tensorflow import keras

gen = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(4)])
disc = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
sched = keras.optimizers.schedules.InverseTimeDecay(1e-3, decay_steps=10, decay_rate=0.5)
g_optimizer = keras.optimizers.Adam(sched, global_clipnorm=1.0)
d_optimizer = keras.optimizers.Adam(1e-3, clipvalue=0.1)


def train_step(real, noise):
    with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
        fake = gen(noise, training=True)
        d_loss = tf.reduce_mean(disc(fake, training=True)) - tf.reduce_mean(disc(real, training=True))
        g_loss = -tf.reduce_mean(disc(fake, training=True))
    g_grads = g_tape.gradient(g_loss, gen.trainable_variables)
    d_grads = d_tape.gradient(d_loss, disc.trainable_variables)
    g_optimizer.apply_gradients(zip(g_grads, gen.trainable_variables))
    d_optimizer.apply_gradients(zip(d_grads, disc.trainable_variables))
    return d_loss, g_loss
'''


def test_two_tapes_clip_and_schedule_each_optimizer_before_and_after_its_step():
    """In a GAN step (two tapes in one with), each optimizer's clipping comes before its step() and its
    scheduler's step() after (the clipping was dropped there before)."""
    out = translate_source(GAN, "gan.py").output
    lines = [ln.strip() for ln in out[out.index("def train_step"):].splitlines()]
    at = lines.index("d_loss.backward(inputs=list(disc.parameters()))")
    assert lines[at + 1:at + 6] == ["nn.utils.clip_grad_norm_(gen.parameters(), 1.0)", "g_optimizer.step()",
                                    "g_scheduler.step()", "nn.utils.clip_grad_value_(disc.parameters(), 0.1)",
                                    "d_optimizer.step()"]
    assert "g_scheduler = torch.optim.lr_scheduler.LambdaLR(g_optimizer, sched)" in out


def test_what_cannot_follow_a_schedule_is_an_error_and_momentum_a_warning():
    # the optimizer made in one function, stepped in another: its scheduler is out of reach
    src = PROGRAM.format(prelude="", schedule=SCHEDULES["piecewise"]).replace(
        "optimizer = keras.optimizers.SGD(learning_rate=lr_schedule)\n",
        "\n\ndef make():\n    optimizer = keras.optimizers.SGD(learning_rate=lr_schedule)\n    return optimizer\n")
    r = translate_source(src, "s.py")
    assert any(f.severity is Severity.ERROR and "learning rate is a schedule" in f.message for f in r.findings), \
        r.findings
    # SGD with momentum: Keras keeps the rate inside the velocity
    src = PROGRAM.format(prelude="", schedule=SCHEDULES["piecewise"]).replace(
        "SGD(learning_rate=lr_schedule)", "SGD(learning_rate=lr_schedule, momentum=0.9)")
    r = translate_source(src, "s.py")
    warned = [f for f in r.findings if f.severity is Severity.WARNING and f.code == "approximate"]
    assert warned and "inside the momentum buffer" in warned[0].message
    assert not [f for f in r.findings if f.severity is Severity.ERROR]
    # a schedule given to the compile of a model with its own train_step (made elsewhere: a factory)
    src = """import tensorflow as tf
from tensorflow import keras

gan.compile(optimizer=keras.optimizers.Adam(keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)))
"""
    r = translate_source(src, "s.py")
    assert any(f.severity is Severity.ERROR and f.code == "unsupported-argument" and "LambdaLR" in f.message
               for f in r.findings), r.findings


def test_reading_the_rate_gives_the_rate_of_the_next_update():
    """``optimizer.learning_rate`` (``.numpy()``) → ``optimizer.param_groups[0]["lr"]``: after 5 updates
    both give the schedule at step 5; writing it or reading ``iterations`` is an error."""
    keras = pytest.importorskip("keras")
    torch = pytest.importorskip("torch")
    source = _program("inverse-time") + "\n\ndef current_rate():\n    return float(optimizer.learning_rate.numpy())\n"
    out = translate_source(source, "r.py").output
    assert 'return float(optimizer.param_groups[0]["lr"])' in out
    ns: dict = {}
    exec(compile(source, "<keras>", "exec"), ns)
    var = keras.Variable(np.zeros(1, dtype="float32"))
    for _ in range(5):
        ns["optimizer"].apply_gradients([(keras.ops.ones((1,)), var)])
    t_ns: dict = {}
    exec(compile(out, "<torch>", "exec"), t_ns)
    for p in t_ns["model"].parameters():
        p.grad = torch.zeros_like(p)
    for _ in range(5):
        t_ns["optimizer"].step()
        t_ns["scheduler"].step()
    np.testing.assert_allclose(t_ns["current_rate"](), ns["current_rate"](), rtol=1e-6)
    np.testing.assert_allclose(ns["current_rate"](), 0.1 / (1 + 0.5 * 5 / 2), rtol=1e-6)
    r = translate_source(_program("inverse-time") + "optimizer.learning_rate = 0.5\nn = optimizer.iterations\n", "w.py")
    errs = [f.message.split(":")[0] for f in r.findings if f.severity is Severity.ERROR]
    assert errs == ["optimizer.learning_rate set", "optimizer.iterations"], errs


INLINE_COMPILE = '''import numpy as np
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(10,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(3)])
model.compile(
    optimizer=keras.optimizers.SGD(
        learning_rate=keras.optimizers.schedules.PiecewiseConstantDecay([2, 4], [0.1, 0.05, 0.01]), global_clipnorm=1.0),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train_step(x, y):
    history = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    return history.history["loss"][-1]
'''


def test_a_schedule_and_a_clip_written_in_the_compile_go_into_the_written_fit():
    """compile(optimizer=keras.optimizers.SGD(learning_rate=<schedule>, global_clipnorm=1.0)): the
    optimizer and its LambdaLR made at the compile, the fit taking the scheduler, clipping before
    step() and stepping the scheduler after it (the named form is the schedule_clipping fixture)."""
    r = translate_source(INLINE_COMPILE, "c.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    assert "optimizer = torch.optim.SGD(model.parameters(), lr=1.0)" in out
    assert ("scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, PiecewiseConstantDecay(boundaries=[2, 4], "
            "values=[0.1, 0.05, 0.01]))") in out
    assert "history = fit(model, optimizer, scheduler, loss_fn, x, y, batch_size=8" in out
    lines = [ln.strip() for ln in out.splitlines()]
    at = lines.index("loss.backward()")
    assert lines[at + 1:at + 4] == ["nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "optimizer.step()",
                                    "scheduler.step()"]
    assert translate_source(out, "c.py").output == out  # a fixpoint


SELF_OPTIMIZER = '''import tensorflow as tf
from tensorflow import keras


class M(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = keras.layers.Dense(1)
        self.tracker = keras.metrics.Mean()

    def call(self, x):
        return self.d(x)

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(x, training=True) - y))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.tracker.update_state(loss)
        return {"loss": self.tracker.result(), "lr": self.optimizer.learning_rate}

    @property
    def metrics(self):
        return [self.tracker]
'''


def test_the_rate_of_a_train_step_models_optimizer_is_read_from_its_param_groups():
    r = translate_source(SELF_OPTIMIZER, "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert '"lr": self.optimizer.param_groups[0]["lr"]}' in r.output
