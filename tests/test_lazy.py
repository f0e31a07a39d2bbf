"""Issue 8, sizes that are not written down: recurrent layers and cells whose input size is known only at
the first call (the Lazy<kind> / Lazy<kind>Cell helpers, torch's LazyModuleMixin), recurrent layers called
as Keras calls them (initial_state=, return_state=True), custom layers whose build() reads input_shape
(the LazyBuild helper), Keras initializers held as values (KerasInitializer).

Numerics: ONE TensorFlow subprocess builds every Keras model and runs it, ONE torch subprocess runs every
translation with the Keras weights moved by the rules' weight maps (loaded BEFORE the first call: the lazy
parameters are materialised by load_state_dict, as a user restoring a checkpoint does), and the outputs are
compared. This process imports no framework.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from fwport.verify.transfer import plan, transfer
from runners import Warm, python

PACK = load_pack("tf2torch")


def tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py", PACK)
    again = translate_source(r.output, "model.py", PACK)
    assert again.output == r.output, "translating the output again must change nothing"
    return r


def errors(r) -> list[str]:
    return [f.code for f in r.findings if f.severity is Severity.ERROR]


ENCODER = '''
import tensorflow as tf

class Encoder(tf.keras.Model):
    def __init__(self, vocab_size, embedding_dim, enc_units):
        super().__init__()
        self.embedding = tf.keras.layers.Embedding(vocab_size, embedding_dim)
        self.gru = tf.keras.layers.GRU(enc_units, return_sequences=True, return_state=True,
                                       recurrent_initializer='glorot_uniform')

    def call(self, x, hidden):
        x = self.embedding(x)
        output, state = self.gru(x, initial_state=hidden)
        return output, state


class Decoder(tf.keras.Model):
    def __init__(self, units):
        super().__init__()
        self.lstm = tf.keras.layers.LSTM(units, return_state=True)
        self.rnn = tf.keras.layers.SimpleRNN(units, return_sequences=True)

    def call(self, x, h, c):
        y = tf.concat([x, x * 2.0], axis=-1)  # the size after it is not followed: built on the first call
        out, h2, c2 = self.lstm(y, initial_state=[h, c])
        return out + h2 + c2, self.rnn(y)
'''

CELLS = '''
import tensorflow as tf
from tensorflow import keras

class Bot(keras.Model):
    def __init__(self, sizes):
        super().__init__()
        self.sizes = sizes
        self.cells = [keras.layers.LSTMCell(sizes[0]), keras.layers.LSTMCell(sizes[1])]
        self.gru = keras.layers.GRUCell(5)
        self.simple = keras.layers.SimpleRNNCell(3, activation="relu")

    def call(self, x):
        batch = x.shape[0]
        steps = tf.unstack(tf.transpose(x, [1, 0, 2]), axis=0)
        for i in range(len(self.cells)):
            state = [tf.zeros((batch, self.sizes[i])), tf.zeros((batch, self.sizes[i]))]
            outs = []
            for step in steps:
                out, state = self.cells[i](step, state)
                outs.append(out)
            steps = outs
        g = tf.zeros((batch, 5))
        s = [tf.zeros((batch, 3))]
        for step in steps:
            g, _ = self.gru(step, g)
            y, s = self.simple(g, s)
        return y + tf.reduce_sum(g), state[1]
'''

ANTIRECTIFIER = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

class Antirectifier(layers.Layer):
    def __init__(self, initializer="he_normal", **kwargs):
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        output_dim = input_shape[-1]
        self.kernel = self.add_weight(shape=(output_dim * 2, output_dim), initializer=self.initializer,
                                      name="kernel", trainable=True)

    def call(self, inputs):
        inputs -= tf.reduce_mean(inputs, axis=-1, keepdims=True)
        pos = tf.nn.relu(inputs)
        neg = tf.nn.relu(-inputs)
        concatenated = tf.concat([pos, neg], axis=-1)
        return tf.matmul(concatenated, self.kernel)

    def get_config(self):
        base_config = super().get_config()
        config = {"initializer": keras.initializers.serialize(self.initializer)}
        return dict(list(base_config.items()) + list(config.items()))


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.anti = Antirectifier()
        self.out = layers.Dense(3)

    def call(self, x):
        return self.out(self.anti(x))
'''

BIDIRECTIONAL = '''
import tensorflow as tf
from tensorflow.keras import layers


class Tagger(tf.keras.Model):
    def __init__(self, units):
        super().__init__()
        self.bi = layers.Bidirectional(layers.GRU(units, return_sequences=True), merge_mode="sum")
        self.bi2 = layers.Bidirectional(layers.LSTM(units))

    def call(self, x):
        y = tf.concat([x, x * 2.0], axis=-1)
        return self.bi2(self.bi(y))
'''

WRAPPED_CELL = '''
import tensorflow as tf
from tensorflow.keras import layers


class Wrapped(tf.keras.Model):
    def __init__(self, units):
        super().__init__()
        self.rnn = layers.RNN(layers.LSTMCell(units), return_sequences=True, return_state=True)

    def call(self, x, h, c):
        seq, h2, c2 = self.rnn(x, initial_state=[h, c])
        return seq, h2 * c2
'''

FUNCTIONAL = '''
from tensorflow import keras
from tensorflow.keras import layers

hidden_dim = 8


def generator(vocab=30):
    inputs = keras.Input(shape=(1,), dtype="int32")
    input_state = keras.Input(shape=(hidden_dim,))
    x = layers.Embedding(vocab, 4)(inputs)
    x, output_state = layers.GRU(hidden_dim, return_state=True)(x, initial_state=input_state)
    outputs = layers.Dense(vocab, activation="softmax")(x)
    return keras.Model(inputs=(inputs, input_state), outputs=(outputs, output_state))


def seq2seq(vocab=30, units=6):
    enc_in = keras.Input(shape=(None,), dtype="int32")
    dec_in = keras.Input(shape=(None,), dtype="int32")
    e = layers.Embedding(vocab, 5)(enc_in)
    _, h, c = layers.LSTM(units, return_state=True)(e)
    d = layers.Embedding(vocab, 5)(dec_in)
    d = layers.LSTM(units, return_sequences=True)(d, initial_state=[h, c])
    return keras.Model([enc_in, dec_in], layers.Dense(vocab)(d))
'''

SEQUENTIAL = '''
from tensorflow import keras
from tensorflow.keras import layers

def build():
    return keras.Sequential([layers.LSTM(6, return_sequences=True), layers.GRU(4)])
'''


def test_encoder_gru_called_as_keras_with_a_derived_input_size():
    r = tx(ENCODER)
    assert errors(r) == []
    out = r.output
    # the Embedding's output_dim (a constructor parameter) is the GRU's input size: nothing lazy
    assert "self.gru = LazyGRU(enc_units, embedding_dim, return_sequences=True, return_state=True)" in out
    assert "output, state = self.gru(x, initial_state=hidden)" in out
    # after a concat the size is not followed: the LSTM makes its input weights on the first call
    assert "self.lstm = LazyLSTM(units, return_state=True)" in out
    assert "self.rnn = LazyRNN(units, return_sequences=True)" in out
    assert out.count("class LazyGRU(nn.modules.lazy.LazyModuleMixin, nn.GRU):") == 1
    assert "tensorflow" not in out
    infos = [f.message for f in r.findings if f.code == "shape-unknown"]
    assert any("LazyLSTM" in m for m in infos) and not any("LazyGRU" in m for m in infos)


def test_cells_become_lazy_cell_helpers():
    r = tx(CELLS)
    assert errors(r) == []
    assert "self.cells = nn.ModuleList([LazyLSTMCell(sizes[0]), LazyLSTMCell(sizes[1])])" in r.output
    listed = tx(CELLS.replace("[keras.layers.LSTMCell(sizes[0]), keras.layers.LSTMCell(sizes[1])]",
                              "[keras.layers.LSTMCell(size) for size in sizes]"))
    assert "self.cells = nn.ModuleList([LazyLSTMCell(size) for size in sizes])" in listed.output
    assert "self.gru = LazyGRUCell(5)" in r.output
    assert 'self.simple = LazyRNNCell(3, nonlinearity="relu")' in r.output


def test_cell_refusals():
    r = tx('''
        from tensorflow import keras
        a = keras.layers.LSTMCell(4, dropout=0.2)
        b = keras.layers.GRUCell(4, reset_after=False)
        c = keras.layers.SimpleRNNCell(4, activation="sigmoid")
    ''')
    assert errors(r) == ["unsupported-argument"] * 3


def test_custom_layer_built_on_the_first_call():
    r = tx(ANTIRECTIFIER)
    assert errors(r) == []
    out = r.output
    assert "class Antirectifier(LazyBuild, nn.Module):" in out
    assert "        self.kernel = nn.UninitializedParameter()\n\n    def build(self, input_shape):" in out
    assert "self.kernel = nn.Parameter(KerasInitializer(self.initializer)((output_dim * 2, output_dim)))" in out
    assert "self.initializer = KerasInitializer(initializer)" in out
    # TensorFlow rebinds `inputs -= m`; torch would write into the caller's tensor
    assert "inputs = inputs - torch.mean(inputs, dim=-1, keepdim=True)" in out
    assert "KerasInitializer(self.initializer).get_config()" in out
    assert not any(f.code == "shape-unknown" and f.severity is Severity.ERROR for f in r.findings)


def test_build_of_a_class_deriving_from_a_translated_class_is_still_reported():
    r = tx('''
        from tensorflow.keras import layers

        class A(layers.Layer):
            def call(self, x):
                return x

        class B(A):
            def build(self, input_shape):
                self.w = self.add_weight(shape=(input_shape[-1],), initializer="zeros")

            def call(self, x):
                return x + self.w
    ''')
    assert errors(r) == ["shape-unknown"]


def test_rnn_with_a_mask_argument_is_an_error():
    r = tx('''
        import tensorflow as tf

        class M(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.gru = tf.keras.layers.GRU(4)

            def call(self, x, m):
                return self.gru(x, mask=m)
    ''')
    assert "unsupported-construct" in errors(r)


def test_bidirectional_of_unknown_input_size():
    r = tx(BIDIRECTIONAL)
    assert errors(r) == []
    assert 'self.bi = LazyGRU(units, return_sequences=True, merge_mode="sum", bidirectional=True)' in r.output
    # the sum of the two directions has `units` features: the next layer's size is known
    assert "nn.LSTM(units, units, batch_first=True, bidirectional=True), BidirectionalOutput()" in r.output
    assert {(x.source, x.variant) for x in r.layers} == {("bi", "gru"), ("bi2", "lstm")}


def test_rnn_of_a_cell_is_the_layer_of_its_kind():
    r = tx(WRAPPED_CELL)
    assert errors(r) == []
    assert "self.rnn = LazyLSTM(units, return_sequences=True, return_state=True)" in r.output
    assert [(x.source, x.rule, x.variant) for x in r.layers] == [("rnn", "rnn-layer", "lstm")]
    refused = tx('''
        from tensorflow.keras import layers
        a = layers.RNN([layers.LSTMCell(4), layers.LSTMCell(3)])
    ''')
    assert errors(refused) == ["unsupported-argument"]


def test_functional_recurrent_layers_with_states():
    r = tx(FUNCTIONAL)
    assert errors(r) == []
    out = r.output
    assert "self.gru = LazyGRU(hidden_dim, 4, return_state=True)" in out
    assert "x, output_state = self.gru(x, initial_state=input_state)" in out
    assert "return outputs, output_state" in out
    assert "_, h, c = self.lstm1(e)" in out and "d = self.lstm2(d, initial_state=[h, c])" in out


def test_functional_recurrent_call_with_a_mask_is_still_refused():
    r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        def build():
            x = keras.Input(shape=(5, 3))
            m = keras.Input(shape=(5,), dtype="bool")
            return keras.Model([x, m], layers.GRU(4)(x, mask=m))
    ''')
    assert "unsupported-construct" in errors(r)


def test_sequential_without_an_input_shape_is_built_on_the_first_call():
    r = tx(SEQUENTIAL)
    assert errors(r) == []
    assert "nn.Sequential(LazyLSTM(6, return_sequences=True), nn.GRU(6, 4, batch_first=True), RNNOutput())" in r.output


# --- numerics: Keras vs the translation -----------------------------------------------------------------

rng = np.random.default_rng(0)
CASES = {
    # name: (source, build expression, inputs, call expression)
    "encoder": (ENCODER, "Encoder(50, 6, 7)", {"x": rng.integers(0, 50, (2, 5)).astype(np.int32),
                                               "h": rng.standard_normal((2, 7)).astype(np.float32)},
                "model(x, h)"),
    "decoder": (ENCODER, "Decoder(4)", {"x": rng.standard_normal((2, 5, 3)).astype(np.float32),
                                       "h": rng.standard_normal((2, 4)).astype(np.float32),
                                       "c": rng.standard_normal((2, 4)).astype(np.float32)}, "model(x, h, c)"),
    "cells": (CELLS, "Bot([6, 4])", {"x": rng.standard_normal((2, 5, 3)).astype(np.float32)}, "model(x)"),
    "antirectifier": (ANTIRECTIFIER, "Net()", {"x": rng.standard_normal((4, 8)).astype(np.float32)}, "model(x)"),
    "bidirectional": (BIDIRECTIONAL, "Tagger(4)", {"x": rng.standard_normal((2, 5, 3)).astype(np.float32)},
                      "model(x)"),
    "generator": (FUNCTIONAL, "generator()", {"x": rng.integers(0, 30, (2, 1)).astype(np.int32),
                                              "s": rng.standard_normal((2, 8)).astype(np.float32)},
                  {"keras": "model([x, s])", "torch": "model(x, s)"}),
    "seq2seq": (FUNCTIONAL, "seq2seq()", {"a": rng.integers(0, 30, (2, 6)).astype(np.int32),
                                          "b": rng.integers(0, 30, (2, 4)).astype(np.int32)},
                {"keras": "model([a, b])", "torch": "model(a, b)"}),
    "wrapped-cell": (WRAPPED_CELL, "Wrapped(4)", {"x": rng.standard_normal((2, 5, 3)).astype(np.float32),
                                                 "h": rng.standard_normal((2, 4)).astype(np.float32),
                                                 "c": rng.standard_normal((2, 4)).astype(np.float32)},
                     "model(x, h, c)"),
    "sequential": (SEQUENTIAL, "build()", {"x": rng.standard_normal((2, 5, 3)).astype(np.float32)}, "model(x)"),
}

TF_SIDE = r'''
import json, re, sys, numpy as np
import tensorflow as tf
req = json.load(open(sys.argv[1]))
out = {}
for name, case in req.items():
    g = {}
    exec(case["src"], g)
    model = eval(case["build"], g)
    xs = {k: tf.constant(np.load(v)) for k, v in case["inputs"].items()}
    res = eval(case["call"], {**g, **xs, "model": model})
    res = res if isinstance(res, (list, tuple)) else [res]
    np.savez(case["dir"] + "/keras.npz", *[np.asarray(r) for r in res])
    weights = {}
    for key, (layer, var) in case["moves"].items():
        obj = model
        for part in layer.split("."):
            m = re.fullmatch(r"(\w+)\[(\d+)\]", part)
            obj = getattr(obj, m.group(1))[int(m.group(2))] if m else getattr(obj, part)
        for part in ([] if var in (".", "") else var.split(".")):
            obj = getattr(obj, part)
        weights[key] = np.asarray(obj)
    np.savez(case["dir"] + "/weights.npz", **weights)
'''

TORCH_SIDE = r'''
import json, sys, numpy as np, torch
req = json.load(open(sys.argv[1]))
for name, case in req.items():
    g = {}
    exec(case["out"], g)
    model = eval(case["build"], g)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # before the first call: the lazy weights are in it
    w = np.load(case["dir"] + "/moved.npz")
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files}, strict=False)
    assert not unexpected, unexpected
    xs = {k: torch.from_numpy(np.load(v)) for k, v in case["inputs"].items()}
    xs = {k: v.long() if v.dtype == torch.int32 else v for k, v in xs.items()}
    before = {k: v.clone() for k, v in xs.items()}
    res = eval(case["call"], {**g, **xs, "model": model})
    res = res if isinstance(res, (list, tuple)) else [res]
    assert all(torch.equal(before[k], xs[k]) for k in xs), "the call wrote into its input"
    np.savez(case["dir"] + "/torch.npz", *[r.detach().numpy() for r in res])
    # one optimizer step moves every parameter that took part (the lazy ones included)
    sum(r.sum() for r in res).backward()
    lazy = [n for n, p in model.named_parameters() if p.grad is None]
    opt.step()
    json.dump({"no_grad": lazy, "missing": missing}, open(case["dir"] + "/report.json", "w"))
'''


def _env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_USE_LEGACY_KERAS", None)
    return env


def _py(*argv, side: str, timeout: int) -> subprocess.CompletedProcess:
    """``python argv...`` with _env(): in the test file's warm worker of ``side`` (a fresh process where
    TF_USE_LEGACY_KERAS is set, which a worker cannot take away)."""
    if "TF_USE_LEGACY_KERAS" in os.environ:
        return subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True, timeout=timeout,
                              env=_env())
    return python(*argv, side=side, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=timeout)


def test_translations_compute_what_keras_computes(tmp_path: Path):
    req_tf, req_torch = {}, {}
    for name, (src, build, inputs, call) in CASES.items():
        d = tmp_path / name
        d.mkdir()
        src = textwrap.dedent(src).lstrip("\n")
        r = tx(src)
        assert errors(r) == [], name
        files = {}
        for k, v in inputs.items():
            np.save(d / f"{k}.npy", v)
            files[k] = str(d / f"{k}.npy")
        moves = plan([x for x in r.layers if x.scope == build.split("(")[0]], PACK)
        assert moves, name
        calls = call if isinstance(call, dict) else {"keras": call, "torch": call}
        req_tf[name] = {"src": src, "build": build, "inputs": files, "call": calls["keras"], "dir": str(d),
                        "moves": {m.key: (m.layer, m.var) for m in moves}}
        req_torch[name] = {"out": r.output, "build": build, "inputs": files, "call": calls["torch"], "dir": str(d)}
        req_torch[name]["moves"] = moves
    (tmp_path / "tf.json").write_text(json.dumps(req_tf))
    (tmp_path / "tf_side.py").write_text(TF_SIDE)
    p = _py(tmp_path / "tf_side.py", tmp_path / "tf.json", side="keras", timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    for name, case in req_torch.items():
        w = np.load(Path(case["dir"]) / "weights.npz")
        moved = transfer({k: w[k] for k in w.files}, case.pop("moves"))
        np.savez(Path(case["dir"]) / "moved.npz", **moved)
    (tmp_path / "torch.json").write_text(json.dumps(req_torch))
    (tmp_path / "torch_side.py").write_text(TORCH_SIDE)
    p = _py(tmp_path / "torch_side.py", tmp_path / "torch.json", side="torch", timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    for name, case in req_torch.items():
        d = Path(case["dir"])
        k, t = np.load(d / "keras.npz"), np.load(d / "torch.npz")
        assert len(k.files) == len(t.files), name
        for f in k.files:
            assert k[f].shape == t[f].shape, (name, f, k[f].shape, t[f].shape)
            np.testing.assert_allclose(t[f], k[f], rtol=1e-5, atol=1e-5, err_msg=f"{name} output {f}")
        report = json.loads((d / "report.json").read_text())
        assert report["missing"] == [] or all(m.endswith("bias_hh") or m.endswith("bias_hh_l0")
                                              for m in report["missing"]), (name, report)


def test_keras_initializer_draws_from_keras_distributions(tmp_path: Path):
    """KerasInitializer against Keras's own initializers: the same quantiles of 200,000 draws (a
    truncated normal has a hard bound at two standard deviations, which an untruncated one lacks)."""
    names = ["he_normal", "glorot_uniform", "lecun_normal", "he_uniform", "random_normal", "truncated_normal",
             "GlorotNormal"]
    shape = (3, 3, 40, 500)  # fans: Keras's (in = 3*3*40, out = 3*3*500)
    r = tx("from tensorflow import keras\n" + "".join(f"i{k} = keras.initializers.get({n!r})\n"
                                                        for k, n in enumerate(names)))
    assert errors(r) == [] and "keras" not in r.output.replace("Keras", "")
    q = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0]
    tf_src = (f"import json, numpy as np, keras\nout = {{}}\nfor n in {names!r}:\n"
              f"    x = np.asarray(keras.initializers.get(n)({shape!r})).ravel()\n"
              f"    out[n] = np.quantile(x, {q!r}).tolist()\n"
              f"json.dump(out, open({str(tmp_path / 'k.json')!r}, 'w'))\n")
    torch_src = (r.output + f"\nimport json, numpy as np\nout = {{}}\n"
                 + "".join(f"out[{n!r}] = np.quantile(i{k}({shape!r}).numpy().ravel(), {q!r}).tolist()\n"
                           for k, n in enumerate(names))
                 + f"json.dump(out, open({str(tmp_path / 't.json')!r}, 'w'))\n")
    for name, src, side in (("tf_init.py", tf_src, "keras"), ("torch_init.py", torch_src, "torch")):
        (tmp_path / name).write_text(src)
        p = _py(tmp_path / name, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
    k, t = json.loads((tmp_path / "k.json").read_text()), json.loads((tmp_path / "t.json").read_text())
    for n in names:
        scale = max(abs(k[n][0]), abs(k[n][-1]))
        # the bounds (a truncated normal's ±2σ, a uniform's limit) within 1%, the quantiles within 2% of them
        if n != "random_normal":  # unbounded: its extremes are noise
            np.testing.assert_allclose(t[n][0], k[n][0], rtol=0.01, err_msg=n)
            np.testing.assert_allclose(t[n][-1], k[n][-1], rtol=0.01, err_msg=n)
        inner = slice(0, None) if n != "random_normal" else slice(1, -1)
        np.testing.assert_allclose(t[n][inner], k[n][inner], atol=0.02 * scale, err_msg=n)


def test_initializer_objects_with_parameters_draw_what_keras_draws(tmp_path: Path):
    """Initializer objects built with parameters (tf.random_normal_initializer(0.5, 0.02), TruncatedNormal(mean,
    stddev), RandomUniform, Constant, tf.zeros_initializer...) and called with a shape and a dtype string, as
    TensorFlow's guide to custom layers does: the same quantiles as Keras's own draws, constants exactly."""
    made = {"normal": "tf.random_normal_initializer(0.5, 0.02)",
            "truncated": "keras.initializers.TruncatedNormal(mean=1.0, stddev=0.1)",
            "uniform": "keras.initializers.RandomUniform(-0.2, 0.3)",
            "he": "keras.initializers.HeNormal()",
            "constant": "keras.initializers.Constant(0.7)",
            "tf_constant": "tf.constant_initializer(2.0)",
            "zeros": "tf.zeros_initializer()",
            "ones": "tf.ones_initializer()"}
    shape = (40, 5000)
    src = "import tensorflow as tf\nfrom tensorflow import keras\n" + "".join(f"{k} = {v}\n" for k, v in made.items())
    r = tx(src)
    assert errors(r) == [] and "tf." not in r.output and "keras." not in r.output
    q = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0]
    tail = ("import json, numpy as np\nout = {}\n"
            + "".join(f"out[{k!r}] = np.quantile(np.asarray({k}(shape={shape!r}, dtype='float32')).ravel(), {q!r}).tolist()\n"
                      for k in made)
            + "json.dump(out, open(OUT, 'w'))\n")
    for name, code, out, side in (("tf_objects.py", src, "k.json", "keras"), ("torch_objects.py", r.output, "t.json", "torch")):
        (tmp_path / name).write_text(code + f"\nOUT = {str(tmp_path / out)!r}\n" + tail)
        p = _py(tmp_path / name, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
    k, t = json.loads((tmp_path / "k.json").read_text()), json.loads((tmp_path / "t.json").read_text())
    for n in made:
        if n in ("constant", "tf_constant", "zeros", "ones"):
            assert t[n] == k[n], n
            continue
        spread = k[n][-2] - k[n][1]
        np.testing.assert_allclose(t[n][1:-1], k[n][1:-1], atol=0.02 * spread, err_msg=n)
        if n in ("truncated", "uniform"):  # hard bounds: mean ± 2 stddev, [minval, maxval)
            np.testing.assert_allclose([t[n][0], t[n][-1]], [k[n][0], k[n][-1]], atol=0.01 * spread, err_msg=n)


SQUEEZE_EXCITE = '''
from tensorflow import keras
from tensorflow.keras import layers


class SqueezeExcite(layers.Layer):
    def __init__(self, ratio=4, **kwargs):
        super().__init__(**kwargs)
        self.ratio = ratio

    def build(self, input_shape):
        filters = input_shape[-1]
        self.squeeze = layers.GlobalAveragePooling2D(keepdims=True)
        self.reduction = layers.Dense(units=filters // self.ratio, activation="relu", use_bias=False)
        self.excite = layers.Dense(units=filters, activation="sigmoid", use_bias=False)
        self.multiply = layers.Multiply()

    def call(self, x):
        shortcut = x
        x = self.squeeze(x)
        x = self.reduction(x)
        x = self.excite(x)
        return self.multiply([shortcut, x])
'''


def test_layers_created_in_build_are_the_class_layers(tmp_path):
    # keras-io's patch_convnet: the layers of a block made in build(input_shape) get what those of
    # __init__ get: a channels-last pooling permuted at its call, a merge layer written out where it is
    # called (they were refused: "not part of a model fwport follows", "Multiply has no torch module")
    r = tx(SQUEEZE_EXCITE)
    assert errors(r) == [], r.findings
    out = r.output
    assert "        self.squeeze = nn.AdaptiveAvgPool2d(1)\n" in out
    assert "x = self.squeeze(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)" in out
    assert "return shortcut * x" in out and "tensorflow" not in out
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(SQUEEZE_EXCITE))
    (tmp_path / "m_torch.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), "SqueezeExcite",
                          inputs=["float32[2,5,5,8]"], checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
