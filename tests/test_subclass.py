"""The subclass pass: keras.Model / keras.layers.Layer subclasses → nn.Module.

Spec tests (what must change, what must not) and two numerical ones: the Keras model runs in a
TensorFlow subprocess with random weights (moving statistics included), the translation runs in a
torch subprocess, weights move through the LayerRecords and the rules' weight maps (a small loader
below; the real one is fwport/verify/), and the inference outputs must agree.
"""
from __future__ import annotations

import json
import textwrap
from collections import Counter
from importlib.util import find_spec

import numpy as np
import pytest

from fwport.core.rule import load_pack
from fwport.core.pipeline import translate_source
from runners import python

PACK = load_pack("tf2torch")


def tx(src: str, keras: int | None = None):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py", PACK, {"keras": keras} if keras else None)
    again = translate_source(r.output, "model.py", PACK, {"keras": keras} if keras else None)
    assert again.output == r.output, "translating the output again must change nothing"
    return r


def codes(r) -> Counter:
    return Counter(f.code for f in r.findings if f.code != "keras-version")


def records(r) -> set[tuple[str, str, str, str]]:
    return {(x.scope, x.source, x.target, x.rule) for x in r.layers}


def same_line_count(r) -> bool:
    """Findings are located on the input: below the imports (which the import fixer rewrites), the
    `# fwport:` comments are the only lines added."""
    def body(text: str) -> list[str]:
        lines = text.splitlines()
        first = next(i for i, ln in enumerate(lines) if ln.startswith(("class ", "def ")))
        return [ln for ln in lines[first:] if not ln.strip().startswith("# fwport:")]
    return len(body(r.output)) == len(body(r.source))


# --- what must change ---------------------------------------------------------------------------------

