"""Structural pass: ``keras.Model`` / ``keras.layers.Layer`` subclasses → ``nn.Module``.

What changes, each on the line it was written on:

- the base (``keras.Model``, ``layers.Layer``, ``tf_keras.Model``...) becomes ``nn.Module``; a class
  deriving from another translated class of the file keeps that base;
- ``super().__init__(name=..., **kwargs)`` → ``super().__init__()`` (the keywords are Keras-only);
- ``self.x = <Keras layer>`` in ``__init__`` → the torch module(s) (several in ``nn.Sequential``), a
  list of layers → ``nn.ModuleList``; each layer with variables gets a ``LayerRecord`` (``x`` → ``x`` or
  ``x.<i>``), a custom layer held as an attribute contributes its records under ``x.``;
- ``call(self, inputs, training=None, mask=None)`` → ``forward(self, inputs)``: ``training`` becomes
  ``self.training``, ``training=`` passed to sub-modules is dropped (torch takes the mode from
  ``.train()``/``.eval()``), a ``mask`` the body uses is an error;
- layout: subclass bodies keep the source's channels-last layout (ranks cannot be followed through
  arbitrary tensor code). Modules that need channels-first inputs are called as
  ``self.conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)`` (info ``layout-kept``, once per class), so a
  Flatten stays in channels-last order and no weight is permuted;
- merge layers (Add, Concatenate, Multiply) have no torch module: their call sites become the
  expression (``a + b``, ``torch.cat(...)``) and their ``__init__`` line becomes a comment saying so
  (a comment, not a removed line, keeps the line structure);
- ``self.add_weight(...)`` / ``add_variable`` → ``nn.Parameter(<torch initializer>)`` with the exact
  Keras distribution (rule ``add-weight``); a ``build(self, input_shape)`` that does not use the input
  shape is called at the end of ``__init__`` (``self.build()`` takes the blank line after
  ``__init__``); one that does runs on the first call (the LazyBuild helper: torch's lazy modules).
  The layers ``build`` creates (``self.pool = GlobalAveragePooling2D()``) are the class's layers as
  those of ``__init__`` are (permutes at their calls, merge layers written out);
- ``get_config``/``from_config`` are kept (info: unused by torch); a ``keras.Model`` with its own
  ``train_step`` derives from the written ``TrainStepModule`` (passes/fitloop.py), whose compile / fit
  drive it (its ``test_step`` / ``predict_step`` too, through TrainStepModule's evaluate / predict);
  ``self.add_loss(term)``, a statement of its own in ``call`` (under an if, in a loop too) in a file trained only
  by the loops fwport writes, is ``self.added_losses = getattr(self, "added_losses", []) + [term]`` (each call's
  term: those loops empty the lists before a forward and add the sum of every module's after it, Keras's terms of
  the last forward; a compile without a loss: their sum is the loss); ``test_step``/``predict_step`` elsewhere,
  other ``add_loss`` calls, ``add_metric``, and the functional API (``keras.Model(inputs, outputs)``) are errors.

Shapes are followed through straight-line ``x = self.layer(x)`` code in ``call`` so that a BatchNorm
after a convolution knows its rank and channels; the model's own input shape is unknown (None).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import libcst as cst

from fwport.core.hooks import default_leave_transform, default_visit
from fwport.core.rewrite import rewrite
from fwport.core.bind import NOT_LITERAL, bind_def, call_argument, literal_value
from fwport.core.context import FileContext, LayerRecord, ModelInfo
from fwport.core.engine import LayerEmission, code, expr, map_call, translate_layer
from fwport.core.finding import Severity
from fwport.core.names import (ScopedResolver, ValueVisitor, bound_names, dotted, dotted_text, find_all, marked,
                               param_names, scan, skip_unmarked)
from fwport.packs.tf2torch.dims import Sizes, SizedContext, known, module_scope
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.layer import RNN_CALLED_AS_KERAS
from fwport.packs.tf2torch.passes.fitloop import ADDED_LOSSES, TRAIN_STEP_MODULE, kept_add_losses
from fwport.packs.tf2torch.passes import data_format, regularizers, variables
from fwport.packs.tf2torch.passes.sequential import LOCAL_NCHW, NODES, RANKS

BASES = ("keras.Model", "keras.layers.Layer", "tensorflow.Module")
_VARIABLE_LISTS = ("trainable_variables", "trainable_weights")  # self.<these> → list(self.parameters())
_WRITTEN_OUT = "tf2torch-merge-written-out"
_SEQ_HANDLED = "tf2torch-subclass-seq-handled"  # ids of LOCAL_NCHW Sequentials whose calls _seq_list found  # ctx.analyses: ids of the expressions merge calls became
# how tightly each binary operator binds (a written-out merge operand below a tighter one is parenthesised)
_PRECEDENCE = {cst.Power: 7, cst.Multiply: 5, cst.Divide: 5, cst.FloorDivide: 5, cst.Modulo: 5,
               cst.MatrixMultiply: 5, cst.Add: 4, cst.Subtract: 4, cst.LeftShift: 3, cst.RightShift: 3,
               cst.BitAnd: 2, cst.BitXor: 1, cst.BitOr: 0}
_AUG_OPS = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
            cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide, cst.ModuloAssign: cst.Modulo,
            cst.PowerAssign: cst.Power, cst.MatrixMultiplyAssign: cst.MatrixMultiply}
FUNCTIONAL = "keras.Model"
SEQUENTIAL = "keras.Sequential"
INPUT = "keras.Input"
ADD_WEIGHT_RULE = "add-weight"
VARIABLE_RULE = "variable"  # tf.Variable: its weight map moves a layer's own variable (_record_variables)
_ADD_WEIGHT_METHODS = ("add_weight", "add_variable")
# positional parameters of add_weight, by Keras generation (Keras 3 takes at most these three)
_POSITIONAL = {3: ("shape", "initializer", "dtype"),
               2: ("name", "shape", "dtype", "initializer", "regularizer", "trainable", "constraint")}
_ERROR_METHODS = {
    "train_step": "a custom train_step has no nn.Module counterpart: write the training loop "
                  "(loss.backward(), optimizer.step()) where the model is trained",
    "test_step": "a custom test_step has no nn.Module counterpart: write the evaluation loop by hand",
    "predict_step": "a custom predict_step has no nn.Module counterpart: call the model under torch.no_grad()",
}
_ERROR_CALLS = {
    "add_loss": "torch modules have no add_loss: return the extra loss term from forward (or store it on "
                "self) and add it to the loss where the model is trained",
    "add_metric": "torch modules have no add_metric: compute the metric where the model is evaluated",
}


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    p = _SubclassPass(ctx)
    regularizers.note_functions(module, ctx)  # (a regularizer a function of the file returns)
    p.analyse(module)
    # only the top-level statements that hold a translated class or a functional-API call are
    # rewritten (a transformer rebuilds every node it visits: the rest stay the very same nodes)
    body = list(module.body)
    for i in sorted(p.relevant):
        p.mark(body[i])
        body[i] = rewrite(body[i], p)
    p.expand_nested()
    if ctx.analyses.get(regularizers.KEY):
        body = regularizers.drop_unused_aliases(body, ctx)
    return module.with_changes(body=body) if p.relevant else module


# --- plans: what each class becomes, decided on the input tree before rewriting ------------------------

@dataclass
class _Attr:
    """A ``self.<name> = ...`` module attribute of a translated class."""

    name: str
    call: cst.Call | None = None  # the layer call (or the element call of a list)
    rule: object = None
    kind: str = "layer"  # layer | list | nested
    emission: LayerEmission | None = None
    in_shape: object = NOT_LITERAL  # the shape it was translated for
    done: bool = False
    functional: object = None
    bound: int = 0  # rank of the channels-first input it needs (0: layout-free)
    keeps_rank: bool = True  # the output is a feature map of the same rank (permute back)
    seq: tuple | None = None  # (in permute rank, out permute rank) for an nn.Sequential of the Sequential pass
    out: cst.BaseExpression | None = None  # the module expression that replaces the layer call
    flat: bool = False  # a BatchNorm1d over the last axis of an input of unknown rank: reshaped at calls


@dataclass(frozen=True)
class _Tail:
    """A tensor whose rank is unknown but whose last size is known (a Dense's output on an input of
    unknown rank): enough for layers that act on the last axis alone."""

    last: object


# layers that keep the shape of their input (elementwise, or softmax over the last axis)
_SHAPE_KEEPING = {"dropout", "activation", "relu", "leaky-relu", "elu", "softmax"}
# functions of one tensor that keep its shape: `x = tf.nn.relu(x)` between two layers
_ELEMENTWISE_FNS = {"tensorflow.nn.relu", "tensorflow.nn.gelu", "tensorflow.nn.silu", "tensorflow.nn.elu",
                    "tensorflow.nn.tanh", "tensorflow.nn.sigmoid", "tensorflow.math.tanh", "tensorflow.tanh",
                    "tensorflow.math.sigmoid", "tensorflow.sigmoid", "tensorflow.nn.leaky_relu",
                    "keras.activations.relu", "keras.activations.gelu", "keras.activations.tanh",
                    "keras.activations.sigmoid", "keras.activations.silu", "keras.ops.relu", "keras.ops.gelu",
                    "keras.ops.silu", "keras.ops.tanh", "keras.ops.sigmoid"}


@dataclass
class _Plan:
    name: str
    node: cst.ClassDef
    attrs: dict[str, _Attr] = field(default_factory=dict)
    replace: dict[int, cst.BaseExpression] = field(default_factory=dict)  # id(input expr) → output expr
    comment_out: dict[int, str] = field(default_factory=dict)  # id(statement line) → note
    nested: dict[str, str] = field(default_factory=dict)  # attr → translated class it holds
    call_fn: cst.FunctionDef | None = None
    init_fn: cst.FunctionDef | None = None
    build_fn: cst.FunctionDef | None = None
    build_static: bool = False  # build() to be called at the end of __init__
    lazy_build: list | None = None  # build(input_shape) run on the first call (LazyBuild): the weights it makes
    train_step: bool = False  # a keras.Model with its own train_step: derives from TrainStepModule
    drop_params: set[str] = field(default_factory=set)  # forward parameters removed
    loop_vars: set[str] = field(default_factory=set)  # `for blk in self.blocks:` names: modules too
    loop_seq: dict[str, str] = field(default_factory=dict)  # `for blk in self.blocks:` name → a "seqlist" attr
    # attr → what its calls do with a `training` argument: "drop" (every value it may hold is a torch
    # module), "keep" (a plain callable, or not known: the argument stays, as self.training)
    training: dict[str, str] = field(default_factory=dict)
    # attr → "True" / "False": a sub-module every call of which passes that literal training flag (a frozen
    # backbone's training=False, Monte Carlo dropout's training=True): kept in that mode by a written train()
    fixed_modes: dict[str, str] = field(default_factory=dict)
    layout_reported: bool = False
    weight_attrs: set[str] = field(default_factory=set)  # self.<attr> = self.add_weight(...)
    # add_weight(regularizer=...) to add to regularization_loss(): (attr, the statement, its method, regularizer, trainable)
    weight_penalties: list = field(default_factory=list)
    # add_weight(constraint=...) for apply_constraints(): (attr, the statement, its method, constraint, trainable, call)
    weight_constraints: list = field(default_factory=list)


def _self_rooted(node: cst.BaseExpression) -> bool:
    """``self`` or ``self.a.b``: attributes of self only."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name) and node.value == "self"


class _TrainingCalls(cst.CSTVisitor):
    """_SubclassPass._plan_training: the ``self.<attr>(..., training)`` calls → (call, where ``training`` is given),
    into ``calls``."""

    def __init__(self, calls):
        super().__init__()
        self.calls = calls

    def visit_Call(self, n: cst.Call) -> None:
        p = dotted(n.func)
        if not p or len(p) != 2 or p[0] != "self" or p[1] == "call":
            return
        for i, a in enumerate(n.args):
            if a.keyword is not None and a.keyword.value == "training":
                self.calls.setdefault(p[1], []).append((n, "training"))
            elif a.keyword is None and i > 0 and isinstance(a.value, cst.Name) and a.value.value == "training":
                self.calls.setdefault(p[1], []).append((n, i))


class _SelfUses(cst.CSTVisitor):
    """_SubclassPass._plan_fixed_modes: the ``self.<attr>(...)`` calls by attr (``calls``), and the attrs used
    otherwise than called or read through (``self.<attr>.trainable``): passed on, stored, returned (``bare``)."""

    def __init__(self):
        super().__init__()
        self.calls: dict[str, list[cst.Call]] = {}
        self.bare: set[str] = set()
        self.seen: set[int] = set()  # self.<attr> nodes that are a call's function or an attribute's value

    def visit_Call(self, n: cst.Call) -> None:
        p = dotted(n.func)
        if p and len(p) == 2 and p[0] == "self":
            self.calls.setdefault(p[1], []).append(n)
            self.seen.add(id(n.func))

    def visit_Attribute(self, n: cst.Attribute) -> None:
        if id(n) in self.seen:
            return
        if isinstance(n.value, cst.Attribute):
            self.seen.add(id(n.value))
        elif isinstance(n.value, cst.Name) and n.value.value == "self":
            self.bare.add(n.attr.value)


class _Collect(cst.CSTVisitor):
    """_SubclassPass.analyse: the classes (→ the index of the top-level statement holding them, ``where``), and the
    indices of the top-level statements that call keras.Model / keras.Input (``relevant``)."""

    def __init__(self, resolve, classes: list, where: dict, relevant: set):
        super().__init__()
        self.resolve, self.classes, self.where, self.relevant = resolve, classes, where, relevant
        self.index = 0  # the top-level statement scanned

    def visit_ClassDef(self, n: cst.ClassDef) -> None:
        self.classes.append(n)
        self.where[id(n)] = self.index

    def visit_Call(self, n: cst.Call) -> None:
        if self.resolve(n.func) in (FUNCTIONAL, INPUT):
            self.relevant.add(self.index)


