"""The TensorFlow/Keras → PyTorch pack: ``fwport tf2torch``.

Where things are:
  __init__.py     DIRECTION: what the core asks of this pack (names, planners, spellings, codes...)
  passes/         the structural passes (planners), in order: model_api, sequential, subclass, decorators
  layer.py        shape functions of Keras layers (Dense, Conv*, pooling, norms...) + keras activations
  ops.py          call transforms of tf.* / keras.ops.* (matmul flags, cast, reductions...)
  image.py        call transforms and written-out helpers of tf.image.* (flips, crops, dtype), band_part, eye
  values.py       value transforms of single arguments (one-minus, dim, keep...)
  dims.py         sizes written with names (module constants, builder parameters)
  registry.py     this pack's table of named transforms
  ../../../rules/tf2torch/   the data rules, one per file
"""
from __future__ import annotations

import re

from fwport.core.direction import CliOption, Direction, Requirements, Spelling, Trigger
from fwport.core.names import SourceNames
from fwport.packs.tf2torch import attention, data, image, kerashub, layer, ops, optim, utilities, values  # noqa: F401  (they register the named transforms)
from fwport.packs.tf2torch import trace
from fwport.packs.tf2torch.tf1 import refuse_graph_code
from fwport.packs.tf2torch.guidance import GUIDANCE
from fwport.packs.tf2torch.passes import FINISH, PLANNERS
from fwport.packs.tf2torch.compat_v1 import CANONICAL as V1_SAME_OBJECT
from fwport.packs.tf2torch.registry import TRANSFORMS

#: Top-level packages that make a file a TensorFlow/Keras source.
SOURCE_ROOTS = ("tensorflow", "keras", "tf_keras")
#: packages built on TensorFlow or Keras: a file that imports one still needs TensorFlow where it uses it, so
#: their names are translated by rules or reported (no-rule / residue, with GUIDANCE), never passed through
SOURCE_MODULES = ("tensorflow_addons", "tensorflow_hub", "tensorflow_datasets", "tensorflow_probability",
                  "tensorflow_text", "tensorflow_io", "tensorflow_model_optimization", "tensorflow_lite_support",
                  "tensorflow_serving", "tensorflow_decision_forests", "tensorflow_recommenders",
                  "tensorflow_similarity", "tensorflow_federated", "tf_agents", "keras_cv", "keras_nlp", "keras_hub")

# Longest prefix first: the canonical spelling of each source namespace.
_CANON_PREFIXES: tuple[tuple[str, str], ...] = (
    ("tensorflow.python.keras.", "keras."),
    ("tensorflow.compat.v2.keras.", "keras."),
    # TF 1's tf.keras (tf.compat.v1.keras) is Keras 2's, but for the recurrent layers of _V1_RECURRENT
    ("tensorflow.compat.v1.keras.", "keras."),
    ("tensorflow.compat.v2.", "tensorflow."),
    ("tensorflow.keras.", "keras."),
    # TF 2's tf.losses / tf.metrics / tf.optimizers / tf.initializers are Keras's
    ("tensorflow.losses.", "keras.losses."),
    ("tensorflow.metrics.", "keras.metrics."),
    ("tensorflow.optimizers.", "keras.optimizers."),
    ("tensorflow.initializers.", "keras.initializers."),
    ("tf_keras.", "keras."),
    ("keras.api._v2.keras.", "keras."),
    ("keras.src.", "keras."),
    ("keras.layers.experimental.preprocessing.", "keras.layers."),
    ("keras.layers.experimental.", "keras.layers."),
    ("keras.layers.core.", "keras.layers."),
    ("keras.layers.convolutional.", "keras.layers."),
    ("keras.layers.pooling.", "keras.layers."),
    ("keras.layers.normalization.", "keras.layers."),
    # Keras 2.9-2.10's new optimizers (keras.optimizers.experimental) are Keras 3's; the 2.11+ legacy
    # ones compute the same updates (Adagrad's epsilon outside the root aside, torch's placement)
    ("keras.optimizers.experimental.", "keras.optimizers."),
    ("keras.optimizers.legacy.", "keras.optimizers."),
    # Keras 2's keras.utils submodules: the public names are keras.utils.X
    ("keras.utils.data_utils.", "keras.utils."),
    ("keras.utils.file_utils.", "keras.utils."),
    ("keras.utils.np_utils.", "keras.utils."),
    ("keras.utils.vis_utils.", "keras.utils."),
    ("keras.utils.layer_utils.", "keras.utils."),
    ("keras.utils.generic_utils.", "keras.utils."),
    ("keras.models.Sequential", "keras.Sequential"),
    ("keras.models.Model", "keras.Model"),
    ("keras.engine.training.Model", "keras.Model"),
    ("keras.engine.base_layer.Layer", "keras.layers.Layer"),
    ("keras.layers.Input", "keras.Input"),
    ("keras.Layer", "keras.layers.Layer"),
    ("keras.backend.", "keras.backend."),
)
_CANON_EXACT = {"tensorflow.keras": "keras", "tf_keras": "keras", "tensorflow.python.keras": "keras"}
# tf.compat.v1 names of TF 2's own objects (compat_v1.py): their TF 2 names
_CANON_EXACT.update(V1_SAME_OBJECT)
# TF 1's recurrent layers (tf.compat.v1.keras.layers.LSTM / GRU and their cells) gate with hard_sigmoid by
# default (GRU also without reset_after), not Keras 2's sigmoid: kept as their own names (no rule), never read
# as keras.layers.LSTM
_V1_RECURRENT = tuple(f"tensorflow.compat.v1.keras.layers.{n}" for n in ("LSTM", "LSTMCell", "GRU", "GRUCell"))
_CANON_EXACT.update({n: n for n in _V1_RECURRENT})
# tf.compat.v1's dtypes are TensorFlow 2's (the ops under compat.v1 names TF 2 keeps with the same
# signature are listed in their rules' names: rules/tf2torch/cast.toml ...)
_CANON_EXACT.update({f"tensorflow.compat.v1.{d}": f"tensorflow.{d}" for d in (
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "bool", "complex64", "complex128", "string")})