def test_model_subclass_dense_dropout_batchnorm_training_flag():
    r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        class MLP(keras.Model):
            def __init__(self, classes=10, **kwargs):
                super().__init__(name="mlp", **kwargs)
                self.flat = layers.Flatten()
                self.fc = layers.Dense(64, activation="relu")
                self.bn = layers.BatchNormalization()
                self.drop = layers.Dropout(0.5)
                self.out = layers.Dense(classes)

            def call(self, inputs, training=None):
                x = self.fc(self.flat(inputs))
                x = self.bn(x, training=training)
                if training:
                    x = self.drop(x, training=training)
                return self.out(x)
        ''')
    assert r.output == textwrap.dedent('''\
        from torch import nn

        class MLP(nn.Module):
            def __init__(self, classes=10, **kwargs):
                super().__init__()
                self.flat = nn.Flatten()
                self.fc = nn.Sequential(nn.LazyLinear(64), nn.ReLU())
                self.bn = nn.BatchNorm1d(64, momentum=0.01, eps=0.001)
                self.drop = nn.Dropout(0.5)
                self.out = nn.Linear(64, classes)

            def forward(self, inputs):
                x = self.fc(self.flat(inputs))
                x = self.bn(x)
                if self.training:
                    x = self.drop(x)
                return self.out(x)
        ''')
    assert records(r) == {("MLP", "fc", "fc.0", "dense"), ("MLP", "bn", "bn", "batch-normalization"),
                          ("MLP", "out", "out", "dense")}
    assert r.models[0].to_dict() == {"scope": "MLP", "kind": "subclass", "input_shape": None, "layout": "same",
                                     "output_layout": "same"}
    assert not [f for f in r.findings if f.severity.value == "error"]


@pytest.mark.parametrize("base,imports", [
    ("tf.keras.Model", "import tensorflow as tf"),
    ("keras.models.Model", "import keras"),
    ("Model", "from tensorflow.keras import Model"),
    ("layers.Layer", "from tensorflow.keras import layers"),
    ("keras.Layer", "import keras"),
    ("tf_keras.layers.Layer", "import tf_keras"),
], ids=["tf.keras.Model", "keras.models.Model", "from-import-Model", "layers.Layer", "keras.Layer", "tf_keras"])
def test_every_spelling_of_the_base_becomes_nn_module(base, imports):
    r = tx(f'''
        {imports}

        class Net({base}):
            def call(self, x):
                return x
        ''')
    assert "class Net(nn.Module):" in r.output and "def forward(self, x):" in r.output
    assert same_line_count(r)


@pytest.mark.parametrize("call", ["super().__init__(**kwargs)", "super(Net, self).__init__(name=name, dtype='float32')",
                                  "super(Net, self).__init__()"], ids=["kwargs", "old-style-named", "old-style-bare"])
def test_super_init_forms(call):
    r = tx(f'''
        from tensorflow import keras

        class Net(keras.Model):
            def __init__(self, name=None, **kwargs):
                {call}
        ''')
    assert "        super().__init__()\n" in r.output


def test_conv_subclass_keeps_layout_with_permutes():
    r = tx('''
        from tensorflow.keras import layers, Model

        class ConvNet(Model):
            def __init__(self):
                super().__init__()
                self.cat = layers.Concatenate()
                self.conv = layers.Conv2D(8, 3, activation="relu")
                self.conv1d = layers.Conv1D(4, 3)
                self.gap = layers.GlobalAveragePooling2D()

            def call(self, x, seq):
                y = self.gap(self.conv(x))
                s = self.conv1d(seq)
                return self.cat([y, s[:, 0]])
        ''')
    out = r.output
    # a channels-first module fed by another: no permute round trip between them; the global pool's
    # output is (batch, C), which needs none back
    assert "y = self.gap(self.conv(x.permute(0, 3, 1, 2)))" in out
    assert "s = self.conv1d(seq.permute(0, 2, 1)).permute(0, 2, 1)" in out  # rank 3: both ways
    assert "return torch.cat([y, s[:, 0]], dim=-1)" in out  # merge layer written out
    # the merge layer's line stays, as a comment: the line structure is kept
    assert "        # self.cat = layers.Concatenate()  (no torch module: written out where it is called)" in out
    assert codes(r)["layout-kept"] == 1
    assert same_line_count(r)


def test_add_weight_static_shape_build_called_from_init():
    r = tx('''
        from tensorflow import keras

        class Scale(keras.layers.Layer):
            def __init__(self, units=4):
                super().__init__()
                self.units = units

            def build(self, input_shape):
                self.w = self.add_weight(shape=(self.units, 3), initializer="random_normal")
                self.b = self.add_weight(shape=(3,), initializer="zeros", trainable=False)
                self.c = self.add_weight(shape=(2, 5), initializer="he_normal")
                self.built = True

            def call(self, x):
                return x * self.b
        ''')
    out = r.output
    assert "        self.units = units\n        self.build()\n    def build(self, input_shape=None):" in out
    assert "self.w = nn.Parameter(nn.init.normal_(torch.empty(self.units, 3), std=0.05))" in out
    assert "self.b = nn.Parameter(torch.zeros(3), requires_grad=False)" in out
    # he_normal: a normal truncated at 2 std, std = sqrt(2 / fan_in) / 0.8796...; fan_in = 2 (Keras: shape[0])
    std = (2 / 2) ** 0.5 / 0.87962566103423978
    assert f"nn.init.trunc_normal_(torch.empty(2, 5), std={std!r}, a={-2 * std!r}, b={2 * std!r})" in out
    assert "        pass  # self.built = True  (Keras bookkeeping, nothing to do in torch)" in out
    assert records(r) == {("Scale", a, a, "add-weight") for a in ("w", "b", "c")}
    assert same_line_count(r)


def test_add_weight_from_input_shape_is_built_on_the_first_call():
    r = tx('''
        from tensorflow import keras

        class Lin(keras.layers.Layer):
            def __init__(self, units):
                super().__init__()
                self.units = units

            def build(self, input_shape):
                self.k = self.add_weight(shape=(input_shape[-1], self.units))

            def call(self, x):
                return x
        ''')
    assert "def build(self, input_shape):" in r.output
    assert "self.k = nn.Parameter(nn.init.xavier_uniform_(torch.empty(input_shape[-1], self.units)))" in r.output
    # issue 8: Keras's deferred build is torch's lazy module (the LazyBuild helper runs build on the first call)
    assert "class Lin(LazyBuild, nn.Module):" in r.output
    assert "        self.units = units\n        self.k = nn.UninitializedParameter()\n" in r.output
    info = [f for f in r.findings if f.code == "shape-unknown"]
    assert len(info) == 1 and info[0].severity.value == "info" and info[0].line == 8  # the def build line
    assert "runs on the first call" in info[0].message


def test_nested_custom_layer_records_attribute_paths():
    r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        class Block(layers.Layer):
            def __init__(self, units):
                super().__init__()
                self.dense = layers.Dense(units)
                self.gain = self.add_weight(shape=(units,), initializer="ones")

            def call(self, x):
                return self.dense(x) * self.gain

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.block = Block(8)
                self.heads = [layers.Dense(2) for _ in range(2)]

            def call(self, x):
                return self.heads[1](self.block(x))
        ''')
    assert "self.block = Block(8)" in r.output
    assert "self.heads = nn.ModuleList([nn.LazyLinear(2) for _ in range(2)])" in r.output
    assert records(r) == {("Block", "dense", "dense", "dense"), ("Block", "gain", "gain", "add-weight"),
                          ("Net", "block.dense", "block.dense", "dense"),
                          ("Net", "block.gain", "block.gain", "add-weight"),
                          ("Net", "heads[0]", "heads.0", "dense"), ("Net", "heads[1]", "heads.1", "dense")}
    assert {m.scope for m in r.models} == {"Block", "Net"}


