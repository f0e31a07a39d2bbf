"""The Sequential pass: translated text, layer records, and whole models checked numerically.

Numerical checks build each Keras model in a TensorFlow subprocess (random weights, nonzero
BatchNorm statistics), translate the source with fwport, load the weights into the torch model in
a torch subprocess through the LayerRecords and the rules' weight maps, and compare the outputs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.rule import load_pack
from fwport.core.pipeline import translate_source

PACK = load_pack("tf2torch")


def tr(src: str, **opts):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "model.py", PACK, opts or None)


def codes(result, severity=None):
    return sorted(f.code for f in result.findings if f.code != "keras-version"
                  and (severity is None or f.severity is severity))


# --- translation --------------------------------------------------------------------------------

def test_list_form_keeps_lines_and_propagates_shapes():
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers


        def build_model():
            model = keras.Sequential([
                keras.Input(shape=(28, 28, 1)),  # MNIST
                layers.Conv2D(32, 3, activation="relu"),
                layers.MaxPooling2D(),
                layers.Flatten(),
                layers.Dense(10),
            ])
            return model
    ''')
    assert r.output == textwrap.dedent('''
        from torch import nn


        def build_model():
            model = nn.Sequential(
                # input: (batch, 1, 28, 28) channels-first  # MNIST
                nn.Conv2d(1, 32, 3), nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Flatten(),
                nn.Linear(5408, 10),
            )
            return model
    ''').lstrip("\n")
    assert codes(r) == ["layout-changed"]
    recs = [(l.scope, l.source, l.target, l.rule, l.variant, l.symbols) for l in r.layers]
    assert recs == [("build_model", "layers[0]", "0", "conv2d", None, {}),
                    ("build_model", "layers[3]", "4", "dense", "after-flatten", {"H": 13, "W": 13, "C": 32, "F": 5408})]
    (model,) = r.models
    assert (model.scope, model.input_shape, model.layout, model.output_layout) == \
        ("build_model", (28, 28, 1), "nchw", "same")


def test_add_form_module_level():
    r = tr('''
        from keras.models import Sequential
        from keras.layers import Dense, Dropout

        mlp = Sequential()
        mlp.add(Dense(64, activation="relu", input_dim=784))
        mlp.add(Dropout(0.2))
        mlp.add(Dense(10, activation="softmax"))
    ''')
    assert r.output == textwrap.dedent('''
        from torch import nn

        mlp = nn.Sequential()
        mlp.extend([nn.Linear(784, 64), nn.ReLU()])
        mlp.append(nn.Dropout(0.2))
        mlp.extend([nn.Linear(64, 10), nn.Softmax(dim=-1)])
    ''').lstrip("\n")
    assert [(l.scope, l.source, l.target) for l in r.layers] == [("mlp", "layers[0]", "0"), ("mlp", "layers[2]", "3")]
    assert r.models[0].layout == "same"


def test_input_added_becomes_a_comment_line():
    src = '''
        import keras

        model = keras.Sequential()
        model.add(keras.Input(shape=(8,)))
        model.add(keras.layers.Dense(4))
    '''
    r = tr(src)
    assert r.output.count("\n") == textwrap.dedent(src).lstrip("\n").count("\n")
    assert "# input: (batch, 8)" in r.output and "model.append(nn.Linear(8, 4))" in r.output


def test_dropped_list_brackets_leave_no_trailing_whitespace():
    src = """
        import keras


        def build():
            return keras.Sequential(
                [
                    keras.Input((4,)),
                    keras.layers.Dense(2),
                ]
            )
    """
    r = tr(src)
    # the brackets' lines go and the layers move out one level, as a PyTorch engineer writes it
    assert "    return nn.Sequential(\n        # input: (batch, 4)\n        nn.Linear(4, 2),\n    )\n" in r.output
    assert [line for line in r.output.splitlines() if line != line.rstrip()] == []
    # findings stay on the source's lines (the bracket lines are removed after they are located)
    r = tr(src.replace("keras.layers.Dense(2)", "keras.layers.Dense(2, kernel_regularizer=foo)"))
    assert [f.line for f in r.findings if f.severity.value == "error"] == [8]


@pytest.mark.parametrize("end", ["],\n)", "],\nname=\"mlp\",\n)", "], name=\"mlp\"\n)"])
def test_the_closing_parenthesis_keeps_its_column_whatever_followed_the_list(end):
    # `],` or `], name=...` (which torch's Sequential does not take) before the `)` of Black's layout
    src = ("import keras\n\nmodel = keras.Sequential(\n    [\n        keras.Input((4,)),\n        keras.layers.Dense(2),\n    "
           + end.replace("\nname", "\n    name") + "\n")
    r = tr(src)
    assert "model = nn.Sequential(\n    # input: (batch, 4)\n    nn.Linear(4, 2),\n)\n" in r.output, r.output


def test_sequential_in_class_prefixes_paths():
    r = tr('''
        import tensorflow as tf

        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.head = tf.keras.Sequential([tf.keras.layers.Dense(8, input_shape=(4,)), tf.keras.layers.Dense(2)])
    ''')
    assert "nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))" in r.output
    assert [(l.scope, l.source, l.target) for l in r.layers] == [("Net", "head.layers[0]", "head.0"),
                                                                 ("Net", "head.layers[1]", "head.1")]
    assert r.models[0].scope == "Net.head"


def test_stride_2_same_padding_uses_the_input_size():
    def out(h, w):
        return tr(f'''
            from tensorflow.keras import layers, Sequential
            m = Sequential([layers.Conv2D(4, 3, strides=2, padding="same", input_shape=({h}, {w}, 2))])
        ''').output
    assert "nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(2, 4, 3, stride=2))" in out(8, 8)
    assert "nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1))" in out(9, 9)
    assert "nn.ZeroPad2d((1, 1, 0, 1))" in out(8, 9)


def test_unknown_input_size_gives_lazy_modules_or_errors():
    r = tr('''
        from tensorflow.keras import layers, Sequential
        m = Sequential([layers.Conv2D(4, 3), layers.Conv2D(4, 3, strides=2, padding="same"), layers.Flatten(), layers.Dense(3)])
    ''')
    assert "nn.LazyConv2d(4, 3)" in r.output
    # the strided 'same' conv pads at run time (its padding depends on the size); the Dense after the
    # Flatten cannot reorder its kernel rows without the sizes, so the map is flattened in Keras's order
    # (tests/test_layout_params.py runs this model against Keras)
    assert "SamePad2d(3, 2), nn.Conv2d(4, 4, 3, stride=2)" in r.output and "class SamePad2d(nn.Module):" in r.output
    assert codes(r, Severity.ERROR) == []
    assert "ChannelsLastReshape((-1,)), nn.LazyLinear(3)" in r.output


def test_channels_first_chain_refuses_what_it_cannot_remap():
    r = tr('''
        from tensorflow.keras import layers, Sequential
        m = Sequential([layers.Input((8, 8, 3)), layers.Conv2D(4, 3),
                        layers.EinsumDense("abcd,de->abce", output_shape=(None, None, 5))])
    ''')
    # (its equation names Keras's channels-last axes; a Dense there is a 1x1 convolution: test_layer_gaps19)
    assert codes(r, Severity.ERROR) == ["unsupported-construct"]
    assert "layers.EinsumDense(" in r.output and "nn.LazyLinear" not in r.output


def test_softmax_and_batchnorm_axes_are_remapped():
    r = tr('''
        from tensorflow.keras import layers, Sequential
        m = Sequential([layers.Input((6, 5, 3)), layers.Conv2D(4, 1), layers.BatchNormalization(axis=-1),
                        layers.Softmax(axis=-1), layers.Activation("softmax")])
    ''')
    assert "nn.BatchNorm2d(4, momentum=0.01, eps=0.001)" in r.output
    assert r.output.count("nn.Softmax(dim=1)") == 2


def _errors_at(r, line_text: str) -> list[str]:
    """Error codes located on the (source) line that holds ``line_text``."""
    lines = r.source.splitlines()
    at = {i + 1 for i, l in enumerate(lines) if line_text in l}
    return sorted(f.code for f in r.findings if f.severity is Severity.ERROR and f.line in at)


def test_add_in_a_branch_leaves_the_whole_model_with_errors():
    r = tr('''
        import keras
        from keras import layers

        def build(use_dropout):
            model = keras.Sequential()
            model.add(layers.Dense(8, input_shape=(4,)))
            if use_dropout:
                model.add(layers.Dropout(0.5))
            model.add(layers.Dense(2))
            return model
    ''')
    assert _errors_at(r, "keras.Sequential()") == ["unsupported-construct"]
    assert _errors_at(r, "layers.Dropout(0.5)") == ["unsupported-construct"]
    # nothing of the model was translated: no torch module next to an .add, no .append on a Keras model
    assert "torch" not in r.output and ".append(" not in r.output
    assert "model.add(layers.Dense(2))" in r.output
    assert not r.layers and not r.models


def test_add_in_a_loop_and_after_a_helper_are_refused():
    r = tr('''
        import keras
        from keras import layers

        def block(m, n):
            m.add(layers.Dense(n))

        def build():
            model = keras.Sequential()
            model.add(layers.Dense(8, input_shape=(4,)))
            block(model, 5)
            model.add(layers.Dense(2))
            return model

        def build2():
            model = keras.Sequential([layers.Input((3,))])
            for n in (4, 5):
                model.add(layers.Dense(n))
            return model
    ''')
    assert _errors_at(r, "m.add(layers.Dense(n))") == ["unsupported-construct"]  # the helper's own add
    assert _errors_at(r, "model.add(layers.Dense(2))") == ["unsupported-construct"]
    assert _errors_at(r, "model.add(layers.Dense(n))") == ["unsupported-construct"]
    assert "torch" not in r.output and not r.layers


def test_add_in_a_loop_over_a_constant_range_is_followed_where_each_pass_is_alike():
    """for _ in range(n) with n known: the layers are followed n times and the loop stays (model.append in it);
    a layer whose translation changes between passes (its input size does) is an error on that layer, not a
    guess; a loop reading its variable, or over a range not known here, stays refused."""
    r = tr('''
        import keras
        from keras import layers

        N = 2

        def ok():
            model = keras.Sequential([layers.Input((4,)), layers.Dense(8)])
            for _ in range(N):
                model.add(layers.Dense(8))
            return model

        def changes():
            model = keras.Sequential([layers.Input((4,))])
            for _ in range(2):
                model.add(layers.Dense(8))
            return model

        def reads_the_variable():
            model = keras.Sequential([layers.Input((4,))])
            for i in range(2):
                model.add(layers.Dense(8 + i))
            return model

        def unknown(n):
            model = keras.Sequential([layers.Input((4,))])
            for _ in range(n):
                model.add(layers.Dense(8))
            return model
    ''')
    assert "    for _ in range(N):\n        model.append(nn.Linear(8, 8))" in r.output
    assert [(rec.scope, rec.source, rec.target) for rec in r.layers if rec.scope == "ok"] == [
        ("ok", "layers[0]", "0"), ("ok", "layers[1]", "1"), ("ok", "layers[2]", "2")]
    errors = sorted((f.line, f.message[:60]) for f in r.findings if f.severity is Severity.ERROR)
    assert [line for line, _ in errors] == [15, 19, 21, 25, 27], errors
    assert "added in a loop translates differently on its passes (nn.Linear(4, 8), then nn.Linear(8, 8)" in \
        next(f.message for f in r.findings if f.line == 15)


def test_other_uses_of_the_model_do_not_end_the_chain():
    # a name that merely contains the model's name, a print, a rebinding of another name: the adds
    # after them are followed, with shapes
    r = tr('''
        import keras
        from keras import layers

        def build(model_dir):
            model = keras.Sequential()
            model.add(layers.Dense(8, input_shape=(4,)))
            model_dir = model_dir + "/x"
            print(model)
            model.add(MyBlock())
            model.add(layers.Dense(3))
            return model
    ''')
    assert "model.append(nn.Linear(4, 8))" in r.output
    assert "model.append(MyBlock())" in r.output  # not a Keras layer: appended as it is
    assert "model.append(nn.LazyLinear(3))" in r.output  # after an unknown block the size is unknown
    assert ".add(" not in r.output and codes(r, Severity.ERROR) == []
    assert [(l.source, l.target) for l in r.layers] == [("layers[0]", "0"), ("layers[2]", "2")]


def test_rebinding_ends_the_chain_and_a_new_one_starts():
    r = tr('''
        import keras
        from keras import layers

        model = keras.Sequential()
        model.add(layers.Dense(8, input_shape=(4,)))
        model = keras.Sequential()
        model.add(layers.Dense(2, input_shape=(3,)))
    ''')
    assert "model.append(nn.Linear(4, 8))" in r.output and "model.append(nn.Linear(3, 2))" in r.output
    assert codes(r, Severity.ERROR) == []


def test_shadowing_parameter_is_another_model():
    r = tr('''
        import keras
        from keras import layers

        model = keras.Sequential()
        model.add(layers.Dense(8, input_shape=(4,)))

        def extend(model):
            return model

        model.add(layers.Dense(2))
    ''')
    assert "model.append(nn.Linear(8, 2))" in r.output and codes(r, Severity.ERROR) == []


def test_reshape_to_a_feature_map_in_a_channels_first_chain():
    r = tr(CASES["generator"][0])
    assert "nn.Linear(6, 5 * 4 * 3), nn.ReLU()," in r.output
    assert "nn.Unflatten(1, (3, 5, 4))," in r.output  # channels-first order
    dense = r.layers[0]
    assert (dense.source, dense.variant, dense.symbols) == ("layers[0]", "before-unflatten",
                                                            {"I": 6, "H": 5, "W": 4, "C": 3})
    (model,) = r.models
    assert (model.layout, model.output_layout) == ("same", "nchw")
    assert codes(r, Severity.ERROR) == []


def test_reshape_no_weight_order_can_absorb_reshapes_in_channels_last_order():
    # once refused; now the ChannelsLastReshape helper (numerics: tests/test_conv_models.py)
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers

        a = keras.Sequential([keras.Input((6,)), layers.BatchNormalization(), layers.Reshape((3, 2)),
                              layers.Conv1D(2, 1)])
        b = keras.Sequential([keras.Input((4, 4, 2)), layers.Conv2D(2, 1), layers.Reshape((2, 16))])
        c = keras.Sequential([keras.Input((6,)), layers.Flatten(), layers.Reshape((2, 3)), layers.Conv1D(2, 1)])
    ''')
    assert codes(r, Severity.ERROR) == []
    assert "ChannelsLastReshape((3, 2))," in r.output  # after BatchNormalization
    assert "ChannelsLastReshape((2, 16))" in r.output  # map to map
    assert "ChannelsLastReshape((2, 3))," in r.output  # not after a Dense
    assert "nn.Unflatten" not in r.output


def test_input_shapes_spelled_with_names_keep_what_is_known():
    r = tr('''
        import keras
        from keras import layers

        def build(channels, input_dim, input_shape):
            a = keras.Sequential([
                keras.Input(shape=(14, 12, channels)),
                layers.Conv2D(8, 3), layers.Flatten(),
                layers.Dense(2)])
            b = keras.Sequential(name="mlp")
            b.add(layers.Dense(32, input_dim=input_dim))
            b.add(layers.BatchNormalization())
            c = keras.Sequential([layers.InputLayer(shape=input_shape), layers.Dense(4)])
            return a, b, c
    ''')
    out = r.output
    # the input declaration is removed (it computes nothing); its sizes that are literals are used
    assert "keras.Input" not in out and "InputLayer" not in out
    assert "# input: (batch, channels, 14, 12) channels-first" in out
    # a size spelled with a parameter is written with it (exact at any value the caller passes)
    assert "nn.Conv2d(channels, 8, 3)" in out
    # the conv's output size does not depend on the input channels: the Dense after the
    # Flatten is concrete, with its rows reordered
    assert "nn.Linear(960, 2)" in out
    assert [(l.source, l.variant, l.symbols) for l in r.layers if l.scope == "build.a"] == [
        ("layers[0]", None, {}), ("layers[2]", "after-flatten", {"H": 12, "W": 10, "C": 8, "F": 960})]
    # input_dim=<name> is a 1-D input: an MLP, not a channels-first model
    assert "b.append(nn.Linear(input_dim, 32))" in out and "b.append(nn.BatchNorm1d(32, momentum=0.01, eps=0.001))" in out
    assert "nn.LazyLinear(4)" in out  # shape=input_shape: rank unknown, and a Dense does not imply one
    assert {m.scope: m.layout for m in r.models} == {"build.a": "nchw", "build.b": "same", "build.c": "same"}


def test_sizes_written_with_names():
    r = tr(CASES["names_mlp"][0] + CASES["names_image"][0].split("from tensorflow.keras import layers\n", 1)[1])
    out = r.output
    # module constants are followed and keep their names; parameters are symbols, never their defaults
    assert textwrap.dedent('''
        def build(hidden=8, classes=3):
            return nn.Sequential(
                nn.Linear(NUM_FEATURES, hidden), nn.ReLU(),
                nn.Linear(hidden, hidden // 2),
                nn.BatchNorm1d(hidden // 2, momentum=0.01, eps=0.001),
                nn.Linear(hidden // 2, classes),
            )
    ''') in out
    assert "# input: (batch, channels, size, size + 1) channels-first" in out
    assert "nn.Conv2d(channels, 4, 3)," in out
    # 'same' pooling of a size of either parity: all the padding is after, exactly ceil_mode
    assert "nn.MaxPool2d(2, ceil_mode=True)," in out
    assert "nn.Linear(4, H)," in out
    assert codes(r, Severity.ERROR) == []
    # records and model infos hold ints only
    infos = {m.scope: m.input_shape for m in r.models}
    assert infos == {"build": (6,), "build_image": (None, None, None)}


def test_sizes_that_need_numbers_are_refused():
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers

        input_shape = (12, 10, 3)

        def build(size, classes=4):
            a = keras.Sequential([keras.Input((size, size, 3)), layers.Conv2D(4, 3, strides=2, padding="same")])
            b = keras.Sequential([keras.Input(shape=input_shape), layers.Conv2D(8, 3), layers.Flatten(),
                                  layers.Dense(classes)])
            c = keras.Sequential([keras.Input((size, 5, 3)), layers.Conv2D(8, 3), layers.Flatten(), layers.Dense(4)])
            return a, b, c
    ''')
    # TF's pads depend on the parity of `size`: computed at each call
    assert _errors_at(r, "layers.Conv2D(4, 3, strides=2") == []
    assert "nn.Sequential(SamePad2d(3, 2), nn.Conv2d(3, 4, 3, stride=2))" in r.output
    assert any("even or odd" in f.message for f in r.findings if f.code == "shape-unknown")
    assert _errors_at(r, "layers.Dense(classes)") == []  # the weight map needs H, W, C only, not the units
    assert "nn.Linear(640, classes)" in r.output
    # H as a name: the map is flattened in Keras's (h, w, c) order instead, and the Dense keeps its kernel
    assert _errors_at(r, "layers.Dense(4)") == []
    assert "ChannelsLastReshape((-1,)), nn.LazyLinear(4)" in r.output
    assert all(isinstance(v, int) for rec in r.layers for v in rec.symbols.values())


def test_parameter_shape_of_a_rank_the_first_layer_implies():
    r = tr('''
        import tf_keras
        from tf_keras.layers import Conv2D, BatchNormalization, GlobalAveragePooling2D, Dense

        def tagger(num_tags=6, input_shape=(32, 24, 3)):
            return tf_keras.models.Sequential([
                Conv2D(16, (3, 3), padding="same", input_shape=input_shape),
                BatchNormalization(),
                GlobalAveragePooling2D(),
                Dense(num_tags),
            ])
    ''')
    assert "nn.Conv2d(input_shape[-1], 16, (3, 3), padding=\"same\")," in r.output
    assert "nn.BatchNorm2d(16, momentum=0.01, eps=0.001)," in r.output
    assert "nn.Linear(16, num_tags)," in r.output
    assert codes(r, Severity.ERROR) == []


def test_rebound_names_are_not_sizes():
    r = tr('''
        import keras
        from keras import layers

        N = 4
        M = 5
        M = 6

        def build(d):
            d = d * 2
            global N
            return keras.Sequential([keras.Input((d,)), layers.Dense(3), layers.Dense(M), layers.Dense(N)])
    ''')
    # d is rebound (its value at the Input is not the parameter's), M is bound twice, N is global
    assert "nn.LazyLinear(3)" in r.output and "nn.Linear(3, M)" in r.output and "nn.LazyLinear(N)" in r.output


def test_flatten_order_is_carried_through_elementwise_layers():
    r = tr(CASES["flatten_then_elementwise"][0])
    assert codes(r, Severity.ERROR) == []
    recs = [(l.source, l.target, l.rule, l.variant) for l in r.layers]
    assert recs == [("layers[0]", "0", "conv2d", None),
                    ("layers[3]", "3", "batch-normalization", "after-flatten"),
                    ("layers[5]", "5", "dense", "after-flatten")]
    assert r.layers[-1].symbols == {"H": 4, "W": 3, "C": 3, "F": 36}


def test_a_layer_after_flatten_that_would_see_another_order_is_refused():
    r = tr(CASES["flatten_then_elementwise"][0].replace('layers.Dropout(0.5)', 'layers.LayerNormalization()'))
    assert "unsupported-construct" in codes(r, Severity.ERROR)
    assert "layers.LayerNormalization()" in r.output
    assert not [l for l in r.layers if l.rule == "dense"]  # no record for a Dense that lost the order


@pytest.mark.parametrize("src", [
    """
    import keras

    model = keras.Sequential([keras.layers.Embedding(10, 4), keras.layers.Conv1D(3, 2)])
    """,
    """
    import keras

    model = keras.Sequential()
    model.add(keras.layers.Embedding(10, 4))
    model.add(keras.layers.Conv1D(3, 2))
    """,
])
def test_layers_kept_in_a_torch_container_stay_refused_on_a_second_translation(src):
    # (an Embedding whose ids' rank is unknown: its Permute to channels-first cannot be written; with keras.Input it
    # is, test_sequential_sequence_permutes.py)
    once = tr(src)
    assert "keras.layers.Embedding(10, 4)" in once.output and codes(once, Severity.ERROR) == ["unsupported-construct"]
    twice = translate_source(once.output, "model.py", PACK)
    assert twice.output == once.output  # not nn.Embedding before a conv on channels-last data
    err = lambda r: [(f.code, f.message) for f in r.findings if f.severity is Severity.ERROR]
    assert err(twice) == err(once)


_UNPACKED = """
from tensorflow import keras
from tensorflow.keras import layers

