"""The functional-API pass: keras.Input → layers on tensors → keras.Model(inputs, outputs) → an
nn.Module class. Numerical checks are the fixtures (fixtures/tf2torch/functional_*, run by
tests/test_fixtures.py and verified against Keras by tests/test_verify.py); here: the shape of the
output, the weight records, and every refusal (an error on its line, the model left as written)."""
from __future__ import annotations

import ast
import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_counts as errors
from runners import Warm

PACK = load_pack("tf2torch")


def tx(src: str, keras: int | None = None):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK, {"keras": keras} if keras else None)


HEAD = '''
from tensorflow import keras
from tensorflow.keras import layers
'''


def test_builder_becomes_a_class_and_an_instance():
    r = tx(HEAD + '''
def build_model(units=8):
    """Docstring stays with the builder."""
    inputs = keras.Input(shape=(4,))
    hidden = layers.Dense(units, activation="relu")(inputs)
    outputs = layers.Dense(2)(hidden)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model
''')
    assert not errors(r)
    tree = ast.parse(r.output)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert cls.name == "Model" and ast.unparse(cls.bases[0]) == "nn.Module"
    assert "def __init__(self, units=8):" in r.output
    assert "self.fc1 = nn.Linear(4, units)" in r.output  # its activation where it is called
    assert "self.fc2 = nn.Linear(units, 2)" in r.output
    assert "def forward(self, inputs):" in r.output
    assert "hidden = torch.relu(self.fc1(inputs))" in r.output and "return outputs" in r.output
    builder = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    assert ast.get_docstring(builder) == "Docstring stays with the builder."
    assert "model = Model(units)" in r.output
    assert "keras" not in r.output
    # the builder's order of definition: the class comes first
    assert tree.body.index(cls) < tree.body.index(builder)
    # weight records by Keras's model.layers order (layers[0] is the InputLayer)
    recs = {(x.source, x.target, x.rule) for x in r.layers}
    assert recs == {("layers[1]", "fc1", "dense"), ("layers[2]", "fc2", "dense")}
    assert r.models[0].scope == "build_model" and r.models[0].kind == "functional"


def test_a_model_name_that_starts_with_a_digit_makes_a_valid_class_name():
    """keras.Model(..., name="3dcnn") (keras-io's 3D image classification) had crashed the translation: the
    class name it gave, 3dcnn, is no identifier."""
    r = tx(HEAD + '''
def get_model(depth=4):
    inputs = keras.Input((8, 8, depth, 1))
    x = layers.Conv3D(filters=2, kernel_size=3, activation="relu")(inputs)
    outputs = layers.Dense(units=1)(layers.GlobalAveragePooling3D()(x))
    return keras.Model(inputs, outputs, name="3dcnn")
''')
    assert not errors(r) and not [f for f in r.findings if f.code == "internal-error"]
    assert "class Model3dcnn(nn.Module):" in r.output and "return Model3dcnn(depth)" in r.output
    ast.parse(r.output)


def test_a_graph_name_bound_again_after_the_model_is_not_a_use_of_the_graph():
    """keras-io's actor-critic: `action` is an output of the module-level functional model and, later, a new
    variable of the episode loop (`action = rng.choice(...)`, then read). Only a read before such a rebinding
    uses the graph's tensor (an error); the loop had made the whole model untranslated."""
    r = tx(HEAD + '''
import numpy as np

inputs = layers.Input(shape=(4,))
common = layers.Dense(8, activation="relu")(inputs)
action = layers.Dense(2, activation="softmax")(common)
critic = layers.Dense(1)(common)
model = keras.Model(inputs=inputs, outputs=[action, critic])

for step in range(3):
    probs, value = model(np.ones((1, 4), "float32"))
    if step > 0:
        action = int(np.argmax(probs))
        print(action)
''')
    assert not errors(r), r.findings
    assert "class Model(nn.Module):" in r.output and "model = Model()" in r.output
    bad = tx(HEAD + '''
inputs = layers.Input(shape=(4,))
action = layers.Dense(2)(inputs)
model = keras.Model(inputs=inputs, outputs=action)
for step in range(3):
    print(action)
    action = step
''')
    assert [m for m in (f.message for f in bad.findings) if "used after keras.Model" in m]


