"""``model.compile`` / ``fit`` / ``evaluate`` / ``predict`` → an optimizer, a loss and a written-out
training loop (for passes/training.py).

``model.compile(optimizer, loss, metrics)`` becomes ``optimizer = torch.optim...(model.parameters(), ...)``
and ``loss_fn = nn...Loss()`` (by the same rules as written-out optimizers and losses; Keras's
compile strings are those classes with their defaults, ``rmsprop`` when no optimizer is given; a name
bound to a Keras optimizer or loss object is that object, translated where it is bound; a loss given as a
function, ``keras.losses.hinge`` or the file's own ``def my_loss(y_true, y_pred)``, is called by the loop in
Keras's order, its labels in the outputs' dtype and rank, and its values averaged, as Keras's
LossFunctionWrapper does; an instance of the file's own keras.losses.Loss subclass, a KerasLoss, is called in
Keras's order and reduces its values itself; one metric given alone is the list of it, as Keras 2 takes it, and a
metric function of the file is a MeanMetricWrapper named after it);
``model.fit(x, y, ...)`` becomes ``fit(model, optimizer, loss_fn, x, y, ...)``, a function written
into the file once, that keeps Keras's semantics: batch size 32 by default, the last
``validation_split`` of the samples held out *before* shuffling, the rest shuffled every epoch, one
progress line per epoch, a History-like dict of per-epoch averages (``history.history[...]`` becomes
``history[...]``). ``evaluate`` / ``predict`` likewise (``test_on_batch`` / ``predict_on_batch``: them on one
batch; ``train_on_batch``: a written function of fit's step on one batch, where the file calls it); where the file needs them the loop also
takes iterables of batches (``steps_per_epoch`` / ``validation_steps``) and callbacks (the classes
below). One accuracy or one error metric (mae, mse, mape) is a running sum in the loop; other metrics
(``Compiled.metrics``) are a dict {Keras's name: metric object} the compile statement binds, which fit /
evaluate take, reset and update per batch. ``fit(class_weight=...)`` weighs each sample's loss by its label's weight
(Keras's cross-entropies, MSE, MAE, Huber); a cross-entropy of a Sequential's final sigmoid / softmax takes its
logits (``Compiled.activation_logits``). A functional model of several inputs (``Compiled.several``) is given x as a
list of arrays, one per input (a dict: its values in the order of the inputs' names), each batched with the same
indices, and called ``model(*xb)``. A functional model of several outputs compiled with a loss per output (a list, a
dict by the outputs' names, or one loss for all; ``loss_weights`` a literal list or dict) gets ``loss_fn = {output:
torch loss}`` and loops of arrays of their own (:func:`multi_helpers`, ``Compiled.outputs``) that sum each output's
loss times its factor and write Keras's History keys (``<output>_loss``, ``<output>_<metric>``; a dict of outputs
keyed by its keys). ``sample_weight=`` of fit / evaluate / test_on_batch / train_on_batch weighs each sample's loss
as Keras does (fit's: :func:`_sample_weighed`, the held-out weights weigh val_loss). Only what the loop reproduces is
translated: sample weights of other losses, class weights of other losses, a loss
for only some outputs, metrics without a written class are left to model_api's errors (the whole compile then stays
Keras).

Also written here: ``TrainStepModule``, the base of a Keras model with its own ``train_step`` (its
compile / fit), the metric classes, and the callback classes (EarlyStopping, ModelCheckpoint,
ReduceLROnPlateau, LearningRateScheduler, CSVLogger), each with Keras's semantics.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.names import dotted_text, find_all

OPTIMIZERS = {"adam": "keras.optimizers.Adam", "adamw": "keras.optimizers.AdamW", "sgd": "keras.optimizers.SGD",
              "rmsprop": "keras.optimizers.RMSprop", "adagrad": "keras.optimizers.Adagrad",
              "nadam": "keras.optimizers.Nadam", "adamax": "keras.optimizers.Adamax"}
LOSSES = {"sparse_categorical_crossentropy": "keras.losses.SparseCategoricalCrossentropy",
          "categorical_crossentropy": "keras.losses.CategoricalCrossentropy",
          "binary_crossentropy": "keras.losses.BinaryCrossentropy",
          "mse": "keras.losses.MeanSquaredError", "mean_squared_error": "keras.losses.MeanSquaredError",
          "mae": "keras.losses.MeanAbsoluteError", "mean_absolute_error": "keras.losses.MeanAbsoluteError",
          "huber": "keras.losses.Huber", "cosine_similarity": "keras.losses.CosineSimilarity"}
ACCURACY = {"accuracy", "acc"}
# accuracies named for the labels they take → the loss target (rule option) they agree with
NAMED_ACCURACIES = {"sparse_categorical_accuracy": "long", "categorical_accuracy": "same", "binary_accuracy": "float"}
# error metrics by compile string → their kind (Keras keeps the string as the history name)
ERROR_METRICS = {"mae": "mae", "mean_absolute_error": "mae", "mse": "mse", "mean_squared_error": "mse",
                 "mape": "mape", "mean_absolute_percentage_error": "mape"}
# per-sample values of an error metric summed over the batch (Keras: the mean over each sample's values)
_ERROR_SUMS = {"mae": "(pred - yb.float().view_as(pred)).abs()",
               "mse": "(pred - yb.float().view_as(pred)).square()",
               "mape": "100.0 * ((yb.float().view_as(pred) - pred) / yb.float().view_as(pred).abs().clamp_min(1e-7)).abs()"}

# ctx.analyses: present where the file trains only through the loops written here (the subclass pass may then
# translate ``self.add_loss(term)`` in a layer's call to a term listed in ``self.added_losses``), True once it did
ADDED_LOSSES = "tf2torch-added-losses"


def kept_add_losses(fn: cst.FunctionDef) -> set[int] | None:
    """The ``self.add_loss(term)`` calls of a class's ``call`` (ids of their Call nodes) that the subclass pass keeps
    as ``self.added_losses = getattr(self, "added_losses", []) + [term]``: each a statement of its own, one positional
    argument, anywhere in the method's code (under an if, in a loop: each call lists its term, and the written
    loops read the terms of one forward); None where an add_loss of the method is another (in a nested function
    or lambda, an expression's part, keywords), which stays an error (the file's loops then add no terms)."""
    if not isinstance(fn.body, cst.IndentedBlock):
        return None
    named = [a for a in find_all(fn, cst.Attribute) if a.attr.value == "add_loss"]
    nested = {id(a) for inner in find_all(fn, cst.FunctionDef) if inner is not fn for a in find_all(inner, cst.Attribute)}
    nested |= {id(a) for inner in find_all(fn, cst.Lambda) for a in find_all(inner, cst.Attribute)}
    nested |= {id(a) for inner in find_all(fn, cst.ClassDef) for a in find_all(inner, cst.Attribute)}
    kept = set()
    for e in find_all(fn, cst.Expr):
        call = e.value
        if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and id(call.func) not in nested
                and dotted_text(call.func) == "self.add_loss" and len(call.args) == 1
                and call.args[0].keyword is None and not call.args[0].star):
            kept.add(id(call))
    if len(kept) != len(named) or not kept:
        return None
    return kept

COMPILE = ("optimizer", "loss", "loss_weights", "metrics", "weighted_metrics", "run_eagerly", "steps_per_execution",
           "jit_compile", "auto_scale_loss")
COMPILE_IGNORED = {"run_eagerly": "PyTorch runs eagerly", "jit_compile": "no XLA in eager PyTorch",
                   "steps_per_execution": "a graph-execution setting"}
# Keras 2's settings of the worker threads / processes that read a keras.utils.Sequence or generator: how the
# batches are loaded, not which (the loop reads them in order, in the main process)
LOADING = ("max_queue_size", "workers", "use_multiprocessing")
# method → (its parameters in order, those the loop takes, those dropped)
METHODS = {
    "fit": (("x", "y", "batch_size", "epochs", "verbose", "callbacks", "validation_split", "validation_data",
             "shuffle", "class_weight", "sample_weight", "initial_epoch", "steps_per_epoch", "validation_steps",
             "validation_batch_size", "validation_freq", *LOADING),
            ("x", "y", "batch_size", "epochs", "verbose", "validation_split", "validation_data", "shuffle",
             "callbacks", "steps_per_epoch", "validation_steps")),
    "evaluate": (("x", "y", "batch_size", "verbose", "sample_weight", "steps", "callbacks", "return_dict", *LOADING),
                 ("x", "y", "batch_size", "verbose", "steps")),  # (sample_weight: where the loss is weighed, below)
    "predict": (("x", "batch_size", "verbose", "steps", "callbacks", *LOADING), ("x", "batch_size", "verbose")),
    # one update on one batch: the written train_on_batch (Keras 3's returns the batch's loss and metrics,
    # taken before the update: train_on_batch resets the metrics every call)
    "train_on_batch": (("x", "y", "sample_weight", "class_weight", "return_dict"), ("x", "y")),
}
#: the helpers runtime.py writes for a MirroredStrategy made DistributedDataParallel, which the distributed loops call
DATA_PARALLEL, MAIN_PROCESS = "data_parallel", "is_main_process"
ALL_REDUCE_METRIC = "all_reduce_metric"  # ... and where compile has metric objects
#: under torchrun the callbacks that write files run in the first process only (the others in every process)
FILE_CALLBACKS = ("ModelCheckpoint", "CSVLogger", "TensorBoard")
#: the functions written for a compile (each named once per set, fit_2... for a second set)
FUNCTIONS = ("fit", "evaluate", "predict", "train_on_batch")

# Keras 2's generator methods (and the batch methods of evaluate / predict): the method they run (fit / evaluate / predict of the generator), their parameters
# in order (the generator is x), and the verbosity they default to
GENERATORS = {
    "fit_generator": ("fit", ("x", "steps_per_epoch", "epochs", "verbose", "callbacks", "validation_data",
                              "validation_steps", "validation_freq", "class_weight", *LOADING, "shuffle",
                              "initial_epoch"), 1),
    "evaluate_generator": ("evaluate", ("x", "steps", "callbacks", *LOADING, "verbose"), 0),
    "predict_generator": ("predict", ("x", "steps", "callbacks", *LOADING, "verbose"), 0),
    # the batch methods that compute what evaluate / predict computes over one batch: Keras 3's test_on_batch resets
    # the metrics, runs the batch in inference mode and gives the loss (and metrics) as evaluate gives them;
    # predict_on_batch gives the outputs as a NumPy array, as predict
    "test_on_batch": ("evaluate", ("x", "y", "sample_weight", "return_dict"), 0),
    "predict_on_batch": ("predict", ("x",), 0),
}


@dataclass
class Compiled:
    """One model's compile, planned: what its optimizer and loss are, under which names."""

    model: str
    call: cst.Call
    optimizer: tuple  # ("string", rule, node) | ("call", rule, node) | ("name", rule, its bound call, name)
    loss: tuple  # likewise
    from_logits: bool = False
    accuracy: bool = False
    accuracy_name: str = "accuracy"  # the history key: the metric's name as compile was given it
    accuracy_kind: str = ""  # a named accuracy (its labels must be the loss's), "" for Keras's pick
    # compile's metrics= other than one accuracy or error: [(Keras's name, the metric's expression, written
    # class or "")], metric objects the compile statement binds in a dict by those names, which fit / evaluate take
    metrics: list = field(default_factory=list)
    batches: bool = False  # a fit / evaluate takes an iterable of batches or counts steps
    callbacks: bool = False  # a fit takes callbacks
    class_weight: bool = False  # a fit takes class_weight= (Keras's per-label scale of each sample's loss)
    # an evaluate / test_on_batch / train_on_batch takes sample_weight= (each sample's loss times its weight, the sum
    # over the batch size, as Keras's "sum_over_batch_size" reduces them; the metrics unweighted, as compile's are)
    sample_weight: bool = False
    # compile's metrics were given as weighted_metrics=: the loop's metrics, which no sample weights reach (a fit /
    # evaluate given sample_weight= or class_weight= is refused: Keras would weigh these metrics by them)
    weighted_metrics: bool = False
    # a fit takes sample_weight= (its arrays' samples' weights: each training sample's loss times its weight, the sum
    # over the batch size; validation_split holds out the weights too, which weigh the validation loss)
    fit_sample_weight: bool = False
    return_dict: bool = False  # an evaluate takes return_dict= (its result as {Keras's name: value})
    train_batch: bool = False  # the file calls train_on_batch: its function is written beside fit
    # a cross-entropy of probabilities on a Sequential whose last layer is its sigmoid / softmax: Keras takes the
    # loss from that activation's input (its cached logits), so the loop computes logits = model[:-1](x), the
    # outputs model[-1](logits), and the loss (created from_logits) of the logits
    activation_logits: bool = False
    constrained: bool = False  # the file's modules have an apply_constraints() (Keras's weight constraints)
    frozen_batchnorm: bool = False  # the file freezes a layer (trainable = False) and has BatchNormalization
    predict_batches: bool = False  # a predict takes a tf.data pipeline: the written predict iterates batches too
    logit_metrics: bool = False  # ... and a cross-entropy metric, which fit / evaluate give those logits too
    schedule: bool = False  # the optimizer's learning rate is a schedule: fit takes its LambdaLR and steps it
    clips: dict = field(default_factory=dict)  # the optimizer's clipnorm / global_clipnorm / clipvalue (text)
    names: dict = field(default_factory=dict)  # optimizer / loss_fn / fit / evaluate / predict → name
    order: int = 0  # the compile statement's position in the file (a fit uses the last compile before it)
    scope: int = 0  # the scope it is in (0: the module)
    # the compile whose written fit / evaluate / predict this one calls: compiles whose loops would be the
    # same text share one set of functions (what fit calls add, batches and callbacks, goes on it)
    group: "Compiled | None" = None
    several: bool = False  # its model takes several inputs, which fit / evaluate / predict are given as a list
    factory: str = ""  # compiled in a model factory (`def get_model(): ... return model`): its name
    factory_return: cst.BaseExpression | None = None  # ... and the value it returns (the optimizer and loss join it)
    key: tuple = ()  # what its written loop depends on besides the layout (the loss, metric, schedule, clips)
    sources: set = field(default_factory=set)  # its model's name and builders (ctx.models keys)
    base_names: dict = field(default_factory=dict)  # fit / evaluate / predict before a suffix
    placeholders: dict = field(default_factory=dict)  # ... and the names calls get until finish names them
    # a model of several outputs compiled with a loss per output (or one loss for all): [(the output's name, its loss
    # plan, its from_logits, its loss_weights= factor as written or "")] in the model's output order; loss_fn is then
    # a dict {output name: torch loss}, and the written loops sum each output's loss times its factor (Keras's sum)
    outputs: list = field(default_factory=list)
    keras2: bool = False  # Keras 2 code: each output's loss in the History is averaged by samples (Keras 3: by batches)
    metric_outputs: list = field(default_factory=list)  # several outputs: the output each of ``metrics`` reads
    history_names: list = field(default_factory=list)  # ... each output's name in the History ("<name>_loss")
    dict_outputs: bool = False  # ... given by the model as a dict {key: output} (``outputs``' names: its keys)


# the loss terms Keras adds itself (model.losses): the layers' regularizers, and what they gave add_loss
PENALTY_SUM = 'sum(m.regularization_loss() for m in model.modules() if hasattr(m, "regularization_loss"))'


