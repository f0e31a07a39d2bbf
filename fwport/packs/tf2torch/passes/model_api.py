"""Structural pass: the Keras model API (``compile``, ``fit``, ``predict``, ``save_weights``...) on
models that the translation turns into ``nn.Module``s.

An ``nn.Module`` has none of these methods, so a call left as written would fail at run time, far
from its cause. Each one is an error finding (and a ``# fwport:`` comment) that says what to write
in PyTorch instead, and the call is settled: later passes leave its arguments (an optimizer, a
loss) as written rather than translating them out of context. ``model.summary()`` as a statement
is translated, as ``print(model)`` (an info finding).

Only receivers known to be such models are touched, never a method that merely has the same name
(``re.compile``, ``pattern.fit``): a name every binding of which, in its scope, is a model —
``keras.Sequential(...)``, a functional ``keras.Model(inputs, outputs)``, an instance of a
``keras.Model`` subclass defined in the file, or the result of a function of the file that returns
one of those — or such an expression itself (``build_model().summary()``). Scopes are Python's:
a function's parameter or local of the same name is another object. A parameter of a module function
is a model where every call of the function gives it one, or where the calls give nothing followed and
the function uses it only as a model (``def run_experiment(model): model.compile(...)``); a call giving
it a model fwport leaves Keras (``keras.applications...``) makes each of its model methods an error. This pass runs first, on the
source as written, so that the Keras names are still there to resolve.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field

import libcst as cst

from fwport.core.hooks import default_leave_transform, default_visit
from fwport.core.rewrite import rewrite
from fwport.core.bindings import BindingWalker
from fwport.core.context import FileContext
from fwport.core.bind import bind_def, call_argument, literal_value
from fwport.core.engine import code, comment_error
from fwport.core.finding import Severity
from fwport.core.names import dotted, find_all, param_names, scan
from fwport.core.position import render
from fwport.packs.tf2torch import helpers

#: calls that make a model (load_model: the module torch.load gives back, see rules/tf2torch/load-model.toml)
MODEL_CONSTRUCTORS = {"keras.Sequential", "keras.Model", "keras.models.load_model", "keras.saving.load_model",
                      "keras.models.clone_model"}
MODEL_BASES = {"keras.Model", "keras.Sequential"}

_LOOP = ("write the training loop: model.train(); for x, y in loader: optimizer.zero_grad(); "
         "loss = loss_fn(model(x), y); loss.backward(); optimizer.step()")
_EVAL = "model.eval(), then inside `with torch.no_grad():` compute the loss and metrics over the data"
_PREDICT = ("model.eval(), then `with torch.no_grad(): y = model(x)` on a tensor x (channels-first if "
            "fwport reported a layout change), in batches for a large x")

#: Keras model methods with no nn.Module counterpart → what to write in PyTorch instead.
METHODS: dict[str, str] = {
    "compile": ("create the optimizer over the parameters (torch.optim.Adam(model.parameters(), lr=...); note "
                "that Keras's optimizer defaults, e.g. Adam's epsilon 1e-7, differ from torch's) and the loss "
                "(nn.CrossEntropyLoss(), ...), and use them in a training loop"),
    "fit": _LOOP,
    "fit_generator": _LOOP,
    "train_on_batch": ("one step of a training loop: model.train(); optimizer.zero_grad(); "
                       "loss = loss_fn(model(x), y); loss.backward(); optimizer.step()"),
    "evaluate": _EVAL,
    "evaluate_generator": _EVAL,
    "test_on_batch": "model.eval(); with torch.no_grad(): loss = loss_fn(model(x), y)",
    "predict": _PREDICT,
    "predict_generator": _PREDICT,
    "predict_on_batch": "model.eval(); with torch.no_grad(): y = model(x)",
    "summary": "print(model) shows the modules; sum(p.numel() for p in model.parameters()) counts parameters",
    "save": ("torch.save(model, path) (what fwport writes for a plain `model.save(path)` statement; torch.save "
             "replaces an existing file, so test os.path.exists(path) yourself for overwrite=False), or "
             "torch.save(model.state_dict(), path) and rebuild the model in code to load it"),
    "save_weights": ("torch.save(model.state_dict(), path) (what fwport writes for a plain "
                     "`model.save_weights(path)` statement)"),
    "load_weights": ("model.load_state_dict(torch.load(path)) (what fwport writes for a plain "
                     "`model.load_weights(path)` statement; Keras's by_name / skip_mismatch: load_state_dict(..., "
                     "strict=False) matches by name, not by layer); convert a Keras weights file first with "
                     "`fwport weights model.weights.h5 --to model.pt`"),
    "get_weights": "model.state_dict() (tensors by name, not a list of arrays by position)",
    "set_weights": "model.load_state_dict(state_dict) (tensors by name, not a list of arrays by position)",
    "get_layer": ("model.get_submodule(path) or the attribute / index itself; fwport's layer records map each "
                  "Keras layer to its torch path"),
    "count_params": ("sum(p.numel() for p in model.parameters()) counts the parameters, but Keras also counts "
                     "non-trainable weights such as BatchNorm's moving statistics (torch buffers: "
                     "model.buffers())"),
    "to_json": "a PyTorch model is its source code: there is no architecture serialisation (torch.export for a graph)",
    "to_yaml": "a PyTorch model is its source code: there is no architecture serialisation (torch.export for a graph)",
    "get_config": "a PyTorch model is its source code: there is no config; keep the constructor arguments yourself",
    "build": ("a torch module has its sizes from its constructor, or takes them on its first call (Lazy "
              "modules): run one forward pass on a dummy batch, `with torch.no_grad(): model(torch.zeros(1, ...))` "
              "(channels-first if fwport reported a layout change), before creating the optimizer"),
    "reset_states": ("reset_rnn_states(model) (what fwport writes for `model.reset_states()`: the reset_states() "
                     "of each stateful recurrent layer, written as a Stateful<kind> module)"),
}


#: Keras model attributes an nn.Module lacks, read outside the training code the training pass translates
#: (``tape.gradient(loss, model.trainable_variables)``): what each becomes ({m}: the model), and why; None:
#: an error finding (what to write instead)
_TRAINABLE = ("[p for p in {m}.parameters() if p.requires_grad]",
              "the parameters that train, in the order the layers were created (Keras's order), each in torch's "
              "layout (a Dense kernel is the transposed weight)")
_ALL_WEIGHTS = ("[*{m}.parameters(), *{m}.buffers()]",
                "every parameter, then every buffer (BatchNorm's running statistics, and its num_batches_tracked "
                "count, which Keras has not), each in torch's layout (a Dense kernel is the transposed weight): not "
                "Keras's per-layer order, but the same pairing for two models of one architecture (a target "
                "network's soft update)")
_NON_TRAINABLE = (None, "[p for p in model.parameters() if not p.requires_grad] and list(model.buffers()) "
                  "(BatchNorm's running statistics)")
ATTRIBUTES: dict[str, tuple[str | None, str]] = {
    "trainable_variables": _TRAINABLE,
    "trainable_weights": _TRAINABLE,
    "variables": _ALL_WEIGHTS,
    "weights": _ALL_WEIGHTS,
    "non_trainable_variables": _NON_TRAINABLE,
    "non_trainable_weights": _NON_TRAINABLE,
    "layers": (None, "the translated module's submodules are its attributes, named in the translation "
               "(self.fc1, ...), or list(model.children()): not Keras's list (no InputLayer, activations and "
               "merges folded into forward), so an index into model.layers has no counterpart"),
}
_ATTRIBUTE_NAMES = "|".join(ATTRIBUTES)
#: model.layers (or one of them) of a Sequential the translation made channels-first (model_api._plan_layers)
_NCHW_LAYERS = ("{} is a Keras model attribute, and {} is translated channels-first: a layer taken out of it and "
                "called would see its input's axes in another order than Keras's; freeze or read its modules by hand "
                "(model[i], list(model)), or call the model")
#: what get_layer(...) on a translated model may be used by (model_api._ModelApiPass._plan_get_layer)
_LAYER_USES = {"requires_grad_", "get_weights", "set_weights"}
#: a layer's variables read as values through get_layer(...) (``.kernel`` / ``.bias``), and the calls that write one
_LAYER_VARIABLES = {"kernel", "bias"}
_VARIABLE_WRITES = {"assign", "assign_add", "assign_sub"}


def _layer_variable(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The layer (_layer_ref) of ``model.get_layer(...).kernel`` / ``model.layers[k].bias``, else None."""
    if isinstance(node, cst.Attribute) and node.attr.value in _LAYER_VARIABLES and _layer_ref(node.value) is not None:
        return node.value
    return None


def _layers_index(node: cst.BaseExpression) -> int | None:
    """k of ``model.layers[k]`` (an integer literal, negative too), else None."""
    if not (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute)
            and node.value.attr.value == "layers" and isinstance(node.value.value, cst.Name) and len(node.slice) == 1
            and isinstance(node.slice[0].slice, cst.Index)):
        return None
    index = node.slice[0].slice.value
    negative = isinstance(index, cst.UnaryOperation) and isinstance(index.operator, cst.Minus)
    index = index.expression if negative else index  # type: ignore[attr-defined]
    if not isinstance(index, cst.Integer):
        return None
    return -int(index.value) if negative else int(index.value)


def _model_of(ref: cst.BaseExpression) -> cst.BaseExpression:
    """``model`` of a _layer_ref, ``model.get_layer(...)`` / ``model.layers[k]``."""
    return ref.func.value if isinstance(ref, cst.Call) else ref.value.value  # type: ignore[attr-defined]