def test_translation_is_a_fixpoint_and_keeps_finding_lines():
    src = HEAD + '''
def build():
    inputs = keras.Input(shape=(6,))
    x = layers.Dense(
        5,
        activation="relu",
    )(inputs)
    return keras.Model(inputs, x)


y = tf_unknown_thing = keras.layers.Lambda
'''
    r = tx(src)
    assert "self.fc = nn.Linear(6, 5)" in r.output
    assert "x = torch.relu(self.fc(inputs))" in r.output
    # the finding after the shortened statement is on its source line
    src_lines = textwrap.dedent(src).lstrip("\n").splitlines()
    after = [f for f in r.findings if f.severity.value == "error"]
    assert after and all("Lambda" in src_lines[f.line - 1] for f in after)
    again = translate_source(r.output, "m.py", PACK)
    assert again.output == r.output


def test_merges_and_concatenate_axis_in_channels_first():
    r = tx(HEAD + '''
def build():
    inputs = keras.Input(shape=(8, 8, 3))
    a = layers.Conv2D(4, 1)(inputs)
    b = layers.Conv2D(4, 1)(inputs)
    c = layers.concatenate([a, b])
    d = layers.Concatenate(axis=1)([a, b])
    s = layers.Add()([a, b]) - layers.average([a, b])
    m = layers.maximum([a, b])
    out = layers.Flatten()(layers.Conv2D(2, 1)(c) + layers.Conv2D(2, 1)(s + m) + layers.Conv2D(2, 1)(d)[:, :8])
    return keras.Model(inputs, out)
''')
    # the slice is not followed: an error on its line, and the model is left as written
    assert errors(r)[("unsupported-construct", 12)] == 1
    assert "keras.Model(inputs, out)" in r.output and "class " not in r.output
    r = tx(HEAD + '''
def build():
    inputs = keras.Input(shape=(8, 8, 3))
    a = layers.Conv2D(4, 1)(inputs)
    b = layers.Conv2D(4, 1)(inputs)
    c = layers.concatenate([a, b])
    d = layers.Concatenate(axis=1)([a, b])
    s = layers.Add()([a, b]) - layers.average([a, b])
    return keras.Model(inputs, [c, d, s])
''')
    assert not errors(r)
    assert "c = torch.cat([a, b], dim=1)" in r.output  # channels: dim 1 in NCHW
    assert "d = torch.cat([a, b], dim=2)" in r.output  # Keras axis 1 (height) is torch dim 2
    assert "s = a + b - (a + b) / 2" in r.output
    # channels-first inside; Keras's channels-last interface: inputs moved once, feature maps moved back
    assert "inputs = inputs.permute(0, 3, 1, 2)" in r.output
    assert "return c.permute(0, 2, 3, 1), d.permute(0, 2, 3, 1), s.permute(0, 2, 3, 1)" in r.output
    assert r.models[0].layout == "same" and r.models[0].output_layout == "same"


def test_shared_layer_is_one_module():
    r = tx(HEAD + '''
def build():
    left = keras.Input(shape=(3,))
    right = keras.Input(shape=(3,))
    shared = layers.Dense(2)
    return keras.Model([left, right], shared(left) + shared(right))
''')
    assert not errors(r)
    assert r.output.count("nn.Linear(3, 2)") == 1
    assert "return self.shared(left) + self.shared(right)" in r.output
    assert "def forward(self, left, right):" in r.output
    # one Dense, after both InputLayers in model.layers
    assert [(x.source, x.target) for x in r.layers] == [("layers[2]", "shared")]


def test_keras2_counts_tensor_arithmetic_as_layers():
    src = HEAD + '''
def build():
    inputs = keras.Input(shape=(3,))
    x = inputs * 2.0
    return keras.Model(inputs, layers.Dense(2)(x) if False else x)
'''
    # (the conditional output is not followed)
    assert errors(tx(src))
    src = HEAD + '''
def build():
    inputs = keras.Input(shape=(3,))
    x = inputs * 2.0
    y = layers.Dense(2)(x)
    return keras.Model(inputs, y)
'''
    # Keras 3: `inputs * 2.0` is an operation, not a layer; tf.keras: a TFOpLambda layer
    assert [x.source for x in tx(src, keras=3).layers] == ["layers[1]"]
    assert [x.source for x in tx(src, keras=2).layers] == ["layers[2]"]