# (a Trigger: the pattern, searched only in a text holding one of the needles; ~0.3 ms per fixture otherwise)
# (add_weight("kernel", ...): Keras 2's add_weight takes the name first; Keras 3's takes the shape first and
# refuses a positional name)
_KERAS2_HINTS = Trigger(r"\btf_keras\b|\bexperimental\.preprocessing\b|\blr\s*=|\.fit_generator\(|"
                        r"\bLeakyReLU\(\s*alpha\s*=|\btf\.compat\.v1\b|\bkeras\.engine\b|\btensorflow_addons\b|"
                        r"\.add_(?:weight|variable)\(\s*[rRbBuUfF]{0,2}[\"']",
                        "tf_keras", "experimental", "lr", "fit_generator", "LeakyReLU", "compat", "engine",
                        "tensorflow_addons", "add_weight", "add_variable")


def detect_keras_version(text: str, forced: int | None = None) -> tuple[int, str]:
    """Which Keras the file was written for: 3 unless the file shows Keras 2 (or it is forced)."""
    if forced in (2, 3):
        return forced, "set by option"
    m = re.search(r"#\s*fwport:\s*keras\s*=\s*([23])", text)
    if m:
        return int(m.group(1)), "set by a '# fwport: keras=N' comment"
    m = _KERAS2_HINTS.search(text)
    if m:
        return 2, f"Keras 2 usage: {m.group(0).strip()!r}"
    return 3, "no Keras 2 usage found"


def _source_label(name: str, version: int | None) -> str:
    return f"Keras {version}" if name.startswith("keras.") else "TensorFlow"


#: Keyword arguments every Keras layer accepts through **kwargs, and what the engine does with them.
LAYER_BASE_KWARGS = {
    "input_shape": "shape",  # feeds shape propagation, then dropped
    "batch_input_shape": "shape",
    "input_dim": "shape",
    "input_length": "shape",
    "batch_size": "drop",
    "name": "drop",
    "dtype": "drop",
    "autocast": "drop",
    "trainable": "trainable",
    "dynamic": "drop",
    "weights": "unsupported",
    # tf.keras 2's DTensor layouts (Dense, Conv, Embedding, BatchNormalization ... take them through **kwargs): where
    # each weight is placed on a device mesh, which leaves every value computed the same; torch's module holds its
    # weights whole
    **{f"{w}_layout": "drop" for w in ("kernel", "bias", "embeddings", "gamma", "beta", "moving_mean",
                                        "moving_variance", "depthwise", "pointwise", "recurrent")},
}

