"""keras.layers.experimental.RandomFourierFeatures (Keras 2, keras-io quasi_svm) → the RandomFourierFeatures
helper, checked against tf_keras: outputs with Keras's weights moved by the rule's map, which weights train
(kernel_scale only, and only with trainable=True) and its gradient, and the initial values (the default scale
per kernel, N(0, 1) / Cauchy(0, 1) kernels, a bias uniform in [0, 2 pi)) drawn as Keras draws them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from fwport.verify.transfer import plan, transfer

PACK = load_pack("tf2torch")

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers
from tensorflow.keras.layers.experimental import RandomFourierFeatures


def gaussian():
    return keras.Sequential([keras.Input(shape=(6,)), RandomFourierFeatures(output_dim=16, scale=3.0), layers.Dense(2)])


def laplacian_trainable():
    return keras.Sequential([keras.Input(shape=(6,)),
                             RandomFourierFeatures(output_dim=8, kernel_initializer="laplacian", trainable=True)])


def big_gaussian():
    return keras.Sequential([keras.Input(shape=(50,)), RandomFourierFeatures(400)])


def big_laplacian():
    return keras.Sequential([keras.Input(shape=(50,)), RandomFourierFeatures(400, kernel_initializer="laplacian")])
'''

BUILDS = ("gaussian", "laplacian_trainable", "big_gaussian", "big_laplacian")

_KERAS = r'''
import json, sys, types
import numpy as np
import tensorflow as tf
src, out, spec = sys.argv[1:4]
mod = types.ModuleType("orig"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
x = np.random.default_rng(1).standard_normal((4, 6)).astype("float32")
res, info = {}, {}
for build, moves in json.loads(spec).items():
    tf.random.set_seed(0); np.random.seed(0)
    model = getattr(mod, build)()
    rff = model.layers[0]
    res[build + ":kernel"], res[build + ":bias"] = rff.unscaled_kernel.numpy(), rff.bias.numpy()
    info[build] = {"scale": float(rff.kernel_scale.numpy()[0]),
                   "trainable": sorted(w.name.split("/")[-1].split(":")[0] for w in model.trainable_weights)}
    if build in ("gaussian", "laplacian_trainable"):
        rff.kernel_scale.assign([1.7])  # away from the initial value: the map must move it
        with tf.GradientTape() as tape:
            y = model(x)
            loss = tf.reduce_sum(y * y)
        grads = tape.gradient(loss, model.trainable_weights)
        res[build + ":y"] = y.numpy()
        for w, g in zip(model.trainable_weights, grads):
            res[build + ":grad:" + w.name.split("/")[-1].split(":")[0]] = g.numpy()
        for m in moves:
            res[build + ":w:" + m["key"]] = eval("model." + m["layer"] + "." + m["var"]).numpy()
np.savez(out, **res)
print(json.dumps(info))
'''

_TORCH = r'''
import json, sys, types
import numpy as np, torch
sys.modules["tensorflow"] = None; sys.modules["keras"] = None  # the translation must not need them
src, wts, out = sys.argv[1:4]
mod = types.ModuleType("tr"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
x = torch.from_numpy(np.random.default_rng(1).standard_normal((4, 6)).astype("float32"))
w = np.load(wts)
res, info = {}, {}
for build in ("gaussian", "laplacian_trainable", "big_gaussian", "big_laplacian"):
    model = getattr(mod, build)()
    rff = model[0]
    res[build + ":kernel"], res[build + ":bias"] = rff.unscaled_kernel.numpy(), rff.bias.numpy()
    info[build] = {"scale": float(rff.kernel_scale.detach()[0]),
                   "trainable": sorted(n.split(".")[-1] for n, p in model.named_parameters()
                                       if p.requires_grad and n.startswith("0."))}
    if build in ("gaussian", "laplacian_trainable"):
        model.load_state_dict({k[len(build) + 3:]: torch.from_numpy(w[k]) for k in w.files
                               if k.startswith(build + ":w:")}, strict=False)
        y = model(x)
        (y * y).sum().backward()
        res[build + ":y"] = y.detach().numpy()
        if rff.kernel_scale.grad is not None:
            res[build + ":grad:kernel_scale"] = rff.kernel_scale.grad.numpy()
np.savez(out, **res)
print(json.dumps(info))
'''


def _run(code: str, *args: str, legacy: bool) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = "1"
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_random_fourier_features_match_tf_keras(tmp_path):
    for mod in ("tensorflow", "tf_keras", "torch"):
        if find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    r = translate_source(SOURCE, "model.py", PACK)
    assert [f.message for f in r.findings if f.severity is Severity.ERROR] == []
    assert "RandomFourierFeatures(6, 16, scale=3.0)" in r.output
    assert "RandomFourierFeatures(6, 8, 'laplacian', trainable=True)" in r.output
    (tmp_path / "k.py").write_text(SOURCE)
    (tmp_path / "t.py").write_text(r.output)
    moves = {b: plan([rec for rec in r.layers if rec.scope == b], PACK) for b in BUILDS}
    spec = json.dumps({b: [{"key": m.key, "layer": m.layer, "var": m.var} for m in ms] for b, ms in moves.items()})
    k_info = _run(_KERAS, str(tmp_path / "k.py"), str(tmp_path / "k.npz"), spec, legacy=True)
    k = np.load(tmp_path / "k.npz")
    moved = {}
    for b in ("gaussian", "laplacian_trainable"):
        got = transfer({n[len(b) + 3:]: k[n] for n in k.files if n.startswith(b + ":w:")}, moves[b])
        moved.update({f"{b}:w:{key}": v for key, v in got.items()})
    np.savez(tmp_path / "w.npz", **moved)
    t_info = _run(_TORCH, str(tmp_path / "t.py"), str(tmp_path / "w.npz"), str(tmp_path / "t.npz"), legacy=False)
    t = np.load(tmp_path / "t.npz")
    # outputs and kernel_scale's gradient with Keras's weights
    for b in ("gaussian", "laplacian_trainable"):
        np.testing.assert_allclose(t[b + ":y"], k[b + ":y"], rtol=1e-5, atol=1e-5, err_msg=b)
    np.testing.assert_allclose(t["laplacian_trainable:grad:kernel_scale"], k["laplacian_trainable:grad:kernel_scale"],
                               rtol=1e-4, atol=1e-5)
    # what trains: kernel_scale with trainable=True only (the Dense after it trains either way)
    assert k_info["gaussian"]["trainable"] == ["bias", "kernel"] and t_info["gaussian"]["trainable"] == []
    for b in ("laplacian_trainable",):
        assert k_info[b]["trainable"] == t_info[b]["trainable"] == ["kernel_scale"]
    # the initial scale: given, sqrt(input_dim / 2) for the gaussian kernel, 1 for the laplacian
    for b, want in (("gaussian", 3.0), ("laplacian_trainable", 1.0), ("big_gaussian", 5.0), ("big_laplacian", 1.0)):
        assert k_info[b]["scale"] == pytest.approx(want) and t_info[b]["scale"] == pytest.approx(want), b
    # the initial values' distributions (other generators: statistics, 20 000 draws each)
    for side in (k, t):
        g, lap = side["big_gaussian:kernel"], side["big_laplacian:kernel"]
        assert g.shape == lap.shape == (50, 400) and side["big_gaussian:bias"].shape == (400,)
        assert abs(g.mean()) < 0.05 and abs(g.std() - 1.0) < 0.05
        assert abs(np.median(np.abs(lap)) - 1.0) < 0.05 and np.abs(lap).max() > 100  # Cauchy(0, 1): heavy tails
        for bias in (side["big_gaussian:bias"], side["big_laplacian:bias"]):
            assert bias.min() >= 0.0 and bias.max() < 2 * np.pi and abs(bias.mean() - np.pi) < 0.3


def test_random_fourier_features_refusals():
    """An initializer object, and an input size fwport cannot see, are errors naming the line."""
    r = translate_source('''from tensorflow import keras
from tensorflow.keras.layers.experimental import RandomFourierFeatures

a = keras.Sequential([keras.Input(shape=(6,)), RandomFourierFeatures(8, kernel_initializer=keras.initializers.Ones())])
b = RandomFourierFeatures(8)
''', "model.py", PACK)
    errors = sorted((f.line, f.code) for f in r.findings if f.severity is Severity.ERROR)
    assert errors == [(4, "unsupported-argument"), (5, "shape-unknown")], r.findings