def _layer_ref(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``node`` where it names one layer of a model: ``model.get_layer(...)`` or ``model.layers[k]``."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get_layer":
        return node
    return node if _layers_index(node) is not None else None


#: the uses of a name bound to a model's layer (``layer = model.get_layer("x")``) that only concern its weights:
#: the module holding them is all the name needs to be (the training pass made ``.trainable = f`` requires_grad_)
_WEIGHT_USES = {"requires_grad_", "get_weights", "set_weights", "kernel", "bias"}


def _weights_only(scope: cst.CSTNode, name: str, binding: cst.Name, uses=_WEIGHT_USES) -> bool:
    """Whether every other occurrence of ``name`` in ``scope`` reads one of ``uses`` of it (not written: ``name.kernel
    = v``)."""
    written = {id(t.target) for a in find_all(scope, cst.Assign) for t in a.targets}
    written |= {id(a.target) for a in find_all(scope, cst.AugAssign)}
    allowed = {id(a.value) for a in find_all(scope, cst.Attribute) if isinstance(a.value, cst.Name)
               and a.value.value == name and a.attr.value in uses and id(a) not in written}
    return all(id(n) in allowed for n in find_all(scope, cst.Name) if n.value == name and n is not binding) \
        and len(allowed) > 0


def _keras_layout_of(param: str, ops) -> str | None:
    """The torch parameter ``param`` in Keras's layout, for a weight map of one index permutation (its inverse
    applied to the torch side), else None."""
    if len(ops) != 1:
        return None
    op, params = ops[0].op, ops[0].params
    if op == "copy":
        return param
    if op in ("transpose", "permute") and (not params or all(p.lstrip("-").isdigit() for p in params)):
        if not params or [int(p) for p in params] == [1, 0]:
            return f"{param}.T"
        perm = [int(p) for p in params]
        if sorted(perm) != list(range(len(perm))):
            return None
        inverse = [perm.index(i) for i in range(len(perm))]
        return f"{param}.permute({', '.join(map(str, inverse))})"
    return None


#: layers whose get_weights() lists their rule's weight maps in the maps' order (the order Keras creates them in);
#: the flags that leave one out: a Dense's / convolution's bias without use_bias, a normalization's gamma / beta
_ORDERED_WEIGHTS = {"dense", "conv1d", "conv2d", "conv3d", "conv1d-transpose", "conv2d-transpose", "conv3d-transpose",
                    "embedding", "batch-normalization", "layer-normalization", "group-normalization"}
_OPTIONAL_WEIGHTS = {"use_bias": "bias", "center": "beta", "scale": "gamma"}


def _weight_list(rule, variant, call) -> list | str:
    """The weight maps of what Keras's ``layer.get_weights()`` lists for this layer, in its order, each moved by
    one index permutation (so either way round is one ``permute``), or why fwport cannot say."""
    kind = rule.names[0].rsplit(".", 1)[-1]
    if rule.id not in _ORDERED_WEIGHTS:
        return f"fwport knows the arrays of get_weights() of a Dense, a convolution, an Embedding and a normalization, not of a {kind}"
    entries = list(rule.weights_for(variant))
    positional = [p.name for p in rule.params if p.kind == "positional"]
    for flag, weight in _OPTIONAL_WEIGHTS.items():
        if not any(p.name == flag for p in rule.params) or not isinstance(call, cst.Call):
            continue
        value = call_argument(call, flag, positional.index(flag) if flag in positional else None)
        if value is None or literal_value(value, None) is True:
            continue
        if literal_value(value, None) is False and flag == "use_bias":
            entries = [w for w in entries if w.source != weight]
            continue
        return f"{flag}={code(value)} changes which weights the {kind} has"
    for w in entries:
        if _keras_layout_of(w.target, w.ops) is None:
            return (f"the {kind}'s {w.source} is stored as torch's {w.target} by "
                    f"{', '.join(o.render() for o in w.ops)} here, not one permutation of its axes")
    return entries


def _torch_layout_of(value: str, ops) -> str:
    """``value`` (a tensor in Keras's layout) moved to torch's by a weight map of one index permutation."""
    op, params = ops[0].op, ops[0].params
    if op == "copy":
        return value
    if not params or [int(p) for p in params] == [1, 0]:
        return f"{value}.T"
    return f"{value}.permute({', '.join(params)})"


def plan_attribute(ctx: FileContext, node: cst.Attribute, by: str, descend: bool = True, why_more: str = "") -> None:
    """``<model>.<attr>`` (one of ATTRIBUTES): its PyTorch expression planned with an info finding, or an error
    (the node settled) where there is none; ``why_more`` adds to the finding's reason."""
    receiver, attr = code(node.value), node.attr.value
    text, why = ATTRIBUTES[attr]
    why += why_more
    if text is None:
        ctx.report(Severity.ERROR, "unsupported-construct", f"{receiver}.{attr} is a Keras model attribute; the "
                   f"translated model is an nn.Module, which has none: {why}", node)
        ctx.settle(node)
        return
    ctx.report(Severity.INFO, "idiom-replaced", f"{receiver}.{attr} → {text.format(m=receiver)}: {why}", node)

    def apply(orig: cst.Attribute, upd: cst.Attribute) -> cst.BaseExpression:
        inner = render(upd.value)
        return cst.parse_expression(text.format(m=f"({inner})" if "\n" in inner else inner))
    ctx.plans.add(node, apply, descend=descend, by=by)

#: model methods translated where they are a statement: the PyTorch text, and what the info finding says
SAVING: dict[str, tuple[str, str]] = {
    "save_weights": ("{torch}save({model}.state_dict(), {path})",
                     "the parameters and buffers by name, in one torch file (not Keras's .h5 layout)"),
    "load_weights": ("{model}.load_state_dict({torch}load({path}))",
                     "reads a file the translated code saved (torch.save of the state_dict); a file written by "
                     "Keras must be converted first: `fwport weights model.weights.h5 --to model.pt`"),
    "save": ("{torch}save({model}, {path})",
             "the whole module pickled with its parameters, which keras.models.load_model(path) (→ "
             "torch.load(path, weights_only=False)) gives back; pickle stores the class by its import path, so "
             "the code that loads it must define or import the same class; the optimizer is not saved with it"),
}


def models_of(module: cst.Module, ctx: FileContext) -> _Models:
    """The models of ``module``, analysed once per tree: training, this pass where training changed nothing, and
    valuekinds's numpy_values (on the tree analysed last) share one analysis."""
    cached = ctx.analyses.get("models_of")
    if cached is not None and cached[0] is module:
        return cached[1]
    models = _Models(ctx)
    models.analyse(module)
    ctx.analyses["models_of"] = (module, models)
    return models


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    models = models_of(module, ctx)
    if not models.any() and not models.param_refusals and not any(
            _holds(module, ctx, said) for said in ("is a Keras model method", "is a Keras model attribute")):
        return module  # (the comment: a translation being translated again says the same again)
    # only the top-level statements holding a `.<model method>(...)` call are rewritten; the others
    # stay the very same nodes (a transformer rebuilds every node it visits)
    p = _ModelApiPass(ctx, models)
    p.module = module
    p.visit_Module(module)
    body = list(module.body)
    changed = False
    for i, stmt in enumerate(body):
        v = _MethodCalls()
        scan(stmt, v)
        if v.found:
            p.top_index = i  # (_reaching_sequential: the statements above it)
            body[i] = rewrite(stmt, p)
            changed = True
    return module.with_changes(body=body) if changed else module


def _text(module: cst.Module, ctx: FileContext) -> str:
    """The module's text: the source when it is the tree parsed from it (translate_source says so); else by the
    translation's Layout, which renders each top-level statement once for all the passes' positions and texts."""
    parsed = ctx.analyses.get("parsed")
    if parsed is not None and parsed[0] is module:
        return parsed[1]
    layout = ctx.analyses.get("layout")
    return layout.text(module) if layout is not None else render(module, module)


def _holds(module: cst.Module, ctx: FileContext, needle: str) -> bool:
    """Whether the module's text holds ``needle``, a text no pass writes (``:=``, this pass's own messages): not
    where the source lacks it, without rendering the module (a tree the training pass changed); else as _text."""
    parsed = ctx.analyses.get("parsed")
    if parsed is not None and needle not in parsed[1]:
        return False
    return needle in _text(module, ctx)


#: summary() arguments that only lay out Keras's table (print(model) has none to honour)
_SUMMARY_LAYOUT = {"line_length", "positions", "expand_nested", "show_trainable"}


def _layout_only(call: cst.Call) -> bool:
    """A summary call without arguments, or with keyword arguments that only shape its table."""
    return all(a.keyword is not None and a.keyword.value in _SUMMARY_LAYOUT and not a.star for a in call.args)


class _MethodCalls(cst.CSTVisitor):
    """Whether a statement holds a call of a method named as a Keras model method, or an attribute named as
    a model attribute (ATTRIBUTES), on anything."""

    def __init__(self) -> None:
        self.found = False

    # (no on_visit stopping at the first find: with libcst's, scan calls these hooks from its table and passes
    # over the nodes that have none, names and operators, which most statements, holding no such call, are made of)
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in METHODS:
            self.found = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in ATTRIBUTES:
            self.found = True


# --- which names are models -----------------------------------------------------------------------

@dataclass
class _Scope:
    """The names one scope (the module or a function) binds, and those that are surely models."""

    bound: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    shadow: set[str] = field(default_factory=set)  # import aliases rebound here (def f(keras): ...)
    assigned: dict[str, list] = field(default_factory=dict)  # name → the value of each binding (None: not `name = value`)
    params: set[str] = field(default_factory=set)
    # names some binding of which is a model and another a for target, an import or an unpacking (`model, x =
    # ...`) that is none: which one reaches a use is not followed (_ModelApiPass._mixed)
    mixed: set[str] = field(default_factory=set)


class _Bindings(BindingWalker):
    """Every binding of a name in one scope (not in nested functions or classes), each with its value
    when it is a plain ``name = value``.

    ``statement_bound``: the names bound other than by ``:=`` or an import (what ``names.bound_names`` finds).
    An import binds its name to something no model (value None: ``from os import path as model`` makes
    ``model`` no model there). Only a ``:=`` binds inside an expression, so without ``walrus`` expressions
    are not walked."""

    def __init__(self, walrus: bool = True) -> None:
        super().__init__(expressions=walrus)
        self.assigned: dict[str, list[cst.BaseExpression | None]] = {}
        self.statement_bound: set[str] = set()

    def bound(self, target: cst.BaseExpression, how: str, value: cst.BaseExpression | None) -> None:
        if not isinstance(target, cst.Name) or how in ("del", "global"):
            return
        self.assigned.setdefault(target.value, []).append(value)
        if how not in ("walrus", "import"):
            self.statement_bound.add(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        """``a, b = f(...)``: each name's value is ``f(...)[i]`` (``history, model = run_experiment(model)``, a
        function of the file returning its model with other values: _Models.is_model_expr follows it)."""
        t = node.targets[0].target if len(node.targets) == 1 else None
        if (isinstance(t, (cst.Tuple, cst.List)) and isinstance(node.value, cst.Call)
                and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in t.elements)):
            for i, e in enumerate(t.elements):
                index = cst.SubscriptElement(cst.Index(cst.Integer(str(i))))
                self.bound(e.value, "assign", cst.Subscript(node.value, [index]))
            return
        super().visit_Assign(node)


def _bindings(stmt: cst.CSTNode, walrus: bool) -> tuple[dict[str, list], set[str]]:
    """(name → the values bound to it, the names bound other than by ``:=``) in one statement (_Bindings)."""
    b = _Bindings(walrus)
    scan(stmt, b)
    return b.assigned, b.statement_bound


class _Returns(cst.CSTVisitor):
    def __init__(self) -> None:
        self.values: list[cst.BaseExpression | None] = []

    # a return is a statement: expressions (most of the tree) cannot hold one, and scan does not enter them for a
    # visitor whose hooks are all on statements (names.STATEMENT_LEVEL)
    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        self.values.append(node.value)


_FACTS = "model_api.facts"  # (ctx.analyses) _Models._fact's


class _Models:
    """Model classes, builder functions and model names of one file, decided on the source tree."""

    def __init__(self, ctx: FileContext):
        self.ctx = ctx
        self.classes: set[str] = set()  # module-level keras.Model subclasses
        self.builders: set[str] = set()  # module-level functions that return a model
        self.scopes: dict[int, _Scope] = {}  # id(Module / FunctionDef) → scope
        self.walrus = True  # may a `:=` bind a name inside an expression (set by analyse)
        # (id(function), parameter) → (what a call gives it that fwport leaves a Keras object, that call):
        # a parameter used as a model whose model stays Keras (keras.applications, a hub layer)
        self.param_refusals: dict[tuple[int, str], tuple[str, cst.Call]] = {}
        self.functions: dict[int, cst.FunctionDef] = {}  # id(function) → the function (its scope's key)
        self.param_args: dict[tuple[int, str], list] = {}  # (id(function), parameter) → what its calls give it
        # (id(function), parameter) → (what a call gives it, the scopes and functions around that call), each call
        self.param_sites: dict[tuple[int, str], list] = {}
        self.facts: dict[tuple, tuple] = ctx.analyses.setdefault(_FACTS, {})

    def _fact(self, kind, node: cst.CSTNode, compute):
        """What ``compute()`` finds of ``node`` (a function's returns, a scope's bindings, how a function reads a
        parameter), kept for the file by the node's identity, the node held with it: a node never changes, and
        the trees the passes hand on share the nodes they did not rewrite, so the analysis of a later tree
        (model_api's, of the tree the training pass changed a few statements of) does not walk them again."""
        key = (kind, id(node))
        hit = self.facts.get(key)
        if hit is not None and hit[0] is node:
            return hit[1]
        value = compute()
        self.facts[key] = (node, value)
        return value

    def _call_sites(self, module: cst.Module, names: frozenset[str]) -> "_CallSites":
        """The calls of the functions ``names`` in ``module``, each statement's found once per file (a call, a
        function around it and a name read are all inside one top-level statement)."""
        sites = _CallSites(names)
        for stmt in module.body:
            def compute():
                one = _CallSites(names)
                scan(stmt, one)
                return one.calls, one.values
            calls, values = self._fact(("call sites", names), stmt, compute)
            for name, found in calls.items():
                sites.calls.setdefault(name, []).extend(found)
            sites.values |= values
        return sites

    def returns(self, fn: cst.FunctionDef) -> list:
        """The values of ``fn``'s returns (None: a bare return), not those of the functions inside it."""
        def compute():
            rets = _Returns()
            scan(fn.body, rets)
            return tuple(rets.values)
        return list(self._fact("returns", fn, compute))

    def any(self) -> bool:
        return any(s.models or s.mixed for s in self.scopes.values())

    def qualname(self, node: cst.BaseExpression, shadow: set[str]) -> str | None:
        parts = dotted(node)
        if not parts or parts[0] in shadow:
            return None
        return self.ctx.imports.resolve_parts(parts)

    def is_model_expr(self, node: cst.BaseExpression | None, chain: list[_Scope]) -> bool:
        """A call that makes a model, or a name that is one, seen from the innermost of ``chain``; ``f(...)[i]``
        of a function of the module every return of which is a tuple whose element i is a model (the value of
        ``a, model = f(...)``, _Bindings)."""
        if isinstance(node, cst.Name):
            return self.lookup(node.value, chain)
        if (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Call)
                and isinstance(node.value.func, cst.Name) and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index) and isinstance(node.slice[0].slice.value, cst.Integer)):
            name, i = node.value.func.value, int(node.slice[0].slice.value.value)
            fn = getattr(self, "top_functions", {}).get(name)
            if fn is None or id(fn) not in self.scopes or next(
                    (s for s in reversed(chain) if name in s.bound), None) is not chain[0]:
                return False
            values = self.returns(fn)
            inner = [chain[0], self.scopes[id(fn)]]
            return bool(values) and all(
                isinstance(v, cst.Tuple) and len(v.elements) > i and isinstance(v.elements[i], cst.Element)
                and not any(isinstance(e, cst.StarredElement) for e in v.elements)
                and self.is_model_expr(v.elements[i].value, inner) for v in values)
        if not isinstance(node, cst.Call):
            return False
        shadow = set().union(*(s.shadow for s in chain))
        if self.qualname(node.func, shadow) in MODEL_CONSTRUCTORS:
            return True
        if isinstance(node.func, cst.Name):
            name = node.func.value
            local = next((s for s in reversed(chain) if name in s.bound), None)
            # a class or builder of the module, not rebound in between
            return local is chain[0] and (name in self.classes or name in self.builders)
        return False

    def lookup(self, name: str, chain: list[_Scope]) -> bool:
        for s in reversed(chain):
            if name in s.bound:
                return name in s.models
        return False

    def analyse(self, module: cst.Module) -> None:
        self.walrus = _holds(module, self.ctx, ":=")  # else no binding hides in an expression
        top = self.top = self._scope_of(module, module.body)
        classes = [s for s in module.body if isinstance(s, cst.ClassDef)]
        functions = [s for s in module.body if isinstance(s, cst.FunctionDef)]
        self.top_classes = {c.name.value for c in classes}
        self.top_functions = {f.name.value: f for f in functions}
        # per top-level function, once: its scope (with the imports it shadows) and what it returns
        facts = []
        for f in functions:
            facts.append((f, self._scope_of(f, f.body), self.returns(f)))
        sites = self._call_sites(module, frozenset(f.name.value for f in functions))
        changed = True
        while changed:  # classes may derive from classes, builders call builders: until nothing changes
            changed = False
            for c in classes:
                if c.name.value not in self.classes and any(
                        self.qualname(b.value, set()) in MODEL_BASES
                        or (isinstance(b.value, cst.Name) and b.value.value in self.classes) for b in c.bases):
                    self.classes.add(c.name.value)
                    changed = True
            self._models_of(top, module.body, [top])
            for f, scope, returned in facts:
                chain = [top, scope]
                known = len(scope.models)
                self._models_of(scope, f.body, chain)
                # (a model it returns in a tuple, `m, opt = get_model()`, is one at the top once it is one here)
                changed = changed or len(scope.models) > known
                if (f.name.value not in self.builders and returned
                        and all(self.is_model_expr(v, chain) for v in returned)):
                    self.builders.add(f.name.value)
                    changed = True
            for f, scope, _ in facts:
                changed = self._given_models(f, scope, sites, top, facts) or changed
        # functions nested in classes and functions (methods): their own scopes
        for node in (f for stmt in module.body if not isinstance(stmt, cst.SimpleStatementLine)
                     for f in self._fact("functions", stmt, lambda: tuple(find_all(stmt, cst.FunctionDef)))):
            if id(node) not in self.scopes:
                scope = self._scope_of(node, node.body)
                self._models_of(scope, node.body, [top, scope])

    def _scope_of(self, node: cst.CSTNode, body) -> _Scope:
        scope = self.scopes.get(id(node))
        if isinstance(node, cst.FunctionDef):
            self.functions[id(node)] = node
        if scope is None:
            # each statement's bindings, in order (a walker keeps nothing from one statement to the next)
            assigned: dict[str, list] = {}
            statement_bound: set[str] = set()
            for stmt in (body if isinstance(body, (list, tuple)) else [body]):
                its, its_bound = self._fact(("bindings", self.walrus), stmt, lambda: _bindings(stmt, self.walrus))
                for name, values in its.items():
                    assigned.setdefault(name, []).extend(values)
                statement_bound |= its_bound
            params = param_names(node) if isinstance(node, cst.FunctionDef) else set()
            scope = _Scope(set(assigned) | params, assigned=assigned, params=params)
            if isinstance(node, cst.FunctionDef):  # import aliases it rebinds, as names.bound_names
                scope.shadow = (statement_bound | params) & set(self.ctx.imports.aliases)
            self.scopes[id(node)] = scope
        return scope

    def _models_of(self, scope: _Scope, body, chain: list[_Scope]) -> None:
        for _ in range(3):  # `m = build(); model = m` settles in a few rounds
            for name, values in scope.assigned.items():
                if name in scope.params or name in scope.models:
                    continue  # a parameter may be anything
                values = [v for v in values if not self._passes_through(v, name, chain)]
                if values and all(v is not None and self.is_model_expr(v, chain) for v in values):
                    scope.models.add(name)
        # a model by one binding, and by another what no plain `name = value` says (a for target, an import, an
        # unpacking: `model, other = ...` whose element is no model); a name rebound to another object by a plain
        # assignment (`model = LinearRegression()`) is that object's, its methods its own
        scope.mixed = set()
        for name, values in scope.assigned.items():
            if name in scope.params or name in scope.models:
                continue
            values = [v for v in values if v is None or not self._passes_through(v, name, chain)]
            if any(v is not None and self.is_model_expr(v, chain) for v in values) and any(
                    v is None or isinstance(v, cst.Subscript) and isinstance(v.value, cst.Call) for v in values):
                scope.mixed.add(name)

    def _passes_through(self, value, name: str, chain: list[_Scope]) -> bool:
        """``value`` is ``f(..., name, ...)[i]`` where element i of every return of the module's function ``f`` is
        the parameter that call gives ``name`` to, never rebound in ``f``: ``name`` itself handed back
        (``history, model = run_experiment(model)``), which leaves what ``name`` is unchanged; ``name`` itself
        (``model = model``, ``model = (model)``) too."""
        if isinstance(value, cst.Name) and value.value == name:
            return True
        if not (isinstance(value, cst.Subscript) and isinstance(value.value, cst.Call)
                and isinstance(value.value.func, cst.Name) and len(value.slice) == 1
                and isinstance(value.slice[0].slice, cst.Index)
                and isinstance(value.slice[0].slice.value, cst.Integer)):
            return False
        call, i = value.value, int(value.slice[0].slice.value.value)
        fn = getattr(self, "top_functions", {}).get(call.func.value)
        if fn is None or id(fn) not in self.scopes or next(
                (s for s in reversed(chain) if call.func.value in s.bound), None) is not chain[0]:
            return False
        positional = [p.name.value for p in fn.params.params]
        given = None
        for k, a in enumerate(call.args):
            if a.star:
                return False
            if isinstance(a.value, cst.Name) and a.value.value == name:
                given = a.keyword.value if a.keyword else (positional[k] if k < len(positional) else None)
        fscope = self.scopes[id(fn)]
        if given is None or given not in fscope.params or given in fscope.assigned:
            return False
        values = self.returns(fn)
        return bool(values) and all(
            isinstance(v, cst.Tuple) and len(v.elements) > i and isinstance(v.elements[i], cst.Element)
            and not any(isinstance(e, cst.StarredElement) for e in v.elements)
            and isinstance(v.elements[i].value, cst.Name) and v.elements[i].value.value == given for v in values)


    # -- a function's parameter that is a model: what its callers give it
    def _given_models(self, f: cst.FunctionDef, scope: _Scope, sites: "_CallSites", top: _Scope, facts) -> bool:
        """A parameter of the module's function ``f`` (not rebound in it) is a model where every call of ``f``
        gives it one (``run_experiment(model)`` called with models the file builds), or where the calls give
        nothing fwport follows and ``f`` uses it only as a model (its Keras methods, calls of it) — unless a
        call gives it what stays a Keras object (``keras.applications...``): that is ``param_refusals``."""
        changed = False
        name = f.name.value
        calls = sites.calls.get(name, [])
        for p in [*f.params.posonly_params, *f.params.params, *f.params.kwonly_params]:
            param = p.name.value
            if param in scope.models or param in scope.assigned or (id(f), param) in self.param_refusals:
                continue
            verdicts = []
            for call, stack in calls:
                chain = [top, *(self._stack_scope(fn) for fn in stack)]
                if next((s for s in reversed(chain) if name in s.bound), None) is not top:
                    continue  # another function of that name
                args = bind_def(call, f)
                verdicts.append((self._given(args[param], chain) if args and param in args else "", call))
                if args and param in args:
                    self.param_args.setdefault((id(f), param), []).append(args[param])
                    self.param_sites.setdefault((id(f), param), []).append((args[param], chain, list(stack)))
            refused = next(((v, c) for v, c in verdicts if v not in ("", "model", "other")), None)
            if refused is not None:
                self.param_refusals[(id(f), param)] = refused
                continue
            if any(v == "other" for v, _ in verdicts):
                continue  # an object of the file's own that is no model (its methods are its own)
            every = bool(verdicts) and all(v == "model" for v, _ in verdicts) and name not in sites.values
            if every or _used_as_model(self._fact("model uses", f, lambda: _model_uses(f)), param):
                scope.models.add(param)
                changed = True
        return changed

    def _stack_scope(self, fn: cst.FunctionDef) -> _Scope:
        """The scope of a function a call site is in (a nested one's models found on first use)."""
        known = id(fn) in self.scopes
        scope = self._scope_of(fn, fn.body)
        if not known:
            self._models_of(scope, fn.body, [self.top, scope])
        return scope

    def _given(self, value: cst.BaseExpression, chain: list[_Scope], depth: int = 0) -> str:
        """What an argument gives a parameter: "model" (a model the file builds), "other" (an instance of one of
        the file's classes that is no model), the text of a call fwport leaves a Keras object (a model from
        keras.applications, tensorflow_hub...: an external call that makes no model fwport translates), or
        "" (not followed)."""
        if self.is_model_expr(value, chain):
            return "model"
        if depth > 3:
            return ""
        if isinstance(value, cst.Name):
            at = next((i for i in range(len(chain) - 1, -1, -1) if value.value in chain[i].bound), None)
            if at is None or value.value in chain[at].params:
                return ""
            seen = {self._given(v, chain[:at + 1], depth + 1) for v in chain[at].assigned.get(value.value, [])
                    if v is not None}
            return next((v for v in sorted(seen) if v not in ("", "model")), "")
        if not isinstance(value, cst.Call):
            return ""
        shadow = set().union(*(s.shadow for s in chain))
        q = self.qualname(value.func, shadow)
        if q is not None:
            return "" if q in MODEL_CONSTRUCTORS else f"{code(value.func)}(...)"
        if isinstance(value.func, cst.Name) and next((s for s in reversed(chain) if value.func.value in s.bound),
                                                     None) is chain[0]:
            name = value.func.value
            if name in self.top_classes and name not in self.classes:
                return "other"
            fn = self.top_functions.get(name)
            if fn is not None:  # a function of the module: what it returns
                inner = [chain[0], self.scopes[id(fn)]]
                seen = {self._given(v, inner, depth + 1) for v in self.returns(fn) if v is not None}
                return next((v for v in sorted(seen) if v not in ("", "model", "other")), "")
        return ""