def constraint_lines(c: Compiled, indent: str) -> list[str]:
    """After optimizer.step(): each module's apply_constraints() (Keras's weight constraints, which Keras's
    optimizer assigns to the variables after each update), where the file's modules have one."""
    if not c.constrained:
        return []
    return [f"{indent}for m in model.modules():  # the weights' constraints: Keras's optimizer applies them after each update",
            f'{indent}    if hasattr(m, "apply_constraints"):',
            f"{indent}        m.apply_constraints()"]
ADDED_SUM = 'sum(t.sum() for m in model.modules() for t in vars(m).pop("added_losses", ()))'
# ... each module's list of the terms of its calls (subclass.py: a layer called twice gives two), emptied before a
# forward of the written loops (a forward of the file's own, outside them, leaves its terms) and by ADDED_SUM, which
# reads them: Keras's model.losses hold the terms of the last forward alone (a layer it skipped gives none)
ADDED_CLEAR = ["            for m in model.modules():  # Keras's add_loss terms: this forward's alone",
               '                vars(m).pop("added_losses", None)']


def _clearing(predict: list[str], added: bool) -> list[str]:
    """The written predict's lines (its ``def`` first); ``added``: its forwards empty the modules' add_loss lists
    first, as fit's and evaluate's do (a local ``forward`` the body calls for ``model(...)``), so that the terms
    left are the last forward's, as Keras's model.losses after a predict, and repeated predicts do not grow them."""
    if not added:
        return predict
    body = [line.replace("model(", "forward(") for line in predict[2:]]
    return predict[:2] + [
        "    def forward(*inputs):  # Keras's add_loss terms: this forward's alone",
        "        for m in model.modules():",
        '            vars(m).pop("added_losses", None)',
        "        return model(*inputs)",
        "",
    ] + body


# the written fits' lines that call the callbacks (fit's and the several-outputs fit's): before the epochs, at each
# epoch's start, at its end (logs: the history's last values; model.stop_training ends the training) and after
CALLBACKS_BEGIN = [
    "    callbacks, callback_keys = list(callbacks or []), set()",
    "    model.stop_training, model.optimizer = False, optimizer",
    "    for callback in callbacks:",
    "        callback.model = model",
    '        if hasattr(callback, "on_train_begin"):',
    "            callback.on_train_begin()",
]
CALLBACKS_EPOCH = [
    "        for callback in callbacks:",
    '            if hasattr(callback, "on_epoch_begin"):',
    "                callback.on_epoch_begin(epoch)",
]
CALLBACKS_END = [
    "        logs = {k: v[-1] for k, v in history.items() if k not in callback_keys}",
    "        epoch_keys = set(logs)",
    "        for callback in callbacks:",
    '            if hasattr(callback, "on_epoch_end"):',
    "                callback.on_epoch_end(epoch, logs)",
    "        for k in [k for k in logs if k not in epoch_keys]:  # what callbacks log (the learning rate): in the History",
    "            callback_keys.add(k)",
    "            history.setdefault(k, []).append(logs[k])",
    "        if model.stop_training:",
    "            break",
    "    for callback in callbacks:",
    '        if hasattr(callback, "on_train_end"):',
    "            callback.on_train_end()",
]


def bind(call: cst.Call, params: tuple) -> dict | None:
    """Arguments by parameter name, or None for *args/**kwargs or an unknown keyword."""
    out = {}
    for i, a in enumerate(call.args):
        if a.star:
            return None
        if a.keyword is None:
            if i >= len(params):
                return None
            out[params[i]] = a.value
        elif a.keyword.value in params:
            out[a.keyword.value] = a.value
        else:
            return None
    return out


def plan_compile(call: cst.Call, model: str, rule_of, named=None, named_loss=None, loss_function=None,
                 metric_list=None, loss_object=None, added_only: bool = False) -> Compiled | str:
    """A compile call → its plan, or why the loop cannot reproduce it. ``rule_of(node)``: the rule of
    a call's callee (or None); ``named(name)``: the Keras optimizer call a name given as the optimizer
    is bound to, when the training pass creates it over the model's parameters (or None);
    ``named_loss(name)``: likewise the Keras loss object a name given as the loss is bound to, when that
    binding becomes the torch loss the loop calls (or None); ``loss_function(node)``: for a loss given as a
    function, ``keras.losses.hinge`` or one of the file's ``def my_loss(y_true, y_pred)``, its rule (a
    per-sample loss function's) or "" for the file's own, else None (the loop calls it in Keras's order and
    takes the mean, as Keras's LossFunctionWrapper does); ``metric_list(node, loss plan)``: for metrics=
    other than one accuracy or error, [(Keras's name, expression, written class or "")] of its metric
    objects (``c.metrics``), or why the loop cannot compute them; ``loss_object(node)``: whether a loss given as
    an instance of the file's own keras.losses.Loss subclass (``MyLoss()`` or a name bound once to one) is one the
    loop calls as Keras does, ``loss_fn(y_true, y_pred)`` (the subclass, a KerasLoss, reduces its values itself).
    ``added_only``: the file's layers give add_loss terms, so a compile without a loss is planned as the loss kind
    "added" (``("added", None, call, "")``): Keras then trains on those terms alone (their sum, with the weight
    regularizers' penalties: model.losses), which is the written loop's loss; no metrics beside it."""
    args = bind(call, COMPILE)
    if args is None:
        return "its arguments cannot be bound statically"
    if "loss_weights" in args and literal_value(args["loss_weights"], NOT_LITERAL) is not None:
        return "loss_weights is not translated"
    weighted_metrics = "weighted_metrics" in args and literal_value(args["weighted_metrics"], NOT_LITERAL) not in (
        None, [], ())
    if weighted_metrics:
        # Keras weighs these metrics by the sample weights a batch brings (x, y, sample_weight; fit's / evaluate's
        # sample_weight=, class_weight=) and, as every compile metric, by the output's mask: with no sample weights
        # they are the metrics= of those names (the same names in the history), which the loop computes
        if "metrics" in args and literal_value(args["metrics"], NOT_LITERAL) not in (None, [], ()):
            return ("weighted_metrics beside metrics is not translated (Keras computes both sets, the weighted one "
                    "by the sample weights, a name both use written weighted_<name>)")
        if isinstance(args["weighted_metrics"], cst.Dict):
            return "weighted_metrics as a dict (a set per output) is not translated"
        args["metrics"] = args.pop("weighted_metrics")
    if "auto_scale_loss" in args and literal_value(args["auto_scale_loss"], NOT_LITERAL) is not True:
        return "auto_scale_loss is not translated"
    if "metrics" in args:
        args["metrics"] = metrics_listed(args["metrics"])
    plans = {}
    for kind, table, default in (("optimizer", OPTIMIZERS, "rmsprop"), ("loss", LOSSES, None)):
        node = args.get(kind)
        if node is None:
            if default is None and added_only:
                plans[kind] = ("added", None, call, "")
                continue
            if default is None:
                return "no loss is given"
            plans[kind] = ("string", table[default], call)
            continue
        lit = literal_value(node, NOT_LITERAL)
        if isinstance(lit, str):
            if lit.lower() not in table:
                return f"{kind}={lit!r} is not one of {', '.join(sorted(table))}"
            plans[kind] = ("string", table[lit.lower()], node)
        elif isinstance(node, cst.Call) and rule_of(node) is not None and rule_of(node).emit.get("transform") == kind:
            plans[kind] = ("call", rule_of(node), node)
        elif kind == "optimizer" and isinstance(node, cst.Name) and named is not None and named(node) is not None:
            plans[kind] = ("name", rule_of(named(node)), named(node), node.value)
        elif kind == "loss" and isinstance(node, cst.Name) and named_loss is not None and named_loss(node) is not None:
            plans[kind] = ("name", rule_of(named_loss(node)), named_loss(node), node.value)
        elif kind == "loss" and loss_object is not None and loss_object(node):
            plans[kind] = ("object", None, node, node.value if isinstance(node, cst.Name) else "")
        elif kind == "loss" and loss_function is not None and loss_function(node) is not None:
            plans[kind] = ("function", loss_function(node) or None, node, node.value if isinstance(node, cst.Name)
                           else "")
        else:
            return f"{kind}= is neither a Keras name nor a Keras {kind} object the file creates there"
    if plans["loss"][0] == "added" and literal_value(args.get("metrics", cst.Name("None")), NOT_LITERAL) not in (
            None, [], ()):
        return ("no loss is given (Keras then trains on the terms the layers give add_loss alone), and metrics= "
                "beside it are not translated: compute them in the loop")
    metric = _accuracy_metric(args.get("metrics"), rule_of)
    metrics = metric_list(args["metrics"], plans["loss"]) if metric is NOT_LITERAL and metric_list is not None else None
    if isinstance(metrics, str):
        return metrics
    if metrics is not None:
        metric = None
    elif metric is NOT_LITERAL:
        return ("metrics other than one accuracy ('accuracy', 'sparse_categorical_accuracy', "
                "keras.metrics.SparseCategoricalAccuracy(), ...) or one error ('mae', 'mse', 'mape', "
                "keras.metrics.MeanAbsoluteError(), ...) are not translated (compute them in the loop)")
    if plans["loss"][0] in ("function", "object") and metric is not None and metric[1] not in (*NAMED_ACCURACIES, *_ERROR_SUMS):
        # Keras's pick by the shapes of labels and outputs: the metric object that picks alike (ShapeAccuracy)
        metrics = metric_list(args["metrics"], plans["loss"]) if metric_list is not None else None
        if isinstance(metrics, list) and metrics:
            metric = None
    if plans["loss"][0] in ("function", "object") and metric is not None and metric[1] not in (*NAMED_ACCURACIES, *_ERROR_SUMS):
        return ("metrics=['accuracy'] with a loss function: Keras picks the accuracy from the shapes of the "
                "labels and outputs; name it (sparse_categorical_accuracy, categorical_accuracy, binary_accuracy)")
    c = Compiled(model, call, plans["optimizer"], plans["loss"], accuracy=metric is not None, metrics=metrics or [],
                 weighted_metrics=weighted_metrics)
    if metric is not None:
        c.accuracy_name, c.accuracy_kind = metric
    return c


def metrics_listed(node: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """compile's metrics= as a list: one metric given alone (``metrics="accuracy"``, ``metrics=keras.metrics.AUC()``)
    is the list of it, as Keras 2 flattens it (Keras 3 accepts only a list, tuple or dict, so such code was written
    for Keras 2); the list's element is the node itself."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.Call)):
        return cst.List([cst.Element(node)])
    return node


def _loss_name(loss: tuple) -> str:
    """The canonical Keras name of a compile's loss plan ("" for a loss function of the file's own)."""
    what = loss[1]
    return what if isinstance(what, str) else what.names[0] if what is not None else ""


def _accuracy_metric(node, rule_of):
    """compile's metrics= → (history name, kind) of its one metric, None without metrics, NOT_LITERAL
    for what the loop does not compute. kind: "" (Keras picks the accuracy from the loss), the accuracy
    named, or an error metric's kind ("mae", "mse", "mape")."""
    if node is None:
        return None
    lit = literal_value(node, NOT_LITERAL)
    if lit is not NOT_LITERAL and not lit:
        return None
    if not isinstance(node, (cst.List, cst.Tuple)) or len(node.elements) != 1:
        return NOT_LITERAL
    m = node.elements[0].value
    name = literal_value(m, NOT_LITERAL)
    if isinstance(name, str):
        if name in ACCURACY:
            return name, ""
        if name in ERROR_METRICS:
            return name, ERROR_METRICS[name]
        return (name, name) if name in NAMED_ACCURACIES else NOT_LITERAL
    rule = rule_of(m) if isinstance(m, cst.Call) else None
    cls = rule.emit.get("options", {}).get("class", "") if rule is not None and rule.emit.get("transform") == "metric" \
        else ""
    default, kind = {"SparseCategoricalAccuracy": ("sparse_categorical_accuracy", "sparse_categorical_accuracy"),
                     "CategoricalAccuracy": ("categorical_accuracy", "categorical_accuracy"),
                     "MeanAbsoluteError": ("mean_absolute_error", "mae"),
                     "MeanSquaredError": ("mean_squared_error", "mse"),
                     "MeanAbsolutePercentageError": ("mean_absolute_percentage_error", "mape")}.get(cls, ("", ""))
    if not kind or any(a.keyword is None or a.keyword.value != "name" for a in m.args):
        return NOT_LITERAL
    given = next((literal_value(a.value, NOT_LITERAL) for a in m.args), default)
    return (given, kind) if isinstance(given, str) else NOT_LITERAL


# --- the written-out loop -----------------------------------------------------------------------------