def test_keras2_spellings_add_variable_positional_name():
    r = tx('''
        import tf_keras

        class Bias(tf_keras.layers.Layer):
            def __init__(self, n, **kwargs):
                super(Bias, self).__init__(**kwargs)
                self.n = n

            def build(self, input_shape):
                self.b = self.add_variable("b", (self.n,), "float32", tf_keras.initializers.Constant(0.5))

            def call(self, inputs, training=None, mask=None):
                return inputs + self.b
        ''')
    assert r.version == 2 and r.to_dict()["keras_version"] == 2
    assert "self.b = nn.Parameter(torch.full((self.n,), 0.5))" in r.output
    assert "def forward(self, inputs):" in r.output
    assert records(r) == {("Bias", "b", "b", "add-weight")}


def test_errors_for_keras_only_machinery():
    r = tx('''
        import tensorflow as tf

        class Net(tf.keras.Model):
            def call(self, x, mask=None):
                self.add_loss(0.1)
                return x * mask

            def train_step(self, data):
                return {}

            def get_config(self):
                return {}

        def build():
            inp = tf.keras.Input(shape=(3,))
            return tf.keras.Model(inp, inp)

        EMBED = tf.keras.layers.Embedding(10, 3, mask_zero=True)  # the file attaches Keras masks
        ''')
    errors = Counter((f.code, f.line) for f in r.findings if f.severity.value == "error")
    assert errors[("unsupported-construct", 5)] == 1  # add_loss
    assert errors[("unsupported-construct", 6)] == 1  # the mask is used
    assert errors[("unsupported-construct", 8)] == 0  # train_step: driven by the written TrainStepModule
    assert "class Net(TrainStepModule):" in r.output
    assert errors[("unsupported-construct", 16)] == 0  # the functional API: the functional pass's
    assert "return Build()" in r.output
    assert not any(f.code == "no-rule" for f in r.findings)  # keras.Input is part of that model
    assert "def forward(self, x, mask=None):" in r.output  # a used mask stays
    info = [f for f in r.findings if f.line == 11]
    assert info and info[0].severity.value == "info"  # get_config kept, said so


# --- what must not change ----------------------------------------------------------------------------

def test_shadowed_names_and_plain_classes_are_left_alone():
    src = textwrap.dedent('''\
        import tensorflow as tf

        class Model:
            def call(self, x, training=None):
                return x

        class Net(Model):
            def call(self, x, training=None):
                return x

        def make(layers):
            class Local(layers.Layer):
                pass
            return Local
        ''')
    r = translate_source(src, "m.py", PACK)
    assert r.output == src


def test_layer_attribute_shadowed_in_init_is_not_translated():
    r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        class Net(keras.Model):
            def __init__(self, layers):
                super().__init__()
                self.fc = layers.Dense(3)
        ''')
    assert "self.fc = layers.Dense(3)" in r.output
    assert not r.layers


# --- numerical equivalence ---------------------------------------------------------------------------

MLP_SRC = '''
from tensorflow import keras
from tensorflow.keras import layers


