"""The functional pass on the styles real Keras code builds models in (keras-io): block factories
that return a closure (``ResidualBlock(width)(x)``), and a module-level ``keras.Sequential`` of
preprocessing layers called in the builder (``data_augmentation(inputs)``). Each followed style is
translated without TensorFlow and verified against Keras (forward and gradients); what is not
followed keeps an error on its line and the model left as written."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_counts as errors
from runners import Warm

PACK = load_pack("tf2torch")


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def verified(tmp_path, src: str, out: str, model: str, inputs: list[str]) -> dict:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=inputs,
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    return {e["name"]: e["source"] for e in cert["results"]["gradients"]}


HEAD = '''
from tensorflow import keras
from tensorflow.keras import layers
'''

# keras-io's ddim.py, reduced: a factory whose closure branches on x.shape[3], and a factory
# whose closure calls the other one in a loop over a literal range
FACTORIES = HEAD + '''

def ResidualBlock(width):
    def apply(x):
        input_width = x.shape[3]
        if input_width == width:
            residual = x
        else:
            residual = layers.Conv2D(width, kernel_size=1)(x)
        x = layers.BatchNormalization(center=False, scale=False)(x)
        x = layers.Conv2D(width, kernel_size=3, padding="same", activation=keras.activations.swish)(x)
        x = layers.Add()([x, residual])
        return x

    return apply


def DownBlock(width, block_depth=2):
    """Residual blocks, then half the size."""
    def apply(x):
        for _ in range(block_depth):
            x = ResidualBlock(width)(x)
        x = layers.AveragePooling2D(pool_size=2)(x)
        return x

    return apply


def get_network():
    images = keras.Input(shape=(8, 8, 3))
    x = layers.Conv2D(4, kernel_size=1)(images)
    x = DownBlock(6)(x)
    x = DownBlock(width=8, block_depth=1)(x)
    x = ResidualBlock(8)(x)
    return keras.Model(images, x)
'''


def test_block_factories_become_classes_instantiated_per_call_site():
    r = tx(FACTORIES)
    assert not errors(r), r.findings
    out = r.output
    # every call followed: the factories became their classes, nothing of them left to translate
    assert "def ResidualBlock" not in out and "def DownBlock" not in out and "def apply" not in out
    # DownBlock(6): two residual blocks (4 → 6 with a 1x1 shortcut, then 6 → 6 with the identity)
    assert "self.residual_block1 = ResidualBlock2()\n        self.residual_block2 = ResidualBlock3()" in out
    assert "self.conv1 = nn.Conv2d(4, 6, 1)" in out and "residual = self.conv1(x)" in out
    assert "        residual = x\n" in out  # the identity branch, decided by x.shape[3] == width
    assert "self.down_block1 = DownBlock2()" in out and "self.down_block2 = DownBlock3()" in out
    assert "x = self.down_block1(x)\n        x = self.down_block2(x)\n        x = self.residual_block(x)" in out
    # Keras's model.layers is flat: the blocks' layers are recorded below their instances
    recs = {x.target: x.source for x in r.layers}
    assert recs["down_block1.residual_block1.conv1"] == "layers[4]"  # map_graph order: by depth
    assert recs["conv"] == "layers[1]"


def test_block_factories_verify(tmp_path):
    r = tx(FACTORIES)
    grads = verified(tmp_path, textwrap.dedent(FACTORIES).lstrip("\n"), r.output, "get_network()",
                     ["float32[2,8,8,3]"])
    assert grads["down_block1.residual_block1.conv1.weight"] == "layers[4].kernel"
    # the stem; DownBlock(6): 4 → 6 (1x1 shortcut and 3x3) and 6 → 6; DownBlock(8, 1): 6 → 8; then 8 → 8
    assert len(grads) == 2 + (4 + 2) + 4 + 2


def test_a_function_called_on_tensors_that_is_no_block_factory_is_an_error_on_its_line():
    src = HEAD + '''

def make_head(units):
    head = layers.Dense(units)
    return head


def build():
    inputs = keras.Input(shape=(4,))
    outputs = make_head(3)(inputs)
    return keras.Model(inputs, outputs)
'''
    r = tx(src)
    line = textwrap.dedent(src).lstrip("\n").splitlines().index("    outputs = make_head(3)(inputs)") + 1
    errs = [f for f in r.findings if f.severity.value == "error"]
    assert any(f.line == line and "block factory" in f.message for f in errs), [(f.line, f.message) for f in errs]
    assert any("left as written" in f.message for f in errs)
    assert "keras.Model(inputs, outputs)" in r.output and "class " not in r.output


def test_a_closure_refused_inside_a_factory_is_reported_at_the_call_site():
    src = HEAD + '''

def Block(width):
    def apply(x):
        x, skips = x
        return layers.Dense(width)(x)

    return apply


def build():
    inputs = keras.Input(shape=(4,))
    return keras.Model(inputs, Block(3)(inputs))
'''
    r = tx(src)
    line = textwrap.dedent(src).lstrip("\n").splitlines().index("    return keras.Model(inputs, Block(3)(inputs))") + 1
    errs = [f for f in r.findings if f.severity.value == "error"]
    assert any(f.line == line and "in Block(3)(...)" in f.message for f in errs), [(f.line, f.message) for f in errs]
    assert "def Block(width):" in r.output and "class " not in r.output


AUGMENTED = HEAD + '''
data_augmentation = keras.Sequential(
    [
        layers.Rescaling(0.5, offset=-1.0),
        {resize}layers.RandomFlip("horizontal"),
        layers.RandomRotation(factor=0.02),
    ],
    name="data_augmentation",
)


def build_classifier(num_classes=5):
    inputs = keras.Input(shape=(8, 8, 3))
    augmented = data_augmentation(inputs)
    x = {body}
    outputs = layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs)
'''

CONV = 'layers.Conv2D(4, 3, activation="relu")(augmented)\n    x = layers.GlobalAveragePooling2D()(x)'


@pytest.mark.parametrize("resize, body, call", [
    # the Sequential keeps Keras's layout, the graph is channels-first: images moved in and back
    ("", CONV, "augmented = self.data_augmentation(inputs.movedim(1, -1)).movedim(-1, 1)"),
    # a Resizing makes the sequential pass translate it channels-first, as the graph: called as it is
    ("layers.Resizing(12, 12),\n        ", CONV, "augmented = self.data_augmentation(inputs)"),
    # a graph that keeps Keras's layout around a channels-first Sequential
    ("layers.Resizing(6, 6),\n        ", "layers.Flatten()(augmented)",
     "augmented = self.data_augmentation(inputs.movedim(-1, 1)).movedim(1, -1)"),
])
def test_a_module_level_sequential_called_in_the_builder_is_that_object(tmp_path, resize, body, call):
    src = textwrap.dedent(AUGMENTED.replace("{resize}", resize).replace("{body}", body)).lstrip("\n")
    r = tx(src)
    assert not errors(r), r.findings
    assert "self.data_augmentation = data_augmentation\n" in r.output  # shared, as in Keras
    assert call in r.output
    assert "data_augmentation = nn.Sequential(" in r.output  # the sequential pass's translation
    verified(tmp_path, src, r.output, "build_classifier()", ["float32[2,8,8,3]"])


def test_a_module_level_sequential_with_weights_keeps_its_records_below_the_model(tmp_path):
    src = textwrap.dedent(HEAD + '''
stem = keras.Sequential([layers.Rescaling(2.0), layers.Dropout(0.1)])


def build():
    inputs = keras.Input(shape=(6, 6, 2))
    x = stem(inputs)
    x = layers.Conv2D(3, 3)(x)
    x = layers.Flatten()(x)
    return keras.Model(inputs, layers.Dense(2)(x))
''').lstrip("\n")
    r = tx(src)
    assert not errors(r), r.findings
    assert "self.stem = stem" in r.output
    verified(tmp_path, src, r.output, "build()", ["float32[2,6,6,2]"])


def test_a_module_level_sequential_of_other_layers_is_an_error_on_its_member():
    src = HEAD + '''
encoder = keras.Sequential([layers.Conv2D(4, 3), layers.Flatten()])


def build():
    inputs = keras.Input(shape=(8, 8, 3))
    x = encoder(inputs)
    return keras.Model(inputs, layers.Dense(2)(x))
'''
    r = tx(src)
    lines = textwrap.dedent(src).lstrip("\n").splitlines()
    errs = [f for f in r.findings if f.severity.value == "error"]
    member = lines.index("encoder = keras.Sequential([layers.Conv2D(4, 3), layers.Flatten()])") + 1
    assert any(f.line == member and "module-level keras.Sequential" in f.message for f in errs), \
        [(f.line, f.message) for f in errs]
    assert any("left as written" in f.message for f in errs)
    assert "keras.Model(inputs" in r.output


MLP = HEAD + '''
projection_dim = 8
transformer_units = [projection_dim * 2, projection_dim]
head_units = [6, 4]


def mlp(x, hidden_units, dropout_rate):
    for units in hidden_units:
        x = layers.Dense(units, activation="gelu")(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def build():
    inputs = keras.Input(shape=(5, projection_dim))
    x = mlp(inputs, hidden_units=transformer_units, dropout_rate=0.1)
    x = layers.Flatten()(x)
    x = mlp(x, head_units, 0.5)
    return keras.Model(inputs, layers.Dense(2)(x))
'''


def test_a_helper_given_module_constants_loops_over_their_values(tmp_path):
    # keras-io's ViT mlp(x, hidden_units=transformer_units, ...): a list of module constants
    src = textwrap.dedent(MLP).lstrip("\n")
    r = tx(src)
    assert not errors(r), r.findings
    assert "def mlp" not in r.output
    assert "nn.Linear(projection_dim, projection_dim * 2)" in r.output  # the sizes as the source names them
    assert "self.mlp1 = Mlp()" in r.output and "self.mlp2 = Mlp2()" in r.output
    grads = verified(tmp_path, src, r.output, "build()", ["float32[3,5,8]"])
    assert len(grads) == 2 * (2 + 2 + 1)


STEPPED = HEAD + '''

def downsample(x, filters, strides=2):
    x = layers.Conv2D(filters, 3, strides=strides, padding="same")(x)
    return layers.LeakyReLU(0.2)(x)


def build_discriminator():
    inputs = keras.Input(shape=(16, 16, 3))
    filters = 4
    x = layers.Conv2D(filters, 3, padding="same")(inputs)
    for i in range(3):
        filters *= 2
        if i < 2:
            x = downsample(x, filters)
        else:
            x = downsample(x, filters, strides=1)
    units = filters // 2
    x = layers.Flatten()(x)
    x = layers.Dense(units)(x)
    return keras.Model(inputs, x)
'''


def test_ints_a_loop_steps_and_ifs_on_its_variable_are_followed_pass_by_pass(tmp_path):
    # keras-io's gaugan / cyclegan style: `filters *= 2` in the loop, `if i < 2:` decided per pass
    src = textwrap.dedent(STEPPED).lstrip("\n")
    r = tx(src)
    assert not errors(r), r.findings
    out = r.output
    assert "self.downsample1 = Downsample()" in out and "self.downsample3 = Downsample3()" in out
    assert "Conv2d(8, 3, stride=2)" in out and "nn.Conv2d(8, 16, 3, stride=2)" in out
    assert "nn.Conv2d(16, 32, 3, stride=1" in out  # the third pass: the else branch
    assert "units = 32 // 2" in out  # below the loop, filters is its value after the loop
    assert "self.fc = nn.Linear(512, units)" in out
    verified(tmp_path, src, out, "build_discriminator()", ["float32[2,16,16,3]"])


@pytest.mark.parametrize("body, why", [
    # a builder parameter: its value is not known where the model is built
    ('''
def build(filters=4):
    inputs = keras.Input(shape=(8,))
    x = inputs
    for i in range(2):
        filters = filters * 2
        x = layers.Dense(filters)(x)
    return keras.Model(inputs, x)
''', "filters: changed in this for statement"),
    # a value bound in an if statement of the builder: not known either
    ('''
def build():
    inputs = keras.Input(shape=(8,))
    x = inputs
    width = 3
    if len(str(width)) > 0:
        width = 5
    for i in range(2):
        width *= 2
        x = layers.Dense(width)(x)
    return keras.Model(inputs, x)
''', "width: changed in this for statement"),
    # an if on a size that is not known in the pass
    ('''
def build(n):
    inputs = keras.Input(shape=(8,))
    x = inputs
    for i in range(2):
        if i < n:
            x = layers.Dense(4)(x)
    return keras.Model(inputs, x)
''', "an if statement in this for statement"),
])
def test_loop_steps_not_known_are_errors_at_the_loop(body, why):
    src = textwrap.dedent(HEAD + body).lstrip("\n")
    r = tx(src)
    loop = src.splitlines().index("    for i in range(2):") + 1
    errs = [f for f in r.findings if f.severity.value == "error"]
    assert any(f.line == loop and why in f.message for f in errs), [(f.line, f.message) for f in errs]
    assert any("left as written" in f.message for f in errs)


OPS_IN_BLOCKS = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


def inverted_residual_block(x, expanded_channels, output_channels, strides=1):
    m = layers.Conv2D(expanded_channels, 1, padding="same", use_bias=False)(x)
    m = layers.BatchNormalization()(m)
    m = {swish}(m)
    m = layers.DepthwiseConv2D(3, strides=strides, padding="same", use_bias=False)(m)
    m = {relu}(m)
    m = layers.Conv2D(output_channels, 1, padding="same", use_bias=False)(m)
    if strides == 1 and x.shape[-1] == output_channels:
        return layers.Add()([m, x])
    return m


def build():
    inputs = keras.Input(shape=(8, 8, 4))
    x = inverted_residual_block(inputs, 8, 4)
    for _ in range(2):
        x = {sigmoid}(x)
        x = layers.Conv2D(4, 1)(x)
    x = inverted_residual_block(x, 8, 6, strides=2)
    return keras.Model(inputs, x)
'''


@pytest.mark.parametrize("keras, names", [
    (2, ("tf.nn.swish", "tf.nn.relu", "tf.nn.sigmoid")),  # keras-io's mobilevit (tf.keras 2)
    (3, ("keras.ops.silu", "keras.ops.relu", "keras.activations.sigmoid")),
])
def test_elementwise_functions_in_helpers_and_loops_are_written_by_their_rules(tmp_path, keras, names):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    if keras == 2:
        pytest.importorskip("tf_keras")
    from fwport.verify import Options, verify
    src = OPS_IN_BLOCKS.format(swish=names[0], relu=names[1], sigmoid=names[2]).lstrip("\n")
    r = translate_source(src, "m.py", PACK, {"keras": keras})
    assert not errors(r), r.findings
    assert r.output.count("F.silu(m)") == 2 and r.output.count("F.relu(m)") == 2
    assert r.output.count("x = torch.sigmoid(x)") == 2 and "tf." not in r.output
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[2,8,8,4]"],
                          checks=("forward", "grad"), device="cpu", keras=keras), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