def test_refusals_are_precise_and_leave_the_model_as_written():
    cases = {
        # a call of something that is not a known Keras layer
        '''
def build():
    inputs = keras.Input(shape=(3,))
    x = MyBlock()(inputs)
    return keras.Model(inputs, x)
''': 6,
        # a loop over a value known only at run time whose tensor changes shape from one pass to the next
        '''
def build(n):
    inputs = keras.Input(shape=(3,))
    x = inputs
    for _ in range(n):
        x = layers.Dense(4)(x)
    return keras.Model(inputs, x)
''': 7,
        # a layer whose result does not reach the outputs (Keras leaves it out of the model)
        '''
def build():
    inputs = keras.Input(shape=(3,))
    x = layers.Dense(4)(inputs)
    unused = layers.Dense(5)(x)
    return keras.Model(inputs, x)
''': 8,
        # the forward pass would read a value of the builder in a channels-first model (not a scalar?)
        '''
def build(scale):
    inputs = keras.Input(shape=(4, 4, 3))
    x = layers.Conv2D(4, 1)(inputs)
    y = x * scale
    return keras.Model(inputs, y)
''': 7,
        # a tf op on a feature map of a channels-first model
        '''
def build():
    inputs = keras.Input(shape=(4, 4, 3))
    x = layers.Conv2D(4, 1)(inputs)
    y = keras.ops.mean(x, axis=-1)
    return keras.Model(inputs, y)
''': 7,
        # broadcasting between feature maps of different shapes in a channels-first model
        '''
def build():
    inputs = keras.Input(shape=(8, 8, 3))
    a = layers.Conv2D(4, 1)(inputs)
    b = layers.GlobalAveragePooling2D()(a)
    c = a + b
    return keras.Model(inputs, c)
''': 8,
        # a layer called with training=
        '''
def build():
    inputs = keras.Input(shape=(3,))
    x = layers.Dropout(0.5)(inputs, training=True)
    return keras.Model(inputs, x)
''': 6,
    }
    for body, line in cases.items():
        r = tx(HEAD + body)
        errs = errors(r)
        assert errs[("unsupported-construct", line)] >= 1, (body, errs)
        model_line = len((HEAD + body).strip("\n").splitlines())
        assert errs[("unsupported-construct", model_line)] == 1, (body, errs)  # "left as written"
        assert "class " not in r.output and "keras.Model(" in r.output, r.output
        assert "nn.Linear" not in r.output and "self." not in r.output  # no half translation: no layer was translated out of context
        assert not r.layers and not r.models


def test_model_built_in_a_method_is_refused():
    r = tx(HEAD + '''
class Factory:
    def build(self):
        inputs = keras.Input(shape=(3,))
        return keras.Model(inputs, layers.Dense(2)(inputs))
''')
    assert errors(r)[("unsupported-construct", 7)] == 1
    assert "keras.Model(" in r.output


def test_no_functional_model_means_no_change():
    src = textwrap.dedent(HEAD + '''
model = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(2)])
''').lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert "nn.Sequential(" in r.output and "class " not in r.output


def test_helper_blocks_one_class_per_variant_and_records_below_the_instance():
    r = tx(HEAD + '''
def block(x, units, norm=False):
    y = layers.Dense(units)(x)
    if norm:
        y = layers.LayerNormalization()(y)
    return layers.ReLU()(y)


def build(width):
    inputs = keras.Input(shape=(4,))
    x = block(inputs, 8)
    x = block(x, 8)
    x = block(x, 8, norm=True)
    return keras.Model(inputs, block(x, width))
''')
    assert not errors(r), r.findings
    assert "def block" not in r.output  # every call followed: the helper became its classes
    assert "class Block(nn.Module):" in r.output and "class Block3(nn.Module):" in r.output
    assert "self.block1 = Block()" in r.output and "self.block2 = Block2()" in r.output  # in 4 → 8, then 8 → 8
    assert "self.block3 = Block3()" in r.output and "self.block4 = Block4(width)" in r.output
    assert "def __init__(self, units):" in r.output  # a size the caller gives: a parameter of the class
    assert "x = self.block1(inputs)" in r.output and "return self.block4(x)" in r.output
    # Keras's model.layers is flat: InputLayer, then Dense/ReLU pairs (LayerNormalization in the third)
    recs = [(x.source, x.target) for x in r.layers if x.rule == "dense"]
    assert recs == [("layers[1]", "block1.fc"), ("layers[3]", "block2.fc"), ("layers[5]", "block3.fc"),
                    ("layers[8]", "block4.fc")]