CODES = {
    "keras-version": "the Keras generation (2 or 3) the file was written for, which decides some defaults",
    "layout-changed": "channels-last code became channels-first (NCHW): a Sequential takes NCHW inputs; a "
                      "functional model moves its inputs once at entry (and its feature-map outputs back)",
    "layout-kept": "a region kept the channels-last layout; permutes were emitted around layout-bound layers",
    "decorator-removed": "a TensorFlow-only decorator (e.g. @tf.function) was removed",
    "built-for-values": "a builder function's model was translated for the values every call of it in the file "
                        "gives some of its parameters (an if or a loop of the model depends on them); the class raises "
                        "ValueError for others",
    "if-decided": "an if statement of a functional model's builder decided where the model is built (literals, "
                  "module constants, the values the file gives the builder): the class has the branch Keras builds",
    "if-kept": "an if statement of a functional model's builder on parameters the file calls it with different "
               "values: the class keeps the parameter and the if (layers created under it in __init__, called under "
               "it in forward)",
    "tf1-graph-code": "the file is TensorFlow 1 graph-mode code (placeholders, sessions, variable scopes): out of "
                      "scope, left as written (one finding for the file)",
    "mask-kept": "call()'s mask kept as an ordinary forward parameter: nothing in the file attaches a Keras mask, "
                 "so it is what the callers pass (Keras fills it from the input's mask only where they pass none)",
    "random-stream": "random draws translated onto torch's generator, another algorithm: a seed gives other values "
                     "than TensorFlow's (the same ones on each run of the translation)",
    "display-dropped": "a bare expression statement showing a Keras tensor of a module-level functional model or "
                       "an attribute of one (`inputs.shape`, `result`: what a notebook displays, which a script "
                       "computes nothing with) was dropped with the graph, whose tensors the translation does not "
                       "have",
    "adapt-moved": "a module-level `normalizer.adapt(data)` on a Normalization layer a module-level functional "
                   "model calls became `model.<attribute>.adapt(data)` (the layer is a module of the translated "
                   "model), moved right after the model's statement when it was above it",
    "loss-mask": "a model's output carries Keras's mask (from an Embedding(mask_zero=True)): Keras leaves the "
                 "masked steps out of the loss and metrics of compile()/fit(), a torch loss does not",
}

# severity and what to do, for docs/findings.md
CODE_ADVICE = {
    "layout-changed": ("info", "A translated Sequential takes NCHW tensors: feed it `x.permute(0, 3, 1, 2)` "
                       "(the written fit loop and `fwport verify` do); a functional model takes Keras's layout as "
                       "it is."),
    "layout-kept": ("info", "Correct as is; for idiomatic NCHW code, make the shapes in that region inferable "
                    "and translate again."),
    "built-for-values": ("info", "Correct for the values the file uses; to build the model for other values, "
                         "translate a file that calls the builder with them (or write the branches by hand)."),
    "if-decided": ("info", "Correct for those values; if a constant or an argument it reads changes, translate "
                   "the file again (the branch not taken is not in the class)."),
    "if-kept": ("info", "Correct for every value; the layers after the if whose sizes the branch changes are lazy "
                "(run one batch through the model before creating the optimizer)."),
    "decorator-removed": ("info", "Nothing to do; use `--compile` to get `torch.compile` instead."),
    "mask-kept": ("warning", "Correct for the calls in this file; where another file calls the layer on tensors "
                  "that carry a Keras mask (Embedding(mask_zero=True), Masking) without passing mask=, pass the mask "
                  "to the translated forward explicitly."),
    "loss-mask": ("warning", "The model is exact; in the training loop, weight each step's loss by the mask the "
                  "finding names (`(loss_per_step * mask).sum() / mask.sum()`), as Keras does."),
    "tf1-graph-code": ("error", "Migrate the file to TensorFlow 2 first (`tf_upgrade_v2`, then eager code: functions "
                       "called on tensors instead of placeholders and sess.run, tf.Variable / Keras layers, "
                       "keras.optimizers with a tf.GradientTape step), then translate it again."),
    "random-stream": ("warning", "Nothing to do where the program needs random numbers, not TensorFlow's: a test "
                      "that compares drawn values with numbers recorded under TensorFlow must record them again."),
    "display-dropped": ("info", "Nothing to do in a script; in a notebook, show the translated model's input "
                        "shape another way (the layout-changed finding gives it)."),
    "adapt-moved": ("info", "Nothing to do; where the file changes the adapted data or the model between the two "
                    "places in a way fwport does not see (a method call mutating it), move the statement back by "
                    "hand, on the model's module."),
    "keras-version": ("info", "Check the detected Keras generation; force it with `--keras 2|3`, `keras = 2` under "
                      "[tool.fwport], or a `# fwport: keras=2` comment in the file."),
}