class MLP(keras.Model):
    def __init__(self, hidden=16, classes=5, **kwargs):
        super().__init__(**kwargs)
        self.flat = layers.Flatten()
        self.fc1 = layers.Dense(hidden, activation="relu")
        self.bn = layers.BatchNormalization()
        self.drop = layers.Dropout(0.3)
        self.fc2 = layers.Dense(classes)

    def call(self, inputs, training=None):
        x = self.flat(inputs)
        x = self.fc1(x)
        x = self.bn(x, training=training)
        if training:
            x = self.drop(x, training=training)
        return self.fc2(x)
'''

CONV_SRC = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Affine(layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(self.units,), initializer="ones", name="scale")
        self.offset = self.add_weight(shape=(self.units,), initializer="zeros", name="offset")
        super().build(input_shape)

    def call(self, inputs):
        return inputs * self.scale + self.offset


class Block(layers.Layer):
    def __init__(self, filters, **kwargs):
        super(Block, self).__init__(**kwargs)
        self.conv = layers.Conv2D(filters, 3, activation="relu")
        self.bn = layers.BatchNormalization()
        self.affine = Affine(filters)

    def call(self, x, training=False):
        return self.affine(self.bn(self.conv(x), training=training))


class ConvNet(keras.Model):
    def __init__(self):
        super().__init__()
        self.block = Block(6)
        self.pool = layers.MaxPooling2D(2)
        self.flat = layers.Flatten()
        self.head = layers.Dense(4)
        self.skip = layers.Dense(4)
        self.add = layers.Add()

    def call(self, x, training=False):
        x = self.block(x, training=training)
        x = self.flat(self.pool(x))
        return self.add([self.head(x), self.skip(x)])
'''

_KERAS_SIDE = r'''
import importlib.util, json, sys
import numpy as np
src, cls, out, shape = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
plan = json.loads(sys.argv[5])
spec = importlib.util.spec_from_file_location("m", src); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
model = getattr(m, cls)()
rng = np.random.default_rng(0)
x = rng.standard_normal(shape).astype("float32")
model(x, training=False)
for v in model.variables:  # random weights; moving variances positive and far from 1
    val = rng.uniform(0.3, 2.5, v.shape) if "variance" in v.path else rng.standard_normal(v.shape) * 0.5
    v.assign(val.astype("float32"))
arrays = {"__x__": x, "__y__": np.asarray(model(x, training=False))}
for i, (path, names) in enumerate(plan):
    obj = model
    for part in path.replace("[", ".[").split("."):
        obj = obj[int(part[1:-1])] if part.startswith("[") else getattr(obj, part)
    for n in names:
        arrays[f"{i}:{n}"] = np.asarray(obj if n == "." else getattr(obj, n))
np.savez(out, **arrays)
'''

_TORCH_SIDE = r'''
import importlib.util, json, sys
import numpy as np, torch
src, cls, data, plan = sys.argv[1], sys.argv[2], np.load(sys.argv[3]), json.loads(sys.argv[4])
spec = importlib.util.spec_from_file_location("t", src); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
torch.manual_seed(0)
model = getattr(m, cls)().eval()
x = torch.from_numpy(data["__x__"])
with torch.no_grad():
    model(x)  # lazy modules take their sizes here
    seen = set()
    for i, (target, maps, symbols) in enumerate(plan):
        for source, tgt, ops in maps:
            a = data[f"{i}:{source}"]
            for op, params in ops:
                p = [symbols[q] if q in symbols else int(q) for q in params]
                if op == "copy":
                    pass
                elif op in ("transpose", "permute"):
                    a = np.transpose(a, p)
                elif op == "reshape":
                    a = a.reshape(p)
                else:
                    raise SystemExit(f"weight op {op} not supported by this test loader")
            t = model.get_parameter(target) if tgt == "." else (
                getattr(model.get_submodule(target), tgt))
            assert tuple(t.shape) == a.shape, (target, tgt, t.shape, a.shape)
            t.copy_(torch.from_numpy(np.ascontiguousarray(a)))
            seen.add(id(t))
    missing = [n for n, p in model.named_parameters() if id(p) not in seen]
    assert not missing, f"parameters no record filled: {missing}"
    y = model(x).numpy()
ref = data["__y__"]
err = float(np.max(np.abs(y - ref)))
print(json.dumps({"max_abs": err, "scale": float(np.max(np.abs(ref)))}))
np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(ref))))
'''