def helpers(c: Compiled, loss_options: dict, spell, channels_first: bool = False, shared: bool = True,
            inputs_written: bool = False, loss_args_written: bool = False, class_weights_written: bool = False,
            outputs_channels_first: bool = False, regularized: bool = False, added: bool = False,
            distributed: bool = False) -> str:
    """The fit / evaluate / predict functions for this compile's loss (its input and target needs).
    ``channels_first``: the file's model was converted to NCHW, so image inputs are moved to it;
    ``outputs_channels_first``: its outputs are feature maps it gives channels-first, moved back to Keras's
    channels-last layout where the loop reads them (the loss's class axis, accuracy, predict's arrays);
    ``regularized``: the file's modules have a ``regularization_loss()`` (Keras's weight regularizers), whose
    sum fit and evaluate add to the loss, as Keras adds ``model.losses``; ``added``: modules keep the term their
    forward gave Keras's ``add_loss`` (``self.added_losses``, the subclass pass), which fit and evaluate empty
    before each forward and whose sum they add after it likewise; ``distributed``: the file's MirroredStrategy became DistributedDataParallel (runtime.py), so fit
    trains the model through ``data_parallel(model)`` on this process's share of every global batch and sums its
    history over the processes, and the three functions move batches to the model's device.
    ``c.batches``: a fit / evaluate of the file takes an iterable of (x, y) batches (a DataLoader) or
    counts steps; ``c.callbacks``: a fit takes callbacks; ``c.class_weight``: a fit takes class_weight (each
    sample's loss times its label's weight, the sum over the batch size, as Keras weighs them). Without them the loop is the plainer one.
    ``shared``: with the array conversion every set of these functions calls (written once a file);
    ``inputs_written``: the channels-first conversion is already written (by another set). A plan without a
    loss (``c.loss`` None: a model predicted with, never compiled) gets predict alone."""
    if c.loss is None:
        lines = _conversions(c.names, spell, channels_first, shared, inputs_written)
        x_of = c.names["inputs"] if channels_first else c.names["tensor"]
        return "\n".join(lines + _clearing(_predict(c.names, x_of, spell, outputs_channels_first, c.several,
                                                    c.predict_batches, distributed), added)) + "\n"
    # sparse labels: one per output position, as Keras takes them ((n,) or (n, 1) for (n, classes) outputs)
    target = {"long": "yb.long().reshape(pred.shape[:-1])", "float": "yb.float().view_as(pred)",
              "same": "yb.view_as(pred)"}.get(
        loss_options.get("target", ""), "yb")
    prob = "" if c.from_logits else loss_options.get("probabilities_input", "")
    log, clamp = spell("torch.log"), ".clamp(1e-7, 1 - 1e-7)"
    inp = {"log-clip": f"{log}(pred{clamp})", "clip": f"pred{clamp}"}.get(prob, "logits" if c.activation_logits
                                                                           else "pred")
    # the model's outputs: its last module (the activation) on the logits the loss takes, where Keras uses them
    multi = c.several  # x: a list of arrays, one per input of the model, which takes them in that order
    forward = (["            logits = model[:-1](xb)  # the loss, as Keras's, takes the final activation's input",
                "            pred = model[-1](logits)"] if c.activation_logits
               else [f"            pred = model({'*' if multi else ''}xb)"])
    if added or c.loss[0] == "added":
        forward = ADDED_CLEAR + forward
    if outputs_channels_first:  # a channels-first feature map: back to Keras's layout, as every line below reads it
        forward.append("            pred, logits = pred.movedim(1, -1), logits.movedim(1, -1)" if c.activation_logits
                       else "            pred = pred.movedim(1, -1)  # Keras's channels-last layout")
    # distributed: fit calls the model through DistributedDataParallel (net: the model, or the part of it before its
    # final activation), whose backward averages the gradients over the processes
    fit_forward = [line.replace("model[:-1](xb)", "net(xb)").replace("= model(", "= net(") for line in forward] \
        if distributed else forward
    if loss_options.get("classes_first"):  # the class axis: Keras's last, torch's second (no-op for 2-D)
        inp += ".movedim(-1, 1)"
        target = target if loss_options.get("target") == "long" else f"{target}.movedim(-1, 1)"
    if c.accuracy_kind in _ERROR_SUMS:  # per sample: the mean of its values; summed over the batch
        correct = f"{_ERROR_SUMS[c.accuracy_kind]}.reshape(len(pred), -1).mean(1).sum().item()"
    # each sample's accuracy: the mean over its positions (a sequence's steps, a map's pixels), summed over the batch
    elif loss_options.get("target") == "long":
        correct = "(pred.argmax(-1) == yb.reshape(pred.shape[:-1])).float().reshape(len(pred), -1).mean(1).sum().item()"
    elif loss_options.get("target") == "float":  # Keras's binary accuracy: 0.5, on logits too
        correct = "(yb.float().view_as(pred) == (pred > 0.5).float()).float().reshape(len(pred), -1).mean(1).sum().item()"
    elif c.accuracy_kind == "" and _loss_name(c.loss) != "keras.losses.CategoricalCrossentropy":
        # "accuracy" beside a regression loss: Keras picks the binary accuracy for outputs of last size 1 (an
        # argmax over one column would always agree), the categorical one otherwise
        correct = ("(((pred > 0.5).float() == yb.float().view_as(pred)).float() if pred.shape[-1] == 1 "
                   "else (pred.argmax(-1) == yb.argmax(-1)).float()).reshape(len(pred), -1).mean(1).sum().item()")
    else:
        correct = "(pred.argmax(-1) == yb.argmax(-1)).float().reshape(len(pred), -1).mean(1).sum().item()"
    n = c.names
    # the loss of a batch: a torch loss in torch's order, or a loss function in Keras's (per-sample values, their
    # mean), or a KerasLoss object in Keras's (it reduces them itself; Keras 2's compile gives it 1-D labels of 2-D
    # outputs with a trailing axis, match_dtype_and_rank, Keras 3's as they are)
    labels = "yb.unsqueeze(-1) if yb.dim() == 1 and pred.dim() == 2 else yb" if loss_options.get("keras2_rank") \
        else "yb"
    batch_loss = (f"loss_fn(*{n['loss_args']}(yb, pred)).mean()" if c.loss[0] == "function"
                  else f"loss_fn({labels}, pred)" if c.loss[0] == "object" else f"loss_fn({inp}, {target})")
    penalty = PENALTY_SUM if regularized else ""
    added_sum = ADDED_SUM if added else ""
    # compile without a loss (the kind "added"): Keras's loss is the terms the layers gave add_loss alone (their sum,
    # the regularizers' penalties added as ever); fit(x) / evaluate(x) take no labels
    added_only = c.loss[0] == "added"
    if added_only:
        batch_loss, added_sum = ADDED_SUM, ""
    # ... and Keras 2's History "loss" (and evaluate's) is then the plain mean over the batches: with no compiled loss
    # no batch size weighs the loss metric (measured with tf_keras 2.21; Keras 3 weighs each batch by its samples)
    batch_mean = added_only and c.keras2 and not c.batches and not distributed
    t = spell("torch.as_tensor")
    no_grad = spell("torch.no_grad")
    randperm = spell("torch.randperm")
    arange = spell("torch.arange")
    cat = spell("torch.cat")
    acc = c.accuracy
    name = c.accuracy_name
    general, cbs = c.batches, c.callbacks
    islice = spell("itertools.islice") if general else ""
    lines = _conversions(n, spell, channels_first, shared, inputs_written)
    if c.loss[0] == "function" and not loss_args_written:
        lines += [
            f"def {n['loss_args']}(y_true, y_pred):",
            '    """(y_true, y_pred) as Keras gives a loss function: y_true in y_pred\'s dtype, and of its rank where',
            '    they differ by a trailing axis of size 1 (squeeze_or_expand_to_same_rank)."""',
            "    y_true = y_true.to(y_pred.dtype)",
            "    if y_true.dim() == y_pred.dim() + 1 and y_true.shape[-1] == 1:",
            "        return (y_true, y_pred.unsqueeze(-1)) if y_pred.dim() == 1 else (y_true.squeeze(-1), y_pred)",
            "    if y_pred.dim() == y_true.dim() + 1 and y_pred.shape[-1] == 1:",
            "        return (y_true.unsqueeze(-1), y_pred) if y_true.dim() == 1 else (y_true, y_pred.squeeze(-1))",
            "    return y_true, y_pred",
            "",
            "",
        ]
    x_of = n["inputs"] if channels_first else n["tensor"]
    conv, take, samples, batch_n = _inputs_of(x_of, multi)
    ms = bool(c.metrics)  # compile's metric objects, given as a dict {Keras's name: metric}
    head = ("model, optimizer, scheduler, loss_fn" if c.schedule else "model, optimizer, loss_fn") + (
        ", metrics" if ms else "")
    weighted = c.class_weight
    fit_sw = c.fit_sample_weight and not distributed  # (training.py refuses it where the fit is distributed)
    if weighted and not class_weights_written:
        lines += _class_weight_helper(n, spell)
    if not general and not cbs and not weighted and not fit_sw:
        lines += [
            f"def {n['fit']}({head}, x, y{'=None' if added_only else ''}, batch_size=None, epochs=1, verbose=1, "
            "validation_split=0.0,",
            "        validation_data=None, shuffle=True):",
        ]
    else:
        extra = (", callbacks=None" if cbs else "") + (", class_weight=None" if weighted else "") + (
            ", sample_weight=None" if fit_sw else "") + (
            ", steps_per_epoch=None,\n        validation_steps=None" if general else "")
        lines += [
            f"def {n['fit']}({head}, x, y{'=None' if general else ''}, batch_size=None, epochs=1, "
            "verbose=1, validation_split=0.0,",
            f"        validation_data=None, shuffle=True{extra}):",
        ]
    lines += [
        '    """model.fit as Keras runs it: the last validation_split of the samples held out before shuffling,',
        "    the rest shuffled every epoch, batches of 32 by default; returns the per-epoch averages",
        "    (Keras's History.history)." + (" x: a list of arrays, one per input of the model, batched alike."
                                          if multi else "")
        + ('"""' if not general and not cbs and not c.schedule and not ms else ""),
    ]
    if ms:
        lines += ["    metrics: {name: metric}, each reset every epoch and updated with (y, the model's outputs) of every",
                  "    batch, as Keras updates compile's metrics; its result() joins the history under its name."
                  + ('"""' if not general and not cbs and not c.schedule else "")]
    if c.schedule:
        lines += ["    scheduler: the optimizer's learning-rate schedule, stepped after every update as Keras steps it."
                  + ('"""' if not general and not cbs else "")]
    if general:
        lines += [
            "    x may also be an iterable of (x, y) batches (y None), a DataLoader: read from its start every",
            "    epoch, or steps_per_epoch batches of one iterator that runs on across epochs, started over where",
            "    it runs out (mid-epoch: a warning, and the epoch ends there, as in Keras);",
            "    validation_data likewise, validation_steps batches of it from its start." + ('"""' if not cbs else ""),
        ]
    if cbs:
        lines += [
            "    Callbacks get .model (whose .optimizer is the optimizer) and on_train_begin(), on_epoch_begin(epoch),",
            "    on_epoch_end(epoch, logs), on_train_end(); one that sets model.stop_training = True ends the",
            '    training after that epoch."""',
        ]
    if weighted:
        lines[-1] = lines[-1].removesuffix('"""')
        lines += [
            "    class_weight: {label: weight}; each training sample's loss is multiplied by its label's weight (1.0 for",
            "    a label not in it) and the batch's sum divided by its size, as Keras weighs them (not the metrics', nor",
            '    validation\'s)."""',
        ]
    if fit_sw:
        lines[-1] = lines[-1].removesuffix('"""')
        lines += [
            "    sample_weight: one weight per sample of x; each training sample's loss (the mean over its values) is",
            "    multiplied by its weight and the batch's sum divided by its size, as Keras weighs them (not the",
            "    metrics); validation_split holds out the last samples' weights too, which weigh the validation loss,",
            '    as do the weights of a validation_data (x, y, sample_weight)."""',
        ]
        lines += [
            "    if sample_weight is not None:",
            *(["        if y is None:",
               '            raise ValueError("sample_weight= with a dataset of batches: Keras refuses it too")']
              if general else []),
            f"        sample_weight = {n['tensor']}(sample_weight).reshape(len(y))",
        ]
    no_labels = [
        "    if y is None:  # no labels: the loss is the terms the layers give add_loss (placeholders, never read)",
        f"        y = {spell('torch.zeros')}({samples('x')})",
    ] if added_only and not general else []
    lines += [
        *no_labels,
        "    if validation_split and validation_data is None:",
        f"        split = int({samples('x')} * (1 - validation_split))",
        f"        x, y, validation_data = {take('x', ':split')}, y[:split], ({take('x', 'split:')}, y[split:])",
    ]
    if fit_sw:
        lines += [
            "        if sample_weight is not None:  # Keras holds out the same samples' weights, which weigh val_loss",
            "            sample_weight, validation_data = sample_weight[:split], (*validation_data, sample_weight[split:])",
        ]
    if general:
        lines += ["    if y is not None:", f"        x, y = {conv('x')}, {n['tensor']}(y)"]
    else:
        lines += [f"    x, y = {conv('x')}, {n['tensor']}(y)"]
    lines += [
        "    batch_size = batch_size or 32",
        *([f"    net, rank, world, device = {DATA_PARALLEL}({'model[:-1]' if c.activation_logits else 'model'})",
           "    # under torchrun: this process's share of every global batch of arrays (the same order in every process)",
           f"    sampler = {spell('torch.utils.data.DistributedSampler')}(range({samples('x')}), world, rank, shuffle) "
           f"if world > 1{' and y is not None' if general else ''} else None"] if distributed else []),
        "    history = {" + ", ".join(f'"{k}": []' for k in ["loss", *([name] if acc else [])])
        + (", **{name: [] for name in metrics}" if ms else "") + "}",
    ]
    if cbs:
        lines += CALLBACKS_BEGIN
        if distributed:  # (before on_train_begin: a CSVLogger opens its file there)
            at = lines.index("    for callback in callbacks:", len(lines) - len(CALLBACKS_BEGIN))
            lines[at:at] = [
                "    if rank > 0:  # under torchrun: the callbacks that write files write from the first process only",
                f"        callbacks = [c for c in callbacks if type(c).__name__ not in {FILE_CALLBACKS!r}]"]
    if weighted or fit_sw:
        given = " or ".join(["class_weight is not None"] * weighted + ["sample_weight is not None"] * fit_sw)
        lines += [
            f"    if {given}:  # the same loss, one value per element, which the weights scale",
            f"        per_sample = {spell('copy.copy')}(loss_fn)",
            '        per_sample.reduction = "none"',
        ]
    if general:
        lines += ["    stream = None"]
    lines += [
        "    for epoch in range(epochs):",
        "        model.train()",
    ]
    lines += _frozen_lines(c, spell)
    if ms:
        lines += ["        for metric in metrics.values():", "            metric.reset_state()"]
    if cbs:
        lines += CALLBACKS_EPOCH
    if general and distributed:
        lines += [
            "        if y is not None:  # arrays: batches of samples",
            "            if sampler is not None:",
            "                sampler.set_epoch(epoch)",
            f"                order = {spell('torch.tensor')}(list(sampler))",
            "            else:",
            f"                order = {randperm}({samples('x')}) if shuffle else {arange}({samples('x')})",
            "            step = batch_size // world",
            f"            batches = (({take('x', 'b')}, y[b]) for b in (order[i:i + step] for i in range(0, len(order), "
            "step)))",
        ]
    elif general:
        lines += [
            "        if y is not None:  # arrays: batches of samples (the first steps_per_epoch of them, as Keras's one epoch)",
            f"            order = {randperm}({samples('x')}) if shuffle else {arange}({samples('x')})",
            f"            batches = {islice}((({take('x', 'b')}, y[b]) for b in (order[i:i + batch_size] for i in range(0, "
            f"{samples('x')}, batch_size))), steps_per_epoch)",
            *(["            if sample_weight is not None:  # each batch's samples' weights, in the batches' order",
               "                weights = iter(sample_weight[order].split(batch_size))"] if fit_sw else []),
        ]
    if general:
        lines += [
            "        elif steps_per_epoch is None:",
            "            batches = iter(x)",
            "        else:  # one iterator across epochs, as Keras's, started over where it runs out",
            "            stream = stream or iter(x)",
            "            first = next(stream, None)",
            "            if first is None:  # it ran out at the last epoch's end: Keras starts the data over",
            "                stream = iter(x)",
            "                first = next(stream, None)",
            f"            batches = {islice}({spell('itertools.chain')}([first], stream), steps_per_epoch)",
            "        total = correct = seen = steps = 0.0",
            "        for xb, yb in batches:",
            "            steps += 1",
            f"            xb, yb = {conv('xb')}, {n['tensor']}(yb)",
        ]
        if distributed:
            split = "[a.tensor_split(world)[rank] for a in xb]" if multi else "xb.tensor_split(world)[rank]"
            lines += [
                "            if y is None and world > 1:  # a dataset's global batch: this process's share, as "
                "MirroredStrategy splits it",
                f"                xb, yb = {split}, yb.tensor_split(world)[rank]",
                f"            xb, yb = {_moved('xb', multi)}, yb.to(device)",
            ]
        count = batch_n
    elif distributed:
        lines += [
            "        if sampler is not None:",
            "            sampler.set_epoch(epoch)",
            f"            order = {spell('torch.tensor')}(list(sampler))",
            "        else:",
            f"            order = {randperm}({samples('x')}) if shuffle else {arange}({samples('x')})",
            "        total = correct = seen = 0.0",
            "        for start in range(0, len(order), batch_size // world):",
            "            batch = order[start:start + batch_size // world]",
            f"            xb, yb = {_moved(take('x', 'batch'), multi)}, y[batch].to(device)",
        ]
        count = "len(batch)"
    else:
        lines += [
            f"        order = {randperm}({samples('x')}) if shuffle else {arange}({samples('x')})",
            "        total = correct = 0.0",
            f"        for start in range(0, {samples('x')}, batch_size):",
            "            batch = order[start:start + batch_size]",
            f"            xb, yb = {take('x', 'batch')}, y[batch]",
        ]
        count = "len(batch)"
    lines += [
        "            optimizer.zero_grad()",
        *fit_forward,
        *([f"            if class_weight is None:",
           f"                loss = {batch_loss}",
           "            else:  # each sample's loss (the mean over its values) times its label's weight, over the batch",
           f"                losses = {batch_loss.replace('loss_fn(', 'per_sample(', 1)}.reshape(len(pred), -1).mean(1)",
           f"                loss = (losses * {n['class_weights']}(yb, class_weight)).mean()"]
          if weighted and not fit_sw else _sample_weighed(batch_loss, n, weighted, general)
          if fit_sw else [f"            loss = {batch_loss}"]),
        *([f"            loss = loss + {penalty}  # the layers' regularizers: Keras adds them (model.losses)"]
          if penalty else []),
        *(["            # the terms the layers gave add_loss in this forward: Keras adds them to the loss",
           f"            loss = loss + {added_sum}"] if added_sum else []),
        "            loss.backward()",
        *_clip_lines(c.clips, spell),
        "            optimizer.step()",
        *constraint_lines(c, "            "),
        *(["            scheduler.step()"] if c.schedule else []),
        f"            total += loss.item() * {'1' if batch_mean else count}",
    ]
    if general or distributed:
        lines.append(f"            seen += {batch_n if general else count}")
    if acc:
        lines.append(f"            correct += {correct}")
    if ms:
        lines += _metric_updates(c)
    size = "seen" if general else samples("x")  # (evaluate's too)
    if batch_mean:  # (the number of batches)
        size = f"{spell('math.ceil')}({samples('x')} / batch_size)"
    fit_size = "seen" if distributed else size
    if distributed:
        sums = "total, correct, seen" if acc else "total, seen"
        lines += [
            "        if world > 1:  # the sums over every process: Keras's history is the global batches'",
            f"            sums = {spell('torch.tensor')}([{sums}], dtype={spell('torch.float64')}, device=device)",
            f"            {spell('torch.distributed.all_reduce')}(sums)",
            f"            {sums} = sums.tolist()",
        ]
    if distributed and ms:
        lines += ["        if world > 1:  # each metric's state summed over the processes, as Keras sums its replicas'",
                  "            for metric in metrics.values():",
                  f"                {ALL_REDUCE_METRIC}(metric, device)"]
    if general:
        lines += [
            "        if y is None and steps_per_epoch is not None and steps < steps_per_epoch:",
            f"            {spell('warnings.warn')}(\"Your input ran out of data; interrupting training\")  # Keras: this "
            "epoch ends here, the next starts the data over",
            "            stream = None",
        ]
    lines.append(f'        history["loss"].append(total / {fit_size})')
    if acc:
        lines.append(f'        history["{name}"].append(correct / {fit_size})')
    if ms:
        lines += ["        for name, metric in metrics.items():",
                  "            history[name].append(float(metric.result()))"]
    with_metrics = ", metrics" if ms else ""
    lines += ["        if validation_data is not None:"]
    if fit_sw:  # a third element of validation_data: its samples' weights, which weigh the validation loss
        data = "data" if general else "validation_data"
        lines += [
            *(["            data = validation_data if isinstance(validation_data, tuple) else (validation_data, None)"]
              if general else []),
            f"            val = {n['evaluate']}(model, loss_fn{with_metrics}, *{data}[:2], batch_size=batch_size, verbose=0"
            + (", steps=validation_steps" if general else "") + ",",
            f"                   {' ' * len(n['evaluate'])}sample_weight={data}[2] if len({data}) > 2 else None)",
        ]
    elif general:
        lines += [
            "            data = validation_data if isinstance(validation_data, tuple) else (validation_data, None)",
            f"            val = {n['evaluate']}(model, loss_fn{with_metrics}, *data, batch_size=batch_size, verbose=0, "
            "steps=validation_steps)",
        ]
    else:
        lines += [f"            val = {n['evaluate']}(model, loss_fn{with_metrics}, *validation_data, batch_size=batch_size, "
                  "verbose=0)" if ms else
                  f"            val = {n['evaluate']}(model, loss_fn, *validation_data, batch_size=batch_size, verbose=0)"]
    if ms:
        lines += ['            for name, value in zip(["loss", *metrics], val):',
                  '                history.setdefault(f"val_{name}", []).append(value)']
    elif acc:
        lines += ['            history.setdefault("val_loss", []).append(val[0])',
                  f'            history.setdefault("val_{name}", []).append(val[1])']
    else:
        lines += ['            history.setdefault("val_loss", []).append(val)']
    lines += [
        "        if verbose and rank == 0:" if distributed else "        if verbose:",
        '            print(f"Epoch {epoch + 1}/{epochs} - " + " - ".join(f"{k}: {v[-1]:.4f}" for k, v in history.items()))',
    ]
    if cbs:
        lines += CALLBACKS_END
    lines += [
        "    return history",
        "",
        "",
    ]
    what = "the mean loss" + ((" and " + ("accuracy" if c.accuracy_kind not in _ERROR_SUMS else name)) if acc else "")
    if ms:
        what = "[the mean loss, *each metric's result]"
    reset = ["    for metric in metrics.values():", "        metric.reset_state()"] if ms else []
    device_line = ["    device = next(model.parameters()).device  # (the process's GPU under torchrun)"] if distributed else []
    as_dict = ", return_dict=False" if c.return_dict else ""  # {Keras's name: value}, as evaluate(return_dict=True)
    sw = c.sample_weight  # evaluate takes sample_weight: each sample's loss times its weight
    if sw:
        as_dict = ", sample_weight=None" + as_dict
    sw_doc = ("\n    sample_weight: each sample's loss (the mean over its values) times its weight, summed and divided by the"
              "\n    number of samples, as Keras weighs it (the metrics unweighted)." if sw else "")
    weighing = [
        "    if sample_weight is not None:  # the same loss, one value per element, which the weights scale",
        *(["        if y is None:",
           '            raise ValueError("sample_weight= with a dataset of batches: Keras refuses it too")'] if general
          else []),
        f"        weights = iter({n['tensor']}(sample_weight).reshape(len(y)).split(batch_size))",
        f"        per_sample = {spell('copy.copy')}(loss_fn)",
        '        per_sample.reduction = "none"',
    ] if sw else []
    weighed = [
        "            if sample_weight is None:",
        f"                loss = {batch_loss}",
        "            else:  # each sample's loss (the mean over its values) times its weight, over the batch",
        f"                loss = ({batch_loss.replace('loss_fn(', 'per_sample(', 1)}.reshape(len(pred), -1).mean(1)",
        "                        * next(weights)).mean()",
    ] if sw else []
    eval_loss = "loss" if sw else batch_loss
    if general:
        lines += [
            f"def {n['evaluate']}(model, loss_fn{with_metrics}, x, y=None, batch_size=None, verbose=1, steps=None{as_dict}):",
            f'    """model.evaluate: {what} over the samples, in inference mode; x may be an iterable of',
            f'    (x, y) batches (y None), read from its start, steps batches of it when steps is given.{sw_doc}"""',
            "    batch_size = batch_size or 32",
            "    if y is not None:",
            f"        x, y = {conv('x')}, {n['tensor']}(y)",
            f"        batches = {islice}((({take('x', 'i:i + batch_size')}, y[i:i + batch_size]) for i in range(0, "
            f"{samples('x')}, batch_size)), steps)  # (the first steps batches, as Keras reads arrays)",
            "    else:",
            f"        batches = {islice}(iter(x), steps)",
            *device_line,
            *weighing,
            "    model.eval()",
            *reset,
            "    total = correct = seen = 0.0",
            f"    with {no_grad}():",
            "        for xb, yb in batches:",
            f"            xb, yb = {conv('xb')}, {n['tensor']}(yb)",
            *([f"            xb, yb = {_moved('xb', multi)}, yb.to(device)"] if distributed else []),
            *forward,
            *weighed,
            *_total(eval_loss, penalty, bool(added_sum), batch_n),
            f"            seen += {batch_n}",
        ]
    else:
        lines += [
            f"def {n['evaluate']}(model, loss_fn{with_metrics}, x, y{'=None' if added_only else ''}, batch_size=None, "
            f"verbose=1{as_dict}):",
            f'    """model.evaluate: {what} over the samples, in inference mode.{sw_doc}"""',
            *no_labels,
            f"    x, y = {conv('x')}, {n['tensor']}(y)",
            "    batch_size = batch_size or 32",
            *device_line,
            *weighing,
            "    model.eval()",
            *reset,
            "    total = correct = 0.0",
            f"    with {no_grad}():",
            f"        for start in range(0, {samples('x')}, batch_size):",
            f"            xb, yb = {take('x', 'start:start + batch_size')}, y[start:start + batch_size]",
            *([f"            xb, yb = {_moved('xb', multi)}, yb.to(device)"] if distributed else []),
            *forward,
            *weighed,
            *_total(eval_loss, penalty, bool(added_sum), "1" if batch_mean else batch_n),
        ]
    if acc:
        lines += [f"            correct += {correct}"]
        result = f"[total / {size}, correct / {size}]"
        keyed = f'dict(zip(["loss", "{name}"], result))'  # (the history's keys, written alike)
    elif ms:
        lines += _metric_updates(c)
        result = f"[total / {size}, *(float(metric.result()) for metric in metrics.values())]"
        keyed = 'dict(zip(["loss", *metrics], result))'
    else:
        result = f"total / {size}"
        keyed = '{"loss": result}'
    lines += [
        f"    result = {result}",
        f"    if verbose{' and ' + MAIN_PROCESS + '()' if distributed else ''}:",
        '        print(f"evaluate - {result}")',
        *([f"    return {keyed} if return_dict else result"] if c.return_dict else ["    return result"]),
        "",
        "",
        *_clearing(_predict(n, x_of, spell, outputs_channels_first, multi, c.predict_batches, distributed),
                   added or added_only),
    ]
    if c.train_batch:
        lines += ["", "", *_train_on_batch(c, head, what, conv, forward, batch_loss, penalty, added_sum, correct,
                                           batch_n, spell)]
    return "\n".join(lines) + "\n"