def test_helper_refusals_are_reported_at_the_call_site():
    cases = {
        '''
def block(x, units, flag):
    if flag:
        x = layers.Dense(units)(x)
    return x


def build(flag):
    inputs = keras.Input(shape=(4,))
    return keras.Model(inputs, block(inputs, 3, flag))
''': "cannot be decided where the model is built",
        # (`units = max(n, 3)` in a helper is followed: a size computed from known values)
    }
    for src, why in cases.items():
        r = tx(HEAD + src)
        line = len((HEAD + src).strip("\n").splitlines())
        errs = [f for f in r.findings if f.severity.value == "error" and f.line == line]
        assert any(why in f.message and "in block(...)" in f.message for f in errs), [f.message for f in errs]
        assert "def block" in r.output and "class " not in r.output


def test_a_helper_used_elsewhere_stays_beside_its_classes():
    r = tx(HEAD + '''
def block(x):
    return layers.Dense(2)(x)


def build():
    inputs = keras.Input(shape=(4,))
    return keras.Model(inputs, block(inputs))


other = block
''')
    assert "class Block(nn.Module):" in r.output and "def block(x):" in r.output


def test_loops_over_known_values_are_written_out():
    r = tx(HEAD + '''
def stage(x, filters, repeats=2):
    for _ in range(repeats):
        x = layers.Conv2D(filters, 3, padding="same")(x)
    return x


def build():
    inputs = keras.Input(shape=(8, 8, 3))
    x = inputs
    for filters in [4, 6]:
        x = stage(x, filters)
    for width in (2, 3):
        x = layers.Conv2D(width, 1)(x)
    return keras.Model(inputs, x)
''')
    assert not errors(r), r.findings
    assert "self.stage1 = Stage()" in r.output and "self.stage2 = Stage2()" in r.output
    assert "self.conv1 = nn.Conv2d(6, 2, 1)" in r.output and "self.conv2 = nn.Conv2d(2, 3, 1)" in r.output
    assert "x = self.stage1(x)\n        x = self.stage2(x)\n        x = self.conv1(x)\n        x = self.conv2(x)" in r.output
    assert "for " not in r.output and "def stage" not in r.output
    # Keras: InputLayer, stage 1's two Conv2D, stage 2's, then the two 1x1
    assert sorted((x.source, x.target) for x in r.layers) == [
        ("layers[1]", "stage1.conv1"), ("layers[2]", "stage1.conv2"), ("layers[3]", "stage2.conv1"),
        ("layers[4]", "stage2.conv2"), ("layers[5]", "conv1"), ("layers[6]", "conv2")]


def test_builder_values_and_ops_in_forward():
    r = tx(HEAD + '''
def build(scale=0.5):
    inputs = keras.Input(shape=(3,))
    x = layers.Dense(4)(inputs)
    y = keras.ops.relu(x) * scale
    z = keras.ops.sum(y, axis=-1, keepdims=True)
    return keras.Model(inputs, [y, z])
''')
    assert not errors(r), r.findings
    assert "self.scale = scale" in r.output
    assert "y = torch.relu(x) * self.scale" in r.output or "y = F.relu(x) * self.scale" in r.output
    assert "z = torch.sum(y, dim=-1, keepdim=True)" in r.output
    assert "keras" not in r.output


