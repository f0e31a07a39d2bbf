"""The functional pass on builders given a model or layer made elsewhere (keras-io's
``add_projection_head(encoder)``, ``create_clustering_model(encoder, num_clusters)``,
``create_vivit_classifier(tubelet_embedder, positional_encoder)``): the parameter called on tensors is
kept as a module of the generated class (given to its constructor, called with Keras's layout), and the
model verifies numerically against Keras with the weights of both models moved by their records."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_counts as errors

PACK = load_pack("tf2torch")


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


HEAD = '''
from tensorflow import keras
from tensorflow.keras import layers
'''

# keras-io's supervised-contrastive-learning.py, reduced: an encoder built by one builder, a head
# added by another that takes it as a parameter
DENSE = HEAD + '''

def create_encoder():
    inputs = keras.Input(shape=(8,))
    x = layers.Dense(16, activation="relu")(inputs)
    return keras.Model(inputs, x)


def add_head(encoder, num_classes):
    inputs = keras.Input(shape=(8,))
    features = encoder(inputs)
    features = layers.Dropout(0.5)(features)
    outputs = layers.Dense(num_classes, activation="softmax")(features)
    return keras.Model(inputs=inputs, outputs=outputs)
'''

# keras-io's semantic_image_clustering.py, reduced: the encoder called on a map of a channels-first graph
CONV = HEAD + '''

def create_encoder():
    inputs = keras.Input(shape=(6, 6, 4))
    x = layers.Conv2D(5, 3, padding="same", activation="relu")(inputs)
    return keras.Model(inputs, x)


def create_model(encoder, num_classes=3):
    inputs = keras.Input(shape=(6, 6, 3))
    x = layers.Conv2D(4, 1)(inputs)
    x = encoder(x)
    x = layers.Conv2D(2, 1)(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs)
'''

# a Siamese model: one tower given, called on both inputs (one object: shared weights in both frameworks)
SIAMESE = HEAD + '''

def create_tower():
    inputs = keras.Input(shape=(5,))
    return keras.Model(inputs, layers.Dense(4, activation="tanh")(inputs))


def siamese(tower):
    a = keras.Input(shape=(5,))
    b = keras.Input(shape=(5,))
    diff = layers.subtract([tower(a), tower(b)])
    return keras.Model([a, b], layers.Dense(1)(diff))
'''


def test_a_builder_parameter_called_on_tensors_is_a_module_given_to_the_class():
    r = tx(DENSE)
    assert not errors(r), r.findings
    out = r.output
    assert "class AddHead(nn.Module):\n    def __init__(self, encoder, num_classes):" in out
    assert "        self.encoder = encoder\n" in out
    assert "features = self.encoder(inputs)" in out
    assert "self.fc = nn.LazyLinear(num_classes)" in out  # the encoder's output size is not known here
    assert "return AddHead(encoder, num_classes)" in out
    # Keras's model.layers: InputLayer, the encoder (one layer), Dropout, Dense
    assert {x.target: x.source for x in r.layers if x.scope == "add_head"} == {"fc": "layers[3]"}
    line = textwrap.dedent(DENSE).lstrip("\n").splitlines().index("    features = encoder(inputs)") + 1
    assert any(f.line == line and f.severity.value == "info" and "self.encoder" in f.message for f in r.findings)


def _run(src: str, out: str, make: str, inputs: list):
    """Both models built by ``make`` (the same expression in both files), the Keras weights moved to torch by the
    records of the translation (each model's own scope, the given one's below its attribute), and both outputs."""
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    import numpy as np
    r = tx(src)
    kns: dict = {}
    exec(compile(textwrap.dedent(src).lstrip("\n"), "m.py", "exec"), kns)
    tns: dict = {}
    exec(compile(out, "t.py", "exec"), tns)
    assert "tensorflow" not in out and "keras" not in out
    kmodel, tmodel = eval(make, kns), eval(make, tns)
    tmodel.eval()
    xs = [np.random.default_rng(i).standard_normal(s).astype("float32") for i, s in enumerate(inputs)]
    with torch.no_grad():
        tmodel(*[torch.from_numpy(x) for x in xs])  # (lazy modules take their sizes)

    def load(kmod, tmod, scope):
        recs = [x for x in r.layers if x.scope == scope]
        assert recs
        for rec in recs:
            layer = eval(f"kmod.{rec.source}")
            kernel, bias = (w.numpy() for w in layer.weights)
            weight = kernel.T if rec.rule == "dense" else kernel.transpose(3, 2, 0, 1)
            module = tmod.get_submodule(rec.target)
            with torch.no_grad():
                module.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight)))
                module.bias.copy_(torch.from_numpy(bias))
    return kmodel, tmodel, xs, load, tf, torch


@pytest.mark.parametrize("src, make, shapes, given, outer", [
    (DENSE, "add_head(create_encoder(), 3)", [(4, 8)], "layers[1]", "add_head"),
    (CONV, "create_model(create_encoder())", [(2, 6, 6, 3)], "layers[2]", "create_model"),
    (SIAMESE, "siamese(create_tower())", [(3, 5), (3, 5)], "layers[2]", "siamese"),
])
def test_a_model_given_a_model_computes_what_keras_does(src, make, shapes, given, outer):
    r = tx(src)
    assert not errors(r), r.findings
    kmodel, tmodel, xs, load, tf, torch = _run(src, r.output, make, shapes)
    load(kmodel, tmodel, outer)
    inner = {"add_head": "encoder", "create_model": "encoder", "siamese": "tower"}[outer]
    load(eval(f"kmodel.{given}"), tmodel.get_submodule(inner), "create_" + inner)
    want = kmodel([tf.constant(x) for x in xs] if len(xs) > 1 else tf.constant(xs[0]), training=False).numpy()
    with torch.no_grad():
        got = tmodel(*[torch.from_numpy(x) for x in xs]).numpy()
    assert got.shape == want.shape
    assert abs(got - want).max() < 1e-5
    if outer == "siamese":  # one tower: its parameters once in the model
        assert sum(1 for n, _ in tmodel.named_parameters() if n.startswith("tower.")) == 2


def test_a_parameter_called_in_a_loop_over_a_run_time_value_is_an_error_on_its_line():
    src = HEAD + '''

def build(encoder, depth):
    inputs = keras.Input(shape=(4,))
    x = inputs
    for _ in range(depth):
        x = encoder(x)
    return keras.Model(inputs, x)
'''
    r = tx(src)
    lines = textwrap.dedent(src).lstrip("\n").splitlines()
    errs = [f for f in r.findings if f.severity.value == "error"]
    line = lines.index("        x = encoder(x)") + 1
    assert any(f.line == line and f.message.startswith("encoder(...), a value of the builder called on tensors, "
                                                       "inside a for statement") for f in errs), errs
    assert any("left as written" in f.message for f in errs)
    assert "keras.Model(inputs, x)" in r.output and "(nn.Module):" not in r.output


def test_a_function_held_by_a_builder_name_and_called_on_tensors_is_an_error_on_its_line():
    # in Keras it adds no layer (Keras 3) or one per operation (tf.keras): model.layers' indices are not known (a
    # name bound to a Keras function itself is that function's call: test_functional_source_aliases.py)
    src = HEAD + '''

def build():
    act = lambda t: t * 2.0
    inputs = keras.Input(shape=(4,))
    x = act(inputs)
    return keras.Model(inputs, layers.Dense(2)(x))
'''
    r = tx(src)
    line = textwrap.dedent(src).lstrip("\n").splitlines().index("    x = act(inputs)") + 1
    errs = [f for f in r.findings if f.severity.value == "error"]
    assert any(f.line == line and f.message.startswith("act(...) is called on tensors, and act is not a parameter")
               for f in errs), errs
    assert "(nn.Module):" not in r.output and "keras.Model(" in r.output  # left as written


@pytest.mark.parametrize("call, why", [
    ("encoder([a, b])", "a module given to the model called on a list of tensors"),
    ("encoder(a, b)", "b: a module given to the model called with a second positional argument"),
    ("encoder(a, mask=b)", "mask=b: the translated encoder.forward takes no mask"),
])
def test_a_given_module_called_with_what_its_translation_may_not_take_is_an_error_on_its_line(call, why):
    src = HEAD + f'''

def build(encoder):
    a = keras.Input(shape=(4,))
    b = keras.Input(shape=(4,))
    x = {call}
    return keras.Model([a, b], layers.Dense(2)(x))
'''
    r = tx(src)
    line = textwrap.dedent(src).lstrip("\n").splitlines().index(f"    x = {call}") + 1
    errs = [f for f in r.findings if f.severity.value == "error"]
    assert any(f.line == line and why in f.message for f in errs), errs
    assert "(nn.Module):" not in r.output and "keras.Model(" in r.output  # left as written


def test_a_given_module_called_on_inputs_of_different_shapes_is_one_module():
    src = HEAD + '''

def build(tower):
    a = keras.Input(shape=(4,))
    b = keras.Input(shape=(6,))
    return keras.Model([a, b], layers.concatenate([tower(a), tower(b)]))
'''
    r = tx(src)
    assert not errors(r), r.findings
    assert "torch.cat([self.tower(a), self.tower(b)], dim=-1)" in r.output
    assert r.output.count("self.tower = tower") == 1


MODULE_LEVEL = HEAD + '''

class Scale(layers.Layer):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def call(self, x):
        return x * self.factor


def create_tower():
    inputs = keras.Input(shape=(5,))
    return keras.Model(inputs, layers.Dense(4)(inputs))


scale = Scale(2.0)
tower = create_tower()


def build():
    inputs = keras.Input(shape=(5,))
    x = scale(inputs)
    x = tower(x)
    return keras.Model(inputs, layers.Dense(1)(x))
'''


def test_objects_the_module_binds_called_in_a_builder_are_those_objects():
    r = tx(MODULE_LEVEL)
    assert not errors(r), r.findings
    assert "        self.scale = scale\n        self.tower = tower\n" in r.output
    assert "x = self.scale(inputs)\n        x = self.tower(x)" in r.output
    kmodel, tmodel, xs, load, tf, torch = _run(MODULE_LEVEL, r.output, "build()", [(3, 5)])
    load(kmodel, tmodel, "build")  # Keras's layers: InputLayer, Scale, the tower, Dense
    assert [x.source for x in r.layers if x.scope == "build"] == ["layers[3]"]
    load(kmodel.layers[2], tmodel.tower, "create_tower")
    with torch.no_grad():
        got = tmodel(torch.from_numpy(xs[0])).numpy()
    assert abs(got - kmodel(tf.constant(xs[0])).numpy()).max() < 1e-5


def test_a_keras_layer_built_at_module_level_and_called_in_a_builder_is_an_error_on_its_line():
    src = MODULE_LEVEL + '''

norm = layers.LayerNormalization()


def build_norm():
    inputs = keras.Input(shape=(5,))
    return keras.Model(inputs, norm(inputs))
'''
    r = tx(src)
    line = textwrap.dedent(src).lstrip("\n").splitlines().index("    return keras.Model(inputs, norm(inputs))") + 1
    errs = [f for f in r.findings if f.severity.value == "error"]
    assert any(f.line == line and f.message.startswith(
        "norm(...): norm is bound at module level to layers.LayerNormalization(...), a Keras / TensorFlow object") for f in errs), errs
    assert "class Build(nn.Module)" in r.output and "class BuildNorm" not in r.output
