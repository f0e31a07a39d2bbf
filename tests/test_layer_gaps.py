"""Issue 8's functional-API and layer gaps (task lay18): each construct translated exactly, checked against
Keras, or an explicit finding.

- a layer without a rule that reads the features of a channels-first Flatten in a Sequential;
- ``model.get_layer(...)`` on a translated model;
- ``tf.random.Generator.from_seed(s)`` and its draws.
"""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import Warm

PACK = load_pack("tf2torch")


def tr(src: str, **opts):
    return translate_source(textwrap.dedent(src).lstrip("\n"), PACK, **opts)


def codes(result, severity=None):
    return [f.code for f in result.findings if severity is None or f.severity == severity]


def messages(result, severity=None):
    return [f.message for f in result.findings if severity is None or f.severity == severity]


# --- a layer without a rule after a channels-first Flatten --------------------------------------------

_UNKNOWN_AFTER_FLATTEN = '''
from tensorflow import keras
from tensorflow.keras import layers


class FirstHalf(keras.layers.Layer):
    """Order-dependent: keeps the first half of the features, scaled by their position."""

    def call(self, x):
        n = x.shape[-1] // 2
        return x[:, :n] * 2.0


def build():
    return keras.Sequential([
        keras.Input(shape=(6, 5, 3)),
        layers.Conv2D(4, 3),
        layers.Flatten(),
        FirstHalf(),
    ])
'''


def test_a_layer_without_a_rule_after_a_channels_first_flatten_sees_keras_order():
    """A layer of the file (no rule) reading the Flatten of a map converted to channels-first had received the
    features in torch's (c, h, w) order, silently: the Flatten now moves the channels last first (an info
    says why), and the output is Keras's, checked numerically on an order-dependent layer."""
    from conv_numerics import assert_close, compare_model
    src = textwrap.dedent(_UNKNOWN_AFTER_FLATTEN).lstrip("\n")
    r = tr(src)
    assert not codes(r, Severity.ERROR)
    assert "ChannelsLastReshape((-1,))" in r.output and "nn.Flatten()" not in r.output
    assert any("is read by FirstHalf, a layer fwport has no rule for" in m for m in messages(r, Severity.INFO))
    k, t = compare_model(src, r.output, "build()", (2, 6, 5, 3), layout_in="nchw", layout_out="same")
    assert k.shape == t.shape == (2, 24)
    assert_close(k, t, rtol=1e-5)


def test_a_dense_before_the_unknown_layer_keeps_nn_flatten():
    """A Dense between the Flatten and the layer without a rule reorders its kernel rows (exact already): the
    Flatten stays nn.Flatten(), and the unknown layer sees the Dense's outputs, which have no order to fix."""
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers
        from mylib import Mystery


        def build():
            return keras.Sequential([keras.Input(shape=(6, 5, 3)), layers.Conv2D(3, 3), layers.Flatten(),
                                     layers.Dense(8), Mystery()])
    ''')
    assert "nn.Flatten()" in r.output and "ChannelsLastReshape" not in r.output
    assert not any("no rule for" in m for m in messages(r))


def test_an_imported_layer_without_a_rule_after_the_flatten_is_not_silent():
    """An imported layer fwport does not know, at the end of a channels-first Sequential after a Flatten: the
    Flatten gives it Keras's order (an info names it), where it had been nn.Flatten() without a word."""
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers
        from mylib import Mystery


        def build():
            return keras.Sequential([keras.Input(shape=(6, 5, 3)), layers.Conv2D(3, 3), layers.Flatten(),
                                     layers.Dropout(0.2), Mystery()])
    ''')
    assert "ChannelsLastReshape((-1,))" in r.output and "nn.Flatten()" not in r.output
    assert any("is read by Mystery" in m for m in messages(r, Severity.INFO))


# --- model.get_layer(...) on a translated model -------------------------------------------------------