class _SubclassPass(ScopedResolver, cst.CSTTransformer):
    def __init__(self, ctx: FileContext):
        super().__init__()
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.translated: dict[str, cst.ClassDef] = {}  # class name → node, for every translated class
        self.translated_ids: set[int] = set()  # every translated class node (two may share a name)
        self.plans: list[_Plan | None] = []  # enclosing classes (None: not translated)
        self._targets: set[int] = set()
        self.all_plans: list[_Plan] = []
        self.functional_scopes: list[bool] = []  # per function: holds a functional keras.Model call
        self.fn_stack: list[cst.FunctionDef] = []
        self._added_losses: set[int] = set()  # self.add_loss(term) calls that become self.added_losses = ...
        self.all_classes: list[cst.ClassDef] = []  # every class of the file (analyse)
        self._training_terms: set[int] = set()  # ... of them, those under an if on training (Keras 3: _untrained_models)
        self._stmt_of: dict[int, cst.CSTNode | None] = {}  # id(layer call in __init__) → its statement line
        self.module_sizes: tuple[dict, set] = ({}, set())
        self.relevant: set[int] = set()  # indices of the top-level statements to rewrite (see analyse)
        self.hot: set[int] | None = None  # see on_visit

    # --- what to descend into: only subtrees with a call, a `training` or a settled node inside ------
    # (every hook that changes anything is on one of those; the rest come back as the input nodes)
    def on_visit(self, node: cst.CSTNode) -> bool:
        skip = skip_unmarked(self, node, self.hot)
        return default_visit(self, node) if skip is None else skip

    def mark(self, stmt: cst.CSTNode) -> None:
        settled = self.ctx.settled
        self.hot = marked(stmt, lambda n: type(n) is cst.Call or settled.get(id(n)) is n or type(n) is cst.AugAssign
                          or (type(n) is cst.Name and n.value == "training")
                          or (type(n) is cst.Attribute and n.attr.value in _VARIABLE_LISTS))

    # --- settled nodes keep their identity for the passes after this one -------------------------------
    def on_leave(self, original_node, updated_node):
        out = default_leave_transform(self, original_node, updated_node)
        return original_node if self.ctx.is_settled(original_node) else out

    @property
    def plan(self) -> _Plan | None:
        return self.plans[-1] if self.plans else None

    # --- which classes are translated ---------------------------------------------------------------------
    def analyse(self, node: cst.Module) -> None:
        """Decides which classes are translated, and ``relevant``: the indices of the top-level
        statements this pass may change (those holding a translated class, or a call that may be
        ``keras.Model(...)`` / ``keras.Input(...)``, shadowing ignored)."""
        self.module = node
        self._given_values: set[int] = set()  # (_given_sequential: values known to be channels-first Sequentials)
        self._given_lists: set[tuple] = set()  # (_given_list: (class, attribute) given a list of modules)
        self.module_sizes = module_scope(node, self.ctx)
        self.module_values = _module_values(node)
        classes: list[cst.ClassDef] = []
        where: dict[int, int] = {}  # id(class) → index of the top-level statement holding it
        relevant = self.relevant = set()
        resolve = self.ctx.imports.resolve
        collect = _Collect(resolve, classes, where, relevant)
        for index, stmt in enumerate(node.body):
            collect.index = index
            scan(stmt, collect)
        self.all_classes = classes
        changed = True
        while changed:  # a class deriving from a translated class of the file is translated too
            changed = False
            for c in classes:
                if id(c) in self.translated_ids:
                    continue
                for b in c.bases:
                    if b.keyword is None and (self.ctx.imports.resolve(b.value) in BASES
                                              or (isinstance(b.value, cst.Name) and b.value.value in self.translated)):
                        self.translated[c.name.value] = c
                        self.translated_ids.add(id(c))
                        changed = True
                        break
        self.relevant |= {where[id(c)] for c in classes if id(c) in self.translated_ids}
        keras = self.ctx.analyses.setdefault(variables.KERAS_CLASSES, set())
        changed = True
        while changed:  # the classes deriving from keras.Model / keras.layers.Layer (not tf.Module), for variables.py
            changed = False
            for c in classes:
                if id(c) in self.translated_ids and c.name.value not in keras and any(
                        b.keyword is None and (self.ctx.imports.resolve(b.value) in BASES[:2]
                                               or isinstance(b.value, cst.Name) and b.value.value in keras)
                        for b in c.bases):
                    keras.add(c.name.value)
                    changed = True
        self.functional_scopes.append(_has_functional(node.body, self))
        # data_format=<a constructor parameter>: the value each class is built with in this file
        self.formats = data_format.resolve(self.translated, node, self.ctx)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if id(node) not in self.translated_ids:
            self.plans.append(None)
            return
        plan = _Plan(node.name.value, node)
        self.plans.append(plan)
        self.all_plans.append(plan)
        self._plan_class(plan)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        plan = self.plans.pop()
        if plan is None:
            return updated_node
        bases = []
        for o, b in zip(original_node.bases, updated_node.bases):
            if b.keyword is None and self.ctx.imports.resolve(o.value) in BASES:
                if plan.train_step:  # keras.Model's compile / fit, driving train_step
                    b = b.with_changes(value=cst.Name(TRAIN_STEP_MODULE))
                    self.ctx.options["_train_step_module"] = True
                else:
                    b = b.with_changes(value=self.ctx.spell("torch.nn.Module"))
            bases.append(b)
        updated_node = updated_node.with_changes(bases=bases)
        if plan.build_static:
            updated_node = self._call_build_from_init(plan, original_node, updated_node)
        if plan.init_fn is not None and self._needs_super_init(plan, plan.init_fn):
            updated_node = self._super_init_first(plan, original_node, updated_node)
        if plan.lazy_build is not None:
            updated_node = self._lazy_build(plan, original_node, updated_node)
        if plan.fixed_modes:
            updated_node = _written_train(plan, updated_node)
        return updated_node

    def _lazy_build(self, plan: _Plan, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """``class L(LazyBuild, nn.Module)``, and the weights build() makes declared at the end of
        ``__init__`` as uninitialised parameters (filled in place on the first call)."""
        name = helpers.use(self.ctx, "LazyBuild")
        bases = [cst.Arg(cst.Name(name), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                 *updated.bases]
        updated = updated.with_changes(bases=bases)
        idx = next((i for i, s in enumerate(original.body.body) if s is plan.init_fn), None)
        if idx is None or not plan.lazy_build:
            return updated
        body = list(updated.body.body)
        init = body[idx]
        spelled = self.ctx.spell_text("torch.nn.UninitializedParameter")
        lines = [cst.parse_statement(f"self.{w} = {spelled}()\n") for w in plan.lazy_build]
        body[idx] = init.with_changes(body=init.body.with_changes(body=[*init.body.body, *lines]))
        return updated.with_changes(body=updated.body.with_changes(body=body))

    # --- functions -----------------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self.fn_stack.append(node)
        self.functional_scopes.append(_has_functional(node.body.body if isinstance(node.body, cst.IndentedBlock)
                                                      else [], self))

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef):
        self.fn_stack.pop()
        self.functional_scopes.pop()
        updated_node = super().leave_FunctionDef(original_node, updated_node)
        plan = self.plan
        if plan is None:
            return updated_node
        if original_node is plan.call_fn:
            updated_node = self._forward(plan, original_node, updated_node)
        elif original_node is plan.build_fn and plan.build_static:
            updated_node = _optional_second_param(updated_node)
        return updated_node

    def _needs_super_init(self, plan: "_Plan", init: cst.FunctionDef) -> bool:
        """An ``__init__`` of a class deriving directly from tf.Module (nn.Module's __init__ is then the parent's)
        with no ``super().__init__`` / ``super(C, self).__init__`` / ``<Base>.__init__(self, ...)`` call."""
        if not any(b.keyword is None and self.ctx.imports.resolve(b.value) == "tensorflow.Module"
                   for b in plan.node.bases) or len(plan.node.bases) != 1:
            return False
        return not any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "__init__"
                       for c in find_all(init.body, cst.Call))

    def _in_method(self) -> cst.FunctionDef | None:
        """The method of the current class we are in (the outermost function below the class)."""
        plan = self.plan
        if plan is None or not self.fn_stack:
            return None
        for fn in self.fn_stack:
            if fn in _methods(plan.node):
                return fn
        return None

    # --- calls ---------------------------------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        q = self.qualname(original_node.func)
        if q == FUNCTIONAL and self.ctx.is_settled(original_node):
            return original_node  # the functional pass translated it, or said why not
        if q == FUNCTIONAL:
            self.ctx.report(Severity.ERROR, "unsupported-construct", "the functional API (keras.Model(inputs, "
                            "outputs)) is not translated yet: write an nn.Module subclass whose forward calls the "
                            "layers in order", original_node)
            self.ctx.settle(original_node)
            return original_node
        if q == INPUT and self.functional_scopes and self.functional_scopes[-1]:
            self.ctx.settle(original_node)  # reported with its keras.Model(...) call
            return original_node
        plan = self.plan
        if plan is None or self._in_method() is None:
            return updated_node
        new = plan.replace.get(id(original_node))
        if new is not None:
            return new
        func = original_node.func
        parts = dotted(func)
        # (a positional True / False is the mode of a Keras layer's call only: a layer of the file takes what it says)
        fixed = _fixed_training(original_node, positional=bool(parts) and len(parts) == 2 and parts[0] == "self" and (
            plan.attrs.get(parts[1]) is not None and plan.attrs[parts[1]].kind == "layer"
            and plan.attrs[parts[1]].rule is not None))
        # (a train_step runs in training mode, fit's loop sets it; a test_step / predict_step in inference mode)
        step = {"train_step": "True", "test_step": "False", "predict_step": "False"}.get(self._in_method().name.value)
        if fixed is not None and parts and len(parts) == 2 and parts[0] == "self" \
                and plan.fixed_modes.get(parts[1]) == fixed:
            # kept in that mode by the class's written train() (leave_ClassDef): the flag dropped
            updated_node = _drop_flag(original_node, updated_node)
            if self._in_method().name.value not in ("train_step", "test_step", "predict_step"):
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(func)}(..., training={fixed}) → "
                                f"{code(func)}.{'train' if fixed == 'True' else 'eval'}() in {plan.name}.train(), "
                                "written: a torch module takes its mode from .train() / .eval(), so the model's "
                                f"train() puts {code(func)} back in {'training' if fixed == 'True' else 'inference'} "
                                "mode whatever the model's, as Keras runs it", original_node)
        elif fixed is not None and fixed != step and (isinstance(func, cst.Subscript) or parts and (
                parts[0] in plan.loop_vars or parts[0] in plan.loop_seq or parts[0] == "self" and len(parts) == 2
                and parts[1] != "call" and plan.training.get(parts[1], "drop") == "drop")):
            # a sub-layer run in one mode whatever the model's (Monte Carlo dropout, a frozen BatchNormalization):
            # a torch module takes its mode from .train() / .eval() (self.training) only
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(func)}(..., training={fixed}) runs the "
                            f"layer in {'training' if fixed == 'True' else 'inference'} mode whatever the model's; a "
                            "torch module takes no training argument and follows the model's mode (.train() / "
                            ".eval()), so dropping it changes the result: call the functional form in that mode "
                            "(F.dropout(x, p, training=True) for a Dropout), or set the sub-module's mode by hand "
                            f"({code(func)}.{'train' if fixed == 'True' else 'eval'}() after each model.train() / "
                            "model.eval())" + (
                                "; fwport writes the class's train() that does it where every use of "
                                f"{code(func)} in the class is a call with the same literal flag (and the class "
                                "defines no train())" if parts and len(parts) == 2 and parts[0] == "self" else ""),
                            original_node)
            return updated_node
        if (parts and len(parts) == 3 and parts[0] == "self" and parts[1] in plan.weight_attrs
                and parts[2] in _ASSIGNS and len(updated_node.args) == 1 and updated_node.args[0].keyword is None
                and not updated_node.args[0].star):
            # a variable's assign / assign_add / assign_sub: the parameter's values, in place, outside autograd
            return expr(f"self.{parts[1]}.data.{_ASSIGNS[parts[2]]}({code(updated_node.args[0].value)})")
        seq = None
        if isinstance(func, cst.Subscript) and dotted(func.value) and len(dotted(func.value)) == 2:
            seq = plan.attrs.get(dotted(func.value)[1]) if dotted(func.value)[0] == "self" else None
        elif parts and len(parts) == 1 and parts[0] in plan.loop_seq:
            seq = plan.attrs.get(plan.loop_seq[parts[0]])
        if seq is not None and seq.kind == "seqlist":  # a channels-first Sequential of a list: permuted
            return self._call_site(plan, seq, original_node, _drop_training(original_node, updated_node))
        if parts and len(parts) == 1 and parts[0] in plan.loop_vars:
            return _drop_training(original_node, updated_node)
        if isinstance(func, cst.Subscript) and self._modules_only(plan, func.value):
            return _drop_training(original_node, updated_node)  # self.blocks[i](x, training=training)
        # self.<attr>(...) and self(...) / self.call(...): torch modules take no training=; a callee
        # that may be a plain callable (a lambda, a function) keeps it
        if parts and parts[0] == "self" and len(parts) <= 2:
            if len(parts) == 1 or parts[1] == "call" or plan.training.get(parts[1], "drop") == "drop":
                updated_node = _drop_training(original_node, updated_node)
            if len(parts) == 2 and parts[1] == "call":
                return updated_node.with_changes(func=cst.Name("self"))
            if len(parts) == 2 and parts[1] == "add_loss" and self._added_loss(plan, original_node):
                return updated_node  # (leave_Expr: self.added_losses = ... + [term])
            if len(parts) == 2 and parts[1] in _ERROR_CALLS:
                self.ctx.report(Severity.ERROR, "unsupported-construct", _ERROR_CALLS[parts[1]], original_node)
                return updated_node
            if len(parts) == 2 and parts[1] in plan.attrs:
                return self._call_site(plan, plan.attrs[parts[1]], original_node, updated_node)
        if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call)
                and dotted_text(func.value.func) == "super"):
            meth = func.attr.value
            if meth == "__init__":
                return self._super_init(original_node, updated_node)
            if meth == "call":
                updated_node = _drop_training(original_node, updated_node)
                return updated_node.with_changes(func=updated_node.func.with_changes(attr=cst.Name("forward")))
        return updated_node

    def _added_loss(self, plan: _Plan, call: cst.Call) -> bool:
        """Whether ``self.add_loss(term)`` becomes ``self.added_losses = getattr(self, "added_losses", []) + [term]``:
        a statement of its own in the class's call (fitloop.kept_add_losses: under an if, in a loop too), in a file
        trained only by the loops fwport writes, which empty every module's list before a forward and add the sum of
        its terms to the loss after it, as Keras adds the terms of the last forward (fitloop.ADDED_LOSSES)."""
        fn = plan.call_fn
        if ADDED_LOSSES not in self.ctx.analyses or fn is None or self.fn_stack[-1:] != [fn]:
            return False
        kept = kept_add_losses(fn)
        if kept is None or id(call) not in kept:
            return False
        self._added_losses.add(id(call))
        if self.ctx.version != 2 and any(
                any(isinstance(n, cst.Name) and n.value == "training" for n in find_all(branch.test, cst.Name))
                and any(c is call for c in find_all(branch.body, cst.Call)) for branch in find_all(fn, cst.If)):
            self._training_terms.add(id(call))
        return True

    def _untrained_models(self) -> list[str]:
        """The file's keras.Model subclasses whose call takes no ``training``: Keras 3 (3.15, measured) then passes
        fit's training=True to none of their layers (they get None: ``if training:`` is false, a Dropout inactive),
        where torch's ``self.training`` is True in fit (tf_keras passes it on)."""
        out = []
        for cls in self.all_classes:
            if not any(b.keyword is None and self.ctx.imports.resolve(b.value) == "keras.Model" for b in cls.bases):
                continue
            for fn in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
                if (isinstance(fn, cst.FunctionDef) and fn.name.value == "call"
                        and "training" not in {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)}):
                    out.append(cls.name.value)
        return out

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.BaseSmallStatement:
        if id(original_node.value) not in self._added_losses:
            return updated_node
        self.ctx.analyses[ADDED_LOSSES] = True
        untrained = self._untrained_models() if id(original_node.value) in self._training_terms else []
        if untrained:
            self.ctx.report(Severity.WARNING, "approximate",
                            f"self.add_loss(term) under a condition on training, in Keras 3 code whose model "
                            f"{', '.join(untrained)} has a call without a training parameter: Keras 3 then passes "
                            "fit's training=True to none of its layers (they get None, and the term is not made in "
                            "fit), where torch's self.training is True in fit (the term is added): give the model's "
                            "call a training=None parameter, passed on to the layers, or drop the condition",
                            original_node)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        "self.add_loss(term) → self.added_losses = getattr(self, \"added_losses\", []) + [term]: "
                        "the module lists the term of each of its calls (a layer called twice gives two), and the "
                        "generated fit / evaluate empty every module's list before a forward and add the sum of its "
                        "terms to the loss, as Keras adds the terms of the last forward (a layer it skipped gives "
                        "none)", original_node)
        term = updated_node.value.args[0].value
        kept = cst.parse_expression('getattr(self, "added_losses", [])')
        return cst.Assign([cst.AssignTarget(cst.Attribute(cst.Name("self"), cst.Name("added_losses")))],
                          cst.BinaryOperation(kept, cst.Add(), cst.List([cst.Element(term)])),
                          semicolon=updated_node.semicolon)

    def _super_init(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        kws = {a.keyword.value for a in original.args if a.keyword is not None}
        if {"inputs", "outputs"} & kws:
            self.ctx.report(Severity.ERROR, "unsupported-construct", "a subclass built through the functional API "
                            "(super().__init__(inputs=..., outputs=...)) is not translated yet: build the layers "
                            "in __init__ and call them in forward", original)
            return updated
        return updated.with_changes(func=updated.func.with_changes(value=cst.Call(cst.Name("super"))), args=[])

    def _call_site(self, plan: _Plan, a: _Attr, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if a.functional is not None:
            args = [x for x in updated.args if x.keyword is None]
            if len(args) != 1 or args[0].star:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"self.{a.name} takes one list of tensors",
                                original)
                return updated
            out = a.functional(args[0].value)
            self.ctx.analyses.setdefault(_WRITTEN_OUT, set()).add(id(out))  # parenthesised where it lands
            return out
        if a.flat:
            return self._flat_call(a, original, updated)
        if a.seq is not None:
            into, back = a.seq
            if into is None or back is None:
                self.ctx.report(Severity.ERROR, "shape-unknown", f"self.{a.name} is an nn.Sequential converted to "
                                "channels-first, called from a body that keeps channels-last tensors, and the rank "
                                f"of its {'input' if into is None else 'output'} is unknown here, so it cannot be "
                                "permuted: give its first layer input_shape= (or a keras.Input), or permute by hand",
                                original)
                return updated
        elif a.bound:
            into, back = a.bound, (a.bound if a.keeps_rank else 0)
        else:
            return updated
        pos = [i for i, x in enumerate(updated.args) if x.keyword is None and not x.star]
        if not pos:
            return updated
        i = pos[0]
        arg = updated.args[i]
        new_args = list(updated.args)
        if into:
            value = arg.value
            if _is_permute(value, _to_last(into)):  # straight from another permuted module: no round trip
                new_args[i] = arg.with_changes(value=value.func.value)
            else:
                new_args[i] = arg.with_changes(value=_permute(value, _to_first(into)))
        out: cst.BaseExpression = updated.with_changes(args=new_args)
        if back:
            out = _permute(out, _to_last(back))
        if not plan.layout_reported:
            plan.layout_reported = True
            self.ctx.report(Severity.INFO, "layout-kept", f"{plan.name} keeps the channels-last layout of the "
                            "source: inputs of channels-first torch modules are permuted at each call",
                            original)
        return out

    def _flat_call(self, a: _Attr, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``self.bn(x)`` → ``self.bn(x.reshape(-1, x.shape[-1])).reshape(x.shape)``: Keras normalises the
        last axis with statistics over all the others, which is BatchNorm1d on the rows of x, at any rank."""
        pos = [x for x in updated.args if x.keyword is None and not x.star]
        if len(pos) != 1 or not isinstance(pos[0].value, cst.Name):
            self.ctx.report(Severity.ERROR, "shape-unknown", f"self.{a.name}: the input's rank is unknown, so the "
                            "BatchNorm1d is applied to its rows (x.reshape(-1, x.shape[-1])), which needs the input "
                            "as a plain variable: assign it to one first (x = ...; self.bn(x))", original)
            return updated
        x = pos[0].value.value
        return expr(f"{code(updated.func)}({x}.reshape(-1, {x}.shape[-1])).reshape({x}.shape)")

    # --- names and statements inside forward / __init__ ---------------------------------------------------
    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        plan = self.plan
        if (plan is not None and original_node.value == "training" and "training" in plan.drop_params
                and plan.call_fn is not None and plan.call_fn in self.fn_stack):
            return cst.Attribute(cst.Name("self"), cst.Name("training"))
        return updated_node

    # a Name in these slots is not a variable use: restore it
    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if (self.plan is not None and original_node.attr.value in _VARIABLE_LISTS
                and _self_rooted(original_node.value) and id(original_node) not in self._targets):
            # the layer's own trainable variables, in creation order: torch registers parameters in the
            # order they are assigned, its own before its submodules' (Keras lists them the same way);
            # a sublayer's (self.generator.trainable_variables) likewise
            return expr(f"list({code(updated_node.value)}.parameters())")
        value = self._operand(updated_node.value, 99)
        if updated_node.attr is original_node.attr and value is updated_node.value:
            return updated_node  # (nothing to change: no copy, so an unchanged statement is not rebuilt)
        return updated_node.with_changes(attr=original_node.attr, value=value)

    # a merge layer's call written out (`self.diff([a, b])` → `a - b`) keeps its meaning where it lands
    # (`x * self.diff([a, b])` → `x * (a - b)`)
    def _operand(self, node: cst.BaseExpression, parent: int, right: bool = False) -> cst.BaseExpression:
        if (id(node) not in self.ctx.analyses.get(_WRITTEN_OUT, ()) or not isinstance(node, cst.BinaryOperation)
                or node.lpar):
            return node
        mine = _PRECEDENCE.get(type(node.operator), 0)
        if mine > parent or (mine == parent and not right):
            return node
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation):
        mine = _PRECEDENCE.get(type(updated_node.operator), 0)
        left, right = self._operand(updated_node.left, mine), self._operand(updated_node.right, mine, right=True)
        if left is updated_node.left and right is updated_node.right:
            return updated_node
        return updated_node.with_changes(left=left, right=right)

    def leave_UnaryOperation(self, original_node: cst.UnaryOperation, updated_node: cst.UnaryOperation):
        expression = self._operand(updated_node.expression, 6)
        return updated_node if expression is updated_node.expression else updated_node.with_changes(expression=expression)

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript):
        value = self._operand(updated_node.value, 99)
        return updated_node if value is updated_node.value else updated_node.with_changes(value=value)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        keyword = original_node.keyword
        return updated_node if updated_node.keyword is keyword else updated_node.with_changes(keyword=keyword)

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        name = original_node.name
        return updated_node if updated_node.name is name else updated_node.with_changes(name=name)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets.add(id(node.target))  # (an attribute assigned to is not read: left as it is)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        plan = self.plan
        if plan is not None:
            new = plan.replace.get(id(original_node.value))
            if new is not None and new is not updated_node.value:
                return updated_node.with_changes(value=new)
        return updated_node

    def leave_AugAssign(self, original_node: cst.AugAssign, updated_node: cst.AugAssign):
        """``x -= m`` in call() rebinds x in TensorFlow (tensors are immutable) but writes into the tensor in
        torch, which may be the caller's input or a tensor autograd saved: ``x = x - m``. ``+=`` only on a
        parameter of call() (a list built with += stays as it is)."""
        plan = self.plan
        if (plan is None or plan.call_fn is None or plan.call_fn not in self.fn_stack
                or not isinstance(updated_node.target, cst.Name)):
            return updated_node
        name = updated_node.target.value
        if isinstance(updated_node.operator, cst.AddAssign) and name not in {
                p.name.value for p in plan.call_fn.params.params[1:]}:
            return updated_node
        op = _AUG_OPS.get(type(updated_node.operator))
        if op is None:
            return updated_node
        value = updated_node.value
        if isinstance(value, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda,
                              cst.UnaryOperation)) and not value.lpar:
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Assign([cst.AssignTarget(updated_node.target)],
                          cst.BinaryOperation(cst.Name(name), op(), value), semicolon=updated_node.semicolon)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock):
        plan = self.plan
        if plan is None or not plan.comment_out:
            return updated_node
        body = list(updated_node.body)
        for i in range(len(original_node.body) - 1, -1, -1):
            note = plan.comment_out.get(id(original_node.body[i]))
            if note is None:
                continue
            stmt = body[i]
            src_lines = code(original_node.body[i].with_changes(leading_lines=[])).rstrip("\n").split("\n")
            if i + 1 < len(body):
                comments = [cst.EmptyLine(comment=cst.Comment(f"# {ln.strip()}")) for ln in src_lines[:-1]]
                comments.append(cst.EmptyLine(comment=cst.Comment(f"# {src_lines[-1].strip()}  ({note})")))
                body[i + 1] = body[i + 1].with_changes(
                    leading_lines=[*stmt.leading_lines, *comments, *body[i + 1].leading_lines])
                del body[i]
            elif len(src_lines) == 1:
                body[i] = cst.SimpleStatementLine(
                    [cst.Pass()], leading_lines=stmt.leading_lines,
                    trailing_whitespace=cst.TrailingWhitespace(cst.SimpleWhitespace("  "),
                                                               cst.Comment(f"# {src_lines[0].strip()}  ({note})")))
        return updated_node.with_changes(body=body)

    def _is_model_class(self, node: cst.ClassDef) -> bool:
        """A direct subclass of keras.Model (train_step is a Model method, not a Layer's)."""
        return any(b.keyword is None and self.ctx.imports.resolve(b.value) == FUNCTIONAL for b in node.bases)

    # --- planning one class --------------------------------------------------------------------------------
    def _plan_class(self, plan: _Plan) -> None:
        ctx = self.ctx
        methods = _methods(plan.node)
        by_name = {m.name.value: m for m in methods}
        plan.init_fn = by_name.get("__init__")
        plan.call_fn = by_name.get("call")
        plan.build_fn = by_name.get("build")
        plan.train_step = "train_step" in by_name and self._is_model_class(plan.node)
        for name, why in _ERROR_METHODS.items():
            if name == "train_step" and plan.train_step:
                ctx.report(Severity.INFO, "idiom-replaced",
                           f"{plan.name} defines its own train_step: it derives from {TRAIN_STEP_MODULE}, written "
                           "into the file, whose compile(optimizer) and fit(x, y=None, ...) drive train_step as "
                           "Keras does", by_name[name])
            elif name in by_name and plan.train_step:  # TrainStepModule's evaluate / predict call it
                ctx.report(Severity.INFO, "idiom-replaced",
                           f"{plan.name}.{name}: {TRAIN_STEP_MODULE}'s "
                           f"{'evaluate (and fit with validation_data) call' if name == 'test_step' else 'predict calls'}"
                           " it per batch in inference mode, as Keras does", by_name[name])
            elif name in by_name:
                ctx.report(Severity.ERROR, "unsupported-construct", why, by_name[name])
        for name in ("get_config", "from_config"):
            if name in by_name:
                ctx.report(Severity.INFO, "unsupported-construct", f"{name} is Keras serialization, which torch does "
                           "not use (it saves state_dict): kept as it was; delete it once nothing needs it",
                           by_name[name])
        if plan.init_fn is not None:
            self._plan_init(plan, plan.init_fn)
        if plan.build_fn is not None:  # layers build() creates are the class's layers as those of __init__
            self._plan_init(plan, plan.build_fn)
        self._plan_recurrent_calls(plan)
        self._plan_training(plan, methods)
        for m in methods:  # add_weight anywhere (Keras 3 allows it in __init__)
            self._plan_add_weights(plan, m)
        for m in (plan.init_fn, plan.build_fn):  # self.gamma = tf.Variable(...) (cait's LayerScale)
            self._record_variables(plan, m)
        if plan.build_fn is not None:
            self._plan_build(plan, plan.build_fn)
        self._plan_weight_penalties(plan)
        self._plan_weight_constraints(plan)
        if plan.call_fn is not None:
            self._plan_call(plan, plan.call_fn)
        for a in plan.attrs.values():  # layers never called in call(): translated without a known input
            if not a.done:
                self._translate_attr(plan, a, None)
        self._plan_fixed_modes(plan, methods)  # (once each attribute's translation is known)
        if plan.init_fn is not None:
            self._plan_layer_builds(plan, plan.init_fn)
        self._check_alternatives(plan)
        self._unfollowed_sequentials(plan)
        ctx.models[plan.name] = ModelInfo(plan.name, "subclass", None, "same")

    # --- recurrent layers called as Keras calls them ---------------------------------------------------------
    def _plan_recurrent_calls(self, plan: _Plan) -> None:
        """A recurrent layer attribute whose calls pass initial_state= (or a second positional argument),
        or which returns its states (return_state=True), is translated as the Lazy<kind> helper, which
        takes and returns what Keras's layer does (see layer.rnn). mask= is an error: torch's RNNs have
        no mask."""
        rnn_attrs = {n: a for n, a in plan.attrs.items() if a.kind == "layer"
                     and a.rule.emit.get("shape") in ("rnn", "rnn-layer", "bidirectional")}
        if not rnn_attrs:
            return
        marked = self.ctx.analyses.setdefault(RNN_CALLED_AS_KERAS, {})  # id -> the call (kept alive)
        for name, a in rnn_attrs.items():
            rs = call_argument(a.call, "return_state")
            if rs is not None and literal_value(rs, NOT_LITERAL) is True:
                marked[id(a.call)] = a.call
        ctx = self.ctx

        class _Calls(cst.CSTVisitor):
            def visit_Call(self, n: cst.Call) -> None:
                p = dotted(n.func)
                if not p or len(p) != 2 or p[0] != "self" or p[1] not in rnn_attrs:
                    return
                a = rnn_attrs[p[1]]
                kws = {x.keyword.value for x in n.args if x.keyword is not None}
                if "mask" in kws:
                    ctx.report(Severity.ERROR, "unsupported-construct", f"self.{p[1]}(..., mask=...): torch's "
                               "recurrent modules take no mask; pack the sequences (pack_padded_sequence) or pick "
                               "each sequence's last valid step by hand", n)
                if "initial_state" in kws or len([x for x in n.args if x.keyword is None]) > 1:
                    if a.rule.emit.get("shape") == "bidirectional":
                        ctx.report(Severity.ERROR, "unsupported-construct", f"self.{p[1]}(..., initial_state=...): "
                                   "the states of a Bidirectional layer are not translated; call the two directions' "
                                   "torch RNNs by hand", n)
                    else:
                        marked[id(a.call)] = a.call

        scan(plan.node, _Calls())

    # --- the `training` argument of calls to attributes: dropped only where the callee is a module --------
    def _assigned(self, cls: cst.ClassDef, seen: frozenset = frozenset()) -> dict[str, list]:
        """attr → [(value, method)] of every ``self.<attr> = value`` in the class and its translated bases."""
        out: dict[str, list] = {}
        for b in cls.bases:
            if isinstance(b.value, cst.Name) and b.value.value in self.translated and b.value.value not in seen:
                for k, v in self._assigned(self.translated[b.value.value], seen | {cls.name.value}).items():
                    out.setdefault(k, []).extend(v)
        for fn in _methods(cls):
            for _, assign in _self_assigns(fn):
                out.setdefault(assign.targets[0].target.attr.value, []).append((assign.value, fn))
        return out

    def _value_kind(self, value: cst.BaseExpression, fn: cst.FunctionDef, depth: int = 0) -> str:
        """"module" (a Keras layer, a Sequential or a translated class: a torch module), "lambda", or "other".
        A call of a method of the same class (``self._make_layer(...)``) is what that method returns."""
        if isinstance(value, cst.Lambda):
            return "lambda"
        if isinstance(value, cst.Call):
            p = dotted(value.func)
            if p and len(p) == 2 and p[0] == "self" and depth < 3:
                method = self._sibling_method(fn, p[1])
                returned = _returned_values(method) if method is not None else []
                if returned and all(self._value_kind(r, method, depth + 1) == "module" for r in returned):
                    return "module"
            if (isinstance(value.func, cst.Name) and value.func.value in self.translated
                    or id(value) in self.ctx.analyses.get(NODES, ())):
                return "module"
            if self._layer_rule(value, fn) is not None or self._resolve_in(value.func, fn) == SEQUENTIAL:
                return "module"
        return "other"

    def _given_model(self, plan: _Plan, value: cst.BaseExpression, fn: cst.FunctionDef) -> bool:
        """``self.base = base`` in __init__, where every ``ClassName(...)`` of the file gives ``base`` a model the
        file translates (a Sequential, a functional model, a builder's): a torch module."""
        if not (isinstance(value, cst.Name) and fn is plan.init_fn
                and value.value in {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)}):
            return False
        return all(info is not None for info in self._constructed_with(plan, fn, value.value))

    def _sibling_method(self, fn: cst.FunctionDef, name: str) -> cst.FunctionDef | None:
        """The method ``name`` of the translated class that defines ``fn`` (or of its translated bases)."""
        for cls in self.translated.values():
            methods = _methods(cls)
            if any(m is fn for m in methods):
                found = [m for m in methods if m.name.value == name]
                if found:
                    return found[-1]
                for b in cls.bases:
                    base = self.translated.get(b.value.value) if isinstance(b.value, cst.Name) else None
                    if base is not None:
                        found = [m for m in _methods(base) if m.name.value == name]
                        if found:
                            return found[-1]
                return None
        return None

    def _plan_training(self, plan: _Plan, methods: list[cst.FunctionDef]) -> None:
        """Which ``self.<attr>(x, training)`` calls lose their ``training`` argument. A torch module takes
        none (it reads self.training), but a lambda or function held in the attribute does: the argument
        is dropped only where every value the attribute may hold is a module, or a lambda that does not
        use that parameter (rewritten without it: ``lambda x, _: x`` → ``nn.Identity()``)."""
        calls: dict[str, list[tuple[cst.Call, int | str]]] = {}
        for fn in methods:
            scan(fn, _TrainingCalls(calls))
        if not calls:
            return
        assigned = self._assigned(plan.node)
        for attr, sites in calls.items():
            values = assigned.get(attr)
            kinds = ["module" if self._given_model(plan, v, fn) else self._value_kind(v, fn) for v, fn in values or ()]
            if not values or "module" not in kinds:
                plan.training[attr] = "keep"  # a plain callable (or one not known here): it takes the argument
                continue
            if "other" in kinds:
                bad = "holds a torch module in one place and a value that is not a Keras layer in another"
            else:
                rewrites = {}
                for (v, _), kind in zip(values, kinds):
                    if kind == "lambda":
                        new = self._lambda_without(v, {slot for _, slot in sites})
                        if new is None:
                            break
                        rewrites[id(v)] = new
                else:
                    plan.replace.update(rewrites)
                    plan.training[attr] = "drop"
                    continue
                bad = "holds a torch module in one place and a lambda that uses its training argument in another"
            plan.training[attr] = "keep"
            for call, _ in sites:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"self.{attr} {bad}: a torch module takes "
                                "no training argument (it reads self.training), the other value needs it; make "
                                "both take the same arguments (an nn.Module for each)", call)

    def _plan_fixed_modes(self, plan: _Plan, methods: list[cst.FunctionDef]) -> None:
        """The sub-modules called in a fixed mode (``self.base(x, training=False)`` on a frozen backbone,
        ``self.drop(h, training=True)``: Monte Carlo dropout), which the class keeps in that mode by a written
        ``train()`` (``super().train(mode); self.base.eval(); return self``): Keras runs them in that mode whatever
        the model's, torch's modules take theirs from .train() / .eval(), which reach every sub-module through the
        model's train(). Only where every use of ``self.<attr>`` in the class is a call with the same literal flag
        (or an attribute of it: ``self.base.trainable = False``), outside a train_step's own calls, and the class
        has no train() of its own; the others stay errors at their calls (leave_Call)."""
        if any(m.name.value == "train" for m in methods):
            return
        uses = _SelfUses()
        for m in methods:
            if m is plan.init_fn or m is plan.build_fn:
                continue  # (where the attribute is made)
            scan(m, uses)
        modes: dict[str, set] = {}
        for attr, calls in uses.calls.items():
            a = plan.attrs.get(attr)
            if attr == "call" or plan.training.get(attr, "drop") != "drop" or attr in uses.bare \
                    or a is not None and (a.kind not in ("layer", "nested") or a.functional is not None):
                continue
            positional = a is not None and a.rule is not None
            modes[attr] = {_fixed_training(c, positional) for c in calls}
        for attr, found in modes.items():
            if len(found) == 1 and None not in found:
                plan.fixed_modes[attr] = found.pop()

    def _modules_only(self, plan: _Plan, it: cst.BaseExpression) -> bool:
        """``for blk in self.blocks``: every element the list may hold is a torch module (its calls then
        take no training argument). The list's values: its assignments, and what is appended to it."""
        parts = dotted(it)
        if not parts or len(parts) != 2 or parts[0] != "self":
            return False
        attr = parts[1]
        values = self._assigned(plan.node).get(attr)
        if not values:
            return False
        elements: list = []
        given = (plan.name, attr) in self._given_lists

        class _Appends(cst.CSTVisitor):
            def visit_Call(self, n: cst.Call) -> None:
                if (dotted(n.func) == ["self", attr, "append"] and len(n.args) == 1) or (
                        dotted(n.func) == ["self", attr, "extend"] and len(n.args) == 1
                        and isinstance(n.args[0].value, (cst.List, cst.Tuple))):
                    elements.append((n.args[0].value, fn))

        for fn in _methods(plan.node):
            scan(fn, _Appends())
        for v, fn in values:
            if given and isinstance(v, cst.Name) and v.value in param_names(fn):
                continue  # self.layers = layers, given a list of layers by every construction (_given_list)
            if isinstance(v, cst.Name):  # self.blocks = blocks, a list built by appends in the method
                local = _local_list_elements(fn, v.value)
                if not local:
                    return False
                elements.extend((e, fn) for e in local)
            elif isinstance(v, cst.ListComp):
                elements.append((v.elt, fn))
            elif isinstance(v, (cst.List, cst.Tuple)):
                elements.extend((e.value, fn) for e in v.elements)
            elif not (isinstance(v, cst.Call) and (code(v.func) in ("nn.ModuleList", "torch.nn.ModuleList") or (
                    code(v.func) == "list" and not v.args))):
                return False
        flat = []
        for v, fn in elements:  # self.blocks.extend([...])
            flat.extend((e.value, fn) for e in v.elements) if isinstance(v, (cst.List, cst.Tuple)) else flat.append((v, fn))
        return (bool(flat) or given) and all(self._value_kind(v, fn) == "module" for v, fn in flat)

    def _check_alternatives(self, plan: _Plan) -> None:
        """An attribute that holds a channels-first module in one branch and another callable in another:
        the permutes written around its calls would reach the other value too, exact only for an identity."""
        bound = [a for a in plan.attrs.values() if a.kind != "seqlist" and (a.bound or (a.seq is not None and any(a.seq)))]
        if not bound:
            return
        assigned = self._assigned(plan.node)
        for a in bound:
            for v, fn in assigned.get(a.name, ()):
                if self._value_kind(v, fn) == "module" or v is a.call or id(v) in self._given_values:
                    continue
                new = plan.replace.get(id(v))
                if isinstance(new, cst.Call) and code(new.func).endswith("Identity"):
                    continue
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"self.{a.name} holds a channels-first "
                                f"torch module elsewhere, and {code(v)} here: the body keeps channels-last tensors "
                                "and permutes them around the module's calls, which would reach this value too; "
                                "make it an nn.Module of its own (nn.Identity() for an identity)", v)

    def _lambda_without(self, lam: cst.Lambda, slots: set) -> cst.BaseExpression | None:
        """The lambda without the parameters at ``slots`` (positions, or "training"), which its body must
        not use; ``nn.Identity()`` when what is left returns its one parameter. None: it uses them."""
        params = list(lam.params.params)
        if lam.params.star_arg is not cst.MaybeSentinel.DEFAULT or lam.params.star_kwarg is not None:
            return None
        drop = {i for i, p in enumerate(params) if i in slots or p.name.value in slots}
        if any(isinstance(x, int) and x >= len(params) for x in slots) or ("training" in slots and not any(
                p.name.value == "training" for p in params)):
            return None
        used = _names_used(lam.body)
        if any(params[i].name.value in used for i in drop):
            return None
        kept = [p for i, p in enumerate(params) if i not in drop]
        if len(kept) == 1 and isinstance(lam.body, cst.Name) and lam.body.value == kept[0].name.value:
            return cst.Call(self.ctx.spell("torch.nn.Identity"))
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return lam.with_changes(params=lam.params.with_changes(params=kept))

    def _plan_layer_builds(self, plan: _Plan, fn: cst.FunctionDef) -> None:
        """``self.embed.build([1])`` in ``__init__`` on a Keras layer of the class: Keras creates its
        variables there; the torch module has them from its creation (its sizes are written out), so the
        line becomes a comment. On a module torch creates lazily it is an error saying what to do."""
        for blk in _blocks(fn):
            for stmt in blk.body:
                if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                        and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call)):
                    continue
                parts = dotted(stmt.body[0].value.func)
                if not (parts and len(parts) == 3 and parts[0] == "self" and parts[2] == "build"):
                    continue
                a = plan.attrs.get(parts[1])
                if a is None or a.kind != "layer" or a.emission is None or a.emission.failed or a.out is None:
                    continue
                shape = stmt.body[0].value.args[0].value if len(stmt.body[0].value.args) == 1 else None
                last = (shape.elements[-1].value if isinstance(shape, (cst.List, cst.Tuple)) and shape.elements
                        and not isinstance(shape.elements[-1], cst.StarredElement) else None)
                lazy_linear = self.ctx.spell_text("torch.nn.LazyLinear")
                if (a.rule.emit.get("shape") == "dense" and isinstance(a.out, cst.Call) and code(a.out.func) == lazy_linear
                        and last is not None and literal_value(last, NOT_LITERAL) is not None):
                    # Dense.build(shape) sizes the kernel by shape[-1]: nn.Linear(shape[-1], units)
                    a.out = a.out.with_changes(func=expr(self.ctx.spell_text("torch.nn.Linear")),
                                               args=[cst.Arg(last), *a.out.args])
                    plan.replace[id(a.call)] = a.out
                    plan.comment_out[id(stmt)] = "the input size is given to nn.Linear"
                    continue
                if "Lazy" in code(a.out):
                    self.ctx.report(Severity.ERROR, "shape-unknown", f"self.{a.name}.build(...): torch creates this "
                                    "module's parameters at its first call; give the layer its input size "
                                    "(input_shape=) or call it once on a tensor of that shape", stmt)
                    continue
                plan.comment_out[id(stmt)] = "the torch module has its parameters from its creation"

    def _resolve_in(self, node: cst.BaseExpression, fn: cst.FunctionDef) -> str | None:
        parts = dotted(node)
        if not parts or parts[0] in bound_names(fn) or self.shadowed(parts[0]):
            return None
        return self.ctx.imports.resolve_parts(parts)

    def _plan_init(self, plan: _Plan, fn: cst.FunctionDef) -> None:
        for stmt, assign in _self_assigns(fn):
            attr = assign.targets[0].target.attr.value  # type: ignore[union-attr]
            value = assign.value
            if _empty_list(value) and attr not in plan.attrs:
                ranks = self._seq_list(plan, attr)
                if ranks is not None:
                    plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleList"), [])
                    plan.attrs[attr] = _Attr(attr, kind="seqlist", done=True, seq=ranks)
                    continue
            if _empty_list(value) and self._appended_variables(plan, attr):
                self._parameter_list(plan, attr, value)
                continue
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "list" and not (
                    value.args) and self._modules_only(plan, cst.Attribute(cst.Name("self"), cst.Name(attr))):
                # self.blocks = list(), then appends of layers: as `= []`, torch registers them only in an nn.ModuleList
                plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleList"), [])
            elif self._layer_dict(value, fn):
                # self.heads = {"out": layers.Dense(2)} (or dict(out=...)): Keras tracks the layers of a dict; torch
                # registers a module's parameters (model.parameters(), state_dict, .to) only in an nn.ModuleDict
                plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleDict"), [cst.Arg(value)])
            elif isinstance(value, cst.Dict) and any(isinstance(e, cst.DictElement) and isinstance(e.value, cst.Call)
                                                     and self._layer_rule(e.value, fn) is not None
                                                     for e in value.elements):
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"self.{attr} holds Keras layers in a dict "
                                "with other values or keys that are no names: Keras tracks their weights, torch "
                                "registers a module's parameters (model.parameters(), state_dict) only in an "
                                "nn.ModuleDict of name keys; hold the layers in a dict of their own", value)
            elif isinstance(value, cst.Call):
                if isinstance(value.func, cst.Name) and value.func.value in self.translated:
                    plan.nested[attr] = value.func.value
                    continue
                if isinstance(value.func, cst.Attribute) and value.func.attr.value in _ADD_WEIGHT_METHODS:
                    continue
                rule = self._layer_rule(value, fn)
                if rule is not None:
                    plan.attrs[attr] = _Attr(attr, value, rule, "layer")
                    self._stmt_of[id(value)] = stmt
                elif self._seq_model(plan, attr) is not None:
                    plan.attrs[attr] = _Attr(attr, kind="sequential", done=True, seq=self._seq_model(plan, attr))
                elif isinstance(value.func, cst.Name) and "." not in value.func.value:
                    # self.features = build_features(): a builder of the file whose Sequential is channels-first
                    self._given_sequential(plan, attr, [self.ctx.models.get(value.func.value)], value)
            elif isinstance(value, cst.Name) and value.value in param_names(fn) and fn.name.value == "__init__" \
                    and attr not in plan.attrs:
                # self.backbone = backbone: what the file's constructions of the class give the parameter
                self._given_sequential(plan, attr, self._constructed_with(plan, fn, value.value), value)
                if attr not in plan.attrs:
                    self._given_list(plan, attr, value, fn)
            elif isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
                self._plan_list(plan, attr, value, fn)
            elif isinstance(value, cst.Name):
                # blocks = []; for ...: blocks.append(Block(...)); self.blocks = blocks: a list of modules
                # registers nothing in torch; nn.ModuleList(blocks) registers every one
                elts = _local_list_elements(fn, value.value)
                if elts and all(self._value_kind(e, fn) == "module" for e in elts):
                    plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleList"), [cst.Arg(value)])

    def _given_list(self, plan: _Plan, attr: str, value: cst.Name, init: cst.FunctionDef) -> None:
        """``self.layers = layers`` in __init__, the parameter a list of layers (``MLP([Dense(4), Dense(2)])``):
        Keras and tf.Module track the variables of the layers in a list attribute, torch registers a module's
        parameters (model.parameters(), state_dict, .to) only in an nn.ModuleList, so the value is wrapped:
        ``nn.ModuleList(layers)``. Wrapped where the file's constructions of the class give the parameter a list of
        modules (and nothing else), or, where they give none, where the class calls the list's items
        (``for layer in self.layers: x = layer(x)``, ``self.layers[i](x)``). A dict of layers with name keys
        (``Heads({"a": Dense(2)})``; given none: ``self.heads["a"](x)``) likewise → ``nn.ModuleDict(heads)``. A
        construction giving it both modules and other values is an error (a ModuleList holds modules only, a list
        registers none)."""
        kinds: set[str] = set()
        shapes: set[str] = set()  # "list", "dict" (with name keys), "other" (a value not written out)
        for call, fns in _constructions(self.module, plan.name):
            args = bind_def(call, init, skip=1) if call is not None else None
            v = args.get(value.value) if args is not None else None
            if isinstance(v, cst.Name) and not fns:
                v = self.module_values.get(v.value, v)
            if v is not None:
                shapes.add("list" if isinstance(v, (cst.List, cst.Tuple, cst.ListComp)) else "dict" if isinstance(
                    v, cst.Dict) and all(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                                         and e.key.evaluated_value.isidentifier() for e in v.elements) else "other")
            if isinstance(v, cst.Dict):
                kinds.update(self._item_kind(e.value) if isinstance(e, cst.DictElement) else "unknown"
                             for e in v.elements)
            elif isinstance(v, (cst.List, cst.Tuple)):
                kinds.update(self._item_kind(e.value) if not isinstance(e, cst.StarredElement) else "unknown"
                             for e in v.elements)
            elif isinstance(v, cst.ListComp):
                kinds.add(self._item_kind(v.elt))
        if "module" in kinds and "other" in kinds:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"self.{attr} is given a list of Keras layers "
                            "and other values: Keras tracks the layers' weights, torch registers a module's parameters "
                            "(model.parameters(), state_dict) only in an nn.ModuleList, which holds modules alone; "
                            "give the layers in a list of their own", value)
            return
        if "other" in kinds or len(shapes - {"other"}) > 1:
            return
        if shapes == {"dict"} and "module" in kinds or not shapes and _subscript_called(plan.node, attr, keyed=True):
            # Heads({"a": layers.Dense(2)}): a dict of layers, in an nn.ModuleDict as a dict written out is
            plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleDict"), [cst.Arg(value)])
            self.ctx.report(Severity.INFO, "idiom-replaced", f"self.{attr} = {value.value} → nn.ModuleDict("
                            f"{value.value}): Keras tracks the weights of layers held in a dict, torch registers a "
                            "module's parameters (model.parameters(), state_dict, .to) only in an nn.ModuleDict (which "
                            "accepts nn.Module values alone)" + ("" if shapes else "; its values are called here "
                            "(self." + attr + "[\"...\"](...)), so they are taken to be layers"), value)
            return
        if "dict" in shapes:
            return
        if "module" not in kinds:
            uses = _ListUses(attr)
            for m in _methods(plan.node):
                uses.fn = m
                scan(m, uses)
            if not uses.loop_vars and not _subscript_called(plan.node, attr):
                return
        plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleList"), [cst.Arg(value)])
        if "module" in kinds:
            self._given_lists.add((plan.name, attr))
        self.ctx.report(Severity.INFO, "idiom-replaced", f"self.{attr} = {value.value} → nn.ModuleList({value.value}): "
                        "Keras tracks the weights of layers held in a list, torch registers a module's parameters "
                        "(model.parameters(), state_dict, .to) only in an nn.ModuleList (which accepts nn.Module "
                        "items alone)" + ("" if "module" in kinds else "; the list's items are called here, so they "
                        "are taken to be layers"), value)

    def _trainable_variable(self, e: cst.BaseExpression) -> bool:
        """``tf.Variable(...)`` with no ``trainable=`` (a frozen one is no nn.Parameter an nn.ParameterList may
        hold: it would make it trainable)."""
        return isinstance(e, cst.Call) and self.qualname(e.func) == "tensorflow.Variable" and not any(
            a.keyword is not None and a.keyword.value == "trainable" or a.star for a in e.args)

    def _appended_variables(self, plan: _Plan, attr: str) -> bool:
        """``self.<attr> = []`` once, and every ``self.<attr>.append(v)`` / ``.extend([...])`` of the class gives it
        trainable ``tf.Variable(...)`` (at least one)."""
        if len(self._assigned(plan.node).get(attr, ())) != 1:
            return False
        items: list = []
        for c in find_all(plan.node, cst.Call):
            f = c.func
            if isinstance(f, cst.Attribute) and dotted(f.value) == ["self", attr]:
                arg = c.args[0].value if len(c.args) == 1 and c.args[0].keyword is None and not c.args[0].star else None
                if f.attr.value == "append" and arg is not None:
                    items.append(arg)
                elif f.attr.value == "extend" and isinstance(arg, (cst.List, cst.Tuple)):
                    items.extend(e.value for e in arg.elements)
                else:
                    items.append(None)  # (insert, or another method: not followed)
        return bool(items) and all(i is not None and self._trainable_variable(i) for i in items)

    def _parameter_list(self, plan: _Plan, attr: str, value: cst.BaseExpression) -> None:
        args = [] if _empty_list(value) else [cst.Arg(value)]
        plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ParameterList"), args)
        self.ctx.report(Severity.INFO, "idiom-replaced", f"self.{attr}: a list of tf.Variables → nn.ParameterList: "
                        "tf.Module and Keras track the variables of a list, torch registers the nn.Parameters of a "
                        "list (model.parameters(), state_dict, .to) only in an nn.ParameterList", value)

    def _item_kind(self, e: cst.BaseExpression) -> str:
        """An item of a list written at a construction: "module" (a Keras layer, a Sequential, a block of a
        translated class), "other" (a number, a string, a lambda, a function of the source framework), or
        "unknown"."""
        if isinstance(e, cst.Call):
            if isinstance(e.func, cst.Name) and e.func.value in self.translated:
                return "module"
            parts = dotted(e.func)
            q = self.ctx.imports.resolve_parts(parts) if parts and not self.shadowed(parts[0]) else None
            rule = self.ctx.pack.by_name.get(q) if q else None
            if rule is not None and rule.kind == "layer" or q == SEQUENTIAL:
                return "module"
            return "unknown"
        if isinstance(e, (cst.Lambda, cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            return "other"
        parts = dotted(e)
        if parts and len(parts) > 1 and not self.shadowed(parts[0]):
            q = self.ctx.imports.resolve_parts(parts)
            if q and q.split(".")[0] in ("tensorflow", "keras", "tf_keras"):
                return "other"  # tf.nn.relu: a function
        return "unknown"

    def _layer_dict(self, value: cst.BaseExpression, fn: cst.FunctionDef) -> bool:
        """``{"out": layers.Dense(2), ...}`` / ``dict(out=layers.Dense(2), ...)``: a dict written out whose keys are
        names and whose values are all Keras layers (or blocks of this file's translated classes)."""
        if isinstance(value, cst.Dict):
            items = [(e.key.evaluated_value if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                      else None, e.value) for e in value.elements]
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict" \
                and "dict" not in bound_names(fn) and not self.shadowed("dict"):
            items = [(a.keyword.value if a.keyword is not None and not a.star else None, a.value) for a in value.args]
        else:
            return False
        return bool(items) and all(
            isinstance(k, str) and k.isidentifier() and isinstance(v, cst.Call) and (
                self._layer_rule(v, fn) is not None
                or isinstance(v.func, cst.Name) and v.func.value in self.translated) for k, v in items)

    def _unfollowed_sequentials(self, plan: _Plan) -> None:
        """The channels-first Sequentials bound to local names in this class's methods (LOCAL_NCHW) whose
        calls _seq_list did not find: a channels-last body would feed them NHWC tensors."""
        local = self.ctx.analyses.get(LOCAL_NCHW)
        if not local:
            return
        handled = self.ctx.analyses.get(_SEQ_HANDLED, set())
        for fn in _methods(plan.node):
            for call in find_all(fn, cst.Call):
                if id(call) in local and id(call) not in handled:
                    self.ctx.report(Severity.ERROR, "unsupported-construct", "this Sequential model is translated "
                                    "channels-first (NCHW) but is not held as self.<attribute> (it is bound to a local "
                                    "name), and fwport found no calls of it to permute their channels-last inputs (it "
                                    "follows a list attribute it is appended to, called as self.blocks[i](x) or in "
                                    "`for blk in self.blocks: x = blk(x)`): assign it to an attribute "
                                    "(self.block = keras.Sequential([...])), or permute around its calls by hand "
                                    "(x.permute(0, 3, 1, 2) in, .permute(0, 2, 3, 1) out)", call)

    def _seq_list(self, plan: _Plan, attr: str) -> tuple | None:
        """``self.blocks = []`` grown with ``block = keras.Sequential([...]); self.blocks.append(block)``
        where every block is channels-first (LOCAL_NCHW) with the same known ranks, and ``self.blocks`` is
        used only so: called through a subscript (``self.blocks[i](x)``) or a loop (``for blk in
        self.blocks: x = blk(x)``): (in rank, out rank) for the permutes at those calls, else None.
        The blocks' nodes are marked handled (plan_class reports the others)."""
        local = self.ctx.analyses.get(LOCAL_NCHW)
        if not local:
            return None
        values = self._assigned(plan.node).get(attr) or []
        if not values or not all(_empty_list(v) for v, _ in values):
            return None
        uses = _ListUses(attr)
        for fn in _methods(plan.node):
            uses.fn = fn
            scan(fn, uses)
        if uses.total != len(uses.ok) or not uses.appended:
            return None
        ranks = set()
        handled = []
        for name, fn in uses.appended:
            bound = _LocalBinds(name)
            scan(fn, bound)
            if len(bound.values) != 1 or bound.binds != 1 or bound.reads != 1 or id(bound.values[0]) not in local:
                return None  # bound once to a channels-first Sequential, read only by the append
            _, into, back, scope = local[id(bound.values[0])]
            ranks.add((into, back))
            handled.append((id(bound.values[0]), scope))
        if len(ranks) != 1 or None in next(iter(ranks)):
            return None
        for var in uses.loop_vars:  # the loop's name is bound by those loops alone: its calls are the blocks'
            bound = 0
            for fn in _methods(plan.node):
                b = _LocalBinds(var)
                scan(fn, b)
                bound += b.binds
            if bound != uses.loop_vars[var]:
                return None
        self.ctx.analyses.setdefault(_SEQ_HANDLED, set()).update(i for i, _ in handled)
        # their weight records: items of the list (self.blocks[*] → blocks.*, expanded over the built list)
        scopes = {scope for _, scope in handled}
        for rec in self.ctx.layers:
            if rec.scope in scopes:
                rec.scope, rec.source, rec.target = plan.name, f"{attr}[*].{rec.source}", f"{attr}.*.{rec.target}"
        a_ranks = next(iter(ranks))
        plan.loop_seq.update({v: attr for v in uses.loop_vars})
        return a_ranks

    def _given_sequential(self, plan: _Plan, attr: str, infos: list, value: cst.BaseExpression) -> None:
        """``self.<attr>`` holds one of the models ``infos`` (ctx.models' infos; None: not known): where one is a
        Sequential the passes made channels-first, its calls in this channels-last body are permuted as an
        inline Sequential's (_seq_model's ranks) where every one is known and alike; else an error."""
        nchw = [i for i in infos if i is not None and "nchw" in (i.layout, i.output_layout)]
        if not nchw:
            return
        ranks = {self.ctx.analyses.get(RANKS, {}).get(i.scope, (None, None)) if i.kind == "sequential" else None
                 for i in infos if i is not None}
        layouts = {(i.layout, i.output_layout) for i in infos if i is not None}
        if None in infos or None in ranks or len(ranks) != 1 or len(layouts) != 1:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"self.{attr} is given a Sequential model fwport "
                            "made channels-first (NCHW) and, elsewhere, a model of another layout or a value not "
                            "known here; this class's body keeps Keras's channels-last layout, so its calls cannot be "
                            "permuted for one and kept for the other: give it models the file builds alike, or permute "
                            "by hand (x.movedim(-1, 1); the output back with y.movedim(1, -1))", value)
            return
        (layout, out_layout), (in_rank, out_rank) = layouts.pop(), ranks.pop()
        self._given_values.add(id(value))
        plan.attrs[attr] = _Attr(attr, kind="sequential", done=True, seq=(
            in_rank if layout == "nchw" else 0, out_rank if out_layout == "nchw" else 0))

    def _constructed_with(self, plan: _Plan, init: cst.FunctionDef, param: str) -> list:
        """The models (ctx.models' infos, None where not known) the file's calls ``ClassName(...)`` give the
        parameter ``param`` of its ``__init__``: a name bound to a Sequential or a builder's call, or a builder's
        call; [None] where the class is made nowhere (or not only by calls)."""
        out: list = []
        models = self.ctx.models
        for call, fns in _constructions(self.module, plan.name):
            args = bind_def(call, init, skip=1) if call is not None else None
            v = args.get(param) if args is not None else None
            info = None
            if isinstance(v, cst.Call) and isinstance(v.func, cst.Name):
                info = models.get(v.func.value)
            elif isinstance(v, cst.Name):
                key = next((k for k in ([f"{fns[-1]}.{v.value}"] if fns else []) + [v.value] if k in models), None)
                if key is not None:
                    info = models[key]
                else:  # a module-level name bound once to a builder's call
                    bound = self.module_values.get(v.value) if not fns else None
                    if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name):
                        info = models.get(bound.func.value)
            out.append(info)
        return out or [None]

    def _seq_model(self, plan: _Plan, attr: str) -> tuple | None:
        """Permutes around an nn.Sequential that the Sequential pass made channels-first: (rank of the
        input to permute, rank of the output to permute back), 0 for none, None where the rank is unknown
        (its call sites are refused: a channels-last body cannot feed it)."""
        info = self.ctx.models.get(f"{plan.name}.{attr}")
        if info is None or "nchw" not in (info.layout, info.output_layout):
            return None
        in_rank, out_rank = self.ctx.analyses.get(RANKS, {}).get(info.scope, (None, None))
        return (in_rank if info.layout == "nchw" else 0), (out_rank if info.output_layout == "nchw" else 0)

    def _layer_rule(self, call: cst.Call, fn: cst.FunctionDef):
        q = self._resolve_in(call.func, fn)
        rule = self.ctx.pack.by_name.get(q) if q else None
        return rule if rule is not None and rule.kind == "layer" else None

    def _plan_list(self, plan: _Plan, attr: str, value, fn: cst.FunctionDef) -> None:
        ctx = self.ctx
        if isinstance(value, cst.ListComp):
            elts = [value.elt]
            n = _range_count(value)
        else:
            elts = [e.value for e in value.elements]
            n = None
        calls = [e for e in elts if isinstance(e, cst.Call) and self._layer_rule(e, fn) is not None]
        if elts and all(self._trainable_variable(e) for e in elts):
            # [tf.Variable(...) for ...]: tracked by tf.Module / Keras; torch registers the nn.Parameters of a list
            # only in an nn.ParameterList
            self._parameter_list(plan, attr, value)
            return
        if not calls:
            # blocks of this file's translated classes (listed, or appended to an empty list): torch
            # registers their parameters only inside an nn.ModuleList
            starred = any(isinstance(e, cst.StarredElement) for e in getattr(value, "elements", []))
            if starred:
                return
            if isinstance(value, cst.ListComp):
                # [Block(units) for _ in range(depth)]: blocks of this file's classes (or of a method
                # returning modules) in a comprehension
                if self._value_kind(value.elt, fn) == "module":
                    plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleList"), [cst.Arg(value)])
                return
            blocks = [e for e in elts if isinstance(e, cst.Call) and isinstance(e.func, cst.Name)
                      and e.func.value in self.translated]
            if elts and len(blocks) == len(elts):
                new_value = cst.List(list(value.elements), lbracket=cst.LeftSquareBracket(whitespace_after=_ws(
                    value, "after")), rbracket=cst.RightSquareBracket(whitespace_before=_ws(value, "before")))
                plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleList"), [cst.Arg(new_value)])
            elif not elts and self._modules_only(plan, cst.Attribute(cst.Name("self"), cst.Name(attr))):
                plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleList"), [])
            return
        if len(calls) != len(elts) or any(isinstance(e, cst.StarredElement) for e in getattr(value, "elements", [])):
            ctx.report(Severity.ERROR, "unsupported-construct", f"self.{attr} mixes Keras layers with other "
                       "values: torch needs an nn.ModuleList of modules; build the list by hand", value)
            for c in calls:
                ctx.settle(c)
            return
        new_elts = []
        for i, c in enumerate(elts):
            rule = self._layer_rule(c, fn)
            a = _Attr(f"{attr}[{i}]", c, rule, "list")
            if isinstance(value, cst.ListComp) and n is None:
                # a comprehension over a run-time value ([LSTMCell(n) for n in sizes]): one record for every
                # item, which fwport verify expands over the list the built model holds
                em = self._emit(plan, a, None, source=f"{attr}[*]", target=f"{attr}.*")
            else:
                indices = list(range(n)) if isinstance(value, cst.ListComp) else [i]
                em = self._emit(plan, a, None, source=f"{attr}[{indices[0]}]", target=f"{attr}.{indices[0]}",
                                extra_indices=[(f"{attr}[{k}]", f"{attr}.{k}") for k in indices[1:]])
            if em is None:
                return
            if em.functional is not None or em.layout_bound:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{rule.names[0].rsplit('.', 1)[-1]} in a list: "
                           "its call sites cannot be followed to " + ("write the operation out" if em.functional
                           is not None else "permute its channels-last input") + "; hold it in an attribute of "
                           "its own", c, rule)
                return
            new_elts.append(a.out)
        if isinstance(value, cst.ListComp):
            new_value = value.with_changes(elt=new_elts[0])
        else:  # a tuple of layers becomes a list too: ModuleList takes any iterable, a list reads best
            new_value = cst.List([e.with_changes(value=v) for e, v in zip(value.elements, new_elts)],
                                 lbracket=cst.LeftSquareBracket(whitespace_after=_ws(value, "after")),
                                 rbracket=cst.RightSquareBracket(whitespace_before=_ws(value, "before")))
        plan.replace[id(value)] = cst.Call(self.ctx.spell("torch.nn.ModuleList"), [cst.Arg(new_value)])

    def _assumed_call(self, plan: _Plan, a: _Attr) -> cst.Call:
        """The layer call with ``data_format=`` and what is computed from it (``axis``) written as the
        value the class is built with in this file (data_format.py); the call itself otherwise."""
        values = self.formats.get(plan.name) if plan.init_fn is not None else None
        if not values or a.call is None:
            return a.call
        return data_format.Assumed(plan.init_fn, values).substitute(a.call)

    def _emit(self, plan: _Plan, a: _Attr, in_shape, source: str, target: str,
              extra_indices: list[tuple[str, str]] = ()) -> LayerEmission | None:
        """Translate one layer call; the module expression goes to ``a.out``."""
        ctx = self.ctx
        n_records = len(ctx.layers)
        sizes = Sizes.at(*self.module_sizes, [plan.init_fn] if plan.init_fn is not None else [])
        stmt = self._stmt_of.get(id(a.call))
        guarded = plan.init_fn is None or not any(s is stmt for s in plan.init_fn.body.body)
        call = self._assumed_call(plan, a)
        if call is not a.call:
            data_format.record_guard(ctx, plan.name, self.formats[plan.name], plan.init_fn)
        record_penalty = None
        if a.kind == "layer" and source == a.name:  # a layer in an attribute of its own (not a list element)
            call, record_penalty = regularizers.strip(
                call, a.rule, lambda f: self._resolve_in(f, plan.init_fn), plan.init_fn, plan.name, a.name,
                guarded, ctx)
        em = translate_layer(call, a.rule, ctx, SizedContext(in_shape, "keep", plan.name, source, sizes=sizes),
                             a.call)
        a.emission, a.in_shape, a.done = em, in_shape, True
        if em.failed:
            ctx.settle(a.call)
            return None
        if em.functional is not None:
            a.functional = em.functional
            a.out = None
            if record_penalty is not None:
                record_penalty.refuse()
            return em
        if len(em.modules) == 1:
            a.out = em.modules[0]
            weight_target = target
        else:
            a.out = cst.Call(ctx.spell("torch.nn.Sequential"),
                                       [cst.Arg(m) for m in em.modules])
            weight_target = f"{target}.{em.weight_module}"
        a.bound = em.layout_bound
        a.keeps_rank = em.out_shape is None or len(em.out_shape) + 1 == em.layout_bound
        if record_penalty is not None:
            record_penalty(weight_target, emitted=em.modules[em.weight_module])
        if len(ctx.layers) > n_records:  # translate_layer records the index; here the attribute path counts
            rec = ctx.layers[-1]
            rec.target = weight_target
            for src, tgt in extra_indices:
                suffix = weight_target[len(target):]
                ctx.layers.append(LayerRecord(rec.scope, src, tgt + suffix, rec.rule, rec.variant, dict(rec.symbols)))
        return em

    def _translate_attr(self, plan: _Plan, a: _Attr, in_shape) -> tuple | _Tail | None:
        if a.kind != "layer":
            return None
        if a.done:
            if a.emission is None or a.in_shape != in_shape:
                return None
            return a.emission.out_shape if not isinstance(a.in_shape, _Tail) else self._tail_out(a, in_shape, plan)
        in_shape = self._traced_in(a, in_shape)
        tail = in_shape if isinstance(in_shape, _Tail) else None
        if tail is None and in_shape is None and a.rule.emit.get("shape") in ("dense", "embedding"):
            tail = _Tail(None)  # nothing known, but its output has `units` (the embedding dim) last
        elif tail is None and in_shape is None and a.rule.emit.get("shape") == "batch-norm" \
                and _axis_is_last(self._assumed_call(plan, a)):
            tail = _Tail(None)  # a BatchNorm over the last axis of any rank: BatchNorm1d on the rows
        if tail is not None:
            in_shape = self._tail_in(plan, a, tail)
            if in_shape is None and a.rule.id not in _SHAPE_KEEPING and a.rule.emit.get("shape") not in (
                    "dense", "batch-norm", "layer-norm", "embedding"):
                tail = None  # a layer that needs more than the last size: its input is simply unknown
        em = self._emit(plan, a, in_shape, a.name, a.name)
        if tail is not None:
            a.in_shape = tail
        if em is None:
            return None
        if em.functional is not None:
            stmt = self._stmt_of.get(id(a.call))
            if stmt is not None and self._only_called(plan, a.name):
                plan.comment_out[id(stmt)] = "no torch module: written out where it is called"
            else:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"self.{a.name} has no torch module and is "
                                "used other than by calling it: write the operation out by hand", a.call, a.rule)
                a.functional = None
                self.ctx.settle(a.call)
            return em.out_shape
        plan.replace[id(a.call)] = a.out
        if isinstance(a.in_shape, _Tail):
            return self._tail_out(a, a.in_shape, plan)
        return em.out_shape

    def _traced_in(self, a: _Attr, in_shape):
        """An input whose rank the pass does not know: the one ``--trace`` saw where the layer was created
        (``Direction.observed_shape``: its rank and last size), the pass's own last size kept where it knows
        one (a name, such as the units of the Dense before it)."""
        observed = self.ctx.analyses.get("observed_shapes")
        if not observed or (in_shape is not None and not isinstance(in_shape, _Tail)):
            return in_shape
        seen = observed.get(id(a.call))
        shape = self.ctx.direction.observed_shape(SizedContext(None, "keep"), seen, a.call, a.rule) \
            if seen is not None else None
        if not shape:
            return in_shape
        last = in_shape.last if isinstance(in_shape, _Tail) else None
        if last is not None:
            if isinstance(last, int) and isinstance(shape[-1], int) and last != shape[-1]:
                return in_shape  # the run disagrees with what the pass knows: the pass's view stays
            shape = (*shape[:-1], last)
        return tuple(shape)

    def _tail_in(self, plan: _Plan, a: _Attr, tail: _Tail | None) -> tuple | None:
        """What a layer is translated for when its input's rank is unknown (``tail``: its last size, or
        None for nothing known). A layer acting on the last axis alone needs only that size: a Dense
        (``nn.Linear(C, units)``), a LayerNormalization over axis -1 (``nn.LayerNorm(C)``), a
        BatchNormalization over axis -1 (``nn.BatchNorm1d(C)`` on the rows, see ``_flat_call``)."""
        shape_fn = a.rule.emit.get("shape")
        last = tail.last if tail is not None else None
        if shape_fn == "dense":
            return (last,)
        if shape_fn == "embedding":
            return None  # it adds an axis to any input: only its last size is known after it
        if shape_fn in ("rnn", "bidirectional") and tail is not None and known(last):
            return (None, last)  # an RNN takes (batch, steps, features) only
        if shape_fn in ("batch-norm", "layer-norm") and tail is not None and _axis_is_last(self._assumed_call(plan, a)):
            if shape_fn == "batch-norm":
                a.flat = True
                self.ctx.report(Severity.INFO, "shape-unknown", f"self.{a.name} normalises the last axis of an "
                                "input whose rank is unknown here: BatchNorm1d is applied to its rows "
                                "(x.reshape(-1, x.shape[-1])), which is Keras's computation at any rank",
                                a.call, a.rule)
            return (last,)
        return None

    def _tail_out(self, a: _Attr, tail: _Tail, plan: _Plan | None = None):
        """The output of a layer translated for an input of unknown rank."""
        em = a.emission
        shape_fn = a.rule.emit.get("shape")
        if em is None:
            return None
        if shape_fn == "dense":
            return _Tail(em.out_shape[-1]) if em.out_shape else _Tail(None)
        if shape_fn == "embedding":  # output_dim: a literal, or a size written with names (__init__'s parameter)
            init = [plan.init_fn] if plan is not None and plan.init_fn is not None else []
            dim = Sizes.at(*self.module_sizes, init).dim(call_argument(a.call, "output_dim", 1))
            return _Tail(dim if known(dim) else None)
        if shape_fn in ("rnn", "bidirectional"):
            return em.out_shape  # its rank is known whatever came in
        if shape_fn in ("batch-norm", "layer-norm") or a.rule.id in _SHAPE_KEEPING:
            return tail
        return None

    def _only_called(self, plan: _Plan, attr: str) -> bool:
        """``self.<attr>`` appears only as ``self.<attr>(...)`` outside its assignment."""
        uses = calls = 0

        class _Uses(cst.CSTVisitor):
            def visit_Attribute(self, n: cst.Attribute) -> None:
                nonlocal uses
                if n.attr.value == attr and isinstance(n.value, cst.Name) and n.value.value == "self":
                    uses += 1

            def visit_Call(self, n: cst.Call) -> None:
                nonlocal calls
                if dotted(n.func) == ["self", attr]:
                    calls += 1

        scan(plan.node, _Uses())
        return uses == calls + 1

    # --- call → forward ------------------------------------------------------------------------------------
    def _plan_call(self, plan: _Plan, fn: cst.FunctionDef) -> None:
        ctx = self.ctx
        names = [p.name.value for p in [*fn.params.params, *fn.params.kwonly_params]]
        body_names = _names_used(fn.body)
        assigned = bound_names(fn) - set(names)
        if "training" in names:
            if "training" in assigned:
                ctx.report(Severity.ERROR, "unsupported-construct", "call() reassigns training: torch modules take "
                           "the mode from .train()/.eval() (self.training); rewrite the branch by hand", fn)
            else:
                plan.drop_params.add("training")
        if "mask" in names:
            if "mask" in body_names and not keras_masks(ctx):
                # no tensor of this file carries a Keras mask: call()'s mask is what its callers pass
                ctx.report(Severity.WARNING, "mask-kept", "call()'s mask is kept as a parameter of forward: nothing in "
                           "this file attaches a Keras mask to a tensor, so it is what the callers pass; a caller in "
                           "another file whose input carries one (Embedding(mask_zero=True), Masking) and that passes "
                           "no mask must pass it explicitly", _first_use(fn.body, "mask") or fn)
            elif "mask" in body_names and mask_passed(ctx, plan.node):
                ctx.report(Severity.INFO, "idiom-replaced", "call()'s mask is kept as a parameter of forward: every "
                           "call of this layer is in a functional model of this file, which passes it the mask Keras "
                           "gives it (None where its input carries none)", _first_use(fn.body, "mask") or fn)
            elif "mask" in body_names:
                ctx.report(Severity.ERROR, "unsupported-construct", "call() uses a Keras mask: torch has no mask "
                           "propagation; pass the mask to forward explicitly and apply it where needed",
                           _first_use(fn.body, "mask") or fn)
            else:
                plan.drop_params.add("mask")
        # follow shapes through straight-line `x = self.layer(x)` code
        self._walk(plan, fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [], {})

    def _walk(self, plan: _Plan, stmts, env: dict) -> None:
        for s in stmts:
            if isinstance(s, cst.SimpleStatementLine):
                for small in s.body:
                    if (isinstance(small, cst.Assign) and len(small.targets) == 1
                            and isinstance(small.targets[0].target, cst.Name)):
                        env[small.targets[0].target.value] = self._shape_of(plan, small.value, env)
                        continue
                    for c in _self_calls(small):
                        self._shape_of(plan, c, env)
                    for name in _assigned_names(small):
                        env.pop(name, None)
                continue
            if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(s, cst.For) and self._modules_only(plan, s.iter):
                plan.loop_vars.update(n.value for n in _name_nodes(s.target))
            for c in _self_calls(s):  # the header: if/while tests, for iterables, with items
                self._shape_of(plan, c, env)
            before = dict(env)
            for blk in _blocks(s):
                self._walk(plan, blk.body, env)
            for name in _assigned_names(s):  # a branch or loop may or may not have run: same shape or unknown
                if env.get(name) != before.get(name):
                    env.pop(name, None)

    def _shape_of(self, plan: _Plan, node: cst.BaseExpression, env: dict) -> tuple | None:
        if isinstance(node, cst.Name):
            return env.get(node.value)  # type: ignore[return-value]
        if isinstance(node, cst.Call):
            parts = dotted(node.func)
            args = [a.value for a in node.args if a.keyword is None and not a.star]
            if parts and len(parts) == 2 and parts[0] == "self" and parts[1] in plan.attrs:
                a = plan.attrs[parts[1]]
                in_shape = self._shape_of(plan, args[0], env) if args else None
                if a.kind == "layer":
                    return self._translate_attr(plan, a, in_shape)
                return None
            shapes = [self._shape_of(plan, x, env) for x in args]
            if len(args) == 1 and not node.args[0].keyword and self.qualname(node.func) in _ELEMENTWISE_FNS:
                return shapes[0]
            return None
        for c in _self_calls(node):
            self._shape_of(plan, c, env)
        return None

    def _forward(self, plan: _Plan, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        params = updated.params
        kept = [p for p in params.params if p.name.value not in plan.drop_params]
        kwonly = [p for p in params.kwonly_params if p.name.value not in plan.drop_params]
        removed = [p for p in [*params.params, *params.kwonly_params] if p.name.value in plan.drop_params]
        star = params.star_arg
        if not kwonly and isinstance(star, cst.ParamStar):
            star = cst.MaybeSentinel.DEFAULT
        newline_ws = next((p.comma.whitespace_after for p in [*params.params, *params.kwonly_params]
                           if isinstance(p.comma, cst.Comma) and isinstance(p.comma.whitespace_after,
                                                                            cst.ParenthesizedWhitespace)
                           and (p in removed or p is (kept[-1] if kept else None))), None)
        new_params = params.with_changes(params=kept, kwonly_params=kwonly, star_arg=star)
        # the last parameter loses its comma, unless a line break lived there (kept as a trailing comma)
        last_list = "kwonly_params" if kwonly else ("star_arg" if isinstance(star, cst.Param) else "params")
        if removed:
            if last_list == "star_arg":
                last = star.with_changes(comma=_last_comma(newline_ws))
                new_params = new_params.with_changes(star_arg=last)
            else:
                items = list(getattr(new_params, last_list))
                if items:
                    items[-1] = items[-1].with_changes(comma=_last_comma(newline_ws))
                    new_params = new_params.with_changes(**{last_list: items})
            if params.star_kwarg is not None and isinstance(params.star_kwarg, cst.Param):
                # **kwargs after the removed ones: the ones before it need their commas back
                new_params = _recomma(new_params)
        return updated.with_changes(name=cst.Name("forward"), params=new_params)

    # --- build / add_weight --------------------------------------------------------------------------------
    def _record_variables(self, plan: _Plan, fn: cst.FunctionDef | None) -> None:
        """``self.gamma = tf.Variable(init_values * tf.ones((dim,)))`` on a line of its own in ``__init__`` or
        ``build`` (keras-io cait's LayerScale): Keras tracks the variable as the layer's weight, the translation
        holds it as the nn.Parameter ``gamma`` (the variable rule); the weight record (the variable rule's map,
        "." to ".") lets ``fwport verify`` move it as it moves an add_weight."""
        rule = self.ctx.pack.rules.get(VARIABLE_RULE)
        if fn is None or rule is None or not isinstance(fn.body, cst.IndentedBlock):
            return
        for stmt in fn.body.body:
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call)
                    and self.qualname(small.value.func) == "tensorflow.Variable"):
                continue
            t = dotted(small.targets[0].target)
            if t and len(t) == 2 and t[0] == "self" and t[1] not in plan.weight_attrs:
                self.ctx.layers.append(LayerRecord(plan.name, t[1], t[1], rule.id))

    def _plan_add_weights(self, plan: _Plan, fn: cst.FunctionDef) -> None:
        rule = self.ctx.pack.rules.get(ADD_WEIGHT_RULE)
        for stmt, node in _add_weight_calls(fn):
            if rule is None:
                return
            if stmt is None:
                # inside another expression (`self.ws.append(self.add_weight(...))`): torch registers a
                # parameter only when it is assigned to an attribute of the module
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(node.func)}(...) inside another "
                                "expression: the nn.Parameter would not be registered with the module (torch registers "
                                "the parameters assigned to self.<name>, or held by an nn.ParameterList); assign it to "
                                "an attribute", node, rule)
                self.ctx.settle(node)
                continue
            name = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "name"), None)
            if isinstance(stmt, cst.Expr) and name is None:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(node.func)}(...) whose result is "
                                "not kept and has no name=: torch registers a parameter under a name; assign it to "
                                "self.<name> or give it name=", node, rule)
                self.ctx.settle(node)
                continue
            new = self._add_weight(plan, node, rule)
            if new is None:
                continue
            if isinstance(stmt, cst.Expr):
                # Keras keeps the weight (self.weights lists it) although the statement drops the result:
                # registered under its name, in the same order
                new = cst.Call(cst.Attribute(cst.Name("self"), cst.Name("register_parameter")),
                               [cst.Arg(name), cst.Arg(new)])
            plan.replace[id(node)] = new
            attr = None
            if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
                t = dotted(stmt.targets[0].target)
                if t and len(t) == 2 and t[0] == "self":
                    self.ctx.layers.append(LayerRecord(plan.name, t[1], t[1], rule.id))
                    plan.weight_attrs.add(t[1])
                    attr = t[1]
            elif isinstance(stmt, cst.Expr):  # registered under its name= (a literal string)
                lit = literal_value(name, NOT_LITERAL)
                attr = lit if isinstance(lit, str) and lit.isidentifier() else None
            reg = _keyword_or_positional(node, "regularizer", _POSITIONAL[2 if self.ctx.version == 2 else 3])
            if reg is not None and literal_value(reg, NOT_LITERAL) is not None:
                trainable = _keyword_or_positional(node, "trainable", _POSITIONAL[2 if self.ctx.version == 2 else 3])
                plan.weight_penalties.append((attr, stmt, fn, reg, trainable, node))
            con = _keyword_or_positional(node, "constraint", _POSITIONAL[2 if self.ctx.version == 2 else 3])
            if con is not None and literal_value(con, NOT_LITERAL) is not None:
                trainable = _keyword_or_positional(node, "trainable", _POSITIONAL[2 if self.ctx.version == 2 else 3])
                plan.weight_constraints.append((attr, stmt, fn, con, trainable, node))

    def _plan_weight_penalties(self, plan: _Plan) -> None:
        """``self.w = self.add_weight(..., regularizer=R)`` → R's penalty on ``self.w`` in the class's
        regularization_loss() (regularizers.py), as Keras adds it to model.losses: R a literal name ("l2"),
        l2(f) / l1(f) with a factor readable there, or a value kept on the module (``self.kernel_regularizer``,
        from keras.regularizers.get: the KerasRegularizer helper) or at module level, counted while it is not None.
        A weight that may not exist (made under an ``if``, by a build that is not run from __init__) counts
        where it exists; one that LazyBuild declares, once it is built. Keras 3 leaves a non-trainable weight's
        penalty out (it walks trainable_weights), Keras 2 counts it."""
        ctx = self.ctx
        for attr, stmt, fn, reg, trainable, node in plan.weight_penalties:
            where = f"regularizer={code(reg)}"
            if attr is None:
                ctx.report(Severity.ERROR, "unsupported-argument", f"{where}: the weight is not kept as self.<name>, "
                           "so regularization_loss() cannot read it: torch parameters have no regularizers: add the "
                           "penalty to the loss", node)
                continue
            weight = f"self.{attr}"
            tr = literal_value(trainable, NOT_LITERAL) if trainable is not None else True
            conds: list[str] = []
            if ctx.version != 2 and tr is False:
                ctx.report(Severity.INFO, "idiom-replaced", f"{where} of the non-trainable weight {attr}: Keras 3 "
                           "leaves its penalty out of model.losses (it walks trainable_weights), so no term is added",
                           node)
                continue
            if ctx.version != 2 and tr is not True:
                conds.append(f"{weight}.requires_grad")
            params = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)}
            if fn.params.star_kwarg is not None:
                params.add(fn.params.star_kwarg.name.value)
            if isinstance(fn.params.star_arg, cst.Param):
                params.add(fn.params.star_arg.name.value)
            local = params | regularizers._assigned_names(fn)
            term = regularizers._term(reg, lambda f: self._resolve_in(f, fn), set(), local)
            if term == "none":
                continue
            if term is not None:
                kind, factor, _ = term
                entry = (factor, kind, weight, None, conds)
            else:
                names = {n for n in regularizers._free_names(reg) if not n.startswith("self.")}
                if not (isinstance(reg, (cst.Name, cst.Attribute)) and dotted(reg) and not names & local):
                    ctx.report(Severity.ERROR, "unsupported-argument", f"{where}: torch parameters have no "
                               "regularizers, and fwport reads a regularizer for regularization_loss() only as a "
                               "literal name, l2(f) / l1(f), or a value kept on self or at module level: add the "
                               "penalty to the loss (or weight_decay on the optimizer)", node)
                    continue
                conds.insert(0, f"{code(reg)} is not None")
                entry = (f"{helpers.use(ctx, 'KerasRegularizer')}({code(reg)})({weight})", "text", weight, None, conds)
            top = any(isinstance(line, cst.SimpleStatementLine) and any(x is stmt for x in line.body)
                      for line in (fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []))
            if fn is plan.build_fn and plan.lazy_build and attr in plan.lazy_build:
                # declared in __init__, made by the first call; LazyBuild removes one that build() does not make
                conds.insert(0, f"not {ctx.spell_text('torch.nn.parameter.is_lazy')}({weight})")
                if not top:
                    conds.insert(0, f'hasattr(self, "{attr}")')
            elif not top or not (fn is plan.init_fn or (fn is plan.build_fn and plan.build_static)):
                conds.insert(0, f'hasattr(self, "{attr}")')
            record = ctx.analyses.setdefault(regularizers.KEY, {}).setdefault(plan.name, {"terms": [], "store": []})
            record["terms"].append(entry)
            said = code(reg) if entry[1] == "text" else f"{entry[1]}({entry[0]})"
            ctx.report(Severity.INFO, "idiom-replaced", f"add_weight(regularizer={code(reg)}) → {plan.name}."
                       f"regularization_loss() adds {said} of {weight}: Keras adds the penalty to the loss itself "
                       "(model.losses), torch does not: the fit / evaluate fwport writes for a compile add it; in a "
                       "loop of your own add sum(m.regularization_loss() for m in model.modules() if hasattr(m, "
                       "'regularization_loss')) to the loss", node)

    def _plan_weight_constraints(self, plan: _Plan) -> None:
        """``self.w = self.add_weight(..., constraint=C)`` → C's projection of ``self.w`` in the class's
        apply_constraints() (regularizers.py), which the loop fwport writes calls after each optimizer.step(), as
        Keras's optimizer assigns ``C(w)`` to each trainable variable after its update. C a literal name
        ("max_norm") or a value kept on the module (``self.kernel_constraint``, from keras.constraints.get: the
        KerasConstraint helper) or at module level, applied while it is not None and the weight trains. None
        (the default) is exact to drop. A weight that may not exist counts where it exists, as for regularizers."""
        ctx = self.ctx
        for attr, stmt, fn, con, trainable, node in plan.weight_constraints:
            where = f"constraint={code(con)}"
            lit = literal_value(con, NOT_LITERAL)
            if attr is None:
                ctx.report(Severity.ERROR, "unsupported-argument", f"{where}: the weight is not kept as self.<name>, "
                           "so apply_constraints() cannot read it: torch parameters have no constraints: project the "
                           "parameter under torch.no_grad() after each optimizer.step()", node)
                continue
            weight = f"self.{attr}"
            tr = literal_value(trainable, NOT_LITERAL) if trainable is not None else True
            if tr is False:
                ctx.report(Severity.INFO, "idiom-replaced", f"{where} of the non-trainable weight {attr}: Keras's "
                           "optimizer applies constraints to the trainable variables only, so nothing is applied", node)
                continue
            params = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)}
            if fn.params.star_kwarg is not None:
                params.add(fn.params.star_kwarg.name.value)
            if isinstance(fn.params.star_arg, cst.Param):
                params.add(fn.params.star_arg.name.value)
            local = params | regularizers._assigned_names(fn)
            names = {n for n in regularizers._free_names(con) if not n.startswith("self.")}
            if not (isinstance(lit, str) or (isinstance(con, (cst.Name, cst.Attribute)) and dotted(con)
                                             and not names & local)):
                ctx.report(Severity.ERROR, "unsupported-argument", f"{where}: torch parameters have no constraints, "
                           "and fwport reads a constraint for apply_constraints() only as a literal name or a value "
                           "kept on self or at module level (self.kernel_constraint = keras.constraints.get(...)): "
                           "project the parameter under torch.no_grad() after each optimizer.step()", node)
                continue
            conds = [f"{weight}.requires_grad"]
            if not isinstance(lit, str):
                conds.insert(0, f"{code(con)} is not None")
            top = any(isinstance(line, cst.SimpleStatementLine) and any(x is stmt for x in line.body)
                      for line in (fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []))
            if fn is plan.build_fn and plan.lazy_build and attr in plan.lazy_build:
                conds.insert(0, f"not {ctx.spell_text('torch.nn.parameter.is_lazy')}({weight})")
                if not top:
                    conds.insert(0, f'hasattr(self, "{attr}")')
            elif not top or not (fn is plan.init_fn or (fn is plan.build_fn and plan.build_static)):
                conds.insert(0, f'hasattr(self, "{attr}")')
            helper = helpers.use(ctx, "KerasConstraint")
            ctx.analyses.setdefault(regularizers.CONSTRAINTS, {}).setdefault(plan.name, []).append(
                (weight, f"{helper}({code(con)})", conds))
            said = (f"add_weight({where}) → {plan.name}.apply_constraints() projects {weight} with it: Keras's "
                    "optimizer applies a weight's constraint after each update, torch's does not")
            # the training pass ran first: the compiles whose fit / evaluate it writes (its loop calls the
            # modules' apply_constraints() after each optimizer.step())
            written = ctx.options.get("_fit_helpers", set())
            if any(c.loss is not None and id(c) in written for c in ctx.analyses.get("compiled", [])):
                ctx.report(Severity.INFO, "idiom-replaced", f"{said}: the fit fwport writes calls it after each "
                           "optimizer.step()", node)
                continue
            if ctx.options.get("_constrained_steps"):  # GradientTape steps (a train_step's) translated here
                ctx.report(Severity.INFO, "idiom-replaced", f"{said}: the GradientTape steps fwport translates call "
                           "the apply_constraints() of the models they update after each optimizer.step()", node)
                continue
            # no loop written here: the reader's loop must call it; an error for a constraint the layer always
            # has (a literal name), a warning for a value given to the layer (None by default: nothing to do)
            ctx.report(Severity.ERROR if isinstance(lit, str) else Severity.WARNING, "unsupported-argument",
                       f"{said}, and fwport writes no training loop in this file: apply after each "
                       "optimizer.step(): for m in model.modules(): if hasattr(m, 'apply_constraints'): "
                       "m.apply_constraints()" + ("" if isinstance(lit, str) else
                                                  " (nothing to do while the constraint given is None, the default)"),
                       node)

    def _add_weight(self, plan: _Plan, call: cst.Call, rule) -> cst.BaseExpression | None:
        ctx = self.ctx
        order = _POSITIONAL[2 if ctx.version == 2 else 3]
        first = call.args[0] if call.args else None
        if (order[0] == "shape" and first is not None and first.keyword is None and not first.star
                and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))):
            ctx.report(Severity.ERROR, "unsupported-construct", "add_weight with a positional name is Keras 2's "
                       "signature (Keras 3's takes the shape first and raises on it): pass name= by keyword, or "
                       "mark the file '# fwport: keras=2'", call, rule)
            return None
        args = []
        for i, a in enumerate(call.args):
            if a.keyword is None and not a.star and i < len(order):
                a = a.with_changes(keyword=cst.Name(order[i]), equal=cst.AssignEqual())
            elif a.keyword is None:  # *args, or more positional arguments than add_weight takes
                ctx.report(Severity.ERROR, "unsupported-construct", "add_weight with *args or more than "
                           f"{len(order)} positional arguments cannot be bound statically; spell the "
                           "arguments out by keyword", call, rule)
                return None
            args.append(a)
        m = map_call(call.with_changes(args=args), rule, ctx, call)
        if m.failed:
            return None
        ex = m.extras
        dtype = literal_value(ex["dtype"], NOT_LITERAL) if "dtype" in ex else None
        if dtype is NOT_LITERAL:  # dtype=tf.float32: the name of TensorFlow's dtype
            q = self._resolve_in(ex["dtype"], plan.build_fn or plan.init_fn) if plan.build_fn or plan.init_fn else None
            if q and q.rsplit(".", 1)[0] in ("tensorflow", "tensorflow.dtypes") and q.rsplit(".", 1)[1] in _DTYPES:
                dtype = q.rsplit(".", 1)[1]
        dtype_name = getattr(dtype, "name", dtype)
        if dtype_name is not None and not (isinstance(dtype_name, str) and dtype_name in _DTYPES):
            m.fail(ctx, "unsupported-argument", f"dtype={code(ex['dtype'])}: give a literal dtype name such as "
                   "'float32'")
            return None
        tdtype = _DTYPES.get(dtype_name or "float32")
        is_float = tdtype in ("float16", "bfloat16", "float32", "float64")
        shape = ex.get("shape")
        init = _initializer(self, ex.get("initializer"), shape, tdtype, is_float, m)
        if init is None:
            return None
        trainable = ex.get("trainable")
        lit = literal_value(trainable, NOT_LITERAL) if trainable is not None else True
        grad = ""
        if not is_float or lit is False:
            grad = ", requires_grad=False"
        elif lit is not True and lit is not None:
            grad = f", requires_grad={code(trainable)}"
        return expr(f"{ctx.spell_text('torch.nn.Parameter')}({init}{grad})")

    def _plan_build(self, plan: _Plan, fn: cst.FunctionDef) -> None:
        ctx = self.ctx
        params = fn.params.params
        shape_name = params[1].name.value if len(params) > 1 else None
        for stmt in fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []:
            if _is_bookkeeping(stmt):
                plan.comment_out[id(stmt)] = "Keras bookkeeping, nothing to do in torch"
        uses = shape_name is not None and shape_name in _names_used(
            fn.body.with_changes(body=[s for s in fn.body.body if id(s) not in plan.comment_out]))
        if not uses and plan.init_fn is not None and len(params) <= 2:
            plan.build_static = True
            return
        keras_base = any(b.keyword is None and self.ctx.imports.resolve(b.value) in BASES for b in plan.node.bases)
        if uses and len(params) == 2 and plan.call_fn is not None and keras_base:
            plan.lazy_build = [dotted(st.targets[0].target)[1] for st, _ in _add_weight_calls(fn)
                               if isinstance(st, cst.Assign) and len(st.targets) == 1
                               and (dotted(st.targets[0].target) or [None])[0] == "self"
                               and len(dotted(st.targets[0].target)) == 2]
            declared = ", ".join(plan.lazy_build)
            ctx.report(Severity.INFO, "shape-unknown", "build(input_shape) runs on the first call with the input's "
                       "shape, as Keras builds the layer (the LazyBuild helper: torch's lazy modules)" + (
                           f"; the weights it creates ({declared}) are declared in __init__ as "
                           "nn.UninitializedParameter, so an optimizer created before that call holds them"
                           if declared and plan.init_fn is not None else
                           ": create the optimizer after a first call"), fn)
            return
        why = ("it creates the weights from the input shape, which a torch module knows only when it is called"
               if uses else "the class has no __init__ to call it from")
        ctx.report(Severity.ERROR, "shape-unknown", f"build() is kept, but torch never calls it: {why}. Call "
                   f"module.build(input_shape) once after constructing the module (before creating the optimizer "
                   "or loading weights), or pass the sizes to __init__ and create the parameters there", fn)

    def _super_init_first(self, plan: _Plan, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """``super().__init__()`` first in ``__init__`` (after its docstring), on a line of its own where the blank
        line after ``__init__`` can go (the file keeps its line count: later findings keep their lines), else
        split off the first statement at the end (training.finish)."""
        body = list(updated.body.body)
        idx = next((i for i, s in enumerate(original.body.body) if s is plan.init_fn), None)
        if idx is None or not isinstance(body[idx].body, cst.IndentedBlock):
            return updated
        init = body[idx]
        stmts = list(init.body.body)
        at = 1 if len(stmts) > 1 and isinstance(stmts[0], cst.SimpleStatementLine) and isinstance(
            stmts[0].body[0], cst.Expr) and isinstance(stmts[0].body[0].value, (cst.SimpleString,
                                                                                cst.ConcatenatedString)) else 0
        call = cst.parse_statement("super().__init__()\n")
        nxt = body[idx + 1] if idx + 1 < len(body) else None
        if nxt is not None and nxt.leading_lines and nxt.leading_lines[0].comment is None:
            body[idx + 1] = nxt.with_changes(leading_lines=list(nxt.leading_lines)[1:])
            stmts.insert(at, call.with_changes(leading_lines=stmts[at].leading_lines))
            stmts[at + 1] = stmts[at + 1].with_changes(leading_lines=[])
        elif isinstance(stmts[at], cst.SimpleStatementLine):
            # no blank line to take: `__fwport_line__(super().__init__()); <first statement>`, which the training
            # pass's finish step splits into two lines once every finding has its line (training.MARK)
            first = cst.Expr(cst.parse_expression("__fwport_line__(super().__init__())"),
                             semicolon=cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" ")))
            stmts[at] = stmts[at].with_changes(body=[first, *stmts[at].body])
            self.ctx.options["_split_lines"] = True
        else:
            return updated
        body[idx] = init.with_changes(body=init.body.with_changes(body=stmts))
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{plan.name}.__init__ calls no super().__init__() (a "
                        "tf.Module runs without it) → super().__init__() first: an nn.Module must set up its "
                        "parameter registry before an attribute holds a parameter", plan.init_fn.name)
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def _call_build_from_init(self, plan: _Plan, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        """``self.build()`` at the end of ``__init__``, on the blank line that follows it."""
        body = list(updated.body.body)
        idx = next((i for i, s in enumerate(original.body.body) if s is plan.init_fn), None)
        if idx is None:
            return updated
        init = body[idx]
        call = cst.parse_statement("self.build()\n")
        if idx + 1 < len(body):
            nxt = body[idx + 1]
            blanks = [i for i, ln in enumerate(nxt.leading_lines) if ln.comment is None]
            if blanks and blanks[0] == 0:
                body[idx + 1] = nxt.with_changes(leading_lines=list(nxt.leading_lines)[1:])
                body[idx] = init.with_changes(body=init.body.with_changes(body=[*init.body.body, call]))
                return updated.with_changes(body=updated.body.with_changes(body=body))
        last = init.body.body[-1]
        if isinstance(last, cst.SimpleStatementLine):  # no blank line to take: same line, after a semicolon
            new_last = last.with_changes(body=[*last.body[:-1], last.body[-1].with_changes(
                semicolon=cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" "))), call.body[0]])
            body[idx] = init.with_changes(body=init.body.with_changes(body=[*init.body.body[:-1], new_last]))
            return updated.with_changes(body=updated.body.with_changes(body=body))
        return updated

    # --- records of custom layers held by other classes ------------------------------------------------------
    def expand_nested(self) -> None:
        done: set[str] = set()
        by_name = {p.name: p for p in self.all_plans}

        def expand(plan: _Plan, stack: tuple = ()) -> None:
            if plan.name in done or plan.name in stack:
                return
            for attr, cls in plan.nested.items():
                inner = by_name.get(cls)
                if inner is None:
                    continue
                expand(inner, stack + (plan.name,))
                for r in [r for r in self.ctx.layers if r.scope == cls]:
                    self.ctx.layers.append(LayerRecord(plan.name, f"{attr}.{r.source}", f"{attr}.{r.target}",
                                                       r.rule, r.variant, dict(r.symbols)))
            done.add(plan.name)

        for p in self.all_plans:
            expand(p)


