"""Keras layers built and called in one expression outside the models fwport's passes follow
(passes/inline.py): merge layers written out as their operation, weightless channels-first modules
called on their input moved to channels-first. Each translation runs without TensorFlow and is
compared with Keras on the same inputs; what is not followed keeps an error naming the line."""
from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import numpy as np

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

from conv_numerics import assert_close
from helpers import error_lines as errors
from runners import python

PACK = load_pack("tf2torch")


def tx(src: str):
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "model.py", PACK)
    again = translate_source(r.output, "model.py", PACK)
    assert again.output == r.output, "translating the output again must change nothing"
    return src, r


_KERAS = r'''
import sys, types
import numpy as np
src, call, data, out = sys.argv[1:5]
mod = types.ModuleType("orig"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
xs = [v for _, v in sorted(np.load(data).items(), key=lambda kv: int(kv[0][1:]))]
y = eval(call, mod.__dict__)(*xs)
np.savez(out, *[np.asarray(v) for v in (y if isinstance(y, (tuple, list)) else [y])])
'''

_TORCH = r'''
import sys, types
import numpy as np, torch
sys.modules["tensorflow"] = None; sys.modules["keras"] = None  # the translation must not need them
src, call, data, out = sys.argv[1:5]
mod = types.ModuleType("tr"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
xs = [torch.from_numpy(v) for _, v in sorted(np.load(data).items(), key=lambda kv: int(kv[0][1:]))]
fn = eval(call, mod.__dict__)
if isinstance(fn, torch.nn.Module):
    fn.eval()
with torch.no_grad():
    y = fn(*xs)
np.savez(out, *[v.numpy() for v in (y if isinstance(y, (tuple, list)) else [y])])
'''


