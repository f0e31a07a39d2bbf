"""fwport weights: a Keras checkpoint → a torch state_dict through the same maps as verify, and
--check loads both and compares the forward outputs. Neither framework is imported here."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
from click.testing import CliRunner
from safetensors.numpy import load_file

from fwport.verify.cli import weights_command

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(9, 7, 3)),
        layers.Conv2D(4, (3, 2), activation="relu"),
        layers.BatchNormalization(),
        layers.Flatten(),
        layers.Dense(5),
    ])
'''

SAVE = '''
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
import keras, model
keras.utils.set_random_seed(1)
m = model.build_model()
rng = np.random.default_rng(2)
for v in m.weights:  # not the initializers' values: biases and BN statistics must move too
    v.assign(np.abs(v.numpy()) + 0.5 if "variance" in v.path else v.numpy() + rng.normal(0, 0.3, v.shape))
m.save_weights(sys.argv[2])
np.savez(sys.argv[3], **{v.path.replace("/", "."): v.numpy() for v in m.weights})
'''


def test_checkpoint_converts_and_checks(tmp_path):
    (tmp_path / "model.py").write_text(SOURCE)
    ckpt, ref = tmp_path / "model.weights.h5", tmp_path / "ref.npz"
    subprocess.run([sys.executable, "-c", SAVE, str(tmp_path), str(ckpt), str(ref)], check=True,
                   env={"TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow", "PATH": "/usr/bin:/bin"})
    pt, st = tmp_path / "model.pt", tmp_path / "model.safetensors"
    r = CliRunner().invoke(weights_command, [str(ckpt), "--source", str(tmp_path / "model.py"), "--model",
                                             "build_model", "--to", str(pt), "--to", str(st), "--check"])
    assert r.exit_code == 0, r.output
    assert "verdict: PASS" in r.output and pt.is_file()
    sd = load_file(str(st))
    with np.load(ref) as z:
        k = {n: z[n] for n in z.files}
    kern = next(v for n, v in k.items() if n.endswith("conv2d.kernel"))
    assert np.array_equal(sd["0.weight"], kern.transpose(3, 2, 0, 1))
    assert np.array_equal(sd["2.running_var"], next(v for n, v in k.items() if n.endswith("moving_variance")))
    dk = next(v for n, v in k.items() if n.endswith("dense.kernel"))  # (7*6*4, 5) rows in (h, w, c) order
    assert np.array_equal(sd["4.weight"], dk.reshape(7, 6, 4, 5).transpose(2, 0, 1, 3).reshape(-1, 5).T)
    assert "2.num_batches_tracked" in sd  # a complete state_dict: load_state_dict(strict=True) works


def test_wrong_model_name_is_an_error(tmp_path):
    (tmp_path / "model.py").write_text(SOURCE)
    ckpt = tmp_path / "x.weights.h5"
    ckpt.write_bytes(b"not a checkpoint")
    r = CliRunner().invoke(weights_command, [str(ckpt), "--source", str(tmp_path / "model.py"), "--model", "nope",
                                             "--to", str(tmp_path / "m.pt")])
    assert r.exit_code == 2 and "nope" in r.output