# --- initializers: Keras's distributions, exactly -------------------------------------------------------

_DTYPES = {"float16": "float16", "half": "float16", "bfloat16": "bfloat16", "float32": "float32",
           "float": "float32", "float64": "float64", "double": "float64", "int8": "int8", "int16": "int16",
           "int32": "int32", "int64": "int64", "uint8": "uint8", "bool": "bool"}
# name → (distribution, scale, mode) of keras.initializers.VarianceScaling
_VARIANCE = {"glorot_uniform": ("uniform", 1.0, "fan_avg"), "glorot_normal": ("truncated_normal", 1.0, "fan_avg"),
             "he_normal": ("truncated_normal", 2.0, "fan_in"), "he_uniform": ("uniform", 2.0, "fan_in"),
             "lecun_normal": ("truncated_normal", 1.0, "fan_in"), "lecun_uniform": ("uniform", 1.0, "fan_in")}
# initializer → its parameters in order, with their defaults (keras.initializers.*, tf.*_initializer)
_PARAMS = {"zeros": (), "ones": (), "constant": (("value", 0.0),),
           "random_normal": (("mean", 0.0), ("stddev", 0.05)), "random_uniform": (("minval", -0.05), ("maxval", 0.05)),
           "truncated_normal": (("mean", 0.0), ("stddev", 0.05)), "identity": (("gain", 1.0),),
           **{k: () for k in _VARIANCE}}