def _run(code_text: str, program: str, tail: str, **env_extra: str) -> dict:
    """Run ``program`` (a file's text) then ``tail`` as Python runs a file, in the test file's warm worker for what
    it imports (runners.python); ``tail`` prints one JSON object; ``code_text`` names the side in a failure."""
    import json
    import tempfile
    from pathlib import Path

    from runners import python
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "prog.py"
        path.write_text(program + "\n" + tail)
        env = dict(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **env_extra)
        p = python(path, env=env, timeout=600, cwd=d)
        assert p.returncode == 0, (code_text, p.stderr[-3000:])
        return json.loads(p.stdout.strip().splitlines()[-1])


_GET_LAYER = '''
import numpy as np
import keras
from keras import layers


def build():
    inp = keras.Input(shape=(4,), dtype="int32")
    x = layers.Embedding(10, 3, name="emb")(inp)
    h = layers.Flatten()(x)
    out = layers.Dense(2, activation="relu", name="head")(h)
    return keras.Model(inp, out)


model = build()
model.get_layer("emb").set_weights([np.arange(30, dtype="float32").reshape(10, 3) / 10.0])
table = model.get_layer("emb").get_weights()[0]
model.get_layer("head").trainable = False
model.get_layer(index=1).trainable = False


def seq():
    return keras.Sequential([keras.Input(shape=(6,)), layers.Dense(4, activation="relu", name="a"),
                             layers.Dense(3, name="b")])


s = seq()
s.get_layer("b").trainable = False
'''


def test_get_layer_on_translated_models_is_the_module_holding_its_weights():
    """get_layer("name") / get_layer(index=i) on a functional model and a Sequential (from a builder of the file)
    → the module holding the layer's weights, for freezing, and for an Embedding's get_weights() / set_weights():
    the table read back, the frozen parameters and the model's output are Keras's."""
    r = tr(_GET_LAYER)
    assert not codes(r, Severity.ERROR), messages(r, Severity.ERROR)
    out = r.output
    assert "with torch.no_grad():\n    model.emb.weight.copy_(torch.as_tensor(" in out
    assert "table = [model.emb.weight.detach().cpu().numpy()][0]" in out
    assert "model.head.requires_grad_(False)" in out and "model.emb.requires_grad_(False)" in out
    assert "s[2].requires_grad_(False)" in out and "get_layer" not in out
    keras_tail = '''
import json
x = np.array([[1, 2, 3, 9], [0, 4, 4, 5]], dtype="int32")
print(json.dumps({"table": table.tolist(), "frozen": [len(l.trainable_weights) for l in model.layers],
                  "seq_frozen": [len(l.trainable_weights) for l in s.layers], "emb": model.layers[1](x).numpy().tolist()}))
'''
    torch_tail = '''
import json
x = torch.tensor([[1, 2, 3, 9], [0, 4, 4, 5]])
mods = [None, model.emb, model.flatten, model.head]
print(json.dumps({"table": table.tolist(),
                  "frozen": [0 if m is None else sum(p.requires_grad for p in m.parameters()) for m in mods],
                  "seq_frozen": [sum(p.requires_grad for p in s[i].parameters()) for i in (0, 2)],
                  "emb": model.emb(x).detach().numpy().tolist()}))
'''
    k = _run("keras", textwrap.dedent(_GET_LAYER), keras_tail)
    t = _run("torch", out, torch_tail)
    import numpy as np
    np.testing.assert_allclose(np.array(t["table"]), np.array(k["table"]), rtol=0, atol=0)
    np.testing.assert_allclose(np.array(t["emb"]), np.array(k["emb"]), rtol=0, atol=0)
    assert t["frozen"] == k["frozen"] == [0, 0, 0, 0]
    assert t["seq_frozen"] == k["seq_frozen"] == [2, 0]