DIRECTION = Direction(
    name="tf2torch",
    summary="TensorFlow 2 / Keras (tf.keras, Keras 3, tf_keras) → PyTorch",
    source=SourceNames(SOURCE_ROOTS, _CANON_PREFIXES, _CANON_EXACT, modules=SOURCE_MODULES),
    # the source roots and the packages built on them (a file importing only tensorflow_datasets / keras_cv: `\b`
    # does not end `tensorflow` before `_`, so those are named too; without them such a file came back unchanged)
    mentions=re.compile(r"\b(?:tensorflow|keras|tf_keras|"
                        + "|".join(sorted({m.split(".")[0] for m in SOURCE_MODULES} - set(SOURCE_ROOTS))) + r")\b"),
    source_title="TensorFlow/Keras",
    # a free `tf.` / `keras.` in a file that imports TensorFlow or Keras (a notebook fragment)
    conventional_aliases={"tf": "tensorflow", "keras": "keras"},
    out_of_scope=refuse_graph_code,
    planners=PLANNERS,
    finish=FINISH,
    spellings=(
        Spelling("torch.nn.functional.", "F.", "import torch.nn.functional as F"),
        Spelling("torch.nn.", "nn.", "from torch import nn"),
        Spelling("torch.", "torch.", "import torch"),
        Spelling("math.", "math.", "import math"),
    ),
    import_order=("import math", "import torch", "from torch import nn", "import torch.nn.functional as F"),
    detect_version=detect_keras_version,
    version_name="keras_version",
    version_option="keras",
    version_code="keras-version",
    version_label=lambda v: f"Keras {v}",
    source_label=_source_label,
    guidance=GUIDANCE,
    codes=CODES,
    code_advice=CODE_ADVICE,
    layer_base_kwargs=LAYER_BASE_KWARGS,
    transforms=TRANSFORMS,
    requirements=Requirements(
        source=frozenset({
            "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos", "tensorflow-metal",
            "tensorflow-intel", "tensorflow-aarch64", "tensorflow-rocm", "intel-tensorflow", "tf-nightly",
            "tf-nightly-cpu", "tf-nightly-gpu", "tf-nightly-macos", "tf-keras", "tf-keras-nightly", "keras",
            "keras-nightly", "keras-core",
        }),
        target="torch", conda={"torch": "pytorch"}, label="TensorFlow/Keras"),
    command_help="Translate TensorFlow/Keras source to PyTorch.",
    cli_options=(
        CliOption("--keras", "keras", "The Keras generation the code was written for (default: detected per file).",
                  choices=("2", "3"), convert=int, config_key="keras"),
        CliOption("--compile", "compile", "Turn @tf.function into torch.compile instead of removing it."),
        CliOption("--trace", "trace", "Run the original model once under TensorFlow (a subprocess; needs --model "
                  "and --input) and take the sizes the source does not write down (a layer's input features or "
                  "channels, its input's rank) from that run."),
        CliOption("--model", "trace_model", "With --trace: the model to run, as fwport verify takes it (a builder "
                  "call 'build_model(10)', a class, a model variable).", metavar="EXPR"),
        CliOption("--input", "trace_inputs", "With --trace: an input of the model with its batch axis, as fwport "
                  "verify takes it (float32[2,28,28,1], int32[2,40]:5000); once per input.", metavar="SPEC",
                  multiple=True),
        CliOption("--load", "trace_load", "With --trace: run the whole file, or only its definitions (as fwport "
                  "verify --load).", choices=("auto", "whole", "defs")),
        CliOption("--args", "trace_args", "With --trace: keyword arguments of the model's class or builder, as a "
                  "JSON object (as fwport verify --args).", metavar="JSON"),
        CliOption("--define", "trace_defines", "With --trace: a module-level name set before the file loads (as "
                  "fwport verify --define n_classes=2); repeatable.", metavar="NAME=VALUE", multiple=True),
    ),
    prepare=trace.prepare,
    observed_shape=trace.observed_shape,
    frozen_layer=layer.frozen_layer,
)
