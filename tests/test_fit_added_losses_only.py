"""A model whose layers call add_loss, compiled with an optimizer and no loss: Keras (3.15) trains it on the added
terms alone, its History's "loss" their sum. fwport's written loops start from a loss, so the compile and its fit stay
errors, which say so (not the generic "create the loss" advice alone)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fwport.core.pipeline import translate_source

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


def test_a_loss_less_compile_of_an_add_loss_model_is_an_error_saying_keras_trains_on_the_terms():
    src = textwrap.dedent(SRC).lstrip("\n").replace("LR", "0.3")
    r = translate_source(src, "model.py")
    lines = src.splitlines()
    errs = {f.line: f.message for f in r.findings if f.severity.name == "ERROR"}
    compile_at = lines.index("net.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3))") + 1
    fit_at = next(i for i, s in enumerate(lines) if s.startswith("h = net.fit(")) + 1
    for at in (compile_at, fit_at):
        assert "Keras then trains the model on the terms its layers give add_loss alone" in errs.get(at, ""), errs
    # (without add_loss in the file the reason stays the plain one)
    plain = translate_source(src.replace("self.add_loss(", "print("), "model.py")
    assert not any("add_loss alone" in f.message for f in plain.findings)
    assert any(f.line == compile_at and f.message.endswith("no loss is given)") for f in plain.findings)


@pytest.mark.parametrize("lr", [0.0, 0.3])
def test_keras_trains_a_loss_less_compile_on_the_added_terms_alone(tmp_path, lr):
    """The fact the error states, measured: with a learning rate of 0 the History's loss is, per epoch, the mean over
    the batches of the sum of both layers' terms (computed here in numpy from the weights); with 0.3 it falls."""
    src = textwrap.dedent(SRC).lstrip("\n").replace("LR", repr(lr))
    src += textwrap.dedent('''
        import json
        W = [w.numpy().tolist() for w in net.weights]
        print("WEIGHTS " + json.dumps(W))
        print("LOSS " + json.dumps(h.history["loss"]))
    ''')
    (tmp_path / "model.py").write_text(src)
    out = subprocess.run([sys.executable, str(tmp_path / "model.py")], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
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