def test_get_layer_where_the_translation_has_no_one_module_stays_an_error():
    """A name no layer has, an LSTM's get_weights() (its gates' order and bias halves are no one permutation of
    Keras's arrays), a layer read as an object: each an error, the call left as written."""
    r = tr('''
        import keras
        from keras import layers


        def build():
            inp = keras.Input(shape=(5, 8))
            x = layers.LSTM(6, name="rnn")(inp)
            out = layers.Dense(4, name="head")(x)
            return keras.Model(inp, out)


        model = build()
        model.get_layer("nope").trainable = False
        w = model.get_layer("rnn").get_weights()
        layer = model.get_layer("head")
    ''')
    errors = messages(r, Severity.ERROR)
    assert len(errors) == 3 and all(m.startswith("model.get_layer(") for m in errors)
    assert any("get_weights() gives Keras's arrays by position" in m and "not of a LSTM" in m for m in errors)
    code_lines = [line for line in r.output.splitlines() if not line.lstrip().startswith("#")]
    assert sum("model.get_layer(" in line for line in code_lines) == 3


# --- tf.random.Generator.from_seed ----------------------------------------------------------------------

_GENERATOR = '''
import tensorflow as tf

g = tf.random.Generator.from_seed(42)
a = g.normal(shape=(300, 4))
b = g.uniform(shape=(500,), minval=-1.0, maxval=3.0)
c = g.normal([400], mean=2.0, stddev=0.5, dtype=tf.float64)
d = g.uniform((600,), 2, 7, dtype=tf.int32)


def noise(n):
    return g.normal((n, 2))


e = noise(3)
g.reset_from_seed(42)
f = g.normal(shape=(300, 4))
s = g.make_seeds(5)
'''


def test_generator_from_seed_draws_on_a_seeded_torch_generator():
    """from_seed → torch.Generator().manual_seed, its normal / uniform draws → torch.randn / rand / randint with
    generator=: the same shapes, dtypes and ranges as TensorFlow's draws (the values differ: a warning says so),
    and the same values on each run of the translation."""
    r = tr(_GENERATOR)
    assert not codes(r, Severity.ERROR), messages(r, Severity.ERROR)
    assert [f.code for f in r.findings if f.severity == Severity.WARNING] == ["random-stream"]
    out = r.output
    assert "tensorflow" not in out and "g = torch.Generator().manual_seed(42)" in out
    assert "d = torch.randint(2, 7, (600,), generator=g, dtype=torch.int32)" in out
    assert "return torch.randn((n, 2), generator=g)" in out and "g.manual_seed(42)" in out
    assert "s = torch.randint(-2 ** 63, 2 ** 63 - 1, (2, 5), generator=g, dtype=torch.int64)" in out
    tail = '''
import json
import numpy as np
vals = {k: np.asarray(v) for k, v in dict(a=a, b=b, c=c, d=d, e=e, f=f, s=s).items()}
print(json.dumps({k: [list(v.shape), str(v.dtype), float(v.min()), float(v.max()), float(v.mean()), float(v.std())]
                  for k, v in vals.items()} | {"first": float(vals["a"].ravel()[0])}))
'''
    k = _run("tf", textwrap.dedent(_GENERATOR), tail)
    t1, t2 = _run("torch", out, tail), _run("torch", out, tail)
    assert t1 == t2  # seeded: the same values on each run
    for name in "abcdefs":
        assert t1[name][:2] == k[name][:2], name  # shape and dtype
    for v in (k, t1):  # reset_from_seed restarts the stream: f is a again; make_seeds spans the int64 range
        assert v["f"][2:] == v["a"][2:]
        assert v["s"][2] < -2 ** 60 and v["s"][3] > 2 ** 60
    for v in (k, t1):
        assert -1.0 <= v["b"][2] and v["b"][3] < 3.0 and abs(v["b"][4] - 1.0) < 0.2
        assert v["d"][2] == 2 and v["d"][3] == 6
        assert abs(v["c"][4] - 2.0) < 0.1 and abs(v["c"][5] - 0.5) < 0.1
        assert abs(v["a"][4]) < 0.15 and abs(v["a"][5] - 1.0) < 0.1
    assert t1["first"] != k["first"]  # another stream, as the warning says