def _train_on_batch(c: Compiled, head: str, what: str, conv, forward: list[str], batch_loss: str, penalty: str,
                    added_sum: str, correct: str, batch_n: str, spell) -> list[str]:
    """The written train_on_batch: fit's step on one batch (x, y), the whole batch at once. Keras 3's
    train_on_batch resets the metrics, then updates the model once; it returns the loss (the layers' regularizers
    and added losses included) and the metrics of the outputs the update was computed from, before the update: a
    float, or [loss, *metrics] (a dict by Keras's names with return_dict=True)."""
    n = c.names
    what = what.replace("the mean loss", "the loss")
    inner = [line[8:] for line in forward]  # fit's lines, one loop level less (12 → 4 spaces)
    lines = [
        f"def {n['train_on_batch']}({head}, x, y{', sample_weight=None' if c.sample_weight else ''}, return_dict=False):",
        '    """model.train_on_batch: one update of the model on the batch (x, y), in training mode; returns',
        f"    {what} of the batch, computed before the update (as {{Keras's name: value}} with return_dict)."
        + (" x: a list of arrays, one per input of the model." if c.several else "")
        + ("\n    sample_weight: each sample's loss (the mean over its values) times its weight, the sum over the batch size,"
           "\n    as Keras weighs it (the metrics unweighted)." if c.sample_weight else "") + '"""',
        f"    xb, yb = {conv('x')}, {n['tensor']}(y)",
        "    model.train()",
    ]
    lines += _frozen_lines(c, spell, indent="    ")
    if c.metrics:
        lines += ["    for metric in metrics.values():", "        metric.reset_state()"]
    lines += [
        "    optimizer.zero_grad()",
        *inner,
        *([f"    if sample_weight is None:",
           f"        loss = {batch_loss}",
           "    else:  # the same loss, one value per element: each sample's mean times its weight, over the batch",
           f"        per_sample = {spell('copy.copy')}(loss_fn)",
           '        per_sample.reduction = "none"',
           f"        losses = {batch_loss.replace('loss_fn(', 'per_sample(', 1)}.reshape(len(pred), -1).mean(1)",
           f"        loss = (losses * {n['tensor']}(sample_weight).reshape(len(pred))).mean()"]
          if c.sample_weight else [f"    loss = {batch_loss}"]),
        *([f"    loss = loss + {penalty}  # the layers' regularizers: Keras adds them (model.losses)"] if penalty else []),
        *([f"    loss = loss + {added_sum}  # the terms the layers gave add_loss"] if added_sum else []),
        "    loss.backward()",
        *(line[8:] for line in _clip_lines(c.clips, spell)),
        "    optimizer.step()",
        *constraint_lines(c, "    "),
        *(["    scheduler.step()"] if c.schedule else []),
    ]
    if c.accuracy:
        lines += [f"    correct = {correct}", f"    result = [loss.item(), correct / {batch_n}]",
                  f'    keys = ["loss", "{c.accuracy_name}"]']
    elif c.metrics:
        lines += [line[8:] for line in _metric_updates(c)]
        lines += ["    result = [loss.item(), *(float(metric.result()) for metric in metrics.values())]",
                  '    keys = ["loss", *metrics]']
    else:
        lines += ["    result = loss.item()",
                  "    if return_dict:",
                  '        return {"loss": result}']
        return lines + ["    return result"]
    return lines + ["    return dict(zip(keys, result)) if return_dict else result"]


def _frozen_lines(c: Compiled, spell, indent: str = "        ") -> list[str]:
    """The lines after model.train() (fit's, at ``indent``; train_on_batch's) where the file freezes a layer and has
    BatchNormalization: Keras runs a frozen (trainable = False) BatchNormalization in inference mode."""
    if not c.frozen_batchnorm:
        return []
    norms = ", ".join(spell(f"torch.nn.BatchNorm{d}d") for d in (1, 2, 3))
    return [f"{indent}for module in model.modules():  # a frozen BatchNorm keeps its moving statistics, as Keras's",
            f"{indent}    if isinstance(module, ({norms})) and module.affine and not any(",
            f"{indent}            p.requires_grad for p in module.parameters()):",
            f"{indent}        module.eval()"]


def _output_loss(options: dict, from_logits: bool, name: str, i: int) -> str:
    """One output's loss of a batch: the torch loss ``loss_fn[name]`` of the model's i-th output and its labels, each
    prepared as the single-output loop prepares them (labels' dtype and shape, probabilities clipped as Keras
    clips them, the class axis second)."""
    p, y = f"pred[{i}]", f"yb[{i}]"
    target = {"long": f"{y}.long().reshape({p}.shape[:-1])", "float": f"{y}.float().view_as({p})",
              "same": f"{y}.view_as({p})"}.get(options.get("target", ""), y)
    prob = "" if from_logits else options.get("probabilities_input", "")
    inp = {"log-clip": f"torch.log({p}.clamp(1e-7, 1 - 1e-7))", "clip": f"{p}.clamp(1e-7, 1 - 1e-7)"}.get(prob, p)
    if options.get("classes_first"):
        inp += ".movedim(-1, 1)"
        target = target if options.get("target") == "long" else f"{target}.movedim(-1, 1)"
    return f"loss_fn[{quoted(name)}]({inp}, {target})"


def quoted(name: str) -> str:
    """A string literal of ``name``, in double quotes as the written code has them."""
    return f'"{name}"' if '"' not in name and "\\" not in name else repr(name)