_TRUNC = 0.87962566103423978  # std of a standard normal truncated at ±2


_ASSIGNS = {"assign": "copy_", "assign_add": "add_", "assign_sub": "sub_"}


class _BindingCounts(cst.CSTVisitor):
    """_module_values: how many times each name is bound (assigned, a parameter, a loop's, imported), into ``counts``."""

    def __init__(self, counts):
        super().__init__()
        self.counts = counts

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        for x in _name_nodes(n.target):
            self.counts[x.value] = self.counts.get(x.value, 0) + 1

    def visit_Param(self, n: cst.Param) -> None:
        self.counts[n.name.value] = self.counts.get(n.name.value, 0) + 1

    def visit_For(self, n: cst.For) -> None:
        for x in _name_nodes(n.target):
            self.counts[x.value] = self.counts.get(x.value, 0) + 1

    def visit_ImportAlias(self, n: cst.ImportAlias) -> None:
        name = n.asname.name if n.asname is not None else n.name
        if isinstance(name, cst.Name):
            self.counts[name.value] = self.counts.get(name.value, 0) + 1

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        if isinstance(n.target, cst.Name):
            self.counts[n.target.value] = self.counts.get(n.target.value, 0) + 2


class _Constructions(cst.CSTVisitor):
    """The calls ``name(...)`` of a module (with the names of the functions around each), and (None, []) for each
    other read of the name (a base class, a value passed on)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.found, self.fns = name, [], []
        self._calls: set[int] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.fns.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.fns.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._calls.add(id(node.name))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._calls.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._calls.add(id(node.keyword))

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == self.name:
            self._calls.add(id(node.func))
            self.found.append((node, list(self.fns)))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self._calls:
            self.found.append((None, []))


def _constructions(module: cst.Module, name: str) -> list:
    v = _Constructions(name)
    scan(module, v)
    return v.found


def _module_values(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """``NAME = value`` statements at the top of the module whose name is bound nowhere else in the file
    (no other assignment, parameter, loop or import): the value every use of the name reads."""
    counts: dict[str, int] = {}
    values: dict[str, cst.BaseExpression] = {}
    scan(module, _BindingCounts(counts))
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            a = stmt.body[0]
            if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
                values[a.targets[0].target.value] = a.value
    return {k: v for k, v in values.items() if counts.get(k) == 1}


# what attaches a Keras mask to a tensor (Embedding(mask_zero=True), Masking, a compute_mask of the file, the
# mask-carrying layers of keras_hub / keras_nlp / TF Hub, a saved model loaded whole): where none is written, no
# tensor of the file carries one
_MASK_SOURCES = re.compile(r"mask_zero|Masking|compute_mask|keras_mask|keras_hub|keras_nlp|tensorflow_hub|load_model")


def mask_passed(ctx: FileContext, cls: cst.ClassDef) -> bool:
    """Every use of the layer class ``cls`` in the file is a call in a functional model that the functional
    pass gave the mask Keras gives its call() (masks.MASK_CALLERS): its name appears nowhere else."""
    from fwport.packs.tf2torch.masks import MASK_CALLERS
    name = cls.name.value
    passed = ctx.analyses.get(MASK_CALLERS, {}).get(name)
    parsed = ctx.analyses.get("parsed")
    if not passed or parsed is None:
        return False

    class _Refs(cst.CSTVisitor):
        count = 0

        def visit_Name(self, n: cst.Name) -> None:
            if n.value == name:
                _Refs.count += 1

        def visit_ClassDef(self, n: cst.ClassDef) -> None:
            if n.name.value == name:
                _Refs.count -= 1  # its own name

    scan(parsed[0], _Refs())
    return _Refs.count == len(passed)


def keras_masks(ctx: FileContext) -> bool:
    """The file may attach Keras masks to tensors. Where it does not, Keras fills a call()'s ``mask``
    parameter with None where its caller passes none (Layer.__call__ reads the mask attached to the input),
    so ``mask`` is an ordinary parameter: the translated forward keeps it and takes what its callers pass."""
    parsed = ctx.analyses.get("parsed")
    if parsed is None or _OTHER_MASK_SOURCES.search(parsed[1]):
        return True
    if not _MASK_SOURCES.search(parsed[1]):
        return False
    return not _unused_mask_computers(parsed[0])


# the mask sources but a compute_mask of the file's own layers
_OTHER_MASK_SOURCES = re.compile(r"mask_zero|Masking|keras_mask|keras_hub|keras_nlp|tensorflow_hub|load_model")


def _unused_mask_computers(module: cst.Module) -> bool:
    """Every ``compute_mask`` the file writes is a method of a class the file never uses (its name read nowhere
    but in its own definition, ``super(Cls, self)``: a library of layers, called by other files): no tensor of
    this file passes through one, so none of them attaches a mask here."""
    classes: set[str] = set()
    reads: dict[str, int] = {}
    inside: list[str] = []  # the classes being walked

    class _Walk(cst.CSTVisitor):
        def visit_ClassDef(self, n: cst.ClassDef) -> None:
            body = n.body.body if isinstance(n.body, cst.IndentedBlock) else ()
            if any(isinstance(f, cst.FunctionDef) and f.name.value == "compute_mask" for f in body):
                classes.add(n.name.value)
            inside.append(n.name.value)

        def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
            inside.pop()

        def visit_Name(self, n: cst.Name) -> None:
            if n.value not in inside:
                reads[n.value] = reads.get(n.value, 0) + 1

        def visit_Attribute(self, n: cst.Attribute) -> None:
            if n.attr.value == "compute_mask" and not (isinstance(n.value, cst.Name) and n.value.value == "self"):
                classes.add("")  # another object's compute_mask (a layer fwport does not see): a source

    scan(module, _Walk())
    return bool(classes) and "" not in classes and all(reads.get(c, 0) <= 0 for c in classes)


def _snake(name: str) -> str:
    name = name[:-len("_initializer")] if name.endswith("_initializer") else name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _initializer(p: _SubclassPass, node, shape, tdtype: str, is_float: bool, m) -> str | None:
    ctx = p.ctx
    S = _shape_text(shape)
    dt = "" if tdtype == "float32" else f", dtype=torch.{tdtype}"
    if isinstance(node, cst.Name) and isinstance(p.module_values.get(node.value), cst.Call):
        node = p.module_values[node.value]  # `ones_init = keras.initializers.Ones()` at the top of the file
    if node is None:
        name, kwargs = ("glorot_uniform" if is_float else "zeros"), {}
    else:
        lit = literal_value(node, NOT_LITERAL)
        if isinstance(lit, str):
            name, kwargs = _snake(lit), {}
        elif isinstance(node, cst.Call) and (q := ctx.imports.resolve(node.func)) and (
                q.startswith("keras.initializers.") or q.startswith("tensorflow.") and q.endswith("_initializer")):
            name = _snake(q.rsplit(".", 1)[-1])
            kwargs = {}
            params = _PARAMS.get(name)
            if params is None:
                m.fail(ctx, "unsupported-argument", f"initializer={code(node)} has no exact torch initializer here")
                return None
            for i, a in enumerate(node.args):
                key = a.keyword.value if a.keyword else (params[i][0] if i < len(params) else None)
                if key == "seed" or (key is None and i == len(params)):
                    continue  # torch draws from its global generator (torch.manual_seed)
                v = literal_value(a.value, NOT_LITERAL)
                if key not in dict(params) or not isinstance(v, (int, float)) or isinstance(v, bool):
                    m.fail(ctx, "unsupported-argument", f"initializer={code(node)}: only literal numbers are "
                           "translated")
                    return None
                kwargs[key] = float(v)
        elif isinstance(node, (cst.Name, cst.Attribute)) and shape is not None:
            # a value known at run time (a constructor parameter, keras.initializers.get(...)): the
            # KerasInitializer helper draws from the distribution it names when called
            shape_code = code(shape) if not isinstance(shape, cst.Integer) else f"({code(shape)},)"
            dtype_arg = "" if tdtype == "float32" else f", {ctx.spell_text('torch.' + tdtype)}"
            return f"{helpers.use(ctx, 'KerasInitializer')}({code(node)})({shape_code}{dtype_arg})"
        else:
            m.fail(ctx, "unsupported-argument", f"initializer={code(node)}: give a Keras initializer name or "
                   "keras.initializers object; initialise the parameter by hand otherwise")
            return None
    if name not in _PARAMS:
        m.fail(ctx, "unsupported-argument", f"initializer {name!r} has no exact torch initializer here: "
               "initialise the parameter by hand")
        return None
    v = {k: kwargs.get(k, d) for k, d in _PARAMS[name]}
    torch = ctx.spell_text("torch.empty")[: -len("empty")]
    init = ctx.spell_text("torch.nn.init.normal_")[: -len("normal_")]
    empty = f"{torch}empty({S}{dt})"
    if name == "zeros":
        return f"{torch}zeros({S}{dt})"
    if name == "ones":
        return f"{torch}ones({S}{dt})"
    if name == "constant":
        size = S if shape is None or isinstance(shape, cst.Name) else f"({S},)" if "," not in S else f"({S})"
        return f"{torch}full({size}, {v['value']!r}{dt})"
    if not is_float:
        m.fail(ctx, "unsupported-argument", f"a random initializer ({name}) for an integer variable")
        return None
    if name == "random_normal":
        mean = "" if v["mean"] == 0 else f"mean={v['mean']!r}, "
        return f"{init}normal_({empty}, {mean}std={v['stddev']!r})"
    if name == "random_uniform":
        return f"{init}uniform_({empty}, {v['minval']!r}, {v['maxval']!r})"
    if name == "truncated_normal":
        mu, sd = v["mean"], v["stddev"]
        mean = "" if mu == 0 else f"mean={mu!r}, "
        return f"{init}trunc_normal_({empty}, {mean}std={sd!r}, a={mu - 2 * sd!r}, b={mu + 2 * sd!r})"
    dims = _shape_elements(shape)
    if name == "identity":
        if dims is None or len(dims) != 2:
            m.fail(ctx, "unsupported-argument", "the identity initializer needs a literal 2-D shape")
            return None
        eye = f"{torch}eye({dims[0]}, {dims[1]}{dt})"
        return eye if v["gain"] == 1 else f"{v['gain']!r} * {eye}"
    if dims is None:
        m.fail(ctx, "shape-unknown", f"{name} scales by the fan-in/fan-out of the shape, which is not written "
               "out here: write the shape as a tuple")
        return None
    dist, scale, mode = _VARIANCE[name]
    if name == "glorot_uniform" and len(dims) == 2:
        return f"{init}xavier_uniform_({empty})"  # limit sqrt(6 / (fan_in + fan_out)): symmetric in the fans
    fan_in, fan_out = _fans(dims)
    fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": f"({fan_in} + {fan_out}) / 2"}[mode]
    try:
        n = eval(fan, {"__builtins__": {}})  # only literal integers and + / * reach here
        var = scale / max(1.0, float(n))
        if dist == "uniform":
            lim = math.sqrt(3.0 * var)
            return f"{init}uniform_({empty}, {-lim!r}, {lim!r})"
        std = math.sqrt(var) / _TRUNC
        return f"{init}trunc_normal_({empty}, std={std!r}, a={-2 * std!r}, b={2 * std!r})"
    except Exception:  # symbolic sizes: the same formula, written out
        sqrt = ctx.spell_text("math.sqrt")
        var = f"{scale!r} / max(1.0, {fan})"
        if dist == "uniform":
            lim = f"{sqrt}(3.0 * {var})"
            return f"{init}uniform_({empty}, -{lim}, {lim})"
        # a standard normal truncated at ±2, scaled: the same distribution, the std written once
        return f"{init}trunc_normal_({empty}, a=-2.0, b=2.0).mul_({sqrt}({var}) / {_TRUNC!r})"


def _shape_text(shape) -> str:
    """The shape as torch factory arguments: ``(a, 3)`` → ``a, 3``; ``()`` stays (a scalar)."""
    if shape is None:
        return "()"
    if isinstance(shape, (cst.Tuple, cst.List)) and shape.elements and not any(
            isinstance(e, cst.StarredElement) for e in shape.elements):
        return ", ".join(code(e.value) for e in shape.elements)
    return code(shape)


def _shape_elements(shape) -> list[str] | None:
    if shape is None:
        return []
    if isinstance(shape, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in shape.elements):
        return [code(e.value) for e in shape.elements]
    if isinstance(shape, (cst.Integer, cst.Name, cst.Attribute)):
        return [code(shape)]
    return None


def _fans(dims: list[str]) -> tuple[str, str]:
    """keras.initializers' compute_fans, as expressions."""
    par = [d if re.fullmatch(r"[\w.]+", d) else f"({d})" for d in dims]
    if not par:
        return "1", "1"
    if len(par) == 1:
        return par[0], par[0]
    if len(par) == 2:
        return par[0], par[1]
    rf = " * ".join(par[:-2])
    return f"{par[-2]} * {rf}", f"{par[-1]} * {rf}"