def test_generator_uses_fwport_does_not_follow_are_errors():
    """A method other than normal / uniform, or the generator passed on: errors, and the generator stays
    TensorFlow's (its from_seed keeps the no-rule error), never a torch.Generator given to Keras-style calls."""
    r = tr('''
        import tensorflow as tf


        def use(gen):
            return gen.normal([3])


        h = tf.random.Generator.from_seed(3)
        children = h.split(2)
        use(h)
        x = h.uniform([1])
    ''')
    errors = [f for f in r.findings if f.severity == Severity.ERROR]
    assert sorted(f.code for f in errors) == ["no-rule", "unsupported-construct", "unsupported-construct"]
    code_lines = "\n".join(line for line in r.output.splitlines() if not line.lstrip().startswith("#"))
    assert "torch" not in code_lines and "h.uniform([1])" in code_lines


_OTHER_GENERATORS = '''
import tensorflow as tf

tf.random.set_seed(7)
glob = tf.random.get_global_generator()
a = glob.normal(shape=(400, 3))
fresh = tf.random.Generator.from_non_deterministic_state()
b = fresh.uniform((500,), minval=2.0, maxval=4.0)
c = fresh.normal([300], dtype=tf.float64)
'''


def test_global_and_non_deterministic_generators_are_torch_generators():
    """tf.random.get_global_generator() → a helper's torch.Generator, one for the file, seeded from the operating
    system the first time it is asked for (as TensorFlow's, which tf.random.set_seed does not seed);
    Generator.from_non_deterministic_state() → a torch.Generator seeded from the operating system. Both give other
    numbers on each run, as in TensorFlow, with TensorFlow's shapes, dtypes and ranges."""
    r = tr(_OTHER_GENERATORS + "same = tf.random.get_global_generator()\n")
    assert not codes(r, Severity.ERROR), messages(r, Severity.ERROR)
    assert not codes(r, Severity.WARNING), messages(r, Severity.WARNING)
    out = r.output
    assert "tensorflow" not in out and "glob = global_generator()" in out and "same = global_generator()" in out
    assert out.count("def global_generator():") == 1
    assert "fresh = torch.Generator().manual_seed(secrets.randbits(63))" in out and "import secrets" in out
    tail = '''
import json
import numpy as np
vals = {k: np.asarray(v) for k, v in dict(a=a, b=b, c=c).items()}
print(json.dumps({k: [list(v.shape), str(v.dtype), float(v.min()), float(v.max()), float(v.mean()), float(v.std())]
                  for k, v in vals.items()} | {"same": same is glob}))
'''
    source = textwrap.dedent(_OTHER_GENERATORS) + "same = tf.random.get_global_generator()\n"
    k1, k2 = _run("tf", source, tail), _run("tf", source, tail)
    t1, t2 = _run("torch", out, tail), _run("torch", out, tail)
    for name in "ab":  # seeded from the operating system: other numbers on each run, in both
        assert t1[name] != t2[name] and k1[name] != k2[name], name
    assert t1["same"] is True and k1["same"] is True  # one global generator
    for name in "abc":
        assert t1[name][:2] == k1[name][:2], name  # shape and dtype
    for v in (k1, t1):
        assert abs(v["a"][4]) < 0.15 and abs(v["a"][5] - 1.0) < 0.1
        assert 2.0 <= v["b"][2] and v["b"][3] < 4.0 and abs(v["b"][4] - 3.0) < 0.15
        assert abs(v["c"][4]) < 0.2 and abs(v["c"][5] - 1.0) < 0.15


_CELLS = '''
import tensorflow as tf

g = tf.random.Generator.from_seed(1)
a = g.normal(shape=(300, 2))
g.reset_from_seed(1)
a2 = g.normal(shape=(300, 2))
g = tf.random.Generator.from_seed(2)
children = g.split(2)
b = children[0].uniform((200,))
g = tf.random.Generator.from_seed(3, alg="philox")
c = [g.uniform((100,), minval=5.0, maxval=6.0) for _ in range(2)]
'''


