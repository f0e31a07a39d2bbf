"""The functional pass on the structures real Keras code gives keras.Model (keras-io): a dict of
inputs (``inputs = {"a": keras.Input(...)}`` read as ``inputs["a"]``, or ``keras.Model(inputs={"a":
a})``) and a dict of outputs. The translated forward takes and returns what the Keras model is
called with and returns; each followed structure is translated, run without TensorFlow and verified
against Keras (forward and gradients, weights moved by fwport verify); what is not followed keeps an
error on its line and the model left as written."""
from __future__ import annotations

import textwrap
from collections import Counter

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_counts as errors, error_messages
from runners import Warm

PACK = load_pack("tf2torch")


def tx(src: str, keras: int | None = None):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK,
                            {"keras": keras} if keras else None)


def verified(tmp_path, src: str, out: str, model: str, inputs: list[str], keras: int | None = None) -> dict:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=inputs,
                          checks=("forward", "grad"), device="cpu", keras=keras), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    return {e["name"]: e["source"] for e in cert["results"]["gradients"]}


def run_torch(out: str, builder: str, *args):
    """The translation run with torch only: TensorFlow is never imported by it."""
    torch = pytest.importorskip("torch")
    import sys
    ns: dict = {}
    exec(compile(out, "t.py", "exec"), ns)
    assert not any(m == "tensorflow" or m.startswith("tensorflow.") for m in ns if isinstance(m, str))
    assert "tensorflow" not in out and "keras" not in out
    return torch, ns[builder](*args), sys


HEAD = '''
from tensorflow import keras
from tensorflow.keras import layers
'''

# keras-io's node2vec_movielens.py, reduced: a dict literal of inputs read by key, one layer shared
DICT_INPUTS = HEAD + '''

def create_model(embedding_dim=4):
    inputs = {
        "target": layers.Input(name="target", shape=(3,)),
        "context": layers.Input(name="context", shape=(3,)),
    }
    embed_item = layers.Dense(embedding_dim, name="item_embeddings")
    target_embeddings = embed_item(inputs["target"])
    context_embeddings = embed_item(inputs["context"])
    merged = layers.concatenate([target_embeddings, context_embeddings])
    logits = layers.Dense(1)(merged)
    model = keras.Model(inputs=inputs, outputs=logits)
    return model
'''

# keras.Model(inputs={...}) of named inputs, one of them an image (the model runs channels-first)
NAMED_DICT = HEAD + '''

def build_named():
    a = keras.Input(shape=(8, 8, 3), name="image")
    b = keras.Input(shape=(5,), name="meta")
    x = layers.Conv2D(4, 3, padding="same", activation="relu")(a)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.concatenate([x, layers.Dense(4)(b)])
    out = layers.Dense(2)(x)
    return keras.Model(inputs={"meta": b, "image": a}, outputs=out)
'''

# a dict of outputs whose keys do not sort in the order they are written (Keras flattens by sorted key)
DICT_OUTPUTS = HEAD + '''

def build_heads():
    x_in = keras.Input(shape=(6,))
    h = layers.Dense(8, activation="relu")(x_in)
    return keras.Model(x_in, {"score": layers.Dense(1)(h), "class": layers.Dense(3, activation="softmax")(h)})
'''


def test_a_dict_of_inputs_is_the_forward_parameter():
    r = tx(DICT_INPUTS)
    assert not errors(r), r.findings
    assert "def forward(self, inputs):" in r.output
    assert 'target_embeddings = self.embed_item(inputs["target"])' in r.output
    assert 'context_embeddings = self.embed_item(inputs["context"])' in r.output
    (info,) = r.models
    assert info.input_keys == ("target", "context")
    torch, model, _ = run_torch(r.output, "create_model")
    x = {"target": torch.randn(2, 3), "context": torch.randn(2, 3)}
    assert model(x).shape == (2, 1)


def test_a_dict_of_inputs_verifies(tmp_path):
    r = tx(DICT_INPUTS)
    grads = verified(tmp_path, textwrap.dedent(DICT_INPUTS).lstrip("\n"), r.output, "create_model",
                     ["float32[2,3]", "float32[2,3]"])
    assert grads["embed_item.weight"] == "layers[2].kernel"  # the shared layer, after both InputLayers