# --- small syntax helpers ---------------------------------------------------------------------------------

def _returned_values(fn: cst.FunctionDef) -> list[cst.BaseExpression]:
    """The values of the function's own return statements (not those of nested functions); a bare
    ``return`` counts as a value that is not a module."""
    v = _Returns(fn)
    scan(fn, v)
    return v.out


class _Returns(cst.CSTVisitor):
    def __init__(self, fn: cst.FunctionDef):
        self.fn = fn
        self.out: list[cst.BaseExpression] = []

    def visit_FunctionDef(self, node) -> bool:
        return node is self.fn

    def visit_Lambda(self, node) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        self.out.append(node.value if node.value is not None else cst.Name("None"))


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in cls.body.body if isinstance(s, cst.FunctionDef)] if isinstance(cls.body, cst.IndentedBlock) else []


def _blocks(s) -> list[cst.IndentedBlock]:
    """The indented blocks of a compound statement, in source order (elif chains included)."""
    out: list = []
    body = getattr(s, "body", None)
    if isinstance(body, cst.IndentedBlock):
        out.append(body)
    for h in getattr(s, "handlers", ()) or ():
        out.append(h.body)
    orelse = getattr(s, "orelse", None)
    if isinstance(orelse, cst.If):
        out.extend(_blocks(orelse))
    elif orelse is not None and isinstance(getattr(orelse, "body", None), cst.IndentedBlock):
        out.append(orelse.body)
    final = getattr(s, "finalbody", None)
    if final is not None and isinstance(getattr(final, "body", None), cst.IndentedBlock):
        out.append(final.body)
    return out


