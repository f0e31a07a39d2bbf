"""Keras layers of issue 8 that had no rule: each translation checked against Keras (TensorFlow in one
subprocess, torch in another), weights moved by the rules' own weight maps (fwport.verify.transfer),
and what is not exact refused with an error finding."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from fwport.verify.transfer import plan, transfer

from conv_numerics import assert_close, compare_weightless

PACK = load_pack("tf2torch")


def tx(src: str):
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "model.py", PACK)
    again = translate_source(r.output, "model.py", PACK)
    assert again.output == r.output, "translating the output again must change nothing"
    return src, r


def errors(r) -> list[str]:
    return [f"{f.code}: {f.message}" for f in r.findings if f.severity is Severity.ERROR]


# --- a harness: given inputs (integer ids too), the weights moved by the rules' maps -----------------------

_KERAS = r'''
import json, sys, types
import numpy as np
import keras
src, build, data, out, moves = sys.argv[1:6]
mod = types.ModuleType("orig"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
xs = [v for _, v in sorted(np.load(data).items(), key=lambda kv: int(kv[0][1:]))]
model = eval(build, mod.__dict__)
keras.utils.set_random_seed(0)
model(*xs) if len(xs) > 1 else model(xs[0])
for w in model.weights:  # away from the initial zeros and ones, so that every map matters
    w.assign(np.random.default_rng(len(w.path)).uniform(-0.5, 0.5, w.shape).astype("float32"))
y = model(*xs, training=False) if len(xs) > 1 else model(xs[0], training=False)
arrays = {}
for m in json.loads(moves):
    obj = eval("model." + m["layer"] + ("" if m["var"] in (".", "") else "." + m["var"]))
    arrays[m["key"]] = np.asarray(obj.numpy())
np.savez(out, y=np.asarray(y), **{"w:" + k: v for k, v in arrays.items()})
'''

_TORCH = r'''
import sys, types
import numpy as np, torch
sys.modules["tensorflow"] = None; sys.modules["keras"] = None  # the translation must not need them
src, build, data, wts, out = sys.argv[1:6]
mod = types.ModuleType("tr"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
xs = [torch.from_numpy(v) for _, v in sorted(np.load(data).items(), key=lambda kv: int(kv[0][1:]))]
model = eval(build, mod.__dict__)
model.eval()
with torch.no_grad():
    model(*xs)  # lazy modules take their sizes
    w = np.load(wts)
    sd = model.state_dict()
    missing = [k for k in sd if k not in w.files and not k.endswith("bias_hh_l0") and not k.endswith("bias_hh_l0_reverse")]
    assert not missing, ("parameters no map writes", missing)
    model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files}, strict=False)
    y = model(*xs)
np.savez(out, y=y.numpy())
'''


def compare(original: str, translated: str, records, build: str, xs: list[np.ndarray]):
    """(Keras output, torch output) for the same inputs, the weights moved by the rules' maps."""
    moves = plan(records, PACK)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "orig.py").write_text(original)
        (d / "tr.py").write_text(translated)
        np.savez(d / "x.npz", **{f"x{i}": x for i, x in enumerate(xs)})
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        spec = json.dumps([{"key": m.key, "layer": m.layer, "var": m.var} for m in moves])
        p = subprocess.run([sys.executable, "-c", _KERAS, str(d / "orig.py"), build, str(d / "x.npz"),
                            str(d / "k.npz"), spec], capture_output=True, text=True, env=env, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        k = np.load(d / "k.npz")
        moved = transfer({n[2:]: k[n] for n in k.files if n.startswith("w:")}, moves)
        np.savez(d / "w.npz", **moved)
        p = subprocess.run([sys.executable, "-c", _TORCH, str(d / "tr.py"), build, str(d / "x.npz"),
                            str(d / "w.npz"), str(d / "t.npz")], capture_output=True, text=True, env=env, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        return k["y"], np.load(d / "t.npz")["y"]


def _records(r, scope: str):
    return [rec for rec in r.layers if rec.scope == scope]


# --- masking: Embedding(mask_zero=True) / Masking before recurrent layers -------------------------------------

MASKED = '''
from tensorflow import keras
from tensorflow.keras import layers


def lstm_last():
    return keras.Sequential([keras.Input(shape=(6,), dtype="int32"), layers.Embedding(20, 4, mask_zero=True),
                             layers.LSTM(5), layers.Dense(2)])


def gru_sequences():
    return keras.Sequential([keras.Input(shape=(6,), dtype="int32"), layers.Embedding(20, 4, mask_zero=True),
                             layers.GRU(5, return_sequences=True), layers.Dense(3)])


def stacked_bidirectional():
    return keras.Sequential([keras.Input(shape=(6,), dtype="int32"), layers.Embedding(20, 4, mask_zero=True),
                             layers.Bidirectional(layers.LSTM(5, return_sequences=True), merge_mode="sum"),
                             layers.Bidirectional(layers.GRU(3))])


def bidirectional_sequences():
    return keras.Sequential([keras.Input(shape=(6,), dtype="int32"), layers.Embedding(20, 4, mask_zero=True),
                             layers.Bidirectional(layers.SimpleRNN(3, return_sequences=True))])


def masking_stacked():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.Masking(0.0), layers.LSTM(4, return_sequences=True),
                             layers.GRU(3, return_sequences=True)])
'''

IDS = np.array([[3, 5, 2, 7, 0, 0], [4, 1, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6], [9, 0, 0, 0, 0, 0]], dtype="int32")


@pytest.fixture(scope="module")
def masked():
    return tx(MASKED)


def test_masked_sequentials_translate_to_packed_sequences(masked):
    _, r = masked
    assert errors(r) == [], errors(r)
    out = r.output
    assert "MaskedEmbedding(20, 4)" in out and "class MaskedEmbedding(nn.Embedding):" in out
    assert "nn.LSTM(4, 5, batch_first=True), MaskedRNNOutput(), nn.Linear(5, 2)" in out
    assert "MaskedRNNOutput(return_sequences=True, total_length=6)" in out
    assert 'MaskedBidirectionalOutput(return_sequences=True, merge_mode="sum", packed=True)' in out
    assert "Masking(0.0), nn.LSTM(3, 4, batch_first=True), MaskedRNNOutput(return_sequences=True, packed=True)" in out
    assert "nn.utils.rnn.pack_padded_sequence" in out
    said = [f.message for f in r.findings if f.code == "idiom-replaced"]
    assert len(said) == 5 and all("out of the loss" in m for m in said)


@pytest.mark.parametrize("model", ["lstm_last", "gru_sequences", "stacked_bidirectional", "bidirectional_sequences"])
def test_masked_recurrent_layers_match_keras_on_right_padded_ids(masked, model):
    src, r = masked
    k, t = compare(src, r.output, _records(r, model), f"{model}()", [IDS])
    assert_close(k, t, rtol=1e-5)
    if model == "gru_sequences":  # Keras carries the last output over the padded steps (not zeros)
        assert np.abs(k[1, 2:] - k[1, 1]).max() < 1e-6 and np.abs(k[1, 1]).max() > 1e-3


def test_masking_layer_matches_keras(masked):
    src, r = masked
    x = np.random.default_rng(0).standard_normal((3, 6, 3)).astype("float32")
    x[0, 4:] = 0.0
    x[1, 2:] = 0.0
    k, t = compare(src, r.output, _records(r, "masking_stacked"), "masking_stacked()", [x])
    assert_close(k, t, rtol=1e-5)


def test_a_mask_that_is_not_right_padding_is_an_error_at_run_time(masked):
    src, r = masked
    with pytest.raises(AssertionError, match="a mask with gaps or left padding"):
        compare(src, r.output, _records(r, "lstm_last"), "lstm_last()", [np.array([[0, 3, 4, 0, 0, 0]], "int32")])


def test_masks_fwport_cannot_follow_stay_refused():
    cases = [
        # nothing recurrent after it: refused as before
        ("layers.Embedding(20, 4, mask_zero=True), layers.Dense(3)", "(6,), dtype=\"int32\"",
         "mask_zero=True: Keras propagates the mask"),
        ("layers.Embedding(20, 4, mask_zero=True), layers.Dropout(0.1), layers.LSTM(3)", "(6,), dtype=\"int32\"",
         "mask_zero=True: Keras propagates the mask"),
        ("layers.Masking(), layers.Dense(3)", "(6, 3)", "Masking: Keras propagates its mask"),
        # the sequence length is needed to pad the packed steps back
        ("layers.Embedding(20, 4, mask_zero=True), layers.GRU(3, return_sequences=True)", "(None,), dtype=\"int32\"",
         "after a mask, on sequences of a length unknown here"),
        # a layer reading the mask after the recurrent layer (a masked average): refused (for now by the
        # channels-first layout GlobalAveragePooling1D gives the Sequential, else as a reader of the mask)
        ("layers.Masking(), layers.LSTM(4, return_sequences=True), layers.GlobalAveragePooling1D()",
         "(6, 3)", ""),
    ]
    for body, shape, said in cases:
        _, r = tx(f'''
            from tensorflow import keras
            from tensorflow.keras import layers

            model = keras.Sequential([keras.Input(shape={shape}), {body}])
        ''')
        assert any(said in e for e in errors(r)), (body, errors(r))
    # in a functional model or a subclass the mask is not followed: refused where it is made
    _, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        ids = keras.Input(shape=(6,), dtype="int32")
        x = layers.Embedding(20, 4, mask_zero=True)(ids)
        model = keras.Model(ids, layers.LSTM(3)(x))
    ''')
    assert any("mask_zero=True: Keras propagates the mask" in e for e in errors(r)), errors(r)