def multi_helpers(c: Compiled, options: list, spell, shared: bool = True, regularized: bool = False,
                  added: bool = False) -> str:
    """fit / evaluate / predict of a model of several outputs compiled with a loss per output (``c.outputs``;
    ``options``: each output's loss options). Keras's semantics: the loss of a batch is the sum of each output's loss
    times its loss_weights= factor (the layers' regularizers and add_loss terms added, as Keras adds model.losses);
    y is a list of arrays in the outputs' order or a dict by the outputs' names; the History holds "loss" (the
    batches' losses averaged by samples) and "<output>_loss" (each output's own loss, unweighted: Keras 3 averages
    them over the batches, each batch once; Keras 2 by samples), and val_ likewise; evaluate returns
    [loss, *each output's loss, *each metric] (metrics: "<output>_<metric>", each on its output, by samples). Arrays only
    (batches and class weights stay refused), callbacks as fit's; a model
    of several inputs (``c.several``) takes x as a list of arrays, batched alike, and is called ``model(*xb)``."""
    n = c.names
    t, no_grad, randperm, arange = (spell("torch.as_tensor"), spell("torch.no_grad"), spell("torch.randperm"),
                                    spell("torch.arange"))
    log = spell("torch.log")
    names = [o[0] for o in c.outputs]
    losses = ", ".join(_output_loss(opts, o[2], o[0], i).replace("torch.log(", f"{log}(")
                       for i, (o, opts) in enumerate(zip(c.outputs, options)))
    total = " + ".join(f"{o[3]} * losses[{i}]" if o[3] else f"losses[{i}]" for i, o in enumerate(c.outputs))
    extra = []
    if regularized:
        extra.append(PENALTY_SUM)
    if added:
        extra.append(ADDED_SUM)
    keys = ", ".join(f'"{k}_loss"' for k in (c.history_names or names))
    lines = _conversions(n, spell, False, shared, True)
    conv, take, samples, _ = _inputs_of(n["tensor"], c.several)  # several inputs: x a list of arrays
    star = "*" if c.several else ""
    # a dict of outputs: a list in loss_fn's order (its keys sorted, Keras's)
    by_name = ["            pred = [pred[name] for name in loss_fn]  # the outputs by their keys, in Keras's order"] \
        if c.dict_outputs else []
    ms = bool(c.metrics)  # each output's metrics: {Keras's name: metric}, each updated with its output's (y, pred)
    with_metrics = ", metrics" if ms else ""
    metric_lines = [
        f"            for at, metric in zip({list(c.metric_outputs)}, metrics.values()):  # the output it is for",
        "                metric.update_state(yb[at], pred[at])",
    ] if ms else []
    reset = ["    for metric in metrics.values():", "        metric.reset_state()"] if ms else []
    as_list = [
        "    if isinstance(y, dict):  # by the outputs' names, as Keras matches them",
        "        y = [y[name] for name in loss_fn]",
        "    elif not isinstance(y, (list, tuple)) or len(y) != len(loss_fn):",
        f'        raise TypeError("y: a list of {len(names)} arrays, one per output of the model, or a dict by their names")',
    ]
    loss_lines = [
        f"            losses = [{losses}]",
        f"            loss = {total}",
        *(f"            loss = loss + {e}" for e in extra),
    ]
    lines += [
        f"def {n['fit']}(model, optimizer, loss_fn{with_metrics}, x, y, batch_size=None, epochs=1, verbose=1, validation_split=0.0,",
        f"        validation_data=None, shuffle=True{', callbacks=None' if c.callbacks else ''}):",
        '    """model.fit of a model of several outputs as Keras runs it: loss_fn {output name: its loss}, y a list of',
        "    arrays in the outputs' order (or a dict by their names); each batch's loss is the sum of each output's loss",
        "    times its loss_weights factor. The last validation_split of the samples held out before shuffling, the rest",
        "    shuffled every epoch, batches of 32 by default; returns Keras's History.history: \"loss\" averaged over the",
        "    samples, \"<output>_loss\" each output's unweighted loss averaged over the "
        + ("samples (Keras 2)." if c.keras2 else "batches (Keras 3: each\n    batch counts once).")
        + ("\n    Callbacks get .model (whose .optimizer is the optimizer) and on_train_begin(), on_epoch_begin(epoch),"
           "\n    on_epoch_end(epoch, logs), on_train_end(); one that sets model.stop_training = True ends the"
           "\n    training after that epoch." if c.callbacks else "")
        + ("\n    metrics: {\"<output>_<metric>\": metric} (Keras's History names), each reset every epoch and updated"
           "\n    with its output's labels and predictions of every batch; its result() joins the history." if ms else "")
        + '"""',
        *as_list,
        "    if validation_split and validation_data is None:",
        f"        split = int({samples('x')} * (1 - validation_split))",
        f"        x, y, validation_data = {take('x', ':split')}, [a[:split] for a in y], ({take('x', 'split:')}, "
        "[a[split:] for a in y])",
        f"    x, y = {conv('x')}, [{n['tensor']}(a) for a in y]",
        "    batch_size = batch_size or 32",
        f'    keys = ["loss", {keys}]',
        "    history = {key: [] for key in keys}",
        *(["    history.update({name: [] for name in metrics})"] if ms else []),
        *(CALLBACKS_BEGIN if c.callbacks else []),
        "    for epoch in range(epochs):",
        "        model.train()",
        *_frozen_lines(c, spell),
        *(CALLBACKS_EPOCH if c.callbacks else []),
        *(["    " + line for line in reset]),
        f"        order = {randperm}({samples('x')}) if shuffle else {arange}({samples('x')})",
        "        sums = [0.0] * len(keys)",
        "        steps = 0",
        f"        for start in range(0, {samples('x')}, batch_size):",
        "            batch = order[start:start + batch_size]",
        f"            xb, yb = {take('x', 'batch')}, [a[batch] for a in y]",
        "            optimizer.zero_grad()",
        *(ADDED_CLEAR if added else []),
        f"            pred = model({star}xb)",
        *by_name,
        *loss_lines,
        "            loss.backward()",
        *_clip_lines(c.clips, spell),
        "            optimizer.step()",
        *constraint_lines(c, "            "),
        "            sums[0] += loss.item() * len(batch)",
        "            for i, value in enumerate(losses, 1):",
        f"                sums[i] += value.item(){' * len(batch)' if c.keras2 else ''}",
        *metric_lines,
        "            steps += 1",
        f"        history[\"loss\"].append(sums[0] / {samples('x')})",
        "        for key, value in zip(keys[1:], sums[1:]):",
        f"            history[key].append(value / {samples('x') if c.keras2 else 'steps'})",
        *(["        for name, metric in metrics.items():",
           "            history[name].append(float(metric.result()))"] if ms else []),
        "        if validation_data is not None:",
        f"            val = {n['evaluate']}(model, loss_fn{with_metrics}, *validation_data, batch_size=batch_size, verbose=0)",
        f"            for key, value in zip({'[*keys, *metrics]' if ms else 'keys'}, val):",
        '                history.setdefault(f"val_{key}", []).append(value)',
        "        if verbose:",
        '            print(f"Epoch {epoch + 1}/{epochs} - " + " - ".join(f"{k}: {v[-1]:.4f}" for k, v in history.items()))',
        *(CALLBACKS_END if c.callbacks else []),
        "    return history",
        "",
        "",
        f"def {n['evaluate']}(model, loss_fn{with_metrics}, x, y, batch_size=None, verbose=1{', return_dict=False' if c.return_dict else ''}):",
        '    """model.evaluate of a model of several outputs: [the mean loss, *each output\'s loss] over the samples (each',
        "    output's averaged over the " + ("samples" if c.keras2 else "batches, as Keras 3 does") + "), in inference mode"
        + (";\n    then each metric's result, over the samples." if ms else ".") + '"""',
        *as_list,
        f"    x, y = {conv('x')}, [{n['tensor']}(a) for a in y]",
        "    batch_size = batch_size or 32",
        "    model.eval()",
        *reset,
        f"    sums = [0.0] * {len(names) + 1}",
        "    steps = 0",
        f"    with {no_grad}():",
        f"        for start in range(0, {samples('x')}, batch_size):",
        f"            xb, yb = {take('x', 'start:start + batch_size')}, [a[start:start + batch_size] for a in y]",
        *(ADDED_CLEAR if added else []),
        f"            pred = model({star}xb)",
        *by_name,
        *loss_lines,
        "            sums[0] += loss.item() * len(yb[0])",
        "            for i, value in enumerate(losses, 1):",
        f"                sums[i] += value.item(){' * len(yb[0])' if c.keras2 else ''}",
        *metric_lines,
        "            steps += 1",
        f"    result = [sums[0] / {samples('x')}, *(value / {samples('x') if c.keras2 else 'steps'} for value in sums[1:])"
        + (", *(float(metric.result()) for metric in metrics.values())" if ms else "") + "]",
        "    if verbose:",
        '        print(f"evaluate - {result}")',
        *([f'    return dict(zip(["loss", {keys}{", *metrics" if ms else ""}], result)) if return_dict else result']
          if c.return_dict
          else ["    return result"]),
        "",
        "",
        *_clearing([
        f"def {n['predict']}(model, x, batch_size=None, verbose=1):",
        '    """model.predict of a model of several outputs: ' + ("a dict of NumPy arrays by the outputs' keys"
                                                                if c.dict_outputs else "a list of NumPy arrays, one per output")
        + ', in inference mode."""',
        f"    x = {conv('x')}",
        "    batch_size = batch_size or 32",
        "    model.eval()",
        f"    with {no_grad}():",
        f"        outs = [model({star}{take('x', 'start:start + batch_size')}) for start in range(0, {samples('x')}, batch_size)]",
        *([f"    return {{name: {spell('torch.cat')}([out[name] for out in outs]).detach().numpy() for name in outs[0]}}"]
          if c.dict_outputs else
          [f"    return [{spell('torch.cat')}(list(parts)).detach().numpy() for parts in zip(*outs)]"]),
        ], added),
        "",
        "",
    ]
    return "\n".join(lines) + "\n"


def _total(batch_loss: str, penalty: str, added: bool, count: str) -> list[str]:
    """evaluate's running sum of a batch's loss: with the layers' regularizers and the terms they gave add_loss."""
    if added:
        return [f"            loss = {batch_loss} + {' + '.join(p for p in (penalty, 'sum(') if p)}",
                f"                {ADDED_SUM[len('sum('):]}",
                f"            total += loss.item() * {count}"]
    return [f"            total += {f'({batch_loss} + {penalty})' if penalty else batch_loss}.item() * {count}"]


def _conversions(n: dict, spell, channels_first: bool, shared: bool, inputs_written: bool) -> list[str]:
    """The array conversion the written functions call (``shared``: written by this set) and, for a
    channels-first model, the images' (unless ``inputs_written``)."""
    lines = [
        f"def {n['tensor']}(a):",
        '    """An array as Keras feeds it: floats in float32."""',
        f"    a = {spell('torch.as_tensor')}(a)",
        "    return a.float() if a.is_floating_point() else a",
        "",
        "",
    ] if shared else []
    if channels_first and not inputs_written:
        lines += [
            f"def {n['inputs']}(x):",
            '    """Images as the translated model takes them: channels-first, (N, H, W, C) → (N, C, H, W)."""',
            f"    x = {n['tensor']}(x)",
            "    return x.movedim(-1, 1) if x.dim() >= 3 else x",
            "",
            "",
        ]
    return lines


def _inputs_of(x_of: str, multi: bool) -> tuple:
    """How the written functions read x: (its conversion, a batch of it, its number of samples, a batch's),
    each a function of the variable's name (and the index); ``multi``: x is a list of arrays, one per input
    of the model, each batched with the same indices."""
    if multi:
        return (lambda v: f"[{x_of}(a) for a in {v}]", lambda v, i: f"[a[{i}] for a in {v}]",
                lambda v: f"len({v}[0])", "len(yb)")
    return lambda v: f"{x_of}({v})", lambda v, i: f"{v}[{i}]", lambda v: f"len({v})", "len(xb)"


def _moved(value: str, multi: bool) -> str:
    """A batch of x on the model's device (``multi``: a list of arrays, one per input)."""
    return f"[a.to(device) for a in {value}]" if multi else f"{value}.to(device)"


def _predict(n: dict, x_of: str, spell, outputs_channels_first: bool = False, multi: bool = False,
             batches: bool = False, distributed: bool = False) -> list[str]:
    """The written predict; ``batches``: x may also be a dataset (a translated tf.data pipeline, a DataLoader),
    whose batches it runs the model on, each a batch's input or a tuple whose first item is (Keras's (x, y));
    ``distributed``: each batch on the model's device, the outputs back on the CPU."""
    back = ".movedim(1, -1)" if outputs_channels_first else ""  # channels-first feature maps: Keras's layout
    conv, take, samples, _ = _inputs_of(x_of, multi)
    batch = (lambda v: _moved(v, multi)) if distributed else (lambda v: v)  # a batch on the model's device
    back += ".cpu()" if distributed else ""
    star = "*" if multi else ""
    iterated = [
        f"        if isinstance(x, ({spell('torch.utils.data.Dataset')}, {spell('torch.utils.data.DataLoader')})):",
        "            inputs = (b[0] if isinstance(b, (tuple, list)) else b for b in x)",
        f"            return {spell('torch.cat')}([model({star}{batch(conv('xb'))}){back} for xb in inputs]).detach().numpy()",
    ] if batches else []
    return [
        f"def {n['predict']}(model, x, batch_size=None, verbose=1):",
        '    """model.predict: the outputs for x in batches, in inference mode, as a NumPy array'
        + ('\n    (x: a list of arrays, one per input of the model, in its order)' if multi else '')
        + ('; x may also be a dataset of\n    batches, each the input or a tuple (x, y) of it."""' if batches
           else '."""' if not multi else '."""'),
        *([] if batches else [f"    x = {conv('x')}"]),
        "    batch_size = batch_size or 32",
        *(["    device = next(model.parameters()).device  # (the process's GPU under torchrun)"] if distributed else []),
        "    model.eval()",
        f"    with {spell('torch.no_grad')}():",
        *iterated,
        *([f"        x = {conv('x')}"] if batches else []),
        *([f"        return {spell('torch.cat')}([model(*{batch(take('x', 'start:start + batch_size'))}){back}",
           f"{' ' * (len(spell('torch.cat')) + 17)}for start in range(0, {samples('x')}, batch_size)]).detach().numpy()"]
          if multi else
          [f"        return {spell('torch.cat')}([model({batch('x[start:start + batch_size]')}){back} for start in range(0, len(x), "
           "batch_size)]).detach().numpy()"]),
    ]


def _sample_weighed(batch_loss: str, n: dict, weighted: bool, general: bool) -> list[str]:
    """fit's loss of a batch where it takes sample_weight (and class_weight): each sample's loss (the mean of its
    values) times its weight (and its label's weight: Keras multiplies the two), the batch's sum over its size."""
    none = "sample_weight is None" + (" and class_weight is None" if weighted else "")
    weights = "next(weights)" if general else "sample_weight[batch]"
    return [
        f"            if {none}:",
        f"                loss = {batch_loss}",
        "            else:  # each sample's loss (the mean over its values) times its weight, over the batch",
        f"                losses = {batch_loss.replace('loss_fn(', 'per_sample(', 1)}.reshape(len(pred), -1).mean(1)",
        *([f"                if class_weight is not None:",
           f"                    losses = losses * {n['class_weights']}(yb, class_weight)",
           "                if sample_weight is not None:",
           f"                    losses = losses * {weights}",
           "                loss = losses.mean()"] if weighted else [f"                loss = (losses * {weights}).mean()"]),
    ]