# The visitors below are module-level classes given their state: a class statement inside a function
# creates a class (and its hook table) on every call, which costs several times the walk itself.

class _SelfCalls(cst.CSTVisitor):
    def __init__(self):
        self.found: list[cst.Call] = []

    def visit_Call(self, n: cst.Call) -> bool:
        p = dotted(n.func)
        if p and len(p) == 2 and p[0] == "self":
            self.found.append(n)
            return False
        return True

    def visit_IndentedBlock(self, n) -> bool:
        return False


def _self_calls(node) -> list[cst.Call]:
    """Outermost ``self.<attr>(...)`` calls in a node (compound statements: only their header)."""
    v = _SelfCalls()
    scan(node, v)
    return v.found


class _AssignedNames(cst.CSTVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def visit_AssignTarget(self, n):
        self.names.update(x.value for x in _name_nodes(n.target))

    def visit_AugAssign(self, n):
        self.names.update(x.value for x in _name_nodes(n.target))

    def visit_For(self, n):
        self.names.update(x.value for x in _name_nodes(n.target))


def _assigned_names(stmt) -> set[str]:
    v = _AssignedNames()
    scan(stmt, v)
    return v.names


def _name_nodes(t) -> list[cst.Name]:
    if isinstance(t, cst.Name):
        return [t]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for e in t.elements for n in _name_nodes(e.value)]
    return []