#: model method names other libraries' objects have too (scikit-learn's fit / predict, a file's save)
_SHARED_NAMES = {"fit", "predict", "save", "build", "get_config", "to_json", "reset_states"}


class _ModelUses(cst.CSTVisitor):
    """How a function body reads each name (see _used_as_model), every parameter in one walk. A class of the module,
    not of each call: creating a visitor class costs several times its walk."""

    def __init__(self) -> None:
        super().__init__()
        self.ok: set[int] = set()  # names read as a model: `m.compile`, `m(x)`, `return m`
        self.methods: Counter = Counter()  # name → its model methods only Keras models have
        self.other: Counter = Counter()  # name → its other reads (other attributes, passed on, stored...)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name):
            self.ok.add(id(node.value))
            attr = node.attr.value
            if attr in METHODS and attr not in _SHARED_NAMES:
                self.methods[node.value.value] += 1
            elif attr not in METHODS:
                self.other[node.value.value] += 1

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name):
            self.ok.add(id(node.func))

    def visit_Return(self, node: cst.Return) -> None:
        if isinstance(node.value, cst.Name):
            self.ok.add(id(node.value))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self.ok:
            self.other[node.value] += 1

    def visit_FunctionDef(self, node) -> bool:
        return False  # a nested function may bind its own

    def visit_Lambda(self, node) -> bool:
        return False


def _model_uses(fn: cst.FunctionDef) -> _ModelUses:
    v = _ModelUses()
    scan(fn.body, v)
    return v


def _used_as_model(uses: _ModelUses, param: str) -> bool:
    """The function ``uses`` was found of (_model_uses) reads ``param`` only as a Keras model (its model methods, one
    at least that only Keras models have: ``compile``, ``evaluate``... — scikit-learn estimators fit and predict too
    —, ``param(x)``, ``return param``)."""
    return uses.methods[param] > 0 and uses.other[param] == 0