def _class_weight_helper(n: dict, spell) -> list[str]:
    """The function that gives each sample of a batch its weight from fit's class_weight, as Keras's
    class_weight_to_sample_weights does (the label: the argmax of a one-hot row, rounded)."""
    return [
        f"def {n['class_weights']}(y, class_weight):",
        '    """Keras\'s class_weight → one weight per sample: its label\'s weight, 1.0 for a label not in',
        "    class_weight; the label is the argmax of a one-hot row (last axis over 1), else the value rounded.\"\"\"",
        "    labels = y.argmax(-1) if y.dim() > 1 and y.shape[-1] != 1 else y.squeeze(-1) if y.dim() > 1 else y",
        f"    return {spell('torch.tensor')}([float(class_weight.get(int(k), 1.0)) for k in labels.double().round().tolist()], device=y.device)",
        "",
        "",
    ]


def _clip_lines(clips: dict, spell) -> list[str]:
    """The optimizer's clipping, between backward() and step() (Keras clips in apply_gradients):
    clipnorm each parameter's gradient on its own, global_clipnorm all of them together."""
    out = []
    for kind, value in clips.items():
        if kind == "clipnorm":
            out += ["            for param in model.parameters():",
                    f"                {spell('torch.nn.utils.clip_grad_norm_')}(param, {value})"]
        elif kind == "global_clipnorm":
            out.append(f"            {spell('torch.nn.utils.clip_grad_norm_')}(model.parameters(), {value})")
        else:
            out.append(f"            {spell('torch.nn.utils.clip_grad_value_')}(model.parameters(), {value})")
    return out


def _metric_updates(c: Compiled) -> list[str]:
    """The loop's lines updating compile's metric objects with a batch (a cross-entropy's with the logits the
    loop split off, as Keras's takes them from the final activation)."""
    if not c.logit_metrics:
        return ["            for metric in metrics.values():", "                metric.update_state(yb, pred)"]
    return ["            for metric in metrics.values():",
            "                if isinstance(metric, Crossentropy):  # Keras's takes the final activation's input",
            "                    metric.update_state(yb, pred, logits=logits)",
            "                else:",
            "                    metric.update_state(yb, pred)"]


# --- metrics: plain running sums (no extra dependency; torchmetrics' accuracy needs num_classes) --------

METRIC_CLASSES = {
    "Mean": '''class Mean:
    """keras.metrics.Mean: the running mean of every value it is given; reset_state() starts over."""

    def __init__(self):
        self.reset_state()

    def reset_state(self):
        self.total, self.count = 0.0, 0

    def update_state(self, values):
        values = torch.as_tensor(values).detach()
        self.total += values.sum().item()
        self.count += values.numel()

    def result(self):
        return torch.tensor(self.total / self.count if self.count else 0.0)

    def __call__(self, *args):
        self.update_state(*args)
        return self.result()
''',
    "MeanMetricWrapper": '''class MeanMetricWrapper(Mean):
    """keras.metrics.MeanMetricWrapper, which Keras wraps a metric function given to compile in: the running
    mean of the values fn(y_true, y_pred) returns. Keras 2's compile (keras2=True) gives fn 1-D labels of 2-D
    outputs with a trailing axis, both as float32, of one rank (a trailing axis of size 1 dropped where they
    differ); Keras 3's as they are."""

    def __init__(self, fn, keras2=False):
        self.fn, self.keras2 = fn, keras2
        super().__init__()

    def update_state(self, y_true, y_pred):
        y_true, y_pred = torch.as_tensor(y_true), torch.as_tensor(y_pred).detach()
        if self.keras2:
            if y_true.dim() == 1 and y_pred.dim() == 2:
                y_true = y_true.unsqueeze(-1)
            y_true, y_pred = _same_rank(y_true.float(), y_pred.float())
        with torch.no_grad():
            super().update_state(self.fn(y_true, y_pred))
''',
    "SparseCategoricalAccuracy": '''class SparseCategoricalAccuracy(Mean):
    """keras.metrics.SparseCategoricalAccuracy: the running fraction of argmax(y_pred) == y_true."""

    def update_state(self, y_true, y_pred):
        y_pred = torch.as_tensor(y_pred).detach()
        y_true = torch.as_tensor(y_true).reshape(y_pred.shape[:-1])
        super().update_state((y_pred.argmax(-1) == y_true).float())
''',
    "BinaryAccuracy": '''class BinaryAccuracy(Mean):
    """keras.metrics.BinaryAccuracy: the running fraction of (y_pred > threshold) == y_true."""

    def __init__(self, threshold=0.5):
        self.threshold = threshold
        super().__init__()

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        super().update_state((y_true == (y_pred > self.threshold).to(y_true.dtype)).float())
''',
    "Accuracy": '''class Accuracy(Mean):
    """keras.metrics.Accuracy: the running fraction of y_pred == y_true (values, not argmax)."""

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        super().update_state((y_true.to(y_pred.dtype) == y_pred).float())
''',
    "MeanAbsoluteError": '''class MeanAbsoluteError(Mean):
    """keras.metrics.MeanAbsoluteError: the running mean of |y_true - y_pred|."""

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        super().update_state((y_true - y_pred).abs())
''',
    "CosineSimilarity": '''class CosineSimilarity(Mean):
    """keras.metrics.CosineSimilarity: the running mean of the cosine similarity of y_true and y_pred along axis,
    each normalised as Keras 3 does, x / max(norm, 1e-7) (plus the cosine: the loss of that name is minus it)."""

    def __init__(self, axis=-1):
        self.axis = axis
        super().__init__()

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        y_true = y_true.to(y_pred.dtype)
        super().update_state((torch.nn.functional.normalize(y_true, dim=self.axis, eps=1e-7)
                              * torch.nn.functional.normalize(y_pred, dim=self.axis, eps=1e-7)).sum(self.axis))
''',
    "MeanSquaredError": '''class MeanSquaredError(Mean):
    """keras.metrics.MeanSquaredError: the running mean of (y_true - y_pred) ** 2."""

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        super().update_state((y_true - y_pred).square())
''',
    "RootMeanSquaredError": '''class RootMeanSquaredError(Mean):
    """keras.metrics.RootMeanSquaredError: the square root of the running mean of (y_true - y_pred) ** 2."""

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        super().update_state((y_true - y_pred).square())

    def result(self):
        return super().result().sqrt()
''',
    "MeanAbsolutePercentageError": '''class MeanAbsolutePercentageError(Mean):
    """keras.metrics.MeanAbsolutePercentageError: the running mean of 100 |y_true - y_pred| / |y_true|
    (|y_true| at least 1e-7, Keras's epsilon)."""

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        super().update_state(100.0 * ((y_true - y_pred) / y_true.abs().clamp_min(1e-7)).abs())
''',
    "TopKCategoricalAccuracy": '''class TopKCategoricalAccuracy(Mean):
    """keras.metrics.TopKCategoricalAccuracy: the running fraction of rows whose true class (the argmax
    of the one-hot y_true) is among the k largest of y_pred; a tie at the k-th place counts as in."""

    def __init__(self, k=5):
        self.k = k
        super().__init__()

    def update_state(self, y_true, y_pred):
        y_pred = torch.as_tensor(y_pred).detach()
        label = torch.as_tensor(y_true).argmax(-1, keepdim=True)
        super().update_state(((y_pred > y_pred.gather(-1, label)).sum(-1) < self.k).float())
''',
    "SparseTopKCategoricalAccuracy": '''class SparseTopKCategoricalAccuracy(Mean):
    """keras.metrics.SparseTopKCategoricalAccuracy: the running fraction of rows whose class y_true is
    among the k largest of y_pred; a tie at the k-th place counts as in."""

    def __init__(self, k=5):
        self.k = k
        super().__init__()

    def update_state(self, y_true, y_pred):
        y_pred = torch.as_tensor(y_pred).detach()
        label = torch.as_tensor(y_true).long().reshape(*y_pred.shape[:-1], 1)
        super().update_state(((y_pred > y_pred.gather(-1, label)).sum(-1) < self.k).float())
''',
    "Precision": '''class Precision:
    """keras.metrics.Precision: true positives / predicted positives so far, a prediction being
    positive above the threshold; reset_state() starts over."""

    def __init__(self, thresholds=None):
        self.threshold = 0.5 if thresholds is None else thresholds
        self.reset_state()

    def reset_state(self):
        self.true_positives, self.false_positives = 0.0, 0.0

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        _value_by_value(type(self).__name__, y_true, y_pred)
        positive, actual = y_pred > self.threshold, y_true.bool()
        self.true_positives += (positive & actual).sum().item()
        self.false_positives += (positive & ~actual).sum().item()

    def result(self):
        predicted = self.true_positives + self.false_positives
        return torch.tensor(self.true_positives / predicted if predicted else 0.0)

    def __call__(self, *args):
        self.update_state(*args)
        return self.result()
''',
    "ConfusionCount": '''class ConfusionCount:
    """A running count of the predictions of one kind (true or false positives or negatives: a prediction is
    positive above the threshold, strictly), as a float32 scalar, Keras's TruePositives and its kin;
    reset_state() starts over."""

    def __init__(self, thresholds=None):
        self.threshold = 0.5 if thresholds is None else thresholds
        self.reset_state()

    def reset_state(self):
        self.count = 0.0

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        _value_by_value(type(self).__name__, y_true, y_pred)
        self.count += self.counted(y_pred > self.threshold, y_true.bool()).sum().item()

    def result(self):
        return torch.tensor(self.count)

    def __call__(self, *args):
        self.update_state(*args)
        return self.result()
''',
    "TruePositives": '''class TruePositives(ConfusionCount):
    """keras.metrics.TruePositives: the number of true positives so far (above the threshold, labelled positive)."""

    @staticmethod
    def counted(positive, actual):
        return positive & actual
''',
    "FalsePositives": '''class FalsePositives(ConfusionCount):
    """keras.metrics.FalsePositives: the number of false positives so far (above the threshold, labelled negative)."""

    @staticmethod
    def counted(positive, actual):
        return positive & ~actual
''',
    "TrueNegatives": '''class TrueNegatives(ConfusionCount):
    """keras.metrics.TrueNegatives: the number of true negatives so far (at or below the threshold, labelled negative)."""

    @staticmethod
    def counted(positive, actual):
        return ~positive & ~actual
''',
    "FalseNegatives": '''class FalseNegatives(ConfusionCount):
    """keras.metrics.FalseNegatives: the number of false negatives so far (at or below the threshold, labelled positive)."""

    @staticmethod
    def counted(positive, actual):
        return ~positive & actual
''',
    "AUC": '''class AUC:
    """keras.metrics.AUC: the area under the ROC (or PR) curve of the predictions so far, computed as Keras
    does: num_thresholds evenly spaced thresholds, true / false positive and negative counts per threshold
    (a prediction, clipped to [0, 1], is positive strictly above it), the area a Riemann sum over them
    (interpolation, minoring or majoring; PR with interpolation by Davis & Goadrich's formula), in float32.
    reset_state() starts over."""

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation", from_logits=False):
        self.num_thresholds, self.curve = num_thresholds, curve.upper()
        self.summation_method, self.from_logits = summation_method.lower(), from_logits
        self.reset_state()

    def reset_state(self):
        self.true_positives = torch.zeros(self.num_thresholds)
        self.false_positives = torch.zeros(self.num_thresholds)
        self.true_negatives = torch.zeros(self.num_thresholds)
        self.false_negatives = torch.zeros(self.num_thresholds)

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        _value_by_value("AUC", y_true, y_pred)
        y_pred = torch.sigmoid(y_pred.float()) if self.from_logits else y_pred.float()
        y_true = y_true.float().bool().float().reshape(-1)
        y_pred = y_pred.clamp(0.0, 1.0).reshape(-1)
        # the last threshold each prediction lies strictly above (Keras's buckets of evenly spaced thresholds)
        buckets = torch.relu(torch.ceil(y_pred * (self.num_thresholds - 1)) - 1).long()
        tp = torch.zeros(self.num_thresholds).index_add_(0, buckets, y_true).flip(0).cumsum(0).flip(0)
        fp = torch.zeros(self.num_thresholds).index_add_(0, buckets, 1.0 - y_true).flip(0).cumsum(0).flip(0)
        self.true_positives += tp
        self.false_positives += fp
        self.true_negatives += (1.0 - y_true).sum() - fp
        self.false_negatives += y_true.sum() - tp

    @staticmethod
    def _ratio(a, b):  # 0 where b is 0 (divide_no_nan)
        return torch.where(b == 0, torch.zeros_like(a), a / torch.where(b == 0, torch.ones_like(b), b))

    def result(self):
        tp, fp, tn, fn, n = (self.true_positives, self.false_positives, self.true_negatives,
                             self.false_negatives, self.num_thresholds)
        if self.curve == "PR" and self.summation_method == "interpolation":
            dtp, p = tp[:n - 1] - tp[1:], tp + fp
            slope = self._ratio(dtp, (p[:n - 1] - p[1:]).clamp(min=0))
            intercept = tp[1:] - slope * p[1:]
            p_ratio = torch.where((p[:n - 1] > 0) & (p[1:] > 0), self._ratio(p[:n - 1], p[1:].clamp(min=0)),
                                  torch.ones_like(p[1:]))
            return self._ratio(slope * (dtp + intercept * torch.log(p_ratio)), (tp[1:] + fn[1:]).clamp(min=0)).sum()
        recall = self._ratio(tp, tp + fn)
        x, y = (self._ratio(fp, fp + tn), recall) if self.curve == "ROC" else (recall, self._ratio(tp, tp + fp))
        if self.summation_method == "interpolation":
            heights = (y[:n - 1] + y[1:]) / 2.0
        elif self.summation_method == "minoring":
            heights = torch.minimum(y[:n - 1], y[1:])
        else:
            heights = torch.maximum(y[:n - 1], y[1:])
        return ((x[:n - 1] - x[1:]) * heights).sum()

    def __call__(self, *args):
        self.update_state(*args)
        return self.result()
''',
    "Recall": '''class Recall:
    """keras.metrics.Recall: true positives / actual positives so far, a prediction being positive
    above the threshold; reset_state() starts over."""

    def __init__(self, thresholds=None):
        self.threshold = 0.5 if thresholds is None else thresholds
        self.reset_state()

    def reset_state(self):
        self.true_positives, self.false_negatives = 0.0, 0.0

    def update_state(self, y_true, y_pred):
        y_true, y_pred = _same_rank(y_true, y_pred)
        _value_by_value(type(self).__name__, y_true, y_pred)
        positive, actual = y_pred > self.threshold, y_true.bool()
        self.true_positives += (positive & actual).sum().item()
        self.false_negatives += (~positive & actual).sum().item()

    def result(self):
        actual = self.true_positives + self.false_negatives
        return torch.tensor(self.true_positives / actual if actual else 0.0)

    def __call__(self, *args):
        self.update_state(*args)
        return self.result()
''',
    "ShapeAccuracy": '''class ShapeAccuracy(Mean):
    """compile's metrics=["accuracy"] where nothing else tells which: as Keras 2, the binary accuracy
    (threshold 0.5) for outputs of last size 1, the sparse categorical accuracy for labels of lower rank
    or of last size 1, the categorical accuracy otherwise."""

    def update_state(self, y_true, y_pred):
        y_true, y_pred = torch.as_tensor(y_true), torch.as_tensor(y_pred).detach()
        if y_pred.shape[-1] == 1:
            y_true, y_pred = _same_rank(y_true, y_pred)
            hit = y_true == (y_pred > 0.5).to(y_true.dtype)
        elif y_true.dim() < y_pred.dim() or y_true.shape[-1] == 1:
            hit = y_pred.argmax(-1) == y_true.reshape(y_pred.shape[:-1])
        else:
            hit = y_pred.argmax(-1) == y_true.argmax(-1)
        super().update_state(hit.float())
''',
    "Crossentropy": '''class Crossentropy(Mean):
    """The running mean of each sample's cross-entropy, as Keras's cross-entropy metrics (and compile's metric
    strings that name a cross-entropy loss) compute it: probabilities clipped to [1e-7, 1 - 1e-7]. logits: the
    input of the sigmoid / softmax the predictions come from, which Keras takes instead where its activation
    kept them (the written fit gives them where the model ends in that activation)."""

    def __init__(self, from_logits=False, label_smoothing=0.0):
        self.from_logits, self.label_smoothing = from_logits, label_smoothing
        super().__init__()

    def update_state(self, y_true, y_pred, logits=None):
        y_true, y_pred = torch.as_tensor(y_true), torch.as_tensor(y_pred).detach()
        with torch.no_grad():
            if logits is not None:
                super().update_state(self.values(y_true, torch.as_tensor(logits).detach(), True))
            else:
                super().update_state(self.values(y_true, y_pred, self.from_logits))
''',
    "BinaryCrossentropy": '''class BinaryCrossentropy(Crossentropy):
    """keras.metrics.BinaryCrossentropy: each sample's mean over its last axis of -(y log p + (1 - y) log(1 - p)).
    Labels of one axis fewer than the predictions get a trailing axis (Keras 2's compile adds it)."""

    def values(self, y_true, y_pred, from_logits):
        if y_true.dim() == y_pred.dim() - 1:
            y_true = y_true.unsqueeze(-1)
        if y_true.shape != y_pred.shape:
            raise ValueError(f"labels of shape {tuple(y_true.shape)} for predictions of shape {tuple(y_pred.shape)}")
        y_true = y_true.to(y_pred.dtype)
        if self.label_smoothing:
            y_true = y_true * (1.0 - self.label_smoothing) + 0.5 * self.label_smoothing
        if from_logits:  # the stable form of the same: max(z, 0) - z y + log(1 + exp(-|z|))
            return (y_pred.clamp_min(0) - y_pred * y_true + torch.log1p(torch.exp(-y_pred.abs()))).mean(-1)
        p = y_pred.clamp(1e-7, 1 - 1e-7)
        return -(y_true * torch.log(p) + (1 - y_true) * torch.log(1 - p)).mean(-1)
''',
    "CategoricalCrossentropy": '''class CategoricalCrossentropy(Crossentropy):
    """keras.metrics.CategoricalCrossentropy: each sample's -sum(y log p) over the last axis, of one-hot labels
    (the probabilities divided by their sum first, as Keras does)."""

    def values(self, y_true, y_pred, from_logits):
        if y_true.shape != y_pred.shape:
            raise ValueError(f"labels of shape {tuple(y_true.shape)} for predictions of shape {tuple(y_pred.shape)}")
        y_true = y_true.to(y_pred.dtype)
        if self.label_smoothing:
            y_true = y_true * (1.0 - self.label_smoothing) + self.label_smoothing / y_pred.shape[-1]
        if from_logits:
            return -(y_true * torch.log_softmax(y_pred, -1)).sum(-1)
        p = (y_pred / y_pred.sum(-1, keepdim=True)).clamp(1e-7, 1 - 1e-7)
        return -(y_true * torch.log(p)).sum(-1)
''',
    "SparseCategoricalCrossentropy": '''class SparseCategoricalCrossentropy(Crossentropy):
    """keras.metrics.SparseCategoricalCrossentropy: each sample's -log p[label], of integer labels ((n,) or
    (n, 1): a trailing axis of size 1 is dropped, as Keras drops it)."""

    def values(self, y_true, y_pred, from_logits):
        if y_true.dim() == y_pred.dim() and y_true.shape[-1] == 1:
            y_true = y_true.squeeze(-1)
        if y_true.shape != y_pred.shape[:-1]:
            raise ValueError(f"labels of shape {tuple(y_true.shape)} for predictions of shape {tuple(y_pred.shape)}")
        logits = y_pred if from_logits else torch.log(y_pred.clamp(1e-7, 1 - 1e-7))
        return -torch.log_softmax(logits, -1).gather(-1, y_true.long().unsqueeze(-1)).squeeze(-1)
''',
    "CategoricalAccuracy": '''class CategoricalAccuracy(Mean):
    """keras.metrics.CategoricalAccuracy: the running fraction of argmax(y_pred) == argmax(y_true)."""

    def update_state(self, y_true, y_pred):
        y_pred = torch.as_tensor(y_pred).detach()
        super().update_state((y_pred.argmax(-1) == torch.as_tensor(y_true).argmax(-1)).float())
''',
}