IMG_ROWS, IMG_COLS = 6, 4
(CHANNELS, FILTERS), CLASSES = [2, 3], 5
{rebind}

def build():
    return keras.Sequential([
        keras.Input((IMG_ROWS, IMG_COLS, CHANNELS)),
        layers.Conv2D(FILTERS, 3),
        layers.Flatten(),
        layers.Dense(CLASSES),
    ])
"""


def test_tuple_unpacked_module_constants_are_sizes():
    r = tr(_UNPACKED.format(rebind=""))
    assert codes(r, Severity.ERROR) == []
    assert "nn.Conv2d(CHANNELS, FILTERS, 3)" in r.output and "nn.Linear(24, CLASSES)" in r.output
    assert r.layers[-1].variant == "after-flatten"
    assert r.layers[-1].symbols == {"H": 4, "W": 2, "C": 3, "F": 24}
    assert r.models[0].input_shape == (6, 4, 2)


def test_tuple_unpacked_constants_rebound_elsewhere_are_not_sizes():
    r = tr(_UNPACKED.format(rebind="IMG_ROWS = 8"))
    # H unknown: no reordered Dense (its map needs H as a number); the map is flattened in Keras's order
    assert codes(r, Severity.ERROR) == [] and "ChannelsLastReshape((-1,))" in r.output
    assert [l.variant for l in r.layers if l.rule == "dense"] == [None]


def test_translation_is_a_fixpoint():
    src = textwrap.dedent(CASES["convnet_even"][0])
    once = translate_source(src, "m.py", PACK).output
    assert translate_source(once, "m.py", PACK).output == once


def test_a_refused_member_is_a_fixpoint_without_reports_of_what_its_arguments_hold():
    # the Sequential pass refuses the Dense whole (activity_regularizer=); translated again, the Dense inside
    # nn.Sequential is refused as whole again, without a no-rule error for the regularizer it holds
    src = textwrap.dedent('''
        from tensorflow import keras
        from tensorflow.keras import regularizers

        model = keras.Sequential([
            keras.Input(shape=(4,)),
            keras.layers.Dense(8, activation="relu", activity_regularizer=regularizers.l2(0.01)),
            keras.layers.Dense(1),
        ])
    ''')
    once = translate_source(src, "m.py", PACK)
    twice = translate_source(once.output, "m.py", PACK)
    assert "unsupported-argument" in {f.code for f in once.findings}, once.findings
    assert twice.output == once.output
    assert "no-rule" not in {f.code for f in twice.findings}, twice.findings


# --- numerical equivalence --------------------------------------------------------------------------

CASES: dict[str, tuple[str, str, tuple]] = {
    "mlp": ('''
from tensorflow import keras
from tensorflow.keras import layers

def build():
    return keras.Sequential([
        keras.Input(shape=(20,)),
        layers.Dense(32, activation="relu"),
        layers.Dense(16),
        layers.LeakyReLU(),
        layers.Dense(12, activation="elu"),
        layers.ELU(alpha=0.7),
        layers.PReLU(),
        layers.ReLU(max_value=1.5),
        layers.Dense(5),
        layers.Softmax(),
    ])
''', "build", (20,)),
    "convnet_even": ('''
from tensorflow import keras
from tensorflow.keras import layers

def build():
    model = keras.Sequential()
    model.add(keras.Input(shape=(12, 10, 3)))
    model.add(layers.Conv2D(8, (3, 2), activation="relu"))
    model.add(layers.BatchNormalization())
    model.add(layers.Conv2D(6, 3, strides=2, padding="same"))
    model.add(layers.MaxPooling2D(2, padding="same"))
    model.add(layers.Flatten())
    model.add(layers.Dense(7))
    return model
''', "build", (12, 10, 3)),
    "convnet_odd": ('''
from tensorflow import keras
from tensorflow.keras import layers

def build():
    return keras.Sequential([
        layers.Conv2D(5, 3, strides=2, padding="same", input_shape=(13, 11, 2)),
        layers.BatchNormalization(momentum=0.9, epsilon=1e-4),
        layers.Activation("softmax"),
        layers.ZeroPadding2D(((1, 0), (2, 1))),
        layers.AveragePooling2D(3, strides=1, padding="same"),
        layers.UpSampling2D(),
        layers.GlobalAveragePooling2D(),
        layers.Dense(4),
    ])
''', "build", (13, 11, 2)),
    "causal": ('''
from tensorflow import keras
from tensorflow.keras import layers

def build():
    return keras.Sequential([
        keras.Input(shape=(17, 4)),
        layers.Conv1D(6, 3, padding="causal", dilation_rate=2, activation="relu"),
        layers.Conv1D(5, 4, strides=2, padding="same"),
        layers.MaxPooling1D(2),
        layers.Flatten(),
        layers.Dense(3),
    ])
''', "build", (17, 4)),
    # a generator: features → Reshape to a feature map, exact in NCHW with the Dense's outputs reordered
    "generator": ('''
from tensorflow import keras
from tensorflow.keras import layers

def build():
    return keras.Sequential([
        keras.Input(shape=(6,)),
        layers.Dense(5 * 4 * 3, activation="relu"),
        layers.Dropout(0.3),
        layers.Reshape((5, 4, 3)),
        layers.Conv2D(2, 3, padding="same"),
        layers.UpSampling2D(),
        layers.Conv2D(3, (2, 3)),
    ])
''', "build", (6,)),
    # to a (steps, channels) map and back to features through Reshape((-1,))
    "decoder1d": ('''
from tensorflow import keras
from tensorflow.keras import layers

def build():
    model = keras.Sequential()
    model.add(keras.Input(shape=(5,)))
    model.add(layers.Dense(21))
    model.add(layers.Reshape((7, -1)))
    model.add(layers.Conv1D(4, 3, padding="same", activation="tanh"))
    model.add(layers.Reshape((-1,)))
    model.add(layers.Dense(2))
    return model
''', "build", (5,)),
    # Flatten, then layers that keep the (c, h, w) feature order: the Dense still reorders its rows,
    # the BatchNormalization reorders its per-feature parameters
    "flatten_then_elementwise": ('''
from tensorflow import keras
from tensorflow.keras import layers

def build():
    return keras.Sequential([
        keras.Input((6, 5, 4)),
        layers.Conv2D(3, 3),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.BatchNormalization(),
        layers.Activation("relu"),
        layers.Dense(2),
    ])
''', "build", (6, 5, 4)),
}

# sizes written with names: module constants and builder parameters (the builders run with defaults)
CASES["names_mlp"] = ('''
from tensorflow import keras
from tensorflow.keras import layers

NUM_FEATURES = 6


def build(hidden=8, classes=3):
    return keras.Sequential([
        layers.Dense(hidden, activation="relu", input_shape=(NUM_FEATURES,)),
        layers.Dense(hidden // 2),
        layers.BatchNormalization(),
        layers.Dense(classes),
    ])
''', "build", (6,))
CASES["names_image"] = ('''
from tensorflow import keras
from tensorflow.keras import layers

H = 2 * 3


def build_image(size=9, channels=2):
    return keras.Sequential([
        keras.Input((size, size + 1, channels)),
        layers.Conv2D(4, 3),
        layers.MaxPooling2D(2, padding="same"),
        layers.ZeroPadding2D(1),
        layers.UpSampling2D(),
        layers.GlobalMaxPooling2D(),
        layers.Dense(H),
    ])
''', "build_image", (9, 10, 2))
CASES["names_tokens"] = ('''
from tensorflow.keras import Sequential, layers


def build_tokens(seq_len=5, dim=4, mlp_dim=7):
    return Sequential([
        layers.Input((seq_len, dim)),
        layers.LayerNormalization(epsilon=1e-6),
        layers.Dense(mlp_dim),
        layers.Activation("gelu"),
        layers.Dense(dim),
        layers.LayerNormalization(),
        layers.Softmax(),
    ])
''', "build_tokens", (5, 4))

# model.add in a loop over a constant range (keras-io addition_rnn's stacked decoder): followed LAYERS times
CASES["add_in_a_constant_loop"] = ('''
from tensorflow import keras
from tensorflow.keras import layers

LAYERS = 3


def build_stack():
    model = keras.Sequential()
    model.add(keras.Input(shape=(5,)))
    model.add(layers.Dense(6))
    for _ in range(LAYERS):
        model.add(layers.Dense(6, activation="tanh"))
        model.add(layers.Dropout(0.5))
    for _ in range(1):
        model.add(layers.Dense(2))
    return model
''', "build_stack", (5,))

_TF_SCRIPT = r'''
import json, sys
import numpy as np
import keras
cases = json.loads(sys.argv[1]); out = sys.argv[2]
arrays = {}
for name, (src, builder, shape) in cases.items():
    ns = {}
    exec(src, ns)
    model = ns[builder]()
    rng = np.random.default_rng(0)
    for li, layer in enumerate(model.layers):
        for v in layer.weights:
            vname = v.name.split("/")[-1].split(":")[0]
            if vname == "moving_variance":
                val = rng.uniform(0.5, 2.0, v.shape)
            else:
                val = rng.normal(0, 0.5, v.shape)
            v.assign(val.astype("float32"))
            arrays[f"{name}/layers[{li}].{vname}"] = val.astype("float32")
    x = rng.normal(0, 1, (3, *shape)).astype("float32")
    arrays[f"{name}/x"] = x
    arrays[f"{name}/y"] = np.asarray(model(x, training=False))
np.savez(out, **arrays)
'''

_TORCH_SCRIPT = r'''
import json, sys
import numpy as np
import torch
spec = json.loads(sys.argv[1]); params = np.load(sys.argv[2]); out = sys.argv[3]
results = {}
for name, (src, builder, nchw_in, nchw_out) in spec.items():
    ns = {}
    exec(src, ns)
    model = ns[builder]().eval()
    x = torch.from_numpy(params[f"{name}/x"])
    if nchw_in:
        x = x.movedim(-1, 1)
    with torch.no_grad():
        model(x)  # materialise lazy modules before loading
        for key in params.files:
            if key.startswith(name + "/p:"):
                path = key[len(name) + 3:]
                mod_path, attr = path.rsplit(".", 1)
                t = getattr(model.get_submodule(mod_path), attr)
                assert tuple(t.shape) == params[key].shape, (key, tuple(t.shape), params[key].shape)
                t.copy_(torch.from_numpy(params[key]))
        y = model(x)
    if nchw_out:
        y = y.movedim(1, -1)
    results[name] = y.numpy()
np.savez(out, **results)
'''


def apply_ops(arr: np.ndarray, ops, symbols: dict) -> np.ndarray:
    """The rules' closed vocabulary of weight operations, in numpy (the test's own loader)."""
    for op in ops:
        args = [symbols[p] if p in symbols else int(p) for p in op.params]
        if op.op == "copy":
            arr = arr.copy()
        elif op.op in ("transpose", "permute"):
            arr = np.transpose(arr, args)
        elif op.op == "reshape":
            arr = arr.reshape(args)
        else:
            raise NotImplementedError(op.op)
    return np.ascontiguousarray(arr)


def _run(script: str, *args: str, legacy: bool = False) -> None:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def numerics(tmp_path_factory):
    if find_spec("tensorflow") is None or find_spec("torch") is None:
        pytest.skip("needs tensorflow and torch installed")
    tmp = tmp_path_factory.mktemp("seq")
    tf_out = tmp / "tf.npz"
    _run(_TF_SCRIPT, json.dumps({k: [textwrap.dedent(s), b, list(sh)] for k, (s, b, sh) in CASES.items()}), str(tf_out))
    keras_arrays = np.load(tf_out)
    torch_params: dict[str, np.ndarray] = {}
    spec = {}
    for name, (src, builder, _) in CASES.items():
        r = translate_source(textwrap.dedent(src), f"{name}.py", PACK)
        assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.render() for f in r.findings]
        info = next(m for m in r.models if m.scope == builder)
        spec[name] = [r.output, builder, info.layout == "nchw", info.output_layout == "nchw"]
        torch_params[f"{name}/x"] = keras_arrays[f"{name}/x"]
        for rec in r.layers:
            rule = PACK.rules[rec.rule]
            for w in rule.weights_for(rec.variant):
                key = f"{name}/{rec.source}.{w.source}"
                if key not in keras_arrays.files:
                    continue  # e.g. no bias with use_bias=False
                torch_params[f"{name}/p:{rec.target}.{w.target}"] = apply_ops(keras_arrays[key], w.ops, rec.symbols)
        # every Keras variable was moved by some record
        moved = {f"{name}/{rec.source}.{w.source}" for rec in r.layers for w in PACK.rules[rec.rule].weights}
        assert {k for k in keras_arrays.files if k.startswith(name + "/layers")} <= moved
    params_file = tmp / "params.npz"
    np.savez(params_file, **torch_params)
    torch_out = tmp / "torch.npz"
    _run(_TORCH_SCRIPT, json.dumps(spec), str(params_file), str(torch_out))
    return keras_arrays, np.load(torch_out)


@pytest.mark.parametrize("name", list(CASES))
def test_numerically_equal(numerics, name):
    keras_arrays, torch_arrays = numerics
    want, got = keras_arrays[f"{name}/y"], torch_arrays[name]
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("tail", ["layers.Flatten()", "layers.Flatten(), layers.Dropout(0.5), layers.ReLU()",
                                  "layers.Flatten(), layers.BatchNormalization()", "layers.Reshape((36,))"])
def test_a_sequential_ending_with_a_channels_first_flatten_gives_keras_features_in_their_order(tail):
    """`Sequential([Input((6, 5, 3)), Conv2D(3, 3), Flatten()])`: no Dense after the Flatten takes Keras's weights in
    torch's order, so nn.Flatten() would give Keras's features in (c, h, w) order (it had a flatten-order warning).
    A Flatten (or Reshape to features) followed only by layers that keep the features apart, then the end, is the
    ChannelsLastReshape helper: the channels moved last, flattened in Keras's (h, w, c) order, exactly."""
    from conv_numerics import assert_close, compare_model
    src = textwrap.dedent(f'''
        from tensorflow import keras
        from tensorflow.keras import layers


        def build():
            return keras.Sequential([keras.Input(shape=(6, 5, 3)), layers.Conv2D(3, 3), {tail}])
    ''').lstrip("\\n")
    r = tr(src)
    assert "flatten-order" not in codes(r) and not codes(r, Severity.ERROR)
    assert "ChannelsLastReshape(" in r.output and "nn.Flatten()" not in r.output
    k, t = compare_model(src, r.output, "build()", (2, 6, 5, 3), layout_in="nchw", layout_out="same")
    assert k.shape == t.shape == (2, 36)
    assert_close(k, t, rtol=1e-5)


