"""Numerical check of a whole translated model against Keras, for tests/test_conv_models.py.

The original runs under TensorFlow in one subprocess, the translation under torch in another
(this process imports neither; each is a warm worker of the test file, runners.Warm). Weights move
by order: Keras's ``model.weights`` (a layer's own variables, then its sub-layers' in tracking
order) against torch's ``state_dict`` (registration order, ``num_batches_tracked`` skipped), each
kernel put into torch's layout by its rank (a Dense kernel transposed, a conv kernel's
(k..., in, out) → (out, in, k...)). The test names the layout of the translation's input and output.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from runners import Warm

ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}

_TF = r'''
import json, sys, types
import numpy as np
src, build, inp, out, training, value = sys.argv[1:7]
mod = types.ModuleType("orig"); mod.__file__ = src
exec(compile(open(src).read(), src, "exec"), mod.__dict__)
x = np.load(inp)["x"]
model = eval(build, mod.__dict__)
y = model(x, training=training == "1")
ws = [np.asarray(w.numpy() if hasattr(w, "numpy") else w) for w in model.weights]
v = np.asarray(eval(value) if value else 0.0, dtype="float64")
np.savez(out, y=np.asarray(y), v=v, **{f"w{i}": w for i, w in enumerate(ws)})
'''

_TORCH = r'''
import sys, types
import numpy as np, torch
src, build, inp, wts, out, layout_in, layout_out, training, value = sys.argv[1:10]
sys.modules["tensorflow"] = None; sys.modules["keras"] = None  # the translation must not need them
mod = types.ModuleType("tr"); mod.__file__ = src
exec(compile(open(src).read(), src, "exec"), mod.__dict__)
x = torch.from_numpy(np.load(inp)["x"])
if layout_in == "nchw":
    x = x.movedim(-1, 1)
model = eval(build, mod.__dict__)
with torch.no_grad():
    model.eval(); model(x)  # lazy modules take their sizes
src_w = np.load(wts)
keras = [src_w[f"w{i}"] for i in range(len([k for k in src_w.files if k.startswith("w")]))]
sd = [(k, v) for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")]
assert len(sd) == len(keras), (len(sd), len(keras), [k for k, _ in sd], [w.shape for w in keras])
new = {}
for (k, v), w in zip(sd, keras):
    if w.ndim == 2 and "weight" in k and v.ndim == 2:
        w = w.T
    elif w.ndim >= 3 and v.ndim == w.ndim:
        w = np.transpose(w, (w.ndim - 1, w.ndim - 2, *range(w.ndim - 2)))
    assert tuple(v.shape) == w.shape, (k, tuple(v.shape), w.shape)
    new[k] = torch.from_numpy(np.ascontiguousarray(w))
model.load_state_dict(new, strict=False)
model.train(training == "1")
with torch.no_grad():
    y = model(x)
if layout_out == "nchw":
    y = y.movedim(1, -1)
with torch.no_grad():
    v = np.asarray(float(eval(value)) if value else 0.0, dtype="float64")
np.savez(out, y=y.numpy(), v=v)
'''


def compare_model(original: str, translated: str, build: str, shape: tuple, *, layout_in: str = "same",
                  layout_out: str = "same", training: bool = False, seed: int = 0,
                  translated_build: str | None = None, keras_value: str = "", torch_value: str = ""):
    """(Keras output, torch output in Keras's layout) for the same input and weights; with
    ``keras_value`` / ``torch_value`` (expressions of ``model``), also their two values."""
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "orig.py").write_text(original)
        (d / "tr.py").write_text(translated)
        x = np.random.default_rng(seed).standard_normal(shape).astype("float32")
        np.savez(d / "x.npz", x=x)
        flag = "1" if training else "0"
        p = Warm.run(_TF, [str(d / "orig.py"), build, str(d / "x.npz"), str(d / "k.npz"), flag, keras_value],
                     "keras", ENV)
        assert p.returncode == 0, p.stderr[-3000:]
        p = Warm.run(_TORCH, [str(d / "tr.py"), translated_build or build, str(d / "x.npz"), str(d / "k.npz"),
                              str(d / "t.npz"), layout_in, layout_out, flag, torch_value], "torch", ENV)
        assert p.returncode == 0, p.stderr[-3000:]
        k, t = np.load(d / "k.npz"), np.load(d / "t.npz")
        if keras_value or torch_value:
            return k["y"], t["y"], float(k["v"]), float(t["v"])
        return k["y"], t["y"]


def assert_close(k: np.ndarray, t: np.ndarray, rtol: float = 1e-4) -> None:
    assert k.shape == t.shape, (k.shape, t.shape)
    scale = max(float(np.abs(k).max()), 1e-6)
    err = float(np.abs(k - t).max()) / scale
    assert err < rtol, f"max relative difference {err:.3g}"


_TF_MANY = r'''
import json, sys, types
import numpy as np
cases = json.load(open(sys.argv[1]))
out = {}
for i, c in enumerate(cases):
    mod = types.ModuleType(f"orig{i}")
    exec(compile(c["original"], f"orig{i}.py", "exec"), mod.__dict__)
    x = np.random.default_rng(i).standard_normal(c["shape"]).astype("float32")
    out[f"x{i}"] = x
    out[f"y{i}"] = np.asarray(eval(c["build"], mod.__dict__)(x, training=False))
np.savez(sys.argv[2], **out)
'''

_TORCH_MANY = r'''
import json, sys, types
import numpy as np, torch
sys.modules["tensorflow"] = None; sys.modules["keras"] = None
cases = json.load(open(sys.argv[1]))
data = np.load(sys.argv[2])
out = {}
for i, c in enumerate(cases):
    mod = types.ModuleType(f"tr{i}")
    exec(compile(c["translated"], f"tr{i}.py", "exec"), mod.__dict__)
    x = torch.from_numpy(data[f"x{i}"])
    if c["layout_in"] == "nchw":
        x = x.movedim(-1, 1)
    model = eval(c["build"], mod.__dict__)
    model.eval()
    with torch.no_grad():
        y = model(x)
    if c["layout_out"] == "nchw":
        y = y.movedim(1, -1)
    out[f"y{i}"] = y.numpy()
np.savez(sys.argv[3], **out)
'''


def compare_weightless(cases: list[dict]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Models without variables, all in one TensorFlow and one torch process: each case has
    original, translated, build, shape, layout_in, layout_out."""
    import json
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "cases.json").write_text(json.dumps(cases))
        p = Warm.run(_TF_MANY, [str(d / "cases.json"), str(d / "k.npz")], "keras", ENV)
        assert p.returncode == 0, p.stderr[-3000:]
        p = Warm.run(_TORCH_MANY, [str(d / "cases.json"), str(d / "k.npz"), str(d / "t.npz")], "torch", ENV)
        assert p.returncode == 0, p.stderr[-3000:]
        k, t = np.load(d / "k.npz"), np.load(d / "t.npz")
        return [(k[f"y{i}"], t[f"y{i}"]) for i in range(len(cases))]