# the metrics comparing y_true with y_pred elementwise bring them to one rank first, as Keras does
SAME_RANK = '''def _same_rank(y_true, y_pred):
    """y_true and y_pred as tensors of one rank: a trailing axis of size 1 on one of them is dropped
    (Keras's squeeze_or_expand_to_same_rank)."""
    y_true, y_pred = torch.as_tensor(y_true), torch.as_tensor(y_pred).detach()
    if y_true.dim() == y_pred.dim() + 1 and y_true.shape[-1] == 1:
        y_true = y_true.squeeze(-1)
    elif y_pred.dim() == y_true.dim() + 1 and y_pred.shape[-1] == 1:
        y_pred = y_pred.squeeze(-1)
    return y_true, y_pred
'''
VALUE_BY_VALUE = '''def _value_by_value(name, y_true, y_pred):
    """A confusion-matrix metric compares labels and outputs value by value: as many of each, or the
    ValueError Keras's own metric stops with (integer labels against outputs of several classes)."""
    if y_true.numel() != y_pred.numel():
        raise ValueError(f"{name}: labels of shape {tuple(y_true.shape)} against outputs of shape "
                         f"{tuple(y_pred.shape)}; Keras's {name} compares them value by value and fails here too "
                         "(give one-hot labels, or the positive class's column y_pred[:, 1])")
'''
_COUNTS = ("TruePositives", "FalsePositives", "TrueNegatives", "FalseNegatives")  # confusion-matrix counts
# the metrics that compare labels and outputs value by value (Keras's confusion-matrix metrics), and the losses
# whose integer labels have fewer values than the outputs: Keras's fit fails on the two together
CONFUSION_METRICS = {"AUC", "Precision", "Recall", *_COUNTS}
SPARSE_LOSSES = {"keras.losses.SparseCategoricalCrossentropy", "keras.losses.sparse_categorical_crossentropy"}


def sparse_confusion(confusion: list[str], loss: tuple) -> str | None:
    """Why a compile's confusion-matrix metrics (``confusion``, their names) cannot meet its loss: Keras's own fit
    fails on them beside a sparse categorical cross-entropy (integer labels, fewer values than the outputs); or None."""
    if not confusion or _loss_name(loss) not in SPARSE_LOSSES:
        return None
    return (f"metrics {confusion} with a sparse categorical cross-entropy: these metrics compare "
            "labels and outputs value by value, and integer labels of shape (n,) against outputs of shape "
            "(n, classes) stop Keras's own fit with a ValueError (AUC: segment_ids and data differ in leading "
            "dimension; Precision, Recall: dimensions must be equal; Keras 2: shapes are incompatible); give one-hot labels with "
            "categorical_crossentropy, or compute the metric on the positive class's column y_pred[:, 1]")
_ELEMENTWISE_METRICS = {"MeanMetricWrapper", "BinaryAccuracy", "Accuracy", "ShapeAccuracy", "MeanAbsoluteError", "MeanSquaredError",
                        "CosineSimilarity",
                        "RootMeanSquaredError", "MeanAbsolutePercentageError", "Precision", "Recall", "AUC", *_COUNTS}
# the cross-entropy metrics (Crossentropy's subclasses), which take the final activation's logits where fit has them
CROSSENTROPY_METRICS = {"BinaryCrossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy"}
_STANDALONE_METRICS = {"Precision", "Recall", "AUC", "ConfusionCount", *_COUNTS}  # not derived from Mean


def metric_classes(names: set[str], spell) -> str:
    """The metric classes a file uses (Mean first: the accuracies derive from it; the rank helper
    before the metrics that call it)."""
    needed = sorted(names - {"Mean", "Crossentropy"})
    if CROSSENTROPY_METRICS & set(needed):  # their base, before them
        needed = ["Crossentropy", *needed]
    if any(n not in _STANDALONE_METRICS for n in needed) or "Mean" in names:
        needed = ["Mean", *needed]
    if set(_COUNTS) & set(needed):  # their base, before them
        needed = [n for n in needed if n not in _COUNTS] + ["ConfusionCount"] + [n for n in needed if n in _COUNTS]
    spell("torch.as_tensor")  # noting the import
    texts = [METRIC_CLASSES[n] for n in needed]
    if (CONFUSION_METRICS | {"ConfusionCount"}) & set(needed):
        texts.insert(0, VALUE_BY_VALUE)
    if _ELEMENTWISE_METRICS & set(needed):
        texts.insert(0, SAME_RANK)
    return "\n\n".join(texts)


# --- a model with its own train_step: keras.Model's compile / fit kept as methods ----------------------

TRAIN_STEP_MODULE = "TrainStepModule"


def train_step_module(spell, evaluate: bool = False, predict: bool = False, compiled: bool = False,
                      weighted: bool = False, split: bool = False, validation_steps: bool = False) -> str:
    """The base class written once into a file whose Keras models define their own ``train_step``:
    the nn.Module counterpart of what keras.Model gives such a model (compile keeps the optimizer,
    fit calls train_step per batch), with Keras's semantics. ``evaluate``: the file evaluates such a
    model (or fits it with validation_data), whose class defines test_step: evaluate() calls it;
    ``predict``: the file predicts with one: predict() calls predict_step (by default the model on x);
    ``compiled``: a train_step reads Keras 2's compiled loss and metrics (compiled_loss, compiled_metrics,
    metrics, losses), which compile keeps (the Mean class is written beside); ``weighted``: one passes it a
    sample_weight (compile's loss then takes it: ``weighted_loss``); ``split``: one fits with validation_split (with
    ``evaluate``), which fit takes; ``validation_steps``: one fits with validation_steps (with ``evaluate``): the
    validation evaluates that many batches of validation_data, from its start each epoch, as Keras does."""
    module, optimizer = spell("torch.nn.Module"), spell("torch.optim.Optimizer")
    as_tensor, randperm, arange = spell("torch.as_tensor"), spell("torch.randperm"), spell("torch.arange")
    islice = spell("itertools.islice")
    text = f'''class History:
    """keras.callbacks.History: .history maps each value train_step returns to its per-epoch values."""

    def __init__(self, history):
        self.history = history


class {TRAIN_STEP_MODULE}({module}):
    """What keras.Model gives a model that defines its own train_step, as Keras runs it.

    compile(optimizer=...) takes the optimizer as a factory, functools.partial(torch.optim.X, ...),
    and creates it over the model's parameters (a torch optimizer needs them when it is created).
    fit(x, y=None, ...) calls self.train_step(batch) on each batch: x[i:i + batch_size] (or the
    pair (x, y) with targets), batches of 32 by default, shuffled every epoch; or the batches of an
    iterable x (a DataLoader), one iterator running on across epochs when steps_per_epoch is given.
    The model's metrics are reset at the start of each epoch; History holds the values the epoch's
    last train_step returned (Keras's logs); callbacks get .model and on_train_begin(),
    on_epoch_begin(epoch), on_epoch_end(epoch, logs), on_train_end(); model.stop_training = True ends
    the training.
    """

    def compile(self, optimizer=None, loss=None, metrics=None):
        if optimizer is not None and not isinstance(optimizer, {optimizer}):
            optimizer = optimizer(self.parameters())
        self.optimizer, self.loss = optimizer, loss
{{COMPILED_INIT}}
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose=1, callbacks=None, shuffle=True,
            steps_per_epoch=None{{VALIDATION_ARG}}):
{{SPLIT}}        callbacks = list(callbacks or [])
        self.stop_training = False
        for callback in callbacks:
            callback.model = self
            if hasattr(callback, "on_train_begin"):
                callback.on_train_begin()
        history, stream = {{}}, None
        for epoch in range(epochs):
            self.train()
            for metric in getattr(self, "metrics", []):
                metric.reset_state()
            for callback in callbacks:
                if hasattr(callback, "on_epoch_begin"):
                    callback.on_epoch_begin(epoch)
            if hasattr(x, "shape"):  # arrays: batches of samples
                xs = {as_tensor}(x)
                xs = xs.float() if xs.is_floating_point() else xs
                ys = None if y is None else {as_tensor}(y)
                ys = ys.float() if ys is not None and ys.is_floating_point() else ys
                order = {randperm}(len(xs)) if shuffle else {arange}(len(xs))
                size = batch_size or 32
                batches = (order[i:i + size] for i in range(0, len(xs), size))
                batches = (xs[b] if ys is None else (xs[b], ys[b]) for b in batches)
            elif steps_per_epoch is None:  # an iterable of batches, from its start every epoch
                batches = iter(x)
            else:
                stream = stream or iter(x)
                batches = stream
            if steps_per_epoch is not None:
                batches = {islice}(batches, steps_per_epoch)
            logs = {{}}
            for batch in batches:
                logs = {{k: float({as_tensor}(v).detach()) for k, v in self.train_step(batch).items()}}
{{VALIDATION}}            for k, v in logs.items():
                history.setdefault(k, []).append(v)
            if verbose:
                print(f"Epoch {{epoch + 1}}/{{epochs}} - " + " - ".join(f"{{k}}: {{v:.4f}}" for k, v in logs.items()))
            epoch_keys = set(logs)
            for callback in callbacks:
                if hasattr(callback, "on_epoch_end"):
                    callback.on_epoch_end(epoch, logs)
            for k in [k for k in logs if k not in epoch_keys]:  # what callbacks log (the learning rate): in the History
                history.setdefault(k, []).append(logs[k])
            if self.stop_training:
                break
        for callback in callbacks:
            if hasattr(callback, "on_train_end"):
                callback.on_train_end()
        return History(history)
'''
    text = text.replace("{COMPILED_INIT}", COMPILED_INIT if compiled else "")
    compiled_text = COMPILED.replace("{SAMPLE_WEIGHT}", "sample_weight=None, " if weighted else "").replace(
        "{WEIGHT_DOC}", "[, sample_weight]" if weighted else "").replace(
        "{LOSS_CALL}", "self.loss(y_true, y_pred) if sample_weight is None else self.loss(y_true, y_pred, sample_weight)"
        if weighted else "self.loss(y_true, y_pred)").replace(
        "{LOSS_CALL_Y}", "(self.loss(y, y_pred) if sample_weight is None else self.loss(y, y_pred, sample_weight))"
        if weighted else "self.loss(y, y_pred)")
    if compiled:
        text = text.replace("\n\n\nclass " + TRAIN_STEP_MODULE, "\n\n\n" + COMPILED_METRICS + "\n\nclass " + TRAIN_STEP_MODULE)
        text += compiled_text + (DEFAULT_TEST_STEP if evaluate else "")
    split, validation_steps = split and evaluate, validation_steps and evaluate
    text = text.replace("{VALIDATION_ARG}", (", validation_split=0.0" if split else "") +
                        (", validation_data=None" if evaluate else "") +
                        (",\n            validation_steps=None" if validation_steps else ""))
    text = text.replace("{SPLIT}", SPLIT if split else "")
    text = text.replace("{VALIDATION}", (VALIDATION.replace("verbose=0,", "steps=validation_steps, verbose=0,\n"
                                                                       "                                         ")
                                         if validation_steps else VALIDATION) if evaluate else "")
    no_grad, cat = spell("torch.no_grad"), spell("torch.cat")
    if evaluate:
        text += EVALUATE.format(as_tensor=as_tensor, islice=islice, no_grad=no_grad)
    if predict:
        text += PREDICT.format(as_tensor=as_tensor, islice=islice, no_grad=no_grad, cat=cat)
    return text