class _CallSites(cst.CSTVisitor):
    """The calls of the module's functions by name, each with the functions around it (innermost last);
    ``values``: those of them read otherwise too (passed on, stored: their calls are not all seen)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.calls: dict[str, list[tuple[cst.Call, tuple]]] = {}
        self.values: set[str] = set()
        self._stack: list[cst.FunctionDef] = []
        self._called: set[int] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._called.add(id(node.name))
        self._stack.append(node)

    def leave_FunctionDef(self, original_node) -> None:
        self._stack.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in self.names:
            self.calls.setdefault(node.func.value, []).append((node, tuple(self._stack)))
            self._called.add(id(node.func))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names and id(node) not in self._called:
            self.values.add(node.value)


# --- rewriting ------------------------------------------------------------------------------------

class _ModelApiPass(cst.CSTTransformer):
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None  # no visit_<Node>_<field> hooks here: libcst need not look them up per field

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None

    def __init__(self, ctx: FileContext, models: _Models):
        super().__init__()
        self.ctx = ctx
        self.models = models
        self.chain: list[_Scope] = []
        self.summaries: set[int] = set()  # id(summary call) translated by its statement
        self.saved: dict[int, cst.BaseExpression] = {}  # id(Expr) → its save / load translated (SAVING)
        self.functions: list[cst.FunctionDef] = []  # the functions around the node visited
        self._indexed: set[int] = set()  # id(seq.layers) of a seq.layers[k] visit_Subscript planned
        # id(model.layers) iterated by a loop that only sets each layer's trainable flag (visit_For)
        self._freezing: set[int] = set()
        self._sliced: set[int] = set()  # (of those, the ones sliced: model.layers[:-1])
        self._called: set[int] = set()  # id(x[k]) of a call x[k](...)
        self.module: cst.Module | None = None
        self._left_calls: set[int] | None = None  # functional.left_model_calls, asked once a receiver may be one
        # id(model.get_layer(...)) → (how it is used: "requires_grad_" | "get_weights" | "set_weights", the call
        # using it): the uses of a layer a translation can give (_plan_get_layer)
        self._layer_uses: dict[int, tuple[str, cst.Call]] = {}
        self._copied_layers: set[int] = set()  # id(b.get_layer(...)) of a.get_layer(...).set_weights(b.get_layer(...).get_weights())
        self._line_plans: dict[int, object] = {}  # id of a set_weights line → its edit (leave_SimpleStatementLine)

    def _left(self, receiver: cst.BaseExpression) -> bool:
        """``receiver`` is a functional model the functional pass leaves as written: a Keras object, whose methods and
        attributes stay Keras's (every binding of the name in its scope a ``keras.Model(...)`` left, or a call of a
        builder of the file that builds one; or such a call itself)."""
        if isinstance(receiver, cst.Name):
            scope = next((s for s in reversed(self.chain) if receiver.value in s.bound), None)
            values = scope.assigned.get(receiver.value) if scope is not None else None
            return bool(values) and all(v is not None and self._left_value(v) for v in values)
        return self._left_value(receiver)

    def _left_value(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        fn = self.models.top_functions.get(value.func.value) if isinstance(value.func, cst.Name) else None
        if fn is not None and value.func.value not in self.models.builders:
            return False
        if fn is None and self.models.qualname(value.func, set()) not in MODEL_BASES:
            return False  # (only a keras.Model(...) call or a builder's can be a model the functional pass leaves)
        if self._left_calls is None:
            from fwport.packs.tf2torch.passes import functional  # (it imports what this pass's module does)
            self._left_calls = functional.left_model_calls(self.module, self.ctx) if self.module is not None else set()
        if fn is None:
            return id(value) in self._left_calls
        return any(id(c) in self._left_calls for c in find_all(fn, cst.Call))

    def _mixed(self, receiver: cst.BaseExpression) -> bool:
        """``receiver`` is a name one binding of which (in the scope it is read from) is a model fwport translates
        and another is not: a ``for`` target, an unpacking, an import, a with / except target (_Scope.mixed)."""
        if not isinstance(receiver, cst.Name) or self.ctx.is_settled(receiver):
            return False
        scope = next((s for s in reversed(self.chain) if receiver.value in s.bound), None)
        return scope is not None and receiver.value in scope.mixed

    def _mixed_error(self, node: cst.CSTNode, what: str) -> None:
        """``what`` on a name bound both to a translated model and to something else: an error, never left silent."""
        receiver = code(node.func.value if isinstance(node, cst.Call) else node.value)  # type: ignore[attr-defined]
        self.ctx.report(Severity.ERROR, "unsupported-construct",
                        f"{what}, left as written: {receiver} is bound here both to a model fwport translates into "
                        "an nn.Module and to something else (a for target, an unpacking, an import), "
                        "and which binding reaches this line is not followed; give the model a name of its own, or "
                        "write this as PyTorch where it is the model", node)
        self.ctx.settle(node)

    def _left_error(self, node: cst.CSTNode, what: str) -> None:
        """``what`` (``model.get_layer(...)``, ``model.layers``) on a model left as written: an error saying so."""
        receiver = code(node.func.value if isinstance(node, cst.Call) else node.value)  # type: ignore[attr-defined]
        self.ctx.report(Severity.ERROR, "unsupported-construct",
                        f"{what}, left as written: {receiver} is a functional model fwport leaves as written (the "
                        "errors at its keras.Model(...) say why), so it stays a Keras object and this too; once the "
                        "model is translated (by hand, as an nn.Module), write it as PyTorch", node)
        self.ctx.settle(node)

    def on_leave(self, original_node, updated_node):
        # settled nodes keep their identity for the passes after this one
        out = default_leave_transform(self, original_node, updated_node)
        return original_node if self.ctx.is_settled(original_node) else out

    def visit_Module(self, node: cst.Module) -> None:
        self.chain = [self.models.scopes[id(node)]]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.chain.append(self.models.scopes[id(node)])
        self.functions.append(node)

    def leave_FunctionDef(self, original_node, updated_node):
        self.chain.pop()
        self.functions.pop()
        return updated_node

    def _refused_param(self, receiver: cst.BaseExpression) -> tuple[str, str] | None:
        """(the function, what a call gives it) for a parameter of the enclosing function used as a model whose
        callers give it a model fwport leaves Keras (model_api._Models.param_refusals)."""
        if not (isinstance(receiver, cst.Name) and self.functions):
            return None
        fn = self.functions[-1]
        if receiver.value not in self.chain[-1].params:
            return None
        given = self.models.param_refusals.get((id(fn), receiver.value))
        return (fn.name.value, given[0]) if given is not None else None

    def _model_method(self, call: cst.Call) -> str | None:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in METHODS:
            return None
        # a method's own scope; names of an enclosing class body are not visible from it
        return func.attr.value if self.models.is_model_expr(func.value, self.chain) else None

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Subscript):
            self._called.add(id(func))  # seq.layers[k](x): the whole layer, its activation too (visit_Subscript)
        if self.models.qualname(func, set()) in MODEL_BASES:
            # keras.Model(m.input, m.get_layer("x").output): the functional pass follows it where m is a model it
            # translates (a method of m's class up to that layer), and says why not where it cannot
            items = [a.value for a in node.args]
            items += [e.value for v in list(items) if isinstance(v, (cst.List, cst.Tuple)) for e in v.elements]
            for v in items:
                if isinstance(v, cst.Attribute) and v.attr.value in ("input", "output") and isinstance(v.value, cst.Call) \
                        and isinstance(v.value.func, cst.Attribute) and v.value.func.attr.value == "get_layer":
                    self._layer_uses[id(v.value)] = ("tap", node)
        if isinstance(func, cst.Attribute) and func.attr.value in _LAYER_USES and _layer_ref(func.value) is not None:
            self._layer_uses[id(func.value)] = (func.attr.value, node)
        if isinstance(func, cst.Attribute) and func.attr.value in _VARIABLE_WRITES and _layer_variable(func.value):
            self._layer_uses[id(func.value.value)] = ("assign", func.value)  # get_layer(...).kernel.assign(v)
        return not self.ctx.is_settled(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:  # get_layer(...).kernel = v
            if _layer_variable(t.target):
                self._layer_uses[id(t.target.value)] = ("write", t.target)
        # layer = model.get_layer("x") (or model.layers[k]), the name only frozen or its weights read / set: the
        # module holding the layer's weights (the layer-weights planner translates those uses on it)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and _layer_ref(node.value):
            scope = self.functions[-1] if self.functions else self.module
            name = node.targets[0].target
            if scope is not None and len(self.chain[-1].assigned.get(name.value) or []) == 1 \
                    and _weights_only(scope, name.value, name) and (
                        _weights_only(scope, name.value, name, {"requires_grad_", "trainable"})
                        or self._weights_planned(_model_of(node.value))):
                self._layer_uses[id(node.value)] = ("bound", node)

    def _weights_planned(self, receiver: cst.BaseExpression) -> bool:
        """Whether the layer-weights planner finds the records of the model ``receiver`` names (a name bound in this
        scope, no parameter, to a model whose records have one scope): it translates the get / set_weights and
        .kernel of a layer taken out of it, which the torch module holding the layer's weights has not."""
        if not isinstance(receiver, cst.Name) or (self.functions and receiver.value in self.chain[-1].params):
            return False
        scope = self._records_scope(receiver)
        return scope is not None and "|" not in scope

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if _layer_variable(node.target):
            self._layer_uses[id(node.target.value)] = ("write", node.target)

    def on_visit(self, node: cst.CSTNode) -> bool:
        edit = self.ctx.plans.get(node)
        if edit is not None and not edit.descend:
            return False  # a planner's alone (the training pass's tape statements): rebuilt, it would lose its edit
        return default_visit(self, node)  # CSTTransformer.on_visit, its hooks looked up once per node type

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """``seq.layers[0]`` on a module-level Sequential: its torch entry (``seq[0]``) where the layer has weights
        (its LayerRecord, which the sequential pass writes later: looked up when the edit is applied), else
        the error of ``.layers``. keras-io's ``data_augmentation.layers[0].adapt(x_train)``. Elsewhere (read in a
        function, a negative index, a layer without weights), on a Sequential known by its name (_sequential_name):
        the entry or slice of entries that layer became (SPANS, as _plan_layers); so too where it is called
        (``seq.layers[0](x)``: the activation a Dense became beside its nn.Linear applies too)."""
        value = node.value
        if not (isinstance(value, cst.Attribute) and value.attr.value == "layers" and isinstance(value.value, cst.Name)
                and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
                and not self.ctx.is_settled(node) and self.ctx.plans.get(node) is None):
            return
        k = _layers_index(node)
        if k is None:
            return
        sequential = self._sequential_name(value.value)
        if sequential is None and self._plan_functional_index(node, k):
            return
        recorded = self.models.is_model_expr(value.value, self.chain) and len(self.chain) == 1
        recorded = recorded and (k >= 0 or sequential is not None)  # (a negative index: counted from SPANS' end)
        if not (recorded or sequential):
            return
        name = value.value.value
        self._indexed.add(id(value))
        ctx = self.ctx
        from fwport.packs.tf2torch.passes.sequential import SPANS

        # called, the layer is all the modules it became (a Dense and its activation), not its weights' module
        called = id(node) in self._called and sequential is not None

        def apply(orig: cst.Subscript, upd: cst.Subscript) -> cst.BaseExpression:
            spans = (ctx.analyses.get(SPANS, {}).get(name) if sequential else None) or (None, False)
            at = k if k >= 0 else len(spans[0]) + k if spans[0] is not None and not spans[1] else None
            # a layer with weights (model.layers[-1].bias): the module holding them, not the layer's slice
            target = next((r.target for r in ctx.layers if r.scope == name and r.source == f"layers[{at}]"),
                          None) if recorded and not called and at is not None and at >= 0 else None
            if target is not None:
                out = f"{name}[{target}]" if target.isdigit() else f"{name}.{target}"
                ctx.report(Severity.INFO, "idiom-replaced", f"{name}.layers[{k}] → {out}: the module that layer "
                           "became" + (" (holding its weights)" if k < 0 else ""), orig)
                return cst.parse_expression(out)
            spans, nchw = spans
            if nchw:
                ctx.report(Severity.ERROR, "unsupported-construct", _NCHW_LAYERS.format(f"{name}.layers[{k}]", name),
                           orig)
                return orig
            if spans is None or not -len(spans) <= k < len(spans):
                ctx.report(Severity.ERROR, "unsupported-construct",
                           f"{name}.layers is a Keras model attribute; the translated model is an nn.Module, which "
                           f"has none: {ATTRIBUTES['layers'][1]}", orig.value)
                return orig
            a, b = spans[k]
            out = f"{name}[{a}]" if b == a + 1 else f"{name}[{a}:{b}]"
            ctx.report(Severity.INFO, "idiom-replaced", f"{name}.layers[{k}] → {out}: the module{'' if b == a + 1 else 's'} "
                       "that layer became (a slice of an nn.Sequential is an nn.Sequential of the same modules); its "
                       "Keras attributes (name, kernel, output) are not the module's", orig)
            return cst.parse_expression(out)
        self.ctx.plans.add(node, apply, descend=False, by="model_api")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """``model.trainable_variables`` / ``.variables`` / ``.weights`` → the parameters (and buffers);
        ``.layers`` / ``.non_trainable_variables`` → an error (ATTRIBUTES). Planned, not rewritten here: the
        rule pass applies the edit, so a training-pass edit around it (descend=True) still finds its node."""
        layer = _layer_variable(node)
        if layer is not None:
            self._layer_uses.setdefault(id(layer), ("read", node))  # (a write was seen first: it stays)
        attr = node.attr.value
        if (attr not in ATTRIBUTES or self.ctx.is_settled(node) or self.ctx.plans.get(node) is not None
                or id(node) in self._indexed):
            return
        if not (self.models.is_model_expr(node.value, self.chain) or self._said_attribute(node)):
            if self._mixed(node.value):
                self._mixed_error(node, f"{code(node.value)}.{attr} is a Keras model attribute")
            return
        if self._left(node.value):
            self._left_error(node, f"{code(node.value)}.{attr} is a Keras model attribute")
            return
        if attr == "layers" and self._sequential_name(node.value) is not None:
            self._plan_layers(node, node.value.value, freezing=id(node) in self._freezing)  # type: ignore[attr-defined]
            return
        if attr == "layers" and id(node) in self._freezing and self._plan_frozen(node):
            return
        plan_attribute(self.ctx, node, by="model_api", descend=False)

    def _sequential_name(self, receiver: cst.BaseExpression) -> str | None:
        """``receiver``'s name where it is a module-level name bound once, by ``name = keras.Sequential(...)``, and
        declared global by no function (the one Sequential the sequential pass translates under that name)."""
        if not (isinstance(receiver, cst.Name) and self.chain):
            return None
        name, top = receiver.value, self.chain[0]
        if next((s for s in reversed(self.chain) if name in s.bound), None) is not top:
            return None
        values = top.assigned.get(name) or []
        if not (len(values) == 1 and isinstance(values[0], cst.Call)
                and self.models.qualname(values[0].func, set(top.shadow)) == "keras.Sequential"):
            return None
        if self.module is not None and re.search(rf"\bglobal\b[^\n]*\b{re.escape(name)}\b", _text(self.module, self.ctx)):
            return None
        return name

    def visit_For(self, node: cst.For) -> None:
        """``for layer in model.layers: layer.trainable = flag`` (or ``model.layers[a:b]``), a loop whose body only
        sets the loop variable's trainable flag (the training pass makes each ``layer.requires_grad_(flag)``): the
        layers are only frozen or unfrozen, never called, so a Sequential made channels-first lists its modules too
        (_plan_layers), and another translated model's whole list is its child modules (_plan_frozen)."""
        it = node.iter
        if isinstance(it, cst.Subscript) and len(it.slice) == 1 and isinstance(it.slice[0].slice, cst.Slice):
            it = it.value
        if not (isinstance(it, cst.Attribute) and it.attr.value == "layers" and isinstance(it.value, cst.Name)
                and isinstance(node.target, cst.Name) and node.orelse is None and node.asynchronous is None
                and isinstance(node.body, cst.IndentedBlock) and node.body.body):
            return
        var = node.target.value
        for stmt in node.body.body:
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, flag = small.targets[0].target, small.value
                ok = isinstance(target, cst.Attribute) and target.attr.value == "trainable"
            elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and len(small.value.args) == 1:
                # (the training pass, before this one, made it layer.requires_grad_(flag))
                target, flag = small.value.func, small.value.args[0].value
                ok = (isinstance(target, cst.Attribute) and target.attr.value == "requires_grad_"
                      and small.value.args[0].keyword is None and not small.value.args[0].star)
            else:
                return
            if not (ok and isinstance(target.value, cst.Name) and target.value.value == var
                    and not any(n.value == var for n in find_all(flag, cst.Name))):
                return
        self._freezing.add(id(it))
        if it is not node.iter:
            self._sliced.add(id(it))  # (sliced: _plan_frozen keeps the error)

    def _plan_frozen(self, node: cst.Attribute) -> bool:
        """``model.layers`` of a freezing loop (visit_For) over a whole translated model other than a Sequential
        known by its name (a functional model, a subclass, a builder's model) → ``model.children()``: Keras's
        layers hold every weight of the model but those a subclass makes itself with add_weight, as the child
        modules hold every parameter but those the module holds itself, so each flag lands on the same weights.
        Not for a slice (the order of Keras's list against the children's is not checked), a model left Keras,
        a parameter some call gives a Keras model, or a model the file sets ``.trainable`` on other than True
        (Keras's trainable_weights of a model set trainable=False stay empty whatever its layers' flags)."""
        receiver = node.value
        if (id(node) in self._sliced or not isinstance(receiver, cst.Name) or self._left(receiver)
                or self._refused_param(receiver) is not None or self.module is None):
            return False
        name = receiver.value
        if len(self.chain) == 1 and self._left_argument(receiver):
            return False  # (a module-level name one binding of which is a model left Keras)
        if self.functions and name in self.chain[-1].params:
            # a parameter: what every call the analysis followed gives it is a model fwport translates
            args = self.models.param_args.get((id(self.functions[-1]), name))
            if not args or any(self._left_argument(a) for a in args):
                return False
        if re.search(rf"(?<![\w.]){re.escape(name)}\s*\.\s*(?:trainable\s*=(?!=)\s*(?!True\b)"
                     r"|requires_grad_\s*\((?!\s*True\s*\)))",  # (the training pass's, run before this one)
                     _text(self.module, self.ctx)):
            return False
        ctx = self.ctx
        out = f"{name}.children()"
        ctx.report(Severity.INFO, "idiom-replaced", f"{name}.layers → {out} (in a loop that only sets each layer's "
                   "trainable flag): the modules the layers became, which hold the same weights; not Keras's list, "
                   "so neither indexed nor called", node)

        def apply(orig: cst.Attribute, upd: cst.Attribute) -> cst.BaseExpression:
            return cst.parse_expression(out)
        ctx.plans.add(node, apply, descend=False, by="model_api")
        return True

    def _left_argument(self, value: cst.BaseExpression) -> bool:
        """A call's argument is (or may be) a model left Keras: a builder's or keras.Model(...) call left, or a
        module-level name one binding of which is one."""
        if isinstance(value, cst.Name):
            values = self.chain[0].assigned.get(value.value) or []
            return any(v is None or self._left_value(v) for v in values)
        return self._left_value(value)

    def _plan_layers(self, node: cst.Attribute, name: str, freezing: bool = False) -> None:
        """``seq.layers`` of a module-level Sequential (_sequential_name) → ``list(seq)`` where each of Keras's
        layers became one entry of the nn.Sequential (the sequential pass's SPANS, read when the edit is applied),
        else the list of each layer's entry or slice of entries (``[seq[0:2], seq[2]]``: a Dense and its activation;
        a slice of an nn.Sequential is an nn.Sequential of the same modules). Keras's list leaves out the input
        (keras.Input / InputLayer), as the translation does. A Sequential not translated whole keeps the error."""
        ctx = self.ctx
        from fwport.packs.tf2torch.passes.sequential import SPANS

        def apply(orig: cst.Attribute, upd: cst.Attribute) -> cst.BaseExpression:
            spans, nchw = ctx.analyses.get(SPANS, {}).get(name) or (None, False)
            if nchw and not freezing:  # (a loop that only sets each layer's trainable flag calls none of them)
                ctx.report(Severity.ERROR, "unsupported-construct", _NCHW_LAYERS.format(f"{name}.layers", name), orig)
                return orig
            if spans is None:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{name}.layers is a Keras model attribute; the "
                           f"translated model is an nn.Module, which has none: {ATTRIBUTES['layers'][1]}", orig)
                return orig
            if all(end == start + 1 for start, end in spans) and [s for s, _ in spans] == list(range(len(spans))):
                out = f"list({name})"
                why = "the modules of the nn.Sequential, one per Keras layer, in order"
            else:
                out = "[" + ", ".join(f"{name}[{a}]" if b == a + 1 else f"{name}[{a}:{b}]" for a, b in spans) + "]"
                why = ("each Keras layer's module, or the slice of the modules it became (a layer with its activation), "
                       "an nn.Sequential of the same modules, in order")
            ctx.report(Severity.INFO, "idiom-replaced", f"{name}.layers → {out}: {why} (Keras's list leaves out the "
                       "input, as the translation does); a layer's Keras attributes (name, kernel, output) are not "
                       "the module's", orig)
            return cst.parse_expression(out)
        ctx.plans.add(node, apply, descend=False, by="model_api")

    def _said_attribute(self, node: cst.Attribute) -> bool:
        """This attribute's statement carries the `# fwport:` comment an earlier translation left on it (see
        _said_before): translating a translation says the same again."""
        about = f"{code(node.value)}.{node.attr.value} is a Keras model attribute"
        said = comment_error(getattr(self, "_statement", None), about)
        return said is not None and said[1].startswith(about)

    def visit_Expr(self, node: cst.Expr) -> bool:
        saved = self._saving(node.value)
        if saved is not None:
            self.saved[id(node)] = saved
            return False  # translated whole: nothing inside to refuse
        return True

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.Expr:
        saved = self.saved.get(id(original_node))
        if isinstance(saved, cst.Name) and saved.value == "pass":
            return cst.Pass(semicolon=updated_node.semicolon)  # type: ignore[return-value]
        if saved is not None:
            return updated_node.with_changes(value=saved)
        call = original_node.value
        if (isinstance(call, cst.Call) and _layout_only(call) and not self.ctx.is_settled(call)
                and self._model_method(call) == "summary" and not self._left(call.func.value)):
            receiver = call.func.value  # type: ignore[union-attr]
            if isinstance(receiver, cst.Name):  # with Keras's count of trainable parameters
                name = receiver.value
                out = cst.parse_expression(
                    f'print({name}, "\\nTrainable params:", sum(p.numel() for p in {name}.parameters() if p.requires_grad))')
                self.ctx.report(Severity.INFO, "idiom-replaced",
                                f"{code(call)} → print({name}) and its count of trainable parameters (no output "
                                "shapes)", call)
                return updated_node.with_changes(value=out)
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{code(call)} → print({code(receiver)}): prints the modules (no output shapes; "
                            "count parameters with sum(p.numel() for p in model.parameters()))", call)
            return updated_node.with_changes(value=cst.Call(cst.Name("print"), [cst.Arg(updated_node.value.func.value)]))
        return updated_node

    def _saving(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """``model.save_weights(path)`` / ``model.load_weights(path)`` (``.expect_partial()`` after it
        too) / ``model.save(path)`` as a statement → torch.save / load_state_dict (see SAVING)."""
        copied = self._copied_weights(value)
        if copied is not None:
            return copied
        built = self._built(value)
        if built is not None:
            return built
        if self._empty_compile(value):
            return cst.Name("pass")  # (leave_Expr writes the statement pass)
        if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and not value.args
                and value.func.attr.value in ("expect_partial", "assert_consumed")
                and isinstance(value.func.value, cst.Call)):
            inner = value.func.value  # model.load_weights(path).expect_partial()
            if self._model_method(inner) != "load_weights":
                return None
            value = inner
        if not isinstance(value, cst.Call) or self.ctx.is_settled(value):
            return None
        method = self._model_method(value)
        if method not in SAVING or self._left(value.func.value):
            return None
        args = value.args
        path = args[0] if args and args[0].keyword is None and not args[0].star else None
        path = next((a for a in args if a.keyword is not None and a.keyword.value == "filepath"), path)
        rest = [a for a in args if a is not path]
        allowed = {"overwrite", "save_format"} if method != "load_weights" else set()  # (one format: torch's)
        if path is None or any(a.keyword is None or a.keyword.value not in allowed or a.star for a in rest):
            return None  # other arguments: the error below says what to write
        if any(a.keyword.value == "overwrite" and literal_value(a.value, None) is not True for a in rest):
            return None  # overwrite=False asks before replacing a file: torch.save replaces it
        receiver = code(value.func.value)  # type: ignore[union-attr]
        text, why = SAVING[method]
        out = text.format(torch=self.ctx.spell_text("torch.save")[: -len("save")], model=receiver,
                          path=code(path.value))
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{receiver}.{method}(...) → {out}: {why}", value)
        return cst.parse_expression(out)

    def _built(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """``model.build((None, 16))`` as a statement, ``model`` an instance of a model subclass of the file (its
        body keeps Keras's layout) every binding of which is one, the shape a tuple or list with None, an int, a
        name or integer arithmetic of those per axis (``(4, image_size)``) → ``build_on_zeros(model, (None, 16))``,
        a helper written into the file that calls the model once on zeros (batch 1 for None), in eval mode without
        gradients: the lazy modules get their sizes there, as Keras's layers do in build. A ``keras.Sequential``
        of the file (every binding one) too, for a shape of two axes (batch, features: the passes change no
        layout there; a Sequential of images may be made channels-first). Another build (a list of shapes, a
        shape read from a variable) keeps the error."""
        if not (isinstance(value, cst.Call) and not self.ctx.is_settled(value) and (
                self._model_method(value) == "build" or isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "build" and self._mixed(value.func.value))
                and isinstance(value.func.value, cst.Name) and len(value.args) == 1 and not value.args[0].star
                and (value.args[0].keyword is None or value.args[0].keyword.value == "input_shape")):
            return None
        shape = value.args[0].value

        def axis(e: cst.BaseExpression) -> bool:  # None, an int, a name, or +-*// of those
            if isinstance(e, (cst.Integer, cst.Name)):
                return True
            return (isinstance(e, cst.BinaryOperation) and isinstance(
                e.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide)) and axis(e.left) and axis(e.right))

        if not (isinstance(shape, (cst.Tuple, cst.List)) and len(shape.elements) >= 2 and all(
                isinstance(e, cst.Element) and axis(e.value) for e in shape.elements)):
            return None
        name = value.func.value.value
        scope = next((s for s in reversed(self.chain) if name in s.bound), None)
        values = scope.assigned.get(name) if scope is not None else None
        shadow = set().union(*(s.shadow for s in self.chain))

        def sequential(v) -> bool:
            return isinstance(v, cst.Call) and self.models.qualname(v.func, shadow) == "keras.Sequential"

        if not values or not (
                all(isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value in self.models.classes
                    for v in values)
                or len(shape.elements) == 2 and not self._left(value.func.value) and (
                    all(sequential(v) for v in values) or self._reaching_sequential(name, sequential))):
            return None
        helper = helpers.use(self.ctx, "build_on_zeros")
        out = f"{helper}({name}, {code(shape)})"
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(value)} → {out} (written out in this file): one call "
                        "of the model on zeros of that shape (batch 1), in eval mode and without gradients, which "
                        "gives its lazy modules their sizes as Keras 2's build gives its layers theirs (Keras 3's "
                        "build of a subclass without its own build() makes them at the first call: the values are "
                        "the same); create the optimizer after it", value)
        return cst.parse_expression(out)

    def _reaching_sequential(self, name: str, sequential) -> bool:
        """The build is a top-level statement, and the binding of ``name`` that reaches it is ``name =
        keras.Sequential(...)`` (``sequential``), the nearest top-level statement above binding the name, no statement
        between binding it (a notebook rebinding ``model`` cell after cell), and no function of the file declaring it
        global (a call between could rebind it)."""
        i = getattr(self, "top_index", None)
        if len(self.chain) != 1 or self.module is None or i is None or re.search(
                rf"\bglobal\b[^\n]*\b{re.escape(name)}\b", _text(self.module, self.ctx)):
            return False
        for stmt in reversed(self.module.body[:i]):
            if not _binds(stmt, name):
                continue
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            return (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == name
                    and sequential(small.value) and not self._left_value(small.value))
        return False

    #: what a compile gives a Keras model that a file may use after it: trained or evaluated by Keras's loops,
    #: its optimizer, loss or metrics read
    _COMPILED_USES = ("fit", "evaluate", "train_on_batch", "test_on_batch", "fit_generator", "evaluate_generator",
                      "optimizer", "loss", "compiled_loss", "compiled_metrics", "compute_loss", "compute_metrics",
                      "metrics", "metrics_names", "stop_training", "train_function", "make_train_function")

    def _empty_compile(self, value: cst.BaseExpression) -> bool:
        """``model.compile()`` with no arguments as a statement (keras-io's reptile: a model trained by its own
        GradientTape steps and read by predict), ``model`` a name of a translated model that the file neither
        trains nor evaluates through Keras's loops, whose optimizer / loss / metrics it never reads and that it
        hands to no call, function, list or return: such a compile changes nothing the translation computes
        (Keras's predict and call are the same compiled or not), so the statement becomes ``pass`` with an
        info finding. Any other compile keeps the training pass's reading."""
        if not (isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "compile" and isinstance(value.func.value, cst.Name)
                and not self.ctx.is_settled(value) and self._model_method(value) == "compile"
                and not self._left(value.func.value) and self.module is not None
                and id(value) not in self.ctx.analyses.get("train_step_calls", ())):
            return False
        name = value.func.value.value
        text = _text(self.module, self.ctx)
        if re.search(rf"\b{re.escape(name)}\s*\.\s*({'|'.join(self._COMPILED_USES)})\b", text):
            return False
        for kind in (cst.Element, cst.Return, cst.DictElement, cst.Yield):
            if any(isinstance(getattr(n, "value", None), cst.Name) and n.value.value == name
                   for n in find_all(self.module, kind)):
                return False  # handed on: another function may fit it
        for c in find_all(self.module, cst.Call):
            if any(isinstance(a.value, cst.Name) and a.value.value == name for a in c.args) and not (
                    isinstance(c.func, cst.Name) and "predict" in c.func.value):  # (the training pass's predict)
                return False
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{name}.compile() → pass: a compile with no optimizer, loss or metrics of a model the file "
                        "trains with its own steps and never fits or evaluates through Keras (a torch module needs "
                        "none; Keras's predict and call do not depend on it)", value)
        return True

    def _copied_weights(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """``target.set_weights(model.get_weights())`` as a statement, both models (a DQN's target network)
        → ``target.load_state_dict(model.state_dict())``: the same copy of every weight, non-trainable ones
        (BatchNorm's moving statistics: torch's buffers) too; by name where Keras goes by position, which
        for two models of one architecture is the same pairing (and for two others an error, not a mix)."""
        if not (isinstance(value, cst.Call) and len(value.args) == 1 and value.args[0].keyword is None
                and not value.args[0].star and not self.ctx.is_settled(value)
                and self._model_method(value) == "set_weights"):
            return None
        source = value.args[0].value
        if not (isinstance(source, cst.Call) and not source.args and self._model_method(source) == "get_weights") \
                or self._left(value.func.value) or self._left(source.func.value):
            return None
        target, model = code(value.func.value), code(source.func.value)  # type: ignore[union-attr]
        out = f"{target}.load_state_dict({model}.state_dict())"
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{target}.set_weights({model}.get_weights()) → {out}: "
                        "every parameter and buffer copied, by name (Keras pairs them by position: the same for "
                        "two models of one architecture)", value)
        # (two functional models whose modules are named differently: by layer, once their records exist)
        self.ctx.analyses.setdefault("weight_copies", []).append((target, model, self.ctx.pending[-1].finding))
        return cst.parse_expression(out)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.ctx.is_settled(original_node):
            return original_node  # an earlier pass (training: a fit it refuses) said why: one finding per cause
        if id(original_node) in self.ctx.analyses.get("train_step_calls", ()):
            return updated_node  # compile / fit of a model with its own train_step: methods it keeps
        method = self._model_method(original_node) or self._said_before(original_node)
        refused = self._refused_param(original_node.func.value) if (
            method is None and isinstance(original_node.func, cst.Attribute)
            and original_node.func.attr.value in METHODS) else None
        if refused is not None:
            receiver = code(original_node.func.value)  # type: ignore[union-attr]
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{receiver}.{original_node.func.attr.value}(...): {receiver} is a parameter of "
                            f"{refused[0]}(), and a call gives it {refused[1]}, which fwport does not translate "
                            "into an nn.Module (it stays a Keras object): translate that model by hand, then write "
                            f"this as PyTorch: {METHODS[original_node.func.attr.value]}", original_node)
            self.ctx.settle(original_node)
            return original_node
        if method is None:
            if (isinstance(original_node.func, cst.Attribute) and original_node.func.attr.value in METHODS
                    and self.ctx.plans.get(original_node) is None and self._mixed(original_node.func.value)):
                self._mixed_error(original_node, f"{code(original_node.func.value)}.{original_node.func.attr.value}"
                                  "(...) is a Keras model method")
                return original_node
            return updated_node
        if method == "summary" and _layout_only(original_node) and self._is_statement(original_node) \
                and not self._left(original_node.func.value):
            return updated_node  # translated by leave_Expr
        receiver = code(original_node.func.value)  # type: ignore[union-attr]
        why = self.ctx.analyses.get("compile_refusals", {}).get(id(original_node))
        if why and id(original_node) in self.ctx.analyses.get("left_keras_calls", ()):
            # the model is not translated: no nn.Module to speak of, only why it stays Keras
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{receiver}.{method}(...) is a Keras model method, left as written: {why}", original_node)
            self.ctx.settle(original_node)
            return original_node
        if self._left(original_node.func.value):
            self._left_error(original_node, f"{receiver}.{method}(...) is a Keras model method")
            return original_node
        if method == "get_layer" and self._plan_get_layer(original_node):
            return updated_node
        if method == "reset_states" and not original_node.args:
            helper = helpers.use(self.ctx, "reset_rnn_states")
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{receiver}.reset_states() → {helper}({receiver}) (written out in this file): every "
                            "stateful recurrent layer of the model starts its next call from zeros, as Keras's does",
                            original_node)
            return cst.Call(cst.Name(helper), [cst.Arg(original_node.func.value)])
        if method == "count_params" and not original_node.args and self._counts_exactly():
            helper = helpers.use(self.ctx, "keras_count_params")
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{receiver}.count_params() → {helper}({receiver}) (written out in this file): the sizes "
                            "of the parameters and buffers (BatchNorm's moving statistics), as Keras counts every "
                            "weight; the file's layers hold the same weights in torch", original_node)
            self.ctx.analyses.setdefault("count_params", []).append(self.ctx.pending[-1].finding)
            return cst.Call(cst.Name(helper), [cst.Arg(original_node.func.value)])
        if method in ("get_weights", "set_weights") and isinstance(original_node.func.value, cst.Name) \
                and id(original_node) in self._weight_lists(original_node.func.value.value):
            helper = helpers.use(self.ctx, f"keras_{method}")
            args = [cst.Arg(original_node.func.value), *[a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                                          for a in updated_node.args]]
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{receiver}.{method}(...) → {helper}({receiver}{', ...' if updated_node.args else ''}) "
                            "(written out in this file): the model's parameters and buffers as a list of NumPy arrays "
                            "in torch's order and layout, which the file only combines elementwise and gives back to "
                            f"{receiver}.set_weights, position by position, as Keras's list", original_node)
            return cst.Call(cst.Name(helper), args)
        why = f" (fwport writes a compile and its fits out as a loop, but not this one: {why})" if why else ""
        if method == "get_layer":
            why = self._get_layer_why(original_node)
        self.ctx.report(Severity.ERROR, "unsupported-construct",
                        f"{receiver}.{method}(...) is a Keras model method; the translated model is an "
                        f"nn.Module, which has none: {METHODS[method]}{why}", original_node)
        self.ctx.settle(original_node)
        return original_node

    def _get_layer_why(self, call: cst.Call) -> str:
        """Why ``model.get_layer(...)`` stays as written (_plan_get_layer gave nothing): the first cause found."""
        name, index = call_argument(call, "name", 0), call_argument(call, "index", 1)
        key = literal_value(name, None) if name is not None else None
        at = literal_value(index, None) if index is not None else None
        if not (isinstance(key, str) and index is None or type(at) is int and name is None):
            return (" (fwport maps a layer to its torch module by a literal name=\"...\" or index=k; this one is "
                    "known only at run time)")
        receiver = call.func.value  # type: ignore[attr-defined]
        use = self._layer_uses.get(id(call))
        if use is not None and use[0] == "tap":
            return (" (its output read by keras.Model(...), a model made of this one's layers: the finding there says "
                    "why fwport does not translate it)")
        if isinstance(receiver, cst.Name) and self.functions and receiver.value in self.chain[-1].params:
            sites = self.models.param_sites.get((id(self.functions[-1]), receiver.value)) or []
            return (f" ({receiver.value} is a parameter of {self.functions[-1].name.value}(), and " + (
                "the calls of it in this file give it models of different layers, or ones fwport does not follow"
                if sites else "no call of it in this file gives it a model fwport follows") + ")")
        if self._records_scope(receiver) is None:
            scope = next((s for s in reversed(self.chain) if receiver.value in s.bound), None) \
                if isinstance(receiver, cst.Name) else None
            if scope is not None and len(scope.assigned.get(receiver.value) or []) > 1:
                return (f" ({receiver.value} is bound more than once in this scope: which model reaches this line is "
                        "not followed; give each model a name of its own)")
            return " (fwport does not know which model of the file this is: its layers are not followed)"
        if use is None:
            return (" (the layer is used here as more than its weights — called, its output, a sub-layer or another "
                    "attribute read — and fwport gives only the torch module holding its weights, which need not be "
                    "the whole layer: an activation runs in forward)")
        return ""

    def _counts_exactly(self) -> bool:
        """Whether every Keras layer the file makes holds in torch the weights Keras counts, one for one (_COUNTED:
        Dense, convolutions, BatchNormalization / LayerNormalization with beta and gamma, Embedding, and layers
        without weights): not recurrent layers (torch's two biases), layers of other packages (keras.applications,
        hubs, addons) or layers fwport writes out as classes of its own."""
        if "_counted" not in self.__dict__:
            ok = self.module is not None
            for c in find_all(self.module, cst.Call) if ok else ():
                q = self.models.qualname(c.func, set()) or ""
                if q.startswith(("keras.applications", "keras_hub", "keras_nlp", "keras_cv", "tensorflow_hub",
                                 "tensorflow_addons", "keras.models.load_model", "keras.saving.load_model")):
                    ok = False
                elif q.startswith("keras.layers."):
                    layer = q[len("keras.layers."):]
                    if layer not in _COUNTED or layer in _NORMS and any(
                            a.keyword is not None and a.keyword.value in ("center", "scale", "bias", "rms_scaling")
                            for a in c.args):
                        ok = False
                if not ok:
                    break
            self._counted = ok
        return self._counted

    def _weight_lists(self, model: str) -> set[int]:
        """The ``model.get_weights()`` / ``model.set_weights(W)`` calls of the innermost scope that round-trip lists
        of weights (keras-io's reptile): ``W = model.get_weights()`` where every other use of the name ``W`` in the
        scope is ``len(W)``, ``model.set_weights(W)``, or ``W[i]`` in elementwise arithmetic (+ - * /, numbers and
        other names) assigned to ``W2[i]`` of such a list, and one of them is given back. Torch's order and layout then give Keras's values:
        nothing reads a weight by its position or shape. Else (a list read otherwise, set_weights of a list of
        arrays from elsewhere): none, and the errors stay."""
        node = self.functions[-1] if self.functions else self.module
        if node is None:
            return set()
        cache = self.__dict__.setdefault("_weight_cache", {})
        key = (id(node), model)
        if key not in cache:
            cache[key] = _round_trips(node, model)
        return cache[key]

    def _records_scope(self, receiver: cst.BaseExpression) -> str | None:
        """The scope of the layer records of the model ``receiver`` names (sequential / functional passes): a
        module-level model's variable; a builder of the file's name (one that makes one model) for a call of it,
        or for a name every binding of which is such a call; in a function holding one model constructor, the model bound there (its
        function, or ``function.name`` for a Sequential it does not return, as the sequential pass names it,
        both looked up when the edit is applied). None: not known."""
        values: list = [receiver]
        if isinstance(receiver, cst.Name) and self.functions and receiver.value in self.chain[-1].params \
                and receiver.value not in self.chain[-1].assigned:
            # a parameter: the records of the one model every call of the function gives it
            key = (id(self.functions[-1]), receiver.value)
            resolving = self.__dict__.setdefault("_resolving", set())
            if key in resolving:
                return None  # (a recursive function giving its parameter to itself)
            sites = self.models.param_sites.get(key) or []
            found = set()
            resolving.add(key)
            for arg, chain, stack in sites:
                saved = self.chain, self.functions
                self.chain, self.functions = chain, stack
                try:
                    found.add(self._records_scope(arg))
                finally:
                    self.chain, self.functions = saved
            resolving.discard(key)
            return found.pop() if len(found) == 1 and None not in found else None
        if isinstance(receiver, cst.Name):
            scope = next((s for s in reversed(self.chain) if receiver.value in s.bound), None)
            values = scope.assigned.get(receiver.value) if scope is not None else None
            if not values or any(v is None for v in values):
                return None
            if scope is self.chain[0] and all(isinstance(v, cst.Call) and self.models.qualname(v.func, set())
                                              in MODEL_BASES for v in values) and len(values) == 1:
                return receiver.value
            if self.functions and scope is self.chain[-1] and len(values) == 1 and isinstance(values[0], cst.Call) \
                    and self.models.qualname(values[0].func, set()) in MODEL_BASES:
                fn = self.functions[-1]
                if sum(self.models.qualname(c.func, set()) in MODEL_CONSTRUCTORS for c in find_all(fn, cst.Call)) != 1:
                    return None
                return f"{fn.name.value}|{fn.name.value}.{receiver.value}"
        found = {v.func.value for v in values if isinstance(v, cst.Call) and isinstance(v.func, cst.Name)
                 and v.func.value in self.models.builders}
        if len(found) == 1 and all(isinstance(v, cst.Call) and isinstance(v.func, cst.Name) for v in values):
            builder = self.models.top_functions.get(next(iter(found)))
            # one model made there: the records of its scope are that model's
            if builder is not None and sum(self.models.qualname(c.func, set()) in MODEL_CONSTRUCTORS
                                           for c in find_all(builder, cst.Call)) == 1:
                return builder.name.value
        return None

    def _plan_functional_index(self, node: cst.Subscript, k: int) -> bool:
        """``model.layers[k]`` of a functional model (one whose layer records the functional pass wrote: Keras's
        list in its order, each InputLayer too) or of a Sequential not known by its name (a builder's), used only for its weights (frozen, get / set_weights, .kernel /
        .bias read; or bound to a name used so): the torch module holding that layer's weights (WHOLE_LAYERS; a
        negative k counted from LAYER_COUNTS), whose weight uses the layer-weights planner translates. Elsewhere
        (called, its output read) the module is not the layer (an activation folded into forward): False."""
        receiver = node.value.value  # type: ignore[attr-defined]
        if id(node) not in self._layer_uses or not self.models.is_model_expr(receiver, self.chain) \
                or self._left(receiver) or self._refused_param(receiver) is not None:
            return False
        scopes = self._records_scope(receiver)
        how = self._layer_uses[id(node)][0]
        if scopes is None or how not in ("requires_grad_", "bound") and not self._weights_planned(receiver):
            return False
        self._indexed.add(id(node.value))
        ctx, shown, name = self.ctx, code(node), receiver.value  # type: ignore[attr-defined]

        def apply(orig: cst.Subscript, upd: cst.Subscript) -> cst.BaseExpression:
            from fwport.packs.tf2torch.passes.sequential import LAYER_COUNTS, SPANS, WHOLE_LAYERS
            whole, counts = ctx.analyses.get(WHOLE_LAYERS, {}), dict(ctx.analyses.get(LAYER_COUNTS, {}))
            for scope, found in ctx.analyses.get(SPANS, {}).items():  # (a Sequential's: its layers' entries)
                if found and found[0] is not None:
                    counts.setdefault(scope, len(found[0]))
            for scope in scopes.split("|"):
                at = k if k >= 0 else counts.get(scope, 0) + k if scope in counts else -1
                found = whole.get((scope, f"layers[{at}]")) if at >= 0 else None
                if found is not None:
                    out = f"{name}[{found[0]}]" if found[0].isdigit() else f"{name}.{found[0]}"
                    ctx.report(Severity.INFO, "idiom-replaced", f"{shown} → {out}: the module holding that layer's "
                               "weights (Keras's model.layers: a functional model's lists its InputLayers, a Sequential's not)", orig)
                    return cst.parse_expression(out)
            ctx.report(Severity.ERROR, "unsupported-construct",
                       f"{shown}: model.layers is a Keras model attribute, and fwport does not know this layer as one "
                       "module of the translation holding its weights (an InputLayer, a layer without weights, one "
                       "it translates into several, or an index past the list); the translated modules are "
                       f"{name}'s attributes", orig)
            return orig
        ctx.plans.add(node, apply, descend=False, by="model_api")
        return True

    def _layer_module(self, scopes: str, key, at):
        """(torch path below the model, rule id, variant) of the layer named ``key`` (or at Keras's index ``at``) in
        the records of ``scopes`` (_records_scope), where one torch module holds its weights; else None."""
        from fwport.packs.tf2torch.passes.sequential import LAYER_NAMES, WHOLE_LAYERS
        whole, names = self.ctx.analyses.get(WHOLE_LAYERS, {}), self.ctx.analyses.get(LAYER_NAMES, {})
        for scope in scopes.split("|"):
            source = names.get((scope, key)) if isinstance(key, str) else f"layers[{at}]"
            if source is not None and (scope, source) in whole:
                return whole[(scope, source)]
        return None

    def _plan_layer_copy(self, call: cst.Call, outer: cst.Call, key, at) -> bool:
        """``a.get_layer("x").set_weights(b.get_layer("y").get_weights())``: one layer's weights copied into
        another's → ``a.x.load_state_dict(b.y.state_dict())`` where both are modules of one rule and weight-map
        variant (the same torch layout for the same Keras arrays: the copy is Keras's, and raises where the sizes
        differ, as Keras's does); else an error. False: not this form."""
        source = outer.args[0].value if len(outer.args) == 1 and outer.args[0].keyword is None else None
        if not (isinstance(source, cst.Call) and not source.args and isinstance(source.func, cst.Attribute)
                and source.func.attr.value == "get_weights" and isinstance(source.func.value, cst.Call)
                and isinstance(source.func.value.func, cst.Attribute)
                and source.func.value.func.attr.value == "get_layer"):
            return False
        inner = source.func.value
        name, index = call_argument(inner, "name", 0), call_argument(inner, "index", 1)
        key2 = literal_value(name, None) if name is not None else None
        at2 = literal_value(index, None) if index is not None else None
        scopes = self._records_scope(call.func.value)  # type: ignore[attr-defined]
        scopes2 = self._records_scope(inner.func.value)  # type: ignore[attr-defined]
        if not ((isinstance(key2, str) and index is None) or (type(at2) is int and name is None)) \
                or scopes is None or scopes2 is None or self._left(inner.func.value):  # type: ignore[attr-defined]
            return False
        ctx, shown = self.ctx, code(outer)
        target_model, source_model = code(call.func.value), code(inner.func.value)  # type: ignore[attr-defined]

        def path(model: str, found) -> str:
            return f"{model}[{found[0]}]" if found[0].isdigit() else f"{model}.{found[0]}"

        def apply(orig: cst.Call, upd: cst.Call) -> cst.BaseExpression:
            t, s = self._layer_module(scopes, key, at), self._layer_module(scopes2, key2, at2)
            if t is None or s is None or (t[1], t[2]) != (s[1], s[2]):
                why = ("fwport does not know " + ("the layer written" if t is None else "the layer read") + " as one "
                       "module of the translation holding its weights" if t is None or s is None else
                       f"the layers became torch modules of different weight layouts ({t[1]} and {s[1]})")
                ctx.report(Severity.ERROR, "unsupported-construct", f"{shown}: get_weights() / set_weights() are Keras "
                           f"layer methods, which the torch modules have not; {why}: copy the parameters by hand, "
                           "in torch's layout", orig)
                return orig
            out = f"{path(target_model, t)}.load_state_dict({path(source_model, s)}.state_dict())"
            ctx.report(Severity.INFO, "idiom-replaced", f"{shown} → {out}: the layer's weights copied by name between "
                       f"two modules of one layout ({t[1]})", orig)
            return cst.parse_expression(out)
        ctx.plans.add(outer, apply, descend=False, by="model_api")
        self._copied_layers.add(id(inner))  # (the edit replaces the whole call: no edit of its own)
        return True

    def _plan_get_layer(self, call: cst.Call) -> bool:
        """``model.get_layer("name")`` / ``get_layer(index=i)`` on a translated model, used as
        ``.requires_grad_(flag)`` (the training pass's ``.trainable = flag``), ``.get_weights()`` or
        ``.set_weights([array])``: planned as the torch module holding that layer's weights (its records), get/set_weights only for a layer with one variable its rule copies
        as it is (an Embedding's table); ``.kernel`` / ``.bias`` read as a value: the torch parameter in Keras's
        layout (the inverse of its weight map, where that is one index permutation: a Dense's kernel is weight.T),
        written (assign, =): an error. Else (another use, an unnamed or unknown layer): False, the error stands."""
        if id(call) in self._copied_layers:
            return True  # (read by a layer's copy, _plan_layer_copy)
        use = self._layer_uses.get(id(call))
        if use is None:
            return False
        how, outer = use
        if how == "tap":  # (its keras.Model(...) translated: the functional pass replaces the whole statement)
            return not self._left_value(outer)
        if how in ("read", "write", "assign") and not (isinstance(outer, cst.Attribute) and outer.value is call):
            return False
        name = call_argument(call, "name", 0)
        index = call_argument(call, "index", 1)
        key = literal_value(name, None) if name is not None else None
        at = literal_value(index, None) if index is not None else None
        if not ((isinstance(key, str) and index is None) or (type(at) is int and name is None)):
            return False
        if how == "set_weights" and self._plan_layer_copy(call, outer, key, at):
            return True
        line = None  # the statement line that is this set_weights(...) call alone: it becomes a `with torch.no_grad():`
        if how == "set_weights":
            if not (len(outer.args) == 1 and not outer.args[0].star and outer.args[0].keyword is None):
                return False
            arrays = outer.args[0].value
            statement = getattr(self, "_statement", None)
            if (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
                    and isinstance(statement.body[0], cst.Expr) and statement.body[0].value is outer
                    and (isinstance(arrays, cst.Name) or isinstance(arrays, cst.List) and all(
                        isinstance(e, cst.Element) for e in arrays.elements))):
                line = statement
            elif not (isinstance(arrays, cst.List) and len(arrays.elements) == 1
                      and isinstance(arrays.elements[0], cst.Element)):
                return False
        if how == "get_weights" and outer.args:
            return False
        scopes = self._records_scope(call.func.value)  # type: ignore[attr-defined]
        if scopes is None:
            return False
        ctx, receiver = self.ctx, code(call.func.value)  # type: ignore[attr-defined]
        what = code(call)
        pack = ctx.pack

        def module_of():
            """(torch path, rule id, variant) of the layer, or the reason there is none."""
            from fwport.packs.tf2torch.passes.sequential import LAYER_NAMES, WHOLE_LAYERS
            whole, names = ctx.analyses.get(WHOLE_LAYERS, {}), ctx.analyses.get(LAYER_NAMES, {})
            for scope in scopes.split("|"):
                source = names.get((scope, key)) if isinstance(key, str) else f"layers[{at}]"
                if source is not None and (scope, source) in whole:
                    return whole[(scope, source)]
            return None

        def refuse(orig, why: str, at=None):
            ctx.report(Severity.ERROR, "unsupported-construct", f"{what} is a Keras model method; the translated "
                       f"model is an nn.Module, which has none: {why}", at or orig)
            return orig

        def torch_path(target: str) -> str:
            return f"{receiver}[{target}]" if target.isdigit() else f"{receiver}.{target}"

        if how in ("requires_grad_", "bound"):
            def apply(orig: cst.Call, upd: cst.Call) -> cst.BaseExpression:
                found = module_of()
                if found is None:
                    return refuse(orig, METHODS["get_layer"] + " (fwport does not know this layer as one module of "
                                  "the translation holding its weights: a layer without weights or name=\"...\", or one it translates into "
                                  "several)")
                out = torch_path(found[0])
                ctx.report(Severity.INFO, "idiom-replaced", f"{what} → {out}: the module holding that layer's weights", orig)
                return cst.parse_expression(out)
            ctx.plans.add(call, apply, descend=False, by="model_api")
            return True

        if how in ("read", "write", "assign"):
            var = outer.attr.value

            def apply_variable(orig: cst.Attribute, upd: cst.Attribute) -> cst.BaseExpression:
                found = module_of()
                shown = f"{what}.{var}"
                if how == "write":
                    where = f" ({torch_path(found[0])})" if found is not None else ""
                    ctx.report(Severity.ERROR, "unsupported-construct", f"{shown} written: the translated layer's "
                               f"weights are torch parameters{where} in torch's layout, not Keras's; load the value "
                               "into the parameter by hand (with torch.no_grad(): param.copy_(...), transposed or "
                               "permuted as the rule's weight map says)", orig)
                    return orig
                rule = pack.rules.get(found[1]) if found is not None else None
                entries = [w for w in rule.weights_for(found[2]) if w.source == var] if rule is not None else []
                text = (_keras_layout_of(f"{torch_path(found[0])}.{entries[0].target}", entries[0].ops)
                        if len(entries) == 1 else None)
                if text is None:
                    return refuse(orig, METHODS["get_layer"] + f"; {var} is {'written' if how == 'assign' else 'read'} "
                                  "here, which fwport gives only "
                                  "for a layer it knows as one module whose weight map moves that variable to one "
                                  "parameter by a transpose or permutation (a Dense, a convolution): read the torch "
                                  "parameter by name")
                ctx.report(Severity.INFO, "idiom-replaced", f"{shown} → {text}: the torch parameter in Keras's layout "
                           f"({found[1]} maps its {var} to {entries[0].target} by {entries[0].ops[0].op})"
                           + ("; a view of it, so a value assigned to it lands in the parameter" if how == "assign"
                              else ""), orig)
                return cst.parse_expression(text)
            ctx.plans.add(outer, apply_variable, descend=False, by="model_api")
            return True

        def weight_list():
            """(torch path, the weight maps of Keras's get_weights() list in order) or why there are none."""
            from fwport.packs.tf2torch.passes.sequential import LAYER_CALLS
            found = module_of()
            if found is None:
                return ("fwport does not know this layer as one module of the translation holding its weights (a "
                        "layer without weights or name=\"...\", or one it translates into several)")
            rule = pack.rules.get(found[1])
            if rule is None:
                return "its rule is not known"
            calls = ctx.analyses.get(LAYER_CALLS, {})
            call_of = next((calls[(sc, src)] for sc in scopes.split("|") for (s2, src), v in
                            ctx.analyses.get("layers.weights", {}).items() if s2 == sc and v is found
                            and (sc, src) in calls), None)
            listed = _weight_list(rule, found[2], call_of)
            return listed if isinstance(listed, str) else (torch_path(found[0]), listed)

        def weights_refused(why: str) -> str:
            return (METHODS["get_layer"] + f"; {how}() gives Keras's arrays by position, in Keras's layout, which "
                    f"fwport maps to the torch parameters only where it knows the layer's list: {why}; read or load "
                    "the parameters by name (state_dict), transposed or permuted as the rule's weight map says")

        def copies(path: str, entries, values: list[str]) -> list[str]:
            as_tensor = ctx.spell_text("torch.as_tensor")
            return [f"{path}.{w.target}.copy_({_torch_layout_of(f'{as_tensor}({v})', w.ops)})"
                    for w, v in zip(entries, values)]

        def shown_list(path: str, entries) -> str:
            return ", ".join(f"{w.source} → {path}.{w.target}" + ("" if w.ops[0].op == "copy" else
                                                                 f" ({w.ops[0].render()})") for w in entries)

        def apply_line(orig: cst.SimpleStatementLine, upd: cst.SimpleStatementLine) -> cst.BaseStatement:
            listed = weight_list()
            if isinstance(listed, str):
                refuse(orig, weights_refused(listed), orig.body[0].value.func.value)
                return orig
            path, entries = listed
            value = upd.body[0].value.args[0].value
            if isinstance(value, cst.List):
                values = [code(e.value) for e in value.elements]
                if len(values) != len(entries):
                    refuse(orig, weights_refused(f"{len(values)} array{'s' * (len(values) != 1)} given to a layer of {len(entries)} "
                                                 f"({', '.join(w.source for w in entries)})"),
                           orig.body[0].value.func.value)
                    return orig
            else:
                values = [f"{code(value)}[{i}]" for i in range(len(entries))]
            lines = copies(path, entries, values)
            ctx.report(Severity.INFO, "idiom-replaced", f"{what}.set_weights(...) → each array copied into its "
                       f"parameter in torch's layout under torch.no_grad() ({shown_list(path, entries)})", orig)
            body = "".join(f"    {t}\n" for t in lines)
            block = cst.parse_statement(f"with {ctx.spell_text('torch.no_grad')}():\n{body}")
            return block.with_changes(leading_lines=orig.leading_lines)

        if line is not None:
            self._line_plans[id(line)] = apply_line
            return True

        def apply_weights(orig: cst.Call, upd: cst.Call) -> cst.BaseExpression:
            listed = weight_list()
            if isinstance(listed, str):
                return refuse(orig, weights_refused(listed), orig.func.value)
            path, entries = listed
            if how == "get_weights":
                out = "[" + ", ".join(f"{_keras_layout_of(f'{path}.{w.target}', w.ops)}.detach().cpu().numpy()"
                                      for w in entries) + "]"
                ctx.report(Severity.INFO, "idiom-replaced", f"{what}.get_weights() → {out}: copies of the "
                           f"parameters as NumPy arrays in Keras's order and layout ({shown_list(path, entries)})",
                           orig)
                return cst.parse_expression(out)
            if len(entries) != 1:
                return refuse(orig, weights_refused(f"a layer of {len(entries)} weights given one array"),
                              orig.func.value)
            value = code(orig.args[0].value.elements[0].value)
            out = (f"{path}.{entries[0].target}.data.copy_("
                   f"{_torch_layout_of(ctx.spell_text('torch.as_tensor') + f'({value})', entries[0].ops)})")
            ctx.report(Severity.INFO, "idiom-replaced", f"{what}.set_weights(...) → {out}: the array loaded into "
                       f"the parameter, in place, without recording a gradient ({shown_list(path, entries)})", orig)
            return cst.parse_expression(out)
        ctx.plans.add(outer, apply_weights, descend=False, by="model_api")
        return True

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """A ``model.get_layer(...).set_weights(arrays)`` line (_plan_get_layer): planned on the line as it leaves
        this pass, which the rule pass walks."""
        apply = self._line_plans.pop(id(original_node), None)
        if apply is not None:
            self.ctx.plans.add(updated_node, apply, descend=True, by="model_api")
        return updated_node

    def _said_before(self, call: cst.Call) -> str | None:
        """The method, when this call's statement carries the `# fwport:` comment an earlier
        translation left on it: translating a translation says the same again (the receiver is
        an nn.Module by then, which the analysis no longer counts as a Keras model)."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in METHODS:
            return None
        about = f"{code(func.value)}.{func.attr.value}(...) is a Keras model method"
        said = comment_error(getattr(self, "_statement", None), about)
        # only the call the comment is about: another model-method call on the same line whose
        # receiver was not a model (model.predict(x) == loaded.predict(x)) stays unreported
        return func.attr.value if said is not None and said[1].startswith(about) else None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement = node
        self._statement_calls = {id(s.value) for s in node.body if isinstance(s, cst.Expr)}

    def _is_statement(self, call: cst.Call) -> bool:
        return id(call) in getattr(self, "_statement_calls", set())


#: Keras layers whose weights torch holds one for one (sizes included), for count_params (_counts_exactly)
_NORMS = {"BatchNormalization", "LayerNormalization"}
_COUNTED = _NORMS | {
    "Dense", "Conv1D", "Conv2D", "Conv3D", "Convolution1D", "Convolution2D", "Convolution3D", "Embedding",
    "Input", "InputLayer", "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "Activation", "ReLU",
    "LeakyReLU", "ELU", "Softmax", "Flatten", "Reshape", "Permute", "RepeatVector", "Add", "Subtract", "Multiply",
    "Average", "Maximum", "Minimum", "Concatenate", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "MaxPool1D",
    "MaxPool2D", "MaxPool3D", "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "AvgPool1D", "AvgPool2D",
    "AvgPool3D", "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D", "GlobalMaxPooling1D",
    "GlobalMaxPooling2D", "GlobalMaxPooling3D", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalMaxPool1D",
    "GlobalMaxPool2D", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D", "Cropping1D", "Cropping2D", "Cropping3D",
    "UpSampling1D", "UpSampling2D", "UpSampling3D", "Rescaling", "Identity"}


class _Binding(cst.CSTVisitor):
    """Whether a statement binds ``name`` (_binds)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.found = False

    def hit(self, target) -> None:
        if target is None:
            return
        if isinstance(target, cst.Name):
            self.found |= target.value == self.name
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self.hit(e.value)
        elif isinstance(target, cst.StarredElement):
            self.hit(target.value)
        elif isinstance(target, cst.AsName):
            self.hit(target.name)

    def visit_Assign(self, node) -> None:
        for t in node.targets:
            self.hit(t.target)

    def visit_AugAssign(self, node) -> None:
        self.hit(node.target)

    def visit_AnnAssign(self, node) -> None:
        self.hit(node.target)

    def visit_NamedExpr(self, node) -> None:
        self.hit(node.target)

    def visit_For(self, node) -> None:
        self.hit(node.target)

    def visit_CompFor(self, node) -> None:
        self.hit(node.target)  # (its own scope in Python 3; counted all the same)

    def visit_WithItem(self, node) -> None:
        self.hit(node.asname)

    def visit_ExceptHandler(self, node) -> None:
        self.hit(node.name)

    def visit_Del(self, node) -> None:
        self.hit(node.target)

    def visit_Import(self, node) -> None:
        for a in node.names:  # (import a.b binds a)
            self.found |= (a.asname.name.value if a.asname else (dotted(a.name) or [""])[0]) == self.name

    def visit_ImportFrom(self, node) -> None:
        if isinstance(node.names, cst.ImportStar):
            self.found = True
            return
        for a in node.names:
            self.found |= (a.asname.name.value if a.asname else (dotted(a.name) or [""])[-1]) == self.name

    def visit_FunctionDef(self, node) -> bool:
        self.found |= node.name.value == self.name
        return False

    def visit_ClassDef(self, node) -> bool:
        self.found |= node.name.value == self.name
        return False


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    """Whether a top-level statement may bind ``name`` at module level: an assignment (a tuple's element, a walrus
    too), a for / with target, an import, a del, a def or class of that name, anywhere in it but in the bodies of
    the functions and classes it defines (their own scopes)."""
    v = _Binding(name)
    stmt.visit(v)
    return v.found