def test_a_generator_name_bound_again_is_decided_per_binding():
    """A notebook binds one name to several generators, one after another at the top level: each binding and the
    reads up to the next is decided alone, so the one used otherwise (g.split) is an error and stays TensorFlow's
    while the others are torch generators; the translated draws have TensorFlow's shapes, ranges and reset."""
    r = tr(_CELLS)
    errors = [f for f in r.findings if f.severity == Severity.ERROR]
    assert sorted((f.line, f.code) for f in errors) == [(7, "no-rule"), (8, "unsupported-construct")], \
        messages(r, Severity.ERROR)
    out = r.output
    assert out.count("g = torch.Generator().manual_seed(") == 2 and "g = tf.random.Generator.from_seed(2)" in out
    assert "children = g.split(2)" in out and "a2 = torch.randn((300, 2), generator=g)" in out
    assert "c = [(5.0 + (6.0 - 5.0) * torch.rand((100,), generator=g)) for _ in range(2)]" in out
    tail = '''
import json
import numpy as np
vals = {k: np.asarray(v) for k, v in dict(a=a, a2=a2, c=np.stack([np.asarray(x) for x in c])).items()}
print(json.dumps({k: [list(v.shape), str(v.dtype), float(v.min()), float(v.max()), float(v.mean())]
                  for k, v in vals.items()}))
'''
    k, t = _run("tf", textwrap.dedent(_CELLS), tail), _run("torch", out, tail)
    for v in (k, t):
        assert v["a"] == v["a2"]  # reset_from_seed restarts the stream
        assert v["c"][0] == [2, 100] and 5.0 <= v["c"][2] and v["c"][3] < 6.0
    assert [v[:2] for v in t.values()] == [v[:2] for v in k.values()]


def test_a_generator_bound_under_a_condition_is_decided_as_a_whole():
    """Where the text order may not be the run order (a binding under if, a read in a function), the bindings of
    the name are decided together: one used otherwise leaves them all TensorFlow's, with their errors."""
    r = tr('''
        import tensorflow as tf

        g = tf.random.Generator.from_seed(1)
        a = g.normal([3])
        if a[0] > 0:
            g = tf.random.Generator.from_seed(2)
        children = g.split(2)
    ''')
    assert sorted(f.line for f in r.findings if f.severity == Severity.ERROR) == [3, 6, 7]
    assert "torch" not in "\n".join(line for line in r.output.splitlines() if not line.lstrip().startswith("#"))


# --- go_backwards=True on the recurrent layers ----------------------------------------------------------

_BACKWARDS = '''
from tensorflow import keras
from tensorflow.keras import layers


def functional():
    inp = keras.Input(shape=(7, 5))
    x = layers.LSTM(6, return_sequences=True, go_backwards=True)(inp)
    x = layers.SimpleRNN(4, return_sequences=True, go_backwards=True)(x)
    y = layers.GRU(3, go_backwards=True)(x)
    return keras.Model(inp, y)


def sequence_out():
    return keras.Sequential([keras.Input(shape=(7, 5)), layers.GRU(4, return_sequences=True, go_backwards=True),
                             layers.LSTM(3, return_sequences=True, dropout=0.3, go_backwards=True)])


class Encoder(keras.Model):
    def __init__(self):
        super().__init__()
        self.rnn = layers.GRU(4, return_sequences=True, go_backwards=True)
        self.out = layers.Dense(2)

    def call(self, x):
        return self.out(self.rnn(x))
'''


def test_go_backwards_reads_the_steps_reversed_and_keeps_keras_output_order(tmp_path):
    """Keras 3's go_backwards=True runs the layer over the steps last to first and returns its outputs in that
    order (checked against Keras: the layer on x[:, ::-1], nothing flipped back): ReverseSteps before the torch
    RNN, exact for LSTM, GRU and SimpleRNN, with and without return_sequences, in functional and Sequential
    models (a SequenceDropout between, whose per-sequence mask commutes with the reversal) and a subclass (its
    lazy GRU)."""
    from fwport.verify import Options, verify
    src = textwrap.dedent(_BACKWARDS).lstrip("\n")
    r = tr(src)
    assert not codes(r, Severity.ERROR), messages(r, Severity.ERROR)
    assert r.output.count("ReverseSteps()") == 6
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "m_torch.py").write_text(r.output)
    session = Warm.session()
    for model in ("functional", "sequence_out", "Encoder"):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model,
                              inputs=["float32[3,7,5]"], checks=("forward", "grad"), device="cpu"), session)
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))