def weighted_loss(spell) -> str:
    """Keras's loss(y_true, y_pred, sample_weight) for a torch loss module (compile's loss, called by
    TrainStepModule.compiled_loss with a sample_weight)."""
    return f'''def weighted_loss(loss_fn, input, target, sample_weight):
    """A Keras loss with sample_weight: the loss of each element (a copy of the torch loss with reduction="none";
    Keras's per-sample values are their means over the last axis, which the sum below counts alike) times its
    sample's weight (trailing axes added to match), summed and divided by the number of elements, as Keras's
    "sum_over_batch_size" reduction does (not by the sum of the weights)."""
    per_element = {spell("copy.copy")}(loss_fn)
    per_element.reduction = "none"
    losses = per_element(input, target)
    weight = {spell("torch.as_tensor")}(sample_weight).to(losses.dtype)
    while weight.dim() < losses.dim():
        weight = weight.unsqueeze(-1)
    return (losses * weight).sum() / losses.numel()
'''


# Keras 2's compiled loss and metrics, which a train_step reads (written where one does)
COMPILED_METRICS = '''class CompiledMetrics:
    """Keras 2's model.compiled_metrics: the metrics compile was given, {name: metric}; each gets its
    Keras name (.name), and update_state(y_true, y_pred) updates every one. (A list is a compile of a
    model whose train_step does not read them: none kept.)"""

    def __init__(self, metrics=None):
        self.metrics = []
        for name, metric in (metrics.items() if isinstance(metrics, dict) else ()):
            metric.name = name
            self.metrics.append(metric)

    def update_state(self, y_true, y_pred):
        for metric in self.metrics:
            metric.update_state(y_true, y_pred)

'''

COMPILED_INIT = '''        self.compiled_metrics = CompiledMetrics(metrics)
        self.loss_metric = None  # the "loss" tracker, made by the first compiled_loss call
'''

COMPILED = '''
    def compiled_loss(self, y_true, y_pred, {SAMPLE_WEIGHT}regularization_losses=None):
        """Keras 2's model.compiled_loss: compile's loss, loss(y_true, y_pred{WEIGHT_DOC}), plus the regularization
        losses given; the total is tracked by the metric "loss", a mean weighted by the batch size."""
        loss = {LOSS_CALL}
        if regularization_losses:
            loss = loss + sum(regularization_losses)
        if self.loss_metric is None:
            self.loss_metric = Mean()
            self.loss_metric.name = "loss"
        self.loss_metric.update_state(loss.detach().expand(len(y_true)))
        return loss

    def compute_loss(self, x=None, y=None, y_pred=None, {SAMPLE_WEIGHT}training=True):
        """Keras 3's model.compute_loss: compile's loss, loss(y, y_pred{WEIGHT_DOC}), plus the model's losses
        (self.losses, each summed); x and training unused, no metric updated (Keras 3's train_step tracks the loss)."""
        return {LOSS_CALL_Y} + sum((penalty.sum() for penalty in self.losses), 0.0)

    @property
    def losses(self):
        """keras.Model.losses: the weight penalties of the model's layers (each module's regularization_loss())."""
        return [m.regularization_loss() for m in self.modules() if hasattr(m, "regularization_loss")]

    @property
    def metrics(self):
        """keras.Model.metrics: the "loss" tracker (once compiled_loss ran), then the compiled metrics."""
        tracker = [] if getattr(self, "loss_metric", None) is None else [self.loss_metric]
        compiled = getattr(self, "compiled_metrics", None)
        return tracker + (compiled.metrics if compiled is not None else [])
'''


# Keras 2's own test_step, for a model whose class defines train_step only (evaluate / validation_data)
DEFAULT_TEST_STEP = '''
    def test_step(self, data):
        """keras.Model.test_step (Keras 2): the compiled loss and metrics of the model's outputs on (x, y)."""
        x, y = data
        y_pred = self(x)
        self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        self.compiled_metrics.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}
'''


# what TrainStepModule.fit does with validation_split: the last samples, held out before shuffling, are its
# validation_data (Keras: floor(n * (1 - validation_split)) samples kept for training)
SPLIT = '''        if validation_split and validation_data is None:  # the last samples, held out before shuffling
            split = int(len(x) * (1 - validation_split))
            x, validation_data = x[:split], x[split:] if y is None else (x[split:], y[split:])
            y = None if y is None else y[:split]
'''

# what TrainStepModule.fit does with validation_data: Keras's evaluate (test_step) after each epoch
VALIDATION = '''            if validation_data is not None:
                data = validation_data if isinstance(validation_data, tuple) else (validation_data,)
                val_logs = self.evaluate(*data, batch_size=batch_size, verbose=0, return_dict=True)
                logs.update({f"val_{k}": v for k, v in val_logs.items()})
'''

EVALUATE = '''
    def evaluate(self, x=None, y=None, batch_size=None, verbose=1, steps=None, return_dict=False):
        """keras.Model.evaluate: self.test_step(batch) on each batch in inference mode (batches of 32 by
        default, in order, or those of an iterable x), the metrics reset first; returns what the last
        test_step returned: a dict with return_dict, else its values (one value alone)."""
        self.eval()
        for metric in getattr(self, "metrics", []):
            metric.reset_state()
        if hasattr(x, "shape"):  # arrays: batches of samples
            xs = {as_tensor}(x)
            xs = xs.float() if xs.is_floating_point() else xs
            ys = None if y is None else {as_tensor}(y)
            ys = ys.float() if ys is not None and ys.is_floating_point() else ys
            size = batch_size or 32
            batches = (xs[i:i + size] if ys is None else (xs[i:i + size], ys[i:i + size])
                       for i in range(0, len(xs), size))
        else:
            batches = iter(x)
        if steps is not None:
            batches = {islice}(batches, steps)
        logs = {{}}
        with {no_grad}():
            for batch in batches:
                logs = {{k: float({as_tensor}(v).detach()) for k, v in self.test_step(batch).items()}}
        if verbose:
            print("evaluate - " + " - ".join(f"{{k}}: {{v:.4f}}" for k, v in logs.items()))
        if return_dict:
            return logs
        values = list(logs.values())
        return values[0] if len(values) == 1 else values
'''

PREDICT = '''
    def predict(self, x, batch_size=None, verbose=0, steps=None):
        """keras.Model.predict: self.predict_step(batch) on batches of x (32 by default, or those of an
        iterable x) in inference mode, the outputs concatenated into a NumPy array."""
        self.eval()
        if hasattr(x, "shape"):  # arrays: batches of samples
            xs = {as_tensor}(x)
            xs = xs.float() if xs.is_floating_point() else xs
            size = batch_size or 32
            batches = (xs[i:i + size] for i in range(0, len(xs), size))
        else:
            batches = iter(x)
        if steps is not None:
            batches = {islice}(batches, steps)
        with {no_grad}():
            outputs = [self.predict_step(batch) for batch in batches]
        return {cat}(outputs).detach().numpy()

    def predict_step(self, data):
        """keras.Model.predict_step: the model on the batch's inputs (a class may define its own)."""
        x = data[0] if isinstance(data, (tuple, list)) else data
        return self(x)
'''


# --- callbacks: small classes with Keras's semantics, called by the generated fit and TrainStepModule.fit ---

CALLBACK_CLASSES = {
    "EarlyStopping": '''class EarlyStopping:
    """keras.callbacks.EarlyStopping: stops fit once `monitor` has not improved by more than min_delta
    for `patience` epochs (mode "auto": higher is better for accuracies); with restore_best_weights, the
    weights of the best epoch are put back when fit ends."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, mode="auto", restore_best_weights=False):
        self.monitor, self.min_delta, self.patience = monitor, abs(min_delta), patience
        self.higher = mode == "max" or (mode == "auto" and "acc" in monitor)
        self.restore_best_weights = restore_best_weights

    def on_train_begin(self):
        self.wait, self.best_weights = 0, None
        self.best = -math.inf if self.higher else math.inf

    def on_epoch_end(self, epoch, logs):
        current = logs.get(self.monitor)
        if current is None:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.wait += 1
        if current - self.min_delta > self.best if self.higher else current + self.min_delta < self.best:
            self.best, self.wait = current, 0
            if self.restore_best_weights:
                self.best_weights = {k: v.clone() for k, v in self.model.state_dict().items()}
        elif self.wait >= self.patience and epoch > 0:
            self.model.stop_training = True

    def on_train_end(self):
        if self.restore_best_weights and self.best_weights is not None:
            self.model.load_state_dict(self.best_weights)
''',
    "ModelCheckpoint": '''class ModelCheckpoint:
    """keras.callbacks.ModelCheckpoint: torch.save(model.state_dict(), filepath) after each epoch, or
    only when `monitor` improved (save_best_only); filepath may hold {epoch} and the logs' names."""

    def __init__(self, filepath, monitor="val_loss", save_best_only=False, mode="auto"):
        self.filepath, self.monitor, self.save_best_only = filepath, monitor, save_best_only
        self.higher = mode == "max" or (mode == "auto" and "acc" in monitor)
        self.best = -math.inf if self.higher else math.inf

    def on_epoch_end(self, epoch, logs):
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None or not (current > self.best if self.higher else current < self.best):
                return
            self.best = current
        torch.save(self.model.state_dict(), self.filepath.format(epoch=epoch + 1, **logs))
''',
    "ReduceLROnPlateau": '''class ReduceLROnPlateau:
    """keras.callbacks.ReduceLROnPlateau: multiplies the optimizer's learning rate by `factor` (not below
    min_lr) once `monitor` has not improved by more than min_delta for `patience` epochs, then waits
    `cooldown` epochs before counting again. Each epoch it adds the learning rate it found (a float32, as
    Keras keeps it) to the logs, under log_name (Keras 3's "learning_rate", Keras 2's "lr"), which the
    History records."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, mode="auto", min_delta=1e-4, cooldown=0,
                 min_lr=0.0, log_name="learning_rate"):
        self.monitor, self.factor, self.patience, self.min_delta = monitor, factor, patience, min_delta
        self.cooldown, self.min_lr, self.log_name = cooldown, min_lr, log_name
        self.higher = mode == "max" or (mode == "auto" and "acc" in monitor)

    def on_train_begin(self):
        self.wait = self.cooldown_counter = 0
        self.best = -math.inf if self.higher else math.inf

    def on_epoch_end(self, epoch, logs):
        logs[self.log_name] = torch.tensor(self.model.optimizer.param_groups[0]["lr"], dtype=torch.float32).item()
        current = logs.get(self.monitor)
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if current > self.best + self.min_delta if self.higher else current < self.best - self.min_delta:
            self.best, self.wait = current, 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                for group in self.model.optimizer.param_groups:
                    lr = torch.tensor(group["lr"], dtype=torch.float32).item()  # as Keras keeps it, a float32
                    if lr > self.min_lr:
                        group["lr"] = max(lr * self.factor, self.min_lr)
                        self.cooldown_counter, self.wait = self.cooldown, 0
''',
    "LearningRateScheduler": '''class LearningRateScheduler:
    """keras.callbacks.LearningRateScheduler: before each epoch, sets the optimizer's learning rate to
    schedule(epoch, lr) (or schedule(epoch) for a one-argument schedule); after each, adds the learning rate
    (a float32, as Keras keeps it) to the logs under log_name (Keras 3's "learning_rate", Keras 2's "lr"),
    which the History records."""

    def __init__(self, schedule, log_name="learning_rate"):
        self.schedule, self.log_name = schedule, log_name

    def on_epoch_end(self, epoch, logs):
        logs[self.log_name] = torch.tensor(self.model.optimizer.param_groups[0]["lr"], dtype=torch.float32).item()

    def on_epoch_begin(self, epoch):
        for group in self.model.optimizer.param_groups:
            try:  # the rate as Keras keeps it, a float32
                group["lr"] = float(self.schedule(epoch, torch.tensor(group["lr"], dtype=torch.float32).item()))
            except TypeError:
                group["lr"] = float(self.schedule(epoch))
''',
    "TensorBoard": '''class TensorBoard:
    """keras.callbacks.TensorBoard: each epoch's logs as scalars epoch_<name> at step epoch (from 0), the
    training logs and the learning rate in log_dir/train, the val_ logs in log_dir/validation, as Keras
    writes them (view with `tensorboard --logdir <log_dir>`)."""

    def __init__(self, log_dir="logs"):
        self.log_dir, self.writers = log_dir, {}

    def _writer(self, part):
        if part not in self.writers:
            from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

            self.writers[part] = SummaryWriter(os.path.join(self.log_dir, part))
        return self.writers[part]

    def on_epoch_end(self, epoch, logs):
        for name, value in logs.items():
            part, name = ("validation", name[4:]) if name.startswith("val_") else ("train", name)
            self._writer(part).add_scalar(f"epoch_{name}", value, epoch)
        self._writer("train").add_scalar("epoch_learning_rate", self.model.optimizer.param_groups[0]["lr"], epoch)

    def on_train_end(self):
        for writer in self.writers.values():
            writer.close()
        self.writers = {}
''',
    "CSVLogger": '''class CSVLogger:
    """keras.callbacks.CSVLogger: one row per epoch, the epoch (from 0) and the logs by sorted name."""

    def __init__(self, filename, separator=",", append=False):
        self.filename, self.separator, self.append = filename, separator, append

    def on_train_begin(self):
        self.file, self.writer = open(self.filename, "a" if self.append else "w", newline=""), None

    def on_epoch_end(self, epoch, logs):
        if self.writer is None:
            self.keys = sorted(logs)
            self.writer = csv.writer(self.file, delimiter=self.separator)
            if not self.append:
                self.writer.writerow(["epoch", *self.keys])
        self.writer.writerow([epoch, *(logs[k] for k in self.keys)])
        self.file.flush()

    def on_train_end(self):
        self.file.close()
''',
}


def callback_classes(names: set[str], spell) -> str:
    """The callback classes a file uses."""
    if names & {"EarlyStopping", "ModelCheckpoint", "ReduceLROnPlateau"}:
        spell("math.inf")
    if "ModelCheckpoint" in names:
        spell("torch.save")
    if names & {"ReduceLROnPlateau", "LearningRateScheduler"}:
        spell("torch.tensor")
    if "CSVLogger" in names:
        spell("csv.writer")
    if "TensorBoard" in names:
        spell("os.path.join")
    return "\n\n".join(CALLBACK_CLASSES[n] for n in sorted(names))