def _gets_weights(node, model: str) -> bool:
    return (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "get_weights" and isinstance(node.func.value, cst.Name)
            and node.func.value.value == model)


class _NameUses(cst.CSTVisitor):
    """Every Name node under a tree with the chain of nodes above it."""

    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []
        self.uses: list[tuple[cst.Name, list[cst.CSTNode]]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, cst.Name):
            self.uses.append((node, list(self.stack)))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


def _round_trips(scope: cst.CSTNode, model: str) -> set[int]:
    """model_api._weight_lists for the scope node ``scope``: the ids of the calls planned."""
    v = _NameUses()
    scope.visit(v)
    lists = {t.target.value for a in find_all(scope, cst.Assign) if _gets_weights(a.value, model)
             for t in a.targets if isinstance(t.target, cst.Name)}

    def item(e) -> bool:  # W[i], i a name or an int
        return (isinstance(e, cst.Subscript) and isinstance(e.value, cst.Name) and e.value.value in lists
                and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index)
                and isinstance(e.slice[0].slice.value, (cst.Name, cst.Integer)))

    def pure(e) -> bool:  # elementwise arithmetic of list items, numbers and other names
        if isinstance(e, (cst.Integer, cst.Float)) or item(e):
            return True
        if isinstance(e, cst.Name):
            return e.value not in lists
        if isinstance(e, cst.BinaryOperation):
            return isinstance(e.operator, _ARITHMETIC) and pure(e.left) and pure(e.right)
        return isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus) and pure(e.expression)

    bad: set[str] = set()
    calls: dict[str, list[int]] = {}
    for name, stack in v.uses:
        if name.value not in lists:
            continue
        p = stack[-2] if len(stack) > 1 else None
        up = stack[-3] if len(stack) > 2 else None
        if isinstance(p, cst.Attribute) and p.attr is name:
            continue  # x.W: another thing
        if isinstance(p, cst.AssignTarget) and isinstance(up, cst.Assign) and len(up.targets) == 1 \
                and _gets_weights(up.value, model):
            calls.setdefault(name.value, []).append(id(up.value))
            continue
        if isinstance(p, cst.Arg) and isinstance(up, cst.Call) and len(up.args) == 1 and not p.star \
                and p.keyword is None:
            if isinstance(up.func, cst.Name) and up.func.value == "len":
                continue
            if isinstance(up.func, cst.Attribute) and up.func.attr.value == "set_weights" \
                    and isinstance(up.func.value, cst.Name) and up.func.value.value == model:
                calls.setdefault(name.value, []).append(id(up))
                continue
        if isinstance(p, cst.Subscript) and p.value is name and item(p):
            i = len(stack) - 2  # the subscript; up to the outermost arithmetic around it
            while i > 0 and isinstance(stack[i - 1], (cst.BinaryOperation, cst.UnaryOperation)):
                i -= 1
            top, outer = stack[i], stack[i - 1] if i > 0 else None
            if isinstance(outer, cst.AssignTarget) and top is p:
                assign = stack[i - 2] if i > 1 else None
                if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and pure(assign.value):
                    continue
            if isinstance(outer, cst.Assign) and outer.value is top and len(outer.targets) == 1 \
                    and item(outer.targets[0].target) and pure(top):
                continue
            if isinstance(outer, cst.AugAssign) and isinstance(outer.operator, (
                    cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign)) \
                    and item(outer.target) and pure(outer.value):
                continue
        bad.add(name.value)
    sets = {name for name, ids in calls.items() for c in ids if not any(
        c == id(a.value) for a in find_all(scope, cst.Assign))}  # lists given to set_weights
    if not sets - bad:
        return set()  # (a list only read, never given back: the error says what to write)
    return {c for name, ids in calls.items() if name not in bad for c in ids}


