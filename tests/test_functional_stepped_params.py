"""A builder parameter the builder steps in its loops (keras-io's cyclegan generator: ``filters *= 2`` in the
downsampling loop, ``filters //= 2`` in the upsampling loop, both over ``range(<parameter>)``): refused as written
(the loops' counts and the sizes they step are known only when the model is built), it is followed for the values
every call of the builder in the file gives (its defaults here): the parameter starts the builder's known ints,
each loop is written out pass by pass from the value the one above left, and ``__init__`` raises ValueError for
another value. A helper parameter whose default is a module-level initializer (``kernel_initializer=kernel_init``,
``kernel_init = keras.initializers.RandomNormal(...)``) is that name, as the builder's own layer calls pass it. A parameter bound again otherwise (``filters = filters * 2`` outside a loop, an unpacking) is not
such a parameter; calls that disagree keep the refusal."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors

GENERATOR = '''
from tensorflow import keras
from tensorflow.keras import layers

kernel_init = keras.initializers.RandomNormal(mean=0.0, stddev=0.02)


def downsample(x, filters, activation, kernel_initializer=kernel_init, kernel_size=(3, 3), strides=(2, 2)):
    x = layers.Conv2D(filters, kernel_size, strides=strides, padding="same", kernel_initializer=kernel_initializer,
                      use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    if activation:
        x = activation(x)
    return x


def get_resnet_generator(filters=4, num_downsampling_blocks=2, num_upsample_blocks=2, name=None):
    img_input = layers.Input(shape=(16, 16, 3), name=name + "_img_input")
    x = layers.Conv2D(filters, (7, 7), padding="same", use_bias=False)(img_input)
    x = layers.Activation("relu")(x)
    for _ in range(num_downsampling_blocks):
        filters *= 2
        x = downsample(x, filters=filters, activation=layers.Activation("relu"))
    for _ in range(num_upsample_blocks):
        filters //= 2
        x = layers.Conv2DTranspose(filters, (3, 3), strides=(2, 2), padding="same")(x)
        x = layers.Activation("relu")(x)
    x = layers.Conv2D(3, (7, 7), padding="same")(x)
    x = layers.Activation("tanh")(x)
    return keras.models.Model(img_input, x, name=name)


def get_discriminator(filters=4, name=None):
    img_input = layers.Input(shape=(16, 16, 3), name=name + "_img_input")
    x = layers.Conv2D(filters, (4, 4), strides=(2, 2), padding="same")(img_input)
    x = layers.LeakyReLU(0.2)(x)
    num_filters = filters
    for num_downsample_block in range(3):
        num_filters *= 2
        if num_downsample_block < 2:
            x = downsample(x, filters=num_filters, activation=layers.LeakyReLU(0.2), kernel_size=(4, 4))
        else:
            x = downsample(x, filters=num_filters, activation=layers.LeakyReLU(0.2), kernel_size=(4, 4),
                           strides=(1, 1))
    x = layers.Conv2D(1, (4, 4), strides=(1, 1), padding="same")(x)
    return keras.models.Model(inputs=img_input, outputs=x, name=name)


gen_G = get_resnet_generator(name="generator_G")
gen_F = get_resnet_generator(name="generator_F")
disc_X = get_discriminator(name="discriminator_X")
disc_Y = get_discriminator(name="discriminator_Y")
'''


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def test_a_stepped_parameter_is_followed_from_the_value_the_file_gives_it():
    r = _tx(GENERATOR)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "class ResnetGenerator(nn.Module):" in out and "class Discriminator(nn.Module):" in out
    assert 'if filters != 4:\n            raise ValueError(f"translated for filters=4 only' in out
    assert "if num_downsampling_blocks != 2:" in out and "if num_upsample_blocks != 2:" in out
    # the loops written out: 4 → 8 → 16 going down, 16 → 8 → 4 coming up
    assert "nn.Conv2d(3, 4, (7, 7)" in out
    assert "nn.Conv2d(4, 8, (3, 3)" in out and "nn.Conv2d(8, 16, (3, 3)" in out
    assert "nn.ConvTranspose2d(16, 8, 3, stride=2)" in out and "nn.ConvTranspose2d(8, 4, 3, stride=2)" in out
    # the discriminator: num_filters = filters, stepped from the pinned 4 (8, 16, 32)
    assert "nn.Conv2d(4, 8, (4, 4)" in out and "nn.Conv2d(16, 32, (4, 4), stride=(1, 1)" in out
    assert "nn.Conv2d(4, 3, (7, 7)" in out
    info = [f for f in r.findings if f.code == "built-for-values"]
    assert any("filters=4, num_downsampling_blocks=2, num_upsample_blocks=2" in f.message for f in info)
    assert "tensorflow" not in out and "keras" not in out


def test_a_parameter_bound_again_otherwise_or_given_other_values_keeps_the_refusal():
    # filters = filters * 2 (an assignment, not a step) and a second call with another value: not pinned
    src = GENERATOR.replace('gen_F = get_resnet_generator(name="generator_F")',
                            'gen_F = get_resnet_generator(filters=8, name="generator_F")')
    msgs = _errors(_tx(src))
    assert any("`filters *= 2` inside a for statement" in m for m in msgs), msgs
    assert any("this functional model is left as written" in m for m in msgs)
    src = GENERATOR.replace("    x = layers.Activation(\"relu\")(x)\n    for _ in range(num_downsampling_blocks):",
                            "    x = layers.Activation(\"relu\")(x)\n    filters, extra = filters, 1\n"
                            "    for _ in range(num_downsampling_blocks):")
    msgs = _errors(_tx(src))
    assert any("this functional model is left as written" in m for m in msgs), msgs


def test_a_helper_default_bound_to_something_else_than_an_initializer_keeps_its_error():
    src = GENERATOR.replace("kernel_init = keras.initializers.RandomNormal(mean=0.0, stddev=0.02)",
                            "kernel_init = make_init()")
    msgs = _errors(_tx(src))
    # (the errors shown are those of the model as written; followed for the pinned values, the default refuses it)
    assert sum("this functional model is left as written" in m for m in msgs) == 2, msgs


def test_the_classes_raise_for_other_values_and_compute_what_keras_does(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    from runners import Warm
    out = _tx(GENERATOR).output
    ns: dict = {}
    exec(compile(out, "t.py", "exec"), ns)
    with pytest.raises(ValueError, match="translated for filters=4 only"):
        ns["get_resnet_generator"](filters=8, name="g")
    with pytest.raises(ValueError, match="translated for num_upsample_blocks=2 only"):
        ns["get_resnet_generator"](num_upsample_blocks=1, name="g")
    (tmp_path / "m.py").write_text(GENERATOR)
    (tmp_path / "t.py").write_text(out)
    for model, grads in (('get_resnet_generator(name="g")', 1 + 2 * 3 + 2 * 2 + 2),  # (conv1 without bias; conv + BN per block)
                         ('get_discriminator(name="d")', 2 + 3 * 3 + 2)):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[2,16,16,3]"],
                              checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
        assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
        assert len(cert["results"]["gradients"]) == grads, [e["name"] for e in cert["results"]["gradients"]]


def test_a_local_int_stepped_by_two_loops_goes_on_from_the_value_the_first_left():
    # not a parameter: filters = 4 in the builder, stepped up by one loop and down by the next (before: the second
    # loop got the first's value written over its own step, `16 //= 2`, an error)
    src = '''
from tensorflow import keras
from tensorflow.keras import layers


def build():
    inputs = keras.Input(shape=(8, 8, 3))
    filters = 4
    x = layers.Conv2D(filters, 3, padding="same")(inputs)
    for _ in range(2):
        filters *= 2
        x = layers.Conv2D(filters, 3, strides=2, padding="same")(x)
    for _ in range(2):
        filters //= 2
        x = layers.Conv2DTranspose(filters, 3, strides=2, padding="same")(x)
    x = layers.Conv2D(filters + 1, 1)(x)
    return keras.Model(inputs, x)
'''
    r = _tx(src)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "nn.LazyConv2d(8, 3, stride=2)" in out and "nn.Conv2d(8, 16, 3, stride=2)" in out
    assert "nn.ConvTranspose2d(16, 8, 3" in out and "nn.ConvTranspose2d(8, 4, 3" in out
    assert "nn.Conv2d(4, 4 + 1, 1)" in out