@pytest.mark.parametrize("keras", [2, 3])
def test_a_dict_of_named_inputs_binds_them_in_forward_and_verifies(tmp_path, keras):
    r = tx(NAMED_DICT, keras)
    assert not errors(r), r.findings
    out = r.output
    assert "def forward(self, inputs):" in out
    # the source's names bound from the dict, then the image moved channels-first once
    assert 'b = inputs["meta"]\n        a = inputs["image"]\n        a = a.permute(0, 3, 1, 2)' in out
    (info,) = r.models
    assert info.input_keys == ("meta", "image")
    verified(tmp_path, textwrap.dedent(NAMED_DICT).lstrip("\n"), out, "build_named",
             ["float32[2,5]", "float32[2,8,8,3]"], keras)


def test_a_dict_of_inputs_read_channels_first_is_moved_in_a_copy():
    src = HEAD + '''

def build():
    inputs = {"image": keras.Input(shape=(8, 8, 3)), "meta": keras.Input(shape=(5,))}
    x = layers.Conv2D(4, 3, padding="same")(inputs["image"])
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.concatenate([x, inputs["meta"]]))
'''
    r = tx(src)
    assert not errors(r), r.findings
    assert 'inputs = dict(inputs)\n        inputs["image"] = inputs["image"].permute(0, 3, 1, 2)' in r.output
    torch, model, _ = run_torch(r.output, "build")
    x = {"image": torch.randn(2, 8, 8, 3), "meta": torch.randn(2, 5)}
    kept = x["image"]
    assert model(x).shape == (2, 9)
    assert x["image"] is kept  # the caller's dict is not changed


@pytest.mark.parametrize("keras", [2, 3])
def test_a_dict_of_outputs_is_returned_and_verifies(tmp_path, keras):
    r = tx(DICT_OUTPUTS, keras)
    assert not errors(r), r.findings
    assert 'return {"score": self.fc2(h), "class": torch.softmax(self.fc3(h), dim=-1)}' in r.output
    grads = verified(tmp_path, textwrap.dedent(DICT_OUTPUTS).lstrip("\n"), r.output, "build_heads",
                     ["float32[2,6]"], keras)
    # Keras orders the layers from the outputs flattened by sorted key: "class" before "score"
    assert grads["fc3.weight"] == "layers[2].kernel" and grads["fc2.weight"] == "layers[3].kernel"


# a name bound to a dict of the model's tensors (tensorflow's music_generation tutorial: `outputs = {"pitch":
# Dense(128)(x), ...}`, then keras.Model(inputs, outputs)): layer calls in it, a tensor named, a feature map, keys
# that are no free name ("x" is taken, "class" a keyword) and keys that do not sort as written
NAMED_OUTPUTS = HEAD + '''

def build_named_heads(num_classes=3):
    image = keras.Input(shape=(9, 7, 3))
    x = layers.Conv2D(4, 3, padding="same", activation="relu")(image)
    pooled = layers.GlobalAveragePooling2D()(x)
    outputs = {
        "x": layers.Conv2D(2, 1)(x),
        "class": layers.Dense(num_classes, activation="softmax")(pooled),
        "pitch": layers.Dense(5, name="pitch")(pooled),
        "pooled": pooled,
    }
    model = keras.Model(image, outputs)
    return model
'''


