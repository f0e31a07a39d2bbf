"""Structural pass: the Keras functional API (``keras.Input`` → layers called on tensors →
``keras.Model(inputs, outputs)``) → a generated ``nn.Module`` class.

A builder function (``def build_resnet(...): ... return keras.Model(inputs, outputs)``) becomes a
class named after it without its verb (``Resnet``; ``keras.Model(name=)`` wins), defined just above
it, whose ``__init__`` takes the builder's parameters and creates one module per Keras layer object
(sizes propagated from the ``Input`` shapes through the graph, as in a Sequential chain), and whose
``forward`` replays the graph in source order with the source's variable names; the builder returns
an instance. Models built at module level, one after the other, become a class and an instance
each (and a model built above can be a layer of one built below). Also followed: merges (function
and layer forms), tensor arithmetic, ``tf`` / ``keras.ops`` calls where the layout does not change
their meaning, shared layers, a nested ``keras.Sequential``, layer classes of the file, ``for``
statements over known values (written out), and helper functions that build blocks: one class per
helper and variant of its literal arguments (which decide its ``if`` statements), an instance per
call site; a function that builds a ``keras.Sequential`` by ``add`` calls and returns it, called on a
tensor (``downsample(64, 4)(x)``), is the ``nn.Sequential`` of that call's layers (:func:`_seq_factory`). Dicts of inputs (``inputs = {"a": keras.Input(...)}``, ``keras.Model(inputs={"a": a})``,
``inputs = create_model_inputs()`` over module constants) make ``forward`` take the dict the Keras
model is called with; a dict of outputs is returned as that dict. ``for`` statements over values known
only when the model is built (in the builder or a helper) build nn.ModuleLists by the same loop (a helper
with such a loop, called in one, builds its own class's lists). A model or layer made elsewhere and called
on tensors (``features = encoder(inputs)`` with ``encoder`` a builder parameter or a value the builder or
the module builds with a call) is kept as a module of the class (``self.encoder = encoder``, that very
object), called with Keras's layout; its output shape is unknown (lazy modules after it). At module
level only the statements ``keras.Model(...)`` depends on are the model's; a model below that reads a
``keras.Input`` of a model above takes it as its own input; ``keras.Input(shape=M.output.shape[1:])`` (``.input``,
``M.output_shape``) takes the shape of a model ``M`` translated above (:meth:`_Builder._model_shape`), and
``keras.Input(shape=input_shape)`` the tuple of ints ``input_shape`` is bound to in the builder. A builder
refused as written is followed again
for the values every call of it in the file gives the parameters its ``if`` / ``for`` statements and helpers
depend on, its ``__init__`` raising ValueError for others (:func:`_pinned_params`); an ``if`` on parameters the
file gives several values is kept in ``__init__`` and ``forward`` (:meth:`_Builder._runtime_if`). Weight
regularizers of the layers become the classes' ``regularization_loss()`` (regularizers.py).

Layout: the NCHW policy of Sequential chains. A graph holding channels-last convolutions or pooling
is channels-first throughout, behind Keras's interface: ``forward`` takes channels-last inputs and
moves them channels-first once, at its top, and moves the feature maps it returns back (so the data
code, ``fit`` and loops that feed the model need no change; a model of the file called on a map of
such a graph gets it channels-last). Every
axis-dependent operation is remapped (``concatenate(axis=-1)`` → ``torch.cat(..., dim=1)``) or
refused, a Dense after a Flatten reorders its rows through its weight map, a Dense → Reshape to a
map becomes ``nn.Unflatten`` with the Dense's ``before-unflatten`` map.

Weights: each layer with variables gets a ``LayerRecord`` whose source path is its index in
Keras's ``model.layers`` (the order ``keras.src.ops.function.map_graph`` gives: by depth from the
outputs, then by first traversal; tensor arithmetic is a layer in tf.keras), so that ``fwport
verify`` and ``fwport weights`` move variables by name. A model with ``for`` statements over run-time
values (its layers in nn.ModuleLists) has no such index: its records name layers by the order the
builder first calls them (``calls[s][j]``, ``calls[s][*][j]`` for a loop's; ``ModelInfo.calls``), which
fwport verify matches to the built model. After such a loop, its layer's name is the last pass's layer
(``self.<attr>[-1]``). A helper's loop of that kind called in another such loop makes the number of
layers per pass known only when the model is built: that model has no records (an info finding says so).
A module given to the model (above) counts as one of ``model.layers``; its own weights are not recorded.

Line structure: passes keep it (findings are located by line). So :func:`run` rewrites the graph
statements where they stand (layer calls → ``self.<attr>(x)``, merges → expressions, the other
graph statements → ``pass``; lines a shortened statement loses are kept as marked blank lines),
records the plan, and :func:`finish` builds the classes once every finding is located and every
comment placed (as the decorators pass removes its lines).

What is not followed (a layer without a rule, a graph statement inside ``if``/``while``, a loop over
a run-time value written inside another, an ``if`` on such a value in a helper, ...) is an error finding on
its line (a helper's at its call site), and the whole model is left as written, its calls settled:
never a half-translated graph.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from keyword import iskeyword

import libcst as cst

from fwport.core.bind import NOT_LITERAL, bind_def, call_argument, literal_value
from fwport.core.context import FileContext, LayerRecord, ModelInfo
from fwport.core.engine import (LayerEmission, build_call, code, drop_undone_findings, expr, map_call, statement,
                                translate_layer)
from fwport.core.finding import Severity
from fwport.core.names import ValueVisitor, children, dotted_text, find_all, param_names, scan
from fwport.core.plan import Plans
from fwport.core.rewrite import rewrite
from fwport.packs.tf2torch import helpers as written_helpers
from fwport.packs.tf2torch import masks
from fwport.packs.tf2torch.dims import Sizes, SizedContext, function_stable, is_int, known, module_scope, plain
from fwport.packs.tf2torch.passes.sequential import remember_layer
from fwport.packs.tf2torch.passes.sequential import (_CARRIES_FLATTEN, _ELEMENTWISE, _READS_FLATTEN, _implied_rank,
                                                      converts_to_nchw, _input_spec_shape, _shape_arg, _shape_parts,
                                                      symbolic_parts)
from fwport.packs.tf2torch.passes import data_format, regularizers
from fwport.packs.tf2torch.passes.subclass import _ELEMENTWISE_FNS, _name_nodes
from fwport.packs.tf2torch import kerashub
from fwport.packs.tf2torch.attention import MULTI_INPUT, TENSOR_PARAMS, bind_call
from fwport.packs.tf2torch.layer import RNN_CALLED_AS_KERAS, mentions_source_alias, recurrent_kind


def _lit_of(call: cst.Call, name: str, position: int | None = None):
    node = call_argument(call, name, position)
    return NOT_LITERAL if node is None else literal_value(node, NOT_LITERAL)


def _outside_slice(stmts: list, lo: int, model: int) -> set[int]:
    """Indices in ``lo..model-1`` of the module-level statements that keras.Model(...) at ``model``
    does not depend on: none binds a name it or a statement it depends on reads (walked backwards). A plain
    assignment binds its names anew: the statements above it that bind them (a notebook's earlier cell
    trying `inputs = keras.Input(...)` and layers on it, with no model) are not the model's."""
    # (`model = keras.Model(...)` binds model: an earlier `model = ...` is not its; nor is an earlier `layer = ...`
    # the `layer` of `[layer.output for layer in base.layers]`)
    needed = _reads(stmts[model])  # (a comprehension's own names are not read: _NamesIn)
    outside = set()
    for i in range(model - 1, lo - 1, -1):
        st = stmts[i]
        if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            continue  # (their roles are "keep" anyway)
        bound = _names_bound_in(st) | set(_assigned(st))
        if bound & needed:
            if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign):
                needed = (needed - bound) | _reads(st)  # (`x = f(x)` reads x again)
            else:
                needed |= _names_in(st)
        else:
            outside.add(i)
    return outside


def _module_assignments(ctx: FileContext) -> dict[str, cst.BaseExpression]:
    """name → the value a module-level ``name = value`` binds (the parsed source's), once per file."""
    found = ctx.analyses.get("functional_module_values")
    if found is None:
        found = ctx.analyses["functional_module_values"] = {}
        module = ctx.analyses.get("parsed", (None,))[0]
        for stmt in module.body if module is not None else ():
            if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                small = stmt.body[0]
                if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                        and isinstance(small.targets[0].target, cst.Name):
                    found[small.targets[0].target.value] = small.value
                elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
                    found[small.target.value] = small.value
    return found


def _string_key(node) -> str | None:
    """The key of ``{"a": ...}`` / ``inputs["a"]`` when it is a literal string."""
    value = literal_value(node, NOT_LITERAL) if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)) else None
    return value if isinstance(value, str) else None


def _key_code(key: str) -> str:
    """A dict key as code, double-quoted as Keras code writes it."""
    return f'"{key}"' if '"' not in key and "\\" not in key and key.isprintable() else repr(key)


def _rnn_call_args(call: cst.Call) -> tuple | None:
    """(input, initial state or None) of a recurrent layer's call written ``layer(x)``, ``layer(x, s)`` or
    ``layer(x, initial_state=s)``; None for any other argument (mask=, training=, constants=)."""
    pos = [a.value for a in call.args if a.keyword is None and not a.star]
    kws = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if any(a.star for a in call.args) or not pos or len(pos) > 2 or set(kws) - {"initial_state"} or (
            len(pos) == 2 and kws):
        return None
    return pos[0], (pos[1] if len(pos) == 2 else kws.get("initial_state"))

MODEL = "keras.Model"
INPUT = "keras.Input"
LINE_MARK = "# __fwport_functional_line__"
TRAINING_LINE = "__fwport_line__"  # training.MARK (training imports this pass): a statement a line gained before it
_INPUT_KWARGS = {"shape", "name", "dtype", "batch_size", "batch_shape"}
# merge layers and their function forms: no torch module, an expression at the call site
MERGE_LAYERS = {"keras.layers.Add": "add", "keras.layers.Subtract": "sub", "keras.layers.Multiply": "mul",
                "keras.layers.Average": "avg", "keras.layers.Maximum": "max", "keras.layers.Minimum": "min",
                "keras.layers.Concatenate": "cat"}
MERGE_FNS = {"keras.layers.add": "add", "keras.layers.subtract": "sub", "keras.layers.multiply": "mul",
             "keras.layers.average": "avg", "keras.layers.maximum": "max", "keras.layers.minimum": "min",
             "keras.layers.concatenate": "cat"}
# the Keras class a merge function (keras.layers.add) creates
_MERGE_CLASS = {"add": "Add", "sub": "Subtract", "mul": "Multiply", "avg": "Average", "max": "Maximum",
                "min": "Minimum", "cat": "Concatenate"}
_ARITH = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/"}
_AUG_ARITH = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
              cst.DivideAssign: cst.Divide}
_COMPARE = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
_STATIC_OPS = {cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b, cst.Multiply: lambda a, b: a * b,
               cst.FloorDivide: lambda a, b: a // b, cst.Modulo: lambda a, b: a % b, cst.Divide: lambda a, b: a / b}
# builtins a known value may go through where the model is built (`int((depth - 2) / 6)`)
_STATIC_FNS = {"int": int, "abs": abs, "round": round, "min": min, "max": max, "len": len, "str": str}
# TensorFlow / Keras comparisons a builder's `if` applies to numbers known where the model is built
_STATIC_COMPARES = {f"{m}.{n}": f for m in ("tensorflow", "tensorflow.math", "keras.ops")
                    for n, f in (("equal", lambda a, b: a == b), ("not_equal", lambda a, b: a != b),
                                 ("less", lambda a, b: a < b), ("greater", lambda a, b: a > b),
                                 ("less_equal", lambda a, b: a <= b), ("greater_equal", lambda a, b: a >= b))}
# keras.applications' helper that computes a ZeroPadding2D's padding from a tensor's spatial sizes
CORRECT_PAD = {f"{m}.applications.imagenet_utils.correct_pad" for m in ("keras", "tensorflow.keras", "tf_keras",
                                                                         "keras.src", "tf_keras.src")}
# readable attribute names for the usual layers (a PyTorch engineer's self.fc / self.conv)
_ATTR = {"dense": "fc", "conv1d": "conv", "conv2d": "conv", "batch-normalization": "bn", "embedding": "embedding",
         "layer-normalization": "norm", "dropout": "dropout", "flatten": "flatten", "max-pooling1d": "pool",
         "max-pooling2d": "pool", "average-pooling1d": "pool", "average-pooling2d": "pool",
         "global-average-pooling1d": "gap", "global-average-pooling2d": "gap", "global-max-pooling1d": "gmp",
         "global-max-pooling2d": "gmp", "activation": "act", "relu": "relu", "softmax": "softmax", "seq": "block",
         "up-sampling2d": "up", "zero-padding2d": "pad", "reshape": "reshape", "lambda-layer": "fn"}
# attribute names an nn.Module already has
_RESERVED = {"forward", "training", "parameters", "modules", "children", "state_dict", "eval", "train", "to",
             "apply", "cuda", "cpu", "float", "double", "half", "type", "add_module", "register_buffer",
             "register_parameter", "buffers", "named_modules", "zero_grad", "requires_grad_", "extra_repr"}
_VERBS = re.compile(r"^(?:build|create|make|get|define|construct|new)_+")


# the functions that make a tensor from sizes or values (tf.range, np.arange, keras.ops.ones, ...)
_MADE_TENSORS = {"range", "arange", "constant", "zeros", "ones", "linspace", "eye", "fill", "convert_to_tensor",
                 "array", "asarray", "full"}


class _Refused(Exception):
    """The model cannot be followed: reported at ``node`` with ``message``."""

    def __init__(self, node: cst.CSTNode, message: str, code_: str = "unsupported-construct"):
        super().__init__(message)
        self.node, self.message, self.code = node, message, code_


# --- the graph ---------------------------------------------------------------------------------------

@dataclass(eq=False)
class _Op:
    """A Keras operation: an InputLayer, a layer object (called once or more), a merge, an op."""

    kind: str  # input | layer | merge | op
    is_layer: bool
    keras: tuple = ()  # the Keras class names it may have (a merge's function form: Add); () when not known


@dataclass(eq=False)
class _Node:
    op: _Op
    parents: list["_Node"]
    where: cst.CSTNode | None = None  # the call that made it
    mask: str | None = None  # the code of the Keras mask its tensor carries (masks.py)


def _call_params(ctx, class_name: str) -> tuple[list[str], set[str] | None] | None:
    """The parameters of ``call`` (after self) of the module-level layer class ``class_name`` as
    written: (positional ones, every name a keyword may have or None with ``**kwargs``); None when
    there is no such method or it takes ``*args``."""
    cache = ctx.analyses.setdefault("functional_call_params", {})
    if class_name not in cache:
        module = ctx.analyses.get("parsed", (None,))[0]
        found = None
        for stmt in module.body if module is not None else ():
            if isinstance(stmt, cst.ClassDef) and stmt.name.value == class_name \
                    and isinstance(stmt.body, cst.IndentedBlock):
                fn = next((f for f in stmt.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "call"), None)
                if fn is not None and not isinstance(fn.params.star_arg, cst.Param):
                    positional = [p.name.value for p in [*fn.params.posonly_params, *fn.params.params]][1:]
                    keywords = None if fn.params.star_kwarg is not None else \
                        {*positional, *(p.name.value for p in fn.params.kwonly_params)}
                    found = (positional, keywords)
        cache[class_name] = found
    return cache[class_name]


def _returned_tuple(ctx, class_name: str) -> int | None:
    """How many values ``call`` of the module-level layer class ``class_name`` returns where every return of its own
    (not a nested function's) is a literal tuple of one length, without starred elements (cait's ClassAttention:
    ``return x_cls, attn``): that length; else None."""
    module = ctx.analyses.get("parsed", (None,))[0]
    for stmt in module.body if module is not None else ():
        if isinstance(stmt, cst.ClassDef) and stmt.name.value == class_name and isinstance(stmt.body, cst.IndentedBlock):
            fn = next((f for f in stmt.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "call"), None)
            if fn is None:
                return None
            nested = {id(r) for d in find_all(fn.body, cst.FunctionDef) for r in find_all(d, cst.Return)}
            nested |= {id(r) for d in find_all(fn.body, cst.Lambda) for r in find_all(d, cst.Return)}
            returns = [r for r in find_all(fn.body, cst.Return) if id(r) not in nested]
            sizes = {len(r.value.elements) if isinstance(r.value, cst.Tuple) and not any(
                isinstance(e, cst.StarredElement) for e in r.value.elements) else None for r in returns}
            return sizes.pop() if len(sizes) == 1 and None not in sizes else None
    return None


def _mask_kept(ctx, layer) -> bool:
    """The translated forward of the layer class ``layer`` keeps call()'s ``mask`` as an ordinary parameter
    (subclass.py ``_plan_call``): its body reads it and nothing in the file attaches a Keras mask to a tensor,
    so Keras gives it what its caller passes (gaugan's ``ResBlock(filters)(x, mask)``, a segmentation map)."""
    from fwport.packs.tf2torch.passes.subclass import _names_used, keras_masks
    module = ctx.analyses.get("parsed", (None,))[0]
    if layer.kind != "user" or module is None or keras_masks(ctx):
        return False
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and stmt.name.value == layer.rule and isinstance(stmt.body, cst.IndentedBlock):
            fn = next((f for f in stmt.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "call"), None)
            return fn is not None and "mask" in _names_used(fn.body)
    return False


@dataclass(eq=False)
class _Tensor:
    shape: tuple | None  # source layout, without batch; None: unknown
    node: _Node
    flat: tuple | None = None  # (h, w, c) when a channels-first map was flattened into it
    last: bool = False  # the output of a layer class of this file: channels-last, whatever the model's layout
    # keras.Input(shape=<a parameter>), or one joined to literal sizes (img_size + (3,)): (name, head,
    # tail); its rank comes from the first layer
    shape_name: tuple | None = None


def _same_layout(ts: list[_Tensor]) -> bool:
    """The tensors of an elementwise op (+ - * /, Add, Multiply...) of a channels-first model are in one layout:
    each of a known rank, all the same, and all channels-first (or all a layer class's channels-last output).
    Then each is permuted alike, so broadcasting pairs the same axes as in Keras (equal ranks pair axis by axis),
    whatever sizes are unknown (``keras.Input((None, None, 3))``)."""
    return all(t.shape is not None for t in ts) and len({len(t.shape) for t in ts}) == 1 \
        and len({t.last for t in ts}) == 1


def _broadcast(ts: list[_Tensor]) -> tuple | None:
    """The shape of an elementwise op's result (source layout): axis by axis, a known size other than 1 wins
    (an unknown one broadcasts to it or equals it), a 1 gives way, else unknown. Operands of one rank; else the
    first's shape (a scalar or a builder value with a tensor)."""
    shapes = [t.shape for t in ts]
    if any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:
        return shapes[0]
    out = []
    for dims in zip(*shapes):
        known_ = {d for d in dims if d is not None and d != 1}
        out.append(next(iter(known_)) if len(known_) == 1 else dims[0] if len(set(dims)) == 1
                   else 1 if all(d == 1 for d in dims) else None)
    return tuple(out)


@dataclass(eq=False)
class _Multi:
    """What a helper that returns several tensors (``return x, skip``) gives: unpacked at the call."""

    tensors: list[_Tensor]


@dataclass(eq=False)
class _Layer:
    """A Keras layer object: ``dense = layers.Dense(4)`` or an inline ``layers.Dense(4)(x)``."""

    call: cst.Call  # the constructor call (input tree)
    rule: object  # the rule; for kind "merge" the Keras name
    # rule | merge | seq (a nested keras.Sequential) | user (a layer class of this file) | given (a builder value:
    # a model or layer made elsewhere, kept as given)
    kind: str = "rule"
    attr: str = ""
    var: str | None = None  # the variable it is bound to, if any
    op: _Op | None = None
    module: cst.BaseExpression | None = None  # the torch module (set at the first call)
    in_key: tuple | None = None
    out: tuple | None = None  # (shape, flat) of its output
    records: list[tuple[str, LayerRecord]] = field(default_factory=list)  # (path below it, record)
    movedim: bool = False  # its channels-last output is moved to channels-first at each call
    # in a graph that keeps Keras's layout, a channels-first module (a global pooling, a BatchNorm on
    # sequences): its input moved to channels-first at each call, and its output back when it is a map
    permute_in: bool = False
    permute_back: bool = False
    # a model of the file (it takes Keras's layout) called on a map of a channels-first graph: its input
    # moved channels-last, its output back when it is a map
    keras_in: bool = False
    keras_back: bool = False
    activation: str | None = None  # "torch.relu({})": its activation, applied where it is called
    layout_bound: int = 0  # a rule layer's torch module takes channels-first inputs of this rank (0: any layout)
    # a rule layer of a channels-first graph called on a layer class's channels-last output (``_after_last``)
    last_in: bool | None = None
    prefix: str = ""  # "block1." for a layer of a helper's module
    in_loop: bool = False  # an nn.ModuleList built by a for statement over a run-time value
    site: cst.CSTNode | None = None  # a Sequential factory's call: where the findings on its (copied) layers go
    frozen: bool | None = None  # `layer.trainable = False` in the builder: requires_grad_(frozen) in __init__
    masked: bool | None = None  # called on a tensor that carries Keras's mask, its module called with it


@dataclass
class _Plan:
    """What :func:`finish` turns into a class: statement roles by index in the scope's body."""

    path: list[int]  # index of the builder in module.body; [] for a module-level model
    class_name: str
    roles: dict[int, str]  # input | layer | forward | model | config | keep
    init_lines: dict[int, list[str]]  # statement index → `self.<attr> = <module>` lines before it
    forward_params: list[str]
    returns: list[str]  # the forward's return expression(s), as code
    model_target: str | None  # `model = keras.Model(...)`: "model"; returned directly: None
    keep_copies: set[int] = field(default_factory=set)  # config statements the builder also needs
    # a channels-first graph's inputs moved at entry: name → (the line moving it, how the forward's note shows it)
    moved: dict[str, tuple[str, str]] = field(default_factory=dict)
    reads_above: bool = False  # forward opens with tensors of a model above (_import_tensors)
    # channels-first graphs keep Keras's interface: these statements open the forward (inputs moved
    # channels-first once), and the feature maps it returns are moved back (Keras's layout)
    entry_lines: list[str] = field(default_factory=list)
    scope: str = ""
    user_layers: list[tuple[str, str, str]] = field(default_factory=list)  # (class, Keras path, attribute)
    generated: dict[int, list] = field(default_factory=dict)  # statement index → its unrolled statements
    carried: dict[str, str] = field(default_factory=dict)  # builder value read in forward → attribute
    class_code: dict[str, list[str]] = field(default_factory=dict)  # helper → its classes' code
    helper_uses: dict[str, int] = field(default_factory=dict)  # helper → calls followed
    return_keys: list[str] | None = None  # keras.Model(outputs={"a": ...}): the keys of returns
    base: str | None = None  # EmbeddingModel(inputs, outputs): the file's class it derives from (else nn.Module)
    pinned: dict[str, object] = field(default_factory=dict)  # builder parameter → the only value it is built for
    # module level: `normalizer.adapt(data)` above the model (its index) → `model.normalizer.adapt(data)`, placed
    # right after the model's statement (_Follow._adapt_before)
    adapts: dict[int, cst.BaseStatement] = field(default_factory=dict)
    # a named layer's output a model below reads (keras.Model(m.input, m.get_layer("x").output)): Keras name → (the
    # statement index binding it, the expression of its output in Keras's layout, forward's parameters it depends on)
    taps: dict[str, tuple[int, str, frozenset]] = field(default_factory=dict)
    tap_methods: dict[str, tuple[list[str], int, str]] = field(default_factory=dict)  # method → (params, index, ret)
    tap_defs: list = field(default_factory=list)  # (finish) those methods, built by _parts


# while run() works: (walk, id(node)) → (node, its answer) for the read-only walks below that it asks again and
# again of the same statements (_layout, _count and _statement_role each ask _calls of every statement of a builder;
# run, _follow and _model_left the model calls of a builder's statements; _step_models and _module_sequentials the
# names each top-level statement binds). A node never changes; the node is held with its answer (its id is not
# reused while the pass runs), and the answers go when run() returns.
_memo: dict | None = None


def _memoized(walk, node: cst.CSTNode, compute):
    memo = _memo
    if memo is None:
        return compute(node)
    key = (walk, id(node))
    hit = memo.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]
    value = compute(node)
    memo[key] = (node, value)
    return value


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    global _memo
    outer, _memo = _memo, {}
    try:
        return _run(module, ctx)
    finally:
        _memo = outer


def _flatten_withs(module: cst.Module, ctx: FileContext) -> cst.Module:
    """A module-level ``with`` block that builds a functional model (``with strategy.scope():`` / ``with
    tf.device(...):`` around the keras.Input and keras.Model calls, a notebook's cell) spliced into the module: its
    header stays in place with a body of ``pass`` on its line (its items translated by their own rules: a strategy's scope
    becomes contextlib.nullcontext()), its statements follow it at module level, where the pass follows them as any
    module-level model's; :func:`finish` (:func:`_rewrap_withs`) puts what comes of them back into the block, so the
    class and ``model = Model()`` are built inside it, as Keras built the model. Recorded by the header's place and
    the number of statements (``ctx.analyses["functional_withs"]``). Only a block of plain statements (no def or
    class, no nested ``with``)."""
    withs: dict[int, tuple[int, cst.IndentedBlock]] = {}
    flat: list = []
    for stmt in module.body:
        inner = stmt.body.body if isinstance(stmt, cst.With) and isinstance(stmt.body, cst.IndentedBlock) else None
        if inner and not any(isinstance(s, (cst.FunctionDef, cst.ClassDef, cst.With)) for s in inner) \
                and _model_calls(list(inner), ctx) \
                and any(ctx.imports.resolve(c.func) == INPUT for s in inner for c in _calls(s)):
            withs[len(flat)] = (len(inner), stmt.body)
            # (`with ...: pass` on the header's line: the statements below keep their lines, which the findings'
            # comments are placed by)
            flat.append(stmt.with_changes(body=cst.SimpleStatementSuite([cst.Pass()])))
            flat.extend(inner)
        else:
            flat.append(stmt)
    ctx.analyses["functional_withs"] = withs
    return module.with_changes(body=flat) if withs else module


def _rewrap_withs(out: list, origin: list[int], ctx: FileContext) -> list:
    """``out`` (statements, each from the place ``origin`` gives in the flattened module) with the statements that
    came from a ``with`` block's statements (:func:`_flatten_withs`) back in its body (``pass`` where none is left)."""
    withs = ctx.analyses.get("functional_withs") or {}
    if not withs:
        return out
    result = []
    k = 0
    while k < len(out):
        head = origin[k]
        if head in withs and isinstance(out[k], cst.With) and not any(origin[j] == head for j in range(k + 1, len(out))):
            n, block = withs[head]
            j = k + 1
            while j < len(out) and head < origin[j] <= head + n:
                j += 1
            inner = [s.with_changes(leading_lines=[ln if ln.comment is not None else cst.EmptyLine(indent=False)
                                                   for ln in s.leading_lines]) for s in out[k + 1:j]]
            inner = inner or [cst.SimpleStatementLine([cst.Pass()])]
            inner[0] = inner[0].with_changes(leading_lines=_strip_blank(inner[0].leading_lines))
            result.append(out[k].with_changes(body=block.with_changes(body=inner)))
            k = j
            continue
        result.append(out[k])
        k += 1
    return result


def _run(module: cst.Module, ctx: FileContext) -> cst.Module:
    module = _flatten_withs(module, ctx)
    body = list(module.body)
    regularizers.note_functions(module, ctx)  # (a regularizer a function of the file returns)
    changed = False
    taken = _module_names(module)
    constants = module_scope(module, ctx)
    users = _layer_classes(module, ctx)
    ctx.analyses["functional_step_models"] = _step_models(module, ctx)
    builders = {i for i, stmt in enumerate(module.body) if isinstance(stmt, cst.FunctionDef)
                and isinstance(stmt.body, cst.IndentedBlock) and _model_calls(stmt.body.body, ctx)}
    # functions of the file that may build blocks (called on tensors by a builder)
    helpers = {stmt.name.value: stmt for i, stmt in enumerate(module.body) if isinstance(stmt, cst.FunctionDef)
               and i not in builders and isinstance(stmt.body, cst.IndentedBlock)}
    built: dict[str, dict] = {}  # builders translated above: their models can be layers of the next ones
    built_defs: dict[str, cst.FunctionDef] = {}  # their functions (get_encoder(latent_dim).output.shape)
    seqs = _module_sequentials(module, ctx)
    for i, stmt in enumerate(module.body):
        if i in builders:
            before = _State(ctx, taken)
            b = _Builder(ctx, constants, stmt, [i], taken, users, helpers)
            b.module_seqs = seqs
            b.builder_models = dict(built)
            b.builder_defs = dict(built_defs)
            pinnable = _pinned_params(module, ctx, stmt, set(helpers))
            b.pinnable = set(pinnable)
            new = b.run()
            pinned = pinnable if new is None else {}
            if pinned:  # refused as written: again for the values the file builds it with (see _pinned_params)
                refused = _State(ctx, taken)
                before.restore()
                b = _Builder(ctx, constants, stmt, [i], taken, users, helpers)
                b.module_seqs = seqs
                b.builder_models = dict(built)
                b.builder_defs = dict(built_defs)
                b.pinned = pinned
                new = b.run()
                if new is None:  # refused again: the model as written, its findings and its statements settled
                    refused.restore()
            if new is not None:
                body[i] = new
                changed = True
                if b.model_summary is not None:
                    built[b.scope] = b.model_summary
                    built_defs[b.scope] = stmt
        elif isinstance(stmt, (cst.ClassDef, cst.FunctionDef)):
            if _has_model_call(stmt, ctx):
                # a plain class whose methods build the model (barlow_twins's ResNet34: helper methods called on
                # tensors, __call__ returning keras.Model(...)): nothing of it is translated, so its layer calls
                # stay Keras code under this one error, as those of a functional model left as written
                plain = isinstance(stmt, cst.ClassDef) and all(
                    isinstance(b.value, cst.Name) and b.value.value == "object" for b in stmt.bases)
                _refuse_all(ctx, stmt, "a functional model (keras.Model(inputs, outputs)) built inside a class or a "
                            "nested function is not translated yet: move its construction into a top-level builder "
                            "function, or write the nn.Module by hand" + (
                                " (the layer calls of this class are left as written, Keras code)" if plain else ""))
                if plain:
                    scan(stmt, _SettleGraphCalls(ctx))
    # module level: one model after the other (encoder, then decoder), each from the statements
    # after the previous one
    rows = [i for i, s in enumerate(module.body) if not isinstance(s, (cst.FunctionDef, cst.ClassDef))
            and _model_calls([s], ctx)]
    lo = 0
    prior: dict[str, dict] = {}  # models built above: usable as layers of the next ones
    for hi in rows:
        b = _Builder(ctx, constants, None, [], taken, users, helpers)
        b.later_rows = [r for r in rows if r > hi]
        b.source_body = list(module.body)  # (the models above rewrite their statements in `body`)
        b.prior_models = dict(prior)
        b.builder_models = dict(built)  # encoder = make_encoder() at module level: the instance it returns
        b.builder_defs = dict(built_defs)
        b.shown_seqs = seqs
        out = b.run_module(body, lo, hi)
        if out is not None:
            body = out
            changed = True
            if b.model_summary is not None:
                prior[b.scope] = b.model_summary
        lo = hi + 1
    _settle_replaced_helpers(module, ctx, helpers, builders)
    _graph_fragments(module, ctx, rows)
    ctx.analyses["functional_places"] = _places(body)
    return module.with_changes(body=body) if changed else module


def _places(body) -> list[str]:
    """What :func:`finish` checks its plans' statement places by: each top-level statement's kind (a def's, a
    class's name). A pass between run and finish that removes or inserts a top-level statement would shift
    them (the sequential pass marks the statements it drops, runtime.finish removes them last)."""
    return [f"def {s.name.value}" if isinstance(s, cst.FunctionDef) else f"class {s.name.value}"
            if isinstance(s, cst.ClassDef) else "statement" for s in body]


def _fragment_value(value: cst.BaseExpression, ctx: FileContext) -> bool:
    """``value`` builds a Keras graph tensor from others and nothing else: a name, a Keras layer built and
    called in place (``layers.Conv2D(8, 3)(x)``), a merge function (``layers.add([x, r])``) or arithmetic."""
    if isinstance(value, cst.Name):
        return True
    if isinstance(value, cst.BinaryOperation):
        return _fragment_value(value.left, ctx) and _fragment_value(value.right, ctx)
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Call):
        return (ctx.imports.resolve(func.func) or "").startswith("keras.layers.")
    return ctx.imports.resolve(func) in MERGE_FNS


def _foreign_value(value: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The code of the callable when ``value`` calls another library's layer or model on graph tensors
    (``tfsim.layers.MetricEmbedding(256)(x)``, ``tfsim.models.SimilarityModel(inputs, outputs)``): a name
    imported from neither Keras nor TensorFlow, which fwport does not translate (its rule-pass error stays)."""
    if not isinstance(value, cst.Call):
        return None
    func = value.func.func if isinstance(value.func, cst.Call) else value.func
    q = ctx.imports.resolve(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
    if not q or "." not in q or q.split(".")[0] in ("keras", "tensorflow", "numpy", "math", "torch", "jax", "scipy"):
        return None
    return code(func)


def _graph_fragments(module: cst.Module, ctx: FileContext, rows: list[int]) -> None:
    """Module-level ``x = keras.Input(...)`` whose graph no keras.Model(...) takes (a notebook's cell trying
    layers on an input, before the cell that builds the model): one error at the Input, and its layer calls
    left as written (Keras code) instead of one error per layer. Followed forward through plain assignments
    of layer calls, merges and arithmetic on its tensors until every name of it is bound anew; a statement of
    any other kind that reads one of them (a model, a print, a loop) leaves the lines to the other passes."""
    body = module.body
    for i, st in enumerate(body):
        small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Call)
                and ctx.imports.resolve(small.value.func) == INPUT) or ctx.is_settled(small.value):
            continue
        live = {small.targets[0].target.value}
        members = [i]
        foreign: list[str] = []  # another library's layers / models the graph goes through (_foreign_value)
        for j in range(i + 1, len(body)):
            if not live:
                break
            later = body[j]
            if isinstance(later, (cst.FunctionDef, cst.ClassDef)):
                continue  # (their bodies run when called; a call of one at module level is a statement here)
            one = later.body[0] if isinstance(later, cst.SimpleStatementLine) and len(later.body) == 1 else None
            plain = isinstance(one, cst.Assign) and all(isinstance(t.target, cst.Name) for t in one.targets)
            read = (_names_in(one.value) & live) if plain else _read_before_bound(later, live)
            if not read:
                if plain:
                    live -= {t.target.value for t in one.targets}  # bound anew
                continue
            other = _foreign_value(one.value, ctx) if plain and j not in rows else None
            if not plain or j in rows or not (_fragment_value(one.value, ctx) or other):
                members = []
                break
            if other and other not in foreign:
                foreign.append(other)
            members.append(j)
            if other and not isinstance(one.value.func, cst.Call):
                live -= {t.target.value for t in one.targets}  # a model of that library: no graph tensor
                continue
            live |= {t.target.value for t in one.targets}
        if not members:
            continue
        if foreign:
            ctx.report(Severity.ERROR, "unsupported-construct",
                       f"{small.targets[0].target.value} = keras.Input(...) starts a Keras graph that goes through "
                       f"{', '.join(foreign)}, of a library fwport does not translate (this statement and the "
                       f"{len(members) - 1} below it that build on it): torch has no symbolic tensors, so fwport "
                       "leaves these lines as written (Keras code); write the model as an nn.Module by hand, with a "
                       "PyTorch counterpart of that library's layers", small.value)
            for k in members:
                scan(body[k], _SettleGraphCalls(ctx))
            continue
        ctx.report(Severity.ERROR, "unsupported-construct",
                   f"{small.targets[0].target.value} = keras.Input(...) starts a Keras graph that no keras.Model(...) "
                   f"takes (this statement and the {len(members) - 1} below it that build on it: a trial of layers on a symbolic input): "
                   "torch has no symbolic tensors and these layers build nothing a model uses, so fwport leaves "
                   "these lines as written (Keras code); delete them, or end them with keras.Model(inputs, outputs) "
                   "to have the model translated", small.value)
        for k in members:
            scan(body[k], _SettleGraphCalls(ctx))


class _State:
    """What following a model changes in the file's context (findings, settled nodes, records, the
    analyses the pass shares, the class names taken): a snapshot, put back by :meth:`restore`."""

    def __init__(self, ctx: FileContext, taken: set[str]):
        self.ctx, self.taken = ctx, taken
        self.pending, self.settled = list(ctx.pending), dict(ctx.settled)
        self.layers, self.models = list(ctx.layers), dict(ctx.models)
        self.imports, self.names = set(ctx.needed_imports), set(taken)
        self.hooks = (dict(ctx.subscript_hooks), dict(ctx.argument_hooks))
        self.analyses = {k: (v.copy() if isinstance(v, (dict, set, list)) else v) for k, v in ctx.analyses.items()}

    def restore(self) -> None:
        ctx = self.ctx
        ctx.pending[:], ctx.layers[:] = self.pending, self.layers
        ctx.settled.clear()
        ctx.settled.update(self.settled)
        ctx.models.clear()
        ctx.models.update(self.models)
        ctx.needed_imports.clear()
        ctx.needed_imports.update(self.imports)
        self.taken.clear()
        self.taken.update(self.names)
        for live, saved in zip((ctx.subscript_hooks, ctx.argument_hooks), self.hooks):
            live.clear()
            live.update(saved)
        ctx.analyses.clear()
        ctx.analyses.update({k: (v.copy() if isinstance(v, (dict, set, list)) else v) for k, v in self.analyses.items()})


class _NameUses(ValueVisitor):
    """The ``Name`` nodes reading one name (not attribute names, keywords or parameters' names)."""

    def __init__(self, name: str):
        self.name = name
        self.uses: list[cst.Name] = []
        self.calls: list[cst.Call] = []

    def visit_Call(self, n: cst.Call) -> None:
        if isinstance(n.func, cst.Name) and n.func.value == self.name:
            self.calls.append(n)

    def visit_Name(self, n: cst.Name) -> None:
        if n.value == self.name:
            self.uses.append(n)

    def visit_Param(self, n: cst.Param) -> bool:
        if n.default is not None:
            scan(n.default, self)
        return False

    def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
        if n.name.value == self.name:  # the builder's own definition (its body may call it: not followed)
            return False
        for d in n.decorators:
            scan(d, self)
        scan(n.params, self)
        scan(n.body, self)
        return False


class _Deciding(cst.CSTVisitor):
    """Names a builder's structure depends on: read by the test of an ``if`` / ``while`` / conditional
    expression, the iterable of a ``for``, or an argument of a helper function of the file (whose ``if``
    statements its literal arguments and its tensors' sizes decide); and the names the assignments binding
    those read (walked backwards by :func:`_deciding_names`: a tensor given to a helper depends on the
    Input's shape)."""

    def __init__(self, helpers: set[str]):
        self.helpers = helpers
        self.names: set[str] = set()
        self.assigns: list[tuple[set[str], set[str]]] = []  # (names bound, names read)

    def visit_If(self, n: cst.If) -> None:
        self.names |= _names_in(n.test)

    def visit_While(self, n: cst.While) -> None:
        self.names |= _names_in(n.test)

    def visit_IfExp(self, n: cst.IfExp) -> None:
        self.names |= _names_in(n.test)

    def visit_For(self, n: cst.For) -> None:
        self.names |= _names_in(n.iter)

    def visit_Call(self, n: cst.Call) -> None:
        if isinstance(n.func, cst.Name) and n.func.value in self.helpers:
            for a in n.args:
                self.names |= _names_in(a.value)

    def visit_Assign(self, n: cst.Assign) -> None:
        self.assigns.append(({x.value for t in n.targets for x in _name_nodes(t.target)}, _names_in(n.value)))

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        self.assigns.append(({x.value for x in _name_nodes(n.target)}, _names_in(n.value)))


def _deciding_names(fn: cst.FunctionDef, helpers: set[str]) -> set[str]:
    v = _Deciding(helpers)
    scan(fn.body, v)
    names = set(v.names)
    grew = True
    while grew:
        grew = False
        for bound, read in v.assigns:
            if bound & names and not read <= names:
                names |= read
                grew = True
    return names


def _plain_value(v) -> bool:
    if isinstance(v, (tuple, _PinnedList)):
        return all(_plain_value(x) for x in v)
    if isinstance(v, str):  # written into __init__'s check and its message as it is
        return v.isprintable() and not set(v) & set("\"'{}\\")
    return v is None or isinstance(v, (bool, int, float))


def _plain_nested(v) -> bool:
    """A list or tuple (nested) of plain values (:func:`_plain_value`): written in place as a literal."""
    if isinstance(v, (list, tuple)):
        return all(_plain_nested(x) for x in v)
    return _plain_value(v)


class _ItemReads(cst.CSTVisitor):
    """The uses of one name: how many, and how many only read its items (``for v in n``, ``enumerate(n)``,
    ``len(n)``, ``n[i]`` read)."""

    def __init__(self, name: str):
        self.name, self.uses, self.reads = name, 0, 0
        self.stored: set[int] = set()

    def _is(self, node) -> bool:
        return isinstance(node, cst.Name) and node.value == self.name

    def visit_Name(self, node):
        if node.value == self.name:
            self.uses += 1

    def visit_AssignTarget(self, node):
        self._store(node.target)

    def visit_AugAssign(self, node):
        self._store(node.target)

    def visit_Del(self, node):
        self._store(node.target)

    def _store(self, target):
        for n in find_all(target, cst.Name):
            if n.value == self.name:
                self.stored.add(id(n))

    def visit_For(self, node):
        if self._is(node.iter):
            self.reads += 1

    def visit_Call(self, node):
        if isinstance(node.func, cst.Name) and node.func.value in ("enumerate", "len") and len(node.args) == 1 \
                and node.args[0].keyword is None and not node.args[0].star and self._is(node.args[0].value):
            self.reads += 1

    def visit_Subscript(self, node):
        if self._is(node.value) and id(node.value) not in self.stored:
            self.reads += 1


class _ItemOrCompReads(_ItemReads):
    """:class:`_ItemReads`, a comprehension's ``for v in n`` read too."""

    def visit_CompFor(self, node):
        if self._is(node.iter):
            self.reads += 1


def _only_iterated(name: str, stmts: list) -> bool:
    """``name`` is neither bound again nor mutated nor passed on in ``stmts``: each use reads its items (a
    comprehension's ``for`` included)."""
    v = _ItemOrCompReads(name)
    for st in stmts:
        if name in _names_bound_in(st):
            return False
        scan(st, v)
    return not v.stored and v.uses == v.reads


def _until_rebound(name: str, stmts: list) -> int | None:
    """How many of ``stmts`` see the value ``name`` holds before them: all of them, or those up to and including
    the first that binds it again when that is a plain ``name = ...`` (its value reads the old one); None where a
    compound statement or any other binding (``for name in``, ``name += 1``, unpacking) binds it again."""
    for j, st in enumerate(stmts):
        if name not in _names_bound_in(st):
            continue
        small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and small.targets[0].target.value == name:
            return j + 1
        return None
    return len(stmts)


def _only_read(name: str, stmts: list) -> bool:
    """``name`` is neither bound again nor mutated nor passed on in ``stmts``: each use reads its items."""
    v = _ItemReads(name)
    for st in stmts:
        if name in _names_bound_in(st):
            return False
        scan(st, v)
    return not v.stored and v.uses == v.reads


def _constant_value(node: cst.BaseExpression, consts: dict, depth: int = 0):
    """A call's argument as a value: a literal, a module constant's (``num_classes=NUM_CLASSES``), or tuples /
    lists of those joined by + (``input_shape=image_size + (3,)``); NOT_LITERAL otherwise."""
    v = literal_value(node, NOT_LITERAL)
    if v is not NOT_LITERAL or depth > 8:
        return v
    if isinstance(node, cst.Name) and isinstance(consts.get(node.value), cst.BaseExpression):
        return _constant_value(consts[node.value], consts, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        a, b = _constant_value(node.left, consts, depth + 1), _constant_value(node.right, consts, depth + 1)
        if isinstance(a, (tuple, list)) and type(a) is type(b):
            return a + b
    return NOT_LITERAL


def _input_shape_names(fn: cst.FunctionDef, ctx: FileContext) -> set[str]:
    """Names the shape of a keras.Input of the builder ``fn`` reads (``keras.Input(shape=input_shape)``):
    every layer size of the model depends on them."""
    names: set[str] = set()
    for c in _calls(fn.body):
        if ctx.imports.resolve(c.func) == INPUT:
            shape = call_argument(c, "shape", 0)
            if shape is not None:
                names |= _names_in(shape)
    return names


def _pinned_params(module: cst.Module, ctx: FileContext, fn: cst.FunctionDef, helpers: set[str]) -> dict[str, object]:
    """The parameters of the builder ``fn`` that its structure depends on (:func:`_deciding_names`) and that
    get one literal value (or a module constant's) at every call of it in this file, its default where a
    call gives none: parameter → value. A model refused as
    written (an ``if`` or a loop on such a parameter, a helper's ``if`` on one it passes) is followed again
    with these values in place, and its class's ``__init__`` raises ValueError for another value (as
    data_format.py does for a layer's data_format). Empty where the builder is used other than called
    (passed as a value), a call spreads ``*args`` / ``**kwargs``, or no call gives the same value."""
    params = fn.params
    if params.posonly_params or isinstance(params.star_arg, cst.Param) or isinstance(params.star_kwarg, cst.Param):
        return {}
    visitor = _NameUses(fn.name.value)
    scan(module, visitor)
    if not visitor.calls or len(visitor.uses) != len(visitor.calls):
        return {}
    rebound = set()
    for st in fn.body.body:
        rebound |= _names_bound_in(st) | set(_assigned(st)) | _stepped_names(st)
    stepped = _int_stepped_params(fn)  # (filters *= 2 in a loop: followed from the value pinned, not rebound)
    rebound -= stepped
    consts = _module_assignments(ctx)
    methods = {n.value.value for n in _attribute_reads(fn.body) if isinstance(n.value, cst.Name)}
    values: dict[str, set] = {}
    first: dict[str, object] = {}
    from fwport.core.bind import bind_def
    for call in visitor.calls:
        bound = bind_def(call, fn)
        if bound is None:
            return {}
        for p in [*params.params, *params.kwonly_params]:
            name = p.name.value
            node = bound.get(name)
            v = _constant_value(node, consts) if node is not None else NOT_LITERAL
            if isinstance(v, list) and all(_plain_value(x) for x in v) and name not in methods:
                v = _PinnedList(v)  # (gnn_citations' hidden_units = [32, 32], a list its helpers step through)
            if v is NOT_LITERAL or not _plain_value(v):
                values.setdefault(name, set()).add(None)
                values[name].add(object())  # (never one value)
                continue
            values.setdefault(name, set()).add(repr(v))
            first.setdefault(name, v)
    deciding = _deciding_names(fn, helpers) | _input_shape_names(fn, ctx) | stepped
    return {n: first[n] for n, vs in values.items() if len(vs) == 1 and n in first and n not in rebound
            and n in deciding and (n not in stepped or is_int(first[n]))}


class _Binds(cst.CSTVisitor):
    """The names a function's body steps by an augmented assignment of an int operator (``filters *= 2``,
    ``aug``) and those it binds any other way (``other``)."""

    def __init__(self):
        self.aug: set[str] = set()
        self.other: set[str] = set()

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        if isinstance(n.target, cst.Name) and type(n.operator) in _AUG_OPS:
            self.aug.add(n.target.value)
        else:
            self.other |= {x.value for x in _name_nodes(n.target)}

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        self.other |= {x.value for x in _name_nodes(n.target)}

    def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
        self.other |= {x.value for x in _name_nodes(n.target)}

    def visit_For(self, n: cst.For) -> None:
        self.other |= {x.value for x in _name_nodes(n.target)}

    def visit_CompFor(self, n: cst.CompFor) -> None:
        self.other |= {x.value for x in _name_nodes(n.target)}

    def visit_AsName(self, n: cst.AsName) -> None:
        self.other |= {x.value for x in _name_nodes(n.name)}

    def visit_NamedExpr(self, n: cst.NamedExpr) -> None:
        self.other |= {x.value for x in _name_nodes(n.target)}

    def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
        self.other.add(n.name.value)
        return False

    def visit_ClassDef(self, n: cst.ClassDef) -> bool:
        self.other.add(n.name.value)
        return False

    def visit_Global(self, n) -> None:
        self.other |= {x.name.value for x in n.names}

    def visit_Nonlocal(self, n) -> None:
        self.other |= {x.name.value for x in n.names}


def _int_stepped_params(fn: cst.FunctionDef) -> set[str]:
    """The parameters of ``fn`` its body binds again only by stepping them (``filters *= 2``, ``filters //= 2``:
    cyclegan's generator): pinned, such a parameter starts the builder's known ints (:meth:`_Builder.run`), and the
    loops written out follow it pass by pass."""
    params = {p.name.value for p in [*fn.params.params, *fn.params.kwonly_params]}
    v = _Binds()
    scan(fn.body, v)
    return (v.aug - v.other) & params


class _PinnedList(list):
    """A list every call of a builder gives one of its parameters (module constants such as ``hidden_units =
    [32, 32]``): pinned as the tuple of its items would be, written back as a list (:func:`_guard`)."""


class _AttributeReads(cst.CSTVisitor):
    def __init__(self):
        self.out: list[cst.Attribute] = []

    def visit_Attribute(self, n: cst.Attribute) -> None:
        self.out.append(n)


def _attribute_reads(node) -> list[cst.Attribute]:
    v = _AttributeReads()
    scan(node, v)
    return v.out


def _guard(name: str, value) -> str:
    """``__init__``'s first lines in a class translated for ``name=value`` only."""
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    test = f"{name} is not {value!r}" if value is None or isinstance(value, bool) else (
        f"list({name}) != {shown}" if isinstance(value, _PinnedList) else
        f"tuple({name}) != {shown}" if isinstance(value, tuple) else f"{name} != {shown}")
    return (f"if {test}:\n    raise ValueError(f\"translated for {name}={value!r} only (the value this file builds "
            f"it with), got {{{name}!r}}\")\n")


def _settle_replaced_helpers(module: cst.Module, ctx: FileContext, helpers: dict[str, cst.FunctionDef],
                             builders: set[int]) -> None:
    """A helper that only followed models call becomes its classes (``functional_replaced``); one
    that only functional builders call is theirs: nothing in its body is translated out of context."""
    plans = ctx.analyses.get("functional", [])
    followed = {k for plan in plans for k in plan.helper_uses}
    touched = set(ctx.analyses.get("functional_calls", {}))
    if not touched:
        return
    where = {stmt.name.value: i for i, stmt in enumerate(module.body)
             if isinstance(stmt, cst.FunctionDef) and stmt.name.value in helpers}
    translated = {plan.path[0] for plan in plans if plan.path}
    for plan in plans:
        if not plan.path:
            translated |= {i for i, r in plan.roles.items() if r != "keep"}
    refs: dict[str, set[int]] = {}
    for i, stmt in enumerate(module.body):
        names = _names_in(stmt.body) if isinstance(stmt, cst.FunctionDef) else _names_in(stmt)
        for name in names & touched:
            if where.get(name) != i:
                refs.setdefault(name, set()).add(i)
    replaced = ctx.analyses.setdefault("functional_replaced", set())
    helper_rows = {where[h] for h in followed if h in where}
    for name in touched:
        rows = refs.get(name, set())
        if name in followed and rows <= translated | helper_rows:
            replaced.add(name)
        if rows <= builders | translated | {where[h] for h in touched if h in where}:
            for c in _helper_body_calls(helpers[name]):
                ctx.settle(c)


def _layer_classes(module: cst.Module, ctx: FileContext) -> set[str]:
    """Top-level classes that derive from keras.Model / keras.layers.Layer (directly or through
    another such class of the file): the subclass pass makes them nn.Modules."""
    classes = [s for s in module.body if isinstance(s, cst.ClassDef)]
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for c in classes:
            if c.name.value in found:
                continue
            if any(b.keyword is None and (ctx.imports.resolve(b.value) in ("keras.Model", "keras.layers.Layer")
                                          or (isinstance(b.value, cst.Name) and b.value.value in found))
                   for b in c.bases):
                found.add(c.name.value)
                changed = True
    return found


def _is_model_call(node: cst.CSTNode, ctx: FileContext) -> bool:
    """``keras.Model(inputs, outputs)``: the functional form (not ``class M(keras.Model)``); also
    ``EmbeddingModel(inputs, outputs)`` of a file's Model subclass that only adds steps (:func:`_step_models`)."""
    return (isinstance(node, cst.Call) and _is_model_func(node.func, ctx)
            and any(a.keyword is None or a.keyword.value in ("inputs", "outputs") for a in node.args))


def _is_model_func(func: cst.BaseExpression, ctx: FileContext) -> bool:
    return ctx.imports.resolve(func) == MODEL or _model_base(func, ctx) is not None


def _model_base(func: cst.BaseExpression, ctx: FileContext) -> str | None:
    """``EmbeddingModel`` called functionally: the file's class, which the generated class derives from."""
    return func.value if isinstance(func, cst.Name) and func.value in ctx.analyses.get("functional_step_models", ()) \
        else None


# what a Model subclass defines that changes how its functional construction builds or runs
_GRAPH_METHODS = {"__init__", "__new__", "call", "build", "__call__", "compute_output_shape"}


def _step_models(module: cst.Module, ctx: FileContext) -> dict[str, int]:
    """Top-level subclasses of keras.Model (directly, or through such a class of the file) that define no
    constructor, call or build, only steps and helpers (``train_step``, ``predict_step``, ``metrics``):
    ``EmbeddingModel(inputs, outputs)`` is a functional model with those methods, which the subclass pass
    translates; its generated class derives from the translated one. A name bound again in the module
    is not one. Name → its index in the module's body (the generated class must come after it)."""
    classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    index = {s.name.value: i for i, s in enumerate(module.body) if isinstance(s, cst.ClassDef)}
    bound: dict[str, int] = {}
    for stmt in module.body:
        names = {stmt.name.value} if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else _names_bound_in(stmt)
        for n in names:
            bound[n] = bound.get(n, 0) + 1
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, c in classes.items():
            if name in found or bound.get(name) != 1 or c.decorators or not isinstance(c.body, cst.IndentedBlock):
                continue
            if not c.bases or any(b.keyword is not None or b.star for b in c.bases) or not all(
                    ctx.imports.resolve(b.value) == MODEL or (isinstance(b.value, cst.Name) and b.value.value in found)
                    for b in c.bases):
                continue
            defined = set()
            for st in c.body.body:
                if isinstance(st, cst.FunctionDef):
                    defined.add(st.name.value)
                elif not isinstance(st, cst.SimpleStatementLine) or not all(
                        isinstance(x, (cst.Expr, cst.Pass)) for x in st.body):
                    defined.add("<statement>")  # class attributes: not followed
            if not defined & (_GRAPH_METHODS | {"<statement>"}):
                found.add(name)
                changed = True
    return {n: index[n] for n in found}


# The visitors below are module-level classes given their state: a class statement inside a function
# creates a class (and its hook table) on every call, which costs several times the walk itself.

class _ModelCalls(cst.CSTVisitor):
    def __init__(self, ctx: FileContext, nested: bool):
        self.ctx, self.nested = ctx, nested
        self.found: list[cst.Call] = []

    def visit_FunctionDef(self, n) -> bool | None:
        return None if self.nested else False

    def visit_ClassDef(self, n) -> bool | None:
        return None if self.nested else False

    def visit_Call(self, n: cst.Call) -> None:
        if _is_model_call(n, self.ctx):
            self.found.append(n)


def _model_calls(body, ctx: FileContext) -> list[cst.Call]:
    """The functional keras.Model(...) calls in the statements (not inside nested defs/classes)."""
    found: list[cst.Call] = []
    for s in body:
        if not isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            found += _memoized(_ModelCalls, s, lambda s: _statement_model_calls(s, ctx))
    return found


def _statement_model_calls(stmt: cst.CSTNode, ctx: FileContext) -> list[cst.Call]:
    v = _ModelCalls(ctx, False)
    scan(stmt, v)
    return v.found


def _has_model_call(stmt: cst.CSTNode, ctx: FileContext) -> bool:
    v = _ModelCalls(ctx, True)
    scan(stmt, v)
    return bool(v.found)


def _refuse_all(ctx: FileContext, stmt: cst.CSTNode, message: str) -> None:
    v = _ModelCalls(ctx, True)
    scan(stmt, v)
    for n in v.found:
        ctx.report(Severity.ERROR, "unsupported-construct", message, n)
        ctx.settle(n)


def _module_names(module: cst.Module) -> set[str]:
    names: set[str] = set()
    for s in module.body:
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            names.add(s.name.value)
        elif isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        if isinstance(t.target, cst.Name):
                            names.add(t.target.value)
                elif isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for a in small.names:
                        names.add((dotted_text(a.asname.name) if a.asname else dotted_text(a.name)).split(".")[0])
    return names


class _SettleGraphCalls(cst.CSTVisitor):
    """A model left as written: its Model / Input / layer calls are settled (no rule-pass finding), and so is
    every other call of the source framework there that a rule translates (``l2(1e-4)``, ``keras.initializers.RandomNormal(...)``,
    ``tf.concat(...)``): the statements stay Keras code, where a torch value (a regularizer helper, a torch
    op on symbolic tensors) would break them when they run."""

    def __init__(self, ctx: FileContext):
        self.ctx = ctx

    def visit_Call(self, n: cst.Call) -> None:
        q = self.ctx.imports.resolve(n.func) if not isinstance(n.func, cst.Call) else None
        if q == MODEL or q == INPUT or (q or "").startswith("keras.layers.") or isinstance(n.func, cst.Call) \
                or _model_base(n.func, self.ctx) is not None or self._translated(q):
            self.ctx.settle(n)

    def _translated(self, q: str | None) -> bool:
        """A source call the rule pass would translate (one without a rule keeps its no-rule error)."""
        rule = self.ctx.pack.by_name.get(q) if q is not None and self.ctx.imports.is_source(q) else None
        return rule is not None and rule.kind != "constant"


class _MethodsOnly(ValueVisitor):
    """Whether ``name`` is read (``read``) and whether it is ever read otherwise than as the object of a
    method call ``name.method(...)`` (``other``: called, passed, bound anew, an attribute's value read: a
    layer's variables, ``norm.mean``, or its weights by ``get_weights()``)."""

    def __init__(self, name: str):
        self.name = name
        self.read = False
        self.other = False

    def visit_Call(self, node: cst.Call) -> bool:
        f = node.func
        if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == self.name \
                and f.attr.value not in ("get_weights", "get_config", "__call__"):
            self.read = True
            for a in node.args:
                scan(a.value, self)
            return False
        return True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.other = True


class _CalledOnly(ValueVisitor):
    """How often ``name`` is called (``name(...)``, ``calls``) and whether it is read any other way (``other``:
    passed on, an attribute read, bound anew, read inside a nested function or lambda, which a copy's
    substitution does not enter)."""

    def __init__(self, name: str):
        self.name = name
        self.calls = 0
        self.other = False

    def visit_Call(self, node: cst.Call) -> bool:
        if isinstance(node.func, cst.Name) and node.func.value == self.name:
            self.calls += 1
            for a in node.args:
                scan(a.value, self)
            return False
        return True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.other = True

    def visit_FunctionDef(self, node) -> bool:
        self.other = self.other or self.name in _names_in(node)
        return False

    def visit_Lambda(self, node) -> bool:
        self.other = self.other or self.name in _names_in(node)
        return False


class _NamesIn(ValueVisitor):
    def __init__(self):
        self.out: set[str] = set()

    def visit_Name(self, n: cst.Name) -> None:
        self.out.add(n.value)

    def visit_Lambda(self, n) -> bool:
        return False

    def _comprehension(self, n, parts: list) -> bool:
        # its for-targets are its own names (Python 3 scopes them to the comprehension): in
        # `[f(x) for x in xs]` only f and xs are read from outside; the first iterable is read outside it
        own: set[str] = set()
        inner: list = list(parts)
        comp = n.for_in
        scan(comp.iter, self)
        while comp is not None:
            own |= _names_in(comp.target)
            if comp is not n.for_in:
                inner.append(comp.iter)
            inner += [i.test for i in comp.ifs]
            comp = comp.inner_for_in
        for part in inner:
            self.out |= _names_in(part) - own
        return False

    def visit_ListComp(self, n: cst.ListComp) -> bool:
        return self._comprehension(n, [n.elt])

    def visit_SetComp(self, n: cst.SetComp) -> bool:
        return self._comprehension(n, [n.elt])

    def visit_GeneratorExp(self, n: cst.GeneratorExp) -> bool:
        return self._comprehension(n, [n.elt])

    def visit_DictComp(self, n: cst.DictComp) -> bool:
        return self._comprehension(n, [n.key, n.value])


def _names_in(node: cst.CSTNode) -> set[str]:
    v = _NamesIn()
    scan(node, v)
    return v.out


def _reads(stmt: cst.CSTNode) -> set[str]:
    """The names a statement reads (an assignment's plain targets, and names it unpacks into, are not read)."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign) \
            and all(isinstance(t.target, cst.Name) or (isinstance(t.target, (cst.Tuple, cst.List)) and all(
                isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in t.target.elements))
                    for t in stmt.body[0].targets):
        return _names_in(stmt.body[0].value)
    return _names_in(stmt)


def _read_before_bound(stmt: cst.CSTNode, names: set[str]) -> set[str]:
    """The names among ``names`` that ``stmt`` reads before it binds them again, statement by statement in
    source order (a loop's later iterations aside): after ``model = keras.Model(inputs, [action, critic])``,
    ``action = rng.choice(n, p=probs); env.step(action)`` in a loop reads the new ``action``, not the graph's."""
    live, hit = set(names), set()

    def block(body) -> None:
        if isinstance(body, cst.SimpleStatementSuite):
            line(cst.SimpleStatementLine(body=body.body))
        elif body is not None:
            for st in body.body:
                one(st)

    def line(st: cst.SimpleStatementLine) -> None:
        hit.update(_reads(st) & live)
        live.difference_update(_assigned(st))

    def reads(*nodes) -> None:
        for n in nodes:
            if n is not None:
                hit.update(_names_in(n) & live)

    def one(st) -> None:
        if isinstance(st, cst.SimpleStatementLine):
            line(st)
        elif isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            live.discard(st.name.value)  # their bodies are their own
        elif isinstance(st, cst.If):
            reads(st.test)
            block(st.body)
            if st.orelse is not None:
                one(st.orelse) if isinstance(st.orelse, cst.If) else block(st.orelse.body)
        elif isinstance(st, cst.For):
            reads(st.iter)
            live.difference_update(_names_in(st.target))
            block(st.body)
            if st.orelse is not None:
                block(st.orelse.body)
        elif isinstance(st, cst.While):
            reads(st.test)
            block(st.body)
            if st.orelse is not None:
                block(st.orelse.body)
        elif isinstance(st, cst.With):
            for item in st.items:
                reads(item.item)
                if item.asname is not None:
                    live.difference_update(_names_in(item.asname.name))
            block(st.body)
        elif isinstance(st, cst.Try):
            block(st.body)
            for h in st.handlers:
                reads(h.type)
                block(h.body)
            for part in (st.orelse, st.finalbody):
                if part is not None:
                    block(part.body)
        else:
            reads(st)

    one(stmt)
    return hit


def _assigned(stmt: cst.CSTNode) -> list[str]:
    out: list[str] = []
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else \
                [small.target] if isinstance(small, (cst.AnnAssign, cst.AugAssign)) else []
            for t in targets:
                if isinstance(t, cst.Name):
                    out.append(t.value)
                elif isinstance(t, (cst.Tuple, cst.List)):
                    out += [e.value.value for e in t.elements if isinstance(e.value, cst.Name)]
    else:
        out += [n for n in _names_bound_in(stmt)]
    return out


class _StatementKinds(cst.CSTVisitor):
    """Whether a statement holds calls or assignments (``builds``), and raise / return statements (``exits``)."""

    def __init__(self):
        self.builds = False
        self.exits = False

    def visit_Call(self, n: cst.Call) -> None:
        self.builds = True

    def visit_Assign(self, n: cst.Assign) -> None:
        self.builds = True

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        self.builds = True

    def visit_Raise(self, n: cst.Raise) -> None:
        self.exits = True

    def visit_Return(self, n: cst.Return) -> None:
        self.exits = True

    def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
        self.exits = True  # (a nested def: left as it is)
        return False


class _NamesBound(cst.CSTVisitor):
    def __init__(self):
        self.out: set[str] = set()

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        self.out.update(_names_in(n.target))

    def visit_For(self, n: cst.For) -> None:
        self.out.update(_names_in(n.target))

    def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
        self.out.add(n.name.value)
        return False


def _names_bound_in(stmt: cst.CSTNode) -> set[str]:
    """The names ``stmt`` binds (its answer kept while run() works: not to be changed)."""
    return _memoized(_NamesBound, stmt, _bound_walk)


def _bound_walk(stmt: cst.CSTNode) -> set[str]:
    v = _NamesBound()
    scan(stmt, v)
    return v.out


def _camel(name: str) -> str:
    """A class name from a model's or builder's name: ``get_model`` → ``Model``, ``unet`` → ``Unet``; one that
    would start with a digit (Keras's ``name="3dcnn"``) gets ``Model`` in front (``Model3dcnn``)."""
    name = _VERBS.sub("", name.strip("_")) or name
    out = "".join(p[:1].upper() + p[1:] for p in re.split(r"[_\W]+", name) if p) or "Model"
    return out if out.isidentifier() else f"Model{out}"


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z])([A-Z])", r"_\1", name).lower()
    s = re.sub(r"\W+", "_", s).strip("_")
    return s if s.isidentifier() else f"layer_{s}"


# --- following one model -----------------------------------------------------------------------------

class _Builder:
    def __init__(self, ctx: FileContext, constants, fn: cst.FunctionDef | None, path: list[int] | None,
                 taken: set[str], user_classes: set[str], helpers: dict[str, cst.FunctionDef] | None = None):
        self.ctx = ctx
        self.fn = fn
        self.path = path
        self.taken = taken
        self.sizes = Sizes.at(*constants, [fn] if fn is not None else [])
        self.scope = fn.name.value if fn is not None else ""
        self.env: dict[str, object] = {}  # name → _Tensor | _Layer
        self.layers: list[_Layer] = []
        self.copied: set[int] = set()  # layers a Bidirectional copied (Keras copies the layer it wraps)
        self.inputs: dict[str, _Tensor] = {}
        self.input_ops: list[_Op] = []
        self.nodes: list[_Node] = []
        self.mask_flows: set[int] = set()  # ids of the layer calls that handle Keras's mask (masks.flow)
        self.mask_layers: set[int] = set()  # ids of the constructor calls of the layers called with it
        self.replace: dict[int, cst.BaseExpression] = {}  # id(input expr) → output expr
        self.errors = 0
        self.layout = "keep"
        self.pending_init: list[str] = []  # init lines created while following the current statement
        self.frozen_layers: list[_Layer] = []  # layers a `.trainable = False` statement of the builder flags
        self.built_on: set[str] = set()  # names bound to a keras.applications model built with input_tensor=
        self.local: set[str] = set()  # builder parameters and config names (not in forward's scope)
        self.user_classes: set[str] = user_classes  # layer classes of this file (the subclass pass's)
        self.user_layers: list[tuple[str, str, str]] = []  # (class, its Keras path, attribute)
        self.sub_layers: list[_Layer] = []  # the layers of helpers' modules (flat in Keras's model.layers)
        self.helper_classes: dict[str, list[str]] = {}  # helper name → its classes' code, by variant
        self.helper_call: cst.Call | None = None  # where a helper's findings go (its body is a copy)
        self.class_code: dict[str, list[str]] = {}  # helper name → the code of its classes
        self.helper_uses: dict[str, int] = {}  # helper name → calls followed
        self.helpers: dict[str, cst.FunctionDef] = helpers or {}
        self.constants = constants
        self.depth = 0
        self.generated: dict[int, list] = {}  # id(for statement) → the statements it unrolls to
        self.carried: dict[str, str] = {}  # builder value read in forward → its attribute
        self.prior_models: dict[str, dict] = {}  # module-level models built above this one
        self.builder_models: dict[str, dict] = {}  # builder functions translated above this one
        self.builder_defs: dict[str, cst.FunctionDef] = {}  # their functions, by name
        self.model_summary: dict | None = None  # this model, for the ones below it
        self.input_keras_names: dict[str, str] = {}  # input's name → keras.Input(name=...)
        self.tap_candidates: dict[int, tuple[str, _Tensor]] = {}  # forward statement `name = <layer call>` → name, tensor
        self.var_taps: dict[str, tuple[int, _Tensor, frozenset]] | None = None  # see _var_taps
        self.record_paths: dict[int, str] = {}  # id(op) → layers[k], once _records ran (no loops)
        self.imported: dict[int, list] = {}  # id(op of a model above) → its records (rest of source, target, rule...)
        self.import_lines: list[str] = []  # forward's first lines: the tensors of a model above it reads
        self.added_taps: list[tuple[_Plan, str]] = []  # the methods _import_tensors gave the models above
        self.tap_statements: set[int] = set()  # id(`x = model.layers[4].output`) it follows
        self.tap_nodes: list[cst.Attribute] = []  # their values
        self.submodels: dict[str, _Layer] = {}
        self.given: dict[str, _Layer] = {}  # builder values called on tensors (modules given to the model)
        self.local_calls: dict[str, bool] = {}  # builder name → whether the statement that last bound it is `= call(...)`
        self.module_seqs: dict[str, cst.Call] = {}  # module-level `name = keras.Sequential([...])` (builders')
        # (a module-level model: those of them a statement outside the model also calls, a demo plotting augmented
        # images above the model: kept where they stand, the model calling that very object, as a builder does)
        self.shown_seqs: dict[str, cst.Call] = {}
        # builder names bound to values known where the model is built (`filters = 64`), and updated by
        # the for statements written out (`filters *= 2` in a loop); after such a loop, the names it changed
        # are written as their values in the builder's statements below it (its __init__ has no loop)
        self.known_ints: dict[str, object] = {}
        # builder names bound by a plain statement to a string, bool, None or float literal (`activation =
        # "sigmoid"`, also in an if decided where the model is built): a rule layer's argument that is such a
        # name is given to the rule as that literal (`layers.Dense(units, activation=activation)`)
        self.known_literals: dict[str, object] = {}
        self.known_shapes: dict[str, tuple] = {}  # builder names bound once here to a tuple of ints: `shape = (28, 28, 1)`
        # names of layers / models called with training= (a mode set in forward: _mode_prefixed), and the names
        # of layers / models called on tensors, by calls followed
        self.mode_calls: dict[str, _Layer | None] = {}
        self.name_calls: dict[str, int] = {}
        self.mode_said: list[str] = []  # the training pass's findings on the lines Keras 3's calls do without
        self.loop_ints: dict[str, object] = {}
        self.lists: dict[str, cst.BaseExpression] = {}  # name → the list of tensor names it holds
        # `inputs = {"a": keras.Input(...)}`: name → {key: the input's name in self.inputs}
        self.input_dicts: dict[str, dict[str, str]] = {}
        # a model given a dict of inputs: (forward's parameter, {key: input name}, the names bound from it)
        self.dict_input: tuple[str, dict[str, str], bool] | None = None
        self.out_keys: list[str] | None = None  # keras.Model(outputs={"a": ...}): its keys
        self.unpacking = False  # following the value of `a, b = helper(...)`
        self.unpacked_call: cst.Call | None = None  # that value
        self.generating = False  # following code fwport writes out itself (loops, keras.Model(...) arguments)
        self.runtime_loop = False  # following the body of a for statement over a run-time value
        self.nested_loops = False  # a helper with a loop over a run-time value called in such a loop (no records)
        # the for statements over run-time values: (statement, its nodes self.nodes[start:end], ids of the
        # _Layers it creates); their layers' records name Keras layers by the order they are called (`calls`)
        self.loops: list[tuple[cst.For, int, int, set[int]]] = []
        self.calls: list[dict] | None = None  # that order, for ModelInfo.calls (see _call_template)
        self.layer_of: dict[int, _Layer] = {}  # id(op) → the layer object
        self.unflattens: list[tuple[_Node, cst.Call]] = []  # (Dense node, the Reshape after it)
        self.sized_calls: dict[int, cst.Call] = {}  # id(layer call) → it with x.shape[i] written as sizes
        # weight regularizers taken off this scope's layers (regularizers.strip): module path → (record, where the
        # source has the layer), recorded for the class once the model is followed; the helpers' classes' ones:
        # (record, module path, class name, where)
        self.penalties: dict[str, tuple] = {}
        self.written: dict[int, tuple] = {}  # id(a helper statement's copy with known values) → (copy, as written)
        self.helper_penalties: list[tuple] = []
        # id(node of a copy) → (that node, kept alive; the node of the source it copies): findings on copies
        # (a for statement's body written out per pass, a statement with a loop's ints in place) at its line
        self.origin: dict[int, tuple[cst.CSTNode, cst.CSTNode]] = {}
        # builder parameter → the value every call of the builder in this file gives it (_pinned_params): in
        # place in the builder's statements (a second try, after the model as written was refused)
        self.pinned: dict[str, object] = {}
        self.later_rows: list[int] = []  # module level: the statements of the keras.Model(...) calls below this one
        self.source_body: list = []  # module level: the module's statements as the source has them
        # builder parameters the file gives one value at every call (pinned on a second try, not kept as if
        # statements of the class: _runtime_if_test)
        self.pinnable: set[str] = set()
        self.decided_ifs: list[cst.If] = []  # the builder's if statements decided here (their branch in place)
        self.sized_out: list = []  # statements of the builder before _sizes_written_in wrote sizes in them
        self.aug: dict[int, cst.SimpleStatementLine] = {}  # id(`x += y` on a tensor) → `x = x + y`, written instead
        # a builder list of layers only iterated (`down_stack = [downsample(64, 4), ...]`, then `for down in
        # down_stack:`): its name → the names its layers are bound to here (down_stack_0, ...), one layer each
        self.layer_lists: dict[str, list[str]] = {}
        # a builder list the model's tensors are appended to (`skips = []`, `skips.append(x)` in a loop written
        # out): its name → the names its items are bound to in forward (skips_0 = x, ...), in the list's order
        self.tensor_lists: dict[str, list[str]] = {}

    def _copy(self, node: cst.CSTNode, transformer: cst.CSTTransformer) -> cst.CSTNode:
        """``rewrite(node, transformer, fresh=True)``, each node of the copy mapped to the source's node
        it copies (the transformers substitute leaves: the trees have the same shape elsewhere)."""
        new = rewrite(node, transformer, fresh=True)
        todo = [(new, node)]
        while todo:
            a, b = todo.pop()
            if a is b:
                continue
            self.origin[id(a)] = (a, self.origin.get(id(b), (None, b))[1])
            ca, cb = children(a), children(b)
            if len(ca) == len(cb):
                todo += [(x, y) for x, y in zip(ca, cb) if type(x) is type(y)]
        return new

    # --- reporting ----------------------------------------------------------------------------------
    def error(self, node: cst.CSTNode, message: str, code_: str = "unsupported-construct") -> None:
        self.errors += 1
        if self.helper_call is not None:  # inside a helper's body (a copy): said at the call site
            message = f"in {code(self.helper_call.func)}(...): {message}"
            node = self.helper_call
        # a copy fwport made (a for statement written out): said where the source has it
        node = self.origin.get(id(node), (None, node))[1]
        self.ctx.report(Severity.ERROR, code_, message, node)

    # --- helper functions that build blocks -----------------------------------------------------------
    def _helper(self, call: cst.Call, fn: cst.FunctionDef, site: cst.Call | None = None) -> _Tensor:
        """``x = block(x, 64, stride=2)`` with ``block`` a function of this file that calls layers on
        its tensor arguments: one nn.Module class per helper (one per variant of its literal
        arguments, which decide its ``if`` statements here), instantiated at each call site. A block
        factory's call (``Block(64)(x)``) comes here as the call of its closure with every argument
        by keyword (:meth:`_factory_call`), ``site`` the call as written (findings, replacement)."""
        args_of = call.args
        call = site or call
        name = fn.name.value
        calls = self.ctx.analyses.setdefault("functional_calls", {})
        calls[name] = calls.get(name, 0) + 1
        if self.depth > 4:
            raise _Refused(call, f"{name}(...): helpers calling helpers this deep are not followed")
        params = fn.params
        if params.posonly_params or isinstance(params.star_arg, cst.Param) or isinstance(params.star_kwarg, cst.Param) \
                or any(a.star for a in args_of):
            raise _Refused(call, f"{name}(...): a helper with *args/**kwargs or positional-only parameters is not "
                                 "followed")
        plist = [*params.params, *params.kwonly_params]
        pnames = [p.name.value for p in plist]
        values: dict[str, tuple[cst.BaseExpression, bool]] = {}  # name → (value, given at the call)
        positional = [a for a in args_of if a.keyword is None]
        if len(positional) > len(params.params):
            raise _Refused(call, f"{name}(...): more arguments than the helper takes")
        for p, a in zip(params.params, positional):
            values[p.name.value] = (a.value, True)
        for a in args_of:
            if a.keyword is not None:
                if a.keyword.value not in pnames:
                    raise _Refused(a if site is None else call, f"{name}(...) has no parameter {a.keyword.value}")
                values[a.keyword.value] = (a.value, True)
        for p in plist:
            if p.name.value not in values:
                if p.default is None:
                    raise _Refused(call, f"{name}(...): no value for {p.name.value}")
                values[p.name.value] = (p.default, False)
        stable = function_stable(fn)[0]
        tensors: dict[str, tuple[_Tensor, cst.BaseExpression]] = {}
        literals: dict[str, object] = {}
        symbolic: dict[str, cst.BaseExpression] = {}
        layer_args: dict[str, cst.Call] = {}  # parameters given a layer built at the call site
        for pname in pnames:
            v, given = values[pname]
            if given and isinstance(v, cst.Name) and v.value in self.input_dicts:
                raise _Refused(v, self._dict_to_helper(name, v.value))
            sized = self._read_sizes(v) if given else NOT_LITERAL
            if sized is not NOT_LITERAL:  # mlp(x, hidden_units=[x.shape[-1] * 2, x.shape[-1]]): the sizes it reads
                if pname not in stable:
                    raise _Refused(call, f"{name}(...) assigns to its parameter {pname}: not followed")
                literals[pname] = sized
                continue
            t = self._tensor(v) if given and _names_in(v) & set(self.env) else None
            if t is not None:
                tensors[pname] = (t, v)
                continue
            if given and self._literal_layer(v):
                # conv_block(x, 64, activation=layers.LeakyReLU(0.2)): the body's activation(x) is
                # that layer's call (one layer object, as in Keras), its `if activation:` true
                if pname not in stable:
                    raise _Refused(call, f"{name}(...) assigns to its parameter {pname}: not followed")
                layer_args[pname] = v
                continue
            if self._source_value(v) and (not given or not _names_in(v) & self.local):
                # mlp(x, sizes, activation=tf.tanh): a TensorFlow / Keras function or constant, written in place
                # (the rules translate it where the body uses it: Dense(activation=tf.tanh))
                if pname not in stable:
                    raise _Refused(call, f"{name}(...) assigns to its parameter {pname}: not followed")
                layer_args[pname] = v
                continue
            lit = literal_value(v, NOT_LITERAL)
            if lit is NOT_LITERAL and (not given or _names_in(v) <= set(self.sizes.constants)):
                # a default, or module constants (mlp(x, hidden_units=transformer_units)): their values
                lit = self.sizes.constant(v) if self.sizes.constant(v) is not None else NOT_LITERAL
            if lit is NOT_LITERAL and given:
                lit = self._known_item(v)  # n_stages[1] of the builder's n_stages = [16, 16 * WIDTH_MULT, ...]
            if lit is not NOT_LITERAL:
                if pname not in stable:
                    raise _Refused(call, f"{name}(...) assigns to its parameter {pname}: not followed")
                literals[pname] = lit
            elif given:
                symbolic[pname] = v
            elif self._initializer_constant(v):
                # cyclegan's `kernel_initializer=kernel_init`, a module-level keras.initializers.RandomNormal(...):
                # the name written in place, as the builder's own layer calls pass it (the initializer rule reads it)
                if pname not in stable:
                    raise _Refused(call, f"{name}(...) assigns to its parameter {pname}: not followed")
                layer_args[pname] = v
            else:
                raise _Refused(call, f"{name}(...): the default of {pname} is not a literal")
        if not tensors:
            raise _Refused(call, f"{name}(...) takes no tensor of the model")
        # sizes of the tensors that the caller knows by name (a builder parameter, input_shape[-1]) are
        # parameters of the helper's class, given at each call site
        extra: dict[str, str] = {}  # helper parameter → the caller's size expression
        inner: dict[str, _Tensor] = {}
        for pname, (t, _) in tensors.items():
            if t.shape is None and t.shape_name is not None:
                rank = self._implied_rank_in(fn, pname)
                if rank is not None:
                    t.shape = symbolic_parts(t.shape_name, rank)
            if t.shape is None and t.shape_name is not None:
                # keras.Input(shape=input_shape) whose rank the helper's first use does not show: the helper's
                # class cannot read the caller's input_shape (its sizes there are unknown: a lazy layer, or an error)
                inner[pname] = _Tensor(None, t.node, t.flat, t.last, None)
                continue
            if t.shape is None or not any(isinstance(d, str) for d in t.shape):
                inner[pname] = t
                continue
            dims = []
            for i, d in enumerate(t.shape):
                if isinstance(d, str):
                    pn = d if d.isidentifier() and d not in pnames else f"{pname}_size{i + 1}"
                    while pn in extra and extra[pn] != d:
                        pn += "_"
                    extra[pn] = d
                    d = pn
                dims.append(d)
            inner[pname] = _Tensor(tuple(dims), t.node, t.flat, t.last, t.shape_name)
        mark = len(self.ctx.pending)
        child = _Builder(self.ctx, self.constants, fn, None, self.taken, self.user_classes)
        child.depth, child.layout, child.scope, child.nodes, child.helpers = (self.depth + 1, self.layout, self.scope,
                                                                               self.nodes, self.helpers)
        child.helper_call = self.helper_call or call
        child.origin = self.origin  # (its findings go to that call: where the source has it, if it is a copy)
        # a loop over a run-time value in the helper's body builds its class's own nn.ModuleList (a parameter of
        # the class drives it), also where the helper is called in such a loop (its instances in the outer one)
        child.runtime_loop = False
        child.local = set(symbolic)
        child.sizes.stable |= set(extra)  # the sizes the caller gives by name (class parameters)
        for pname in tensors:
            child.env[pname] = inner[pname]
        # copies (fresh nodes): the body is followed once per call site (the substitution rebuilds only what it
        # changes, sharing the rest with the source and its values with the call site: the copy below, a fresh one
        # of every node, is the body's)
        body = [rewrite(st, _Substitute({**{k: _literal_node(v) for k, v in literals.items()}, **layer_args}))
                for st in fn.body.body]
        # (x.shape of a tensor parameter the body never rebinds: one that it rebinds, `x = layers.Dense(...)(x)`,
        # has the size of its latest value there, read as in the body)
        body = [rewrite(st, _ShapeSubstitute({k: t.shape for k, t in inner.items()
                                              if t.shape is not None and k in stable}),
                        fresh=True) for st in body]
        child.written.update({id(b): (b, st) for b, st in zip(body, fn.body.body)})  # (messages: as written)
        child._layout(body)  # attribute names
        child.layout = self.layout
        forward: list = []
        ret = child._helper_body(body, forward, tensors, name)
        site_node = self.origin.get(id(call), (None, call))[1]  # (where the source has it, if a copy)
        for p in self.ctx.pending[mark:]:  # the body is a copy: its findings go to the call site
            p.node = site_node
        if child.errors or ret is None:
            self.errors += child.errors
            if ret is None and not child.errors:
                raise _Refused(call, f"{name}(...): a helper must end with `return <tensor>`")
            raise _Refused(call, "", "")
        out_tensor, ret_expr = ret  # a _Tensor, or a _Multi for `return x, skip`
        # its for statements over run-time values (nn.ModuleLists built in its class's __init__): the model's
        # records name their layers by the order of calls, as the builder's own loops (the nodes are shared)
        self.loops += child.loops
        # a helper with such loops called in such a loop: how many layers a pass adds is known only when the model
        # is built, pass by pass: the order-of-calls records cannot name them
        self.nested_loops = self.nested_loops or child.nested_loops or bool(self.runtime_loop and child.loops)
        for loop, *_ in child.loops:  # (findings on them: at the call site, the loop being in a copy of the body)
            self.origin.setdefault(id(loop), (loop, site_node))
        for layer in child.layers:
            if layer.op is None and layer.kind != "helper":
                raise _Refused(call, f"{name}(...): {layer.var or code(layer.call.func)} is created but never called")
        # the class, shared by the call sites that give the same code
        module_name = self.ctx.spell_text("torch.nn.Module")
        init_text = "\n".join(child.pending_init)
        sizes_given = [p for p in extra if re.search(rf"\b{re.escape(p)}\b", init_text)]
        init_params = "".join(f", {p}" for p in pnames if p in symbolic) + "".join(f", {p}" for p in sizes_given)
        lines = [f"    def __init__(self{init_params}):", "        super().__init__()"]
        lines += [f"        {ln}" for entry in child.pending_init for ln in entry.split("\n")]
        lines += ["", f"    def forward(self, {', '.join(tensors)}):"]
        for st in forward:
            text = code(_clean(rewrite(st, _Replace(child.replace), fresh=True))).rstrip("\n")
            lines += [f"        {ln}" if ln.strip() else "" for ln in text.split("\n")]
        lines.append(f"        return {code(child._out_expr(ret_expr))}")
        body_text = "\n".join(lines) + "\n"
        variants = self.helper_classes.setdefault(name, [])
        cls_name = next((n for n, t in variants if t == body_text), None)
        if cls_name is None:
            base = _camel(name)
            cls_name = base
            k = 2
            while cls_name in self.taken:
                cls_name = f"{base}{k}"
                k += 1
            self.taken.add(cls_name)
            # its layers' regularizers: once per class (call sites that share it share its method)
            self.helper_penalties += [(rec, target, cls_name, where) for target, (rec, where) in child.penalties.items()]
            variants.append((cls_name, body_text))
            self.class_code.setdefault(name, []).append(f"class {cls_name}({module_name}):\n{body_text}")
        self.helper_penalties += child.helper_penalties  # (classes the child created)
        for k, v in child.helper_classes.items():  # helpers its body called
            for n, t in v:
                if (n, t) not in self.helper_classes.setdefault(k, []):
                    self.helper_classes[k].append((n, t))
        for k, v in child.class_code.items():
            for c in v:
                if c not in self.class_code.setdefault(k, []):
                    self.class_code[k].append(c)
        self.helper_uses[name] = self.helper_uses.get(name, 0) + 1
        for k, n in child.helper_uses.items():
            self.helper_uses[k] = self.helper_uses.get(k, 0) + n
        # the instance
        inst = _Layer(call, name, "helper")
        inst.op = _Op("helper", False)
        inst.attr = self._helper_attr(name)
        self.layers.append(inst)
        for layer in [*child.layers, *child.sub_layers]:
            if layer.kind == "helper":
                continue
            layer.prefix = f"{inst.attr}.{layer.prefix}"
            self.sub_layers.append(layer)
        args = ", ".join([*(code(symbolic[p]) for p in pnames if p in symbolic), *(extra[p] for p in sizes_given)])
        self.pending_init.append(f"self.{inst.attr} = {cls_name}({args})")
        if extra or symbolic:
            # the output's sizes named as the caller names them: the helper's own names (its class's parameters
            # x_size1, filters; its locals) are not defined in the caller's class (a size `x_size1 * 2` written
            # there would fail when the model is built)
            back = {**extra, **{p: code(v) for p, v in symbolic.items()}}
            own = function_stable(fn)[1] | set(extra)
            outs = out_tensor.tensors if isinstance(out_tensor, _Multi) else [out_tensor]
            mapped = [_caller_shape(t, back, own, call, name) if isinstance(t, _Tensor) else t for t in outs]
            out_tensor = _Multi(mapped) if isinstance(out_tensor, _Multi) else mapped[0]
        self.replace[id(call)] = expr(f"self.{inst.attr}({', '.join(code(self._out_expr(v)) for t, v in tensors.values())})")
        return out_tensor

    def _dict_to_helper(self, helper: str, name: str) -> str:
        """Why ``helper(inputs)``, ``inputs`` the model's dict of keras.Input, is not followed; what its string inputs
        (``dtype=tf.string``, the StringLookup / Hashing of structured-data examples) need besides."""
        keys = list(self.input_dicts[name])
        message = (f"{helper}(...) is given {name}, the model's dict of keras.Input ({len(keys)} of them): fwport follows "
                   "a function of this file called on tensors, not on a dict it picks tensors from by name (a loop "
                   f"over its keys): give it the tensors it uses ({helper}({name}[{_key_code(keys[0])}], ...)), or "
                   "translate this model by hand")
        made = self.env[name].call
        calls = self._input_dict_call(made) if isinstance(made, cst.Call) else None
        if calls is None and isinstance(made, cst.Dict):
            calls = {_string_key(e.key): e.value for e in made.elements if isinstance(e, cst.DictElement)}
        strings = [k for k, c in (calls or {}).items() if isinstance(c, cst.Call) and "string" in code(
            call_argument(c, "dtype") or cst.Name("None"))]
        if strings:
            shown = ", ".join(repr(k) for k in strings[:3]) + (f" and {len(strings) - 3} more" if len(strings) > 3 else "")
            message += (f"; and {shown} {'are string inputs' if len(strings) > 1 else 'is a string input'} (dtype "
                        "string): torch has no string tensors, so the layers that turn strings into numbers "
                        "(StringLookup, Hashing, TextVectorization) are data preprocessing: map the strings to ids in "
                        "the input pipeline (a dict from the vocabulary) and give the model int64 ids")
        return message

    def _factory_call(self, node: cst.Call, fac: tuple) -> cst.Call:
        """``Block(64, depth=2)(x)`` → the call of the factory's closure as one helper of both parameter
        lists, every argument by keyword (the argument values are the nodes as written)."""
        merged, outer, inner = fac
        eq = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        args = []
        for given, fn in ((node.func, outer), (node, inner)):
            positional = [p.name.value for p in fn.params.params]
            i = 0
            for a in given.args:
                if a.star:
                    raise _Refused(node, f"{code(node.func.func)}(...)(...): a starred argument is not followed")
                if a.keyword is None:
                    if i >= len(positional):
                        raise _Refused(node, f"{code(node.func.func)}(...)(...): more arguments than "
                                             f"{fn.name.value} takes")
                    args.append(cst.Arg(a.value, keyword=cst.Name(positional[i]), equal=eq))
                    i += 1
                else:
                    args.append(cst.Arg(a.value, keyword=a.keyword, equal=eq))
        return cst.Call(cst.Name(merged.name.value), args)

    def _seq_factory_call(self, node: cst.Call, fn: cst.FunctionDef, spec: tuple) -> _Tensor | None:
        """``downsample(64, 4, apply_norm=False)(x)`` with ``downsample`` a Sequential factory of this file
        (:func:`_seq_factory`): the ``keras.Sequential`` this call of it builds, a layer of the model
        (:meth:`_seq_layer`), called on the tensor."""
        layer = self._seq_layer(node.func, fn, spec)
        try:
            return self._apply(layer, node)
        except _Refused as r:
            raise _Refused(node, f"in {fn.name.value}(...): {r.message}" if r.message else "", r.code)

    def _seq_layer(self, made: cst.Call, fn: cst.FunctionDef, spec: tuple, var: str | None = None) -> _Layer:
        """The ``keras.Sequential`` that ``made``, a call of a Sequential factory of this file
        (:func:`_seq_factory`: ``downsample(64, 4, apply_norm=False)``), builds: a layer of the model followed
        as a Sequential used as a layer (:meth:`_translate_seq`: one ``nn.Sequential`` of the layers its ``add``
        calls give for these arguments, its ``if`` statements decided here), in an attribute named after the
        factory (or ``var``, the name it is bound to). Keras's ``model.layers`` holds that Sequential, so the
        records name its layers below it (``.layers[k]``); the findings on them go to ``made``."""
        values, ctor, seq, body = spec
        name = fn.name.value
        node = made
        site = self.origin.get(id(made), (None, made))[1]  # (where the source has it, if a copy)
        params = fn.params
        plist = [*params.params, *params.kwonly_params]
        positional = [a for a in made.args if a.keyword is None]
        if params.posonly_params or isinstance(params.star_arg, cst.Param) or isinstance(params.star_kwarg, cst.Param) \
                or any(a.star for a in made.args) or len(positional) > len(params.params):
            raise _Refused(node, f"{name}(...)(...): a Sequential factory is followed when it is called with its "
                                 "parameters one by one (no *args, **kwargs, positional-only parameters or extra "
                                 "arguments)")
        given = {p.name.value: a.value for p, a in zip(params.params, positional)}
        for a in made.args:
            if a.keyword is not None:
                if a.keyword.value not in {p.name.value for p in plist}:
                    raise _Refused(node, f"{name}(...) has no parameter {a.keyword.value}")
                given[a.keyword.value] = a.value
        subst: dict[str, cst.BaseExpression] = {}

        def written(v: cst.BaseExpression) -> cst.BaseExpression:
            lit = literal_value(v, NOT_LITERAL)
            if lit is NOT_LITERAL and self.sizes.constant(v) is not None and not _names_in(v) & self.local:
                lit = self.sizes.constant(v)
            if lit is not NOT_LITERAL and _plain_value(lit):
                return _literal_node(lit)
            v = self._copy(v, _Substitute(subst))
            if not isinstance(v, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not v.lpar:
                v = v.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])  # (2 * k) in place of a name
            return v

        for p in plist:
            v = given.get(p.name.value, p.default)
            if v is None:
                raise _Refused(node, f"{name}(...): no value for {p.name.value}")
            if _names_in(v) & set(self.env):
                raise _Refused(v, f"{code(v)}: a tensor of the model (or a value read from one) given to {name}(...), "
                                  "a Sequential factory: not followed (its layers are built in __init__, where no "
                                  "tensor exists): give it sizes the builder knows, or translate this model by hand")
            subst[p.name.value] = written(v) if p.name.value in given else written(p.default)
        for n, v in values.items():  # initializer = keras.initializers.GlorotNormal(): in place where its layers use it
            subst[n] = written(v)
        elements: list[tuple] = []  # (a layer's expression, the names it reads written in place)
        keep = []
        listed = any(isinstance(a.value, cst.Name) and a.value.value == seq for a in ctor.args[:1])
        for i, a in enumerate(ctor.args):
            kw = a.keyword.value if a.keyword else ("layers" if i == 0 else None)
            if kw == "layers" and not a.star and isinstance(a.value, (cst.List, cst.Tuple)) and not any(
                    isinstance(e, cst.StarredElement) for e in a.value.elements):
                elements += [(e.value, subst) for e in a.value.elements]
            elif kw == "layers" and listed:
                pass  # keras.Sequential(ffn_layers): the layers its append calls give
            elif kw == "name":
                keep.append(a)
            else:
                raise _Refused(node, f"in {name}(...): keras.Sequential argument {code(a).strip().rstrip(',')} is "
                                     "not followed in a Sequential factory (a literal list of layers and name= only)")

        def walk(stmts) -> None:
            for st in stmts:
                small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
                if isinstance(st, cst.If):
                    branch = st
                    while True:
                        try:
                            taken = bool(self._static(self._copy(branch.test, _Substitute(subst)), {}))
                        except _Refused as r:
                            raise _Refused(node, f"in {name}(...): {r.message}")
                        if taken:
                            walk(branch.body.body)
                            break
                        if isinstance(branch.orelse, cst.If):
                            branch = branch.orelse
                            continue
                        if isinstance(branch.orelse, cst.Else):
                            walk(branch.orelse.body.body)
                        break
                    continue
                if isinstance(st, cst.For) and listed:
                    if st.orelse or st.asynchronous or not isinstance(st.target, cst.Name) \
                            or not isinstance(st.body, cst.IndentedBlock):
                        raise _Refused(node, f"in {name}(...): `for {code(st.target)} in {code(st.iter)}`: fwport "
                                             "follows a for statement of one name over values known where the model "
                                             "is built")
                    try:
                        passes = self._known_sequence(self._copy(st.iter, _Substitute(subst)), st.iter)
                    except _Refused as r:
                        raise _Refused(node, f"in {name}(...): {r.message}")
                    var, before = st.target.value, subst.get(st.target.value)
                    for v in passes:
                        subst[var] = _literal_node(v)
                        walk(st.body.body)
                    if before is None:
                        subst.pop(var, None)
                    else:
                        subst[var] = before
                    continue
                if isinstance(small, cst.Pass) or (isinstance(small, cst.Expr) and isinstance(
                        small.value, (cst.SimpleString, cst.ConcatenatedString))):
                    continue
                call = small.value if isinstance(small, cst.Expr) else None
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                        and isinstance(call.func.value, cst.Name) and call.func.value.value == seq \
                        and call.func.attr.value == ("append" if listed else "add") and len(call.args) == 1 \
                        and call.args[0].keyword is None and not call.args[0].star:
                    elements.append((call.args[0].value, dict(subst)))
                    continue
                what = f"{seq}.append(layer) calls, for statements over known values" if listed else \
                    f"after keras.Sequential() are {seq}.add(layer) calls"
                raise _Refused(node, f"in {name}(...): `{code(st).strip()}`: fwport follows a Sequential factory "
                                     f"whose statements {what} and if statements on its arguments")

        walk(body)
        if not elements:
            raise _Refused(node, f"{name}(...) builds a keras.Sequential with no layers")
        els = [self._copy(e, _SubstituteIndexed(given_subst)) for e, given_subst in elements]
        synth = ctor.with_changes(args=[cst.Arg(cst.List([cst.Element(e) for e in els])), *keep])
        self.origin[id(synth)] = (synth, site)
        calls = self.ctx.analyses.setdefault("functional_calls", {})
        calls[name] = calls.get(name, 0) + 1
        self.ctx.analyses.setdefault("functional_seq_factory_names", set()).add(name)
        layer = self._new_layer(synth, var)
        layer.attr = "" if var else self._helper_attr(name)
        layer.site = site
        self.helper_uses[name] = self.helper_uses.get(name, 0) + 1
        return layer

    def _implied_rank_in(self, fn: cst.FunctionDef, pname: str) -> int | None:
        """The rank a helper's tensor argument of unknown shape must have: that of the first layer the
        helper calls on it (a Conv2D sees (h, w, c), MultiHeadAttention (steps, features))."""
        for c in _calls(fn.body):
            if isinstance(c.func, cst.Call) and c.args and isinstance(c.args[0].value, cst.Name) \
                    and c.args[0].value.value == pname and c.args[0].keyword is None:
                kind, rule = self._layer_kind(c.func.func)
                if kind == "rule" and rule is not None:
                    return _implied_rank(rule)
        return None

    # --- dicts of inputs built by a helper ------------------------------------------------------------
    def _module_value(self, node: cst.BaseExpression):
        """The value of a module-level expression of literals and constant names (``FEATURE_NAMES``,
        ``NUMERIC + CATEGORICAL``, ``list(VOCABULARY.keys())``, ``sorted(NAMES)``), or NOT_LITERAL."""
        lit = literal_value(node, NOT_LITERAL)
        if lit is not NOT_LITERAL:
            return lit
        if isinstance(node, cst.Dict) and node.elements and all(
                isinstance(e, cst.DictElement) and _string_key(e.key) is not None for e in node.elements):
            # {"Soil_Type": list(data["Soil_Type"].unique()), ...}: its keys (its values are not known here)
            return {_string_key(e.key): _UNKNOWN for e in node.elements}
        if isinstance(node, cst.Name) and node.value not in self.local:
            stable = self.constants[1]
            if node.value not in stable:
                return NOT_LITERAL
            bound = _module_assignments(self.ctx).get(node.value)
            return NOT_LITERAL if bound is None else self._module_value(bound)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            a, b = self._module_value(node.left), self._module_value(node.right)
            if isinstance(a, (list, tuple)) and type(a) is type(b):
                return a + b
            return NOT_LITERAL
        if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].star \
                and node.args[0].keyword is None and dotted_text(node.func) in ("list", "sorted", "tuple") \
                and dotted_text(node.func) not in self.local:
            v = self._module_value(node.args[0].value)
            if not isinstance(v, (list, tuple, dict)):
                return NOT_LITERAL
            f = dotted_text(node.func)
            if isinstance(v, dict):
                v = list(v)  # (list(d), sorted(d): its keys)
            return sorted(v) if f == "sorted" else list(v) if f == "list" else tuple(v)
        if isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in ("keys", "values"):
            v = self._module_value(node.func.value)
            if isinstance(v, dict):
                got = list(v.keys() if node.func.attr.value == "keys" else v.values())
                return NOT_LITERAL if _UNKNOWN in got else got
        return NOT_LITERAL

    def _input_dict_call(self, call: cst.Call) -> dict[str, cst.Call] | None:
        """``create_model_inputs()``: a helper of this file without arguments whose body builds a dict of
        ``keras.Input`` over module constants (``inputs = {}``, ``for name in FEATURE_NAMES:`` with an
        ``if name in NUMERIC_FEATURE_NAMES:`` choosing the Input, ``inputs[name] = layers.Input(...)``,
        ``return inputs``; or ``return {"a": layers.Input(...), ...}``): key → its Input call (a copy with
        the loop's value in place). None: not such a helper."""
        if not isinstance(call.func, cst.Name) or call.args or call.func.value not in self.helpers \
                or call.func.value in self.local:
            return None
        fn = self.helpers[call.func.value]
        params = fn.params
        if params.params or params.posonly_params or params.kwonly_params or isinstance(params.star_arg, cst.Param) \
                or isinstance(params.star_kwarg, cst.Param):
            return None
        body = list(fn.body.body)
        if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
                and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            body = body[1:]  # the docstring
        if not body or not isinstance(body[-1], cst.SimpleStatementLine) or not isinstance(body[-1].body[0], cst.Return):
            return None
        ret = body[-1].body[0].value
        out: dict[str, cst.Call] = {}

        def is_input(node) -> bool:
            return isinstance(node, cst.Call) and self.ctx.imports.resolve(node.func) == INPUT

        if isinstance(ret, cst.Dict) and len(body) == 1:
            for e in ret.elements:
                key = _string_key(e.key) if isinstance(e, cst.DictElement) else None
                if key is None or not is_input(e.value) or key in out:
                    return None
                out[key] = e.value
            return out or None
        if not isinstance(ret, cst.Name) or len(body) < 3:
            return None
        name = ret.value
        first = body[0]
        if not (isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Assign)
                and code(first.body[0].value).strip() in ("{}", "dict()")
                and [code(t.target) for t in first.body[0].targets] == [name]):
            return None

        def assign(st, var: str, value: str) -> bool:
            """``<name>[<var>] = keras.Input(...)``: recorded under the loop's value."""
            small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and is_input(small.value)):
                return False
            t = small.targets[0].target
            if not (isinstance(t, cst.Subscript) and code(t.value) == name and len(t.slice) == 1
                    and isinstance(t.slice[0].slice, cst.Index) and code(t.slice[0].slice.value) == var):
                return False
            out[value] = self._copy(small.value, _Substitute({var: cst.SimpleString(_key_code(value))}))
            return True

        for loop in body[1:-1]:
            if not (isinstance(loop, cst.For) and isinstance(loop.target, cst.Name) and loop.orelse is None
                    and isinstance(loop.body, cst.IndentedBlock)):
                return None
            var = loop.target.value
            values = self._module_value(loop.iter)
            if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
                return None
            for v in values:
                for st in loop.body.body:
                    if isinstance(st, cst.If):  # if name in NUMERIC_FEATURE_NAMES: ... else: ...
                        test = st.test
                        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
                                and code(test.left) == var
                                and isinstance(test.comparisons[0].operator, (cst.In, cst.NotIn))):
                            return None
                        among = self._module_value(test.comparisons[0].comparator)
                        if not isinstance(among, (list, tuple, dict, set)):
                            return None
                        taken = (v in among) == isinstance(test.comparisons[0].operator, cst.In)
                        branch = st.body.body if taken else (
                            st.orelse.body.body if isinstance(st.orelse, cst.Else) else None)
                        if isinstance(st.orelse, cst.If) or (branch is not None and (
                                len(branch) != 1 or not assign(branch[0], var, v))):
                            return None
                    elif not assign(st, var, v):
                        return None
        return out or None

    def _known_names(self, node: cst.BaseExpression) -> list[str] | None:
        """The strings ``node`` holds where the model is built: a literal list or tuple of them, a module constant
        (or an expression of those :meth:`_module_value` reads), or a name the builder binds once, to such a literal
        (multimodal_entailment's ``bert_input_features = ["input_type_ids", ...]``); None otherwise."""
        v = self._module_value(node)
        if v is NOT_LITERAL and isinstance(node, cst.Name) and self.fn is not None:
            params = self.fn.params
            if node.value in {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}:
                return None
            body = list(self.fn.body.body)
            binding = [k for k, st in enumerate(body) if node.value in _names_bound_in(st)]
            first = body[binding[0]] if len(binding) == 1 else None
            small = first.body[0] if isinstance(first, cst.SimpleStatementLine) and len(first.body) == 1 else None
            if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                    and isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == node.value \
                    and _only_iterated(node.value, body[binding[0] + 1:]):  # (not mutated: names.append(...))
                v = literal_value(small.value, NOT_LITERAL)
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v) and len(set(v)) == len(v):
            return list(v)
        return None

    def _input_dict_comp(self, value: cst.DictComp) -> list[tuple[str, cst.Call]] | None:
        """``{f: keras.Input(shape=(1,), name=f) for f in FEATURES}`` over names known where the model is built
        (:meth:`_known_names`): each key with a copy of its Input call, the name written in place (as the dict
        literal it builds); None for any other comprehension."""
        f = value.for_in
        if f.inner_for_in or f.ifs or f.asynchronous or not isinstance(f.target, cst.Name) \
                or not isinstance(value.key, cst.Name) or value.key.value != f.target.value \
                or not isinstance(value.value, cst.Call) or self.ctx.imports.resolve(value.value.func) != INPUT:
            return None
        keys = self._known_names(f.iter)
        if keys is None:
            return None
        var = f.target.value
        return [(k, self._copy(value.value, _Substitute({var: cst.SimpleString(_key_code(k))}))) for k in keys]

    def _dict_values(self, value: cst.BaseExpression) -> cst.List | None:
        """``[v for _, v in sorted(inputs.items())]``, ``list(inputs.values())`` of a dict of inputs:
        its tensors as a list of ``inputs["a"]`` (in that order), or None."""
        def items_of(node, sort: bool):
            if isinstance(node, cst.Call) and dotted_text(node.func) == "sorted" and "sorted" not in self.local \
                    and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
                return items_of(node.args[0].value, True)
            if isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute) \
                    and isinstance(node.func.value, cst.Name) and node.func.value.value in self.input_dicts \
                    and node.func.attr.value in ("items", "values"):
                d = node.func.value.value
                keys = list(self.input_dicts[d])
                return d, (sorted(keys) if sort else keys), node.func.attr.value
            return None

        found = None
        if isinstance(value, cst.ListComp) and not value.for_in.inner_for_in and not value.for_in.ifs \
                and not value.for_in.asynchronous:
            got = items_of(value.for_in.iter, False)
            target, elt = value.for_in.target, value.elt
            if got is not None and got[2] == "items" and isinstance(target, cst.Tuple) and len(target.elements) == 2 \
                    and isinstance(elt, cst.Name) and code(target.elements[1].value) == elt.value \
                    and code(target.elements[0].value) != elt.value:
                found = got
            elif got is not None and got[2] == "values" and isinstance(target, cst.Name) \
                    and isinstance(elt, cst.Name) and elt.value == target.value:
                found = got
            elif got is None and isinstance(target, cst.Name) and isinstance(elt, cst.Subscript) \
                    and isinstance(elt.value, cst.Name) and elt.value.value in self.input_dicts \
                    and len(elt.slice) == 1 and isinstance(elt.slice[0].slice, cst.Index) \
                    and code(elt.slice[0].slice.value) == target.value:
                # `[inputs[f] for f in FEATURES]`: the dict's tensors in the order of names known here
                keys = self._known_names(value.for_in.iter)
                if keys is not None and all(k in self.input_dicts[elt.value.value] for k in keys):
                    found = (elt.value.value, keys, "items")
        elif isinstance(value, cst.Call) and dotted_text(value.func) == "list" and "list" not in self.local \
                and len(value.args) == 1 and value.args[0].keyword is None and not value.args[0].star:
            got = items_of(value.args[0].value, False)
            if got is not None and got[2] == "values":
                found = got
        if found is None:
            return None
        d, keys, _ = found
        return cst.List([cst.Element(expr(f"{d}[{_key_code(k)}]")) for k in keys])

    def _literal_layer(self, v: cst.BaseExpression) -> bool:
        """A Keras layer with a rule built from literal arguments only (``layers.LeakyReLU(0.2)``,
        ``layers.Activation("tanh")``): the same wherever a helper's body calls it."""
        if not isinstance(v, cst.Call) or self._layer_kind(v.func)[0] != "rule":
            return False
        return all(not a.star and literal_value(a.value, NOT_LITERAL) is not NOT_LITERAL for a in v.args)

    def _value_attr(self, name: str) -> str:
        taken = {x.attr for x in self.layers} | set(self.carried.values())
        attr = name if name not in _RESERVED and name not in taken else f"{name}_value"
        return attr

    def _helper_attr(self, name: str) -> str:
        base = _snake(_VERBS.sub("", name) or name)
        used = {x.attr for x in self.layers if x.attr} | set(self.carried.values())
        if self.base_counts.get(f"helper:{name}", 0) <= 1 and base not in used:
            return base
        k = 1
        while f"{base}{k}" in used:
            k += 1
        return f"{base}{k}"

    def _substituted(self, stmts: list, subst) -> list:
        """``stmts`` with known values written in (``subst``), each copy remembering the statement as written (for
        the messages: ``width += 3``, not the ``3 += 3`` the copy reads)."""
        out = []
        for b in stmts:
            new = rewrite(b, subst, fresh=True)
            self.written[id(new)] = (new, self._as_written(b))
            out.append(new)
        return out

    def _as_written(self, st: cst.CSTNode) -> cst.CSTNode:
        """The statement as the source wrote it, for a copy :meth:`_substituted` made (else ``st``)."""
        entry = self.written.get(id(st))
        return entry[1] if entry is not None and entry[0] is st else st

    def _helper_body(self, body: list, forward: list, tensors, name: str):
        """Follows a helper's statements (``if`` decided here, ``channels = x.shape[-1]`` computed
        here); (output tensor, returned expression) or None."""
        body = list(body)
        k = 0
        while k < len(body):
            st = body[k]
            k += 1
            small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
            sizes = self._unpacked_sizes(small) or self._indexed_size(small) or self._computed_size(small)
            upto = {n: _until_rebound(n, body[k:]) for n in sizes} if sizes else {}
            if sizes and None not in upto.values():
                # _, num_patch, channel = x.shape: the sizes written in place in what follows (each up to and into
                # the value of a plain assignment binding its name again: `channel = channel * 2`)
                for n, v in sizes.items():
                    subst = _Substitute({n: _literal_node(v)})
                    body[k:k + upto[n]] = self._substituted(body[k:k + upto[n]], subst)
                continue
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target,
                                                                                          cst.Name) \
                    and small.targets[0].target.value not in self.env \
                    and all(self._static_fn(c) for c in _calls(small.value)):  # (`int(n / 2)`, `str(stage)`)
                try:
                    value = self._static(small.value, tensors)
                except _Refused:
                    value = NOT_LITERAL
                upto = _until_rebound(small.targets[0].target.value, body[k:])
                if value is not NOT_LITERAL and isinstance(value, (int, float, str, bool, tuple, type(None))) \
                        and upto is not None:
                    # a value known where the model is built: written in place in what follows, up to and into
                    # the value of a plain assignment binding the name again (`width = width * 2`; the name's
                    # reads below it were this value before: a smaller layer, no finding)
                    subst = _Substitute({small.targets[0].target.value: _literal_node(value)})
                    body[k:k + upto] = self._substituted(body[k:k + upto], subst)
                    continue
                if isinstance(value, list) and _plain_nested(value) \
                        and _only_read(small.targets[0].target.value, body[k:]):
                    # conv_params = [[3, 3, stride, "same"], ...] only iterated and indexed below (adamatch's
                    # wide_basic): the list written in place, so its for statements are written out pass by pass
                    subst = _Substitute({small.targets[0].target.value: _literal_node(value)})
                    body[k:] = self._substituted(body[k:], subst)
                    continue
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target,
                                                                                          cst.Name) \
                    and isinstance(small.value, cst.Name) and small.value.value not in self.env \
                    and small.targets[0].target.value not in self.env and small.value.value not in (
                        "True", "False", "None") \
                    and not any({small.value.value, small.targets[0].target.value} & _names_bound_in(b)
                                for b in body[k:]):
                # n_bottleneck_plane = n_output_plane (adamatch's wide_basic): another name of a value that is
                # not a tensor, neither bound again below: the value's name written in place of the alias
                subst = _Substitute({small.targets[0].target.value: cst.Name(small.value.value)})
                body[k:] = self._substituted(body[k:], subst)
                continue
            unpacked = self._unpacked_known(small, body[k:], tensors)
            if unpacked is not None:  # filters1, filters2, filters3 = filters (a known list): each written in place
                body[k:] = self._substituted(body[k:], _Substitute(unpacked))
                continue
            if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(
                    st.body[0], (cst.Pass, cst.Expr)) and (isinstance(st.body[0], cst.Pass) or isinstance(
                    st.body[0].value, (cst.SimpleString, cst.ConcatenatedString))):
                continue
            chooser = _ifexp_of(st)
            if chooser is not None and _chooses_layer(chooser):
                # `x = layers.Dropout(rate)(x) if rate else x` on a literal argument: the branch it takes (as an
                # if statement is decided here; `... else x` of the target itself: no statement)
                try:
                    taken = bool(self._static(chooser.test, tensors))
                except (_Refused, TypeError, ValueError, ZeroDivisionError):
                    taken = None
                if taken is not None:
                    v = chooser.body if taken else chooser.orelse
                    if not (isinstance(v, cst.Name) and v.value == st.body[0].targets[0].target.value):
                        chosen = st.with_changes(body=[st.body[0].with_changes(value=v)])
                        self.written[id(chosen)] = (chosen, self._as_written(st))
                        body.insert(k, chosen)
                    continue
            if isinstance(st, cst.If):
                branch = st
                while True:
                    try:
                        taken = bool(self._static(branch.test, tensors))
                    except _Refused as r:
                        self._refused(r)
                        return None
                    if taken:
                        chosen = branch.body.body
                        break
                    if isinstance(branch.orelse, cst.If):
                        branch = branch.orelse
                        continue
                    chosen = branch.orelse.body.body if isinstance(branch.orelse, cst.Else) else []
                    break
                # the branch's statements followed in the if's place, then the ones below it: a value the branch
                # binds (`bn_axis = 3` under `if backend.image_data_format() == 'channels_last':`, Keras's ResNet
                # blocks) is written in place in both, as Python's scope has it
                body[k:k] = list(chosen)
                continue
            if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Return):
                value = st.body[0].value
                try:
                    if isinstance(value, cst.Tuple) and value.elements:  # return x, skip
                        parts = [self._tensor(e.value) for e in value.elements]
                        t = _Multi(parts) if all(isinstance(x, _Tensor) for x in parts) else None
                    else:
                        t = self._tensor(value) if value is not None else None
                except _Refused as r:
                    self._refused(r)
                    return None
                if t is None:
                    self.error(st, f"{name}(...) must return tensors of the model")
                    return None
                return t, value
            role = self._statement(st, False)
            st = self.aug.pop(id(st), st)
            if role == "forward":
                forward.append(st)
            elif role == "unrolled":
                forward += self.generated.pop(id(st), [])
            elif role != "layer":
                self.error(st, f"{name}(...): `{code(self._as_written(st)).strip()}` is not followed inside a helper (only layer calls "
                               "on tensors, and if statements decided by literal arguments)")
            if self.errors:
                return None
        return None

    def _unpacked_known(self, small, rest: list, tensors) -> dict[str, cst.BaseExpression] | None:
        """``filters1, filters2, filters3 = filters`` in a helper whose argument is a list or tuple of literals
        at the call (ResNet's identity_block(x, 3, [64, 64, 256])), or ``a, b = 3, 4``: each name → its item,
        written in place in the statements below as a literal argument is. None where the value is not known
        here, its length is not the targets', a target is not a plain name, or a statement below binds one of
        the names again (then the statement stays refused as before)."""
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, (cst.Tuple, cst.List)) and not _calls(small.value)):
            return None
        elements = small.targets[0].target.elements
        if not elements or not all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in elements):
            return None
        names = [e.value.value for e in elements]
        if len(set(names)) != len(names) or set(names) & set(self.env):
            return None
        try:
            value = self._static(small.value, tensors)
        except _Refused:
            return None
        if not isinstance(value, (list, tuple)) or len(value) != len(names) \
                or not all(_plain_value(v) and not isinstance(v, (list, dict, set)) for v in value):
            return None
        if any(set(names) & _names_bound_in(b) for b in rest):
            return None
        return {n: _literal_node(v) for n, v in zip(names, value)}

    def _sizes_written_in(self, stmts: list, i: int, m_index: int) -> bool:
        """Statement ``i`` of a builder reads static sizes of a tensor of the model into names (``channels =
        x.shape[-1]``, ``channels = list(x.shape)[-1]``, ``_, h, w, c = x.shape``) that are known here (ints),
        each name bound nowhere else in the builder: each read below is written as its size (as in a helper's
        body), and True (the statement has no place in the class: the tensor exists in forward only). False, and
        nothing changed, for anything else (then the statement is refused as a tensor operation, as before)."""
        st = stmts[i]
        small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
        sizes = self._unpacked_sizes(small) or self._indexed_size(small) or self._computed_size(small)
        if not sizes or set(sizes) & (self.local | set(self.env)):
            return False
        names = set(sizes)
        # up to the statement that binds one of the names again (`_, n, c = y.shape` below): that one's value
        # reads them still, its target is the new value's
        end = next((j for j in range(i + 1, len(stmts)) if names & (_names_bound_in(stmts[j]) | set(_assigned(stmts[j])))),
                   len(stmts))
        last = stmts[end].body[0] if end < len(stmts) and isinstance(stmts[end], cst.SimpleStatementLine) \
            and len(stmts[end].body) == 1 else None
        if end < len(stmts) and not (isinstance(last, cst.Assign) and all(
                isinstance(t.target, cst.Name) for t in last.targets) or _names_in(stmts[end].body[0].value
                                                                                    if isinstance(last, cst.Assign) else stmts[end]).isdisjoint(names)):
            return False
        subst = _Substitute({n: _literal_node(v) for n, v in sizes.items()})
        tail = {j: self._copy(stmts[j], subst) for j in range(i + 1, min(end + 1, len(stmts)))
                if _names_in(stmts[j].body[0].value if j == end else stmts[j]) & names}
        left = [s.body[0].value if j == end else s for j, s in tail.items()]
        if m_index in tail or any(re.search(rf"\b{n}\b", code(s)) for s in left for n in names):
            return False  # (read where the substitution does not reach: a lambda, a def, keras.Model(...) itself)
        for j, s in tail.items():
            self.sized_out.append(stmts[j])  # (settled as written if the model is left as written)
            stmts[j] = s
        return True

    def _indexed_size(self, small) -> dict[str, int] | None:
        """``name = x.shape[i]`` / ``name = list(x.shape)[i]`` (i a literal, not the batch axis) with ``x`` a
        tensor of the model whose size there is known here: {name: size}; None for anything else."""
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target,
                                                                                          cst.Name)
                and isinstance(small.value, cst.Subscript) and len(small.value.slice) == 1
                and isinstance(small.value.slice[0].slice, cst.Index)):
            return None
        base = small.value.value
        if isinstance(base, cst.Call) and isinstance(base.func, cst.Name) and base.func.value == "list" \
                and "list" not in self.local and len(base.args) == 1 and base.args[0].keyword is None \
                and not base.args[0].star:
            base = base.args[0].value
        if not (isinstance(base, cst.Attribute) and base.attr.value == "shape" and isinstance(base.value, cst.Name)):
            return None
        t = self.env.get(base.value.value)
        i = literal_value(small.value.slice[0].slice.value, None)
        if not isinstance(t, _Tensor) or t.shape is None or not is_int(i) or i == 0 \
                or not -len(t.shape) <= (i - 1 if i > 0 else i) < len(t.shape):
            return None
        d = t.shape[i - 1] if i > 0 else t.shape[i]
        return {small.targets[0].target.value: int(d)} if is_int(d) else None

    def _computed_size(self, small) -> dict[str, int | float] | None:
        """``num_patches = int((x.shape[1] * x.shape[2]) / patch_size)`` (keras-io's mobilevit): a name bound to a
        number computed where the model is built from known sizes of the model's tensors, literals, module
        constants and the builtins of _STATIC_FNS (:meth:`_static`), as Keras computes it from the symbolic
        shapes once: {name: value}; None for anything else (an unknown size, another call, a tensor read)."""
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            return None
        if not any(isinstance(self.env.get(n.value), _Tensor) for n in _shape_reads(small.value)) \
                or not all(self._static_fn(c) for c in _calls(small.value)):
            return None
        try:
            value = self._static(small.value, {})
        except (_Refused, TypeError, ValueError, ZeroDivisionError, OverflowError):
            return None
        return {small.targets[0].target.value: value} \
            if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def _unpacked_sizes(self, small) -> dict[str, int] | None:
        """``_, num_patch, channel = x.shape`` with ``x`` a tensor of the model whose sizes it names are
        known here (its batch axis bound to ``_`` or not at all): name → size; None for anything else."""
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, (cst.Tuple, cst.List))
                and isinstance(small.value, cst.Attribute) and small.value.attr.value == "shape"
                and isinstance(small.value.value, cst.Name)):
            return None
        t = self.env.get(small.value.value.value)
        elements = small.targets[0].target.elements
        if not isinstance(t, _Tensor) or t.shape is None or len(elements) != len(t.shape) + 1 \
                or any(not isinstance(e.value, cst.Name) or isinstance(e, cst.StarredElement) for e in elements) \
                or elements[0].value.value != "_":
            return None
        out = {}
        for e, d in zip(elements[1:], t.shape):
            name = e.value.value
            if name == "_":
                continue
            if not is_int(d) or name in self.env:
                return None
            out[name] = int(d)
        return out

    def _static(self, node: cst.BaseExpression, tensors):
        """The value of a helper's ``if`` test where the model is built, or a refusal."""
        lit = literal_value(node, NOT_LITERAL)
        if lit is not NOT_LITERAL:
            return lit
        if self._literal_layer(node):
            return _LAYER_OBJECT  # a parameter given a layer: `if activation:` holds
        if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.value]
        if isinstance(node, cst.Name) and node.value not in self.local and node.value not in self.env \
                and node.value in self.constants[1]:  # a module constant bound once: `positional_emb = True`
            value = _module_assignments(self.ctx).get(node.value)
            v = literal_value(value, NOT_LITERAL) if value is not None else NOT_LITERAL
            if v is not NOT_LITERAL and _plain_value(v):
                return v
        if isinstance(node, cst.UnaryOperation):
            v = self._static(node.expression, tensors)
            if isinstance(node.operator, cst.Not):
                return not v
            if isinstance(node.operator, cst.Minus):
                return -v
        if isinstance(node, cst.BooleanOperation):
            a = self._static(node.left, tensors)
            if isinstance(node.operator, cst.And):
                return a and self._static(node.right, tensors)
            return a or self._static(node.right, tensors)
        if isinstance(node, cst.Comparison):
            left = self._static(node.left, tensors)
            for c in node.comparisons:
                right = self._static(c.comparator, tensors)
                op = type(c.operator)
                ok = {cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b,
                      cst.LessThan: lambda a, b: a < b, cst.GreaterThan: lambda a, b: a > b,
                      cst.LessThanEqual: lambda a, b: a <= b, cst.GreaterThanEqual: lambda a, b: a >= b,
                      cst.Is: lambda a, b: a is b, cst.IsNot: lambda a, b: a is not b,
                      cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b}.get(op)
                if ok is None or not ok(left, right):
                    return False
                left = right
            return True
        if isinstance(node, cst.BinaryOperation) and type(node.operator) in _STATIC_OPS:
            return _STATIC_OPS[type(node.operator)](self._static(node.left, tensors), self._static(node.right, tensors))
        if isinstance(node, cst.IfExp):  # `3 if backend.image_data_format() == 'channels_last' else 1`
            return self._static(node.body if self._static(node.test, tensors) else node.orelse, tensors)
        if self._static_fn(node):
            return _STATIC_FNS[node.func.value](*(self._static(a.value, tensors) for a in node.args))
        compare = _STATIC_COMPARES.get(self.ctx.imports.resolve(node.func)) if isinstance(node, cst.Call) else None
        if compare is not None and len(node.args) == 2 and not any(a.keyword or a.star for a in node.args):
            # `if tf.math.equal(x.shape[-1], filters):` (keras-io's mobilevit): on two numbers known here, Keras
            # computes it once as the model is built; the branch it takes, as for `==`
            a, b = (self._static(a.value, tensors) for a in node.args)
            if all(isinstance(v, (int, float)) for v in (a, b)):
                return compare(a, b)
        if isinstance(node, cst.Call) and not node.args and not isinstance(node.func, cst.Call) \
                and self.ctx.imports.resolve(node.func) in data_format.IMAGE_FORMAT_READS \
                and data_format.image_format_set(self.ctx) is None:
            # backend.image_data_format() in a file that never sets it: Keras's default (a warning, once per call)
            original = self.origin.get(id(node), (None, node))[1] if hasattr(self, "origin") else node
            message = data_format.image_format_message(f"{code(node)}")
            if not getattr(self, "format_quiet", False) \
                    and not any(p.node is original and p.finding.message == message for p in self.ctx.pending):
                self.ctx.report(Severity.WARNING, "default-differs", message, original)
            return "channels_last"
        if (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute)
                and node.value.attr.value == "shape" and isinstance(node.value.value, cst.Name)
                and isinstance(self.env.get(node.value.value.value), _Tensor) and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index)):
            t = self.env[node.value.value.value]
            i = literal_value(node.slice[0].slice.value, None)
            if is_int(i) and t.shape is not None and i != 0 and -len(t.shape) <= (i - 1 if i > 0 else i) < len(t.shape):
                d = t.shape[i - 1] if i > 0 else t.shape[i]
                if is_int(d):
                    return int(d)
        raise _Refused(node, f"`{code(node)}` cannot be decided where the model is built: fwport follows a helper's "
                             "if statements on literal arguments and known sizes (x.shape[-1])")

    def _known_sequence(self, node: cst.BaseExpression, shown: cst.BaseExpression) -> list:
        """The values a Sequential factory's ``for`` statement steps through, known where the model is built: a
        literal list or tuple, a module constant bound once to one, a slice or item of those (``hidden_units[:-1]``),
        or ``range`` of known ints; a refusal otherwise."""
        try:
            value = self._known_value(node)
        except (_Refused, TypeError, ValueError, IndexError, ZeroDivisionError):
            value = None
        if isinstance(value, range):
            value = list(value)
        if not isinstance(value, (list, tuple)) or not all(_plain_value(v) for v in value):
            raise _Refused(node, f"`for ... in {code(shown)}`: not a list of values known where the model is built "
                                 "(its layers are created in __init__): fwport writes a Sequential factory's for "
                                 "statement out over literal lists, module constants, the builder's values pinned by "
                                 "its calls and range(known ints); give the factory such a list, or translate it by "
                                 "hand")
        return list(value)

    def _known_value(self, node: cst.BaseExpression):
        lit = literal_value(node, NOT_LITERAL)
        if lit is not NOT_LITERAL:
            return lit
        if isinstance(node, cst.Name) and node.value not in self.local and node.value not in self.env \
                and node.value in self.constants[1]:
            value = _module_assignments(self.ctx).get(node.value)
            v = literal_value(value, NOT_LITERAL) if value is not None else NOT_LITERAL
            if v is not NOT_LITERAL:
                return v
        if isinstance(node, cst.Subscript) and len(node.slice) == 1:
            seq, one = self._known_value(node.value), node.slice[0].slice
            if isinstance(seq, (list, tuple)):
                if isinstance(one, cst.Index):
                    return seq[self._static(one.value, {})]
                if isinstance(one, cst.Slice):
                    ends = [None if e is None else self._static(e, {}) for e in (one.lower, one.upper, one.step)]
                    return seq[slice(*ends)]
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "range" \
                and "range" not in self.local and not any(a.keyword or a.star for a in node.args):
            return range(*(self._static(a.value, {}) for a in node.args))
        return self._static(node, {})

    def _initializer_constant(self, v: cst.BaseExpression) -> bool:
        """``v`` is a name the module binds once, to a call of a Keras / TensorFlow initializer
        (``kernel_init = keras.initializers.RandomNormal(mean=0.0, stddev=0.02)``), that the builder does not bind."""
        if not (isinstance(v, cst.Name) and v.value in self.constants[1] and v.value not in self.local):
            return False
        value = _module_assignments(self.ctx).get(v.value)
        q = self.ctx.imports.resolve(value.func) if isinstance(value, cst.Call) else None
        return q is not None and self.ctx.imports.is_source(q) and (
            ".initializers." in q or q.rsplit(".", 1)[-1].endswith("_initializer"))

    def _source_value(self, v: cst.BaseExpression) -> bool:
        """``tf.tanh`` / ``keras.activations.gelu``: a name of the source framework (not a call)."""
        if not isinstance(v, (cst.Name, cst.Attribute)):
            return False
        q = self.ctx.imports.resolve(v)
        return q is not None and self.ctx.imports.is_source(q)

    def _record_penalties(self, class_name: str) -> None:
        """The regularizers taken off the layers of a followed model: its class's and its helpers' classes'
        regularization_loss() (written by regularizers.finish), the info finding where the source has them."""
        todo = [*self.helper_penalties, *((rec, target, class_name, where) for target, (rec, where) in self.penalties.items())]
        for rec, target, cls, where in todo:
            rec(target, cls)
            self.ctx.pending[-1].node = where

    def _penalty_names(self, call: cst.Call) -> set[str]:
        """The names the regularizer arguments of a layer call read that the builder binds (its locals and
        parameters): regularization_loss() reads only the class's __init__ parameters."""
        out: set[str] = set()
        for a in call.args:
            if a.keyword is not None and a.keyword.value in regularizers.REGULARIZER_ARGS:
                out |= _names_in(a.value)
        return out & (self.local | set(self.known_ints))

    def _static_fn(self, node) -> bool:
        """``node`` is a call of a builtin of _STATIC_FNS (not a name the builder or the module binds) with
        plain positional arguments."""
        return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _STATIC_FNS \
            and node.func.value not in self.local and node.func.value not in self.constants[1] \
            and bool(node.args) and all(a.keyword is None and not a.star for a in node.args)

    def _refused(self, r: _Refused) -> None:
        if r.message:  # else the layer's rule reported why
            self.error(r.node, r.message, r.code)

    # --- the builder function ---------------------------------------------------------------------------
    def run(self) -> cst.FunctionDef | None:
        fn = self.fn
        stmts = list(fn.body.body)
        if self.pinned:
            # a parameter the body steps (filters *= 2): its value in place up to the first statement stepping it,
            # then a known int the loops and statements below follow (_unroll_values, _config, _after_loops)
            stepped = _int_stepped_params(fn) & set(self.pinned)
            values = {n: _literal_node(v) for n, v in self.pinned.items()}
            out = []
            for st in stmts:
                steps = _stepped_names(st) & stepped & set(values)
                for n in steps:
                    del values[n]
                    self.known_ints[n] = self.pinned[n]
                out.append(self._copy(st, _Substitute(values)) if _names_in(st) & set(values) else st)
            stmts = out
        params = fn.params
        self.local = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.local.add(star.name.value)
        stmts = self._source_aliases(stmts)
        bound = set().union(*(_names_bound_in(st) | set(_assigned(st)) for st in stmts)) if stmts else set()
        stmts = [self._chosen_layer(st, bound) for st in stmts]
        stmts = self._static_ifs(stmts, bound)
        plan = self._follow(stmts, builder=True)
        if plan is None:
            return None
        new_body = self._rewrite(stmts, plan)
        for st in self.decided_ifs:
            where = self.origin.get(id(st), (None, st))[1]
            test = where.test if isinstance(where, cst.If) else _ifexp_of(where).test  # (or a conditional expression)
            self.ctx.report(Severity.INFO, "if-decided", f"`if {code(test)}:` is decided where the model is "
                            "built (by literals, module constants or the values the file gives the builder): the "
                            "translated class has the layers and the code of the branch Keras builds, and no if; "
                            "translate again if those values change", where)
        self.ctx.analyses.setdefault("functional", []).append(plan)
        self._record_penalties(plan.class_name)
        return fn.with_changes(body=fn.body.with_changes(body=new_body))

    def _source_aliases(self, stmts: list) -> list:
        """The builder's statements with each name bound once, by a plain statement of its own, to a Keras /
        TensorFlow function (a reference, not a call: keras-io's video_classification ``preprocess_input =
        keras.applications.inception_v3.preprocess_input``) and only called below (``preprocess_input(inputs)``)
        written as that function in the calls, the statement binding it dropped: the call is the function's call,
        which its rule translates (a reference has none), as if the source had called it by its own name."""
        out = list(stmts)
        for k, st in enumerate(stmts):
            small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, (cst.Name, cst.Attribute))):
                continue
            name = small.targets[0].target.value
            q = self.ctx.imports.resolve(small.value)
            if q is None or not self.ctx.imports.is_source(q) or name in self.local \
                    or any(name in _names_bound_in(other) for j, other in enumerate(stmts) if j != k):
                continue
            uses = _CalledOnly(name)
            for later in stmts[k + 1:]:
                scan(later, uses)
            if uses.other or not uses.calls:
                continue
            subst = _Substitute({name: small.value})
            out[k] = None
            out[k + 1:] = [None if s_ is None else self._copy(s_, subst) if name in _names_in(s_) else s_
                           for s_ in out[k + 1:]]
        return [st for st in out if st is not None]

    def _idle_layers(self, stmts: list, lo: int, model: int, outside: set[int]) -> set[int]:
        """Indices of the module-level statements ``name = SomeLayer(...)`` in the model's statements whose layer
        the model's statements below never call on a tensor nor pass on: they only call its methods
        (``vocabulary_size = tokenizer.vocabulary_size()``). Such a layer is no layer of the model (Keras's
        graph holds only the layers called on its tensors), and what its methods return is a plain Python value
        known at run time, which the class reads as it reads any module name: the statement stays at module
        level as written (its own rule translates it or says why not)."""
        idle = set()
        for i in range(lo, model):
            st = stmts[i]
            if i in outside or not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1:
                continue
            small = st.body[0]
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Call)):
                continue
            kind = self._layer_kind(small.value.func)[0]
            if kind not in ("rule", "norule", "vocab", "user"):
                continue
            name = small.targets[0].target.value
            uses = _MethodsOnly(name)
            for j in range(i + 1, model + 1):
                if j not in outside:
                    scan(stmts[j], uses)
            if uses.read and not uses.other:
                idle.add(i)
        return idle

    def _chosen_layer(self, st, bound: set[str]):
        """``x = LayerScale(v, d)(x) if init_values else x`` (a builder's statement: a layer applied or not,
        keras-io's cait / deit) is the ``if`` statement it means, ``if init_values: x = LayerScale(v, d)(x)``
        (``else: y = z`` where the other branch is another name or a layer applied too), where that ``if`` is
        followed: its test known where the model is built (:meth:`_static_ifs`, then decided as one) or on builder
        parameters the file calls with several values (:meth:`_runtime_if`, kept in the class). Keras builds the
        branch the test takes, as the ``if`` does. Otherwise the statement stays as written (and refused)."""
        e = _ifexp_of(st)
        if e is None or not _chooses_layer(e):
            return st
        target = st.body[0].targets[0].target.value

        def assign(v) -> cst.SimpleStatementLine:
            line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(target))], v)])
            self.origin[id(line)] = (line, self.origin.get(id(st), (None, st))[1])
            return line

        keep = isinstance(e.orelse, cst.Name) and e.orelse.value == target  # `... else x`: no else clause
        made = cst.If(test=e.test.with_changes(lpar=[], rpar=[]) if isinstance(e.test, cst.Name) else e.test,
                      body=cst.IndentedBlock([assign(e.body)]),
                      orelse=None if keep else cst.Else(cst.IndentedBlock([assign(e.orelse)])),
                      leading_lines=st.leading_lines)
        self.origin[id(made)] = (made, self.origin.get(id(st), (None, st))[1])
        if self._static_branch(made, bound) is None and not self._runtime_if_test(made):
            return st
        return made

    def _static_ifs(self, stmts: list, bound: set[str]) -> list:
        """The builder's statements with each ``if`` that builds part of the model (calls or assignments, no
        raise or return) and whose test is decided where the model is built (literals, module constants
        bound once, the values pinned: ``if positional_emb:``) replaced by the statements of the branch it
        takes, as Keras builds the graph: the class has that branch's layers and forward its code."""
        out = []
        model = next((k for k, st in enumerate(stmts) if _has_model_call(st, self.ctx)), len(stmts))
        for k, st in enumerate(stmts):
            # (below keras.Model(...): the builder's own code, compile or summary, keeps its if statements)
            chosen = self._static_branch(st, bound) if isinstance(st, cst.If) and k < model else None
            if chosen is None:
                out.append(st)
                continue
            self.decided_ifs.append(st)
            out += self._static_ifs(chosen, bound)
        return out

    def _static_branch(self, st: cst.If, bound: set[str]) -> list | None:
        """The statements of the branch ``st`` takes where the model is built (see :meth:`_static_ifs`), or
        None (a test not known here, or an if that builds nothing)."""
        kinds = _StatementKinds()
        scan(st, kinds)
        if kinds.exits or not kinds.builds:
            return None
        branch = st
        saved = self.local
        self.local = self.local | bound  # (a name the builder binds is not the module's constant)
        try:
            while True:
                if not isinstance(branch.body, cst.IndentedBlock):
                    return None
                if self._static(branch.test, {}):
                    return list(branch.body.body)
                if isinstance(branch.orelse, cst.If):
                    branch = branch.orelse
                    continue
                if isinstance(branch.orelse, cst.Else):
                    return list(branch.orelse.body.body) if isinstance(branch.orelse.body, cst.IndentedBlock) else None
                return []
        except (_Refused, TypeError, ValueError, ZeroDivisionError):
            return None
        finally:
            self.local = saved

    def run_module(self, body: list, lo: int, hi: int) -> list | None:
        stmts = list(body)
        plan = self._follow(stmts, builder=False, lo=lo, hi=hi)
        if plan is None:
            return None
        self.ctx.analyses.setdefault("functional", []).append(plan)
        self._record_penalties(plan.class_name)  # (its helpers' classes': the model's own layers keep theirs)
        return self._rewrite(stmts, plan)

    def _follow(self, stmts: list, builder: bool, lo: int = 0, hi: int | None = None) -> _Plan | None:
        ctx = self.ctx
        hi = len(stmts) - 1 if hi is None else hi
        models = [(i, c) for i, s in enumerate(stmts) if not isinstance(s, (cst.FunctionDef, cst.ClassDef))
                  and lo <= i <= hi for c in _model_calls([s], ctx)]
        if not models:
            return None
        self.mark = len(ctx.pending)
        self.imports_mark = set(ctx.needed_imports)
        model_call = models[0][1]
        if len(models) > 1:
            for _, c in models:
                self.error(c, "several keras.Model(inputs, outputs) calls in one function: fwport follows one "
                              "functional model per builder function; split them into several builders")
            return self._give_up(stmts, None)
        m_index = models[0][0]
        block = stmts[m_index]
        if isinstance(block, (cst.With, cst.For, cst.While, cst.Try)) and any(
                ctx.imports.resolve(c.func) == INPUT for c in _calls(block)):
            kind = type(block).__name__.lower()
            self.error(model_call, f"a functional model built inside a {kind} statement (its keras.Input and "
                                   "keras.Model calls in the block) is not followed: fwport follows the statements of a "
                                   "module or a function; put the model-building lines in a function (def "
                                   "build_model(): ... return keras.Model(inputs, outputs)) and call it in the block "
                                   "(`with strategy.scope(): model = build_model()`)")
            return self._give_up(stmts, model_call)
        parent = _model_base(model_call.func, ctx)
        if parent is not None:  # the generated class, placed at the builder or the model's first statement
            at = self.path[0] if self.path else min(
                (i for i in range(lo, m_index + 1) if self._graph_stmt(stmts[i])), default=m_index)
            if ctx.analyses["functional_step_models"][parent] >= at:
                self.error(model_call, f"{parent}(inputs, outputs): the translated model class derives from "
                                       f"{parent}, which the file defines below the model's construction; move the "
                                       f"class {parent} above it")
                return self._give_up(stmts, None)
        if self.fn is None:
            self.scope = self._model_target(stmts[m_index]) or "model"
        self.layout = self._layout(stmts[:m_index + 1])
        roles: dict[int, str] = {}
        generated: dict[int, list] = {}
        init_lines: dict[int, list[str]] = {}
        gone: set[str] | None = None  # graph names: none of them exists after the model in the translation
        adapts: dict[int, _Layer] = {}  # `normalizer.adapt(data)` above the model → the layer it adapts
        # module level: the statements keras.Model(...) depends on; the others (data, plots, other objects
        # between the models) stay as written, and may not read the model's tensors or layers
        outside = set() if builder else _outside_slice(stmts, lo, m_index)
        if not builder:
            outside |= self._idle_layers(stmts, lo, m_index, outside)
        if not builder and lo > 0:
            self._shared_inputs(stmts, lo, m_index, outside)
        kept_seqs: set[int] = set()
        if not builder and self.shown_seqs:
            # (not one the sequential pass makes channels-first: the statement outside calls it on Keras's layout)
            shown = {n: c for n, c in self.shown_seqs.items()
                     if any(n in _names_in(stmts[i]) for i in outside) and self._keeps_layout(c)}
            for i in range(lo, m_index):
                st = stmts[i]
                if i not in outside and isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 \
                        and isinstance(st.body[0], cst.Assign) and any(st.body[0].value is c for c in shown.values()):
                    kept_seqs.add(i)
            self.module_seqs = {n: c for n, c in shown.items() if any(stmts[i].body[0].value is c for i in kept_seqs)}
        graph_bound: set[str] = set()  # names the model's statements bound so far
        for i, stmt in enumerate(stmts):
            if i < lo:
                roles[i] = "keep"
                continue
            if i in kept_seqs:  # (the Sequential where it stands; the model calls that object)
                roles[i] = "keep"
                continue
            if i in outside:
                roles[i] = "keep"
                used = _names_in(stmt) & graph_bound
                if used and _shown_only(stmt, used):
                    roles[i] = "input"  # gone with the graph (nothing of it exists in the translation)
                    what = "a Keras tensor or layer of the model" if isinstance(stmt.body[0].value, cst.Name) \
                        else "an attribute of a Keras tensor of the model"
                    ctx.report(Severity.INFO, "display-dropped", f"{code(stmt.body[0].value)}: a bare expression "
                               f"showing {what} (a notebook displays it; a script computes nothing with it): dropped "
                               "with the graph, whose tensors the translation does not have", stmt)
                    continue
                if used:
                    layer = None if builder else self._adapt_before(stmts, i, m_index, used)
                    if layer is not None:
                        roles[i] = "adapt"  # moved below the model, on the model's module (_build_module)
                        adapts[i] = layer
                        continue
                    self.error(stmt, f"{', '.join(sorted(used))}: a tensor or layer of the functional model used by "
                                     "a statement that is not part of it: only the model is available there in the "
                                     "translation")
                continue
            if i > m_index:
                roles[i] = "keep"
                if gone is None:  # (less what keras.Model(...)'s statement binds: `model = keras.Model(...)` after
                    # `model = keras.applications.X(...)` in the graph, the model below is the new one)
                    gone = (set(self.env) | set(self.inputs)) - set(_assigned(stmts[m_index]))
                if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    continue  # their names are their own
                used = _read_before_bound(stmt, gone)
                if used and not builder and self._in_later_model(stmts, m_index, i):
                    used -= set(self.inputs)  # an input a model below shares (its own input there too)
                    # a tensor a model below reads (new_model = keras.Model(inputs, [priority, difficulty])): that
                    # model calls a method of this one computing it (_import_tensors)
                    used -= set(self._var_taps(stmts, roles, generated, m_index))
                if used and not builder and self._adapt_after(stmts, i, m_index, used) is not None:
                    roles[i] = "adapt"  # written in place on the model's module (_build_module)
                    adapts[i] = self.env[next(iter(used))]
                    continue
                if used and (builder or any(isinstance(self.env.get(n), (_Tensor, _Layer)) for n in used)):
                    self.error(stmt, f"{', '.join(sorted(used))}: a tensor or layer of the functional model used "
                                     "after keras.Model(...): only the model is available there in the translation")
                    break
                gone -= set(_assigned(stmt))
                continue
            if i == m_index:
                roles[i] = "model"
                continue
            if not builder and isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                roles[i] = "keep"
                continue
            if self.loop_ints:
                after = self._after_loops(stmt)
                if after is not None:
                    stmts[i] = stmt = after
            if builder and self._sizes_written_in(stmts, i, m_index):
                roles[i] = "input"  # gone, as an Input: its names are written as the sizes in what follows
                continue
            if id(stmt) in self.tap_statements:  # `features = model.layers[4].output`: forward's first line
                roles[i] = "input"
                graph_bound |= set(_assigned(stmt))
                continue
            role = self._statement(stmt, i == 0 and builder)
            if id(stmt) in self.aug:
                stmts[i] = stmt = self.aug.pop(id(stmt))
            roles[i] = role
            if role == "forward" and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 \
                    and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1 \
                    and isinstance(stmt.body[0].targets[0].target, cst.Name) \
                    and isinstance(self.env.get(stmt.body[0].targets[0].target.value), _Tensor):
                target = stmt.body[0].targets[0].target.value
                self.tap_candidates[i] = (target, self.env[target])
            if not builder and role != "keep":
                graph_bound |= _names_bound_in(stmt) | set(_assigned(stmt))
            if role == "unrolled" and id(stmt) in self.generated:
                generated[i] = self.generated.pop(id(stmt))
            if self.pending_init:
                init_lines[i] = self.pending_init
                self.pending_init = []
        for p in ctx.pending[self.mark:]:  # findings the rules made on copies (a loop's body): at the source's node
            p.node = self.origin.get(id(p.node), (None, p.node))[1]
        outputs = self._model_args(model_call)
        if outputs is None or self.errors:
            return self._give_up(stmts, model_call)
        returns, out_tensors = outputs
        if self.pending_init:  # layers first called in keras.Model(...) itself
            init_lines[m_index] = self.pending_init
            self.pending_init = []
        if self.imported and self.loops:
            self.error(model_call, "a model reading tensors of a model above (its layers shared) with loops or if "
                                   "statements kept in its forward: not followed (fwport orders its weights by the "
                                   "layers' calls there)")
            return self._give_up(stmts, model_call)
        self._freeze_lines(init_lines, model_call)
        moved = self._adapt_lines(stmts, adapts, m_index)
        if self.errors:
            return self._give_up(stmts, model_call)
        self._check_reachable(out_tensors, model_call)
        if self.errors:
            return self._give_up(stmts, model_call)
        if self.out_keys is not None:  # Keras flattens a dict of outputs by sorted keys (map_graph's order)
            self._records([t for _, t in sorted(zip(self.out_keys, out_tensors), key=lambda kt: kt[0])])
        else:
            self._records(out_tensors)
        # names and the forward's parameters
        name_arg = next((a.value for a in model_call.args if a.keyword and a.keyword.value == "name"), None)
        given = literal_value(name_arg, None) if name_arg is not None else None
        base = _camel(given) if isinstance(given, str) and given else _camel(self.scope or
                                                                             self._model_target(stmts[m_index]) or "model")
        class_name = base
        k = 2
        while class_name in self.taken:
            class_name = f"{base}{k}"
            k += 1
        self.taken.add(class_name)
        keep_names = set()
        for i, r in roles.items():
            if r == "keep":
                keep_names |= _names_in(stmts[i])
        keep_copies = {i for i, r in roles.items() if r == "config" and set(_assigned(stmts[i])) & keep_names}
        params = [self.dict_input[0]] if self.dict_input else list(self.inputs)
        plan = _Plan(self.path, class_name, roles, init_lines, params, returns,
                     self._model_target(stmts[m_index]), keep_copies, scope=self.scope, user_layers=self.user_layers,
                     class_code=self.class_code, helper_uses=self.helper_uses, generated=generated,
                     carried=self.carried, return_keys=self.out_keys, base=parent, pinned=dict(self.pinned),
                     adapts=moved)
        if self.pinned:
            shown = ", ".join(f"{n}={v!r}" for n, v in self.pinned.items())
            self.ctx.report(Severity.INFO, "built-for-values", f"{class_name} is translated for {shown}, the values "
                            f"every call of {self.scope} in this file gives (or the defaults): fwport follows the model "
                            "for them only (an if, a loop or a keras.Input's shape depends on them); its __init__ "
                            "raises ValueError for others", self.origin.get(id(model_call), (None, model_call))[1])
        ctx.settle(model_call)
        for node in self.tap_nodes:  # (their statements go: no edit of model_api's on them)
            for n in (node, node.value, node.value.value):
                ctx.settle(n)
                ctx.plans.withdraw(n)
        # (translated, not left as written: variables.py's x.numpy() of its output gets .detach())
        ctx.analyses.setdefault("functional_translated_models", {})[id(model_call)] = model_call
        for said in self.mode_said:
            gone = next((f for f in ctx.findings if f.message.startswith(said)), None)
            if gone is not None:
                ctx.findings.remove(gone)
        self._info(plan, model_call, out_tensors)
        plan.taps = self._taps(stmts, roles, generated)
        self.model_summary = {"inputs": [t.shape for t in self.inputs.values()],
                              "outputs": [t.shape for t in out_tensors], "plan": plan,
                              "input_names": self._input_names(), "dict_input": self.dict_input is not None}
        if not builder and self.later_rows:  # (a model below may read its tensors: _import_tensors)
            self.model_summary.update(var_taps=self._var_taps(stmts, roles, generated, m_index),
                                      input_tensors=dict(self.inputs), op_records=self._op_records(), layout=self.layout,
                                      layer_ops={p: op for op, p in self.record_paths.items()}, nodes=list(self.nodes))
        return plan

    def _input_names(self) -> dict[str, str]:
        """Keras names of the model's inputs (``keras.Input(..., name="image")``) → forward's parameter."""
        return {self.input_keras_names[p]: p for p in self.inputs if p in self.input_keras_names}

    def _layer_name(self, node: _Node) -> str | None:
        """The literal ``name=`` of the layer whose call made ``node``."""
        where = node.where
        if not isinstance(where, cst.Call):
            return None
        made = where.func if isinstance(where.func, cst.Call) else None
        if isinstance(where.func, cst.Name):
            layer = self.env.get(where.func.value)
            made = layer.call if isinstance(layer, _Layer) and isinstance(layer.call, cst.Call) else None
        name = _lit_of(made, "name") if made is not None else NOT_LITERAL
        return name if isinstance(name, str) else None

    def _taps(self, stmts: list, roles: dict[int, str], generated: dict[int, list]) -> dict:
        """The named layers whose output a model built below may read (``keras.Model(m.input,
        m.get_layer("dense2").output)``, a feature extractor sharing the weights): each bound by a forward statement
        ``name = <its only call>`` of a straight-line forward (no loop, no if kept, no dict of inputs above it)."""
        if self.loops or self.dict_input is not None:
            return {}
        nchw = self.layout == "nchw"
        params = {id(t.node.op): p for p, t in self.inputs.items()}
        taps: dict[str, tuple[int, str, frozenset]] = {}
        for i in sorted(roles):
            role = roles[i]
            if role == "forward" and not isinstance(stmts[i], cst.SimpleStatementLine):
                break
            if role == "unrolled" and not all(isinstance(g, cst.SimpleStatementLine) for g in generated.get(i, [])):
                break
            if i not in self.tap_candidates or role != "forward":
                continue
            target, t = self.tap_candidates[i]
            node = t.node
            if node.op.kind != "layer" or sum(n.op is node.op for n in self.nodes) != 1:
                continue  # (a shared layer's output: Keras's get_layer(...).output refuses it too)
            name = self._layer_name(node)
            if name is None or name in taps:
                continue
            needed = _inputs_reached(node, params)
            back = nchw and not t.last and (t.shape is None or len(t.shape) > 1)
            taps[name] = (i, target + (_to_last(t.shape) if back else ""), needed)
        return taps

    def _var_taps(self, stmts: list, roles: dict[int, str], generated: dict[int, list],
                  m_index: int) -> dict[str, tuple[int, _Tensor, frozenset]]:
        """The tensors of this module-level model that a model below may read by their names (chapter07's
        ``new_model = keras.Model([title, text_body, tags], [priority, department, difficulty])``, keras-io's
        transformer over ``encoder_outputs``): name → (index of the forward statement ``name = <expr>`` that last
        binds it, its tensor, the inputs it depends on), for a straight-line forward (no loop, no if kept, no dict of
        inputs) that keeps Keras's layout; a name any other statement of the model binds after it is not one."""
        if self.var_taps is not None:
            return self.var_taps
        taps: dict[str, tuple[int, _Tensor, frozenset]] = {}
        self.var_taps = taps
        if self.loops or self.dict_input is not None or self.fn is not None:
            return taps
        params = {id(t.node.op): p for p, t in self.inputs.items()}
        for i in sorted(roles):
            if i >= m_index:
                break
            role = roles[i]
            if role not in ("forward", "unrolled", "input", "layer", "config"):
                continue
            st = stmts[i]
            bound = set(_assigned(st)) | _names_bound_in(st)
            for g in generated.get(i, []):
                bound |= set(_assigned(g)) | _names_bound_in(g)
            for n in bound:
                taps.pop(n, None)
            if role != "forward" or i not in self.tap_candidates or not isinstance(st, cst.SimpleStatementLine):
                continue
            target, t = self.tap_candidates[i]
            if self.env.get(target) is not t:
                continue
            taps[target] = (i, t, _inputs_reached(t.node, params))
        return taps

    def _import_tensors(self, stmts: list, lo: int, m_index: int, read: set[str], where: cst.CSTNode) -> None:
        """A module-level model reading tensors a model above bound (``_var_taps``; chapter07's new_model over
        ``priority, department`` and ``features``, keras-io's transformer over the encoder's ``encoder_outputs``):
        they are that model's layers on the same inputs, shared as Keras shares them. This model's inputs that model
        reads are its very inputs (one graph, so ``model.layers`` orders as Keras's); forward's first line computes
        the tensors by a method of the model above (``upto_priority_department``, on ``self.<model>``, that very
        module), and the records of that model's layers the outputs reach are this model's too, under that
        attribute."""
        source = self.source_body if len(self.source_body) == len(stmts) else stmts
        wanted: dict[str, list[tuple[str, str]]] = {}  # model above → (this model's name, that model's) read
        for name in sorted(read):
            j = next((j for j in range(lo - 1, -1, -1) if not isinstance(source[j], (cst.FunctionDef, cst.ClassDef))
                      and name in (_names_bound_in(source[j]) | set(_assigned(source[j])))), None)
            if j is None:
                continue
            base = next((b for b, info in self.prior_models.items() if name in info.get("var_taps", {})
                         and info["var_taps"][name][0] == j and not info.get("from_builder")), None)
            if base is not None:
                wanted.setdefault(base, []).append((name, name))
        for i in range(lo, m_index):  # `features = model.layers[4].output` (chapter07): that layer's output
            st = stmts[i]
            small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)):
                continue
            ref = _layer_output_ref(small.value)
            info = self.prior_models.get(ref[0]) if ref is not None else None
            if info is None or "var_taps" not in info or info.get("from_builder") or ref[0] in self.local:
                continue
            op = info["layer_ops"].get(f"layers[{ref[1]}]")
            names = [n for n, (_, t, _) in info["var_taps"].items() if op is not None and id(t.node.op) == op]
            if len(names) != 1 or sum(id(n.op) == op for n in info["nodes"]) != 1:
                self.error(small.value, f"{code(small.value)}: the output of a layer of {ref[0]}, a model above: "
                                        "followed for a layer called once whose output a statement of its forward binds "
                                        "to a name no later statement of it binds again; not this one")
                continue
            wanted.setdefault(ref[0], []).append((small.targets[0].target.value, names[0]))
            self.tap_statements.add(id(st))
            self.tap_nodes.append(small.value)
        if len(wanted) > 1:  # (one call each: a dropout between would draw two masks where Keras draws one)
            self.error(where, f"{', '.join(n for pairs in wanted.values() for n, _ in pairs)}: tensors of several "
                              f"models above ({', '.join(wanted)}) read by one model: fwport follows a model reading "
                              "the tensors of one model above (computed by one call of it)")
            return
        for base, pairs in wanted.items():
            info = self.prior_models[base]
            names = [n for _, n in pairs]
            plan = info["plan"]
            taps = info["var_taps"]
            needed = set().union(*(taps[n][2] for n in names))
            if self.layout != info.get("layout", "keep"):
                self.error(where, f"{', '.join(names)}: tensors of {base}, a model above, read by a model whose layout "
                                  "differs from that model's (one converted to channels-first, the other keeping "
                                  "Keras's): not followed (both models must have the same layout)")
                continue
            missing = sorted(n for n in needed if n not in self.inputs or n not in info["input_tensors"])
            if missing:
                self.error(where, f"{', '.join(names)}: tensors of {base}, a model above, computed from "
                                  f"{', '.join(missing)}, which this model does not take as its input")
                continue
            for p in needed:  # the same Input: one graph, as in Keras
                old = self.inputs[p]
                t = info["input_tensors"][p]
                self.input_ops = [t.node.op if o is old.node.op else o for o in self.input_ops]
                self.inputs[p] = t
                if self.env.get(p) is old:
                    self.env[p] = t
            for m, n in pairs:
                self.env[m] = taps[n][1]
            params = [p for p in plan.forward_params if p in needed]
            method = "upto_" + "_".join(names)
            if method not in plan.tap_methods:  # (taken back if this model is left as written: _give_up)
                plan.tap_methods[method] = (params, max(taps[n][0] for n in names), ", ".join(names))
                self.added_taps.append((plan, method))
            attr = base if base not in self.inputs else f"{base}_model"
            self.carried[base] = attr
            mine = [m for m, _ in pairs]
            self.import_lines.append(f"{', '.join(mine)} = self.{attr}.{method}({', '.join(params)})")
            for op_id, recs in info.get("op_records", {}).items():
                self.imported[op_id] = [(rest, f"{attr}.{target}", rule, variant, symbols)
                                        for rest, target, rule, variant, symbols in recs]
            self.ctx.report(Severity.INFO, "idiom-replaced", f"{', '.join(names)}: tensors of {base}, a model above "
                            f"(its layers shared, as in Keras): this model's forward computes them by "
                            f"{base}.{method}(...), the statements of {plan.class_name}'s forward up to them, on that "
                            "very module", where)

    def _shared_inputs(self, stmts: list, lo: int, m_index: int, outside: set[int]) -> None:
        """A module-level model reading a ``keras.Input`` bound above its own statements (the input of a model
        above, shared: ``actor = keras.Model(obs, logits)``, ``critic = keras.Model(obs, value)``): an input of
        this model too (forward's parameter; the Input statement is the model above's)."""
        read: set[str] = set()
        bound: set[str] = set()
        for i in range(lo, m_index + 1):
            if i in outside or isinstance(stmts[i], (cst.FunctionDef, cst.ClassDef)):
                continue
            read |= _read_before_bound(stmts[i], set(_names_in(stmts[i])) - bound)
            bound |= _names_bound_in(stmts[i]) | set(_assigned(stmts[i]))
        source = self.source_body if len(self.source_body) == len(stmts) else stmts
        for name in sorted(read):
            j = next((j for j in range(lo - 1, -1, -1) if not isinstance(source[j], (cst.FunctionDef, cst.ClassDef))
                      and name in (_names_bound_in(source[j]) | set(_assigned(source[j])))), None)
            st = source[j] if j is not None else None
            small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
            if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                    and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Call) \
                    and self.ctx.imports.resolve(small.value.func) == INPUT:
                mark = len(self.ctx.pending)
                errors = self.errors
                self._input(name, small.value)
                if self.errors == errors:
                    del self.ctx.pending[mark:]  # (said for the model above, where the statement is)
        if self.prior_models:
            self._import_tensors(stmts, lo, m_index, read, stmts[m_index])

    def _in_later_model(self, stmts: list, m_index: int, i: int) -> bool:
        """Statement ``i``, below this module-level model, is one of the statements a model below depends on."""
        after = [r for r in self.later_rows if r >= i]
        if not after:
            return False
        lo = max([m_index, *(r for r in self.later_rows if r < i)]) + 1
        return i == after[0] or i not in _outside_slice(stmts, lo, after[0])

    def _give_up(self, stmts: list, model_call: cst.Call | None) -> None:
        """The model is left as written: every call of its statements settled (no half translation)."""
        ctx = self.ctx
        for plan, method in self.added_taps:  # (no model calls them)
            plan.tap_methods.pop(method, None)
        self.added_taps = []
        drop_undone_findings(ctx, getattr(self, "mark", len(ctx.pending)))  # its pinned defaults, lazy sizes...
        if hasattr(self, "imports_mark"):  # (the imports its layers' torch modules asked for: none is written)
            ctx.needed_imports.intersection_update(self.imports_mark)
        for p in ctx.pending[getattr(self, "mark", len(ctx.pending)):]:  # on copies (pinned values): the source's
            p.node = self.origin.get(id(p.node), (None, p.node))[1]
        if model_call is not None:
            model_call = self.origin.get(id(model_call), (None, model_call))[1]
            ctx.report(Severity.ERROR, "unsupported-construct", "this functional model is left as written: fwport "
                       "cannot follow all of it (the errors above say where); translate it by hand as an nn.Module "
                       "whose forward calls the layers in order", model_call)

        calls = ctx.analyses.setdefault("functional_calls", {})
        # (an if decided here: the branch it does not take too; a statement whose sizes were written in: as it was)
        for s in [*stmts, *self.decided_ifs, *self.sized_out]:
            # (a function defined in the builder is its helper: Keras code with it)
            if (not isinstance(s, (cst.FunctionDef, cst.ClassDef)) or isinstance(s, cst.FunctionDef) and self.fn is not None) \
                    and (self.fn is not None or self._graph_stmt(s)):
                scan(s, _SettleGraphCalls(ctx))
                todo, seen = list(_names_in(s) & set(self.helpers)), set()
                while todo:  # its helpers are left with it, and the helpers they call
                    name = todo.pop()
                    if name not in seen:
                        seen.add(name)
                        todo += _names_in(self.helpers[name].body) & set(self.helpers)
                        calls.setdefault(name, 0)
        return None

    def _graph_stmt(self, stmt) -> bool:
        names = _names_in(stmt)
        return bool(names & (set(self.env) | set(self.inputs))) or any(
            isinstance(n, cst.Call) and (self.ctx.imports.resolve(n.func) == INPUT or _is_model_func(n.func, self.ctx))
            for n in _calls(stmt))

    def _adapt_before(self, stmts: list, i: int, m_index: int, used: set[str]) -> _Layer | None:
        """The Normalization layer that ``stmts[i]``, a module-level ``normalizer.adapt(data)`` above the model's
        statement, adapts, when moving it right after ``model = keras.Model(...)`` as ``model.<attr>.adapt(data)``
        computes the same statistics: the statement is the call alone, it reads no other name of the graph, and
        neither its names nor the model's are bound again up to the model's statement (Keras's symbolic calls in
        between do not read the statistics). Else None (the caller's error stands)."""
        stmt = stmts[i]
        layer = self._adapted_layer(stmt, used)
        target = self._model_target(stmts[m_index])
        if layer is None or target is None:
            return None
        read = _names_in(stmt)
        for later in stmts[i + 1:m_index + 1]:
            bound = set(_assigned(later)) | _names_bound_in(later)
            if later is not stmts[m_index] and target in bound | _names_in(later):
                return None  # (the model's name, used or bound in between)
            if bound & read:
                return None
        return layer

    def _adapt_after(self, stmts: list, i: int, m_index: int, used: set[str]) -> _Layer | None:
        """The Normalization layer that ``stmts[i]``, a module-level ``normalizer.adapt(data)`` below the model's
        statement (the name still the graph's layer), adapts, when ``model.<attr>.adapt(data)`` in its place is the
        same call: the model's name not bound again in between. Else None (the caller's error stands)."""
        layer = self._adapted_layer(stmts[i], used)
        target = self._model_target(stmts[m_index])
        if layer is None or target is None:
            return None
        if any(target in set(_assigned(s)) | _names_bound_in(s) for s in stmts[m_index + 1:i]):
            return None
        return layer

    def _adapted_layer(self, stmt, used: set[str]) -> _Layer | None:
        """``stmt`` is ``name.adapt(...)`` alone, ``name`` (the only graph name it reads) a Normalization layer of
        the model (not a helper's, not one made in a loop): that layer."""
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call)):
            return None
        func = stmt.body[0].value.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "adapt" and isinstance(func.value, cst.Name)
                and used == {func.value.value}):
            return None
        layer = self.env.get(func.value.value)
        if not (isinstance(layer, _Layer) and layer.kind == "rule" and not layer.prefix and not layer.in_loop
                and any(n.rsplit(".", 1)[-1] == "Normalization" for n in getattr(layer.rule, "names", ()))):
            return None
        return layer

    def _adapt_lines(self, stmts: list, adapts: dict[int, _Layer], m_index: int) -> dict[int, cst.BaseStatement]:
        """The statements :meth:`_adapt_before` moves below the model, as the translation writes them; an error
        where the layer is not a module of the class (never called on the way to the outputs)."""
        target = self._model_target(stmts[m_index])
        out = {}
        for i, layer in sorted(adapts.items()):
            stmt = stmts[i]
            call = stmt.body[0].value
            if not layer.attr or layer.module is None:
                self.error(stmt, f"{code(call.func.value)}: a Normalization layer adapted above the functional model "
                                 "that is not a module of the translated model (never called on the way to its "
                                 "outputs): only the model is available in the translation")
                continue
            new = call.with_changes(func=cst.Attribute(
                cst.Attribute(cst.Name(target), cst.Name(layer.attr)), cst.Name("adapt")))
            if i > m_index:  # in place: only the layer's name changes
                out[i] = stmt.with_changes(body=[stmt.body[0].with_changes(value=new)])
                self.ctx.report(Severity.INFO, "adapt-moved", f"{code(call)} → {code(new)}: the layer is the "
                                f"translated model's module {layer.attr} (Keras adapts the same layer object)",
                                self.origin.get(id(stmt), (None, stmt))[1])
                continue
            out[i] = stmt.with_changes(body=[stmt.body[0].with_changes(value=new)], leading_lines=[])
            self.ctx.report(Severity.INFO, "adapt-moved", f"{code(call)}: moved below `{target} = ...` as "
                            f"{code(new)}: the layer is the translated model's module {layer.attr} there (Keras "
                            "adapts the same layer object; its symbolic calls in between do not read the "
                            "statistics)", self.origin.get(id(stmt), (None, stmt))[1])
        return out

    def _model_target(self, stmt) -> str | None:
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign):
            t = stmt.body[0].targets
            if len(t) == 1 and isinstance(t[0].target, cst.Name):
                return t[0].target.value
        return None

    def _count(self, stmts: list, times: int) -> None:
        """How many attributes each name base will have (a loop that is unrolled counts its iterations)."""
        for s in stmts:
            if isinstance(s, cst.For):
                values = self._loop_values(s)
                self._count(list(s.body.body), times * (len(values) if values is not None else 1))
                continue
            for c in _calls(s):
                if isinstance(c.func, cst.Call):  # an inline layer: its attribute's name
                    inner = c.func
                    kind, rule = self._layer_kind(inner.func)
                    if kind in ("rule", "merge", "seq", "user"):
                        base = self._attr_base(inner, rule if kind == "rule" else kind)
                        self.base_counts[base] = self.base_counts.get(base, 0) + times
                elif isinstance(c.func, cst.Name) and c.func.value in self.helpers:
                    key = f"helper:{c.func.value}"
                    self.base_counts[key] = self.base_counts.get(key, 0) + times

    def _loop_values(self, loop: cst.For) -> list | None:
        """The values a ``for`` statement iterates over where the model is built, or None."""
        return self._iter_values(loop.iter)

    def _iter_values(self, it: cst.BaseExpression) -> list | None:
        """The values iterating over ``it`` gives where the model is built (a literal list, module
        constants, range(known ints), enumerate(one of these)), or None."""
        if isinstance(it, cst.Call) and dotted_text(it.func) == "enumerate" and "enumerate" not in self.local \
                and it.args and not it.args[0].star and it.args[0].keyword is None and len(it.args) <= 2:
            start = 0
            if len(it.args) == 2:
                a = it.args[1]
                start = literal_value(a.value, None) if not a.star and (
                    a.keyword is None or a.keyword.value == "start") else None
                if not is_int(start):
                    return None
            inner = self._iter_values(it.args[0].value)
            return None if inner is None else [(int(start) + i, v) for i, v in enumerate(inner)]
        lit = literal_value(it, NOT_LITERAL)
        if isinstance(lit, (list, tuple)):
            return list(lit)
        held = self._held_items(it)
        if held is not None:  # for down in down_stack, zip(up_stack, reversed(skips[:-1])): names bound here
            return held
        known_ints = self.sizes.constant(it) if isinstance(it, (cst.List, cst.Tuple)) else None
        if isinstance(known_ints, tuple):  # (projection_dim * 2, projection_dim): module constants
            return list(known_ints)
        if isinstance(it, cst.Call) and dotted_text(it.func) == "range" and 1 <= len(it.args) <= 3 \
                and "range" not in self.local and all(a.keyword is None and not a.star for a in it.args):
            bounds = [self.known_ints[a.value.value] if isinstance(a.value, cst.Name) and a.value.value in self.known_ints
                      else self.sizes.dim(a.value) for a in it.args]
            if all(is_int(b) for b in bounds):
                return list(range(*(int(b) for b in bounds)))
        return None

    def _held_items(self, it: cst.BaseExpression) -> list | None:
        """The items of a list of layers or tensors the pass holds (:attr:`layer_lists`, :attr:`tensor_lists`), as
        names, through ``reversed(...)``, ``list(...)``, a slice of literal ints and ``zip(...)`` (tuples, as
        long as the shortest); None for anything else."""
        if isinstance(it, cst.Name):
            held = self.layer_lists.get(it.value, self.tensor_lists.get(it.value))
            return None if held is None else [cst.Name(n) for n in held]
        if isinstance(it, cst.Subscript) and len(it.slice) == 1 and isinstance(it.slice[0].slice, cst.Slice):
            sl = it.slice[0].slice
            bounds = [None if b is None else literal_value(b, NOT_LITERAL) for b in (sl.lower, sl.upper, sl.step)]
            inner = self._held_items(it.value)
            if inner is None or not all(b is None or is_int(b) for b in bounds) or bounds[2] == 0:
                return None
            return inner[slice(*bounds)]
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name)
                and it.func.value in ("reversed", "list", "zip") and it.func.value not in self.local
                and it.args and all(a.keyword is None and not a.star for a in it.args)):
            return None
        parts = [self._held_items(a.value) for a in it.args]
        if any(p is None for p in parts):
            return None
        if it.func.value == "zip":
            return [tuple(x) for x in zip(*parts)]
        if len(parts) != 1:
            return None
        return list(reversed(parts[0])) if it.func.value == "reversed" else parts[0]

    def _only_iterated(self, name: str, appended: bool) -> bool:
        """``name`` (a list bound in the builder) is read only where :meth:`_held_items` reads it (a for statement's
        values, a rebinding of ``name`` itself) and, with ``appended``, by ``name.append(...)``: nothing else
        sees the list, whose items exist only in the pass (the modules in __init__, the tensors in forward)."""
        if self.fn is None:
            return False
        uses = _ListReads(name)
        self.fn.body.visit(uses)
        return uses.ok(appended)

    def _held_list(self, target: str, value: cst.BaseExpression, stmt) -> str | None:
        """``down_stack = [downsample(64, 4), ...]`` (each item a layer of the model, the list only iterated):
        one layer per item, bound to ``down_stack_<i>``; ``skips = []`` whose items are tensors appended to it,
        and ``skips = reversed(skips[:-1])`` of such a list: its items as names. The statement's role, or None
        (not such a list: followed as before)."""
        if target in self.tensor_lists or target in self.layer_lists:  # skips = reversed(skips[:-1])
            held = self._held_items(value)
            if held is None or not all(isinstance(x, cst.Name) for x in held):
                self.error(stmt, f"{target}: a list of the model's {'tensors' if target in self.tensor_lists else 'layers'}"
                                 " bound again to a value fwport does not follow (reversed, list, zip and literal "
                                 "slices of it only)")
                return "layer"
            (self.tensor_lists if target in self.tensor_lists else self.layer_lists)[target] = [x.value for x in held]
            return "layer"
        if not (isinstance(value, (cst.List, cst.Tuple)) and value.elements and self.fn is not None
                and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Call) for e in value.elements)):
            return None
        calls = [e.value for e in value.elements]
        if not all(self._layer_kind(c.func)[0] not in (None, "submodel", "modseq", "builder", "model", "norule",
                                                      "vocab")
                   or self._seq_factory_of(c) is not None for c in calls) or not self._only_iterated(target, False):
            return None
        names = self._fresh_names(target, len(calls))
        for n, c in zip(names, calls):
            seq = self._seq_factory_of(c)
            try:
                self.env[n] = self._seq_layer(c, self.helpers[c.func.value], seq, n) if seq is not None \
                    else self._new_layer(c, n)
            except _Refused as r:
                self._refused(r)
                return "layer"
        self.layer_lists[target] = names
        return "layer"

    def _tensor_dict(self, stmt, target: str, value: cst.Dict) -> str:
        """``outputs = {"pitch": layers.Dense(128)(x), "step": step}`` (literal string keys, values tensors of the
        model): a name for a dict of tensors, for keras.Model(inputs, outputs), which then returns that dict (keys
        as Keras gives them). A value that is not a name of a tensor is bound to one first (the key where it is a
        free name), each a statement of forward, in the dict's order (the order Keras calls its layers in)."""
        taken = set(self.env) | set(self.local) | set(self.inputs) | _names_in(
            self.fn if self.fn is not None else cst.Module(body=list(self.source_body)))
        elements, out = [], []
        for e in value.elements:
            if isinstance(e.value, cst.Name) and isinstance(self.env.get(e.value.value), _Tensor):
                elements.append(e)
                continue
            key = _string_key(e.key)
            name = key if key.isidentifier() and not iskeyword(key) and key not in taken else None
            k = 0
            while name is None or name in taken:
                name, k = f"{target}_{k}", k + 1
            taken.add(name)
            st = self._copy(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], e.value)]),
                            _Substitute({}))
            errors = self.errors
            role = self._statement(st, False) if self._is_graph_expr(e.value) else None
            if role != "forward" or not isinstance(self.env.get(name), _Tensor):
                if self.errors == errors:
                    self.error(e.value, f"{code(e.value)}: a value of a dict of the model's tensors that is not a "
                                        "tensor of the model (fwport follows a dict whose values are all tensors)")
                return "forward"
            st = self.aug.pop(id(st), st)
            out.append(_clean(rewrite(st, _Replace(self.replace), fresh=True)).with_changes(leading_lines=[]))
            elements.append(e.with_changes(value=cst.Name(name)))
        self.lists[target] = value.with_changes(elements=elements)
        self.env[target] = _Layer(value, None, "list", var=target)  # not a tensor: refused elsewhere
        self.env[target].op = _Op("list", False)
        if not out:
            return "layer"
        self.generated[id(stmt)] = out
        return "unrolled"

    def _is_graph_expr(self, node: cst.BaseExpression) -> bool:
        """``node`` reads a tensor of the model or calls a layer on one (it is computed in forward)."""
        return any(isinstance(self.env.get(n), _Tensor) for n in _names_in(node)) \
            or any(self._is_graph_call(c) for c in _calls(node))

    def _fresh_names(self, base: str, count: int) -> list[str]:
        taken = set(self.env) | set(self.local) | (_names_in(self.fn) if self.fn is not None else set())
        taken |= {n for names in (*self.layer_lists.values(), *self.tensor_lists.values()) for n in names}
        out = []
        i = 0
        while len(out) < count:
            n = f"{base}_{i}"
            if n not in taken:
                out.append(n)
                taken.add(n)
            i += 1
        return out

    def _appended(self, stmt, small) -> str | None:
        """``skips.append(x)``, ``x`` a tensor of the model and ``skips`` a list bound empty in the builder and read
        only as :meth:`_only_iterated` says: ``skips_<k> = x`` in forward, the list's k-th item (None: not such a
        statement)."""
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                and isinstance(small.value.func, cst.Attribute) and small.value.func.attr.value == "append"
                and isinstance(small.value.func.value, cst.Name) and len(small.value.args) == 1
                and not small.value.args[0].star and small.value.args[0].keyword is None
                and isinstance(small.value.args[0].value, cst.Name)
                and isinstance(self.env.get(small.value.args[0].value.value), _Tensor)):
            return None
        lst, item = small.value.func.value.value, small.value.args[0].value.value
        if lst not in self.tensor_lists:
            if lst not in self.local or lst in self.env or not self._only_iterated(lst, True):
                return None
            self.tensor_lists[lst] = []
        name = self._fresh_names(lst, 1)[0]
        self.tensor_lists[lst].append(name)
        self.env[name] = self.env[item]
        self.aug[id(stmt)] = stmt.with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(name))], cst.Name(item))])
        return "forward"

    def _unroll(self, loop: cst.For) -> list | None:
        """A ``for`` statement over values known here, written out once per value: its statements
        (copies, with the loop variable's value in place), followed; None when it cannot be."""
        values = self._loop_values(loop)
        self.generating = True
        try:
            if values is None and loop.orelse is None \
                    and isinstance(loop.body, cst.IndentedBlock) and not self.runtime_loop:
                return self._runtime_loop(loop)
            return self._unroll_values(loop, values)
        finally:
            self.generating = False

    def _runtime_loop(self, loop: cst.For) -> list | None:
        """A ``for`` statement over a value known only when the model is built (a builder parameter:
        ``for _ in range(num_blocks)``, ``for units in mlp_units``): the same loop builds an
        ``nn.ModuleList`` per layer of its body in ``__init__``, and forward runs over the modules. Its body
        is followed once; a tensor the loop carries keeps its shape from one pass to the next, or, where
        the loop variable sizes the layers, only its rank (the layers after it are then lazy)."""
        targets = {n.value for n in _name_nodes(loop.target)}
        body_names = set().union(*(_names_in(st) for st in loop.body.body))
        carried = {n for st in loop.body.body for n in _assigned(st)
                   if isinstance(self.env.get(n), _Tensor)}
        entry = {n: self.env[n] for n in carried}
        sized_by_loop = bool(targets & body_names)
        if sized_by_loop:  # other sizes each pass: only the rank is known
            for n, t in entry.items():
                self.env[n] = _Tensor(tuple(None for _ in t.shape) if t.shape is not None else None, t.node, t.flat,
                                      t.last)
        self.runtime_loop = True
        mark_layers, mark_init = len(self.layers), len(self.pending_init)
        mark_nodes, mark_sub = len(self.nodes), len(self.sub_layers)
        try:
            out = self._unroll_values(loop, [_AS_WRITTEN])
        finally:
            self.runtime_loop = False
        if out is None:
            return None
        for n, t in entry.items():
            after = self.env.get(n)
            if not isinstance(after, _Tensor) or (after.flat or t.flat) is not None:
                self.error(loop, f"{n}: a tensor a for statement over a run-time value carries must stay a tensor")
                return None
            if not sized_by_loop and after.shape != t.shape and after.shape is not None and t.shape is not None \
                    and len(after.shape) == len(t.shape) and all(a == b or b is None
                                                                 for a, b in zip(after.shape, t.shape)):
                # a size unknown before the loop (after another one) that the body makes known: the body was
                # followed with it unknown (lazy modules, right for every pass); after the loop, still unknown
                # (no pass, or several)
                self.env[n] = _Tensor(t.shape, after.node, None, after.last)
                continue
            if (not sized_by_loop and after.shape != t.shape) or (sized_by_loop and (
                    (after.shape is None) != (t.shape is None) or (t.shape is not None and len(after.shape) != len(t.shape)))):
                self.error(loop, f"{n} changes shape in this for statement over a value known only at run time "
                                 f"({t.shape} → {after.shape}): fwport builds one module per pass from the same code, "
                                 "so the tensors the loop carries must keep their shape (or their rank, where the "
                                 "loop variable sizes the layers)")
                return None
            if sized_by_loop:  # after no pass or several: the rank
                self.env[n] = _Tensor(after.shape, after.node, None, after.last)
        used = set().union(*(_names_in(st) for st in out)) if out else set()
        if targets & used:
            self.error(loop, f"the loop variable {', '.join(sorted(targets & used))} is read by the model's forward "
                             "pass inside a for statement over a run-time value: not followed")
            return None
        layers = [x for x in self.layers[mark_layers:] if x.attr]
        inits = self.pending_init[mark_init:]
        del self.pending_init[mark_init:]
        if not layers or len(inits) != len(layers):
            self.error(loop, "a for statement over a run-time value is followed when it creates a layer at each "
                             "statement that calls one")
            return None
        modlist = self.ctx.spell_text("torch.nn.ModuleList")
        taken = set().union(*(_names_in(st) for st in self.fn.body.body)) if self.fn is not None else set()
        names = {}
        for x in layers:
            v = x.attr if x.attr not in taken and x.attr not in targets else f"{x.attr}_"
            names[x.attr] = v
        head = [f"self.{x.attr} = {modlist}()" for x in layers]
        appends = []
        for line in inits:
            attr, _, value = line.partition(" = ")
            appends.append(f"    {attr}.append({value})")
        self.pending_init += [*head, "\n".join([f"for {code(loop.target)} in {code(loop.iter)}:", *appends])]
        for x in layers:
            x.in_loop = True
        for x in self.sub_layers[mark_sub:]:  # a helper's layers: below its instance, one per pass
            head_attr, _, rest = x.prefix.partition(".")
            x.prefix = f"{head_attr}.*.{rest}"
        self.loops.append((loop, mark_nodes, len(self.nodes),
                           {id(x) for x in [*self.layers[mark_layers:], *self.sub_layers[mark_sub:]]}))
        sub = _LoopModules({x.attr: names[x.attr] for x in layers})
        body = [rewrite(st, sub, fresh=True) for st in out]
        mods = [f"self.{x.attr}" for x in layers]
        header = (f"for {names[layers[0].attr]} in {mods[0]}:" if len(layers) == 1 else
                  f"for {', '.join(names[x.attr] for x in layers)} in zip({', '.join(mods)}):")
        text = header + "\n" + "".join("    " + ln + "\n" for st in body
                                        for ln in code(st).rstrip("\n").split("\n"))
        return [statement(text)]

    def _runtime_if_test(self, st: cst.If) -> bool:
        """``if use_norm:`` in a builder, on its parameters only (not rebound in it), that the file calls with
        other values (a parameter every call gives one value is pinned instead: :func:`_pinned_params`):
        followed by :meth:`_runtime_if`."""
        if self.fn is None or self.helper_call is not None or self.runtime_loop or self.generating:
            return False
        kinds = _StatementKinds()
        scan(st, kinds)
        if kinds.exits:
            return False
        params = self.fn.params
        names = {p.name.value for p in [*params.params, *params.kwonly_params]}
        read = _names_in(st.test) - {"True", "False", "None"}
        rebound = set().union(*(_names_bound_in(s) | set(_assigned(s)) | _stepped_names(s) for s in self.fn.body.body))
        return bool(read) and read <= names and not (read & (rebound | set(self.env) | self.pinnable)) \
            and not _calls(st.test)

    def _runtime_if(self, st: cst.If) -> list | None:
        """An ``if`` on builder parameters the file gives several values (``if positional_encoding:``): the
        class keeps the parameter and the ``if`` (and its ``elif`` / ``else``), in ``__init__`` (the layers of each
        branch, created only then) and in ``forward`` (their calls, the parameter read as ``self.<name>``), as
        one writes a configurable module by hand. Each branch is followed once, as a for statement over a
        run-time value's body (layer calls on tensors only); a tensor the branches bind keeps its rank after
        the if (the sizes they make differ are unknown there: lazy modules), and one only some of them bind is
        not read after it. Each branch's layers are recorded as a loop of no pass or one (``calls[s][*][j]``:
        fwport verify counts the passes on the built model)."""
        where = self.origin.get(id(st), (None, st))[1]
        orelse = st.orelse
        chained = isinstance(orelse, cst.If)  # elif: an if of its own in the else clause, written back as elif
        if (chained and not self._runtime_if_test(orelse)) or not isinstance(st.body, cst.IndentedBlock) or (
                orelse is not None and not chained and not isinstance(orelse.body, cst.IndentedBlock)):
            self.error(where, f"`if {code(st.test)}:` on a parameter of the builder that the file calls with several "
                              "values is followed with else and elif clauses on such parameters (the layers of each "
                              "created in __init__ and called in forward under the same test), not an if inside a "
                              "branch or an elif on other values: translate this model by hand")
            return None
        entry = dict(self.env)
        test_code = code(st.test)
        branches = []  # per branch: (its forward statements, its __init__ lines, env after it)
        for node, stmts in [(st, st.body.body), *([(orelse, [] if chained else orelse.body.body)]
                                                  if orelse is not None else [])]:
            self.env.clear()
            self.env.update(entry)
            mark_layers, mark_init = len(self.layers), len(self.pending_init)
            mark_nodes, mark_sub = len(self.nodes), len(self.sub_layers)
            # (an elif: followed as an if of its own, which records its branches' layers itself)
            out = self._runtime_if(node) if node is orelse and chained else self._branch(stmts, test_code)
            if out is None:
                return None
            inits = self.pending_init[mark_init:]
            del self.pending_init[mark_init:]
            made = {id(x) for x in [*self.layers[mark_layers:], *self.sub_layers[mark_sub:]]}
            # (tf.keras: x * 2.0 is a layer too; the if itself always, for its info finding)
            if (made or any(n.op.is_layer for n in self.nodes[mark_nodes:]) or node is st) \
                    and not (node is orelse and chained):
                self.loops.append((node, mark_nodes, len(self.nodes), made))
            branches.append((out, inits, dict(self.env)))
        if orelse is None:
            branches.append(([], [], dict(entry)))
        if not branches[0][0] and not branches[1][0]:
            self.error(where, f"`if {test_code}:` creates layers but calls none on the model's tensors")
            return None
        (out_a, init_a, env_a), (out_b, init_b, env_b) = branches
        self.env.clear()
        self.env.update(entry)
        later = self._read_after(st)
        for n in set(env_a) | set(env_b):
            before, a, b = entry.get(n), env_a.get(n), env_b.get(n)
            if a is before and b is before:
                continue
            if a is None or b is None:
                if later is None or n in later:
                    self.error(where, f"{n}: bound in one branch of `if {test_code}:` only and read after it: in the "
                                      "models built without that branch it does not exist; bind it before the if "
                                      "statement (or in every branch)")
                    return None
                continue
            # (a layer class's output keeps Keras's layout: another layout only in a channels-first graph)
            if not isinstance(a, _Tensor) or not isinstance(b, _Tensor) or (a.flat or b.flat) is not None \
                    or (a.last != b.last and self.layout == "nchw"):
                self.error(where, f"{n}: changed in `if {test_code}:`, not followed (only tensors of the model's "
                                  "layout, bound in every branch)")
                return None
            unknown = (a.shape is None or b.shape is None) and self.layout != "nchw"
            if a.shape != b.shape and not unknown and (a.shape is None or b.shape is None
                                                       or len(a.shape) != len(b.shape)):
                self.error(where, f"{n} has another rank after each branch of `if {test_code}:` ({a.shape}, "
                                  f"{b.shape}): the layers after it would differ by the branch; not followed")
                return None
            # (a layer class's output, of a shape not known here, in a graph that keeps Keras's layout: unknown
            # after the if too, as after the layer: what needs its rank is refused there)
            shape = a.shape if a.shape == b.shape else None if unknown else tuple(
                x if x == y else None for x, y in zip(a.shape, b.shape))
            node = a.node if a.node is b.node else self._node(_Op("op", False), [a.node, b.node])
            self.env[n] = _Tensor(shape, node, None, a.last and b.last)
        negated = f"not {test_code}" if isinstance(st.test, cst.Name) else f"not ({test_code})"

        def block(lines_a: list[str], lines_b: list[str]) -> list[str]:
            if not lines_a and not lines_b:
                return []
            if not lines_a:
                return [f"if {negated}:", *("    " + ln for ln in lines_b)]
            if chained and lines_b and lines_b[0].startswith("if "):  # the elif's own if statement
                return [f"if {test_code}:", *("    " + ln for ln in lines_a), "el" + lines_b[0], *lines_b[1:]]
            return [f"if {test_code}:", *("    " + ln for ln in lines_a),
                    *(["else:", *("    " + ln for ln in lines_b)] if lines_b else [])]

        split = [ln for line in init_a for ln in line.split("\n")], [ln for line in init_b for ln in line.split("\n")]
        init = block(*split)
        if init:
            self.pending_init.append("\n".join(init))
        for n in sorted(_names_in(st.test) - {"True", "False", "None"}):
            self.carried.setdefault(n, self._value_attr(n))
        test = rewrite(st.test, _Substitute({n: expr(f"self.{attr}") for n, attr in self.carried.items()
                                             if n in _names_in(st.test)}), fresh=True)
        test_code, negated = code(test), (f"not {code(test)}" if isinstance(test, cst.Name) else f"not ({code(test)})")
        lines = [[ln for s in out for ln in code(s).rstrip("\n").split("\n")] for out in (out_a, out_b)]
        return [statement("\n".join(block(*lines)) + "\n")]

    def _branch(self, stmts: list, test: str) -> list | None:
        """The forward statements of one branch of an ``if`` kept in the class (:meth:`_runtime_if`): its
        statements followed (layer calls on tensors only); None after an error finding."""
        out: list = []
        self.generating = True
        try:
            for s in stmts:
                if not isinstance(s, cst.SimpleStatementLine):
                    self.error(s, f"`{code(s).strip().splitlines()[0]}` inside `if {test}:`, an if statement on a "
                                  "parameter of the builder, is not followed (only layer calls on tensors)")
                    return None
                role = self._statement(s, False)
                s = self.aug.pop(id(s), s)
                if role == "forward":
                    out.append(_clean(rewrite(s, _Replace(self.replace), fresh=True)).with_changes(leading_lines=[]))
                elif role != "layer":
                    self.error(s, f"`{code(s).strip()}` inside `if {test}:`, an if statement on a parameter of the "
                                  "builder, is not followed (only layer calls on tensors)")
                    return None
                if self.errors:
                    return None
        finally:
            self.generating = False
        return out

    def _read_after(self, st: cst.CSTNode) -> set[str] | None:
        """The names the builder's statements after ``st`` read (None: ``st`` not found among them)."""
        source = self.origin.get(id(st), (None, st))[1]
        body = list(self.fn.body.body) if self.fn is not None else []
        at = next((i for i, s in enumerate(body) if s is source or s is st), None)
        if at is None:
            return None
        return set().union(set(), *(_names_in(s) for s in body[at + 1:]))

    def _unroll_values(self, loop: cst.For, values: list | None) -> list | None:
        target = loop.target
        names = [target.value] if isinstance(target, cst.Name) else [e.value.value for e in target.elements
                                                                     if isinstance(e.value, cst.Name)] \
            if isinstance(target, (cst.Tuple, cst.List)) else []
        if values is None and self.runtime_loop and names and loop.orelse is None:
            self.error(loop, "a for statement over a value known only when the model is built, inside another such "
                             "for statement (or in a helper called in one), is not followed: fwport builds one "
                             "nn.ModuleList per loop; give the inner loop literal values or module constants, or "
                             "translate this model by hand")
            return None
        if values is None or not names or loop.orelse is not None or not isinstance(loop.body, cst.IndentedBlock):
            self.error(loop, "a for statement of a functional model is followed when it runs over a literal list, "
                             "range(...) of known ints or module constants (it is written out once per value), or "
                             "over a value known when the model is built (an nn.ModuleList built by the same loop); "
                             "this one is neither (an else clause, or targets that are not names)")
            return None
        out: list = []
        # names the loop steps (`filters *= 2`): their values where it is written out, pass by pass
        stepped = {n for n in _stepped_names(loop.body) if not isinstance(self.env.get(n), (_Tensor, _Layer))} \
            if values and values[0] is not _AS_WRITTEN else set()
        ints = {n: self.known_ints[n] for n in stepped if n in self.known_ints}
        unknown = {n for n in stepped if n not in ints and n in self.local}
        if unknown:
            self.error(loop, f"{', '.join(sorted(unknown))}: changed in this for statement, with a value before it "
                             "that is not known where the model is built (a builder parameter, or a value computed "
                             "at run time): fwport writes the loop out pass by pass from known ints only")
            return None
        for v in values:
            if v is _AS_WRITTEN:  # the body once, its loop variable as written (a loop over a run-time value)
                subst = {}
            elif len(names) == 1:
                subst = {names[0]: _literal_node(v)}
            elif isinstance(v, (list, tuple)) and len(v) == len(names):
                subst = {n: _literal_node(x) for n, x in zip(names, v)}
            else:
                self.error(loop, "the loop's values do not unpack into its targets")
                return None
            todo = list(loop.body.body)
            while todo:
                st = todo.pop(0)
                small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
                step = None
                if small is not None and v is not _AS_WRITTEN:
                    small = rewrite(small, _Substitute(subst), fresh=True)
                    step = self._int_step(small, ints)
                    if step is None and isinstance(small, cst.Assign) and len(small.targets) == 1 \
                            and isinstance(small.targets[0].target, cst.Name) \
                            and not isinstance(self.env.get(small.targets[0].target.value), (_Tensor, _Layer)):
                        step = self._int_step(small, {**ints, small.targets[0].target.value: None})  # units = 2 ** i
                if step is not None:  # filters *= 2: the next statements see its new value
                    ints[step[0]] = step[1]
                    continue
                # (an item of a pass's list value taken by a literal index is that item: v[2] → (2, 2))
                st = self._copy(st, _SubstituteIndexed({**subst, **{n: _literal_node(x) for n, x in ints.items()}}))
                if v is not _AS_WRITTEN:  # activation="gelu" if idx == 0 else None: this pass's branch
                    st = self._copy(st, _FoldIfExp(self))
                if isinstance(st, cst.If) and v is not _AS_WRITTEN:  # if i < 2: decided by the pass's values
                    try:
                        chosen = self._decided(st)
                    except _Refused as r:  # said at the loop: the if statement is a copy
                        self.error(loop, f"an if statement in this for statement: {r.message}")
                        return None
                    todo[:0] = chosen
                    continue
                if isinstance(st, cst.For):
                    inner = self._unroll(st)
                    if inner is None:
                        return None
                    out += inner
                    continue
                role = self._statement(st, False)
                st = self.aug.pop(id(st), st)
                if role == "forward":
                    out.append(_clean(rewrite(st, _Replace(self.replace), fresh=True)).with_changes(leading_lines=[]))
                elif role == "unrolled":
                    out += self.generated.pop(id(st))
                elif role != "layer":
                    self.error(loop, f"`{code(st).strip()}` inside a for statement of a functional model is not "
                                     "followed (only layer calls on tensors)")
                    return None
                if self.errors:
                    return None
        if ints:
            self.known_ints.update(ints)
            self.loop_ints.update(ints)
        return out

    def _built_on_tensor(self, value) -> bool:
        """``model = keras.applications.MobileNetV2(include_top=False, input_tensor=x)`` (sample_size_estimate,
        efficientnet fine-tuning): an application built on a tensor of the model, its layers joining the graph and
        ``model.output`` its output: one error that says how fwport follows an application instead (the statements
        reading that object are left to it, :attr:`built_on`)."""
        if not (isinstance(value, cst.Call) and any(a.keyword is not None and a.keyword.value == "input_tensor"
                                                    and _names_in(a.value) & set(self.env) for a in value.args)):
            return False
        q = self.ctx.imports.resolve(value.func) or ""
        if not q.startswith("keras.applications."):
            return False
        self.error(value, f"{q.rsplit('.', 1)[-1]}(..., input_tensor=...): a Keras application built on a tensor of "
                          "the model (its layers join this graph, .output is its output) is not followed: fwport "
                          "follows an application called as a layer (`base = keras.applications.X(include_top=False, "
                          "input_shape=...)`, then `x = base(x)` and `base.output` written as that x); write it so, or "
                          "translate this model by hand")
        return True

    def _frozen(self, small) -> str | None:
        """``base.trainable = False`` (``base.requires_grad_(False)`` once the idiom rule has rewritten it) on a layer
        object of the model (a nested keras.Sequential, a layer class of the file, a rule layer), keras-io's transfer
        learning: the statement leaves forward, and ``self.<attr>.requires_grad_(False)`` follows the module's
        creation in ``__init__`` (:meth:`_freeze_lines`), as Keras's flag holds for every call of the layer. The
        idiom rule's warning stays: Keras also runs a frozen layer's BatchNormalization in inference mode."""
        call = small.value if isinstance(small, cst.Expr) else None
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "requires_grad_" and isinstance(call.func.value, cst.Name)
                and isinstance(self.env.get(call.func.value.value), _Layer)):
            return None
        layer = self.env[call.func.value.value]
        flag = literal_value(call.args[0].value, NOT_LITERAL) if len(call.args) == 1 and call.args[0].keyword is None \
            and not call.args[0].star else (True if not call.args else NOT_LITERAL)
        if not isinstance(flag, bool) or layer.in_loop or self.helper_call is not None:
            self.error(call, f"{code(call)}: fwport freezes a layer object of the model with a literal True / False "
                             "(the flag written in __init__ after the layer is created); translate this by hand")
            return "forward"
        layer.frozen = flag
        self.frozen_layers.append(layer)
        return "input"

    def _freeze_lines(self, init_lines: dict, model_call) -> None:
        """``self.<attr>.requires_grad_(flag)`` after the line creating each layer :meth:`_frozen` flagged; an error
        where the model never creates it (a layer not called on a tensor)."""
        for layer in self.frozen_layers:
            head = f"self.{layer.attr} = " if layer.attr else None
            spot = next(((i, k) for i, lines in init_lines.items() for k, ln in enumerate(lines)
                         if head is not None and ln.startswith(head) and "\n" not in ln), None)
            if spot is None:
                self.error(model_call, f"{layer.var or code(layer.call.func)}: a layer frozen with .trainable that "
                                       "fwport does not create as a module of its own here; translate this model by hand")
                continue
            i, k = spot
            init_lines[i].insert(k + 1, f"self.{layer.attr}.requires_grad_({layer.frozen})")

    def _decided(self, st: cst.If) -> list:
        """The statements of the branch an ``if`` takes where the model is built (its test on known values)."""
        branch = st
        while True:
            if self._static(branch.test, {}):
                return list(branch.body.body)
            if isinstance(branch.orelse, cst.If):
                branch = branch.orelse
                continue
            return list(branch.orelse.body.body) if isinstance(branch.orelse, cst.Else) else []

    def _layout(self, stmts: list) -> str:
        self.base_counts: dict[str, int] = {}
        self._count(stmts, 1)
        layout = "keep"
        for s in stmts:
            for c in self._with_seq_factories(_calls(s)):
                q = self.ctx.imports.resolve(c.func)
                rule = self.ctx.pack.by_name.get(q) if q else None
                if rule is not None and rule.kind == "layer" and rule.emit.get("shape") in _NEEDS_LAST:
                    return "keep"  # a sequence model: its convolutions are called on permuted inputs
                if _drives_nchw(rule):
                    fmt = next((literal_value(a.value, None) for a in c.args
                                if a.keyword and a.keyword.value == "data_format"), None)
                    if fmt != "channels_first":
                        layout = "nchw"
        return layout

    def _with_seq_factories(self, calls: list[cst.Call]) -> list[cst.Call]:
        """``calls`` and the calls in the bodies of the Sequential factories they call (``downsample(64)(x)``)."""
        out = list(calls)
        for c in calls:
            if self._seq_factory_of(c) is not None:
                out += _calls(self.helpers[c.func.value].body)
        return out

    def _seq_factory_of(self, call: cst.BaseExpression) -> tuple | None:
        """``call`` calls a Sequential factory of this file (:func:`_seq_factory`, not a block factory): its spec."""
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in self.helpers
                and call.func.value not in self.local and call.func.value not in self.env):
            return None
        fn = self.helpers[call.func.value]
        return _seq_factory(self.ctx, fn) if _factory(self.ctx, fn) is None else None

    # --- statements -------------------------------------------------------------------------------------
    def _statement(self, stmt, first: bool) -> str:
        if self.known_literals and not isinstance(stmt, cst.SimpleStatementLine):
            for n in _names_bound_in(stmt) | set(_assigned(stmt)):  # (a loop or an if may bind it anew)
                self.known_literals.pop(n, None)
        role = self._statement_role(stmt, first)
        if role != "config" and isinstance(stmt, cst.SimpleStatementLine):
            for n in _assigned(stmt):
                self.known_literals.pop(n, None)
        if role != "config" and self.known_ints:  # a name bound by a graph statement: its int is gone
            for n in (_assigned(stmt) if isinstance(stmt, cst.SimpleStatementLine) else _names_in(stmt)):
                if role == "unrolled" and isinstance(stmt, cst.For) and n in self.loop_ints \
                        and self.known_ints.get(n) == self.loop_ints[n]:
                    continue  # (the value a loop written out left: the statements below follow it)
                self.known_ints.pop(n, None)
        return role

    def _statement_role(self, stmt, first: bool) -> str:
        if first and isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr) \
                and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            return "keep"  # the builder's docstring
        names = _names_in(stmt)
        graph_names = {n for n in names if n in self.env}
        calls = _calls(stmt)
        graph_calls = [c for c in calls if self._is_graph_call(c)]
        if isinstance(stmt, cst.For) and (graph_names or graph_calls):
            generated = self._unroll(stmt)
            if generated is not None:
                self.generated[id(stmt)] = generated
            return "unrolled"
        if isinstance(stmt, cst.If) and (graph_names or graph_calls) and self._runtime_if_test(stmt):
            generated = self._runtime_if(stmt)
            if generated is not None:
                self.generated[id(stmt)] = generated
            return "unrolled"
        if graph_names or graph_calls:
            moded = self._mode_prefixed(stmt)
            if moded is not None:
                return moded
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            if graph_names or graph_calls:
                self.error(stmt, "a functional-model statement inside a compound statement (if/for/while/with/try) "
                                 "or several on one line is not followed yet: write the graph as plain assignments, "
                                 "or translate this model by hand")
                return "forward"
            held = sorted(names & (set(self.layer_lists) | set(self.tensor_lists)))
            if held:  # (its items exist only in the pass: a statement that does not call them cannot read them)
                self.error(stmt, f"{held[0]}: a list of the model's layers or tensors read by a statement that calls "
                                 "none of them on the model's tensors: not followed")
                return "forward"
            return self._config(stmt)
        small = stmt.body[0]
        frozen = self._frozen(small)
        if frozen is not None:
            return frozen
        appended = self._appended(stmt, small)
        if appended is not None:
            return appended
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            held = self._held_list(small.targets[0].target.value, small.value, stmt)
            if held is not None:
                return held
        if names & self.built_on:  # (the application's error says it: its object and .output are not followed,
            self.built_on.update(_assigned(stmt))  # nor what is computed from them)
            return "forward"
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and self._built_on_tensor(small.value):
            self.built_on.add(small.targets[0].target.value)
            return "forward"
        if (self.fn is None and isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Tuple) and small.targets[0].target.elements
                and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name)
                        for e in small.targets[0].target.elements)
                and isinstance(small.value, cst.Call) and not small.value.args
                and self._layer_kind(small.value.func)[0] == "builder"):
            # `model, opt, loss_fn = build_model()`: the training pass's rewrite of `model = build_model()` for a
            # builder that compiles its model (a Keras model does not unpack): the first name holds the instance
            target = small.targets[0].target.elements[0].value.value
            info = dict(self.builder_models[small.value.func.value])
            info["outputs"] = [None if o is None else tuple(d if is_int(d) else None for d in o)
                               for o in info["outputs"]]
            info["from_builder"] = True
            info["records_scope"] = small.value.func.value
            self.prior_models[target] = info
            return "keep"
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            target = small.targets[0].target.value
            value = small.value
            q = self.ctx.imports.resolve(value.func) if isinstance(value, cst.Call) else None
            if q == INPUT:
                self._input(target, value)
                return "input"
            made = self._input_dict_call(value) if isinstance(value, cst.Call) else None
            if made is not None:
                # `inputs = create_model_inputs()`, a helper of this file that builds a dict of keras.Input
                # over module constants: the model is called with that dict (its body stays for other callers)
                keys = {}
                for key, call in made.items():
                    keys[key] = f"{target}[{_key_code(key)}]"
                    self._input(keys[key], call)
                self.input_dicts[target] = keys
                self.env[target] = _Layer(value, None, "dict", var=target)
                self.env[target].op = _Op("dict", False)
                # followed: once only followed models call it, it goes (finish), as helpers that became classes
                self.ctx.analyses.setdefault("functional_calls", {}).setdefault(value.func.value, 0)
                self.ctx.analyses.setdefault("functional_input_helpers", set()).add(value.func.value)
                self.helper_uses[value.func.value] = self.helper_uses.get(value.func.value, 0) + 1
                return "input"
            listed = self._dict_values(value)
            if listed is not None:
                # `input_values = [v for _, v in sorted(inputs.items())]`: a list of the dict's tensors, for
                # merges and keras.Model(...) (written where it is used, as `inputs["a"]`)
                self.lists[target] = listed
                self.env[target] = _Layer(value, None, "list", var=target)
                self.env[target].op = _Op("list", False)
                return "layer"
            made = self._input_dict_comp(value) if isinstance(value, cst.DictComp) else None
            if made is None and isinstance(value, cst.Dict) and value.elements and all(
                    isinstance(e, cst.DictElement) and _string_key(e.key) is not None and isinstance(e.value, cst.Call)
                    and self.ctx.imports.resolve(e.value.func) == INPUT for e in value.elements):
                made = [(_string_key(e.key), e.value) for e in value.elements]
            if made is not None:
                # `inputs = {"a": keras.Input(...), ...}` (or a dict comprehension of keras.Input over a list of
                # names known where the model is built): the model is called with a dict, read as inputs["a"]
                keys = {}
                for key, call in made:
                    keys[key] = f"{target}[{_key_code(key)}]"  # no name of the code: read by subscript
                    self._input(keys[key], call)
                self.input_dicts[target] = keys
                self.env[target] = _Layer(value, None, "dict", var=target)  # not a tensor: refused elsewhere
                self.env[target].op = _Op("dict", False)
                return "input"
            if isinstance(value, cst.Dict) and value.elements and all(
                    isinstance(e, cst.DictElement) and _string_key(e.key) is not None for e in value.elements) \
                    and len({_string_key(e.key) for e in value.elements}) == len(value.elements) \
                    and any(isinstance(self.env.get(n), _Tensor) for n in _names_in(value)):
                return self._tensor_dict(stmt, target, value)
            if isinstance(value, (cst.List, cst.Tuple)) and value.elements and all(
                    isinstance(e, cst.Element) and isinstance(e.value, cst.Name)
                    and isinstance(self.env.get(e.value.value), _Tensor) for e in value.elements):
                # `inputs = [a, b]`: a name for a list of tensors (for keras.Model(...) and merges)
                self.lists[target] = value
                self.env[target] = _Layer(value, None, "list", var=target)  # not a tensor: refused elsewhere
                self.env[target].op = _Op("list", False)
                return "layer"
            if (self.fn is None and isinstance(value, cst.Call) and self._layer_kind(value.func)[0] == "builder"
                    and not value.args):
                # encoder = make_encoder() at module level: that very instance is the layer (as a model
                # built above is), so the name still holds it after keras.Model(...)
                info = dict(self.builder_models[value.func.value])
                info["outputs"] = [None if o is None else tuple(d if is_int(d) else None for d in o)
                                   for o in info["outputs"]]
                info["from_builder"] = True
                info["records_scope"] = value.func.value  # its weight records are the builder's
                self.prior_models[target] = info
                return "keep"
            if isinstance(value, cst.Call) and self._layer_kind(value.func)[0] not in (None, "submodel", "modseq"):
                try:
                    self.env[target] = self._new_layer(value, target)
                except _Refused as r:
                    self._refused(r)
                return "layer"
            seq = self._seq_factory_of(value)
            if seq is not None:  # d1 = downsample(64, 4): the keras.Sequential it builds, a layer object
                try:
                    self.env[target] = self._seq_layer(value, self.helpers[value.func.value], seq, target)
                except _Refused as r:
                    self._refused(r)
                return "layer"
        if not graph_names and not graph_calls:
            return self._config(stmt)
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            try:
                t = self._tensor(value)
            except _Refused as r:
                self._refused(r)
                t = None
            if t is None and not self.errors and isinstance(value, cst.DictComp) and isinstance(
                    value.value, cst.Call) and self.ctx.imports.resolve(value.value.func) == INPUT:
                self.error(value, f"{code(value.value.func)}(...) in a dict comprehension: fwport follows one whose "
                                  "key is its only for's name, over a list of names known where the model is built (a "
                                  "literal, a module constant, or a name the builder binds once to a literal and "
                                  "only iterates); write the dict out, or translate this model by hand")
            elif t is None and not self.errors:
                self.error(value, f"{code(value)} is not a tensor of the functional model fwport can follow")
            self.env[target] = t if t is not None else _Tensor(None, _Node(_Op("op", False), []))
            return "forward"
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                small.targets[0].target, (cst.Tuple, cst.List)) and isinstance(small.value, cst.Call) and all(
                isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in small.targets[0].target.elements):
            names = [e.value.value for e in small.targets[0].target.elements]
            self.unpacking = True
            self.unpacked_call = small.value  # (MultiHeadAttention(...)(q, v, return_attention_scores=True))
            try:
                out = self._tensor(small.value)
            except _Refused as r:
                self._refused(r)
                out = None
            finally:
                self.unpacking = False
            if isinstance(out, _Tensor):  # a layer class of the file whose call returns a tuple (return x, attn)
                out = self._user_tuple(small.value, out, len(names))
            if not isinstance(out, _Multi) or len(out.tensors) != len(names):
                if not self.errors:
                    self.error(small.value, f"{code(small.value)}: fwport unpacks the tensors a helper returns "
                                            "(return a, b); this value is not that")
                return "forward"
            for n, t in zip(names, out.tensors):
                self.env[n] = t
            return "forward"
        if isinstance(small, cst.Assign) and len(small.targets) > 1 \
                and all(isinstance(t.target, cst.Name) for t in small.targets):
            # `x = x_new = layers.Conv2D(...)(x)` (keras-io's edsr): one tensor bound to each name, as in Python;
            # forward keeps the statement, its value translated
            try:
                t = self._tensor(small.value)
            except _Refused as r:
                self._refused(r)
                t = None
            if t is None and not self.errors:
                self.error(small.value, f"{code(small.value)} is not a tensor of the functional model fwport can follow")
            for tg in small.targets:
                self.env[tg.target.value] = t if t is not None else _Tensor(None, _Node(_Op("op", False), []))
            return "forward"
        if isinstance(small, cst.Expr):
            try:
                self._tensor(small.value)
            except _Refused as r:
                self._refused(r)
            return "forward"
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) \
                and isinstance(self.env.get(small.target.value), _Tensor) and type(small.operator) in _AUG_ARITH:
            # x += y on a tensor: in torch, in place (a name bound to the same tensor changes too, autograd may
            # refuse it); Keras makes a new tensor: written x = x + y
            right = small.value
            if isinstance(right, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda)):
                right = right.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            value = cst.BinaryOperation(small.target, _AUG_ARITH[type(small.operator)](), right)
            self.aug[id(stmt)] = stmt.with_changes(body=[cst.Assign([cst.AssignTarget(small.target)], value)])
            try:
                t = self._tensor(value)
            except _Refused as r:
                self._refused(r)
                t = None
            self.env[small.target.value] = t if t is not None else _Tensor(None, _Node(_Op("op", False), []))
            return "forward"
        self.error(stmt, f"{code(stmt).strip()}: fwport follows a functional model written as `name = expression` "
                         "assignments; this statement is not one")
        return "forward"

    def _mode_prefixed(self, stmt) -> str | None:
        """``__fwport_line__(backbone.eval()); x = backbone(inputs)``: the training pass's translation of
        ``x = backbone(inputs, training=False)`` (``.train()`` for training=True), a layer or model of this model
        called with a training flag; None where ``stmt`` is not such a line.

        Keras 2 runs it in that mode whatever the model's: followed as the call, the mode set in forward just
        before it, as written (``self.backbone.eval()``); torch's mode stays set after the call, so the module
        must be called once in the model (a second call would run in that mode too). Keras 3's functional model
        replaces the flag by the training value the model is called with, whenever that call gives one (fit:
        True; evaluate, predict: False): the call follows the model's mode (no line before it), as the
        translated model, always in a mode, is called."""
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 2
                and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call)):
            return None
        marked = stmt.body[0].value  # __fwport_line__(backbone.eval()): a line of its own once the passes are done
        if not (isinstance(marked.func, cst.Name) and marked.func.value == TRAINING_LINE and len(marked.args) == 1
                and isinstance(marked.args[0].value, cst.Call)):
            return None
        mode = marked.args[0].value
        f = mode.func
        if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.attr.value in ("eval", "train")):
            return None
        name = f.value.value
        called = [c for c in _calls(stmt.body[1]) if isinstance(c.func, cst.Name) and c.func.value == name]
        if len(called) != 1:
            return None
        flag = "False" if f.attr.value == "eval" else "True"
        if mode.args:
            self.error(called[0], f"{name}(..., training={code(mode.args[0].value)}): a layer or model of the "
                                  "functional model called with a training flag that is not a literal True / False "
                                  "is not followed (torch takes the mode from .train() / .eval() on the module); "
                                  "call it without training= (the model's own mode), or translate this model by hand")
            return "forward"
        if self.ctx.version != 2:
            return self._mode_dropped(stmt, name, flag)
        again = self._called_again(name, flag)
        if again is not None:
            self.error(called[0], again)
            return "forward"
        role = self._statement_role(stmt.with_changes(body=[stmt.body[1]]), False)
        found = self.env.get(name)
        layer = found if isinstance(found, _Layer) else self.submodels.get(name) or self.given.get(name)
        if layer is None:
            if not self.errors:
                self.error(called[0], f"{name}(..., training={flag}): {name} is not a layer or model fwport follows "
                                      "in this functional model")
            return "forward"
        self.mode_calls[name] = layer
        self.replace[id(f.value)] = _module_ref(layer)
        return role

    def _called_again(self, name: str, flag: str) -> str | None:
        """Keras 2: why ``name`` called with training=``flag`` is not followed when it is called elsewhere in the
        model (the mode set in forward holds for every call); None where it is not."""
        if name not in self.mode_calls and not self.name_calls.get(name):
            return None
        return (f"{name}(..., training={flag}): {name} is called more than once in the functional model, once with a "
                f"training flag: torch keeps the mode set on {name} for its other calls too, where Keras runs them "
                "in the model's mode; give each call its own layer, or translate this model by hand")

    def _flagged_call(self, node: cst.Call, flag: cst.Arg) -> _Tensor | None:
        """``backbone(inputs, training=False)`` as written, where the training pass has not written the flag as a
        line before it (its own run of this pass, asking which models are left as written): followed as
        :meth:`_mode_prefixed` follows that line, so both runs leave the same models."""
        name = node.func.value
        value = literal_value(flag.value, NOT_LITERAL)
        if value not in (True, False):
            raise _Refused(node, f"{name}(..., training={code(flag.value)}): a layer or model of the functional "
                                 "model called with a training flag that is not a literal True / False is not "
                                 "followed (torch takes the mode from .train() / .eval() on the module); call it "
                                 "without training= (the model's own mode), or translate this model by hand")
        if self.ctx.version == 2:
            again = self._called_again(name, str(value))
            if again is not None:
                raise _Refused(node, again)
        args = [a for a in node.args if a is not flag]
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        plain = node.with_changes(args=args)
        out = self._call(plain)
        if id(plain) in self.replace:
            self.replace[id(node)] = self.replace.pop(id(plain))
        if self.ctx.version == 2:
            self.mode_calls[name] = None
        return out

    def _mode_dropped(self, stmt, name: str, flag: str) -> str:
        """Keras 3's ``x = backbone(inputs, training=False)`` in a functional model (see _mode_prefixed): the
        call alone, the training pass's line before it and its finding dropped."""
        call = next(c for c in _calls(stmt.body[1]) if isinstance(c.func, cst.Name) and c.func.value == name)
        # the training pass's finding (located already) says the line it wrote: gone once the model is translated
        self.mode_said.append(f"training={flag} → {name}.{'eval' if flag == 'False' else 'train'}() before the call")
        inner = stmt.with_changes(body=[stmt.body[1]])
        self.aug[id(stmt)] = inner  # written instead (as `x += y` is)
        role = self._statement_role(inner, False)
        if not self.errors:
            keeps = "Keras keeps the flag only in a call of the model without training=, "
            why = (keeps + f"where {name} runs in training mode and the model's other layers in inference mode: "
                   f"for that, write self.{name}.train() before its call in forward") if flag == "True" else (
                   keeps + "where every layer runs in inference mode anyway (the translated model in eval mode); "
                   f"to keep {name} in inference mode while training (Keras 2's meaning of the flag), write "
                   f"self.{name}.eval() before its call in forward")
            self.ctx.report(Severity.WARNING if flag == "True" else Severity.INFO, "idiom-replaced",
                            f"training={flag} on {name}(...) in a functional model: Keras 3 replaces it by the training "
                            "value the model is called with (fit: True; evaluate, predict: False), so the translation "
                            f"calls self.{name} in the model's mode; {why}", call)
        return role

    def _config(self, stmt) -> str:
        if self.fn is None:
            return "keep"  # module level: the class's methods read module names as they are
        bound = _assigned(stmt)
        self.local.update(bound)
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        for n in bound:  # what each name holds now: a value bound by a call (a model built here), or not
            self.local_calls[n] = isinstance(small, cst.Assign) and len(bound) == 1 and isinstance(small.value, cst.Call)
        step = self._int_step(small, self.known_ints) if small is not None else None
        if step is None and isinstance(small, cst.Assign) and len(small.targets) == 1 \
                and isinstance(small.targets[0].target, cst.Name):
            step = self._int_step(small, {**self.known_ints, small.targets[0].target.value: None})
        # whatever else binds a name here (in a compound statement: any name it mentions) forgets its value
        for n in (bound if isinstance(stmt, cst.SimpleStatementLine) else _names_in(stmt)):
            self.known_ints.pop(n, None)
        if step is not None:
            self.known_ints[step[0]] = step[1]
        for n in (bound if isinstance(stmt, cst.SimpleStatementLine) else _names_in(stmt)):
            self.known_literals.pop(n, None)
            self.known_shapes.pop(n, None)
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and isinstance(small.value, (cst.Tuple, cst.List)) and small.value.elements:
            known = self.sizes.constant(small.value)  # (literal ints or module constants)
            if isinstance(known, tuple) and all(is_int(d) for d in known):
                self.known_shapes[small.targets[0].target.value] = known
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            v = literal_value(small.value, NOT_LITERAL)
            if v is None or isinstance(v, (str, bool, float)):
                self.known_literals[small.targets[0].target.value] = v
        return "config"

    def _after_loops(self, stmt):
        """A builder statement below a for statement written out that changed ``filters``: ``filters``
        written as its value there (``filters *= 2`` → ``filters = 256``); None: leave it as it is."""
        names = _names_in(stmt) & set(self.loop_ints)
        if not names:
            return None
        if isinstance(stmt, cst.For):  # another loop stepping it (filters //= 2 after filters *= 2): it goes on
            for n in _stepped_names(stmt.body) & names:  # from the known int, pass by pass (_unroll_values)
                self.known_ints[n] = self.loop_ints.pop(n)
                names.discard(n)
            if not names:
                return None
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        step = self._int_step(small, self.loop_ints) if small is not None else None
        if step is not None:  # filters //= 2 below the loop: its value, and the name no longer the loop's
            name, value = step
            self.loop_ints.pop(name)
            return statement(f"{name} = {value!r}\n")
        for n in _names_bound_in(stmt) | set(_assigned(stmt)):
            self.loop_ints.pop(n, None)
        return self._copy(stmt, _Substitute({n: _literal_node(self.loop_ints[n]) for n in names
                                             if n in self.loop_ints}))

    def _int_step(self, small, ints: dict):
        """``filters *= 2`` / ``filters = filters * 2`` on a name whose int value is known: (name, new
        value); None when ``small`` is not that. (An ``image_data_format()`` read in it gets its warning from the
        rule pass, which translates the statement kept in ``__init__``.)"""
        self.format_quiet = True
        try:
            return self._int_step_of(small, ints)
        finally:
            self.format_quiet = False

    def _int_step_of(self, small, ints: dict):
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and small.target.value in ints \
                and type(small.operator) in _AUG_OPS and not self._other_calls(small.value):
            value = rewrite(small.value, _Substitute({n: _literal_node(v) for n, v in ints.items()}), fresh=True)
            try:
                right = self._static(value, {})
                new = _AUG_OPS[type(small.operator)](ints[small.target.value], right)
            except (_Refused, TypeError, ZeroDivisionError):
                return None
            return (small.target.value, new) if is_int(new) else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and small.targets[0].target.value in ints and not self._other_calls(small.value):
            value = rewrite(small.value, _Substitute({n: _literal_node(v) for n, v in ints.items()}), fresh=True)
            try:
                new = self._static(value, {})
            except (_Refused, TypeError, ZeroDivisionError):
                return None
            return (small.targets[0].target.value, new) if is_int(new) else None
        return None

    def _other_calls(self, node) -> bool:
        return any(not self._static_fn(c) and not self._format_read(c) for c in _calls(node))

    def _format_read(self, c: cst.Call) -> bool:
        """``backend.image_data_format()`` in a file that never sets the format: :meth:`_static` decides it as
        Keras's default, 'channels_last' (with its warning); where the file sets it, it stays unknown."""
        return not c.args and not isinstance(c.func, cst.Call) \
            and self.ctx.imports.resolve(c.func) in data_format.IMAGE_FORMAT_READS \
            and data_format.image_format_set(self.ctx) is None

    def _is_graph_call(self, c: cst.Call) -> bool:
        if isinstance(c.func, cst.Call):
            return self._is_graph_call(c.func) or self._layer_kind(c.func.func)[0] is not None
        q = self.ctx.imports.resolve(c.func)
        return q in (INPUT,) or q in MERGE_FNS

    def _layer_kind(self, func: cst.BaseExpression) -> tuple[str | None, object]:
        """What a constructor makes: ("rule", rule), ("merge", name), ("seq", None), ("user", class
        name), ("norule", name), ("model", name) or (None, None) when it is not a layer."""
        if isinstance(func, cst.Name) and func.value in self.user_classes and func.value not in self.local:
            return "user", func.value
        if isinstance(func, cst.Name) and func.value in self.prior_models and func.value not in self.env:
            return "submodel", func.value
        if isinstance(func, cst.Name) and func.value in self.builder_models and func.value not in self.local:
            return "builder", func.value  # encoder = build_encoder(...): the instance it returns
        if isinstance(func, cst.Name) and func.value in self.module_seqs and func.value not in self.local \
                and func.value not in self.env:
            return "modseq", func.value  # data_augmentation(inputs): that module-level Sequential itself
        q = self.ctx.imports.resolve(func)
        if q is None:
            return None, None
        if q in MERGE_LAYERS:
            return "merge", q
        rule = self.ctx.pack.by_name.get(q)
        if rule is not None and rule.kind == "layer":
            return "rule", rule
        if rule is not None and rule.emit.get("transform") == "vocabulary-layer":
            return "vocab", q
        if q == "keras.Sequential":
            return "seq", None
        if q.startswith("keras.layers.") and q[len("keras.layers."):][:1].isupper():
            return "norule", q
        if q == "keras.Model":
            return "model", q
        return None, None

    def _new_layer(self, call: cst.Call, var: str | None = None) -> _Layer:
        kind, what = self._layer_kind(call.func)
        if kind == "vocab":
            raise _Refused(call, f"{what.rsplit('.', 1)[-1]} inside the model: a vocabulary layer maps strings to ids, and a "
                                 "torch module takes tensors, never strings: apply the vocabulary (translated as a "
                                 "plain-Python class) to the data before the model, and build the model from the ids",
                           "unsupported-construct")
        if kind in ("norule", "model"):
            raise _Refused(call, f"{what} has no tf2torch rule yet, or is a functional model used as a layer, which "
                                 "fwport does not follow yet: translate it by hand", "no-rule")
        if kind in ("user", "builder"):
            inside = [c for c in _calls(call) if c is not call and self.ctx.imports.resolve(c.func)]
            if inside or _names_in(call) & set(self.env):
                raise _Refused(call, f"{code(call)}: a layer of this file built from Keras values or tensors: its "
                                     "arguments would not be translated where the module is built")
        layer = _Layer(call, what, kind, var=var)
        if kind == "rule":
            self._size_arguments(call)
            if what.emit.get("shape") == "bidirectional":
                self._rebound_wrapped(call, var)
        self.layers.append(layer)
        self.ctx.settle(call)
        return layer

    def _rebound_wrapped(self, call: cst.Call, var: str | None) -> None:
        """``layers.Bidirectional(rnn)`` where ``rnn`` is bound to a recurrent layer not called yet (ctc_asr's
        ``recurrent = layers.GRU(...)`` then ``layers.Bidirectional(recurrent, ...)(x)``; or rebound, ``rnn =
        layers.Bidirectional(rnn)``): that layer's call is written into the wrapper for the rule (kept in
        ``self.sized_calls``), as Keras's Bidirectional copies the layer it wraps. The object itself is in no
        model unless it is called on a tensor later (then a layer of its own, as in Keras): rebound, the name
        no longer holds it; else it is not refused as created but never called (``self.copied``)."""
        for i, a in enumerate(call.args):
            if a.keyword is not None and a.keyword.value != "layer":
                continue
            inner = self.env.get(a.value.value) if isinstance(a.value, cst.Name) else None
            if isinstance(inner, _Layer) and inner.kind == "rule" and inner.rule.emit.get("shape") == "rnn" \
                    and inner.op is None and inner in self.layers:
                base = self.sized_calls.get(id(call), call)
                args = list(base.args)
                args[i] = args[i].with_changes(value=self.sized_calls.get(id(inner.call), inner.call))
                self.sized_calls[id(call)] = base.with_changes(args=args)
                if a.value.value == var:
                    self.layers.remove(inner)
                else:
                    self.copied.add(id(inner))
            return

    def _size_arguments(self, call: cst.Call) -> None:
        """A rule layer built from sizes of the model's tensors (``layers.Reshape((-1, x.shape[-2] *
        x.shape[-1]))``, ``layers.Dense(x.shape[-1])``): the tensors do not exist where torch builds the
        module, so each ``x.shape[i]`` is written as the size it has here (kept in ``self.sized_calls``
        for the rule); refused where that size is not known."""
        shapes = {n: t.shape for n, t in self.env.items() if isinstance(t, _Tensor) and t.shape is not None}
        padded = _CorrectPad(self.ctx, shapes)
        sized = rewrite(call, padded, fresh=True) if any(
            self.ctx.imports.resolve(c.func) in CORRECT_PAD for c in _calls(call)) else call
        if padded.refused is not None:
            raise _Refused(call, padded.refused)
        reads = _shape_reads(sized)  # (no `x.shape` of a known tensor: nothing to write, no copy to compare)
        sized = rewrite(sized, _SizeSubstitute(shapes), fresh=True) if any(n.value in shapes for n in reads) else sized
        if any(isinstance(a.value, cst.Name) and a.value.value in self.known_literals and not a.star for a in sized.args):
            sized = sized.with_changes(args=[  # activation=activation of `activation = "sigmoid"` above
                a.with_changes(value=_literal_node(self.known_literals[a.value.value]))
                if isinstance(a.value, cst.Name) and a.value.value in self.known_literals and not a.star else a
                for a in sized.args])
        left = [n for n in _shape_reads(sized) if isinstance(self.env.get(n.value), _Tensor)]
        if left:
            raise _Refused(call, f"{code(call.func)} built from `{code(left[0])}.shape`, a size of a tensor of this "
                                 "model that fwport does not know here: the layer is built in __init__, where the "
                                 "tensor does not exist; give the model its input shape (keras.Input(shape=...)) or "
                                 "write the size as a number", "shape-unknown")
        if sized is not call and code(sized) != code(call):  # (a copy loses the positions of the calls inside)
            self.sized_calls[id(call)] = sized

    def _input(self, target: str, call: cst.Call) -> None:
        for i, a in enumerate(call.args):
            kw = a.keyword.value if a.keyword else ("shape" if i == 0 else None)
            if kw not in _INPUT_KWARGS or a.star:
                self.error(a, f"keras.Input argument {code(a).strip().rstrip(',')} is not followed (shape, name, dtype, "
                              "batch_size only)", "unsupported-argument")
        shape, _ = _input_spec_shape(call, self.sizes)
        if shape is None:
            found = _shape_arg(call, "shape")
            if found is not None and found[0] == "shape" and isinstance(found[1], cst.Name):
                shape = self.known_shapes.get(found[1].value)  # input_shape = (224, 224, 3) in the builder
        if shape is None:
            shape = self._model_shape(call)
        name = _shape_parts(call, self.sizes) if shape is None else None
        if shape is None and name is None:
            self.error(call, "keras.Input without a shape fwport can read (a literal tuple, module constants or "
                             "builder parameters): the layer sizes cannot be propagated; write the shape out (--trace "
                             "does not supply an Input's shape: it observes layers' inputs only)", "shape-unknown")
        op = _Op("input", True)
        self.input_ops.append(op)
        t = _Tensor(shape, self._node(op, []), shape_name=name)
        keras_name = _lit_of(call, "name")
        if isinstance(keras_name, str):
            self.input_keras_names[target] = keras_name
        self.inputs[target] = t
        self.env[target] = t
        self.ctx.settle(call)

    def _model_shape(self, call: cst.Call) -> tuple | None:
        """keras.Input(shape=M.output.shape[1:]) (``M.input.shape``, ``M.output_shape``, ``M.input_shape``): the
        shape of a model translated above (a module-level model, or a builder's called with arguments each a literal
        int or a parameter of this builder), by its size propagation; None otherwise (the error stays)."""
        found = _shape_arg(call, "shape")
        if found is None or found[0] != "shape":
            return None
        node = found[1]
        if not (isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice)):
            return None
        sl = node.slice[0].slice
        if not (sl.upper is None and sl.step is None and isinstance(sl.lower, cst.Integer) and sl.lower.value == "1"):
            return None
        src = node.value
        if isinstance(src, cst.Attribute) and src.attr.value in ("input_shape", "output_shape"):
            which, model = src.attr.value.split("_")[0], src.value
        elif (isinstance(src, cst.Attribute) and src.attr.value == "shape" and isinstance(src.value, cst.Attribute)
              and src.value.attr.value in ("input", "output")):
            which, model = src.value.attr.value, src.value.value
        else:
            return None
        if isinstance(model, cst.Name) and model.value in self.prior_models and model.value not in self.local:
            info, bound = self.prior_models[model.value], None
        elif (isinstance(model, cst.Call) and isinstance(model.func, cst.Name) and model.func.value in self.builder_defs
              and model.func.value in self.builder_models and model.func.value not in self.local):
            info = self.builder_models[model.func.value]
            bound = bind_def(model, self.builder_defs[model.func.value])
            if bound is None:
                return None
        else:
            return None
        shapes = info.get(f"{which}s") or []
        if len(shapes) != 1 or shapes[0] is None:
            return None
        own = set(param_names(self.fn)) if self.fn is not None else set()
        out = []
        for d in shapes[0]:
            if is_int(d):
                out.append(d)
                continue
            arg = bound.get(d) if bound is not None and isinstance(d, str) else None
            if isinstance(arg, cst.Integer):
                out.append(int(arg.value))
            elif isinstance(arg, cst.Name) and arg.value in own:
                out.append(arg.value)  # a size named by this builder's parameter
            else:
                return None
        return tuple(out)

    # --- expressions ----------------------------------------------------------------------------------------
    def _node(self, op: _Op, parents: list[_Node], where: cst.CSTNode | None = None,
              mask: str | None = None) -> _Node:
        carried = next((p for p in parents if p.mask is not None), None)
        if carried is not None and id(where) not in self.mask_flows:
            raise _Refused(where or carried.where, masks.refusal(carried.mask))
        if carried is not None and self.ctx.analyses.get(kerashub.STRIPPED, {}).get(id(carried), id(where)) != id(where):
            raise _Refused(where or carried.where, kerashub.STRIPPED_WHY)
        n = _Node(op, parents, where, mask)
        self.nodes.append(n)
        return n

    def _tensor(self, node: cst.BaseExpression) -> _Tensor | None:
        """The tensor an expression computes, its replacement recorded; None: not a tensor."""
        if isinstance(node, cst.Name):
            v = self.env.get(node.value)
            if isinstance(v, _Tensor):
                return v
            if isinstance(v, _Layer) and v.kind in ("list", "dict"):
                raise _Refused(node, f"{node.value}, a {v.kind} of tensors, used as a value: fwport follows one "
                                     "given to a merge, to keras.Model(...), or as a recurrent layer's initial_state")
            if isinstance(v, _Layer):
                raise _Refused(node, f"the layer {node.value} used as a value: fwport follows layers that are called")
            if node.value in self.local and self.fn is not None:
                if self.helper_call is not None or self.generating:
                    raise _Refused(node, f"{node.value} is a value of the builder that the forward pass reads: not "
                                         "followed in a helper, a loop or keras.Model(...) itself; use it where the "
                                         "layers are built, or translate this model by hand")
                # kept on the module: `self.<name> = <name>` at the end of __init__
                self.carried.setdefault(node.value, self._value_attr(node.value))
                self.replace[id(node)] = expr(f"self.{self.carried[node.value]}")
            return None
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) \
                and node.value.value in self.input_dicts:
            # inputs["a"] of a dict of keras.Input: forward reads its dict parameter the same way
            keys = self.input_dicts[node.value.value]
            s = node.slice[0].slice if len(node.slice) == 1 else None
            key = _string_key(s.value) if isinstance(s, cst.Index) else None
            if key not in keys:
                raise _Refused(node, f"{code(node)}: fwport reads a dict of keras.Input by its literal keys "
                                     f"({', '.join(repr(k) for k in keys)})")
            return self.inputs[keys[key]]
        if isinstance(node, cst.Call):
            out = self._call(node)
            if isinstance(out, _Multi) and not self.unpacking:
                raise _Refused(node, f"{code(node.func)}(...) returns several tensors: unpack them where it is "
                                     "called (a, b = ...)")
            return out
        if isinstance(node, cst.BinaryOperation) and type(node.operator) in _ARITH:
            a, b = self._tensor(node.left), self._tensor(node.right)
            if a is None and b is None:
                return None
            return self._arith(node, a, b)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            t = self._tensor(node.expression)
            if t is None:
                return None
            return _Tensor(t.shape, self._node(_Op("op", self.ctx.version == 2), [t.node]), t.flat)
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 \
                and type(node.comparisons[0].operator) in _COMPARE and isinstance(node.comparisons[0].comparator, (cst.Integer, cst.Float)):
            # `source != 0` (a padding mask): elementwise against a number, the same in either layout
            t = self._tensor(node.left)
            if t is None:
                return None
            return _Tensor(t.shape, self._node(_Op("op", self.ctx.version == 2), [t.node]), t.flat, t.last)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) \
                and isinstance(self.env.get(node.value.value), _Tensor):
            return self._indexed(node, self.env[node.value.value])
        names = _names_in(node) & set(self.env)
        if not names:
            return None
        sized = self._unknown_size(node)
        if sized is not None:
            raise sized
        raise _Refused(node, f"{code(node)}: this operation on tensors of the functional model is not followed "
                             "(fwport follows layer calls, merges and + - * / between tensors)")

    def _indexed(self, node: cst.Subscript, t: _Tensor) -> _Tensor:
        """``x[:, 0, :]`` / ``x[..., :5]`` (a token of a sequence, a slice of the features): basic indexing by
        ints and slices known here, the batch dimension kept whole; torch indexes the same way, so forward reads it as
        written. Refused in a channels-first model where the tensor has axes the layout moves (its axes are not
        Keras's there), on a flattened feature map, and for a negative step (torch has none), None / newaxis,
        a tensor index or a bound not known where the model is built."""
        why = None
        if t.shape is None:
            raise _Refused(node, f"{code(node)}: indexing a value of the functional model whose rank fwport does not "
                                 "know (a tensor of unknown rank, or a list or dict of outputs of a model it does not "
                                 "follow): not followed")
        elif t.flat is not None or (self.layout == "nchw" and len(t.shape) > 1 and not t.last):
            why = "the model runs channels-first, where this tensor's axes are not Keras's"
        items: list = []
        for el in node.slice if why is None else ():
            one = el.slice
            if isinstance(one, cst.Index) and isinstance(one.value, cst.Ellipsis):
                items.append("...")
                continue
            ends = [one.value] if isinstance(one, cst.Index) else [one.lower, one.upper, one.step]
            values = [None if e is None else self._static_or_none(e) for e in ends]
            if any(e is not None and not (is_int(v) and not isinstance(v, bool)) for e, v in zip(ends, values)) \
                    or (isinstance(one, cst.Slice) and values[2] is not None and values[2] <= 0):
                why = f"`{code(one)}` is not an int or a slice of ints known where the model is built (a positive step)"
                break
            items.append(int(values[0]) if isinstance(one, cst.Index) else slice(*values))
        full = [None, *t.shape] if why is None else []
        if why is None and (items.count("...") > 1 or len(items) - items.count("...") > len(full)):
            why = "more indices than the tensor has axes"
        if why is None:
            k = items.index("...") if "..." in items else len(items)
            rest = [x for x in items if x != "..."]
            items = items[:k] + [slice(None)] * (len(full) - len(rest)) + [x for x in items[k + 1:]]
            if items[0] != slice(None):
                why = "it indexes the first (batch) dimension"
        if why is not None:
            raise _Refused(node, f"{code(node)}: indexing a tensor of the functional model is followed for ints and "
                                 f"slices known where the model is built, the first (batch) dimension whole; here "
                                 f"{why}")
        shape = []
        for d, x in zip(full[1:], items[1:]):
            if isinstance(x, slice):
                shape.append(len(range(int(d))[x]) if is_int(d) else None)
        return _Tensor(tuple(shape), self._node(_Op("op", self.ctx.version == 2), [t.node]), None, t.last)

    def _unknown_size(self, node: cst.BaseExpression) -> _Refused | None:
        """The refusal of an expression that reads tensors of the model only through their static sizes
        (``units = cross.shape[-1]``), one of which is not known here (not the batch axis); None otherwise."""
        reads = [n.value for n in _shape_reads(node) if isinstance(self.env.get(n.value), _Tensor)]
        known = {n: self.env[n].shape for n in reads if self.env[n].shape is not None}
        if not reads or _names_in(rewrite(node, _ShapeReadsOut(), fresh=True)) & set(self.env) \
                or not _shape_reads(rewrite(node, _ShapeSubstitute(known), fresh=True)) or "[0]" in code(node):
            return None
        shown = "; ".join(f"{n}: {_shown_shape(self.env[n].shape)}" for n in dict.fromkeys(reads))
        return _Refused(node, f"{code(node)}: a size of a tensor of the model that fwport does not know where the "
                              f"model is built ({shown}; None: unknown, a name: a size it knows only by that name): "
                              "Keras reads it from the symbolic shape; give keras.Input a full shape, or write the "
                              "size as a number", "shape-unknown")

    def _unfollowed_callee(self, name: str) -> str:
        """Why ``name(...)``, called on tensors of the model, is not followed: what binds ``name`` (a Python
        builtin, a loop variable, a statement of the builder or of the module fwport does not follow as a layer)."""
        lead = f"{name}(...) is called on tensors of the functional model"
        scope = self.fn.body if self.fn is not None else self.ctx.analyses.get("parsed", (None,))[0]
        found = _BindingOf(name)
        if scope is not None:
            scan(scope, found)
        if found.value is None and self.fn is not None and name in self.constants[1]:
            found.value, found.level = _module_assignments(self.ctx).get(name), "at module level "
        if found.loop is not None:
            return (f"{lead}: {name} is the variable of `for ... in {code(found.loop)}`, whose items fwport does not "
                    "know as layers here: call the layers by name, or translate this model by hand")
        if found.value is not None:
            what = f"to `{' '.join(code(found.value).split())[:80]}`" if found.count == 1 else \
                "by several statements"
            return (f"{lead}: {name} is bound {found.level}{what}, which fwport does not follow as a layer of this "
                    "model here (a layer or model of another library, a loaded or preprocessing model, a value an "
                    "error above refuses): build the layer with a Keras layer class or a block of this file, or "
                    "translate this model by hand")
        if name in _BUILTINS and name not in self.local:
            return (f"{lead}: the Python builtin {name}(...) on tensors of the model is not followed (fwport follows "
                    "layer calls, merges and + - * / between tensors)")
        return (f"{lead}: only helper functions defined at the top of this file are followed; inline the block or "
                "translate this model by hand")

    def _arith(self, node: cst.BinaryOperation, a: _Tensor | None, b: _Tensor | None) -> _Tensor:
        for side, t in ((node.left, a), (node.right, b)):
            if t is None and not isinstance(side, (cst.Integer, cst.Float)) and _names_in(side) & (self.local | set(self.env)):
                if not isinstance(side, cst.Name) or side.value not in self.carried:
                    raise _Refused(side, f"{code(side)}: arithmetic between a tensor and this builder expression is "
                                         "not followed yet")
                if self.layout == "nchw":
                    raise _Refused(side, f"{code(side)}: a builder value in arithmetic with a feature map of a model "
                                         "converted to channels-first: if it is not a scalar, it would broadcast over "
                                         "other axes than in Keras")
        ts = [t for t in (a, b) if t is not None]
        if len(ts) == 2:
            if self.layout == "nchw" and not _same_layout(ts):
                raise _Refused(node, f"{code(node)}: tensors of unknown or different ranks in a model converted "
                                     "to channels-first: broadcasting would pair other axes than in Keras")
            if a.flat != b.flat:
                raise _Refused(node, f"{code(node)}: one operand is a flattened channels-first map and the other "
                                     "is not: their features are in different orders")
        t = ts[0]
        return _Tensor(_broadcast(ts), self._node(_Op("op", self.ctx.version == 2), [x.node for x in ts]), t.flat)

    def _call(self, node: cst.Call) -> _Tensor | None:
        func = node.func
        flag = next((a for a in node.args if a.keyword is not None and a.keyword.value == "training"), None)
        if flag is not None and isinstance(func, cst.Name) and len(node.args) > 1:
            return self._flagged_call(node, flag)
        if isinstance(func, cst.Name):
            if func.value in self.mode_calls:
                raise _Refused(node, f"{func.value}(...): called again after a call with training=: torch keeps the "
                                     f"mode set on {func.value} for this call too, where Keras runs it in the model's "
                                     "mode; give each call its own layer, or translate this model by hand")
            self.name_calls[func.value] = self.name_calls.get(func.value, 0) + 1
        if isinstance(func, cst.Call):  # layers.Dense(4)(x)
            if isinstance(func.func, cst.Name) and func.func.value in self.helpers \
                    and func.func.value not in self.local and func.func.value not in self.env:
                fac = _factory(self.ctx, self.helpers[func.func.value])
                if fac is not None:  # Block(64)(x): a block factory's closure called on tensors
                    return self._helper(self._factory_call(node, fac), fac[0], site=node)
                seq = self._seq_factory_of(func)
                if seq is not None:  # downsample(64, 4)(x): the keras.Sequential it builds, as a layer
                    return self._seq_factory_call(node, self.helpers[func.func.value], seq)
                raise _Refused(node, f"{code(func.func)}(...)(...): fwport follows a function of this file called "
                                     "this way when it is a block factory (its body: `def apply(x): ...` then "
                                     "`return apply`, or a keras.Sequential built by `add` calls and returned); "
                                     "this one is not: translate it by hand")
            if self._layer_kind(func.func)[0] is None:
                raise _Refused(node, f"{code(func.func)}(...)(...): a call of something fwport does not know as a "
                                     "Keras layer")
            return self._apply(self._new_layer(func), node)
        if isinstance(func, cst.Name) and isinstance(self.env.get(func.value), _Layer):
            return self._apply(self.env[func.value], node)
        kind = self._layer_kind(func)[0] if isinstance(func, cst.Name) else None
        if kind in ("submodel", "modseq"):
            layer = self.submodels.get(func.value)
            if layer is None:
                layer = self.submodels[func.value] = _Layer(node, func.value, kind, var=func.value)
                self.layers.append(layer)
            return self._apply(layer, node)
        q = self.ctx.imports.resolve(func)
        if q in MERGE_FNS:
            return self._merge(node, MERGE_FNS[q], node.args, q.rsplit(".", 1)[-1])
        if q == INPUT:
            raise _Refused(node, "keras.Input inside an expression: assign it to a name of its own")
        tensors = _names_in(node) & set(self.env)
        if not tensors:
            return None
        if isinstance(func, cst.Name) and func.value in self.helpers and func.value not in self.local:
            return self._helper(node, self.helpers[func.value])
        if isinstance(func, cst.Name) and func.value in self.local and self.fn is not None \
                and func.value not in self.env:
            return self._apply(self._given(node, func.value), node)
        if isinstance(func, cst.Name) and self.fn is not None and func.value not in self.env and q is None \
                and self._module_object(func.value):
            return self._apply(self._given(node, func.value, module_level=True), node)
        left = self._left_model(func.value) if isinstance(func, cst.Name) and func.value not in self.env \
            and q is None else None
        if left is not None:
            raise _Refused(node, left)
        if isinstance(func, cst.Name) and func.value not in self.env and q is None and self.fn is not None \
                and func.value not in self.local and func.value in self.constants[1] \
                and isinstance(_module_assignments(self.ctx).get(func.value), cst.Call):
            made = code(_module_assignments(self.ctx)[func.value].func)
            raise _Refused(node, f"{func.value}(...): {func.value} is bound at module level to {made}(...), a Keras / "
                                 "TensorFlow object, and called on tensors in a builder: not followed (fwport keeps "
                                 "objects of the file's classes and builders, or of other libraries, as they are; a "
                                 "Keras layer or model built at module level is translated outside this model's "
                                 "layout): build it in the builder, or translate this model by hand")
        if isinstance(func, cst.Name) and func.value not in self.env and q is None:
            sized = self._unknown_size(node)
            if sized is not None:  # int(x.shape[1] * x.shape[2] / p) of sizes not known here
                raise sized
            raise _Refused(node, self._unfollowed_callee(func.value))
        if q is not None and self.ctx.imports.is_source(q):
            return self._op(node, q)
        raise _Refused(node, f"{code(func)}(...) on tensors of the functional model is not followed yet (fwport "
                             "follows Keras layer calls, merges and + - * / between tensors); wrap it in a layer "
                             "or translate this model by hand")

    def _left_model(self, name: str) -> str | None:
        """Why ``name``, bound once at module level to a model fwport does not translate (a functional model
        left as written, the model a builder left as written returns, a keras.applications model), is not
        followed as a layer of this model; None where it is not such a model."""
        if name in self.local or name not in self.constants[1]:
            return None
        value = _module_assignments(self.ctx).get(name)
        if isinstance(value, (cst.Name, cst.Attribute)) \
                and (self.ctx.imports.resolve(value) or "").startswith("keras.applications."):
            return (f"{name}(...): {name} is {self.ctx.imports.resolve(value)}, a pretrained model's "
                    "preprocessing bound to a name at module level, which fwport does not follow in a model (it "
                    "translates a call of the function by its own name, and a builder's name bound to it): call "
                    f"{code(value)}(...) here, write what it computes on the channels-last input (the model's "
                    "documented scaling, e.g. x / 127.5 - 1), or translate this model by hand")
        if not isinstance(value, cst.Call):
            return None
        q = self.ctx.imports.resolve(value.func)
        after = (f"a Keras model cannot be a layer of this model's torch module: once {name} is translated (by hand, "
                 "as an nn.Module), this model can call it as a submodule; or translate this model by hand")
        if q == MODEL or _model_base(value.func, self.ctx) is not None:
            return (f"{name}(...): {name} is a functional model of this file that fwport leaves as written (the "
                    f"errors at its keras.Model(...) say why); {after}")
        if (q or "").startswith("keras.applications."):
            return (f"{name}(...): {name} is a pretrained {q.rsplit('.', 1)[-1]} (keras.applications), which fwport does "
                    "not translate: make its torchvision.models / timm counterpart a submodule of this model and call "
                    "it in forward (its preprocessing and weights differ), or translate this model by hand")
        if isinstance(value.func, cst.Name) and q is None and value.func.value not in self.builder_models:
            module = self.ctx.analyses.get("parsed", (None,))[0]
            fn = next((st for st in (module.body if module is not None else ()) if isinstance(st, cst.FunctionDef)
                       and st.name.value == value.func.value), None)
            if fn is not None and isinstance(fn.body, cst.IndentedBlock) and _model_calls(fn.body.body, self.ctx):
                return (f"{name}(...): {name} is the functional model {value.func.value}(...) builds, which fwport "
                        f"leaves as written (the errors at its keras.Model(...) say why); {after}")
        return None

    def _module_object(self, name: str) -> bool:
        """``name`` is bound once at module level, to a call of something that is not a Keras / TensorFlow
        name (a layer class or builder of this file, another library's model): an object the builder may
        call on tensors as it is (a Keras layer with a rule built at module level is not one: the rule pass
        translates it outside any model's layout)."""
        if name in self.local or name not in self.constants[1]:
            return False
        value = _module_assignments(self.ctx).get(name)
        if not isinstance(value, cst.Call):
            return False
        q = self.ctx.imports.resolve(value.func)
        return q is None or not self.ctx.imports.is_source(q)

    def _given(self, node: cst.Call, name: str, module_level: bool = False) -> _Layer:
        """``features = encoder(inputs)`` with ``encoder`` a parameter of the builder (or a value it binds): a
        model or layer made elsewhere, given to the model. The generated class keeps it as a module
        (``self.encoder = encoder`` in ``__init__``, which takes the builder's parameters) and calls it with
        Keras's layout, as every translated model and layer class is called; one object called twice is one
        module (its weights shared, as in Keras). Its output shape is not known here: the layers after it
        are built for an unknown shape (lazy modules where torch has them)."""
        layer = self.given.get(name)
        if layer is not None:
            return layer
        if not self.local_calls.get(name, True):  # (a parameter: not in local_calls)
            raise _Refused(node, f"{name}(...) is called on tensors, and {name} is not a parameter of the builder or "
                                 "a value it builds with a call (a function held by a name: in Keras it adds no "
                                 "layer or several): fwport keeps a builder value called on tensors as a module when it "
                                 "is one of those; call the function itself, or translate this model by hand")
        if self.runtime_loop:
            raise _Refused(node, f"{name}(...), a value of the builder called on tensors, inside a for statement "
                                 "over a value known only when the model is built: not followed (fwport builds one "
                                 "nn.ModuleList per loop from the layers it creates); call it outside the loop, or "
                                 "translate this model by hand")
        layer = self.given[name] = _Layer(node, name, "given", var=name)  # (a Model or Layer: one of model.layers)
        self.layers.append(layer)
        what = (f"{name}, an object the module binds and the builder calls on tensors, is kept as a module of the "
                f"translated model (self.{name} = {name}: that very object, as in Keras)") if module_level else (
                f"{name}, a value of the builder called on tensors (a model or layer made elsewhere), is kept as a "
                f"module of the translated model (self.{name}, given to its constructor)")
        give = "" if module_level else ": give it the translation of the object the Keras code passes"
        self.ctx.report(Severity.INFO, "shape-unknown", f"{what} and called with Keras's channels-last layout, as "
                        f"translated models are{give}; the shape it returns is not known here (the layers after it are "
                        "lazy), and its weights are its own (fwport verify and fwport weights map this model's layers "
                        "only)", node)
        return layer

    def _op(self, node: cst.Call, q: str) -> _Tensor:
        """``tf.nn.relu(x)`` / ``keras.ops.mean(x, axis=1)`` on tensors of the model: left to the rule
        pass, which translates it where it stands. Only where the layout cannot change its meaning: an
        elementwise function anywhere, other functions on tensors without channels (rank 1) or in a
        model that keeps its layout."""
        if q == "tensorflow.nn.depth_to_space" and self.layout == "nchw":
            return self._depth_to_space(node)
        if (self.helper_call is not None or self.generating) and q in _ELEMENTWISE_FNS | {"tensorflow.nn.swish"} \
                and len(node.args) == 1 and not node.args[0].star and node.args[0].keyword is None:
            return self._written_op(node, q)
        if self.helper_call is not None or self.generating:
            raise _Refused(node, f"{code(node.func)}(...) on tensors inside a helper, a loop or keras.Model(...) "
                                 "itself is not followed (fwport writes that code out itself); assign it to a name "
                                 "in the builder, or wrap it in a layer")
        ts = []
        for a in node.args:
            t = self._tensor(a.value) if _names_in(a.value) & set(self.env) else None
            if t is None and _names_in(a.value) & set(self.env):
                raise _Refused(a, f"{code(a.value)}: not followed as an argument of {code(node.func)}")
            if t is not None:
                ts.append(t)
        if not ts:
            return None
        if any(t.flat is not None for t in ts):
            raise _Refused(node, f"{code(node.func)}(...) on a flattened channels-first map: its features are in "
                                 "(c, h, w) order in the translation")
        # (a scalar argument beside the one tensor, tf.nn.leaky_relu(x, 0.2)'s alpha, keeps it elementwise)
        elementwise = q in _ELEMENTWISE_FNS and len(ts) == 1 and not any(a.star for a in node.args)
        if self.layout == "nchw" and not elementwise and any(t.shape is None or len(t.shape) > 1 or t.last
                                                              for t in ts):
            raise _Refused(node, f"{code(node.func)}(...) on a feature map of a model converted to channels-first: "
                                 "its axes are not Keras's there; wrap it in a layer, or translate this model by hand")
        shape = ts[0].shape if elementwise else None
        return _Tensor(shape, self._node(_Op("op", self.ctx.version == 2), [t.node for t in ts], node), None,
                       ts[0].last if elementwise else False)

    def _depth_to_space(self, node: cst.Call) -> _Tensor | None:
        """``tf.nn.depth_to_space(x, r)`` on a feature map of a model converted to channels-first (keras-io's
        super_resolution_sub_pixel): TensorFlow splits the channels as (r, r, C), row offset first, channel last
        (not torch's pixel_shuffle order, (C, r, r)); on (batch, r*r*C, h, w) that is, exactly,
        ``x.unflatten(1, (r, r, -1)).permute(0, 3, 4, 1, 5, 2).flatten(4, 5).flatten(2, 3)``, written in place.
        The block size must be known where the model is built (a literal, a module constant, a value pinned)."""
        params = ("input", "block_size", "data_format", "name")
        bound: dict[str, cst.BaseExpression] = {}
        for i, a in enumerate(node.args):
            key = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else None)
            if a.star or key not in params or key in bound:
                raise _Refused(node, f"{code(node)}: arguments of tf.nn.depth_to_space not bound (input, block_size, "
                                     "data_format, name)", "unsupported-argument")
            bound[key] = a.value
        if "input" not in bound or "block_size" not in bound:
            raise _Refused(node, "tf.nn.depth_to_space(...) without its input and block_size", "unsupported-argument")
        fmt = literal_value(bound["data_format"], NOT_LITERAL) if "data_format" in bound else "NHWC"
        if fmt != "NHWC":
            raise _Refused(node, f"data_format={code(bound['data_format'])}: only NHWC (channels-last, Keras's) "
                                 "is followed in a model converted to channels-first", "unsupported-argument")
        try:
            r = self._static(bound["block_size"], {})
        except (_Refused, TypeError, ValueError, ZeroDivisionError):
            r = None
        block = bound["block_size"]
        if is_int(r) and not isinstance(r, bool) and r >= 2:
            r_text = str(int(r))
        elif isinstance(block, cst.Name) and block.value in self.local and self.fn is not None \
                and self.helper_call is None and not self.generating:
            r = None  # a builder parameter: forward reads it from the module (self.<name>, kept by __init__)
            self._tensor(block)
            r_text = code(self._out_expr(block))
        else:
            raise _Refused(node, f"block_size={code(block)}: an int (at least 2) known where the model is built, or "
                                 "a parameter of the builder, is needed to write tf.nn.depth_to_space out",
                           "unsupported-argument")
        t = self._tensor(bound["input"])
        if t is None:
            return None
        if t.shape is None or len(t.shape) != 3 or t.last or t.flat is not None:
            raise _Refused(node, f"{code(node.func)}(...) on a tensor that is not a channels-first image map of "
                                 "known rank here (batch, height, width, channels in Keras): not followed")
        h, w, c = t.shape
        shape = (None, None, None) if r is None else (
            h * r if is_int(h) else None, w * r if is_int(w) else None,
            c // (r * r) if is_int(c) and c % (r * r) == 0 else None)
        inp = self._out_expr(bound["input"])
        text = code(inp) if isinstance(inp, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({code(inp)})"
        self.ctx.settle(node)
        self.replace[id(node)] = expr(f"{text}.unflatten(1, ({r_text}, {r_text}, -1)).permute(0, 3, 4, 1, 5, 2)"
                                      ".flatten(4, 5).flatten(2, 3)")
        return _Tensor(shape, self._node(_Op("op", self.ctx.version == 2), [t.node], node), None, False)

    def _written_op(self, node: cst.Call, q: str) -> _Tensor | None:
        """An elementwise function on one tensor (``tf.nn.swish(x)``) in code fwport writes out itself (a
        helper's class, a loop written out): translated here by its rule, the same in either layout."""
        t = self._tensor(node.args[0].value)
        if t is None:
            return None
        if t.flat is not None:
            raise _Refused(node, f"{code(node.func)}(...) on a flattened channels-first map")
        rule = self.ctx.pack.by_name.get(q)
        if rule is None or rule.kind != "function":
            raise _Refused(node, f"{code(node.func)}(...) has no tf2torch rule to write it with", "no-rule")
        arg = node.args[0].with_changes(value=self._out_expr(node.args[0].value))
        m = map_call(node.with_changes(args=[arg]), rule, self.ctx, node)
        new = build_call(m, self.ctx) if not m.failed else None
        if new is None:
            self.errors += 1  # the rule reported why
            raise _Refused(node, "", "")
        self.ctx.settle(node)
        self.replace[id(node)] = new
        return _Tensor(t.shape, self._node(_Op("op", self.ctx.version == 2), [t.node], node), None, t.last)

    def _apply(self, layer: _Layer, call: cst.Call) -> _Tensor | None:
        """A layer called on its input(s)."""
        if layer.kind == "rule" and layer.rule.emit.get("shape") in MULTI_INPUT:
            return self._apply_multi(layer, call)
        args = [a for a in call.args if a.keyword is None and not a.star]
        if layer.kind == "rule" and layer.rule.emit.get("shape") in ("rnn", "rnn-layer") and \
                _rnn_call_args(call) is not None:
            return self._apply_rnn(layer, call)
        if layer.kind in ("user", "given") and (len(args) != 1 or len(call.args) != 1):
            return self._apply_user_args(layer, call)
        if len(args) != 1 or len(call.args) != 1:
            raise _Refused(call, f"{code(call).strip()}: a layer call with arguments other than its input "
                                 "(training=, mask=, ...) is not followed yet")
        arg = args[0].value
        if layer.kind == "merge":
            merge_q = layer.rule
            op = MERGE_LAYERS[merge_q]
            for a in layer.call.args:
                kw = a.keyword.value if a.keyword else None
                if kw not in (("axis", "name") if op == "cat" else ("name",)):
                    raise _Refused(a, f"{merge_q.rsplit('.', 1)[-1]} argument {code(a).strip().rstrip(',')} is not "
                                      "followed", "unsupported-argument")
            return self._merge(call, op, [args[0]] + [a for a in layer.call.args if a.keyword
                                                      and a.keyword.value == "axis"],
                               merge_q.rsplit(".", 1)[-1], layer)
        if layer.kind == "given" and isinstance(arg, (cst.List, cst.Tuple)):
            raise _Refused(call, f"{code(call).strip()}: a module given to the model called on a list of tensors: a "
                                 "translated functional model takes its inputs as separate arguments, a translated "
                                 "layer class as the list, and fwport does not know which one it is given; call it "
                                 "on separate arguments, or translate this model by hand")
        if layer.kind == "user" and isinstance(arg, (cst.List, cst.Tuple)):
            return self._apply_user_list(layer, call, arg)
        if layer.kind == "rule" and layer.rule.id == "lambda-layer" and isinstance(arg, (cst.List, cst.Tuple)):
            return self._apply_lambda_list(layer, call, arg)
        if layer.kind == "submodel" and isinstance(arg, (cst.List, cst.Tuple)):
            return self._apply_submodel_list(layer, call, arg)
        t = self._tensor(arg)
        if t is None and self._built_value(arg):
            # Keras calls the layer eagerly where the model is built: its output is a constant of the model
            raise _Refused(arg, f"{code(layer.call.func) if layer.kind != 'given' else layer.var}(...) called on "
                                f"{code(arg)}, a value computed where the model is built, not a tensor of the model: "
                                "Keras runs the layer once there and the model holds its output as a constant, so the "
                                "layer is not in model.layers and its weights are never trained (a positional "
                                "embedding written this way stays at its random initial values); fwport does not "
                                "translate that: to train the layer, as is usually meant, call it on a tensor of the "
                                "model (in a layer class whose call makes the positions: tf.range(tf.shape(x)[1])) and "
                                "translate again, or write nn.Embedding on torch.arange(...) in forward by hand")
        if t is None:
            raise _Refused(arg, f"{code(arg)}: the input of a layer of the functional model must be a tensor of the "
                                "model (a list of tensors feeds only merge layers here)")
        out_mask, pass_mask = self._mask_flow(layer, t, call, arg)
        self._built_for(layer, t, call)
        through = self.layout == "nchw" and layer.kind == "rule" and self._after_last(layer, t, call)
        out = _Tensor(layer.out[0], self._node(layer.op, [t.node], call, out_mask), layer.out[1],
                      layer.kind in ("user", "given") and not layer.keras_back or through)
        new: cst.BaseExpression = cst.Call(_module_ref(layer),
                                           [cst.Arg(self._out_expr(arg)), *self._mask_arg(t, pass_mask)])
        if layer.permute_in:
            new = new.with_changes(args=[cst.Arg(expr(f"{_paren(self._out_expr(arg))}.movedim(-1, 1)"))])
        if layer.keras_in:
            new = new.with_changes(args=[cst.Arg(expr(f"{_paren(self._out_expr(arg))}.movedim(1, -1)"))])
        if layer.keras_back:
            new = cst.Call(cst.Attribute(new, cst.Name("movedim")), [cst.Arg(expr("-1")), cst.Arg(cst.Integer("1"))])
        if layer.activation is not None:
            new = expr(layer.activation.format(code(new)))
        if layer.movedim:
            new = cst.Call(cst.Attribute(new, cst.Name("movedim")), [cst.Arg(expr("-1")), cst.Arg(cst.Integer("1"))])
        if layer.permute_back:
            new = cst.Call(cst.Attribute(new, cst.Name("movedim")), [cst.Arg(cst.Integer("1")), cst.Arg(expr("-1"))])
        self.replace[id(call)] = new
        return out

    def _mask_flow(self, layer: _Layer, t: _Tensor, call: cst.Call, arg: cst.BaseExpression,
                   with_states: bool = False) -> tuple[str | None, bool]:
        """Keras's mask through this layer call (masks.flow): (the mask its output carries, whether its
        module is called with it); one layer called on masked and unmasked tensors is refused."""
        user = masks.user_mask(self.ctx.analyses.get("parsed", (None,))[0], layer.rule) if layer.kind == "user" \
            else None
        try:
            out_mask, pass_mask = masks.flow(layer.kind, layer.rule, self.sized_calls.get(id(layer.call), layer.call),
                                             t.node.mask, code(self._out_expr(arg)),
                                             self.ctx.version, with_states, user)
        except ValueError as e:
            raise _Refused(call, str(e)) from None
        if user is not None:
            if user[0]:  # its call()'s mask is what Keras gives it here: the subclass pass keeps the parameter
                self.ctx.analyses.setdefault(masks.MASK_CALLERS, {}).setdefault(layer.rule, set()).add(id(layer.call))
            self.mask_flows.add(id(call))
            return out_mask, pass_mask
        if layer.masked is not None and layer.masked != pass_mask:
            raise _Refused(call, f"the layer {layer.var} is called on a tensor that carries Keras's mask and on one "
                                 "that does not: one torch module cannot take both; use two layers")
        layer.masked = pass_mask
        self.mask_flows.add(id(call))
        if pass_mask:
            self.mask_layers.add(id(layer.call))
        return out_mask, pass_mask

    @staticmethod
    def _mask_arg(t: _Tensor, pass_mask: bool) -> list[cst.Arg]:
        return [cst.Arg(expr(t.node.mask), keyword=cst.Name("mask"), equal=cst.AssignEqual(
            cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))] if pass_mask else []

    def _built_value(self, arg: cst.BaseExpression) -> bool:
        """``tf.range(n)`` (or ``positions``, bound once in the builder to such a call): a tensor that a
        TensorFlow / NumPy function makes from no tensor of the model, one that exists where the model is built."""
        if isinstance(arg, cst.Name) and arg.value in self.local and self.fn is not None \
                and isinstance(self.fn.body, cst.IndentedBlock):
            bound = [st for st in self.fn.body.body if arg.value in _names_bound_in(st)]
            small = bound[0].body[0] if len(bound) == 1 and isinstance(bound[0], cst.SimpleStatementLine) \
                and len(bound[0].body) == 1 else None
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)):
                return False
            arg = small.value
        if not isinstance(arg, cst.Call) or _names_in(arg) & set(self.env):
            return False
        q = self.ctx.imports.resolve(arg.func) or dotted_text(arg.func)
        return bool(q) and q.rsplit(".", 1)[-1] in _MADE_TENSORS and (
            self.ctx.imports.is_source(q) or q.split(".")[0] in ("numpy", "np"))

    def _after_last(self, layer: _Layer, t: _Tensor, call: cst.Call) -> bool:
        """A rule layer of a channels-first graph called on the output of a layer class of this file, which
        keeps Keras's channels-last layout (``t.last``, its rank unknown): a channels-first torch module gets
        it moved to channels-first (``.movedim(-1, 1)``, nothing on a (batch, features) tensor); an
        elementwise layer passes it on still channels-last (True); any other layer is refused, as is one
        layer called on both kinds of tensor."""
        if layer.last_in is None:
            layer.last_in = t.last
        elif layer.last_in != t.last:
            raise _Refused(call, f"the layer {layer.var} is called on the channels-last output of a layer class of "
                                 "this file and on a channels-first tensor: one torch module cannot take both")
        if not t.last:
            return False
        if layer.layout_bound:
            layer.permute_in = True
            return False
        if layer.rule.id in _ELEMENTWISE:
            return True
        raise _Refused(call, f"{code(layer.call.func)} on the output of a layer class of this file, which keeps "
                             "Keras's channels-last layout, of a rank fwport cannot tell, in a model converted to "
                             "channels-first: where its channels are is unknown; give the layer class's output a "
                             "known shape (a Reshape after it) or translate this model by hand", "shape-unknown")

    def _built_for(self, layer: _Layer, t: _Tensor, call: cst.Call) -> None:
        """The layer's torch module, built for the input ``t`` at its first call; a later call must see an
        input of the same shape (one torch module cannot serve two)."""
        key = (t.shape, t.flat)
        if layer.module is None:
            mark = len(self.ctx.pending)
            try:
                self._translate(layer, t)
            finally:
                for p in self.ctx.pending[mark:] if layer.site is not None else ():
                    p.node = layer.site  # (a Sequential factory's layers are copies)
        elif layer.kind == "given" and t.flat is None and layer.in_key[1] is None and (
                self.layout != "nchw" or (t.shape is None or len(t.shape) > 1) == layer.keras_in):
            pass  # a module given to the model: called as it is on any input the same moves fit
        elif layer.in_key != key:
            raise _Refused(call, f"the layer {layer.var} is called on inputs of different shapes "
                                 f"({layer.in_key[0]} and {t.shape}): one torch module cannot be built for both")
        if layer.op is None:
            layer.op = _Op("layer", True)
            self.layer_of[id(layer.op)] = layer

    def _user_tuple(self, call: cst.Call, out: _Tensor, n: int) -> _Tensor | _Multi:
        """``attn_output, attn_scores = ClassAttention(...)(x1)`` (keras-io cait): the call of a layer class of the
        file whose ``call`` returns a literal tuple of ``n`` (_returned_tuple), its module called as it is (no
        layout move or activation around it): its ``n`` tensors, unpacked where it stands as the forward's
        statement (the module's forward returns the same tuple); ``out`` as it was otherwise."""
        layer = self.layer_of.get(id(out.node.op))
        new = self.replace.get(id(call))
        if (layer is None or layer.kind != "user" or out.node.where is not call or _returned_tuple(self.ctx, layer.rule) != n
                or not isinstance(new, cst.Call) or code(new.func) != code(_module_ref(layer))):
            return out  # (a layout move, an activation around the call: not a tuple's)
        return _Multi([_Tensor(None, out.node, None, out.last) for _ in range(n)])

    def _apply_rnn(self, layer: _Layer, call: cst.Call) -> _Tensor | _Multi:
        """A recurrent layer called as Keras calls it: ``layer(x, initial_state=s)`` (s a tensor, or a list of
        them for an LSTM), or one that returns its final states (return_state=True, unpacked where it is
        called): the Lazy<kind> helper, which takes and returns what Keras's layer does."""
        x, state = _rnn_call_args(call)
        if isinstance(state, cst.Name) and state.value in self.lists:  # states = [h, c]: the list, in place
            state = self.lists[state.value]
        returns_state = _lit_of(layer.call, "return_state") is True
        states = list(state.elements) if isinstance(state, (cst.List, cst.Tuple)) else ([state] if state else [])
        state_ts = []
        for e in states:
            v = e.value if isinstance(e, cst.Element) else e
            st = self._tensor(v) if not isinstance(e, cst.StarredElement) else None
            if st is None:
                raise _Refused(v, f"{code(v)}: the initial state of {code(layer.call.func)} must be a tensor of the "
                                  "functional model")
            state_ts.append(st)
        t = self._tensor(x)
        if t is None:
            raise _Refused(x, f"{code(x)}: the input of a layer of the functional model must be a tensor of the model")
        out_mask, pass_mask = self._mask_flow(layer, t, call, x, state is not None)
        if state or returns_state:
            self.ctx.analyses.setdefault(RNN_CALLED_AS_KERAS, {})[id(layer.call)] = layer.call
        self._built_for(layer, t, call)
        node = self._node(layer.op, [t.node, *(st.node for st in state_ts)], call, out_mask)
        new_args = [cst.Arg(self._out_expr(x)), *self._mask_arg(t, pass_mask)]
        if state is not None:
            new_args.append(cst.Arg(self._out_expr(state), keyword=cst.Name("initial_state"),
                                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
        self.replace[id(call)] = cst.Call(_module_ref(layer), new_args)
        if not returns_state:
            return _Tensor(layer.out[0], node, layer.out[1])
        units = _lit_of(layer.call, "units", 0)
        units = units if is_int(units) else None
        sequences = _lit_of(layer.call, "return_sequences") is True
        y = ((t.shape[0] if t.shape else None), units) if sequences else (units,)
        n_states = 2 if recurrent_kind(layer.call, layer.rule, self.ctx) == "lstm" else 1
        return _Multi([_Tensor(y, node), *(_Tensor((units,), node) for _ in range(n_states))])

    def _apply_multi(self, layer: _Layer, call: cst.Call) -> _Tensor:
        """A layer called on several tensors (MultiHeadAttention's query, value, key, attention_mask):
        its torch module takes Keras's call signature, so the call stays as written, its tensors replaced
        and training= dropped (torch takes the mode from .train()/.eval()). Its input shape is the first
        tensor's (the query's)."""
        shape_fn = layer.rule.emit.get("shape")
        bound = bind_call(call, shape_fn)
        hub = shape_fn in kerashub.CALLS
        if bound is None or not ({"query", "value"} <= set(bound) or "inputs" in bound
                                 or hub and MULTI_INPUT[shape_fn][0] in bound):
            raise _Refused(call, f"{code(call).strip()}: the call's arguments do not bind to "
                                 f"({', '.join(MULTI_INPUT[shape_fn])})")
        tensors: list[_Tensor] = []
        new_args = []
        scores = False
        for name, a in bound.items():
            if name == "training":
                continue
            if name in TENSOR_PARAMS:
                items = ([e.value for e in a.value.elements] if isinstance(a.value, (cst.List, cst.Tuple))
                         and name in ("inputs", "mask") else [a.value])
                for item in items:
                    if name == "mask" and literal_value(item, NOT_LITERAL) is None:
                        continue  # mask=[None, value_mask]
                    t = self._tensor(item)
                    if t is None:
                        raise _Refused(a, f"{code(item)}: the {name} of {code(layer.call.func)} must be a tensor of "
                                          "the model")
                    if t.flat is not None:
                        raise _Refused(a, f"{code(item)}: a flattened channels-first map as the {name}")
                    tensors.append(t)
            elif name == "return_attention_scores" and literal_value(a.value, None) is True and not hub and \
                    self.unpacking and call is self.unpacked_call:
                scores = True  # out, scores = mha(q, v, return_attention_scores=True): the module returns both
            elif literal_value(a.value, NOT_LITERAL) not in (False, True) or (
                    name == "return_attention_scores" and literal_value(a.value, None) is True):
                raise _Refused(a, f"{name}={code(a.value)}: fwport follows a literal True/False here, and "
                                  "return_attention_scores=True only where the call's two outputs are unpacked "
                                  "(out, scores = ...)", "unsupported-argument")
            new_args.append(a.with_changes(value=self._out_expr(a.value), comma=cst.MaybeSentinel.DEFAULT))
        t = tensors[0]
        masked = [n for n in ("attention_mask", "query_mask", "value_mask", "key_mask") if n in bound]
        if "use_causal_mask" in bound and literal_value(bound["use_causal_mask"].value, None) is not False:
            masked.append("use_causal_mask")
        if shape_fn == "multi-head-attention" and t.shape is not None and len(t.shape) > 2 and masked:
            raise _Refused(call, f"{code(call.func)}(...) on a query of several step axes, shape {_shown_shape(t.shape)}, "
                                 f"with {masked[0]}: fwport follows masks on (batch, steps, features) inputs only")
        out_mask = None
        if hub:
            out_mask, extra = self._kerashub_masks(layer, call, bound, shape_fn, tensors)
            new_args += [cst.Arg(expr(e.split("=", 1)[1]), keyword=cst.Name(e.split("=", 1)[0]), equal=cst.AssignEqual(
                cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))) for e in extra]
            self.ctx.analyses[kerashub.CROSS] = "encoder_sequence" in bound
        try:
            self._built_for(layer, t, call)
        finally:
            self.ctx.analyses.pop(kerashub.CROSS, None)
        out = _Tensor(layer.out[0], self._node(layer.op, [x.node for x in tensors], call, out_mask), layer.out[1],
                      False)
        self.replace[id(call)] = cst.Call(_module_ref(layer), new_args)
        if scores:  # the attention scores (batch, heads, query steps, value steps), Keras's second output
            return _Multi([out, _Tensor(None, out.node)])
        return out

    def _kerashub_masks(self, layer: _Layer, call: cst.Call, bound: dict, shape_fn: str,
                        tensors: list[_Tensor]) -> tuple[str | None, list[str]]:
        """Keras's mask at a KerasHub layer's call (kerashub.mask_flow): the mask its output carries and the
        keyword arguments that give the module the masks Keras reads. A masked tensor whose mask Keras's
        MultiHeadAttention deletes (a TransformerEncoder's input) cannot also feed another layer: refused."""
        by_name = {}
        for name, a in bound.items():
            t = self._tensor(a.value) if name in kerashub.TENSORS else None
            if t is not None:
                by_name[name] = t
        first = by_name[MULTI_INPUT[shape_fn][0]]
        masks_of = {n: t.node.mask for n, t in by_name.items()}
        extra, out_mask, strips = kerashub.mask_flow(shape_fn, self.sized_calls.get(id(layer.call), layer.call),
                                                     bound, masks_of, code(self._out_expr(bound[MULTI_INPUT[shape_fn][0]].value)))
        stripped = self.ctx.analyses.setdefault(kerashub.STRIPPED, {})  # node id → id of the call that stripped it
        for t in tensors:
            if id(t.node) in stripped and t.node.mask is not None:
                raise _Refused(call, kerashub.STRIPPED_WHY)
        if strips:
            if any(any(p is first.node for p in n.parents) for n in self.nodes):
                raise _Refused(call, kerashub.STRIPPED_WHY)
            stripped[id(first.node)] = id(call)
        self.mask_flows.add(id(call))
        return out_mask, extra

    def _apply_lambda_list(self, layer: _Layer, call: cst.Call, arg) -> _Tensor:
        """``layers.Lambda(euclidean_distance)([a, b])`` (a siamese network's distance): the Lambda module called on
        the list, as Keras calls the function on it; the output's shape is not known here (the layers after it are
        lazy). Built for the list's first tensor (one shape-free module: the function is the same)."""
        ts = []
        for e in arg.elements:
            t = self._tensor(e.value) if not isinstance(e, cst.StarredElement) else None
            if t is None:
                raise _Refused(e, f"{code(e.value)}: not a tensor of the functional model")
            if t.flat is not None:
                raise _Refused(e, f"{code(e.value)}: a flattened channels-first map given to {code(layer.call.func)}")
            ts.append(t)
        if not ts:
            raise _Refused(arg, f"{code(layer.call.func)} called on an empty list")
        self._built_for(layer, ts[0], call)
        out = _Tensor(None, self._node(layer.op, [t.node for t in ts], call), None)
        self.replace[id(call)] = cst.Call(_module_ref(layer), [cst.Arg(self._out_expr(arg))])
        return out

    def _apply_submodel_list(self, layer: _Layer, call: cst.Call, arg) -> _Tensor:
        """A module-level model of the file called on a list of tensors, one per input (keras-io's transformer:
        ``decoder([decoder_inputs, encoder_outputs])``): its translated forward takes them as separate arguments, in
        the order of its keras.Model(...) inputs. Followed in a graph that keeps Keras's layout, each tensor of the
        shape the model declared (or unknown), the model of one output and no dict of inputs."""
        info = self.prior_models[layer.rule]
        ins, outs = info["inputs"], info["outputs"]
        ts = []
        for e in arg.elements:
            t = self._tensor(e.value) if isinstance(e, cst.Element) else None
            if t is None:
                raise _Refused(e, f"{code(e.value) if isinstance(e, cst.Element) else code(e)}: not a tensor of the "
                                  "functional model")
            ts.append(t)
        loose = info.get("from_builder", False)
        why = ("a model converted to channels-first" if self.layout == "nchw" else
               f"{len(ts)} tensors for its {len(ins)} inputs" if len(ts) != len(ins) else
               "a model taking a dict of inputs" if info.get("dict_input") else
               "a model of several outputs" if len(outs) != 1 else None)
        if why is None:
            bad = next(((k, t.shape) for k, (t, d) in enumerate(zip(ts, ins))
                        if t.shape is not None and not _fits(d, t.shape, loose)), None)
            if bad is not None:
                why = f"its input {bad[0]} given a tensor of shape {bad[1]}, not its shape {ins[bad[0]]}"
        if why is not None:
            raise _Refused(call, f"{code(call).strip()}: the model {layer.rule} called on a list of tensors is "
                                 f"followed in a graph keeping Keras's layout, one tensor of its shape per input, a "
                                 f"model of one output and no dict of inputs; not here ({why})")
        key = (tuple(t.shape for t in ts), None)
        if layer.module is None:
            layer.attr = layer.attr or self._attr_name(layer)
            layer.in_key = key
            layer.out = (outs[0], None)
            layer.module = cst.Name(layer.rule)
            self.pending_init.append(f"self.{layer.attr} = {layer.rule}")
        elif layer.in_key != key:
            raise _Refused(call, f"the model {layer.rule} is called on inputs of different shapes: not followed")
        if layer.op is None:
            layer.op = _Op("layer", True)
            self.layer_of[id(layer.op)] = layer
        out = _Tensor(layer.out[0], self._node(layer.op, [t.node for t in ts], call), None)
        self.replace[id(call)] = cst.Call(_module_ref(layer), [cst.Arg(self._out_expr(e.value)) for e in arg.elements])
        return out

    def _apply_user_list(self, layer: _Layer, call: cst.Call, arg) -> _Tensor:
        """A layer class of this file called on a list of tensors (``Sampling()([z_mean, z_log_var])``)."""
        ts, moved = [], set()
        for e in arg.elements:
            t = self._tensor(e.value) if not isinstance(e, cst.StarredElement) else None
            if t is None:
                raise _Refused(e, f"{code(e.value)}: not a tensor of the functional model")
            ts.append(t)
            if self._user_input(layer, e, t):
                moved.add(id(e.value))
        return self._user_call(layer, call, ts, [cst.Arg(self._moved_in(arg, moved))], moved=bool(moved))

    def _apply_user_args(self, layer: _Layer, call: cst.Call) -> _Tensor:
        """A layer class of this file called on several arguments, positional or keyword
        (``TransformerEncoder(...)(source=x, source_mask=source != 0)``): each a tensor of the model, a
        list of them, or a value that holds none (``training=False``, a literal); its translated
        forward takes them as its call did, so the call stays as written with its tensors replaced. A module
        given to the model (``encoder(x, attention_mask=m)``) is called with its keywords as written (one
        tensor first): the translation of the object the Keras code passes takes what its call takes."""
        ts: list[_Tensor] = []
        moved: set[int] = set()  # the channels-first maps moved to Keras's layout for the call (_user_input)
        params = _call_params(self.ctx, layer.rule) if layer.kind == "user" else ([], None)
        for i, a in enumerate(call.args):
            if a.star:
                raise _Refused(a, f"{code(a).strip().rstrip(',')}: a starred argument of a layer call is not followed")
            if a.keyword is not None:
                name = a.keyword.value if params is None or params[1] is None or a.keyword.value in params[1] else None
            elif layer.kind == "given":
                if i or isinstance(a.value, (cst.List, cst.Tuple)):
                    raise _Refused(a, f"{code(a).strip().rstrip(',')}: a module given to the model called with a "
                                      "second positional argument or a list: a Keras model takes it as training= "
                                      "(or its inputs as a list), a layer class as its call() says, and fwport does not "
                                      "know which one it is given; translate this model by hand")
                name = "inputs"
            else:
                name = params[0][i] if params is not None and i < len(params[0]) else None
            if name is None or name == "training" or name == "mask" and not _mask_kept(self.ctx, layer):
                # the subclass pass drops call()'s training and mask parameters (torch: .train()/.eval(), no mask)
                written, cls = code(a).strip().rstrip(","), code(layer.call.func)
                raise _Refused(a, f"{written}: the translated {cls}.forward takes no {name} (torch modules take the "
                                  "mode from .train()/.eval() and propagate no mask): not followed yet" if name else
                                  f"{written}: does not bind to the parameters of {cls}.call: not followed")
            items = [e.value for e in a.value.elements] if isinstance(a.value, (cst.List, cst.Tuple)) else [a.value]
            for item in items:
                t = self._tensor(item)
                if t is not None:
                    ts.append(t)
                    if self._user_input(layer, a, t):
                        moved.add(id(item))
                elif _names_in(item) & (set(self.env) | self.local):
                    raise _Refused(a, f"{code(item)}: an argument of {code(layer.call.func)} that is neither a tensor of "
                                      "the functional model nor a value without one is not followed")
        if not ts:
            raise _Refused(call, f"{code(call).strip()}: a layer call on no tensor of the functional model")
        args = [a.with_changes(value=self._moved_in(a.value, moved)) for a in call.args]
        out_mask = None
        if layer.kind == "user" and any(t.node.mask is not None for t in ts):
            self._user_masks(layer, call, ts, params)
            first = call.args[0].value
            out_mask, pass_mask = self._mask_flow(layer, ts[0], call, first, True)
            args += self._mask_arg(ts[0], pass_mask)
        return self._user_call(layer, call, ts, args, out_mask, bool(moved))

    def _user_masks(self, layer: _Layer, call: cst.Call, ts: list[_Tensor], params) -> None:
        """A layer class of this file called on several tensors, one of which carries Keras's mask: Keras 3
        fills a ``<name>_mask`` parameter of its call() from the argument ``name``'s mask, which is not
        followed; Keras reads the first argument's mask only (a mask on another one alone is refused, as
        is a first argument given by keyword or as a list)."""
        names = params[1] if params is not None and params[1] is not None else set()
        if any(n.endswith("_mask") for n in names) and self.ctx.version != 2:
            raise _Refused(call, f"{code(layer.call.func)}(...) on tensors that carry Keras's mask: Keras 3 fills its "
                                 "call()'s <argument>_mask parameters from them, which fwport does not follow: pass "
                                 "them explicitly")
        if ts[0].node.mask is None or isinstance(call.args[0].value, (cst.List, cst.Tuple)) \
                or call.args[0].keyword is not None:
            raise _Refused(call, masks.refusal(next(t.node.mask for t in ts if t.node.mask is not None)))

    def _user_input(self, layer: _Layer, where: cst.CSTNode, t: _Tensor) -> bool:
        """Whether ``t``, one of several tensors given to a layer class of this file (whose body keeps Keras's
        channels-last layout) or to a module given to the model, is moved to that layout for the call
        (``x.movedim(1, -1)``): a map of a channels-first model (or one of unknown rank, where the move is a
        no-op on (batch, features)), as the call on one tensor moves it (``_translate``). A flattened map
        (features in (c, h, w) order) is refused."""
        if t.flat is not None:
            what = f"{layer.rule}, a module given to the model and called with Keras's channels-last layout" \
                if layer.kind == "given" else \
                f"{code(layer.call.func)}, a layer of this file whose body keeps Keras's channels-last layout"
            raise _Refused(where, f"{what}, on a flattened channels-first feature map (its features in (c, h, w) "
                                  "order): call it before the convolutions, or translate this model by hand")
        return self.layout == "nchw" and not t.last and (t.shape is None or len(t.shape) > 1)

    def _moved_in(self, value: cst.BaseExpression, moved: set[int]) -> cst.BaseExpression:
        """An argument of a layer class's call with the replacements made and the maps in ``moved`` (ids of
        the argument or of its list's elements) moved to channels-last."""
        if id(value) in moved:
            return expr(f"{_paren(self._out_expr(value))}.movedim(1, -1)")
        if isinstance(value, (cst.List, cst.Tuple)) and any(id(e.value) in moved for e in value.elements):
            return value.with_changes(elements=[e.with_changes(value=self._moved_in(e.value, moved))
                                                for e in value.elements])
        return self._out_expr(value)

    def _user_call(self, layer: _Layer, call: cst.Call, ts: list[_Tensor], args: list[cst.Arg],
                   mask: str | None = None, moved: bool = False) -> _Tensor:
        """A layer class of this file (or a given module) called on several tensors; where maps were moved to
        Keras's layout for it (``moved``), its output is moved back to channels-first (a no-op on (batch,
        features)), as the call on one tensor does."""
        key = tuple((t.shape, t.flat) for t in ts)
        if layer.module is None:
            layer.attr = layer.attr or self._attr_name(layer)
            module = cst.Name(layer.rule) if layer.kind == "given" else layer.call
            layer.in_key, layer.module, layer.out = key, module, (None, None)
            self.pending_init.append(f"self.{layer.attr} = {code(module)}")
        if layer.op is None:
            layer.op = _Op("layer", True)
        new: cst.BaseExpression = cst.Call(_module_ref(layer), args)
        if moved:
            new = cst.Call(cst.Attribute(new, cst.Name("movedim")), [cst.Arg(expr("-1")), cst.Arg(cst.Integer("1"))])
        self.replace[id(call)] = new
        return _Tensor(None, self._node(layer.op, [t.node for t in ts], call, mask), None, not moved)

    def _out_expr(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """The output for an input expression, with the replacements made inside it."""
        if not self.replace:
            return node
        return rewrite(node, _Replace(self.replace), fresh=True)

    def _read_sizes(self, v: cst.BaseExpression):
        """The value of an argument that reads tensors of the model only through their static sizes, each known
        here (keras-io's mobilevit ``hidden_units=[x.shape[-1] * 2, x.shape[-1]]``, tabtransformer ``[factor *
        features.shape[-1] for factor in (2, 1)]``): Keras gives the function those ints, computed once as the
        model is built; a number, or a list / tuple of numbers. NOT_LITERAL for anything else (no such read, a
        size not known here, a tensor read otherwise)."""
        reads = _shape_reads(v)
        if not reads or not all(isinstance(self.env.get(n.value), _Tensor) for n in reads):
            return NOT_LITERAL
        shapes = {n.value: self.env[n.value].shape for n in reads if self.env[n.value].shape is not None}
        sized = rewrite(v, _ShapeSubstitute(shapes), fresh=True)
        if _shape_reads(sized) or _names_in(sized) & (set(self.env) | self.local):
            return NOT_LITERAL  # (a size unknown here, or the value reads a tensor or a builder value)
        if isinstance(sized, cst.ListComp) and isinstance(sized.elt, cst.BaseExpression) \
                and sized.for_in.inner_for_in is None and not sized.for_in.ifs and not sized.for_in.is_async \
                and isinstance(sized.for_in.target, cst.Name):
            items = self._static_or_none(sized.for_in.iter)
            if not isinstance(items, (list, tuple)):
                return NOT_LITERAL
            var = sized.for_in.target.value
            out = [self._static_or_none(rewrite(sized.elt, _Substitute({var: _literal_node(x)}), fresh=True))
                   for x in items]
        elif isinstance(sized, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement)
                                                                   for e in sized.elements):
            out = [self._static_or_none(e.value) for e in sized.elements]
            out = out if isinstance(sized, cst.List) else tuple(out)
        else:
            out = self._static_or_none(sized)
        values = out if isinstance(out, (list, tuple)) else [out]
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
            return NOT_LITERAL
        return out

    def _static_or_none(self, node: cst.BaseExpression):
        try:
            return self._static(node, {})
        except (_Refused, TypeError, ValueError, ZeroDivisionError, OverflowError):
            return None

    def _known_item(self, v: cst.BaseExpression):
        """``n_stages[1]`` given to a helper, ``n_stages`` a name of this builder bound to a list or tuple of
        known ints (``_Builder.known_shapes``: forgotten where a statement binds it again), the index a literal
        int: that item, as an int (adamatch's get_network); NOT_LITERAL otherwise."""
        if not (isinstance(v, cst.Subscript) and isinstance(v.value, cst.Name) and len(v.slice) == 1
                and isinstance(v.slice[0].slice, cst.Index)):
            return NOT_LITERAL
        known = self.known_shapes.get(v.value.value)
        i = literal_value(v.slice[0].slice.value, NOT_LITERAL)
        if known is None or v.value.value in self.env or not is_int(i) or not -len(known) <= i < len(known) \
                or not is_int(known[i]):
            return NOT_LITERAL
        return int(known[i])

    def _known_target_shape(self, call: cst.Call) -> cst.Call:
        """``layers.Reshape(target_shape=new_shape)`` after ``new_shape = ((img_width // 4), (img_height // 4) *
        64)`` in the builder (keras-io's captcha_ocr): the tuple of ints the name holds there written in its place
        (``_Builder.known_shapes``, forgotten where a statement binds the name again), as keras.Input(shape=) reads
        it. The call unchanged for anything else."""
        for i, a in enumerate(call.args):
            kw = a.keyword.value if a.keyword else ("target_shape" if i == 0 and not a.star else None)
            if kw != "target_shape" or not isinstance(a.value, cst.Name):
                continue
            known = self.known_shapes.get(a.value.value)
            if known is None or a.value.value in self.env or not all(is_int(d) for d in known):
                return call
            value = _literal_node(tuple(int(d) for d in known))
            return call.with_changes(args=[*call.args[:i], a.with_changes(value=value), *call.args[i + 1:]])
        return call

    def _known_axis(self, call: cst.Call) -> cst.Call:
        """``layers.BatchNormalization(axis=bn_axis)`` after ``bn_axis = 3`` in the builder (Keras's ResNet50:
        ``bn_axis = 3 if backend.image_data_format() == 'channels_last' else 1``, or the same choice as an if
        statement decided where the model is built): the int the name holds there (``_Builder.known_ints``,
        forgotten where a statement binds the name again) written in its place, as a literal axis. The call
        unchanged for anything else."""
        for i, a in enumerate(call.args):
            if a.keyword is None or a.keyword.value != "axis" or not isinstance(a.value, cst.Name) \
                    or a.value.value in self.env:
                continue
            value = self.known_ints.get(a.value.value)
            if not is_int(value):
                return call
            return call.with_changes(args=[*call.args[:i], a.with_changes(value=_literal_node(int(value))),
                                           *call.args[i + 1:]])
        return call

    def _emit(self, call: cst.Call, rule, shape: tuple | None, flat: tuple | None, t: _Tensor | None = None):
        """One rule layer translated for an input: (emission, whether its channels-last output must be
        moved to channels-first where it is called)."""
        layout = self.layout
        movedim = False
        node, call = call, self.sized_calls.get(id(call), call)  # findings at the source's call
        if rule.emit.get("shape") == "reshape":
            call = self._known_target_shape(call)
        call = self._known_axis(call)
        if flat is not None and rule.id not in _CARRIES_FLATTEN and rule.emit.get("shape") not in _READS_FLATTEN:
            raise _Refused(node, f"{code(call.func)} after the Flatten of a feature map converted to channels-first "
                                 "sees the features in (c, h, w) order instead of Keras's (h, w, c): only "
                                 "elementwise layers, BatchNormalization and Dense can follow it exactly")
        if layout == "nchw" and rule.emit.get("shape") == "embedding":
            # its output is channels-last (batch, T, D): moved to channels-first where it is called
            em = translate_layer(call, rule, self.ctx, SizedContext(shape, "keep", self.scope, "", None, self.sizes, moved=True),
                                 node)
            if not em.failed and (em.out_shape is None or len(em.out_shape) < 2):
                raise _Refused(node, f"{code(call.func)} in a functional model converted to channels-first, on an "
                                     "input of unknown rank: cannot tell where its channels go", "shape-unknown")
            movedim = True
        elif layout == "nchw" and rule.emit.get("shape") == "reshape":
            em = translate_layer(call, rule, self.ctx, SizedContext(shape, "keep", self.scope, "", None, self.sizes, moved=True),
                                 node)
            unflatten = None if em.failed else self._unflatten(node, shape, em.out_shape, t)
            if unflatten is not None:
                return unflatten, False
            if not em.failed and not (shape is not None and len(shape) == 1 and em.out_shape is not None
                                      and len(em.out_shape) == 1):
                em = self._channels_last_reshape(call, em, node)
        else:
            em = translate_layer(call, rule, self.ctx, SizedContext(shape, layout, self.scope, "", flat, self.sizes, moved=True,
                                                                    mask_tracked=t is not None,
                                                                    mask_keep=id(node) in self.mask_layers), node)
        if em.failed:
            self.errors += 1  # the rule reported why
            raise _Refused(node, "", "")
        if em.functional is not None or not em.modules:
            raise _Refused(node, f"{rule.names[0]} has no torch module to call in a functional model")
        if rule.id == "lambda-layer" and mentions_source_alias(em.modules[0], self.ctx):
            # the module is written into __init__ by the finish step, after the rule pass: its calls would stay
            raise _Refused(node, f"{code(call.func)} whose lambda calls TensorFlow / Keras, in a functional model: "
                                 "not translated yet; define the function at the top of the file (the rules "
                                 "translate it there) and pass its name")
        return em, movedim

    def _channels_last_reshape(self, call: cst.Call, em: LayerEmission, node: cst.Call | None = None) -> LayerEmission:
        """A Reshape to or from a feature map in a channels-first model, other than a Dense's outputs
        unflattened: the ChannelsLastReshape helper (written out in the file) reshapes in Keras's
        channels-last order between permutes, exactly."""
        target = next((a.value for i, a in enumerate(call.args)
                       if (a.keyword is None and i == 0) or (a.keyword is not None and a.keyword.value == "target_shape")),
                      None)
        call = node or call  # findings at the source's call
        if target is None or em.out_shape is None:
            raise _Refused(call, f"{code(call.func)} in a functional model converted to channels-first, to a shape "
                                 "fwport cannot read: Keras reshapes in channels-last order; reshape explicitly "
                                 "with permutes, or keep this model channels-last")
        name = written_helpers.use(self.ctx, "ChannelsLastReshape")
        self.ctx.report(Severity.INFO, "layout-kept", f"{code(call.func)} in a model converted to channels-first: "
                        f"{name} (written out in this file) reshapes in Keras's channels-last order and gives "
                        "feature maps back channels-first", call)
        return LayerEmission([expr(f"{name}({code(target)})")], em.out_shape)

    def _unflatten(self, call: cst.Call, shape, out, t: _Tensor | None) -> LayerEmission | None:
        """Dense → Reshape to a feature map in a channels-first model (a generator's ``Dense(7*7*64)``
        then ``Reshape((7, 7, 64))``): exact as ``nn.Unflatten(1, (64, 7, 7))`` once the Dense computes
        its outputs in (c, h, w) order, which its weight map's ``before-unflatten`` variant does. Only
        when that Dense is called once and feeds nothing else (checked when the graph is complete)."""
        if t is None or shape is None or out is None or len(shape) != 1 or len(out) not in (2, 3) \
                or not all(is_int(d) for d in (*shape, *out)) or not t.node.parents:
            return None
        layer = self.layer_of.get(id(t.node.op))
        if layer is None or layer.kind != "rule" or layer.rule.id != "dense" or len(layer.records) != 1:
            return None
        record = layer.records[0][1]
        if record.variant is not None:
            return None
        *sp, c = out
        h, w = (sp[0], 1) if len(sp) == 1 else sp
        record.variant = "before-unflatten"
        in_dim = layer.in_key[0][-1]
        if not is_int(in_dim):  # the weight map needs it
            return None
        record.symbols = {"I": in_dim, "H": h, "W": w, "C": c}
        record.__post_init__()
        self.unflattens.append((t.node, call))
        return LayerEmission([expr(f"{self.ctx.spell_text('torch.nn.Unflatten')}(1, {(c, *sp)})")], out)

    def _translate(self, layer: _Layer, t: _Tensor) -> None:
        if not layer.attr:
            layer.attr = self._attr_name(layer)
        layer.in_key = (t.shape, t.flat)
        if layer.kind in ("submodel", "builder"):
            info = self.prior_models[layer.rule] if layer.kind == "submodel" else self.builder_models[layer.rule]
            # a tensor of unknown shape (a layer class's output) in a graph that keeps Keras's layout: the model's own
            # input shape (nothing moves between layouts; a wrong shape fails in torch as in Keras)
            unknown = t.shape is None and self.layout != "nchw" and len(info["inputs"]) == 1
            if len(info["inputs"]) != 1 or not (unknown or _fits(info["inputs"][0], t.shape, layer.kind == "builder" or info.get("from_builder", False))) \
                    or t.flat is not None:
                raise _Refused(layer.call, f"the model {layer.rule} called on a tensor of shape {t.shape}: fwport "
                                           f"follows a model used as a layer on one input of its own shape "
                                           f"{info['inputs'][0] if info['inputs'] else None}")
            if len(info["outputs"]) != 1:
                raise _Refused(layer.call, f"the model {layer.rule} has several outputs: not followed as a layer")
            # every translated model takes and returns Keras's layout: in a channels-first graph, a map
            # goes in channels-last and comes out channels-first again
            layer.keras_in = self.layout == "nchw" and (t.shape is None or len(t.shape) > 1)
            layer.keras_back = self.layout == "nchw" and (info["outputs"][0] is None or len(info["outputs"][0]) > 1)
            # a module-level model: the very instance (Keras shares its weights too); a builder's: the
            # instance the translated builder returns, called as written
            module = cst.Name(layer.rule) if layer.kind == "submodel" else layer.call
            out = info["outputs"][0]
            if layer.kind == "builder" and out is not None:  # sizes named by the builder's own parameters
                out = tuple(d if is_int(d) else None for d in out)
            layer.out = (out, None)
        elif layer.kind == "modseq":
            module = cst.Name(layer.rule)
            shape, seq_nchw = self._module_seq_shape(layer, t)
            layer.out = (shape, None)
            # the sequential pass translates it channels-first (a Resizing in it) or keeps Keras's layout:
            # its images are moved where the graph's layout is the other one
            layer.keras_in = layer.keras_back = self.layout == "nchw" and not seq_nchw
            layer.permute_in = layer.permute_back = self.layout != "nchw" and seq_nchw
        elif layer.kind == "given":
            if t.flat is not None:
                raise _Refused(layer.call, f"{layer.rule}(...), a module given to the model and called with Keras's "
                                           "channels-last layout, on a flattened channels-first feature map (its "
                                           "features in (c, h, w) order): call it before the convolutions, or "
                                           "translate this model by hand")
            module = cst.Name(layer.rule)
            layer.out = (None, None)
            layer.keras_in = layer.keras_back = self.layout == "nchw" and (t.shape is None or len(t.shape) > 1)
        elif layer.kind == "user":
            if t.flat is not None:
                raise _Refused(layer.call, f"{code(layer.call.func)}, a layer of this file whose body keeps Keras's "
                                           "channels-last layout, on a flattened channels-first feature map (its "
                                           "features in (c, h, w) order): call it before the convolutions, or "
                                           "translate this model by hand")
            module = layer.call
            layer.out = (None, None)
            # its body keeps Keras's layout (the subclass pass): a channels-first map goes in channels-last and
            # what comes out is moved to channels-first again (a no-op on a (batch, features) output)
            layer.keras_in = layer.keras_back = self.layout == "nchw" and (t.shape is None or len(t.shape) > 1)
        elif layer.kind == "seq":
            module = self._translate_seq(layer, t)
        else:
            rule = layer.rule
            if t.shape is None and t.shape_name is not None and _implied_rank(rule) is not None:
                # keras.Input(shape=input_shape) then a Conv2D: (input_shape[0], input_shape[1], input_shape[-1]);
                # shape=img_size + (3,): (img_size[0], img_size[-1], 3)
                t.shape = symbolic_parts(t.shape_name, _implied_rank(rule))
                layer.in_key = (t.shape, t.flat)
            record = None
            if any(a.keyword is not None and a.keyword.value in regularizers.REGULARIZER_ARGS for a in layer.call.args):
                # kernel_regularizer=l2(1e-4): the class's regularization_loss() (regularizers.py), as a subclass's
                # (a model built at module level: its class too, the factors module-level values or numbers)
                base = self.sized_calls.get(id(layer.call), layer.call)
                stripped, record = regularizers.strip(base, rule, self.ctx.imports.resolve, self.fn or regularizers.NO_INIT,
                                                      "", "", False, self.ctx)
                if record is not None and not self._penalty_names(base) <= set(self.local) - set(self.known_ints):
                    record = None  # a factor the class cannot read (a helper's local value): the rule's error
                if record is not None:
                    self.sized_calls[id(layer.call)] = stripped
            em, layer.movedim = self._emit(layer.call, rule, t.shape, t.flat, t)
            layer.layout_bound = em.layout_bound
            if self.layout == "keep" and em.layout_bound:
                if em.out_shape is None:
                    raise _Refused(layer.call, f"{code(layer.call.func)} takes channels-first inputs in torch, in a "
                                               "model that keeps Keras's channels-last layout, on an input of unknown "
                                               "rank: give the model its input shape", "shape-unknown")
                layer.permute_in = True
                layer.permute_back = len(em.out_shape) + 1 == em.layout_bound
            act = _activation_fn(em.modules[1], self.ctx) if len(em.modules) == 2 and em.weight_module == 0 else None
            if act is not None:  # Dense(64, activation="relu") → self.fc = nn.Linear(...); torch.relu(self.fc(x))
                em.modules = em.modules[:1]
                layer.activation = act
            if len(em.modules) == 1:
                module = em.modules[0]
                target = layer.attr
            else:
                seq = self.ctx.spell_text("torch.nn.Sequential")
                module = expr(f"{seq}({', '.join(code(m) for m in em.modules)})")
                target = f"{layer.attr}.{em.weight_module}"
            if record is not None:
                where = self.helper_call if self.helper_call is not None else layer.call
                self.penalties[target] = (record, self.origin.get(id(where), (None, where))[1])
            carried = t.flat if rule.id in _CARRIES_FLATTEN else None
            layer.out = (em.out_shape, em.flatten_of or carried)
            if rule.weights:
                layer.records.append(("", LayerRecord(self.scope, "", target, rule.id, em.variant, dict(em.symbols))))
        layer.module = module
        self.pending_init.append(f"self.{layer.attr} = {code(module)}")

    def _keeps_layout(self, call: cst.Call) -> bool:
        """A module-level ``keras.Sequential([...])`` of listed layers the sequential pass keeps channels-last."""
        first = call.args[0] if call.args and call.args[0].keyword is None and not call.args[0].star else None
        if first is None or not isinstance(first.value, (cst.List, cst.Tuple)) \
                or any(isinstance(e, cst.StarredElement) for e in first.value.elements):
            return False
        members = []
        for e in first.value.elements:
            q = self.ctx.imports.resolve(e.value.func) if isinstance(e.value, cst.Call) else None
            rule = self.ctx.pack.by_name.get(q) if q else None
            members.append((e.value, rule if rule is not None and rule.kind == "layer" else None))
        return not converts_to_nchw(members)

    def _module_seq_shape(self, layer: _Layer, t: _Tensor) -> tuple[tuple | None, bool]:
        """The output shape of a module-level ``keras.Sequential`` of preprocessing layers called in the
        graph (``x = data_augmentation(inputs)``), which the sequential pass translates where it stands and
        the model calls as it is (Keras shares that object too). Followed when each member keeps the shape
        (Normalization, Rescaling, random flips, rotations, zooms, ...) or resizes to sizes fwport can read
        (Resizing, CenterCrop, RandomCrop). (shape, whether the sequential pass makes it channels-first)."""
        call = self.module_seqs[layer.rule]
        elements = None
        for i, a in enumerate(call.args):
            kw = a.keyword.value if a.keyword else ("layers" if i == 0 else None)
            if kw == "layers" and not a.star and isinstance(a.value, (cst.List, cst.Tuple)) and not any(
                    isinstance(e, cst.StarredElement) for e in a.value.elements):
                elements = [e.value for e in a.value.elements]
            elif kw != "name":
                elements = None
                break
        if not elements:
            raise _Refused(layer.call, f"{layer.rule}: a module-level keras.Sequential called in a functional model "
                                       "is followed when it lists its layers (and name= only)")
        if t.flat is not None or (t.shape is not None and len(t.shape) != 3):
            raise _Refused(layer.call, f"{layer.rule}, a module-level keras.Sequential, is followed on images "
                                       "(height, width, channels) only")
        shape = t.shape
        members = []
        for el in elements:
            q = self.ctx.imports.resolve(el.func) if isinstance(el, cst.Call) else None
            rule = self.ctx.pack.by_name.get(q) if q else None
            members.append((el, rule if rule is not None and rule.kind == "layer" else None))
            tail = q[len("keras.layers."):] if q and q.startswith("keras.layers.") else None
            if tail in _SHAPE_KEEPING:
                continue
            if tail in _RESIZING:
                h, w = (call_argument(el, "height", 0), call_argument(el, "width", 1))
                h, w = self.sizes.dim(h), self.sizes.dim(w)
                if is_int(h) and is_int(w):
                    shape = (int(h), int(w), shape[2] if shape is not None else None)
                    continue
            raise _Refused(el if isinstance(el, cst.Call) else layer.call,
                           f"{code(el.func) if isinstance(el, cst.Call) else code(el)} in {layer.rule}, a module-level "
                           "keras.Sequential called in a functional model: fwport follows one of preprocessing layers "
                           "that keep the image's shape or resize it to literal sizes; build it in the builder, or "
                           "translate this model by hand")
        return shape, converts_to_nchw(members)

    def _translate_seq(self, layer: _Layer, t: _Tensor) -> cst.BaseExpression:
        """A keras.Sequential used as a layer: its layers in one nn.Sequential, shapes followed."""
        call = layer.call
        elements = None
        for i, a in enumerate(call.args):
            kw = a.keyword.value if a.keyword else ("layers" if i == 0 else None)
            if kw == "layers" and not a.star and isinstance(a.value, (cst.List, cst.Tuple)) and not any(
                    isinstance(e, cst.StarredElement) for e in a.value.elements):
                elements = [e.value for e in a.value.elements]
            elif kw != "name":
                raise _Refused(a, f"keras.Sequential argument {code(a).strip().rstrip(',')} is not followed inside a "
                                  "functional model (a literal list of layers and name= only)")
        if not elements:
            raise _Refused(call, "a keras.Sequential used as a layer must list its layers")
        shape, flat = t.shape, t.flat
        # in a model that keeps Keras's layout, a Sequential of convolutions on a feature map (a Sequential
        # factory's conv-norm-activation block) runs channels-first inside: its input moved once, its output back
        own = self.layout == "keep" and flat is None and shape is not None and len(shape) >= 2 and any(
            isinstance(el, cst.Call) and self._layer_kind(el.func)[0] == "rule"
            and _drives_nchw(self._layer_kind(el.func)[1]) for el in elements)
        saved = self.layout
        if own:
            self.layout = "nchw"
        try:
            modules, shape, flat = self._seq_members(layer, elements, shape, flat)
        finally:
            self.layout = saved
        if own:
            if flat is not None or shape is None or len(shape) != len(t.shape):
                raise _Refused(call, "a keras.Sequential of convolutions used as a layer of a model that keeps Keras's "
                                     "channels-last layout is followed when it gives a feature map of the rank it "
                                     "takes (it runs channels-first inside): translate this model by hand")
            layer.permute_in = layer.permute_back = True
        layer.out = (shape, flat)
        seq = self.ctx.spell_text("torch.nn.Sequential")
        return expr(f"{seq}({', '.join(code(m) for m in modules)})")

    def _seq_members(self, layer: _Layer, elements: list, shape, flat) -> tuple[list, object, object]:
        """The modules of a keras.Sequential used as a layer (:meth:`_translate_seq`), and the shape and flat
        order of its output."""
        modules: list[cst.BaseExpression] = []
        k = 0
        for el in elements:
            if isinstance(el, cst.Call) and self.ctx.imports.resolve(el.func) in (INPUT, "keras.layers.InputLayer"):
                if k:
                    raise _Refused(el, "an input specification must come first in a Sequential model")
                continue
            kind, rule = self._layer_kind(el.func) if isinstance(el, cst.Call) else (None, None)
            if kind != "rule":
                raise _Refused(el, f"{code(el)}: fwport follows a Sequential used as a layer when each of its "
                                   "members is a Keras layer with a rule")
            em, movedim = self._emit(el, rule, shape, flat)
            if self.layout == "keep" and em.layout_bound:
                raise _Refused(el, f"{code(el.func)} takes channels-first inputs in torch, inside a Sequential of a "
                                   "functional model that keeps Keras's channels-last layout: call it as a layer of "
                                   "the model, or translate this model by hand")
            if movedim:
                raise _Refused(el, f"{code(el.func)} inside a Sequential of a functional model converted to "
                                   "channels-first: its output is channels-last")
            if rule.weights:
                layer.records.append((f".layers[{k}]", LayerRecord(self.scope, "", f"{layer.attr}.{len(modules) + em.weight_module}",
                                                                  rule.id, em.variant, dict(em.symbols))))
            modules += em.modules
            carried = flat if rule.id in _CARRIES_FLATTEN else None
            shape, flat = em.out_shape, em.flatten_of or carried
            self.ctx.settle(el)
            k += 1
        return modules, shape, flat

    def _attr_base(self, call: cst.Call, rule) -> str:
        name = next((literal_value(a.value, None) for a in call.args if a.keyword and a.keyword.value == "name"), None)
        if isinstance(name, str) and name:
            base = _snake(name)
        else:
            rid = rule.id if not isinstance(rule, str) else rule
            base = _ATTR.get(rid) or _snake(dotted_text(call.func).rsplit(".", 1)[-1])
        return f"{base}_layer" if base in _RESERVED or not base.isidentifier() else base

    def _attr_name(self, layer: _Layer) -> str:
        used = {x.attr for x in self.layers if x.attr} | set(self.carried.values())  # (self.dropout = dropout)
        if layer.var:
            base = layer.var if layer.var not in _RESERVED else f"{layer.var}_layer"
            numbered = False
        else:
            base = self._attr_base(layer.call, layer.rule if layer.kind == "rule" else layer.kind)
            numbered = self.base_counts.get(base, 0) > 1  # conv1, conv2, ... as a torch engineer writes them
        if not numbered and base not in used:
            return base
        k = 1
        while f"{base}{k}" in used:
            k += 1
        return f"{base}{k}"

    def _merge(self, call: cst.Call, op: str, args, label: str, layer: _Layer | None = None) -> _Tensor:
        lst = None
        axis_node = None
        for i, a in enumerate(args):
            kw = a.keyword.value if a.keyword else ("inputs" if i == 0 else ("axis" if op == "cat" and i == 1 else None))
            if kw == "inputs" and not a.star:
                lst = a.value
            elif kw == "axis" and op == "cat":
                axis_node = a.value
            elif kw != "name":
                raise _Refused(a, f"{label} argument {code(a).strip().rstrip(',')} is not followed",
                               "unsupported-argument")
        if isinstance(lst, cst.Name) and lst.value in self.lists:
            lst = self.lists[lst.value]
        elif isinstance(lst, (cst.ListComp, cst.Call)):  # concatenate([v for _, v in sorted(inputs.items())])
            lst = self._dict_values(lst) or lst
        if not isinstance(lst, (cst.List, cst.Tuple)) or any(isinstance(e, cst.StarredElement) for e in lst.elements):
            raise _Refused(call, f"{label}: fwport follows merges of a literal list of tensors (or of the values "
                                 "of a dict of inputs)")
        items = [e.value for e in lst.elements]
        ts = []
        for it in items:
            t = self._tensor(it)
            if t is None:
                raise _Refused(it, f"{code(it)}: an input of {label} that is not a tensor of the model")
            ts.append(t)
        if len(ts) < 2 or (op == "sub" and len(ts) != 2):
            raise _Refused(call, f"{label} takes {'two' if op == 'sub' else 'at least two'} tensors")
        flats = {t.flat for t in ts}
        outs = [self._out_expr(it) for it in items]
        texts = [code(o) for o in outs]
        if op == "cat":
            axis = literal_value(axis_node, None) if axis_node is not None else -1
            if not isinstance(axis, int) or isinstance(axis, bool):
                raise _Refused(axis_node, f"{label}: the axis must be a literal int", "unsupported-argument")
            ranks = {len(t.shape) if t.shape is not None else None for t in ts}
            rank = ranks.pop() if len(ranks) == 1 else None
            if rank is None:
                if self.layout == "nchw" or axis >= 0:
                    raise _Refused(call, f"{label} of tensors whose ranks are unknown or differ: cannot tell which "
                                         "torch dim the axis is", "shape-unknown")
                dim = axis
            else:
                pos = axis if axis >= 0 else rank + 1 + axis  # with the batch axis
                if not 1 <= pos <= rank:
                    raise _Refused(call, f"{label} over the batch axis or out of range", "unsupported-argument")
                if self.layout == "nchw" and rank > 1:
                    dim = 1 if pos == rank else pos + 1
                else:
                    dim = pos if axis >= 0 else axis
            if self.layout == "nchw" and any(f is not None for f in flats):
                raise _Refused(call, f"{label} of flattened channels-first maps: the features would be in another "
                                     "order than in Keras")
            shape = None
            if rank is not None and all(t.shape is not None for t in ts):
                pos = axis if axis >= 0 else rank + 1 + axis
                others = {tuple(d for j, d in enumerate(t.shape) if j != pos - 1) for t in ts}
                sizes = [t.shape[pos - 1] for t in ts]
                if len(others) == 1 and all(known(d) for d in sizes):
                    shape = list(ts[0].shape)
                    terms = [f"({d})" if isinstance(d, str) and " " in d else str(d) for d in sizes]
                    shape[pos - 1] = (sum(int(d) for d in sizes) if all(is_int(d) for d in sizes)
                                      else f"{len(terms)} * {terms[0]}" if len(set(terms)) == 1
                                      else " + ".join(terms))
                    shape = tuple(shape)
            new = expr(f"{self.ctx.spell_text('torch.cat')}([{', '.join(texts)}], dim={dim})")
            flat = None
        else:
            if len(flats) > 1:
                raise _Refused(call, f"{label} of a flattened channels-first map with a tensor that is not one: "
                                     "their features are in different orders")
            if self.layout == "nchw" and not _same_layout(ts):
                raise _Refused(call, f"{label} of tensors of unknown or different ranks in a model converted to "
                                     "channels-first: broadcasting would pair other axes than in Keras")
            par = [f"({t})" if isinstance(o, (cst.BinaryOperation, cst.IfExp, cst.Lambda, cst.BooleanOperation))
                   else t for t, o in zip(texts, outs)]
            if op in ("add", "mul", "sub"):
                text = {"add": " + ", "mul": " * ", "sub": " - "}[op].join(par)
            elif op == "avg":
                text = f"({' + '.join(par)}) / {len(par)}"
            else:
                fn = self.ctx.spell_text("torch.maximum" if op == "max" else "torch.minimum")
                text = par[0]
                for p in par[1:]:
                    text = f"{fn}({text}, {p})"
            new = expr(text)
            shape, flat = _broadcast(ts), ts[0].flat
        self.replace[id(call)] = new
        if layer is not None:
            if layer.op is None:
                layer.op = _Op("merge", True)
            op_ = layer.op
        else:
            op_ = _Op("merge", True, (_MERGE_CLASS[op],))
        return _Tensor(shape, self._node(op_, [t.node for t in ts], call), flat)

    # --- the keras.Model(...) call ---------------------------------------------------------------------
    def _model_args(self, call: cst.Call) -> tuple[list[str], list[_Tensor]] | None:
        ins = outs = None
        for i, a in enumerate(call.args):
            kw = a.keyword.value if a.keyword else ("inputs" if i == 0 else "outputs" if i == 1 else None)
            if a.star or kw not in ("inputs", "outputs", "name"):
                self.error(a, f"keras.Model argument {code(a).strip().rstrip(',')} is not followed (inputs, outputs, "
                              "name only)", "unsupported-argument")
            elif kw == "inputs":
                ins = a.value
            elif kw == "outputs":
                outs = a.value
        if ins is None or outs is None:
            self.error(call, "keras.Model(...) without inputs and outputs is not a functional model fwport can follow")
            return None
        if isinstance(ins, cst.Name) and ins.value in self.lists:
            ins = self.lists[ins.value]
        if isinstance(outs, cst.Name) and outs.value in self.lists:
            outs = self.lists[outs.value]
        order = []
        if isinstance(ins, cst.Name) and ins.value in self.input_dicts:
            # keras.Model(inputs=inputs) of `inputs = {"a": keras.Input(...)}`: forward takes that dict
            keys = self.input_dicts[ins.value]
            self.dict_input = (ins.value, keys, False)
            order = list(keys.values())
        elif isinstance(ins, cst.Dict):
            # keras.Model(inputs={"a": a, ...}): forward takes the dict and binds the source's names from it
            keys = {}
            for e in ins.elements:
                key = _string_key(e.key) if isinstance(e, cst.DictElement) else None
                if key is None or not isinstance(e.value, cst.Name) or e.value.value not in self.inputs \
                        or e.value.value in keys.values():
                    self.error(e, f"{code(e).strip().rstrip(',')}: a dict of inputs of keras.Model is followed "
                                  "with literal string keys, each naming a keras.Input(...) of the model once")
                    return None
                keys[key] = e.value.value
            taken = set(self.env) | set(self.local) | set(self.inputs)
            param = next(p for p in ("inputs", "input_dict", "model_inputs", "inputs_") if p not in taken)
            self.dict_input = (param, keys, True)
            order = list(keys.values())
        else:
            in_items = [e.value for e in ins.elements] if isinstance(ins, (cst.List, cst.Tuple)) else [ins]
            tapped = self._tap_model(in_items, outs)
            if tapped is not None:
                return tapped or None
            for it in in_items:
                sub = self._sub_model(it)
                if sub is not None:
                    self.error(it, sub)
                    return None
                if not isinstance(it, cst.Name) or it.value not in self.inputs:
                    self.error(it, f"{code(it)}: the inputs of keras.Model must be names bound to keras.Input(...), "
                                   "a dict of such names, or a name bound to a dict literal of keras.Input calls; "
                                   "fwport does not follow this value")
                    return None
                order.append(it.value)
        if set(order) != set(self.inputs):
            self.error(ins, "keras.Input tensors that are not inputs of the model")
            return None
        self.inputs = {n: self.inputs[n] for n in order}
        self.out_keys = None
        if isinstance(outs, cst.Dict):  # keras.Model(outputs={"a": ...}): forward returns that dict
            self.out_keys = [_string_key(e.key) if isinstance(e, cst.DictElement) else None for e in outs.elements]
            if None in self.out_keys or len(set(self.out_keys)) != len(self.out_keys):
                self.error(outs, "a dict of outputs of keras.Model is followed with distinct literal string keys")
                return None
        out_items = [e.value for e in outs.elements] if isinstance(outs, (cst.List, cst.Tuple, cst.Dict)) else [outs]
        returns, tensors = [], []
        self.generating = True
        for it in out_items:
            if _names_in(it) & self.built_on:
                return None  # (computed from an application built on a tensor: its error says why)
            try:
                t = self._tensor(it)
            except _Refused as r:
                self._refused(r)
                return None
            if t is None:
                self.error(it, f"{code(it)}: an output of keras.Model that is not a tensor of the model")
                return None
            returns.append(code(self._out_expr(it)))
            tensors.append(t)
        self.generating = False
        return returns, tensors

    def _model_ref(self, node: cst.BaseExpression) -> tuple[str, str | None] | None:
        """``m.input`` / ``m.inputs`` → (m, None); ``m.get_layer(name="image").input`` → (m, "image") (Keras 2's
        InputLayer; Keras 3's gives its tensor as ``.output``, ``.input`` there raising)."""
        if not (isinstance(node, cst.Attribute) and node.attr.value in ("input", "inputs", "output")):
            return None
        root = node.value
        if isinstance(root, cst.Name):
            return (root.value, None) if node.attr.value != "output" else None
        if isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute) and root.func.attr.value == "get_layer" \
                and isinstance(root.func.value, cst.Name) and node.attr.value in ("input", "output"):
            name = _lit_of(root, "name", 0)
            if isinstance(name, str) and len(root.args) == 1:
                return root.func.value.value, name
        return None

    def _tap_model(self, in_items: list, outs: cst.BaseExpression):
        """keras.Model(base.input, base.get_layer("name").output), ``base`` a model translated above at module level
        (or a builder's instance bound there): the layers of ``base`` from those inputs to that layer's output,
        sharing its weights. The class of ``base`` gets a method running its forward's statements that layer's output
        depends on (:func:`_tap_defs`), and this model's forward calls it on ``self.<base>`` (that very module).
        None where this is not such a model; False where it is and cannot be followed (an error said why); else what
        :meth:`_model_args` returns."""
        refs = [self._model_ref(it) for it in in_items]
        if not refs or None in refs or self.fn is not None or len({b for b, _ in refs}) != 1:
            return None
        base = refs[0][0]
        info = self.prior_models.get(base)
        plan = info.get("plan") if info is not None else None
        if plan is None or base in self.local or base in self.inputs:
            return None  # (not a model of this file translated above: _sub_model's error)
        out = outs
        layer = None
        if isinstance(out, cst.Attribute) and out.attr.value == "output" and isinstance(out.value, cst.Call) \
                and isinstance(out.value.func, cst.Attribute) and out.value.func.attr.value == "get_layer" \
                and isinstance(out.value.func.value, cst.Name) and out.value.func.value.value == base \
                and len(out.value.args) == 1:
            layer = _lit_of(out.value, "name", 0)
        what = f"keras.Model({', '.join(code(it) for it in in_items)}, {code(outs)})"
        if not isinstance(layer, str):
            self.error(outs, f"{what}: a model made of layers of {base}, sharing its weights: fwport follows one "
                             f"output given as {base}.get_layer(\"<name>\").output (a literal name); not this one")
            return False
        if layer not in plan.taps:
            self.error(outs, f"{what}: {layer!r} is not a layer fwport can take the output of in {plan.class_name}'s "
                             "forward (it follows the output of a layer created with that literal name=, called once, "
                             "bound by a plain assignment of a forward without loops or if statements above it): "
                             f"give {plan.class_name} a method returning that layer's output and call it")
            return False
        index, ret, needed = plan.taps[layer]
        names = info.get("input_names", {})
        params: list[str] = []
        for it, (_, given) in zip(in_items, refs):
            if given is None:
                params += [p for p in plan.forward_params if p not in params]
            elif given in names:
                params.append(names[given])
            else:
                self.error(it, f"{code(it)}: fwport knows no keras.Input named {given!r} in {base} "
                               "(its inputs named by a literal name=)")
                return False
        if not needed <= set(params):
            self.error(outs, f"{what}: {layer!r} also depends on {', '.join(sorted(needed - set(params)))}, an input "
                             f"of {base} this model is not given (Keras refuses it too: the graph is disconnected)")
            return False
        method = "upto_" + re.sub(r"\W", "_", layer)
        plan.tap_methods[method] = (params, index, ret)
        attr = base if base not in params else f"{base}_model"
        self.carried[base] = attr
        self.inputs = {p: _Tensor(None, _Node(_Op("input", True), [])) for p in params}
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{what} → a module calling {base}.{method}(...), the "
                        f"statements of {plan.class_name}'s forward up to {layer!r}'s output on that very module "
                        f"(its weights shared, as Keras shares them); fwport verify and fwport weights map {base}'s "
                        "weights, not this model's", outs)
        return [f"self.{attr}.{method}({', '.join(params)})"], [_Tensor(None, _Node(_Op("op", False), []))]

    def _sub_model(self, node: cst.BaseExpression) -> str | None:
        """keras.Model(base.input, base.get_layer("name").output): a model made of another model's layers
        (a feature extractor, a prediction model without the training head), sharing its weights: why it is
        not followed, by what ``base`` is here; None where ``node`` is not another model's input."""
        if not (isinstance(node, cst.Attribute) and node.attr.value in ("input", "inputs")):
            return None
        root = node.value
        if isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute) and root.func.attr.value == "get_layer":
            root = root.func.value  # model.get_layer(name="image").input: the model's Input layer
        if not isinstance(root, cst.Name):
            return None
        base = root.value
        what = f"{code(node)}: a model made of layers of {base} (from its input to a layer's output, sharing its weights)"
        if base in self.prior_models or base in self.builder_models:
            return (f"{what}: fwport translates {base} as one class whose forward computes the whole model, and does "
                    "not follow such a sub-model yet: give that class a method that runs forward's statements up to "
                    "that layer and returns its output, and call it where this model is used")
        left = self._left_model(base)
        if left is not None and "leaves as written" in left:
            return (f"{what}: {base} is a functional model of this file that fwport leaves as written (the errors at "
                    "its keras.Model(...) say why), so this one stays Keras code with it; once it is translated (by "
                    "hand, as an nn.Module), give it a method returning that layer's output")
        return (f"{what}: {base} is not a model fwport translates here (a pretrained or loaded model, or one built "
                "elsewhere): this model stays Keras code; in PyTorch, call the layers of its torch counterpart up to "
                "that layer (torchvision's create_feature_extractor(model, return_nodes=...) does it for a traced "
                "model)")

    def _check_unflattens(self, outs: list[_Tensor]) -> None:
        for dense, reshape in self.unflattens:
            consumers = [n for n in self.nodes if any(p is dense for p in n.parents)]
            consumers += [t for t in outs if t.node is dense]  # an output of the model reads it too
            calls = [n for n in self.nodes if n.op is dense.op]
            if len(consumers) != 1 or len(calls) != 1:
                self.error(reshape, f"{code(reshape.func)} after a Dense whose output also feeds other layers (or "
                                    "that is called twice), in a model converted to channels-first: the Dense cannot "
                                    "compute its outputs in channels-first order for the reshape alone")

    def _check_reachable(self, outs: list[_Tensor], call: cst.Call) -> None:
        self._check_unflattens(outs)
        seen: set[int] = set()
        stack = [t.node for t in outs]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.extend(n.parents)
        for n in self.nodes:
            if id(n) not in seen and n.op.kind in ("layer", "merge"):
                self.error(n.where or call, f"{code(n.where) if n.where is not None else 'a layer'}: a layer "
                           "called in the builder whose result does not reach the model's outputs (Keras leaves it "
                           "out of the model, a torch forward would run it); remove it or make it an output")
                return
        for layer in self.layers:
            if layer.op is None and id(layer) not in self.copied:
                self.error(layer.call, f"{layer.var or code(layer.call.func)}: a layer created but never called "
                                       "on a tensor of the model")
                return

    # --- weight records: Keras's model.layers order ------------------------------------------------------
    def _records(self, outs: list[_Tensor]) -> None:
        order = _layer_order([t.node for t in outs], self.input_ops)
        path = {id(op): f"layers[{i}]" for i, op in enumerate(o for o in order if o.is_layer)}
        self.record_paths = {} if self.loops else dict(path)
        if not self.loops:  # (model_api counts a negative model.layers[-k] from it)
            from fwport.packs.tf2torch.passes.sequential import LAYER_COUNTS
            self.ctx.analyses.setdefault(LAYER_COUNTS, {})[self.scope] = len(path)
        for op in order:  # the layers of a model above this one reads tensors of (_import_tensors): shared
            for rest, target, rule, variant, symbols in self.imported.get(id(op), []) if id(op) in path else []:
                self.ctx.layers.append(LayerRecord(self.scope, f"{path[id(op)]}{rest}", target, rule, variant,
                                                   dict(symbols)))
        if self.loops:  # how many layers precede one is known only at run time: named by the order of calls
            template = None if self.nested_loops else self._call_template({id(o) for o in order})
            for loop, *_ in self.loops:
                if isinstance(loop, cst.Else):  # (said at its if)
                    continue
                if isinstance(loop, cst.If):
                    self.ctx.report(Severity.INFO, "if-kept", f"`if {code(loop.test)}:` depends on the "
                                    "values the builder is called with: the class keeps it, in __init__ (its layers "
                                    "are created only then) and in forward; " + (
                                        "fwport verify and fwport weights map their weights by the order Keras calls "
                                        "the layers (in the models built with the branch)" if template is not None
                                        else "fwport verify and fwport weights do not map the model's weights (a "
                                        "layer created before a loop or an if statement is called in it)"),
                                    self.origin.get(id(loop), (None, loop))[1])
                    continue
                self.ctx.report(Severity.INFO, "shape-unknown", "a for statement over a value known only when the "
                                "model is built: its layers are nn.ModuleLists built by the same loop in __init__; " + (
                                    "fwport verify and fwport weights map their weights by the order Keras calls "
                                    "the layers (one module per pass)" if template is not None else
                                    "fwport verify and fwport weights do not map their weights (" + (
                                        "a helper with such a loop is called in another one: how many layers each pass "
                                        "adds is known only then" if self.nested_loops else
                                        "a layer created before the loop is called in it") + ")"),
                                self.origin.get(id(loop), (None, loop))[1])
            if template is None:
                return
            self.calls, path = template
        for layer in [*self.layers, *self.sub_layers]:
            if layer.op is None:
                continue
            attr = f"{layer.attr}.*" if layer.in_loop else layer.attr
            if (layer.kind == "rule" and not layer.in_loop and not layer.prefix and len(layer.records) == 1
                    and layer.records[0][0] == "" and re.fullmatch(r"layers\[\d+\]", path[id(layer.op)])):
                # one torch module holds its weights: what get_layer(...) becomes where only they matter
                rec = layer.records[0][1]
                remember_layer(self.ctx, self.scope, int(path[id(layer.op)][len("layers["):-1]), rec.target,
                               rec.rule, rec.variant, layer.call)
            for suffix, record in layer.records:
                record.source = f"{path[id(layer.op)]}{suffix}"
                if layer.in_loop:  # the record's module is the item of the loop's nn.ModuleList
                    record.target = attr + record.target[len(layer.attr):]
                record.target = layer.prefix + record.target
                self.ctx.layers.append(record)
            if layer.kind in ("user", "modseq"):  # its class's (Sequential's) records, once its pass made them
                self.user_layers.append((layer.rule, path[id(layer.op)], layer.prefix + attr))
            if layer.kind in ("submodel", "builder"):
                scope = self.prior_models.get(layer.rule, {}).get("records_scope", layer.rule) \
                    if layer.kind == "submodel" else layer.rule
                for r in [r for r in self.ctx.layers if r.scope == scope]:
                    if "calls[" in r.source:
                        continue  # a model with its own run-time loops: not followed inside another (unmapped)
                    self.ctx.layers.append(LayerRecord(self.scope, f"{path[id(layer.op)]}.{r.source}",
                                                       f"{layer.prefix}{attr}.{r.target}", r.rule, r.variant,
                                                       dict(r.symbols)))

    def _op_records(self) -> dict[int, list]:
        """This model's weight records by the operation whose layer they are (``layers[3]`` → its op, for
        :meth:`_import_tensors`): (the source's rest after ``layers[k]``, target, rule, variant, symbols)."""
        ops = {p: op for op, p in self.record_paths.items()}
        out: dict[int, list] = {}
        for r in self.ctx.layers:
            m = re.match(r"(layers\[\d+\])(.*)$", r.source) if r.scope == self.scope else None
            if m and m.group(1) in ops:
                out.setdefault(ops[m.group(1)], []).append((m.group(2), r.target, r.rule, r.variant, dict(r.symbols)))
        return out

    def _call_template(self, in_model: set[int]) -> tuple[list[dict], dict[int, str]] | None:
        """The model's layers in the order the builder first calls them (Keras's ``model.layers`` holds the
        same layers; how many a run-time loop adds is known only when the model is built), as segments: the
        layers called outside loops, and per loop the layers of one pass (``{"loop": bool, "layers": [the
        Keras class names each may have, [] when not known]}``); with each layer's path: ``calls[s][j]``, or
        ``calls[s][*][j]`` for one created in a loop (fwport verify finds the layers in the built model by
        the order of their calls and the classes, and expands ``*`` over the passes). None when a layer
        created before a loop is first called in it (one layer for every pass)."""
        owner = {id(x.op): x for x in [*self.layers, *self.sub_layers] if x.op is not None}
        segments: list[dict] = []
        keys: list = []
        path: dict[int, str] = {}
        seg_of: dict[int, int] = {}
        for i, n in enumerate(self.nodes):
            op = n.op
            if not op.is_layer or op.kind == "input" or id(op) not in in_model:
                continue
            loop = next((k for k, (_, start, end, _) in enumerate(self.loops) if start <= i < end), None)
            if id(op) in seg_of:  # a later call (of a loop's last layer after it): no layer Keras adds
                continue
            layer = owner.get(id(op))
            if loop is not None and layer is not None and id(layer) not in self.loops[loop][3]:
                return None  # created before the loop, called in it: one layer for all passes
            if not keys or keys[-1] != loop:
                segments.append({"loop": loop is not None, "layers": []})
                keys.append(loop)
            seg = segments[-1]
            seg_of[id(op)] = len(segments) - 1
            path[id(op)] = f"calls[{len(segments) - 1}]{'[*]' if loop is not None else ''}[{len(seg['layers'])}]"
            seg["layers"].append(list(self._keras_classes(op, layer)))
        return segments, path

    @staticmethod
    def _keras_classes(op: _Op, layer: _Layer | None) -> tuple:
        if layer is None:
            return op.keras
        if layer.kind == "rule":
            return tuple(sorted({n.rsplit(".", 1)[-1] for n in layer.rule.names}))
        if layer.kind == "merge":
            return (str(layer.rule).rsplit(".", 1)[-1],)
        if layer.kind == "user":
            return (layer.rule,)
        if layer.kind == "seq":
            return ("Sequential",)
        return op.keras

    def _info(self, plan: _Plan, call: cst.Call, outs: list[_Tensor]) -> None:
        """The model's interface. A graph converted to channels-first still takes and returns Keras's
        channels-last tensors: its inputs of rank > 2 are moved channels-first once, at the top of
        ``forward``, and the feature maps it returns are moved back, so that data code, ``fit`` and the
        loops that feed it keep working unchanged (DESIGN: one permute at the model's entry)."""
        for t in outs:
            if t.node.mask is not None:
                self.ctx.report(Severity.WARNING, "loss-mask", masks.LOSS_WARNING.format(mask=t.node.mask), call)
        nchw = self.layout == "nchw"
        moved = [(name, t.shape) for name, t in self.inputs.items() if nchw and (t.shape is None or len(t.shape) > 1)]
        if self.dict_input is not None:
            param, keys, binds = self.dict_input
            if binds:  # keras.Model(inputs={"a": a}): forward binds a = inputs["a"]
                plan.entry_lines = [f"{name} = {param}[{_key_code(key)}]" for key, name in keys.items()]
            elif moved:  # its entries moved channels-first in a copy, never in the caller's dict
                plan.entry_lines = [f"{param} = dict({param})"]
        # tensors of a model above (_import_tensors): computed from the inputs as given (that model's method moves
        # them channels-first itself), so before this model's own moves, which go where nothing reads the input
        plan.entry_lines += self.import_lines
        plan.reads_above = bool(self.import_lines)
        if moved:
            plan.moved = {name: (f"{name} = {name}{_to_first(s)}",
                                 f"{name}: (batch, {', '.join(str(d) for d in s)})" if s else name) for name, s in moved}
            plan.entry_lines += [line for line, _ in plan.moved.values()]
            self.ctx.report(Severity.INFO, "layout-changed", "this functional model runs channels-first (NCHW) "
                            "inside; its forward takes Keras's channels-last inputs and moves them once at entry",
                            call)
        back = [i for i, t in enumerate(outs) if nchw and not t.last and (t.shape is None or len(t.shape) > 1)]
        for i in back:
            plan.returns[i] = f"{_paren(expr(plan.returns[i]))}{_to_last(outs[i].shape)}"
        if back:
            self.ctx.report(Severity.INFO, "layout-changed", "this functional model's feature-map outputs are "
                            "moved back to Keras's channels-last layout at the end of forward", call)
        shapes = [t.shape for t in self.inputs.values()]
        declared = shapes[0] if len(shapes) == 1 and shapes[0] is not None else None
        key = self.scope or plan.model_target or plan.class_name
        self.ctx.models[key] = ModelInfo(key, "functional", tuple(plain(d) for d in declared) if declared else None,
                                         "same", "same", self.calls,
                                         tuple(self.dict_input[1]) if self.dict_input is not None else None)

    # --- the rewrite that keeps lines ---------------------------------------------------------------------
    def _rewrite(self, stmts: list, plan: _Plan) -> list:
        out = []
        pad = 0
        for i, stmt in enumerate(stmts):
            if pad:
                marks = [cst.EmptyLine(indent=True, whitespace=cst.SimpleWhitespace(""), comment=cst.Comment(LINE_MARK))
                         for _ in range(pad)]
                stmt = stmt.with_changes(leading_lines=[*stmt.leading_lines, *marks])
                pad = 0
            role = plan.roles.get(i)
            if role in ("forward", "input", "layer", "unrolled"):
                before = _line_count(stmt)
                if role == "forward":
                    new = rewrite(stmt, _Replace(self.replace), fresh=True)
                    # (a statement has a line at least: a one-line statement needs no pad, its new text unrendered)
                    after = _line_count(new) if before > 1 else before
                else:  # built in __init__ or a parameter of forward: nothing for the passes after this one
                    new = cst.SimpleStatementLine([cst.Pass()], leading_lines=stmt.leading_lines)
                    after = 1  # `pass` (not rendered to count its line)
                pad = max(0, before - after)
                stmt = new
            out.append(stmt)
        return out


_ACTIVATION_FNS = {"torch.nn.ReLU()": "torch.relu", "torch.nn.Sigmoid()": "torch.sigmoid", "torch.nn.Tanh()": "torch.tanh"}


# channels-first torch layers that do not make a model channels-first on their own: they reduce the
# feature map away or act per channel, so where no convolution or pooling window needs NCHW they are
# called on a permuted input (x.movedim(-1, 1)) and the model keeps Keras's layout (an Embedding →
# transformer → GlobalAveragePooling1D text classifier)
_LAYOUT_NEUTRAL = {"global-pool", "batch-norm"}
# layers that act on the last axis of a sequence and have no channels-first form: a model holding one
# keeps Keras's layout, and its convolutions (a transformer's Conv1D(kernel_size=1) feed-forward) are
# called on permuted inputs
_NEEDS_LAST = {"multi-head-attention", "layer-norm", "rnn", "bidirectional"}


def _module_ref(layer: _Layer) -> cst.BaseExpression:
    """``self.<attr>``; for a layer of a for statement over a run-time value called after it, the module of
    its last pass (``self.<attr>[-1]``: the layer the name is bound to after the loop, as in Keras)."""
    ref = cst.Attribute(cst.Name("self"), cst.Name(layer.attr))
    return cst.Subscript(ref, [cst.SubscriptElement(cst.Index(expr("-1")))]) if layer.in_loop else ref


def _to_first(shape: tuple | None) -> str:
    """``.permute(0, 3, 1, 2)`` for a channels-last map of known rank, ``.movedim(-1, 1)`` otherwise."""
    if shape is None:
        return ".movedim(-1, 1)"
    n = len(shape) + 1
    return f".permute(0, {n - 1}, {', '.join(str(i) for i in range(1, n - 1))})"


def _to_last(shape: tuple | None) -> str:
    if shape is None:
        return ".movedim(1, -1)"
    n = len(shape) + 1
    return f".permute(0, {', '.join(str(i) for i in range(2, n))}, 1)"


def _drives_nchw(rule) -> bool:
    return (rule is not None and rule.kind == "layer" and rule.emit.get("layout") == "channels-first"
            and rule.emit.get("shape") not in _LAYOUT_NEUTRAL)


def _paren(node: cst.BaseExpression) -> str:
    """``node``'s code, ready to take a method call or a subscript: parenthesised where it is an operation."""
    text = code(node)
    return f"({text})" if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp,
                                            cst.Lambda, cst.UnaryOperation, cst.NamedExpr)) else text


def _activation_fn(module: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The function form of a parameterless activation module a layer emitted after its weights
    (``nn.ReLU()`` → ``torch.relu({})``), as a PyTorch engineer writes it in forward; else None."""
    text = code(module)
    for target, fn in _ACTIVATION_FNS.items():
        if text == ctx.spell_text(target.rsplit("(", 1)[0]) + "()":
            return ctx.spell_text(fn) + "({})"
    m = re.fullmatch(re.escape(ctx.spell_text("torch.nn.Softmax")) + r"\(dim=(-?\d+)\)", text)
    if m:
        return ctx.spell_text("torch.softmax") + "({}, dim=" + m.group(1) + ")"
    return None


def _layer_output_ref(node: cst.BaseExpression) -> tuple[str, int] | None:
    """``model.layers[4].output`` → ("model", 4); None for anything else."""
    if not (isinstance(node, cst.Attribute) and node.attr.value == "output" and isinstance(node.value, cst.Subscript)):
        return None
    sub = node.value
    if not (isinstance(sub.value, cst.Attribute) and sub.value.attr.value == "layers"
            and isinstance(sub.value.value, cst.Name) and len(sub.slice) == 1
            and isinstance(sub.slice[0].slice, cst.Index) and isinstance(sub.slice[0].slice.value, cst.Integer)):
        return None
    return sub.value.value.value, int(sub.slice[0].slice.value.value)


def _fits(declared: tuple | None, shape: tuple | None, loose: bool) -> bool:
    """Whether a tensor of ``shape`` is what a model declared for its input; ``loose``: sizes the
    model names with its own parameters match any size."""
    if declared is None or shape is None or len(declared) != len(shape):
        return False
    return all(a == b or (loose and not (is_int(a) and is_int(b))) for a, b in zip(declared, shape))


_SHOWN = frozenset({"shape", "dtype", "name"})


def _shown_only(stmt, used: set[str]) -> bool:
    """``inputs.shape`` / ``inputs.dtype`` / ``x.name`` alone on its line (functional_api's guide, a notebook
    cell's display): a bare expression statement reading an attribute of a name of the model's graph, no call;
    or the name alone (tensorflow docs' load_data/csv: `result` after `result = 2*input + 1`, showing the symbolic
    tensor): Python evaluates a name and discards it."""
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    value = small.value if isinstance(small, cst.Expr) else None
    if isinstance(value, cst.Name):
        return value.value in used
    return isinstance(value, cst.Attribute) and value.attr.value in _SHOWN and isinstance(value.value, cst.Name) \
        and value.value.value in used


class _Stepped(cst.CSTVisitor):
    def __init__(self):
        self.out: set[str] = set()

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        if isinstance(n.target, cst.Name):
            self.out.add(n.target.value)

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        if isinstance(n.target, cst.Name):
            self.out.add(n.target.value)

    def visit_FunctionDef(self, n) -> bool:
        return False


def _stepped_names(node: cst.CSTNode) -> set[str]:
    """The names a loop's body assigns to (``filters *= 2``, ``width = width // 2``), in its if statements too."""
    v = _Stepped()
    scan(node, v)
    return v.out


_AUG_OPS = {cst.AddAssign: lambda a, b: a + b, cst.SubtractAssign: lambda a, b: a - b,
            cst.MultiplyAssign: lambda a, b: a * b, cst.FloorDivideAssign: lambda a, b: a // b}
_SHAPE_KEEPING = {"Normalization", "Rescaling", "RandomFlip", "RandomRotation", "RandomZoom", "RandomContrast",
                  "RandomTranslation", "RandomBrightness", "Dropout", "GaussianNoise", "GaussianDropout",
                  "Activation", "ReLU"}
_RESIZING = {"Resizing", "CenterCrop", "RandomCrop"}


def _module_sequentials(module: cst.Module, ctx: FileContext) -> dict[str, cst.Call]:
    """Module-level ``name = keras.Sequential([...])`` bound once in the module: name → the call."""
    out: dict[str, cst.Call] = {}
    bound: dict[str, int] = {}
    for stmt in module.body:
        for n in _names_bound_in(stmt) if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else ():
            bound[n] = bound.get(n, 0) + 1
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign) \
                and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Name) \
                and isinstance(stmt.body[0].value, cst.Call) \
                and ctx.imports.resolve(stmt.body[0].value.func) == "keras.Sequential":
            out[stmt.body[0].targets[0].target.value] = stmt.body[0].value
    return {k: v for k, v in out.items() if bound.get(k) == 1}


def _factory(ctx: FileContext, fn: cst.FunctionDef) -> tuple | None:
    """A block factory: ``def Block(width): def apply(x): <layers on x>; return apply`` (a docstring
    allowed). (merged, outer, inner): ``merged`` a function of both parameter lists whose body is the
    closure's (the same nodes), followed as a helper called with every argument by keyword; None when
    ``fn`` is not one (or a closure's parameter shadows the factory's)."""
    cache = ctx.analyses.setdefault("functional_factories", {})
    hit = cache.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    found = None
    stmts = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and isinstance(stmts[0].body[0], cst.Expr) \
            and isinstance(stmts[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        stmts = stmts[1:]
    if len(stmts) == 2 and isinstance(stmts[0], cst.FunctionDef) and not stmts[0].decorators \
            and not fn.decorators and isinstance(stmts[0].body, cst.IndentedBlock) \
            and isinstance(stmts[1], cst.SimpleStatementLine) and len(stmts[1].body) == 1 \
            and isinstance(stmts[1].body[0], cst.Return) and isinstance(stmts[1].body[0].value, cst.Name) \
            and stmts[1].body[0].value.value == stmts[0].name.value:
        inner = stmts[0]
        po, pi = fn.params, inner.params
        outer_names = [p.name.value for p in [*po.posonly_params, *po.params, *po.kwonly_params]]
        inner_names = [p.name.value for p in [*pi.posonly_params, *pi.params, *pi.kwonly_params]]
        plain_params = not (po.posonly_params or pi.posonly_params or isinstance(po.star_arg, cst.Param)
                            or isinstance(pi.star_arg, cst.Param) or po.star_kwarg or pi.star_kwarg)
        if plain_params and not set(outer_names) & set(inner_names):
            # keyword-only in the merged function: every argument comes by keyword (_factory_call)
            params = [p.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                      for p in [*po.params, *po.kwonly_params, *pi.params, *pi.kwonly_params]]
            merged = cst.FunctionDef(fn.name, cst.Parameters(star_arg=cst.ParamStar(), kwonly_params=params),
                                     inner.body)
            found = (merged, fn, inner)
    cache[id(fn)] = (fn, found)
    return found


def _seq_factory(ctx: FileContext, fn: cst.FunctionDef) -> tuple | None:
    """A Sequential factory: ``def downsample(filters, apply_norm=True): result = keras.Sequential();
    result.add(layers.Conv2D(filters, 4)); if apply_norm: result.add(...); return result`` (a docstring and
    assignments of values its layers take, ``initializer = ...``, allowed before the Sequential). (values,
    constructor, body): the names assigned before it → their values, the ``keras.Sequential(...)`` call, and
    the statements after it up to the return (``add`` calls and ``if`` statements of them, checked where it is
    called); None when ``fn`` is not one."""
    cache = ctx.analyses.setdefault("functional_seq_factories", {})
    hit = cache.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    found = None
    stmts = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and isinstance(stmts[0].body[0], cst.Expr) \
            and isinstance(stmts[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        stmts = stmts[1:]
    values: dict[str, cst.BaseExpression] = {}
    for k, st in enumerate(stmts):
        small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
        if not fn.decorators and isinstance(small, cst.Assign) and len(small.targets) == 1 \
                and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.List) \
                and not small.value.elements and small.targets[0].target.value not in values:
            found = _list_seq_factory(ctx, values, small.targets[0].target.value, stmts[k + 1:])
            break
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            break
        name = small.targets[0].target.value
        if isinstance(small.value, cst.Call) and ctx.imports.resolve(small.value.func) == "keras.Sequential":
            last = stmts[-1]
            ret = last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
            if not fn.decorators and isinstance(ret, cst.Return) and isinstance(ret.value, cst.Name) \
                    and ret.value.value == name and name not in values:
                found = (values, small.value, name, stmts[k + 1:-1])
            break
        if name in values:
            break
        values[name] = small.value
    cache[id(fn)] = (fn, found)
    return found


def _list_seq_factory(ctx: FileContext, values: dict, listed: str, stmts: list) -> tuple | None:
    """The list form of a Sequential factory (keras-io's create_ffn: ``ffn_layers = []``, then
    ``ffn_layers.append(layer)`` statements, ``for`` statements over values known where the model is built and
    ``if`` statements of them, then ``return keras.Sequential(ffn_layers, name=name)`` or ``ffn =
    keras.Sequential(ffn_layers)`` and ``return ffn``): (values, constructor, the list's name, the statements
    between), as :func:`_seq_factory`; None when ``stmts`` (those after ``listed = []``) are not that."""
    def sequential(node) -> cst.Call | None:
        ok = isinstance(node, cst.Call) and ctx.imports.resolve(node.func) == "keras.Sequential" and node.args \
            and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == listed \
            and (node.args[0].keyword is None or node.args[0].keyword.value == "layers") and not node.args[0].star
        return node if ok else None

    def small(st):
        return st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None

    last = small(stmts[-1]) if stmts else None
    if isinstance(last, cst.Return) and sequential(last.value) is not None:
        return values, last.value, listed, stmts[:-1]
    made = small(stmts[-2]) if len(stmts) >= 2 else None
    if isinstance(last, cst.Return) and isinstance(last.value, cst.Name) and isinstance(made, cst.Assign) \
            and len(made.targets) == 1 and isinstance(made.targets[0].target, cst.Name) \
            and made.targets[0].target.value == last.value.value and sequential(made.value) is not None:
        return values, made.value, listed, stmts[:-2]
    return None


def _helper_body_calls(fn: cst.FunctionDef) -> list[cst.Call]:
    """The calls a helper's body makes (a block factory's: its closure's)."""
    inner = [s for s in fn.body.body if isinstance(s, cst.FunctionDef)] if isinstance(fn.body, cst.IndentedBlock) else []
    return _calls(fn.body) + [c for f in inner for c in _calls(f.body)]


class _Calls(cst.CSTVisitor):
    def __init__(self):
        self.out: list[cst.Call] = []

    def visit_Call(self, n: cst.Call) -> None:
        self.out.append(n)

    def visit_FunctionDef(self, n) -> bool:
        return False

    def visit_Lambda(self, n) -> bool:
        return False


def _calls(stmt) -> list[cst.Call]:
    """The calls in ``stmt``, not in its lambdas and nested defs (kept while run() works: not to be changed)."""
    return _memoized(_Calls, stmt, _calls_walk)


def _calls_walk(stmt) -> list[cst.Call]:
    v = _Calls()
    scan(stmt, v)
    return v.out


def _line_count(stmt) -> int:
    """The lines of ``stmt``'s text without its leading lines (rendered first, each alone: what they add is
    taken off, not the statement rebuilt without them, which validates it)."""
    return code(stmt).count("\n") - sum(code(line).count("\n") for line in stmt.leading_lines)


class _LayerObject:
    """What ``if activation:`` sees where a helper's parameter was given a layer: a Keras layer object
    (true, and not None)."""

    def __bool__(self) -> bool:
        return True


_LAYER_OBJECT = _LayerObject()


def _literal_node(value) -> cst.BaseExpression:
    if isinstance(value, cst.BaseExpression):  # a name the pass binds (an item of a list of layers or tensors)
        return value
    return expr(repr(value))


class _ListReads(cst.CSTVisitor):
    """Where a builder reads a list name: only as a for statement's values (alone or in reversed / list / zip /
    a slice), in ``name = <such an expression of name>``, and (appended) ``name.append(...)``."""

    def __init__(self, name: str):
        self.name = name
        self.allowed: set[int] = set()
        self.seen: list[int] = []
        self.bindings = 0

    def _allow(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            if node.value != self.name:
                return False
            self.allowed.add(id(node))
            return True
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
            return self._allow(node.value)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) \
                and node.func.value in ("reversed", "list", "zip"):
            return any([self._allow(a.value) for a in node.args])
        return False

    def visit_For(self, node: cst.For) -> None:
        self._allow(node.iter)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(isinstance(t.target, cst.Name) and t.target.value == self.name for t in node.targets):
            self.bindings += 1
            for t in node.targets:
                self.allowed.add(id(t.target))
            if not (isinstance(node.value, (cst.List, cst.Tuple))):
                self._allow(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "append" \
                and isinstance(node.func.value, cst.Name) and node.func.value.value == self.name:
            self.allowed.add(-id(node.func.value))  # (told apart from other reads: appended or not)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.seen.append(id(node))

    def ok(self, appended: bool) -> bool:
        return all(i in self.allowed or (appended and -i in self.allowed) for i in self.seen)


_AS_WRITTEN = object()
_UNKNOWN = object()  # a module-level dict literal's value fwport does not evaluate (its keys are known)


class _LoopModules(cst.CSTTransformer):
    """The forward statements of a loop over a run-time value: ``self.<attr>`` → the loop's module."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def leave_Attribute(self, original_node, updated_node):
        if isinstance(original_node.value, cst.Name) and original_node.value.value == "self" \
                and original_node.attr.value in self.names:
            return cst.Name(self.names[original_node.attr.value])
        return updated_node


class _ShapeSubstitute(cst.CSTTransformer):
    """A helper's body with ``x.shape[i]`` of its tensor arguments written as the size it is there (a
    literal int, or the name of the class parameter that carries it)."""

    def __init__(self, shapes: dict[str, tuple]):
        self.shapes = shapes

    def leave_Subscript(self, original_node, updated_node):
        v = original_node.value
        if isinstance(v, cst.Attribute) and v.attr.value == "shape" and isinstance(v.value, cst.Name) \
                and v.value.value in self.shapes and len(original_node.slice) == 1 \
                and isinstance(original_node.slice[0].slice, cst.Slice):
            # x.shape[1:-1] (keras-io's mobilevit `layers.Reshape((*x.shape[1:-1], d))`): the sizes it takes, where
            # each is a known int (never the batch axis)
            one = original_node.slice[0].slice
            ends = [None if e is None else literal_value(e, NOT_LITERAL) for e in (one.lower, one.upper, one.step)]
            if any(e is NOT_LITERAL or (e is not None and not is_int(e)) for e in ends):
                return updated_node
            full = (None, *self.shapes[v.value.value])
            picked = list(range(len(full)))[slice(*ends)]
            if 0 in picked or not all(is_int(full[j]) for j in picked):
                return updated_node
            return cst.Tuple([cst.Element(cst.Integer(str(int(full[j])))) for j in picked])
        if not (isinstance(v, cst.Attribute) and v.attr.value == "shape" and isinstance(v.value, cst.Name)
                and v.value.value in self.shapes and len(original_node.slice) == 1
                and isinstance(original_node.slice[0].slice, cst.Index)):
            return updated_node
        i = literal_value(original_node.slice[0].slice.value, None)
        shape = self.shapes[v.value.value]
        if not is_int(i) or i == 0 or not -len(shape) <= (i - 1 if i > 0 else i) < len(shape):
            return updated_node
        d = shape[i - 1] if i > 0 else shape[i]
        if is_int(d):
            return cst.Integer(str(int(d)))
        return cst.Name(d) if isinstance(d, str) and d.isidentifier() else updated_node

    def leave_Tuple(self, original_node, updated_node):
        # (*(8, 8), 64) of a slice written above: its items in place, a tuple literal as a rule reads one
        if not any(isinstance(e, cst.StarredElement) and isinstance(e.value, cst.Tuple)
                   and not any(isinstance(x, cst.StarredElement) for x in e.value.elements)
                   for e in updated_node.elements):
            return updated_node
        items = []
        for e in updated_node.elements:
            if isinstance(e, cst.StarredElement) and isinstance(e.value, cst.Tuple):
                items += [cst.Element(x.value) for x in e.value.elements]
            else:
                items.append(cst.Element(e.value))
        return updated_node.with_changes(elements=items)


_BUILTINS = {"int", "float", "reversed", "list", "tuple", "len", "sorted", "sum", "zip", "map", "enumerate", "iter",
             "next", "abs", "round", "min", "max", "str", "dict", "set", "print"}


class _BindingOf(cst.CSTVisitor):
    """The first value a scope binds to ``name`` (``name = value``), or the iterable of the first ``for`` statement
    binding it; functions and classes inside are not entered."""

    def __init__(self, name: str):
        self.name, self.value, self.loop, self.level, self.count = name, None, None, "", 0

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self.name in {n.value for n in _name_nodes(t.target)} for t in node.targets):
            self.count += 1
            if self.value is None and self.loop is None:
                self.value = node.value

    def visit_For(self, node: cst.For) -> None:
        if self.value is None and self.loop is None and self.name in {n.value for n in _name_nodes(node.target)}:
            self.loop = node.iter

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False


class _ShapeReadsOut(cst.CSTTransformer):
    """An expression with each ``x.shape`` written as ``_`` (what it reads of tensors besides their sizes)."""

    def leave_Attribute(self, original_node, updated_node):
        if original_node.attr.value == "shape" and isinstance(original_node.value, cst.Name):
            return cst.Name("_")
        return updated_node


def _shown_shape(shape) -> str:
    """A tensor's shape as Keras shows it, the batch axis first: ``(None, None, 64)``."""
    return "unknown rank" if shape is None else f"({', '.join(str(d) for d in (None, *shape))})"


class _SizeSubstitute(_ShapeSubstitute):
    """:class:`_ShapeSubstitute` that also writes a size computed from the builder's parameters
    (``-(-input_dim // 2)``) in place of ``x.shape[i]``."""

    def leave_Subscript(self, original_node, updated_node):
        out = super().leave_Subscript(original_node, updated_node)
        v = original_node.value
        if out is updated_node and isinstance(v, cst.Attribute) and v.attr.value == "shape" \
                and isinstance(v.value, cst.Name) and v.value.value in self.shapes and len(original_node.slice) == 1 \
                and isinstance(original_node.slice[0].slice, cst.Index):
            i = literal_value(original_node.slice[0].slice.value, None)
            shape = self.shapes[v.value.value]
            if is_int(i) and i != 0 and -len(shape) <= (i - 1 if i > 0 else i) < len(shape):
                d = shape[i - 1] if i > 0 else shape[i]
                if isinstance(d, str):
                    return expr(f"({d})")
        return out


class _CallerNames(cst.CSTTransformer):
    """A size of a helper's result written with the caller's expressions in place of the helper's names
    (parenthesized where they are not atoms); ``unknown`` collects the helper's names it cannot replace."""

    def __init__(self, back: dict[str, str], own: set[str]):
        self.back, self.own, self.unknown = back, own, []

    def leave_Name(self, original_node, updated_node):
        v = original_node.value
        if v in self.back:
            new = expr(self.back[v])
            atom = isinstance(new, (cst.Name, cst.Integer, cst.Attribute, cst.Subscript, cst.Call))
            return new if atom or new.lpar else new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if v in self.own:
            self.unknown.append(v)
        return updated_node

    def leave_Attribute(self, original_node, updated_node):
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node, updated_node):
        return updated_node.with_changes(keyword=original_node.keyword)


def _caller_shape(t: _Tensor, back: dict[str, str], own: set[str], call: cst.Call, name: str) -> _Tensor:
    """The helper's result ``t`` with its symbolic sizes named in the caller's scope, or _Refused at the call
    where a size is written with a name only the helper has."""
    if t.shape is None:
        return t
    dims = []
    for d in t.shape:
        if isinstance(d, str) and not is_int(d):
            if d in back:
                d = back[d]
            else:
                tr = _CallerNames(back, own)
                new = code(expr(d).visit(tr))
                if tr.unknown:
                    raise _Refused(call, f"{name}(...) returns a tensor of size `{d}`, written with "
                                         f"{', '.join(sorted(set(tr.unknown)))} of the helper, which fwport "
                                         f"cannot name where it is called; write that size as a number or "
                                         f"from the caller's own names")
                d = new
        dims.append(d)
    return _Tensor(tuple(dims), t.node, t.flat, t.last, t.shape_name)


class _ShapeReads(cst.CSTVisitor):
    # (a class of the module, not of each call: creating a visitor class costs several times its walk)
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Name] = []

    def visit_Attribute(self, n: cst.Attribute) -> None:
        if n.attr.value == "shape" and isinstance(n.value, cst.Name):
            self.found.append(n.value)


def _shape_reads(node: cst.CSTNode) -> list[cst.Name]:
    """The names whose ``.shape`` the expression reads (``x`` of ``x.shape[-1]``)."""
    v = _ShapeReads()
    scan(node, v)
    return v.found


class _CorrectPad(cst.CSTTransformer):
    """``imagenet_utils.correct_pad(x, k)`` (keras-io's mobilevit ``layers.ZeroPadding2D(padding=...)``) written
    as the padding it returns, computed as Keras computes it from ``x``'s spatial sizes (channels-last, the format a
    file that never sets it has): ``((k//2 - a, k//2), ...)`` with ``a = 1 - size % 2``, or 1 where the size is
    unknown (Keras's own rule); ``refused`` says why where it cannot be (``x`` not a feature map of known rank)."""

    def __init__(self, ctx, shapes: dict):
        self.ctx, self.shapes, self.refused = ctx, shapes, None

    def leave_Call(self, original_node, updated_node):
        if self.ctx.imports.resolve(original_node.func) not in CORRECT_PAD:
            return updated_node
        args = original_node.args
        shape = self.shapes.get(args[0].value.value) if args and isinstance(args[0].value, cst.Name) else None
        k = literal_value(args[1].value, None) if len(args) == 2 else None
        if isinstance(k, int) and not isinstance(k, bool):
            k = (k, k)
        if data_format.image_format_set(self.ctx) is not None or any(a.keyword or a.star for a in args) \
                or shape is None or len(shape) != 3 or not (isinstance(k, (tuple, list)) and len(k) == 2
                                                            and all(is_int(v) for v in k)) \
                or (shape[0] is not None and not is_int(shape[0])) or (shape[0] is not None and not is_int(shape[1])):
            self.refused = (f"{code(original_node)}: fwport computes correct_pad's padding where the model is built "
                            "from a feature map of known rank (its spatial sizes known, or the first unknown) and a "
                            "literal kernel size, in a file that does not set the image data format; write the "
                            "padding as a literal")
            return updated_node
        adjust = (1, 1) if shape[0] is None else (1 - int(shape[0]) % 2, 1 - int(shape[1]) % 2)
        half = (int(k[0]) // 2, int(k[1]) // 2)
        return _literal_node(((half[0] - adjust[0], half[0]), (half[1] - adjust[1], half[1])))


class _Substitute(cst.CSTTransformer):
    """A helper's body with its literal arguments written in place of the parameters."""

    def __init__(self, values: dict[str, cst.BaseExpression]):
        self.values = values

    def leave_Name(self, original_node, updated_node):
        return self.values.get(original_node.value, updated_node)

    def leave_Attribute(self, original_node, updated_node):
        if updated_node.attr is original_node.attr:  # (a walk that copies gives a copy: put back, as before)
            return updated_node
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node, updated_node):
        if updated_node.keyword is original_node.keyword:
            return updated_node
        return updated_node.with_changes(keyword=original_node.keyword)

    def leave_AssignTarget(self, original_node, updated_node):
        return original_node if isinstance(original_node.target, cst.Name) else updated_node

    def visit_Lambda(self, node) -> bool:
        return False

    def visit_FunctionDef(self, node) -> bool:
        return False


class _SubstituteIndexed(_Substitute):
    """:class:`_Substitute`, and an item of a literal list or tuple taken by a literal index written as that item
    (``units=hidden_units[-1]`` with ``[32, 16]`` given: ``units=16``)."""

    def leave_Subscript(self, original_node, updated_node):
        seq = literal_value(updated_node.value, NOT_LITERAL)
        one = updated_node.slice[0].slice if len(updated_node.slice) == 1 else None
        i = literal_value(one.value, NOT_LITERAL) if isinstance(one, cst.Index) else NOT_LITERAL
        if isinstance(seq, (list, tuple)) and is_int(i) and -len(seq) <= i < len(seq) and _plain_value(seq[i]):
            return _literal_node(seq[i])
        return updated_node


def _chooses_layer(e: cst.IfExp) -> bool:
    """``L(...)(x) if t else x``: a branch applies a layer (a call of a call) and each is one or a name."""
    def applied(v) -> bool:
        return isinstance(v, cst.Call) and isinstance(v.func, cst.Call)

    return (applied(e.body) or applied(e.orelse)) and all(applied(v) or isinstance(v, cst.Name)
                                                          for v in (e.body, e.orelse))


def _ifexp_of(st) -> cst.IfExp | None:
    """The conditional expression ``st`` assigns to one name (``x = A if t else B``), or None."""
    if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1:
        return None
    small = st.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
            and isinstance(small.value, cst.IfExp):
        return small.value
    return None


class _FoldIfExp(cst.CSTTransformer):
    """``a if <test> else b`` → the branch the test takes where its value is known here (a for
    statement written out pass by pass: ``activation=tf.nn.gelu if idx == 0 else None``)."""

    def __init__(self, builder: "_Builder"):
        self.builder = builder

    def leave_IfExp(self, original_node, updated_node):
        try:
            taken = self.builder._static(updated_node.test, {})
        except (_Refused, TypeError, ZeroDivisionError):
            return updated_node
        if taken is _LAYER_OBJECT or not isinstance(taken, (bool, int, float, str, type(None), list, tuple)):
            return updated_node
        chosen = updated_node.body if taken else updated_node.orelse
        return chosen.with_changes(lpar=[], rpar=[]) if not isinstance(chosen, cst.IfExp) else chosen

    def visit_Lambda(self, node) -> bool:
        return False


class _Replace(cst.CSTTransformer):
    def __init__(self, replace: dict[int, cst.BaseExpression]):
        self.replace = replace

    def on_leave(self, original_node, updated_node):
        new = self.replace.get(id(original_node))
        if new is None:
            return updated_node
        if isinstance(original_node, cst.BaseExpression) and (original_node.lpar or original_node.rpar):
            new = new.with_changes(lpar=original_node.lpar, rpar=original_node.rpar)
        return new


def _layer_order(outputs: list[_Node], inputs: list[_Op]) -> list[_Op]:
    """The operations in Keras's order (``map_graph``: by decreasing depth, then first traversal)."""
    finished: set[int] = set()
    ordered: list[_Node] = []
    op_index: dict[int, int] = {}

    def visit(n: _Node) -> None:
        if id(n) in finished:
            return
        if id(n.op) not in op_index:
            op_index[id(n.op)] = len(op_index)
        for p in n.parents:
            visit(p)
        finished.add(id(n))
        ordered.append(n)

    for o in outputs:
        visit(o)
    node_depth: dict[int, int] = {}
    op_depth: dict[int, int] = {}
    ops: dict[int, _Op] = {}
    in_graph = {id(n) for n in ordered}
    for n in reversed(ordered):
        depth = node_depth.setdefault(id(n), 0)
        depth = max(depth, op_depth.get(id(n.op), 0))
        op_depth[id(n.op)] = depth
        ops[id(n.op)] = n.op
        node_depth[id(n)] = depth
        for p in n.parents:
            if id(p) in in_graph:
                node_depth[id(p)] = max(depth + 1, node_depth.get(id(p), 0))
    for op in inputs:  # an input that reaches no output is still one of the model's layers
        if id(op) not in op_depth:
            op_depth[id(op)], op_index[id(op)], ops[id(op)] = 0, -1, op
    return [ops[k] for k in sorted(op_depth, key=lambda k: (-op_depth[k], op_index[k]))]


# --- finish: the class, once every finding is located -----------------------------------------------------

def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    plans = ctx.analyses.get("functional")
    if not plans:
        if ctx.analyses.get("functional_withs"):  # (a model refused in a with block: its statements back in it)
            body = list(module.body)
            return module.with_changes(body=_rewrap_withs(body, list(range(len(body))), ctx))
        return module
    for plan in plans:  # layers of this file's classes: their records, below the model's path
        for cls, source, attr in plan.user_layers:
            for r in [r for r in ctx.layers if r.scope == cls]:
                ctx.layers.append(LayerRecord(plan.scope, f"{source}.{r.source}", f"{attr}.{r.target}", r.rule,
                                              r.variant, dict(r.symbols)))
    body = list(module.body)
    if _places(body) != ctx.analyses.get("functional_places"):  # never classes built from other statements
        raise RuntimeError("a pass removed or inserted a top-level statement between the functional pass and its "
                           "finish, which finds the statements of its plans by their places")
    builders: dict[int, list] = {}
    for plan in plans:
        if plan.path:
            i = plan.path[0]
            fn = body[i]
            cls, builder = _build(plan, list(fn.body.body), fn, ctx)
            builders[i] = [cls.with_changes(leading_lines=_two_blank(fn.leading_lines) if i else fn.leading_lines),
                           builder.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])]
    replaced = ctx.analyses.get("functional_replaced", set())
    code_by_helper: dict[str, list[str]] = {}
    for plan in plans:
        for k, v in plan.class_code.items():
            code_by_helper.setdefault(k, []).extend(c for c in v if c not in code_by_helper.get(k, []))
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value in replaced and i not in builders \
                and (stmt.name.value in ctx.analyses.get("functional_input_helpers", ())
                     or stmt.name.value in ctx.analyses.get("functional_seq_factory_names", ())) \
                and stmt.name.value not in code_by_helper:
            # create_model_inputs(): the models take the dict it built as forward's argument; a Sequential
            # factory: its nn.Sequential is built in the classes' __init__
            builders[i] = []
            continue
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value in code_by_helper and i not in builders:
            classes = [statement(c) for c in code_by_helper[stmt.name.value]]
            classes = [c.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]) for c in classes]
            classes[0] = classes[0].with_changes(leading_lines=_two_blank(stmt.leading_lines) if i else stmt.leading_lines)
            builders[i] = classes if stmt.name.value in replaced else [*classes, stmt.with_changes(
                leading_lines=[cst.EmptyLine(), cst.EmptyLine()])]
    tops = [p for p in plans if not p.path]
    origin: list[int] = []
    if tops:
        body = _build_module(tops, body, ctx, builders, origin)
    else:
        out = []
        for i, s in enumerate(body):
            got = builders.get(i, [s])
            out += got
            origin += [i] * len(got)
        body = out
    return module.with_changes(body=_rewrap_withs(body, origin, ctx))


def _clean(stmt):
    lines = [ln for ln in stmt.leading_lines if not (ln.comment is not None and ln.comment.value == LINE_MARK)]
    return stmt.with_changes(leading_lines=lines)


def _two_blank(lines) -> list:
    """Leading lines of a top-level class: at least two blank lines before it (PEP 8)."""
    lines = list(lines)
    blank = 0
    while blank < len(lines) and lines[blank].comment is None:
        blank += 1
    return [cst.EmptyLine()] * max(0, 2 - blank) + lines


def _strip_blank(lines) -> list:
    lines = list(lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return lines


def _tap_defs(plan: _Plan, indexed: list) -> list:
    """The methods of :attr:`_Plan.tap_methods`: forward's statements (``indexed``: (statement index, statement))
    up to a named layer's, those its output depends on (a backward slice by names: forward is straight-line
    there), then ``return`` that output."""
    out = []
    for method, (params, index, ret) in sorted(plan.tap_methods.items()):
        needed = _names_in(expr(ret))
        kept = []
        for i, stmt in reversed([(i, st) for i, st in indexed if i <= index]):
            bound = set(_assigned(stmt)) | _names_bound_in(stmt)
            if bound & needed:
                kept.insert(0, stmt)
                needed = (needed - bound) | _reads(stmt)
        if kept:
            kept[0] = kept[0].with_changes(leading_lines=_strip_blank(kept[0].leading_lines))
        entries = {id(st) for i, st in indexed if i < 0}
        first = next((k for k, st in enumerate(kept) if id(st) not in entries), None)
        if first:  # (right after forward's first lines: no blank line, as forward has none there)
            kept[first] = kept[first].with_changes(leading_lines=_strip_blank(kept[first].leading_lines))
        fn = statement(f"def {method}(self, {', '.join(params)}):\n    pass\n")
        body = [*kept, statement(f"return {ret}\n")]
        out.append(fn.with_changes(body=fn.body.with_changes(body=body),
                                   leading_lines=[cst.EmptyLine(indent=False)]))
    return out


def _parts(plan: _Plan, stmts: list):
    init, forward, carried = [], [], []
    indexed: list = []  # (statement index, forward statement) for _tap_defs
    for i, stmt in enumerate(stmts):
        role = plan.roles.get(i, "keep")
        stmt = _clean(stmt)
        for line in plan.init_lines.get(i, []):
            init.append(statement(line + "\n"))
        if role == "config":
            init.append(stmt)
        elif role == "input":
            carried += [ln for ln in stmt.leading_lines if ln.comment is not None]
        elif role == "layer":
            carried += [ln for ln in stmt.leading_lines if ln.comment is not None]
        elif role == "unrolled":
            new = list(plan.generated.get(i, []))
            if new:
                lead = [*carried, *[ln for ln in stmt.leading_lines if ln.comment is not None]]
                new[0] = new[0].with_changes(leading_lines=lead)
                carried = []
            forward += new
            indexed += [(i, g) for g in new]
        elif role == "forward":
            if carried:
                stmt = stmt.with_changes(leading_lines=[*carried, *stmt.leading_lines])
                carried = []
            forward.append(stmt)
            indexed.append((i, stmt))
    init += [statement(f"self.{attr} = {name}\n") for name, attr in plan.carried.items()]
    plan.tap_defs = _tap_defs(plan, [*[(-1, statement(line + "\n")) for line in plan.entry_lines], *indexed])
    for part in (init, forward):  # no blank line at the top of a method
        if part:
            part[0] = part[0].with_changes(leading_lines=_strip_blank(part[0].leading_lines))
    ret = plan.returns[0] if len(plan.returns) == 1 else ", ".join(plan.returns)
    if plan.return_keys is not None:
        ret = "{" + ", ".join(f"{_key_code(k)}: {r}" for k, r in zip(plan.return_keys, plan.returns)) + "}"
    read = set().union(_names_in(expr(ret)), *(_reads(st) for st in forward))
    # (an input read only through a model above's method, which moves it itself: not moved here)
    moved = {name: v for name, v in plan.moved.items() if name in read or not plan.reads_above}
    gone = {line for name, (line, _) in plan.moved.items() if name not in moved}
    entry = [line for line in plan.entry_lines if line not in gone]
    if entry:
        forward = [statement(line + "\n") for line in entry] + forward
    if moved and forward:
        text = f"{', '.join(shown for _, shown in moved.values())} channels-last as in Keras, made channels-first once here"
        note = cst.EmptyLine(indent=True, whitespace=cst.SimpleWhitespace(""), comment=cst.Comment(f"# {text}"))
        forward[0] = forward[0].with_changes(leading_lines=[note, *forward[0].leading_lines])
    forward.append(statement(f"return {ret}\n"))
    return init, forward


def _class(plan: _Plan, params: cst.Parameters | None, init: list, forward: list, ctx: FileContext) -> cst.ClassDef:
    module_name = plan.base or ctx.spell_text("torch.nn.Module")
    fwd_params = ", ".join(["self", *plan.forward_params])
    cls = statement(f"class {plan.class_name}({module_name}):\n"
                    f"    def __init__(self):\n        super().__init__()\n\n"
                    f"    def forward({fwd_params}):\n        pass\n")
    init_fn, fwd_fn = cls.body.body
    if params is not None:
        self_param = cst.Param(cst.Name("self"))
        if params.posonly_params:
            params = params.with_changes(posonly_params=[self_param, *params.posonly_params])
        else:
            params = params.with_changes(params=[self_param, *params.params])
        init_fn = init_fn.with_changes(params=params)
    init_fn = init_fn.with_changes(body=init_fn.body.with_changes(body=[*init_fn.body.body, *init]))
    fwd_fn = fwd_fn.with_changes(body=fwd_fn.body.with_changes(body=forward))
    return cls.with_changes(body=cls.body.with_changes(body=[init_fn, fwd_fn, *plan.tap_defs]))


def _call_args(params: cst.Parameters) -> str:
    out = [p.name.value for p in [*params.posonly_params, *params.params]]
    if isinstance(params.star_arg, cst.Param):
        out.append(f"*{params.star_arg.name.value}")
    out += [f"{p.name.value}={p.name.value}" for p in params.kwonly_params]
    if isinstance(params.star_kwarg, cst.Param):
        out.append(f"**{params.star_kwarg.name.value}")
    return ", ".join(out)


def _build(plan: _Plan, stmts: list, fn: cst.FunctionDef, ctx: FileContext):
    init, forward = _parts(plan, stmts)
    init = [statement(_guard(n, v)) for n, v in plan.pinned.items()] + init
    cls = _class(plan, fn.params, init, forward, ctx)
    new_call = f"{plan.class_name}({_call_args(fn.params)})"
    kept = []
    for i, stmt in enumerate(stmts):
        role = plan.roles.get(i, "keep")
        if role == "keep" or i in plan.keep_copies:
            kept.append(_clean(stmt))
        elif role == "model":
            kept.append(_model_statement(_clean(stmt), plan, new_call))
    if kept:  # (the statements above it went into the class: no blank line at the top of the body)
        kept[0] = kept[0].with_changes(leading_lines=_strip_blank(kept[0].leading_lines))
    return cls, fn.with_changes(body=fn.body.with_changes(body=kept))


def _model_statement(stmt, plan: _Plan, new_call: str):
    small = stmt.body[0]
    text = f"{plan.model_target} = {new_call}\n" if plan.model_target else None
    if isinstance(small, cst.Return):
        text = f"return {new_call}\n"
    if text is None:
        text = f"{new_call}\n"
    new = statement(text)
    return new.with_changes(leading_lines=stmt.leading_lines, trailing_whitespace=stmt.trailing_whitespace)


def _build_module(plans: list[_Plan], body: list, ctx: FileContext, builders: dict[int, list],
                  origin: list[int]) -> list:
    """(``origin`` gets the place in ``body`` each statement returned comes from.)"""
    classes = {}
    for plan in plans:
        init, forward = _parts(plan, body)
        classes[id(plan)] = _class(plan, None, init, forward, ctx)
    out = []
    placed: set[int] = set()
    for i, stmt in enumerate(body):
        origin += [i - 1] * (len(out) - len(origin))  # (what the statement before gave)
        plan = next((p for p in plans if p.roles.get(i, "keep") != "keep"), None)
        role = plan.roles[i] if plan is not None else "keep"
        if role in ("input", "layer", "forward", "unrolled"):
            if id(plan) not in placed:
                comments = [ln for ln in _clean(stmt).leading_lines if ln.comment is not None]
                out.append(classes[id(plan)].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *comments]))
                placed.add(id(plan))
            continue
        if role == "model":
            if id(plan) not in placed:  # (a model of no statement of its own: keras.Model(m.input, m.get_layer(...)))
                out.append(classes[id(plan)].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
                placed.add(id(plan))
            new = _model_statement(_clean(stmt), plan, f"{plan.class_name}()")
            out.append(new.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(),
                                                       *_strip_blank(new.leading_lines)]))
            out += [a for k, a in sorted(plan.adapts.items()) if k < i]
            continue
        if role == "adapt":
            if any(k > i and r == "model" for k, r in plan.roles.items()):
                continue  # (written after the model's statement)
            out.append(plan.adapts[i])
            continue
        out += builders.get(i, [_clean(stmt)])
    origin += [len(body) - 1] * (len(out) - len(origin))
    return out


def refused_model_calls(module: cst.Module, scratch: FileContext) -> list[cst.CSTNode]:
    """The ``keras.Model(...)`` calls of ``module`` this pass leaves as written, found by running it on ``scratch``,
    a throwaway context (the training pass, which runs first, asks: such a model's training stays Keras code)."""
    run(module, scratch)
    return [p.node for p in scratch.pending if p.node is not None and p.finding.severity is Severity.ERROR
            and p.finding.message.startswith("this functional model is left as written")]


# ctx.analyses key: (the module the training pass asked about, the keras.Model(...) calls refused on it), put there
# by the training pass when it runs refused_model_calls (training._LeftModels)
FIRST_LEFT = "functional_left_first"


def left_model_calls(module: cst.Module, ctx: FileContext) -> set[int]:
    """ids of the ``keras.Model(...)`` calls of ``module`` this pass will leave as written (:func:`refused_model_calls`
    on a throwaway copy of ``ctx``), found once per file for the passes that run before it (model_api: a method of
    such a model stays a Keras call, not an nn.Module's). Where the training pass asked first (on the tree before its
    changes), its answer is this one too when each call it found refused is still in ``module``: the training pass
    rewrites compile / fit / losses, not the layer graphs this pass follows, so a second functional run on its output
    would find the same calls (checked on keras-io, the TF corpus and the fixtures: docs/architecture.md, Performance, speedC)."""
    cache = ctx.analyses.setdefault("functional_left_calls", {})
    hit = cache.get(id(module))
    if hit is not None and hit[0] is module:
        return hit[1]
    source = ctx.analyses.get("parsed", (None, ""))[1]
    left: set[int] = set()
    first = ctx.analyses.get(FIRST_LEFT)
    if first is not None and _still_in(first[0], first[1], module):
        left = {id(n) for n in first[1]}
    elif "Input" in source and "Model" in source:
        scratch = dataclasses.replace(
            ctx, options=dict(ctx.options), pending=[], findings=[], needed_imports=set(), layers=[], models={},
            settled=dict(ctx.settled), subscript_hooks={}, argument_hooks={}, plans=Plans(),
            analyses={k: ctx.analyses[k] for k in ("parsed", "layout") if k in ctx.analyses})
        left = {id(n) for n in refused_model_calls(module, scratch)}
    cache[id(module)] = (module, left)
    return left


def _still_in(before: cst.Module, calls: list[cst.CSTNode], module: cst.Module) -> bool:
    """Each of ``calls`` (nodes of ``before``) is a node of ``module``, a later tree of the file: the node itself, not
    a copy, so an id the training pass found is the id model_api asks about."""
    if not calls:
        return True
    found = {id(c) for c in find_all(module, cst.Call)}
    return all(id(c) in found for c in calls)


def _inputs_reached(node, params: dict[int, str]) -> frozenset[str]:
    """The model inputs (``params``: id of an input's op → its name) that the graph node ``node`` depends on."""
    needed, seen, stack = set(), set(), [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if id(n.op) in params:
            needed.add(params[id(n.op)])
        stack.extend(n.parents)
    return frozenset(needed)