def test_a_final_flatten_with_data_format_channels_first_gives_keras_features_in_their_order():
    """Keras's Flatten(data_format="channels_first") moves the channels last before flattening: at the end of a
    Sequential (no Dense to reorder its kernel rows) it is ChannelsLastReshape((-1,)), exactly (nn.Flatten() keeps
    the (c, h, w) order)."""
    from conv_numerics import assert_close, compare_model
    src = textwrap.dedent('''
        from tensorflow import keras
        from tensorflow.keras import layers


        def build():
            return keras.Sequential([keras.Input(shape=(3, 6, 5)), layers.Flatten(data_format="channels_first"),
                                     layers.ReLU()])
    ''').lstrip("\\n")
    r = tr(src)
    assert "ChannelsLastReshape((-1,))" in r.output and not codes(r, Severity.ERROR)
    k, t = compare_model(src, r.output, "build()", (2, 3, 6, 5))
    assert k.shape == t.shape == (2, 90)
    assert_close(k, t, rtol=1e-5)


def test_a_channels_first_flatten_before_a_dense_stays_nn_flatten():
    """A Dense after the Flatten reorders its kernel rows (exact already): the Flatten stays nn.Flatten()."""
    src = textwrap.dedent('''
        from tensorflow import keras
        from tensorflow.keras import layers


        def build():
            return keras.Sequential([keras.Input(shape=(6, 5, 3)), layers.Conv2D(3, 3), layers.Flatten(),
                                     layers.Dropout(0.5), layers.Dense(2)])
    ''').lstrip("\\n")
    r = tr(src)
    assert "nn.Flatten()" in r.output and "ChannelsLastReshape" not in r.output and not codes(r, Severity.ERROR)
