"""Structural passes, run in this order before the rule pass.

Each is ``run(module, ctx) -> module`` and must keep the line structure of the code it rewrites
(findings are located on its input). Each comes with a cheap trigger: a pattern the source text
must contain for the pass to have anything to do; a file without it skips the pass (a full pass
over the tree costs as much as parsing it).
"""
from __future__ import annotations

from fwport.core.direction import Planner, Trigger, fast
from fwport.packs.tf2torch import data, helpers, ndarrays, rngs, shapes, specs, strings, testcase, utilities
from fwport.packs.tf2torch.passes import (datasets, decorators, functional, inline, layerweights, model_api, pyvalues, regularizers, runtime,
                                          sequential, subclass, training, training_arg, valuekinds,
                                          variables)

_MODEL_METHODS = ("compile|fit|fit_generator|train_on_batch|evaluate|evaluate_generator|test_on_batch|predict|"
                  "predict_generator|predict_on_batch|summary|save|save_weights|load_weights|get_weights|"
                  "set_weights|get_layer|count_params|to_json|to_yaml|get_config|reset_states|build")

PLANNERS: tuple[Planner, ...] = (
    # (read-only) Keras 3: a keras.Model subclass whose call takes no training holds Dropout / BatchNormalization /
    # noise layers: fit gives them training=None there (tf_keras and torch's train() train them): a warning
    # (training_arg.py). First: on the classes as written
    Planner("training_arg", Trigger(r"\bdef\s+call\s*\(", "call"), training_arg.run),
    # GradientTape steps → zero_grad/backward/step; compile/fit/evaluate/predict → a written-out loop;
    # optimizers over model.parameters(); loss calls in torch's order; model(x, training=...) →
    # model.train()/eval(). First: on the Keras classes as written, before model_api refuses the rest
    # (a Trigger: the pattern is searched only in a text holding one of the substrings after it, which
    # every match contains; `Crossentropy\b` is `\b\w*Crossentropy\b` found without a regex step per character)
    Planner("training", Trigger(r"GradientTape|training\s*=|optimizers|losses|callbacks|\.\s*trainable\s*=|"
                                r"\.\s*(?:compile|fit|evaluate|predict)"
                                r"\s*\(|\b(?:Adam|AdamW|SGD|RMSprop|Adagrad|MeanSquaredError|"
                                r"MeanAbsoluteError|Huber)\b|Crossentropy\b",
                                "GradientTape", "training", "optimizers", "losses", "callbacks", "trainable", "compile", "fit",
                                "evaluate", "predict", "Adam", "SGD", "RMSprop", "Adagrad", "Crossentropy",
                                "MeanSquaredError", "MeanAbsoluteError", "Huber"), training.run),
    # model.fit/compile/predict/save_weights... on translated models: errors saying what to write (and
    # model.trainable_variables / variables / weights → the parameters, model.layers an error)
    Planner("model_api", fast(rf"\.\s*(?:(?:{_MODEL_METHODS})\s*\(|(?:{model_api._ATTRIBUTE_NAMES})\b)"),
            model_api.run),
    # keras.Input(...) → layers called on tensors → keras.Model(inputs, outputs): a generated nn.Module
    # (both an Input( and a Model( call or alias: a Sequential with keras.Input has nothing for it;
    # the two searched apart: a look-ahead over the whole text per condition is a regex step per character)
    Planner("functional", Trigger(r"\bInput\s*\(", "Input", also=r"Model\s*\(|\bModel\s+as\b"),
            functional.run),
    # keras.Sequential([...]) / Sequential() + .add → nn.Sequential, shapes propagated
    Planner("sequential", Trigger(r"\bSequential\b|\.\s*add\s*\(", "Sequential", "add"), sequential.run),
    # keras.Model / keras.layers.Layer subclasses → nn.Module (and the functional API refused)
    Planner("subclass", Trigger(r"\b(?:Model|Layer|Module)\b|\badd_(?:weight|variable)\b", "Model", "Layer", "Module",
                                "add_"), subclass.run),
    # (read-only) keras.Input(shape=..., batch_size=...) of a known shape left by the passes above (no functional
    # model starts there): an error naming the torch.zeros(...) to give instead (utilities.py)
    Planner("placeholder_inputs", Trigger(r"\bbatch_size\s*=", "batch_size", also=r"\bInput\s*\("),
            utilities.run_placeholder_inputs),
    # keras.utils.Sequence subclasses: what a torch Dataset does not do (on_epoch_end)
    Planner("sequences", Trigger(r"\b(?:Sequence|PyDataset)\b", "Sequence", "PyDataset"), data.run_sequences),
    # class FooTest(tf.test.TestCase) → TFTestCase (a unittest.TestCase written into the file, testcase.py),
    # tf.test.Benchmark → TFBenchmark
    Planner("testcase", Trigger(r"\b(?:TestCase|Benchmark)\b", "TestCase", "Benchmark"), testcase.run),
    # with tf.name_scope(...): → with contextlib.nullcontext(): (utilities.py)
    Planner("name_scopes", Trigger(r"\bname_scope\b", "name_scope"), utilities.run_name_scopes),
    # (read-only) ImageDataGenerator.flow_from_dataframe: an error saying what to write (utilities.py)
    Planner("dataframe_flows", fast(r"\.\s*flow_from_dataframe\s*\("), utilities.run_dataframe_flows),
    # @tf.function removed (or torch.compile)
    Planner("decorators", Trigger(r"@|\bfunction\s*\(|\bimport\b[^\n]*\bfunction\b|\bdo_not_convert\b", "@", "function",
                                  "do_not_convert"), decorators.run),
    # (read-only) tf.strings.reduce_join(x).numpy().decode("utf-8") → the reduce_join helper's call alone, a str
    # (strings.py; before variables, which leaves that .numpy() to it)
    # and a RaggedTensor method (.to_tensor()) on tf.strings.split / unicode_split / to_number refused
    # (read-only) x.dtype == tf.string → getattr(x.dtype, "kind", None) in ("O", "S", "U"): strings are NumPy
    # arrays of Python strings in a translation (strings.py)
    Planner("string_checks", fast(r"\bstring\b"), strings.run_string_checks),
    Planner("string_chains", Trigger(r"\b(?:reduce_join|split|unicode_split|to_number)\s*\(", "reduce_join", "split",
                                     "to_number"), strings.run),
    # tf.Variable inside a module class → nn.Parameter; a variable's assign/assign_add/numpy/..., and any
    # x.numpy() → x.detach().numpy(), any v.assign(x), x.trainable_variables on any receiver (last: it reads
    # the bases the subclass pass wrote)
    Planner("variables", Trigger(r"\bVariable\b|\.\s*(?:numpy|assign(?:_add|_sub)?)\s*\(|\.\s*(?:non_)?trainable_(?:variables|weights)\b",
                                 "Variable", "numpy", "assign", "trainable_"), variables.run),
    # (read-only) Python numbers among the tensors of tf.stack / tf.concat → torch.as_tensor (the rules'
    # `tensors` transform), and a Python int as tf.split's number of parts → torch.chunk
    Planner("pyvalues", Trigger(r"\b(?:stack|concat|concatenate|split)\s*\(", "stack", "concat", "split"),
            pyvalues.run),
    # (read-only) layers built and called in one expression outside the models the passes follow:
    # `layers.Add()([a, b])` → `a + b`, `layers.MaxPooling2D()(x)` → the module on x moved to channels-first;
    # a weightless layer bound to a module-level name and only called (`crop = layers.CenterCrop(...)`)
    Planner("inline", Trigger(r"\)\s*\(|(?:Pool|Sampling|Padding|Cropping|Crop|SpatialDropout|Resizing)\w*\s*\(",
                              ")"), inline.run),
    # (read-only) a tf.data.Dataset method the DataPipeline helper lacks (interleave, window, group_by_window, ...)
    # called on a dataset of the file: an error, not an AttributeError when the translation runs (datasets.py);
    # a file with one holds tf.data or a Keras dataset reader (searched first: `.save(` / `.load(` are everywhere)
    Planner("dataset_methods", Trigger(r"\bdata\b|dataset_from", "data",
                                       also=r"\.\s*(?:" + "|".join(sorted(datasets.MISSING)) + r")\b"), datasets.run),
    # (read-only) a NumPy value given to a model of the file → torch.as_tensor(x, dtype=torch.float32); a model's
    # output given to a NumPy function → .detach().numpy() (valuekinds.py)
    Planner("numpy_values", Trigger(r"\bnumpy\b", "numpy"), valuekinds.run),
    # (read-only) a translated layer's Keras weights read by name (`self.fc.kernel` → `self.fc.weight.T`, by the
    # rule's weight map read backwards) or an error (layerweights.py)
    Planner("layer_weights", layerweights.TRIGGER, layerweights.run),
    # (read-only) model(x) of a Sequential made channels-first, called on channels-last data → its input moved
    # channels-first, its output back; a Keras attribute of a model's weight or layer the torch one has not
    # (p.name, layer.weights): an error (valuekinds.py run_checks, after numpy_values and layer_weights)
    Planner("model_layouts", valuekinds.CHECKS_TRIGGER, valuekinds.run_checks),
    # (read-only) g = tf.random.Generator.from_seed(s) → torch.Generator().manual_seed(s), its g.normal / g.uniform
    # → torch.randn / torch.rand / torch.randint(..., generator=g) (rngs.py)
    Planner("rng_generators", Trigger(r"\b(?:from_seed|get_global_generator|from_non_deterministic_state)\b",
                                      "from_seed", "get_global_generator", "from_non_deterministic_state"), rngs.run),
    # (read-only) tnp.<function>(...).astype(dtype) → the rule's translation .to(torch.<dtype>) (ndarrays.py)
    Planner("tnp_astype", Trigger(r"\.\s*astype\s*\(", "astype", also=r"experimental\.numpy|\btnp\b"), ndarrays.run),
    # (read-only) Dataset.from_generator's output_signature of tf.TensorSpec objects → their dtypes (the rule's
    # from-generator transform gives them as output_types), f.get_concrete_function(specs) → f (specs.py; before
    # tensor_shapes, which leaves alone what it planned whole)
    Planner("tensor_specs", fast(r"\bTensorSpec\b"), specs.run),
    # (read-only) tf.TensorShape(dims) of known dims → torch.Size(dims), its as_list() / rank / is_fully_defined() /
    # num_elements() where a name bound to it is followed, or chained on the call (shapes.py)
    Planner("tensor_shapes", fast(r"\bTensorShape\b"), shapes.run),
    # (read-only; after tensor_shapes, which plans a TensorShape's own as_list()) x.shape.as_list() /
    # x.get_shape().as_list() on any other receiver → list(x.shape) (shapes.py)
    Planner("shape_as_list", fast(shapes.AS_LIST_TRIGGER), shapes.run_as_list),
    # (read-only; last: calls another planner planned are left to it) runtime settings removed
    # (set_memory_growth..., tfds.disable_progress_bar, a float32 or mixed set_global_policy), plot_model → print(model), tf.distribute strategies → one process,
    # tf.summary.scalar in `with writer.as_default():` → writer.add_scalar, keras.losses.Loss and
    # keras.metrics.Metric subclasses → KerasLoss / KerasMetric (passes/runtime.py)
    Planner("runtime", Trigger(r"\b(?:set_memory_growth|set_log_device_placement|set_soft_device_placement|"
                               r"run_functions_eagerly|experimental_enable_numpy_behavior|"
                               r"plot_model|(?:MultiWorker)?MirroredStrategy|OneDeviceStrategy|get_strategy|as_default|Loss|Metric|"
                               r"set_global_policy|disable_progress_bar|set_jit|set_visible_devices|set_logical_device_configuration|"
                               r"set_virtual_device_configuration|TPUStrategy)\b",
                               "set_memory_growth", "set_log_device_placement", "set_soft_device_placement", "set_global_policy",
                               "run_functions_eagerly", "experimental_enable_numpy_behavior",
                               "plot_model", "MirroredStrategy", "OneDeviceStrategy", "get_strategy", "as_default", "Loss",
                               "Metric", "disable_progress_bar", "set_jit", "set_visible_devices",
                               "set_logical_device_configuration", "set_virtual_device_configuration", "TPUStrategy"),
            runtime.run),
)
# steps that remove or add lines, once every finding is located: decorators removed, the lines of a
# Sequential's list brackets removed, the functional
# pass's classes assembled (before anything inserts top-level statements: it finds its builders by
# the places they had in the module), a set_weights copy between two of its models paired by layer
# (their records made), the training pass's finish, and the helper modules the output
# calls written out after the imports; last, the statements the runtime planner and the sequential pass (a
# Sequential's `.add(keras.Input(...))`) marked removed (by their mark, not their place: no pass removes a
# statement before, which would shift the places the functional pass's finish reads)
FINISH = (decorators.finish, sequential.finish, functional.finish, model_api.finish_weight_copies,
          model_api.finish_count_params, regularizers.finish,
          training.finish, data.finish_aliases, helpers.finish, testcase.finish, runtime.finish)
