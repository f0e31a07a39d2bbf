"""Layers built frozen (``trainable=False`` in the layer's call): the weight module becomes
``<torch module>.requires_grad_(False)`` (which returns the module) in a Sequential, a functional model and a
subclass, which is Keras's frozen layer for a layer whose forward pass does not read the flag. A frozen
BatchNormalization (Keras runs it in inference mode even under training=True) and a frozen layer whose torch module
is lazy (requires_grad_ raises before its first call) stay errors.

Numbers: a Sequential (frozen Dense) and a functional model (frozen Embedding and Conv1D) trained two epochs by
Keras's fit and by the translation's written fit from the same weights (subprocesses): histories, evaluate and
weights agree, and the frozen weights are where they started on both sides.
"""
from __future__ import annotations

from runners import compare_fit
from test_fit_callbacks import _run, tx

from fwport.core.finding import Severity

SEQ = '''
import keras
from keras import layers

model = keras.Sequential([keras.Input((4,)), layers.Dense(6, activation="tanh", trainable=False), layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

SEQ_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
W = [rng.normal(size=(4, 6)).astype("float32"), rng.normal(size=6).astype("float32"),
     rng.normal(size=(6, 1)).astype("float32"), np.zeros(1, "float32")]
x = rng.normal(size=(32, 4)).astype("float32")
y = (x[:, :1] * 2 - x[:, 1:2]).astype("float32")
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    model.layers[0].set_weights(W[:2])
    model.layers[1].set_weights(W[2:])
    kernels = lambda: [model.layers[0].get_weights()[0].tolist(), model.layers[1].get_weights()[0].tolist()]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels(), "frozen": kernels()[0] == W[0].tolist()}))
'''

FUNC = '''
import keras
from keras import layers

inp = keras.Input((10,), dtype="int32")
x = layers.Embedding(20, 3, trainable=False)(inp)
x = layers.Conv1D(4, 3, trainable=False)(x)
x = layers.GlobalAveragePooling1D()(x)
model = keras.Model(inp, layers.Dense(1)(x))
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

FUNC_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(4)
E = rng.normal(size=(20, 3)).astype("float32")
K, B = rng.normal(size=(3, 3, 4)).astype("float32"), rng.normal(size=4).astype("float32")
D, DB = rng.normal(size=(4, 1)).astype("float32"), np.zeros(1, "float32")
x = rng.integers(0, 20, size=(32, 10)).astype("int32")
y = rng.normal(size=(32, 1)).astype("float32")
if sys.argv[2] == "torch":
    import torch
    emb = next(m for m in model.modules() if isinstance(m, torch.nn.Embedding))
    conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv1d))
    fc = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(E))
        conv.weight.copy_(torch.tensor(K).permute(2, 1, 0))
        conv.bias.copy_(torch.tensor(B))
        fc.weight.copy_(torch.tensor(D).T)
        fc.bias.copy_(torch.tensor(DB))
    x = torch.tensor(x).long()
    kernels = lambda: [emb.weight.detach().numpy().tolist(), conv.weight.detach().permute(2, 1, 0).numpy().tolist(),
                       fc.weight.detach().numpy().T.tolist()]
else:
    emb, conv, fc = [l for l in model.layers if l.weights]
    emb.set_weights([E]); conv.set_weights([K, B]); fc.set_weights([D, DB])
    kernels = lambda: [emb.get_weights()[0].tolist(), conv.get_weights()[0].tolist(), fc.get_weights()[0].tolist()]
h, ev = train(x, y)
k = kernels()
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": k,
                              "frozen": np.allclose(k[0], E) and np.allclose(k[1], K)}))
'''


def _errors(r):
    return [f for f in r.findings if f.severity is Severity.ERROR]


def test_a_frozen_dense_in_a_sequential_trains_as_keras(tmp_path):
    assert "nn.Linear(4, 6).requires_grad_(False)" in tx(SEQ).output
    keras_out, torch_out = _run(tmp_path, SEQ, SEQ_DRIVER)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)
    assert keras_out["frozen"] and torch_out["frozen"]
    assert keras_out["history"]["loss"][1] < keras_out["history"]["loss"][0]  # the head trains


def test_a_frozen_embedding_and_conv_in_a_functional_model_train_as_keras(tmp_path):
    out = tx(FUNC).output
    assert "nn.Embedding(20, 3).requires_grad_(False)" in out and "nn.Conv1d(3, 4, 3).requires_grad_(False)" in out
    keras_out, torch_out = _run(tmp_path, FUNC, FUNC_DRIVER)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)
    assert keras_out["frozen"] and torch_out["frozen"]


SUB = '''
import keras
from keras import layers


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.a = layers.Dense(8, input_shape=(4,), trainable=False)
        self.b = layers.BatchNormalization(trainable=False)
        self.c = layers.Dense(3, trainable=False)

    def call(self, x):
        return self.c(self.b(self.a(x)))
'''


def test_a_subclass_freezes_what_is_exact_and_refuses_the_rest():
    r = tx(SUB)
    assert "self.a = nn.Linear(4, 8).requires_grad_(False)" in r.output
    messages = [f.message for f in _errors(r)]
    assert any("frozen BatchNormalization in inference mode" in m for m in messages)
    assert any("lazy torch module" in m for m in messages)  # self.c: its input size is not known here
    assert not any(".requires_grad_(False)" in line for line in r.output.splitlines() if "self.c =" in line)


def test_a_trainable_flag_that_is_not_a_literal_stays_an_error():
    r = tx(SEQ.replace("trainable=False", "trainable=FREEZE"))
    assert any("trainable=FREEZE: not a literal" in f.message for f in _errors(r))
    plain = tx(SEQ.replace("trainable=False", "trainable=True"))
    assert "requires_grad_" not in plain.output and not _errors(plain)