def test_several_models_at_module_level():
    r = tx(HEAD + '''
enc_in = keras.Input(shape=(5,))
x = layers.Dense(2)(enc_in)
encoder = keras.Model(enc_in, x, name="encoder")

dec_in = keras.Input(shape=(2,))
x = layers.Dense(5)(dec_in)
decoder = keras.Model(dec_in, x)
''')
    assert not errors(r), r.findings
    assert "class Encoder(nn.Module):" in r.output and "encoder = Encoder()" in r.output
    assert "class Decoder(nn.Module):" in r.output and "decoder = Decoder()" in r.output
    assert {(x.scope, x.source, x.target) for x in r.layers} == {("encoder", "layers[1]", "fc"),
                                                                ("decoder", "layers[1]", "fc")}
    assert {m.scope for m in r.models} == {"encoder", "decoder"}


def test_dense_before_a_reshape_feeding_something_else_is_refused():
    r = tx(HEAD + '''
def build():
    z = keras.Input(shape=(4,))
    d = layers.Dense(2 * 2 * 3)(z)
    x = layers.Reshape((2, 2, 3))(d)
    x = layers.Conv2D(1, 1)(x)
    return keras.Model(z, [x, d])
''')
    assert errors(r)[("unsupported-construct", 7)] == 1
    assert "class " not in r.output


def test_a_name_for_the_list_of_inputs():
    r = tx(HEAD + '''
def build():
    a = keras.Input(shape=(3,))
    b = keras.Input(shape=(2,))
    inputs = [a, b]
    out = layers.Dense(1)(layers.concatenate(inputs))
    return keras.Model(inputs=inputs, outputs=out)
''')
    assert not errors(r), r.findings
    assert "def forward(self, a, b):" in r.output
    assert "self.fc = nn.Linear(5, 1)" in r.output and "out = self.fc(torch.cat([a, b], dim=-1))" in r.output


def test_input_shape_given_as_a_parameter_takes_its_rank_from_the_first_layer():
    r = tx(HEAD + '''
def build(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)
    x = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x))
''')
    assert not errors(r), r.findings
    assert 'nn.Conv2d(input_shape[-1], 4, 3, padding="same")' in r.output
    assert "inputs = inputs.permute(0, 3, 1, 2)" in r.output  # the rank comes from the first Conv2D
    assert r.models[0].layout == "same"


def test_helper_returning_two_tensors_and_computing_a_value():
    r = tx(HEAD + '''
def down(x, filters):
    channels = x.shape[-1]
    if channels != filters:
        x = layers.Dense(filters)(x)
    return layers.ReLU()(x), x


def build():
    inputs = keras.Input(shape=(4,))
    x, skip = down(inputs, 4)
    y, skip2 = down(x, 6)
    return keras.Model(inputs, [y, skip, skip2])
''')
    assert not errors(r), r.findings
    assert "x, skip = self.down1(inputs)" in r.output and "y, skip2 = self.down2(x)" in r.output
    assert "return self.relu(x), x" in r.output
    assert "nn.Linear(4, 6)" in r.output and "nn.Linear(4, 4)" not in r.output  # 4 == 4: no Dense
    r = tx(HEAD + '''
def down(x):
    return layers.ReLU()(x), x


def build():
    inputs = keras.Input(shape=(4,))
    return keras.Model(inputs, down(inputs))
''')
    assert any("unpack" in f.message for f in r.findings if f.severity.value == "error")


def test_a_model_of_another_builder_used_as_a_layer():
    r = tx(HEAD + '''
def get_encoder(latent_dim=4):
    inputs = keras.Input(shape=(8, 8, 1))
    x = layers.Conv2D(latent_dim, 3, padding="same")(inputs)
    return keras.Model(inputs, x, name="encoder")


def get_model(latent_dim=4):
    encoder = get_encoder(latent_dim)
    inputs = keras.Input(shape=(8, 8, 1))
    out = layers.Conv2D(1, 1)(encoder(inputs))
    return keras.Model(inputs, out, name="wrapper")
''')
    assert not errors(r), r.findings
    assert "self.encoder = get_encoder(latent_dim)" in r.output
    # every translated model takes Keras's channels-last layout: in this channels-first graph, the
    # encoder's input is moved back to channels-last and its output to channels-first again
    assert "out = self.conv(self.encoder(inputs.movedim(1, -1)).movedim(-1, 1))" in r.output
    recs = {(x.scope, x.source, x.target) for x in r.layers}
    assert ("get_model", "layers[1].layers[1]", "encoder.conv") in recs  # Keras: model.layers[1] is the encoder
    assert ("get_model", "layers[2]", "conv") in recs