def _layer_pairs(ctx: FileContext, target: str, model: str) -> list[tuple[str, str]] | None:
    """(target module, source module) for each layer with weights of two module-level functional models (their
    weight records: ``layers[i]`` → module path) whose layers with weights are of the same rules and variants in
    the same Keras order, as Keras's by-position pairing then pairs them layer by layer; None where the records
    do not say so (a model without records, nested or loop records, other layers) or where the modules' paths are
    the same (one load_state_dict of the whole model copies the same)."""
    def layers(scope: str) -> list | None:
        recs = [r for r in ctx.layers if r.scope == scope]
        if not recs or not all(re.fullmatch(r"layers\[\d+\]", r.source) for r in recs):
            return None
        seen: dict[int, object] = {}
        for r in recs:
            i = int(r.source[len("layers["):-1])
            if i in seen and (seen[i].target, seen[i].rule, seen[i].variant) != (r.target, r.rule, r.variant):
                return None  # (one Keras layer, two modules)
            seen[i] = r
        return [seen[i] for i in sorted(seen)]
    if target == model:
        return None
    a, b = layers(target), layers(model)
    if a is None or b is None or len(a) != len(b) \
            or any((x.rule, x.variant) != (y.rule, y.variant) for x, y in zip(a, b)):
        return None
    if all(x.target == y.target for x, y in zip(a, b)):
        return None
    return [(x.target, y.target) for x, y in zip(a, b)]