class _NamesUsed(ValueVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def visit_Name(self, n: cst.Name) -> None:
        self.names.add(n.value)


def _names_used(node) -> set[str]:
    v = _NamesUsed()
    scan(node, v)
    return v.names


class _FirstUse(cst.CSTVisitor):
    def __init__(self, name: str):
        self.name = name
        self.hit: list[cst.Name] = []

    def visit_Name(self, n: cst.Name) -> None:
        if n.value == self.name and not self.hit:
            self.hit.append(n)


def _first_use(node, name: str) -> cst.Name | None:
    v = _FirstUse(name)
    scan(node, v)
    return v.hit[0] if v.hit else None


def _self_assigns(fn: cst.FunctionDef) -> list[tuple[cst.SimpleStatementLine, cst.Assign]]:
    out = []

    def walk(stmts) -> None:
        for s in stmts:
            if isinstance(s, cst.SimpleStatementLine):
                for small in s.body:
                    if (isinstance(small, cst.Assign) and len(small.targets) == 1
                            and isinstance(small.targets[0].target, cst.Attribute)
                            and dotted(small.targets[0].target) is not None
                            and len(dotted(small.targets[0].target)) == 2
                            and dotted(small.targets[0].target)[0] == "self"):
                        out.append((s if len(s.body) == 1 else None, small))
            elif not isinstance(s, (cst.FunctionDef, cst.ClassDef)):
                for blk in _blocks(s):
                    walk(blk.body)

    walk(fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [])
    return out


class _AddWeightCalls(cst.CSTVisitor):
    def __init__(self):
        self.stmt = None
        self.out: list = []

    def visit_Assign(self, n: cst.Assign) -> None:
        self.stmt = n

    def leave_Assign(self, n: cst.Assign) -> None:
        self.stmt = None

    def visit_Expr(self, n: cst.Expr) -> None:
        self.stmt = n

    def leave_Expr(self, n: cst.Expr) -> None:
        self.stmt = None

    def visit_Call(self, n: cst.Call) -> None:
        p = dotted(n.func)
        if p and len(p) == 2 and p[0] == "self" and p[1] in _ADD_WEIGHT_METHODS:
            self.out.append((self.stmt if self.stmt is not None and self.stmt.value is n else None, n))


def _keyword_or_positional(call: cst.Call, name: str, order: tuple) -> cst.BaseExpression | None:
    """The value ``call`` gives parameter ``name`` of add_weight, by keyword or at its place in ``order``."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == name:
            return a.value
        if a.keyword is None and not a.star and i < len(order) and order[i] == name:
            return a.value
    return None


def _add_weight_calls(fn: cst.FunctionDef) -> list[tuple[cst.CSTNode | None, cst.Call]]:
    v = _AddWeightCalls()
    scan(fn.body, v)
    return v.out


def _is_bookkeeping(stmt) -> bool:
    """``super().build(...)`` or ``self.built = True`` on a line of its own."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    s = stmt.body[0]
    if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call):
        f = s.value.func
        return (isinstance(f, cst.Attribute) and f.attr.value == "build" and isinstance(f.value, cst.Call)
                and dotted_text(f.value.func) == "super")
    return (isinstance(s, cst.Assign) and len(s.targets) == 1 and dotted_text(s.targets[0].target) == "self.built")


