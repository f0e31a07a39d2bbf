"""fwport weights model.pt --to model.eqx: a PyTorch state_dict → the translated Equinox model's leaves.

PyTorch saves a state_dict (seeded, every value moved off its initial value, BatchNorm statistics
included) and computes its outputs in one subprocess; the command converts it; JAX reads the file back
into the translated model with eqx.tree_deserialise_leaves, as a translated program does, and computes
its outputs in another. The outputs must agree. Errors name what is wrong and leave no file behind.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fwport.verify.cli import weights_command
from helpers import needs
from runners import python

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "torch2jax"
pytestmark = needs("torch", "jax", "equinox")

# torch: build the original, move every value, save the state_dict and the eval-mode outputs
SAVE = '''
import json, runpy, sys
import numpy as np, torch
src, name, args, ckpt, inputs, out, drop = sys.argv[1:8]
torch.manual_seed(3)
model = runpy.run_path(src)[name](**json.loads(args))
g = torch.Generator().manual_seed(5)
with torch.no_grad():
    for k, v in model.state_dict().items():
        if v.is_floating_point():
            v.copy_(0.5 + torch.rand(v.shape, generator=g) if k.endswith("running_var")
                    else v + 0.2 * torch.randn(v.shape, generator=g))
sd = model.state_dict()
if drop:
    del sd[drop]
torch.save(sd, ckpt)
with np.load(inputs) as z:
    xs = [torch.from_numpy(z[f"x{i}"]) for i in range(len(z.files))]
with torch.no_grad():
    y = model.eval()(*xs)
np.savez(out, y=y.numpy())
'''

# JAX (torch unimportable): the translated model read back from the .eqx as a translated program reads it
LOAD = '''
import inspect, json, runpy, sys
sys.modules["torch"] = None
import numpy as np, jax, equinox as eqx
jax.config.update("jax_default_matmul_precision", "highest")
src, name, args, path, inputs, out = sys.argv[1:7]
cls = runpy.run_path(src)[name]
if "state" in inspect.signature(cls.__call__).parameters:
    model, state = eqx.nn.make_with_state(cls)(**json.loads(args), key=jax.random.key(1))
    model, state = eqx.tree_deserialise_leaves(path, (model, state))
    f = lambda *xs: jax.vmap(eqx.nn.inference_mode(model), axis_name="batch", in_axes=(0,) * len(xs) + (None,),
                             out_axes=(0, None))(*xs, state)[0]
else:
    model = eqx.tree_deserialise_leaves(path, cls(**json.loads(args), key=jax.random.key(1)))
    f = jax.vmap(eqx.nn.inference_mode(model))
with np.load(inputs) as z:
    xs = [z[f"x{i}"] for i in range(len(z.files))]
np.savez(out, y=np.asarray(f(*xs)))
'''

CASES = {  # fixture → (inputs: float ones drawn normal, integer ones below the bound)
    "mlp": [np.random.default_rng(0).standard_normal((4, 20)).astype(np.float32)],
    "conv_bn": [np.random.default_rng(1).standard_normal((3, 3, 10, 12)).astype(np.float32)],
    "lstm_classifier": [np.random.default_rng(2).integers(0, 40, (3, 7)).astype(np.int64)],
}


def _run(code: str, side: str, *args) -> None:
    """``python -c code args...`` in the test file's warm worker of ``side`` ("torch": SAVE, "jax": LOAD), which must
    succeed."""
    python("-c", code, *args, side=side, timeout=600, check=True)


def _save(tmp_path: Path, name: str, drop: str = "") -> tuple[Path, Path, dict]:
    v = json.loads((FIXTURES / name / "verify.json").read_text())
    np.savez(tmp_path / "x.npz", **{f"x{i}": x for i, x in enumerate(CASES[name])})
    ckpt = tmp_path / "model.pt"
    _run(SAVE, "torch", FIXTURES / name / "model.py", v["model"], json.dumps(v.get("args", {})), ckpt, tmp_path / "x.npz",
         tmp_path / "torch.npz", drop)
    return ckpt, tmp_path / "x.npz", v


def _convert(name: str, ckpt: Path, dest: Path, v: dict, *extra: str):
    return CliRunner().invoke(weights_command, [
        str(ckpt), "--source", str(FIXTURES / name / "model.py"), "--translated", str(FIXTURES / name / "expected.py"),
        "--model", v["model"], "--args", json.dumps(v.get("args", {})), "--to", str(dest), *extra])


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_state_dict_read_back_into_the_translated_model_computes_the_same(tmp_path, name):
    ckpt, xs, v = _save(tmp_path, name)
    dest = tmp_path / "model.eqx"
    r = _convert(name, ckpt, dest, v)
    assert r.exit_code == 0, r.output
    assert dest.is_file() and f"wrote {dest}" in r.output
    assert ("(model, state)" in r.output) == (name == "conv_bn")  # BatchNorm's statistics travel in the state
    _run(LOAD, "jax", FIXTURES / name / "expected.py", v["model"], json.dumps(v.get("args", {})), dest, xs, tmp_path / "jax.npz")
    with np.load(tmp_path / "torch.npz") as t, np.load(tmp_path / "jax.npz") as j:
        assert t["y"].shape == j["y"].shape
        np.testing.assert_allclose(j["y"], t["y"], rtol=1e-5, atol=1e-5 * float(np.abs(t["y"]).max()))
        assert float(np.abs(t["y"]).max()) > 0


def test_check_compares_torch_with_the_model_read_from_the_file(tmp_path):
    ckpt, _, v = _save(tmp_path, "conv_bn")
    r = _convert("conv_bn", ckpt, tmp_path / "m.eqx", v, "--check", "--input", v["inputs"][0])
    assert r.exit_code == 0, r.output
    assert "verdict: PASS" in r.output


def test_a_missing_key_is_named_and_nothing_is_written(tmp_path):
    ckpt, _, v = _save(tmp_path, "conv_bn", drop="bn1.running_var")
    dest = tmp_path / "model.eqx"
    dest.write_bytes(b"the previous file")
    r = _convert("conv_bn", ckpt, dest, v)
    assert r.exit_code == 2, r.output
    assert "missing from the checkpoint: bn1.running_var" in r.output
    assert dest.read_bytes() == b"the previous file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.eqx", "model.pt", "torch.npz", "x.npz"]


def test_a_shape_mismatch_is_named(tmp_path):
    ckpt, _, v = _save(tmp_path, "mlp")
    r = CliRunner().invoke(weights_command, [
        str(ckpt), "--source", str(FIXTURES / "mlp" / "model.py"), "--translated", str(FIXTURES / "mlp" / "expected.py"),
        "--model", "MLP", "--args", json.dumps({**v["args"], "hidden": 16}), "--to", str(tmp_path / "m.eqx")])
    assert r.exit_code == 2 and "shape mismatch" in r.output and "(32, 20) in the checkpoint, (16, 20) in the model" in r.output
    assert not (tmp_path / "m.eqx").exists()


def test_an_array_the_translation_lacks_is_named_and_nothing_is_written(tmp_path):
    ckpt, _, v = _save(tmp_path, "mlp")
    text = (FIXTURES / "mlp" / "expected.py").read_text()
    bad = tmp_path / "translated.py"
    bad.write_text(text.replace("self.fc2 = ", "self.fc2_renamed = ").replace("fc2: ", "fc2_renamed: ")
                   .replace("self.fc2(", "self.fc2_renamed("))
    assert bad.read_text() != text
    r = CliRunner().invoke(weights_command, [
        str(ckpt), "--source", str(FIXTURES / "mlp" / "model.py"), "--translated", str(bad), "--model", "MLP",
        "--args", json.dumps(v["args"]), "--to", str(tmp_path / "m.eqx")])
    assert r.exit_code == 1, r.output
    assert "fc2.weight: the translated model has no such array" in r.output and "not written" in r.output
    assert not (tmp_path / "m.eqx").exists() and not list(tmp_path.glob(".m.eqx*"))


def test_a_pt_destination_needs_a_keras_checkpoint_and_eqx_a_torch_one(tmp_path):
    (tmp_path / "w.weights.h5").write_bytes(b"x")
    r = CliRunner().invoke(weights_command, [str(tmp_path / "w.weights.h5"), "--source", str(FIXTURES / "mlp" / "model.py"),
                                             "--model", "MLP", "--to", str(tmp_path / "m.eqx")])
    assert r.exit_code == 2 and "PyTorch state_dict" in r.output