def finish_weight_copies(module: cst.Module, ctx: FileContext) -> cst.Module:
    """``target.load_state_dict(model.state_dict())`` (a ``set_weights(get_weights())``, above) between two
    functional models of the same layers whose translations name their modules differently (a generation model
    beside the trained one: its GRU returns its state) → the module of each layer loaded from the other's at its
    place (``copy_layer_weights``, written out). After the functional pass's finish, which made their records."""
    copies = ctx.analyses.get("weight_copies")
    if not copies:
        return module
    body = list(module.body)
    changed = False
    for target, model, finding in copies:
        pairs = _layer_pairs(ctx, target, model)
        if not pairs:
            continue
        old = f"{target}.load_state_dict({model}.state_dict())"
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                    and isinstance(stmt.body[0], cst.Expr) and code(stmt.body[0].value) == old):
                continue
            helper = helpers.use(ctx, "copy_layer_weights")
            listed = ", ".join(f"({t!r}, {s!r})" for t, s in pairs)
            out = f"{helper}({target}, {model}, [{listed}])"
            body[i] = stmt.with_changes(body=[stmt.body[0].with_changes(value=cst.parse_expression(out))])
            changed = True
            new = dataclasses.replace(finding, message=(
                f"{target}.set_weights({model}.get_weights()) → {out} (written out in this file): two functional "
                "models of the same layers in the same order (Keras pairs their weights by position over "
                "model.layers) whose translations name their modules differently: each module gets the parameters "
                "and buffers of the module of the layer at its place, by name within the layer (a layer of other "
                "sizes: an error)"))
            # (located by now: the same finding with its line)
            ctx.findings = [dataclasses.replace(f, message=new.message) if f.code == finding.code
                            and f.message == finding.message else f for f in ctx.findings]
    return module.with_changes(body=body) if changed else module