class _HasFunctional(cst.CSTVisitor):
    def __init__(self, p: _SubclassPass):
        self.p = p
        self.hit = False

    def visit_Call(self, n: cst.Call) -> None:
        if self.p.qualname(n.func) == FUNCTIONAL:
            self.hit = True

    def visit_FunctionDef(self, n) -> bool:
        return False

    def visit_ClassDef(self, n) -> bool:
        return False


def _written_train(plan: _Plan, cls: cst.ClassDef) -> cst.ClassDef:
    """The class's ``train(mode)``, written at its end: nn.Module's, then each sub-module Keras calls with a fixed
    training flag put back in that mode (see _SubclassPass._plan_fixed_modes); model.eval() is train(False)."""
    lines = ["def train(self, mode=True):\n", "    super().train(mode)\n"]
    for flag in ("False", "True"):
        attrs = [a for a, f in plan.fixed_modes.items() if f == flag]
        if attrs:
            lines.append(f"    # called with training={flag}: {'training' if flag == 'True' else 'inference'} "
                         f"mode whatever the model's, as Keras runs {'it' if len(attrs) == 1 else 'them'}\n")
        lines += [f"    self.{a}.{'train' if flag == 'True' else 'eval'}()\n" for a in attrs]
    lines.append("    return self\n")
    fn = cst.parse_statement("".join(lines))
    fn = fn.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return cls.with_changes(body=cls.body.with_changes(body=[*cls.body.body, fn]))


def _has_functional(body, p: _SubclassPass) -> bool:
    v = _HasFunctional(p)
    for s in body:
        scan(s, v)
    return v.hit


def _fixed_training(call: cst.Call, positional: bool) -> str | None:
    """"True" / "False" where ``call`` passes a constant mode (``training=True``, or, ``positional``, True / False
    as its second positional argument), else None."""
    for i, a in enumerate(call.args):
        if a.star:
            return None
        named = a.keyword is not None and a.keyword.value == "training"
        if (named or positional and a.keyword is None and i == 1) and isinstance(a.value, cst.Name) \
                and a.value.value in ("True", "False"):
            return a.value.value
    return None


def _drop_flag(original: cst.Call, updated: cst.Call) -> cst.Call:
    """Remove the literal training flag _fixed_training found (``training=False``, or a positional True / False
    after the input)."""
    keep = [u for i, (o, u) in enumerate(zip(original.args, updated.args))
            if not (o.keyword is not None and o.keyword.value == "training" or o.keyword is None and i == 1
                    and isinstance(o.value, cst.Name) and o.value.value in ("True", "False"))]
    if keep:
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(args=keep)


def _drop_training(original: cst.Call, updated: cst.Call) -> cst.Call:
    """Remove ``training=...`` (and a positional ``training`` variable after the input)."""
    keep = []
    for i, (o, u) in enumerate(zip(original.args, updated.args)):
        if o.keyword is not None and o.keyword.value == "training":
            continue
        if o.keyword is None and i > 0 and isinstance(o.value, cst.Name) and o.value.value == "training":
            continue
        keep.append(u)
    if len(keep) == len(updated.args):
        return updated
    if keep:
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(args=keep)


def _atom(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _to_first(rank: int) -> tuple[int, ...]:
    return (0, rank - 1, *range(1, rank - 1))


def _to_last(rank: int) -> tuple[int, ...]:
    return (0, *range(2, rank), 1)


def _permute(node: cst.BaseExpression, perm: tuple[int, ...]) -> cst.BaseExpression:
    return cst.Call(cst.Attribute(_atom(node), cst.Name("permute")), [cst.Arg(expr(str(i))) for i in perm])


def _is_permute(node: cst.BaseExpression, perm: tuple[int, ...]) -> bool:
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "permute"
            and [literal_value(a.value, None) for a in node.args] == list(perm))


def _last_comma(ws) -> cst.Comma | cst.MaybeSentinel:
    if ws is None:
        return cst.MaybeSentinel.DEFAULT
    return cst.Comma(whitespace_after=ws)


def _recomma(params: cst.Parameters) -> cst.Parameters:
    items = list(params.params)
    for i, p in enumerate(items):
        if p.comma is cst.MaybeSentinel.DEFAULT:
            items[i] = p.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return params.with_changes(params=items)


def _optional_second_param(fn: cst.FunctionDef) -> cst.FunctionDef:
    """``build(self, input_shape)`` → ``build(self, input_shape=None)``: __init__ calls it without one."""
    ps = list(fn.params.params)
    if len(ps) == 2 and ps[1].default is None:
        ps[1] = ps[1].with_changes(default=cst.Name("None"), equal=cst.AssignEqual(
            cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        return fn.with_changes(params=fn.params.with_changes(params=ps))
    return fn


def _empty_list(value: cst.BaseExpression) -> bool:
    """``[]`` or ``list()``."""
    return (isinstance(value, cst.List) and not value.elements) or (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "list"
        and not value.args)


class _ListUses(cst.CSTVisitor):
    """The uses of ``self.<attr>`` in a method (``fn`` set per method): the local names appended to it
    (``appended``: (name, fn)), the names of ``for`` loops over it whose body only calls them
    (``loop_vars``: name → loops); ``total`` uses of ``self.<attr>``, ``ok`` those of these forms."""

    def __init__(self, attr: str):
        self.attr = attr
        self.fn: cst.FunctionDef | None = None
        self.appended: list[tuple[str, cst.FunctionDef]] = []
        self.loop_vars: dict[str, int] = {}
        self.ok: set[int] = set()
        self.total = 0

    def _is_attr(self, node) -> bool:
        return dotted(node) == ["self", self.attr]

    def visit_Attribute(self, n: cst.Attribute) -> None:
        if self._is_attr(n):
            self.total += 1

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        if self._is_attr(n.target):
            self.ok.add(id(n.target))

    def visit_Call(self, n: cst.Call) -> None:
        f = n.func
        if isinstance(f, cst.Attribute) and self._is_attr(f.value) and f.attr.value == "append" and len(n.args) == 1 \
                and n.args[0].keyword is None and not n.args[0].star and isinstance(n.args[0].value, cst.Name):
            self.ok.add(id(f.value))
            self.appended.append((n.args[0].value.value, self.fn))
        elif isinstance(f, cst.Subscript) and self._is_attr(f.value):
            self.ok.add(id(f.value))

    def visit_For(self, n: cst.For) -> None:
        if self._is_attr(n.iter) and isinstance(n.target, cst.Name):
            name = n.target.value
            calls = _NameCalls(name)
            scan(n.body, calls)
            if calls.reads == calls.called:
                self.ok.add(id(n.iter))
                self.loop_vars[name] = self.loop_vars.get(name, 0) + 1


class _NameCalls(cst.CSTVisitor):
    """How often ``name`` is read in a subtree, and how often as the function of a call."""

    def __init__(self, name: str):
        self.name = name
        self.reads = 0
        self.called = 0
        self._skip: set[int] = set()

    def visit_Attribute(self, n: cst.Attribute) -> None:
        self._skip.add(id(n.attr))

    def visit_Arg(self, n: cst.Arg) -> None:
        if n.keyword is not None:
            self._skip.add(id(n.keyword))

    def visit_Call(self, n: cst.Call) -> None:
        if isinstance(n.func, cst.Name) and n.func.value == self.name:
            self.called += 1

    def visit_Name(self, n: cst.Name) -> None:
        if n.value == self.name and id(n) not in self._skip:
            self.reads += 1


class _LocalBinds(_NameCalls):
    """The values ``name`` is assigned (``values``), how often it is bound (``binds``: assignments, loops,
    parameters, ...) and read (``reads``) in a subtree."""

    def __init__(self, name: str):
        super().__init__(name)
        self.values: list[cst.BaseExpression] = []
        self.binds = 0

    def visit_Assign(self, n: cst.Assign) -> None:
        for t in n.targets:
            if isinstance(t.target, cst.Name) and t.target.value == self.name:
                self.values.append(n.value)

    def visit_Param(self, n: cst.Param) -> None:
        self._skip.add(id(n.name))
        if n.name.value == self.name:
            self.binds += 1

    def _target(self, t) -> None:
        for x in _name_nodes(t):
            if x.value == self.name:
                self.binds += 1
                self._skip.add(id(x))

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        self._target(n.target)

    def visit_For(self, n: cst.For) -> None:
        self._target(n.target)

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        self._target(n.target)
        self.binds += 1  # (read and bound)

    def visit_WithItem(self, n: cst.WithItem) -> None:
        if n.asname is not None:
            self._target(n.asname.name)

    def visit_CompFor(self, n: cst.CompFor) -> None:
        self._target(n.target)


def _subscript_called(cls: cst.ClassDef, attr: str, keyed: bool = False) -> bool:
    """``self.<attr>[i](...)`` somewhere in the class (``keyed``: ``self.<attr>["key"](...)``, a dict's, instead)."""
    return any(isinstance(c.func, cst.Subscript) and dotted(c.func.value) == ["self", attr] and keyed == any(
        isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.SimpleString) for e in c.func.slice)
               for c in find_all(cls, cst.Call))


def _local_list_elements(fn: cst.FunctionDef, name: str) -> list | None:
    """The elements a local list ``name`` of ``fn`` is given: ``name = [...]`` (once, a list display) and
    ``name.append(x)`` / ``name.extend([...])``; None where it is bound any other way."""
    found: list = []
    bad = [False]
    assigned = [0]

    class _V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                if isinstance(t.target, cst.Name) and t.target.value == name:
                    assigned[0] += 1
                    if isinstance(n.value, (cst.List, cst.Tuple)):
                        found.extend(e.value for e in n.value.elements)
                    elif isinstance(n.value, cst.ListComp):
                        found.append(n.value.elt)
                    else:
                        bad[0] = True
                elif isinstance(t.target, (cst.Tuple, cst.List)) and any(
                        isinstance(e.value, cst.Name) and e.value.value == name for e in t.target.elements):
                    bad[0] = True

        def visit_For(self, n: cst.For) -> None:
            if isinstance(n.target, cst.Name) and n.target.value == name:
                bad[0] = True

        def visit_Call(self, n: cst.Call) -> None:
            p = dotted(n.func)
            if p and len(p) == 2 and p[0] == name and len(n.args) == 1:
                if p[1] == "append":
                    found.append(n.args[0].value)
                elif p[1] == "extend" and isinstance(n.args[0].value, (cst.List, cst.Tuple)):
                    found.extend(e.value for e in n.args[0].value.elements)

    scan(fn, _V())
    if bad[0] or assigned[0] != 1 or any(isinstance(e, cst.StarredElement) for e in found):
        return None
    return found


def _range_count(comp: cst.ListComp) -> int | None:
    f = comp.for_in
    if f.inner_for_in is not None or f.ifs:
        return None
    it = f.iter
    if isinstance(it, cst.Call) and dotted_text(it.func) == "range" and len(it.args) == 1:
        v = literal_value(it.args[0].value, None)
        return v if isinstance(v, int) else None
    return None


def _ws(node, which: str):
    if isinstance(node, cst.List):
        return node.lbracket.whitespace_after if which == "after" else node.rbracket.whitespace_before
    if which == "after":
        return node.lpar[0].whitespace_after if node.lpar else cst.SimpleWhitespace("")
    return node.rpar[0].whitespace_before if node.rpar else cst.SimpleWhitespace("")


def _axis_is_last(call: cst.Call) -> bool:
    """The norm layer's ``axis`` (its first parameter) is the default (-1) or a literal -1."""
    for i, a in enumerate(call.args):
        if (a.keyword is not None and a.keyword.value == "axis") or (a.keyword is None and i == 0):
            return not a.star and literal_value(a.value, None) in (-1, [-1], (-1,))
    return True