def _run(code: str, *args: str, side: str) -> str:
    """``python -c code args...`` in the test file's warm worker of ``side`` (the torch side: TensorFlow unimportable)."""
    p = python("-c", code, *args, side=side, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    return p.stdout


@pytest.mark.skipif(find_spec("tensorflow") is None or find_spec("torch") is None, reason="needs TF and torch")
@pytest.mark.parametrize("src,cls,shape", [
    (MLP_SRC, "MLP", [3, 4, 6]),
    (CONV_SRC, "ConvNet", [2, 9, 7, 3]),
], ids=["mlp-dense-bn-dropout", "conv-nested-add-weight-kept-layout"])
def test_numerically_equivalent(tmp_path, src, cls, shape):
    r = tx(src)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    recs = [x for x in r.layers if x.scope == cls]
    keras_plan, torch_plan = [], []
    for rec in recs:
        rule = PACK.rules[rec.rule]
        maps = rule.weights_for(rec.variant)
        keras_plan.append([rec.source, [w.source for w in maps]])
        torch_plan.append([rec.target, [[w.source, w.target, [[o.op, list(o.params)] for o in w.ops]] for w in maps],
                           rec.symbols])
    (tmp_path / "src.py").write_text(src)
    (tmp_path / "out.py").write_text(r.output)
    _run(_KERAS_SIDE, str(tmp_path / "src.py"), cls, str(tmp_path / "k.npz"), json.dumps(shape), json.dumps(keras_plan),
         side="keras")
    out = json.loads(_run(_TORCH_SIDE, str(tmp_path / "out.py"), cls, str(tmp_path / "k.npz"),
                          json.dumps(torch_plan), side="torch").strip().splitlines()[-1])
    assert out["scale"] > 0.1  # a model whose output is ~0 would prove nothing


# --- BatchNormalization on an input of unknown rank ------------------------------------------------------

BN_ANY_RANK_SRC = '''
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self, hidden=6, classes=3):
        super().__init__()
        self.fc1 = tf.keras.layers.Dense(hidden, use_bias=False)
        self.bn1 = tf.keras.layers.BatchNormalization()
        self.fc2 = tf.keras.layers.Dense(hidden)
        self.bn2 = tf.keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5)
        self.norm = tf.keras.layers.LayerNormalization()
        self.head = tf.keras.layers.Dense(classes)

    def call(self, inputs, training=False):
        x = self.fc1(inputs)
        x = self.bn1(x, training=training)
        x = tf.nn.relu(x)
        x = self.fc2(x)
        x = self.bn2(x, training=training)
        return self.head(self.norm(x))
'''


def test_batchnorm_of_unknown_rank_is_reshaped_at_its_call_sites():
    r = tx(BN_ANY_RANK_SRC)
    out = r.output
    # the model's input rank is unknown; each Dense output's last size is known
    assert "self.bn1 = nn.BatchNorm1d(hidden, momentum=0.01, eps=0.001)" in out
    assert "self.fc2 = nn.Linear(hidden, hidden)" in out  # through tf.nn.relu, which keeps the shape
    assert "self.norm = nn.LayerNorm(hidden, eps=0.001)" in out  # LayerNorm(C) is exact at any rank
    assert "x = self.bn1(x.reshape(-1, x.shape[-1])).reshape(x.shape)" in out
    assert "x = self.bn2(x.reshape(-1, x.shape[-1])).reshape(x.shape)" in out
    assert "return self.head(self.norm(x))" in out
    assert [f.code for f in r.findings if f.severity.value == "error"] == []
    assert sum(1 for f in r.findings if f.code == "shape-unknown" and "rank is unknown" in f.message) == 2


def test_batchnorm_of_provable_rank_is_called_directly():
    r = tx('''
        import tensorflow as tf

        class Net(tf.keras.Model):
            def __init__(self, hidden=6):
                super().__init__()
                self.pool = tf.keras.layers.GlobalAveragePooling1D()
                self.fc = tf.keras.layers.Dense(hidden)
                self.bn = tf.keras.layers.BatchNormalization()

            def call(self, x):
                return self.bn(self.fc(self.pool(x)))
        ''')
    assert "self.bn = nn.BatchNorm1d(hidden, momentum=0.01, eps=0.001)" in r.output
    assert "reshape" not in r.output  # (batch, hidden): the rank is 2


def test_batchnorm_of_unknown_rank_needs_a_plain_variable():
    r = tx('''
        import tensorflow as tf

        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.fc = tf.keras.layers.Dense(4)
                self.bn = tf.keras.layers.BatchNormalization()

            def call(self, x):
                return self.bn(self.fc(x))
        ''')
    errors = [f for f in r.findings if f.severity.value == "error"]
    assert [f.code for f in errors] == ["shape-unknown"] and "assign it" in errors[0].message


_BN_KERAS = r'''
import importlib.util, json, sys
import numpy as np
src, out, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location("m", src); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
rng = np.random.default_rng(0)
values = None
arrays = {}
for shape in ([7, 5], [3, 4, 5], [2, 3, 4, 5]):
    # a Keras model fixes its BatchNormalization's rank when built: one model per rank, same weights
    model = m.Net()
    key = "x".join(map(str, shape))
    x = (rng.standard_normal(shape) * 2 + 0.5).astype("float32")
    model(x)
    if values is None:
        values = [(rng.uniform(0.3, 2.5, v.shape) if "variance" in v.path else rng.standard_normal(v.shape) * 0.5)
                  .astype("float32") for v in model.variables]
    for v, val in zip(model.variables, values):
        v.assign(val)
    for i, (path, names) in enumerate(plan):
        for n in names:
            if getattr(getattr(model, path), n) is not None:  # no bias with use_bias=False
                arrays[f"w{i}:{n}"] = np.asarray(getattr(getattr(model, path), n))
    arrays[f"x{key}"] = x
    arrays[f"eval{key}"] = np.asarray(model(x, training=False))
    arrays[f"train{key}"] = np.asarray(model(x, training=True))  # batch statistics over all leading axes
np.savez(out, **arrays)
'''

_BN_TORCH = r'''
import importlib.util, json, sys
import numpy as np, torch
src, data, plan, out = sys.argv[1], np.load(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
spec = importlib.util.spec_from_file_location("t", src); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
model = m.Net().eval()
with torch.no_grad():
    model(torch.zeros(2, 5))  # lazy modules take their sizes here
    for i, (target, maps) in enumerate(plan):
        for source, tgt, transpose in maps:
            if f"w{i}:{source}" not in data.files:
                assert getattr(model.get_submodule(target), tgt) is None, (target, tgt)
                continue
            a = data[f"w{i}:{source}"]
            getattr(model.get_submodule(target), tgt).copy_(torch.from_numpy(np.ascontiguousarray(a.T if transpose else a)))
    results = {}
    for key in [k[1:] for k in data.files if k.startswith("x")]:
        x = torch.from_numpy(data["x" + key])
        results["eval" + key] = model.eval()(x).numpy()
        state = {k: v.clone() for k, v in model.state_dict().items()}
        results["train" + key] = model.train()(x).numpy()
        model.load_state_dict(state)  # a training step moves the running statistics: undo it
np.savez(out, **results)
'''


@pytest.mark.skipif(find_spec("tensorflow") is None or find_spec("torch") is None, reason="needs TF and torch")
def test_batchnorm_of_unknown_rank_numerically(tmp_path):
    """One translation, inputs of rank 2, 3 and 4, inference and training mode (batch statistics)."""
    r = tx(BN_ANY_RANK_SRC)
    keras_plan, torch_plan = [], []
    for rec in [x for x in r.layers if x.scope == "Net"]:
        maps = PACK.rules[rec.rule].weights_for(rec.variant)
        assert all([o.op for o in w.ops] in (["copy"], ["transpose"]) for w in maps)
        keras_plan.append([rec.source, [w.source for w in maps]])
        torch_plan.append([rec.target, [[w.source, w.target, w.ops[0].op == "transpose"] for w in maps]])
    (tmp_path / "src.py").write_text(BN_ANY_RANK_SRC)
    (tmp_path / "out.py").write_text(r.output)
    _run(_BN_KERAS, str(tmp_path / "src.py"), str(tmp_path / "k.npz"), json.dumps(keras_plan), side="keras")
    _run(_BN_TORCH, str(tmp_path / "out.py"), str(tmp_path / "k.npz"), json.dumps(torch_plan), str(tmp_path / "t.npz"),
         side="torch")
    want, got = np.load(tmp_path / "k.npz"), np.load(tmp_path / "t.npz")
    assert sorted(got.files) == sorted(k for k in want.files if k.startswith(("eval", "train")))
    assert len(got.files) == 6
    for k in got.files:
        assert got[k].shape == want[k].shape, k
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want[k]).max())),
                                   err_msg=k)