class _CountedLines(cst.CSTTransformer):
    """Puts ``comment`` above each simple statement line calling ``name``."""

    def __init__(self, name: str, comment: str) -> None:
        self.name, self.comment = name, comment

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not any(isinstance(c.func, cst.Name) and c.func.value == self.name for c in find_all(original_node, cst.Call)):
            return updated_node
        return updated_node.with_changes(leading_lines=[*updated_node.leading_lines,
                                                        cst.EmptyLine(comment=cst.Comment(self.comment))])


def finish_count_params(module: cst.Module, ctx: FileContext) -> cst.Module:
    """``keras_count_params(model)`` (a ``model.count_params()``, above) in a translation holding lazy modules (a
    layer whose input size fwport did not know: nn.LazyLinear, ...): their parameters have no size before the
    first forward call, where Keras's built model counts them, so each such count becomes an error, with its
    comment. (Known only now: the layers' rules chose the lazy modules in the rewrite.)"""
    counted = ctx.analyses.get("count_params")
    if not counted or not re.search(r"\bLazy\w+\(", module.code):
        return module
    why = ("model.count_params() is a Keras model method; the translated model holds lazy modules (nn.Lazy...: an input "
           "size fwport did not know), whose parameters have no size before the model's first call, where Keras's "
           "built model counts them: give the layers their input sizes (or call the model once on a batch, "
           "build_on_zeros), then count with sum(p.numel() for p in model.parameters()) plus the BatchNorm buffers")
    messages = {f.message for f in counted}
    ctx.findings = [dataclasses.replace(f, severity=Severity.ERROR, code="unsupported-construct", message=why)
                    if f.code == "idiom-replaced" and f.message in messages else f for f in ctx.findings]
    return module.visit(_CountedLines("keras_count_params", f"# fwport: unsupported-construct: {why}"))
