"""LSTM / GRU / SimpleRNN(stateful=True): Keras carries the final states of one call into the next until
reset_states(); the translation's Stateful<kind> helper does the same (detached between calls, zeros after
reset_states()), and model.reset_states() is the written-out reset_rnn_states(model). Keras and the translation
run in their own processes from the same weights: consecutive calls, the gradient of a second call, a reset and
a batch of another size compared."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as _errors

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_lstm():
    return keras.Sequential([keras.Input(batch_shape=(3, None, 5)),
                             layers.LSTM(6, stateful=True, return_sequences=True), layers.Dense(2)])


def build_gru():
    return keras.Sequential([keras.Input(batch_shape=(3, 7, 5)), layers.GRU(4, stateful=True, return_sequences=True),
                             layers.GRU(3, stateful=True), layers.Dense(2)])


def build_rnn():
    return keras.Sequential([layers.SimpleRNN(4, stateful=True, activation="relu"), layers.Dense(2)])


def restart(model):
    model.reset_states()  # (tf_keras's Model.reset_states: each stateful layer's)


if __name__ == "__main__":
    restart(build_gru())
'''

# Keras: call x1, then x2 under a tape (the gradient of a loss of the second call), reset the stateful layers,
# call x2 again; a fresh model of the same weights called on x2; then a batch of 2 (the states hold 3)
_KERAS = r'''
import sys, types
import numpy as np
src, names, data, out = sys.argv[1:5]
mod = types.ModuleType("orig"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
import keras, tensorflow as tf
z = np.load(data)
arrays = {}
for name in names.split(","):
    keras.utils.set_random_seed(0)
    model = getattr(mod, name)()
    y1 = model(z["x1"])
    variables = [(i, j, v) for i, layer in enumerate(model.layers) for j, v in enumerate(layer.trainable_weights)]
    with tf.GradientTape() as tape:
        y2 = model(z["x2"])
        loss = tf.reduce_sum(y2 * z[f"w_{name}"])
    grads = tape.gradient(loss, [v for _, _, v in variables])
    for layer in model.layers:  # (Keras 3's Model has no reset_states(): each stateful layer's)
        if getattr(layer, "stateful", False):
            layer.reset_states()
    y3 = model(z["x2"])
    fresh = keras.models.clone_model(model)
    fresh.set_weights(model.get_weights())
    y4 = fresh(z["x2"])
    try:
        model(z["x2"][:2])
        arrays[f"{name}_refused"] = np.array(0)
    except ValueError:
        arrays[f"{name}_refused"] = np.array(1)
    arrays.update({f"{name}_y{k}": np.asarray(y) for k, y in enumerate((y1, y2, y3, y4), 1)})
    arrays.update({f"{name}_w{i}_{j}": w for i, layer in enumerate(model.layers) for j, w in enumerate(layer.get_weights())})
    arrays.update({f"{name}_g{i}_{j}": np.asarray(g) for (i, j, _), g in zip(variables, grads)})
np.savez(out, **arrays)
'''

# the translation, given Keras's weights (kernel.T; GRU's gates z, r, h → torch's r, z, n; Keras's one bias →
# bias_ih with bias_hh at zero, GRU's two rows → the two), called as Keras was; gradients back in Keras's layout
_TORCH = r'''
import sys, types
import numpy as np, torch
sys.modules["tensorflow"] = None; sys.modules["keras"] = None  # the translation must not need them
src, names, data, kz, out = sys.argv[1:6]
mod = types.ModuleType("tr"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
z, k = np.load(data), np.load(kz)
x1, x2 = (torch.from_numpy(z[n]) for n in ("x1", "x2"))


def gates(module):
    return module.weight_ih_l0.shape[0] // module.hidden_size


def order(a, module):  # Keras's gate blocks (last axis) → torch's, and back (the same swap)
    return np.concatenate([np.split(a, 3, axis=-1)[i] for i in (1, 0, 2)], axis=-1) if gates(module) == 3 else a


arrays = {}
for name in names.split(","):
    model = getattr(mod, name)()
    model(x1[:, :1])  # (the lazy input sizes), then the states back to zeros, as Keras's start
    mod.restart(model)
    with torch.no_grad():
        for i, module in enumerate(model):
            w = [k[f"{name}_w{i}_{j}"] for j in range(2 if isinstance(module, torch.nn.Linear) else 3)]
            if isinstance(module, torch.nn.Linear):
                pairs = [("weight", w[0].T), ("bias", w[1])]
            else:
                b = order(w[2], module) if gates(module) == 3 else [w[2], 0 * w[2]]
                pairs = [("weight_ih_l0", order(w[0], module).T), ("weight_hh_l0", order(w[1], module).T),
                         ("bias_ih_l0", b[0]), ("bias_hh_l0", b[1])]
            for n, v in pairs:
                getattr(module, n).copy_(torch.from_numpy(np.ascontiguousarray(v)))
    y1 = model(x1)
    y2 = model(x2)
    (y2 * torch.from_numpy(z[f"w_{name}"])).sum().backward()
    for i, module in enumerate(model):
        if isinstance(module, torch.nn.Linear):
            arrays[f"{name}_g{i}_0"], arrays[f"{name}_g{i}_1"] = module.weight.grad.numpy().T, module.bias.grad.numpy()
        else:
            arrays[f"{name}_g{i}_0"] = order(module.weight_ih_l0.grad.numpy().T, module)
            arrays[f"{name}_g{i}_1"] = order(module.weight_hh_l0.grad.numpy().T, module)
            b = [module.bias_ih_l0.grad.numpy(), module.bias_hh_l0.grad.numpy()]
            arrays[f"{name}_g{i}_2"] = order(np.stack(b), module) if gates(module) == 3 else b[0]
    mod.restart(model)
    y3 = model(x2)
    fresh = getattr(mod, name)()
    fresh(x2)  # (sized)
    fresh.load_state_dict(model.state_dict())
    mod.restart(fresh)
    y4 = fresh(x2)
    try:
        model(x2[:2])
        arrays[f"{name}_refused"] = np.array(0)
    except ValueError:
        arrays[f"{name}_refused"] = np.array(1)
    arrays.update({f"{name}_y{n}": y.detach().numpy() for n, y in enumerate((y1, y2, y3, y4), 1)})
np.savez(out, **arrays)
'''


def _run(script: str, *args: str) -> dict[str, np.ndarray]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return dict(np.load(args[-1]))


@pytest.fixture(scope="module")
def translated():
    r = translate_source(SOURCE, "m.py")
    assert not _errors(r), r.findings
    assert translate_source(r.output, "m.py").output == r.output  # translating it again changes nothing
    return r.output


def test_stateful_layers_become_the_stateful_helpers(translated):
    assert "StatefulLSTM(6, 5, return_sequences=True), nn.Linear(6, 2))" in translated
    assert "StatefulGRU(4, 5, return_sequences=True),\n" in translated and "StatefulGRU(3, 4), nn.Linear(3, 2)" in translated
    assert 'nn.Sequential(StatefulRNN(4, nonlinearity="relu"), nn.Linear(4, 2))' in translated
    assert "stateful=True," not in translated and "# fwport" not in translated


NAMES = ("build_lstm", "build_gru", "build_rnn")


@pytest.fixture(scope="module")
def both(translated):
    """Keras's and the translation's arrays (each name's prefixed with it), from one process each."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "orig.py").write_text(SOURCE)
        (d / "tr.py").write_text(translated)
        np.savez(d / "x.npz", x1=rng.normal(size=(3, 7, 5)).astype("float32"),
                 x2=rng.normal(size=(3, 7, 5)).astype("float32"),
                 **{f"w_{n}": rng.normal(size=(3, 7, 2) if n == "build_lstm" else (3, 2)).astype("float32")
                    for n in NAMES})
        k = _run(_KERAS, str(d / "orig.py"), ",".join(NAMES), str(d / "x.npz"), str(d / "k.npz"))
        t = _run(_TORCH, str(d / "tr.py"), ",".join(NAMES), str(d / "x.npz"), str(d / "k.npz"), str(d / "t.npz"))
    return k, t


@pytest.mark.parametrize("name", NAMES)
def test_consecutive_calls_a_reset_and_a_second_calls_gradient_match_keras(both, name):
    k, t = ({key[len(name) + 1:]: v for key, v in arrays.items() if key.startswith(name + "_")} for arrays in both)
    for key in ("y1", "y2", "y3", "y4"):
        np.testing.assert_allclose(t[key], k[key], rtol=1e-5, atol=1e-5, err_msg=key)
    # the second call starts from the first's states (not from zeros); after the reset, as a fresh model
    assert np.abs(k["y2"] - k["y3"]).max() > 1e-3
    np.testing.assert_allclose(k["y3"], k["y4"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(t["y3"], t["y4"], rtol=1e-6, atol=1e-6)
    # the gradient of the second call's loss stops at the states the first left (Keras's variables), in both
    grads = sorted(key for key in k if key.startswith("g"))
    assert grads and sorted(key for key in t if key.startswith("g")) == grads
    for key in grads:
        np.testing.assert_allclose(t[key], k[key], rtol=1e-4, atol=1e-5, err_msg=key)
    assert int(k["refused"]) == int(t["refused"]) == 1  # a batch of another size than the states'


def test_verify_compares_each_call_of_a_stateful_model_from_zero_states(translated, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, Session, verify
    (tmp_path / "m.py").write_text(SOURCE)
    (tmp_path / "m_torch.py").write_text(translated)
    with Session() as session:
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), "build_gru",
                              inputs=["float32[3,7,5]"], checks=("forward", "grad"), device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_reset_states_of_a_model_and_of_a_callbacks_model_become_reset_rnn_states():
    src = '''
from tensorflow import keras


class ResetStatesCallback(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs):
        self.model.reset_states()


model = keras.Sequential([keras.layers.SimpleRNN(8, return_sequences=True, stateful=True,
                                                 batch_input_shape=[1, None, 1]), keras.layers.Dense(1)])
model.compile(loss="mse", optimizer="sgd")
model.fit(train_set, epochs=3, callbacks=[ResetStatesCallback()])
model.reset_states()
layer = keras.layers.GRU(4, stateful=True)
layer.reset_states()
'''
    r = translate_source(src, "m.py")
    assert not _errors(r), r.findings
    out = r.output
    assert "        reset_rnn_states(self.model)\n" in out
    assert "\nreset_rnn_states(model)\n" in out
    assert "\nlayer.reset_states()\n" in out  # (the StatefulGRU's own method)
    assert out.count("def reset_rnn_states(model):") == 1
    assert "StatefulRNN(8, 1, return_sequences=True)" in out and "layer = StatefulGRU(4)" in out


def test_reset_rnn_states_zeroes_every_stateful_layer_and_keeps_their_batch_size(translated):
    torch = pytest.importorskip("torch")
    ns: dict = {}
    exec(compile(translated, "m_torch.py", "exec"), ns)
    model = ns["build_gru"]()
    x = torch.randn(3, 7, 5)
    fresh = model(x)
    assert [tuple(m.state_h.shape) for m in model if hasattr(m, "state_h")] == [(3, 4), (3, 3)]
    assert not torch.allclose(model(x), fresh)
    assert "state_h" not in "".join(model.state_dict())  # not saved with the weights
    ns["restart"](model)
    assert all(m.state_h.abs().max() == 0 for m in model if hasattr(m, "state_h"))
    assert torch.allclose(model(x), fresh)
    with pytest.raises(ValueError, match="batch size 3"):
        model(torch.randn(2, 7, 5))


def test_stateful_layers_keras_carries_otherwise_stay_refused():
    for layer, said in (("layers.Bidirectional(layers.LSTM(4, stateful=True))", "under Bidirectional"),):
        src = f'''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(batch_shape=(2, 7, 5)), {layer}, layers.Dense(2)])
'''
        r = translate_source(src, "m.py")
        errs = _errors(r)
        assert errs and said in errs[0].message and errs[0].line == 5, (layer, r.findings)