def test_two_classes_of_one_name_in_different_functions_are_both_translated():
    # keras's own tests define `class ExampleLayer(layers.Layer)` in several test methods: the
    # first was skipped (only translated on a second run: not a fixpoint)
    r = tx('''
        from keras import layers, ops

        def test_a():
            class ExampleLayer(layers.Layer):
                def call(self, x, training=False):
                    return ops.abs(x)
            return ExampleLayer()

        def test_b():
            class ExampleLayer(layers.Layer):
                def call(self, x, training=False):
                    return ops.abs(x) * 2
            return ExampleLayer()
    ''')
    assert r.output.count("class ExampleLayer(nn.Module):") == 2
    assert r.output.count("def forward(self, x):") == 2 and "layers.Layer" not in r.output
    assert codes(r) == Counter()


def test_blocks_in_a_comprehension_or_a_local_list_become_a_module_list():
    """A Python list of modules registers no parameter in torch: a comprehension of the file's blocks, and
    a local list built by appends then assigned, are wrapped in nn.ModuleList; a loop over them drops
    training= like one over any list of modules."""
    r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        class Block(layers.Layer):
            def __init__(self, units):
                super().__init__()
                self.fc = layers.Dense(units)

            def call(self, x, training=False):
                return self.fc(x)

        class Net(keras.Model):
            def __init__(self, depth):
                super().__init__()
                self.blocks = [Block(4) for _ in range(depth)]
                heads = []
                for _ in range(depth):
                    heads.append(layers.Dense(4))
                self.heads = heads
                names = []
                for i in range(depth):
                    names.append(str(i))
                self.names = names

            def call(self, x, training=False):
                for b in self.blocks:
                    x = b(x, training=training)
                for h in self.heads:
                    x = h(x, training=training)
                return x
        ''')
    out = r.output
    assert "self.blocks = nn.ModuleList([Block(4) for _ in range(depth)])" in out
    assert "self.heads = nn.ModuleList(heads)" in out
    assert "self.names = names" in out  # strings stay a list
    assert "x = b(x)" in out and "x = h(x)" in out


def test_an_attribute_set_to_list_then_appended_layers_becomes_a_module_list():
    # self.focal_layers = list() as keras-io's focal modulation writes it: Keras tracks the appended layers,
    # torch registers their parameters only in an nn.ModuleList (a plain list leaves them out of parameters())
    r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        class Net(keras.Model):
            def __init__(self, depth):
                super().__init__()
                self.fcs = list()
                self.tags = list()
                for i in range(depth):
                    self.fcs.append(layers.Dense(3))
                    self.tags.append(str(i))

            def call(self, x):
                return self.fcs[1](self.fcs[0](x))
        ''')
    assert "self.fcs = nn.ModuleList()" in r.output and "self.tags = list()" in r.output, r.output
    import torch
    ns: dict = {}
    exec(compile(r.output, "net_torch.py", "exec"), ns)
    net = ns["Net"](2)
    assert net(torch.ones(2, 5)).shape == (2, 3)
    assert sorted(n for n, _ in net.named_parameters()) == ["fcs.0.bias", "fcs.0.weight", "fcs.1.bias", "fcs.1.weight"]


def test_a_comprehension_of_layers_over_a_run_time_value_records_every_item():
    r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        class Net(keras.Model):
            def __init__(self, sizes):
                super().__init__()
                self.cells = [layers.LSTMCell(n) for n in sizes]
                self.heads = [layers.Dense(2) for _ in range(3)]
        ''')
    got = records(r)
    assert ("Net", "cells[*]", "cells.*", "lstm-cell") in got  # expanded by fwport verify on the built model
    assert {("Net", f"heads[{i}]", f"heads.{i}", "dense") for i in range(3)} <= got