def run_both(original: str, translated: str, call: str, xs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(Keras output, torch output) pairs of ``call`` (an expression giving a callable) on the same inputs."""
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "orig.py").write_text(original)
        (d / "tr.py").write_text(translated)
        np.savez(d / "x.npz", **{f"x{i}": x for i, x in enumerate(xs)})
        env = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
        outs = []
        for script, name, side in ((_KERAS, "orig.py", "keras"), (_TORCH, "tr.py", "torch")):
            python("-c", script, d / name, call, d / "x.npz", d / f"{name}.npz", side=side, env=env, timeout=600,
                   check=True)
            z = np.load(d / f"{name}.npz")
            outs.append([z[f"arr_{i}"] for i in range(len(z.files))])
        assert len(outs[0]) == len(outs[1])
        return list(zip(*outs))


def _x(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


HELPERS = '''
import tensorflow as tf
from tensorflow.keras import layers


def fuse(a, b, c):
    total = layers.Add()([a, b, c])
    gated = 2.0 * layers.Multiply()([a, b])
    diff = layers.Subtract()([a, c]) ** 2
    mean = layers.Average()([a, b])
    hi = layers.Maximum()([a, b, c])
    lo = layers.Minimum()([a, c])
    stacked = layers.Concatenate()([a, layers.Add()([b, c])])
    rows = layers.Concatenate(axis=1)([a, b])
    return total, gated, diff, mean, hi, lo, stacked, rows


def resample(x):
    y = layers.MaxPooling2D()(x)
    y = layers.UpSampling2D(size=(2, 2), interpolation="bilinear")(y)
    z = layers.AveragePooling2D(pool_size=3, strides=1)(x + y)
    pooled = layers.GlobalAveragePooling2D()(z)
    kept = layers.GlobalMaxPooling2D(keepdims=True)(z)
    padded = layers.ZeroPadding2D(padding=((1, 0), (2, 1)))(z)
    return pooled, kept, padded, layers.Cropping2D(cropping=1)(padded)


def sequence(x):
    return layers.GlobalMaxPooling1D()(layers.UpSampling1D(size=2)(layers.MaxPooling1D(pool_size=2)(x)))


def planar(x):  # channels-first in Keras too: torch's own layout, nothing to move
    pooled = layers.MaxPooling2D(data_format="channels_first")(x)
    return pooled, layers.GlobalAveragePooling2D(data_format="channels_first")(x)
'''


def test_merges_and_weightless_layers_in_plain_functions_translate_without_errors():
    _, r = tx(HELPERS)
    assert errors(r) == []
    out = r.output
    assert "tensorflow" not in out and "layers." not in out
    assert "total = a + b + c" in out
    assert "gated = 2.0 * (a * b)" in out  # the operation keeps its place in the expression
    assert "diff = (a - b) ** 2" not in out and "diff = (a - c) ** 2" in out
    assert "torch.cat([a, b + c], dim=-1)" in out and "torch.cat([a, b], dim=1)" in out
    assert "nn.MaxPool2d(2)(x.movedim(-1, -3)).movedim(-3, -1)" in out
    # a global pooling without keepdims gives (batch, channels): nothing to move back
    assert "nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())(z.movedim(-1, -3))\n" in out


def test_merges_and_weightless_layers_in_plain_functions_match_keras():
    src, r = tx(HELPERS)
    a, b, c = _x(2, 3, 4, seed=1), _x(2, 3, 4, seed=2), _x(2, 3, 4, seed=3)
    for k, t in run_both(src, r.output, "fuse", [a, b, c]):
        assert_close(k, t, 1e-6)
    for k, t in run_both(src, r.output, "resample", [_x(2, 8, 6, 3)]):
        assert_close(k, t, 1e-5)
    for k, t in run_both(src, r.output, "sequence", [_x(2, 9, 5)]):
        assert_close(k, t, 1e-6)
    for k, t in run_both(src, r.output, "planar", [_x(2, 3, 6, 4)]):
        assert_close(k, t, 1e-6)


LAYER = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Pyramid(layers.Layer):
    def call(self, inputs):
        down = layers.AveragePooling2D(pool_size=2)(inputs)
        up = layers.UpSampling2D(size=2)(down)
        both = layers.Concatenate(axis=-1)([inputs, up])
        return layers.Add()([both, layers.Concatenate(axis=0)([both[:1], both[1:]])])
'''


def test_a_layer_subclass_call_body_building_merges_and_pooling_matches_keras():
    src, r = tx(LAYER)
    assert errors(r) == []
    assert "nn.AvgPool2d(2)(inputs.movedim(-1, -3)).movedim(-3, -1)" in r.output
    (k, t), = run_both(src, r.output, "Pyramid()", [_x(2, 6, 4, 3)])
    assert_close(k, t, 1e-6)


def test_what_is_not_followed_keeps_an_error_naming_the_line():
    _, r = tx('''
        from tensorflow.keras import layers


        def block(x, axis):
            y = layers.Conv2D(8, 3, padding="same")(x)
            z = layers.Concatenate(axis=axis)([x, y])
            return layers.MaxPooling2D()(z, training=False)
        ''')
    found = errors(r)
    # a layer with weights built at each call: its torch module would get fresh weights every call
    assert any(line == 5 and "Conv2D acts on channels-last inputs" in m for line, m in found), found
    assert any(line == 6 and "axis must be a literal int" in m for line, m in found), found
    assert any(line == 7 and "MaxPooling2D acts on channels-last inputs" in m for line, m in found), found
    assert "layers.Conv2D(8, 3" in r.output and "layers.Concatenate(axis=axis)" in r.output


NAMED = '''
import tensorflow as tf
from tensorflow.keras import layers

crop = layers.CenterCrop(4, 4)
upsample = layers.UpSampling2D(size=(2, 2), interpolation="bilinear")
pool = layers.MaxPooling1D(pool_size=2)


def preprocess(image):
    return crop(image)


def batch(images, steps):
    return upsample(crop(images)), pool(steps)
'''


def test_weightless_layers_bound_to_module_level_names_match_keras():
    src, r = tx(NAMED)
    assert errors(r) == []
    assert "crop = CenterCrop(4, 4)" in r.output
    assert "return crop(image.movedim(-1, -3)).movedim(-3, -1)" in r.output
    # an unbatched image (h, w, c), which Keras's CenterCrop takes too, moves alike
    (k, t), = run_both(src, r.output, "preprocess", [_x(6, 7, 3)])
    assert_close(k, t, 1e-6)
    for k, t in run_both(src, r.output, "batch", [_x(2, 6, 7, 3), _x(2, 8, 5)]):
        assert_close(k, t, 1e-5)


def test_a_module_level_layer_used_other_than_by_calling_it_stays_refused():
    _, r = tx('''
        from tensorflow.keras import layers

        pool = layers.MaxPooling2D()
        pools = [pool]
        ''')
    assert any(line == 3 and "MaxPooling2D acts on channels-last inputs" in m for line, m in errors(r)), errors(r)


_GATED = {
    "aliased": '''
        from keras.layers import MaxPooling2D as MP, Add as Plus
        def f(x, y):
            return Plus()([MP(2)(x), MP(pool_size=(2, 2))(y)])
        ''',
    "strings_and_comments": '''
        from tensorflow.keras import layers
        def f(a, b):
            return layers.Add(name="add)(")(  # a ) in a comment
                [a, b])
        ''',
    "continued": '''
        from tensorflow.keras import layers
        def f(x):
            return layers.UpSampling2D(size=(2,
                                             2)) \\
                (x)
        ''',
    "module_level": '''
        from tensorflow import keras
        crop = keras.layers.CenterCrop(4, 4)
        def f(image):
            return crop(image)
        ''',
    "none": '''
        from tensorflow import keras
        from tensorflow.keras import layers
        model = keras.Sequential([layers.Conv2D(4, 3), layers.MaxPooling2D(2, name="pool)"), layers.Flatten()])
        out = (model)(x)  # a call called again, of no layer
        ''',
}


def test_the_inline_gate_skips_only_files_where_the_walk_plans_nothing(monkeypatch):
    """passes/inline.py's _may_plan (text and top-level statements) says False only where the walk would plan
    nothing: each output is the one the walk made without the gate, and the walk is skipped where expected."""
    from fwport.packs.tf2torch.passes import inline

    walked = []
    real_run, real_gate = inline._Inline, inline._may_plan
    monkeypatch.setattr(inline, "_Inline", lambda ctx: walked.append(ctx.path) or real_run(ctx))
    for name, src in _GATED.items():
        src = textwrap.dedent(src).lstrip("\n")
        gated = translate_source(src, name, PACK)
        monkeypatch.setattr(inline, "_may_plan", lambda module, ctx: True)
        ungated = translate_source(src, name, PACK)
        monkeypatch.setattr(inline, "_may_plan", real_gate)
        assert gated.output == ungated.output, name
        assert [(f.code, f.line) for f in gated.findings] == [(f.code, f.line) for f in ungated.findings], name
        if name != "none":
            assert "movedim" in gated.output or " + " in gated.output, (name, gated.output)
    assert walked.count("none") == 1  # the ungated run only
    assert all(walked.count(name) == 2 for name in _GATED if name != "none")