NESTED_IN_NCHW = '''
from tensorflow import keras
from tensorflow.keras import layers

inner_in = keras.Input(shape=(8, 8, 4))
y = layers.Conv2D(4, 3, padding="same", activation="relu")(inner_in)
inner = keras.Model(inner_in, y)

inputs = keras.Input(shape=(8, 8, 3))
x = layers.Conv2D(4, 3, padding="same")(inputs)
z = inner(x)
x = layers.Conv2D(2, 1)(z)
x = layers.Flatten()(x)
outputs = layers.Dense(3)(x)
model = keras.Model(inputs, outputs)
'''


def test_a_channels_first_model_keeps_keras_interface_and_a_nested_model_is_called_in_it(tmp_path):
    # inside: channels-first; outside: Keras's channels-last tensors, so data code, fit and the loops
    # that feed the model work unchanged. `z = inner(x)` applies a model of the file (not a new layer).
    r = translate_source(NESTED_IN_NCHW, "m.py")
    assert not errors(r), r.findings
    assert "inner_in = inner_in.permute(0, 3, 1, 2)" in r.output and "return y.permute(0, 2, 3, 1)" in r.output
    assert "z = self.inner(x.movedim(1, -1)).movedim(-1, 1)" in r.output
    assert all(m.layout == "same" and m.output_layout == "same" for m in r.models)
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(NESTED_IN_NCHW)
    (tmp_path / "m_torch.py").write_text(r.output)
    session = Warm.session()
    for model, shape in (("model", "float32[2,8,8,3]"), ("inner", "float32[2,8,8,4]")):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model, inputs=[shape],
                              checks=("forward", "grad"), device="cpu"), session)
        assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


FACTORY_INSTANCE = '''
from tensorflow import keras
from tensorflow.keras import layers


def make_encoder():
    inp = keras.Input(shape=(8, 8, 3))
    x = layers.Conv2D(4, 3, padding="same", activation="relu")(inp)
    return keras.Model(inp, x)


encoder = make_encoder()
inputs = keras.Input(shape=(8, 8, 3))
h = encoder(inputs)
h = layers.Conv2D(2, 1)(h)
out = layers.GlobalAveragePooling2D()(h)
model = keras.Model(inputs, out)
encoder.summary()
'''


def test_a_module_level_instance_of_a_builder_is_that_layer_of_the_next_model(tmp_path):
    # encoder = make_encoder() stays: the model holds that very instance (Keras shares its weights),
    # and the name still means it after keras.Model(...)
    r = translate_source(FACTORY_INSTANCE, "m.py")
    assert not errors(r), r.findings
    assert "\nencoder = make_encoder()\n" in r.output
    assert "        self.encoder = encoder\n" in r.output
    assert "h = self.encoder(inputs.movedim(1, -1)).movedim(-1, 1)" in r.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(FACTORY_INSTANCE.replace("encoder.summary()\n", ""))
    (tmp_path / "m_torch.py").write_text(r.output.replace("print(encoder", "(encoder"))
    session = Warm.session()
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), "model",
                          inputs=["float32[2,8,8,3]"], checks=("forward", "grad"), device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_a_layer_of_the_file_called_with_what_its_forward_does_not_take_is_refused():
    cls = '''
class Block(keras.layers.Layer):
    def call(self, x, mask=None, training=None):
        return x * 2.0
'''
    for call, said in [("Block()(inp, training=False)", "takes no training"),
                       ("Block()(inp, mask=inp > 0)", "takes no mask"),
                       ("Block()(inp, None, True)", "takes no mask"),
                       ("Block()(inp, extra=inp)", "does not bind to the parameters of Block.call")]:
        r = tx(HEAD + cls + f'''
inp = keras.Input(shape=(4,))
model = keras.Model(inp, {call})
''')
        messages = [f.message for f in r.findings if f.severity.value == "error"]
        assert any(said in m for m in messages), (call, messages)
        assert "class Model(nn.Module)" not in r.output