def test_a_name_bound_to_a_dict_of_tensors_is_returned_and_computes_and_trains_as_keras(tmp_path):
    r = tx(NAMED_OUTPUTS)
    assert not errors(r), r.findings
    out = r.output
    # each layer call bound in forward in the dict's order, the key its name where it is a free one
    assert "outputs_0 = self.conv2(x)\n        outputs_1 = torch.softmax(self.fc(pooled), dim=-1)\n" \
           "        pitch = self.pitch(pooled)\n" in out
    assert 'return {"x": outputs_0.permute(0, 2, 3, 1), "class": outputs_1, "pitch": pitch, "pooled": pooled}' in out
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(NAMED_OUTPUTS).lstrip("\n"))
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build_named_heads",
                          inputs=["float32[2,9,7,3]"], checks=("forward", "grad", "step"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    grads = {e["name"]: e["source"] for e in cert["results"]["gradients"]}
    assert len(grads) == 8  # every layer's weights mapped and compared


def test_a_dict_with_a_value_that_is_not_a_tensor_is_an_error_on_its_line():
    r = tx(HEAD + '''

def build():
    a = keras.Input(shape=(3,))
    outputs = {"score": layers.Dense(2)(a), "n": 3}
    return keras.Model(a, outputs)
''')
    assert any(m.startswith("3: a value of a dict of the model's tensors that is not a tensor")
               for m in error_messages(r)), r.findings
    assert errors(r)[("unsupported-construct", 7)] >= 1
    assert "class " not in r.output and "keras.Model(" in r.output

def test_dicts_not_followed_are_errors_on_their_line():
    cases = {
        # a key that is not a literal string
        '''
def build(key):
    a = keras.Input(shape=(3,))
    return keras.Model(inputs={key: a}, outputs=layers.Dense(2)(a))
''': 6,
        # a key of the dict of inputs that it does not hold
        '''
def build():
    inputs = {"a": keras.Input(shape=(3,))}
    return keras.Model(inputs, layers.Dense(2)(inputs["b"]))
''': 6,
        # an output key that is not a literal string
        '''
def build(key):
    a = keras.Input(shape=(3,))
    return keras.Model(a, {key: layers.Dense(2)(a)})
''': 6,
    }
    for body, line in cases.items():
        r = tx(HEAD + body)
        errs = errors(r)
        assert errs[("unsupported-construct", line)] >= 1, (body, errs)
        assert "class " not in r.output and "keras.Model(" in r.output, r.output


def test_findings_in_statements_fwport_copies_name_the_source_line():
    # keras-io's cutmix ResNet: a loop over a parameter inside a loop written out (its body is a copy), and a
    # helper whose loops over run-time values nest, called inside a loop over one: each error at its line
    cases = {
        '''
def build(n):
    inputs = keras.Input(shape=(4,))
    x = inputs
    for stack in range(2):
        for block in range(n):
            units = 4
            if stack > 0:
                units = 8
            x = layers.Dense(units)(x)
    return keras.Model(inputs, x)
''': 8,
        '''
def group(x, n):
    for _ in range(n):
        for _ in range(n):
            x = layers.Dense(4)(x)
    return x


def build(a, n):
    inputs = keras.Input(shape=(4,))
    x = inputs
    for _ in range(a):
        x = group(x, n)
    return keras.Model(inputs, x)
''': 15,
    }
    for body, line in cases.items():
        r = tx(HEAD + body)
        errs = errors(r)
        assert ("unsupported-construct", 0) not in errs, errs
        assert errs[("unsupported-construct", line)] >= 1, (body, errs)
        assert "keras.Model(" in r.output


# keras-io's DeiT / CaiT mlp helper: enumerate over a module constant of arithmetic on constants, the
# activation chosen by the index (`tf.nn.gelu if idx == 0 else None`)
ENUMERATE = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

PROJECTION_DIM = 8
MLP_UNITS = [
    PROJECTION_DIM * 2,
    PROJECTION_DIM,
]


def mlp(x, dropout_rate, hidden_units):
    for (idx, units) in enumerate(hidden_units):
        x = layers.Dense(units, activation=tf.nn.gelu if idx == 0 else None)(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def build():
    inputs = keras.Input(shape=(5, 8))
    x = layers.LayerNormalization(epsilon=1e-6)(inputs)
    x = mlp(x, hidden_units=MLP_UNITS, dropout_rate=0.1)
    return keras.Model(inputs, layers.Add()([x, inputs]))
'''


def test_enumerate_over_module_constants_is_written_out_with_its_conditional_expressions(tmp_path):
    r = tx(ENUMERATE)
    assert not errors(r), r.findings
    out = r.output
    assert "self.fc1 = nn.Sequential(nn.Linear(8, PROJECTION_DIM * 2), nn.GELU())" in out
    assert "self.fc2 = nn.Linear(PROJECTION_DIM * 2, PROJECTION_DIM)" in out  # no activation on the second pass
    grads = verified(tmp_path, textwrap.dedent(ENUMERATE).lstrip("\n"), out, "build", ["float32[2,5,8]"])
    assert len(grads) == 2 + 4


# keras-io's multimodal_entailment / nl_image_search project_embeddings and the mlp(x, hidden_units) of many
# examples: helpers whose for statement runs over a value the builder gives (a parameter)
HELPER_LOOPS = HEAD + '''

def project_embeddings(embeddings, num_projection_layers, projection_dims, dropout_rate):
    projected_embeddings = layers.Dense(units=projection_dims)(embeddings)
    for _ in range(num_projection_layers):
        x = keras.activations.gelu(projected_embeddings)
        x = layers.Dense(projection_dims)(x)
        x = layers.Dropout(dropout_rate)(x)
        x = layers.Add()([projected_embeddings, x])
        projected_embeddings = layers.LayerNormalization()(x)
    return projected_embeddings


def mlp(x, hidden_units, dropout_rate):
    for units in hidden_units:
        x = layers.Dense(units, activation="relu")(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def build(num_projection_layers=2, head_units=(6, 3)):
    inputs = keras.Input(shape=(5,))
    x = project_embeddings(inputs, num_projection_layers, 8, 0.1)
    x = mlp(x, head_units, 0.2)
    return keras.Model(inputs, layers.Dense(1)(x))
'''


def test_helper_loops_over_values_the_builder_gives_are_module_lists(tmp_path):
    r = tx(HELPER_LOOPS)
    assert not errors(r), r.findings
    out = r.output
    assert "class ProjectEmbeddings(nn.Module):\n    def __init__(self, num_projection_layers):" in out
    assert "        for _ in range(num_projection_layers):\n            self.fc2.append(nn.Linear(8, 8))" in out
    assert "class Mlp(nn.Module):\n    def __init__(self, hidden_units):" in out
    assert "self.project_embeddings = ProjectEmbeddings(num_projection_layers)" in out
    assert "self.mlp = Mlp(head_units)" in out
    loops = [f for f in r.findings if "nn.ModuleLists built by the same loop" in f.message]
    assert sorted(f.line for f in loops) == [25, 26]  # at the helpers' call sites
    for args in ({}, {"num_projection_layers": 3, "head_units": [4, 4, 2]}):
        pytest.importorskip("tensorflow")
        from fwport.verify import Options, verify
        (tmp_path / "m.py").write_text(textwrap.dedent(HELPER_LOOPS).lstrip("\n"))
        (tmp_path / "t.py").write_text(out)
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build", inputs=["float32[2,5]"],
                              checks=("forward", "grad"), device="cpu", args=args), Warm.session())
        assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_a_run_time_loop_in_a_helper_called_in_a_run_time_loop_is_the_helper_class_own_list():
    # (test_functional_loops.py checks such a model against Keras)
    r = tx(HEAD + '''

def group(x, n):
    for _ in range(n):
        x = layers.Dense(4)(x)
    return x


def build(a, n):
    inputs = keras.Input(shape=(4,))
    x = inputs
    for _ in range(a):
        x = group(x, n)
    return keras.Model(inputs, x)
''')
    assert not errors(r), r.findings
    assert "        for _ in range(n):\n            self.fc.append(nn.Linear(4, 4))" in r.output
    assert "        for _ in range(a):\n            self.group.append(Group(n))" in r.output


def test_a_run_time_loop_written_in_a_run_time_loop_is_an_error_at_the_loop():
    r = tx(HEAD + '''

def build(a, n):
    inputs = keras.Input(shape=(4,))
    x = inputs
    for _ in range(a):
        for _ in range(n):
            x = layers.Dense(4)(x)
    return keras.Model(inputs, x)
''')
    errs = errors(r)
    assert errs[("unsupported-construct", 9)] == 1, errs  # (the outer one: the inner is followed in a copy)
    assert any(f.line == 9 and "inside another such for statement" in f.message for f in r.findings)


# keras-io's structured-data examples (bayesian_neural_networks.py, reduced): a helper builds the dict of
# inputs over a module constant, the builder concatenates its values in sorted order, and a loop over a
# module constant adds the hidden layers
DICT_HELPER = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

hidden_units = [8, 8]
NUMERIC_FEATURE_NAMES = ["fixed acidity", "alcohol"]
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + ["citric acid", "density"]


def create_model_inputs():
    inputs = {}
    for feature_name in FEATURE_NAMES:
        if feature_name in NUMERIC_FEATURE_NAMES:
            inputs[feature_name] = layers.Input(name=feature_name, shape=(1,), dtype=tf.float32)
        else:
            inputs[feature_name] = layers.Input(name=feature_name, shape=(2,), dtype=tf.float32)
    return inputs


def create_baseline_model():
    inputs = create_model_inputs()
    input_values = [value for _, value in sorted(inputs.items())]
    features = keras.layers.concatenate(input_values)
    features = layers.BatchNormalization()(features)

    for units in hidden_units:
        features = layers.Dense(units, activation="sigmoid")(features)
    outputs = layers.Dense(units=1)(features)

    model = keras.Model(inputs=inputs, outputs=outputs)
    return model
'''


def test_a_dict_of_inputs_built_by_a_helper_over_module_constants(tmp_path):
    r = tx(DICT_HELPER)
    assert not errors(r), r.findings
    out = r.output
    assert "def create_model_inputs" not in out  # only the followed model called it: its dict is forward's argument
    assert "def forward(self, inputs):" in out
    # sorted(inputs.items()): the keys in sorted order, as written where the list is used
    assert ('torch.cat([inputs["alcohol"], inputs["citric acid"], inputs["density"], inputs["fixed acidity"]], '
            'dim=-1)') in out
    assert "self.bn = nn.BatchNorm1d(6" in out  # 1 + 2 + 2 + 1 features
    assert "def create_baseline_model():\n    model = BaselineModel()" in out
    (info,) = r.models
    assert info.input_keys == ("fixed acidity", "alcohol", "citric acid", "density")
    verified(tmp_path, textwrap.dedent(DICT_HELPER).lstrip("\n"), out, "create_baseline_model",
             ["float32[4,1]", "float32[4,1]", "float32[4,2]", "float32[4,2]"])


def test_an_input_helper_other_code_calls_stays_and_one_not_followed_keeps_the_error():
    # the helper is also called outside the model: it stays as written beside the class
    r = tx(DICT_HELPER + '''

spec = create_model_inputs()
''')
    assert "def create_model_inputs" in r.output and "class BaselineModel" in r.output
    # a helper whose loop runs over a value not known here is not followed: the error at keras.Model's inputs
    src = DICT_HELPER.replace("create_model_inputs():", "create_model_inputs(names=FEATURE_NAMES):").replace(
        "for feature_name in FEATURE_NAMES:", "for feature_name in names:")
    r = tx(src)
    errs = errors(r)
    assert errs[("unsupported-construct", 30)] == 2, errs  # inputs=inputs, and the model left as written
    assert "keras.Model(" in r.output


def test_module_level_code_the_model_does_not_depend_on_stays_as_written():
    # keras-io's module-level scripts: data and plotting loops between the imports and the model (vq_vae,
    # captcha_ocr) are not part of the model; one that reads a tensor or layer of the model is an error
    src = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

probe = layers.Dense(3)
data = np.ones((4, 2), "float32")
for row in data:
    print(probe(row[None]))

inputs = keras.Input(shape=(2,))
x = layers.Dense(4)(inputs)
model = keras.Model(inputs, x)
'''
    r = tx(src)
    assert not errors(r), r.findings
    out = r.output
    assert "for row in data:\n    print(probe(row[None]))" in out  # as written, before the class
    assert "class Model(nn.Module):" in out and "self.fc = nn.Linear(2, 4)" in out
    r = tx(src.replace("for row in data:\n    print(probe(row[None]))", "x = layers.Dense(4)(inputs)\nfor row in data:\n    print(x)")
           .replace("inputs = keras.Input(shape=(2,))\nx = layers.Dense(4)(inputs)\n", "")
           .replace("probe = layers.Dense(3)\n", "inputs = keras.Input(shape=(2,))\n"))
    errs = errors(r)
    assert errs[("unsupported-construct", 8)] == 1, (errs, r.output)  # `for row in data:` reads the model's x
    assert "keras.Model(" in r.output


# keras-io's metric_learning.py / edsr.py, reduced: a keras.Model subclass that adds only a training step
# (no __init__, call or build), built functionally: `EmbeddingModel(inputs, outputs)`
STEP_MODEL = HEAD + '''
import tensorflow as tf


class EmbeddingModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = tf.reduce_mean(tf.square(y_pred - y))
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        return {"loss": loss}


def make_model(filters=4):
    inputs = layers.Input(shape=(8, 8, 3))
    x = layers.Conv2D(filters, 3, strides=2, padding="same", activation="relu")(inputs)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(5)(x)
    return EmbeddingModel(inputs, outputs)


inputs = layers.Input(shape=(6,))
hidden = layers.Dense(4, activation="relu")(inputs)
model = EmbeddingModel(inputs, layers.Dense(2)(hidden))
'''


def test_a_step_subclass_built_functionally_derives_from_it_and_verifies(tmp_path):
    r = tx(STEP_MODEL)
    assert not errors(r), r.findings
    out = r.output
    assert "class EmbeddingModel(TrainStepModule):" in out
    assert "class Model(EmbeddingModel):" in out and "return Model(filters)" in out
    assert "class Model2(EmbeddingModel):" in out and "model = Model2()" in out
    # (the runtime classes' docstrings name Keras: no import of it)
    assert not [ln for ln in out.splitlines() if ln.startswith(("import", "from")) and ("tensorflow" in ln or "keras" in ln)]
    torch = pytest.importorskip("torch")
    ns: dict = {}
    exec(compile(out, "t.py", "exec"), ns)
    assert ns["make_model"]()(torch.randn(2, 8, 8, 3)).shape == (2, 5)
    assert isinstance(ns["model"], ns["EmbeddingModel"]) and hasattr(ns["model"], "train_step")
    src = textwrap.dedent(STEP_MODEL).lstrip("\n")
    verified(tmp_path, src, out, "make_model", ["float32[2,8,8,3]"])
    verified(tmp_path, src, out, "model", ["float32[3,6]"])


def test_a_subclass_with_its_own_call_is_not_taken_for_a_functional_model():
    src = STEP_MODEL.replace("    def train_step(self, data):", "    def call(self, x):\n        return x\n\n"
                             "    def train_step(self, data):")
    r = tx(src)
    assert "(EmbeddingModel):" not in r.output and "return EmbeddingModel(inputs, outputs)" in r.output
    assert any(f.code == "no-rule" and "keras.Input" in f.message for f in r.findings if f.severity.value == "error")


def test_a_step_subclass_defined_below_its_construction_or_twice_keeps_an_error():
    below = HEAD + '''

def make_model():
    inputs = layers.Input(shape=(6,))
    return StepModel(inputs, layers.Dense(2)(inputs))


class StepModel(keras.Model):
    def train_step(self, data):
        return {}


model = make_model()
'''
    r = tx(below)
    assert errors(r) == Counter({("unsupported-construct", 7): 1}), r.findings
    assert "move the class StepModel above it" in r.findings[[f.line for f in r.findings].index(7)].message
    assert "return StepModel(inputs, layers.Dense(2)(inputs))" in r.output
    # keras-io's debugging_tips.py defines its class twice: the builder's call takes the one bound when it runs
    twice = STEP_MODEL + '''

class EmbeddingModel(keras.Model):
    def test_step(self, data):
        return {}
'''
    r = tx(twice)
    assert "(EmbeddingModel):" not in r.output and "return EmbeddingModel(inputs, outputs)" in r.output
    assert any(f.code == "no-rule" and "keras.Input" in f.message for f in r.findings if f.severity.value == "error")