def test_go_backwards_where_fwport_does_not_write_it_stays_an_error():
    """Under Bidirectional, go_backwards=True on the forward layer (Keras then runs the backward one forwards)
    stays refused, with an error. (A backward_layer= that is the forward layer with go_backwards=True is torch's
    reverse direction: tests/test_layer_gaps19.py.)"""
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers


        def build():
            return keras.Sequential([keras.Input(shape=(7, 5)), layers.Bidirectional(
                layers.LSTM(3, return_sequences=True, go_backwards=True))])
    ''')
    assert codes(r, Severity.ERROR) and "ReverseSteps()" not in r.output


# --- sizes only from model.build(...) --------------------------------------------------------------------

def test_model_build_of_a_subclass_gives_the_lazy_modules_their_sizes_and_moves_nothing():
    """model.build((None, 16)) on a model subclass → build_on_zeros(model, (None, 16)): afterwards the lazy Linear
    has the kernel size Keras 2's build gives (transposed), the BatchNorm's statistics and the training mode are
    as they were, and the model has as many parameters as Keras's built model (fixture subclass_built_sizes runs
    it end to end). (Keras 3.15's Model.build of a subclass without its own build() only marks it built, its
    layers made at the first call: the values are the same either way.)"""
    from pathlib import Path
    src = (Path(__file__).parent.parent / "fixtures" / "tf2torch" / "subclass_built_sizes" / "model.py").read_text()
    r = tr(src)
    assert not codes(r, Severity.ERROR), messages(r, Severity.ERROR)
    assert "build_on_zeros(model, (None, 16))" in r.output and "def build_on_zeros(model, shape):" in r.output
    k = _run("keras", src, '''
import json
print(json.dumps({"kernel": list(model.fc1.kernel.shape), "count": int(sum(w.numpy().size for w in model.weights)),
                  "trainable": int(sum(w.numpy().size for w in model.trainable_weights))}))
''', TF_USE_LEGACY_KERAS="1")
    t = _run("torch", r.output, '''
import json
print(json.dumps({"weight": list(model.fc1[0].weight.shape), "mean": float(model.norm.running_mean.abs().sum()),
                  "var": float((model.norm.running_var - 1).abs().sum()), "training": model.training,
                  "tracked": int(model.norm.num_batches_tracked),
                  "trainable": int(sum(p.numel() for p in model.parameters())),
                  "count": int(sum(p.numel() for p in model.parameters()) + model.norm.running_mean.numel()
                               + model.norm.running_var.numel())}))
''')
    assert t["weight"] == k["kernel"][::-1] == [32, 16]
    assert t["mean"] == t["var"] == 0.0 and t["tracked"] == 0 and t["training"] is True
    assert t["trainable"] == k["trainable"] and t["count"] == k["count"]


def test_get_layer_on_a_builder_making_two_models_stays_an_error():
    """A builder that makes two models (an encoder and the autoencoder around it): the records of its scope are
    not one model's, so get_layer(...) on its result keeps the error rather than guess."""
    r = tr('''
        import keras
        from keras import layers


        def build():
            inp = keras.Input(shape=(8,))
            code = layers.Dense(2, name="code")(inp)
            encoder = keras.Model(inp, code)
            out = layers.Dense(8, name="dec")(encoder(inp))
            return keras.Model(inp, out)


        model = build()
        model.get_layer("dec").trainable = False
    ''')
    assert any(m.startswith("model.get_layer(") for m in messages(r, Severity.ERROR))
    assert 'model.get_layer("dec").requires_grad_(False)' in r.output
