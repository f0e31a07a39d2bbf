"""Structural pass: training code — the GradientTape step, optimizers, losses, the training flag.

    with tf.GradientTape() as tape:                 optimizer.zero_grad()
        logits = model(x, training=True)      →     model.train()
        loss = loss_fn(y, logits)                   logits = model(x)
    grads = tape.gradient(loss, model.trainable_variables)          loss = loss_fn(logits, y.long())
    optimizer.apply_gradients(zip(grads, model.trainable_variables))   loss.backward()
                                                    optimizer.step()

- A tape block followed, in the same block, by ``g = tape.gradient(loss, V)`` and
  ``opt.apply_gradients(zip(g, V))`` (``g`` used nowhere else) becomes ``opt.zero_grad()`` on the
  ``with`` line, the body one level out, ``loss.backward()`` and ``opt.step()``. Two tapes in one
  ``with``, or a persistent tape, with one gradient and one optimizer per loss: see ``_tapes_step``.
  Anything else (gradients used otherwise, tapes the block uses) is an error finding, left as written.
- ``M(..., training=T)`` on a model ``M`` of the file: the argument goes and ``M.train()`` /
  ``M.eval()`` / ``M.train(T)`` is put on a line of its own before the statement (torch keeps the
  mode on the module; Keras takes it per call). A callee fwport cannot resolve (a parameter, ``self.model``
  of a trainer class, ``models[0]``) is taken for a Keras model or layer, since only they take
  ``training=``; where a comprehension or lambda binds it, ``m.eval()(x)`` (train()/eval() return the
  module). Functions, classes and imports of the file keep the argument.
- ``opt = keras.optimizers.X(...)``: a torch optimizer over the parameters of the variables
  ``opt.apply_gradients`` is given (``model.trainable_variables`` → ``model.parameters()``),
  translated by the optimizer's rule (rules/tf2torch/, call transform ``optimizer``). The model must
  be bound before the optimizer (torch takes the parameters at creation): an optimizer created
  first is an error finding that says to move it.
- ``loss_fn = keras.losses.X(...)``: the loss module by its rule (call transform ``loss``), and each
  call ``loss_fn(y_true, y_pred)`` gets torch's order and the argument types torch needs
  (``loss_fn(y_pred, y_true.long())``; probabilities clipped as Keras clips them).

The pass runs right after model_api, on the source as written (the Keras model classes are still
Keras classes). Lines a statement gains (``model.train()``) are written as
``__fwport_line__(model.train()); statement`` and split by :func:`finish`, once every finding is
located: passes keep line structure.
"""
from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple
from ast import literal_eval

import libcst as cst

from fwport.core.hooks import default_leave_transform, default_visit
from fwport.core.bind import NOT_LITERAL, bind_call, bind_def, call_argument, literal_value
from fwport.core.context import FileContext
from fwport.core.engine import build_call, code, comment_error, map_call
from fwport.core.engine import expr as parsed_expression, statement as parsed_statement  # (parsed once per process, a fresh copy per call)
from fwport.core.finding import Severity
from fwport.core import written
from fwport.core.imports import insert_after_imports
from fwport.core.plan import Plans
from fwport.core.names import ScopedResolver, bound_names, dotted_text, find_all, scan
from fwport.core.rewrite import fresh_copy, rewrite
from fwport.packs.tf2torch import helpers, optim
from fwport.packs.tf2torch.passes import fitloop, functional, regularizers, runtime, valuekinds
from fwport.packs.tf2torch.passes.model_api import _Models, models_of
from fwport.packs.tf2torch.passes.subclass import _returned_values

MARK = "__fwport_line__"
# after a tape step's opt.step(): the models' apply_constraints() loop (as MARK's text), kept by finish where the
# file's modules have constraints (recorded by the passes after this one), dropped elsewhere
_CONSTRAINED_STEP = "__fwport_constrained_step__"
TAPE = "tensorflow.GradientTape"
CALLBACK = "keras.callbacks.Callback"
SCHEDULE = "keras.optimizers.schedules.LearningRateSchedule"
LAMBDA_LR = "torch.optim.lr_scheduler.LambdaLR"
CALLBACK_HOOKS = ("on_train_begin", "on_epoch_begin", "on_epoch_end", "on_train_end")  # what the fits call
#: what a callback reads of the Keras model fit gives it (``self.model.X``) and the nn.Module the translated fits
#: give it has not (it has .optimizer and .stop_training, which they set), with what to write instead
CALLBACK_MODEL_ONLY = {
    "predict": "with torch.no_grad(): y = self.model(x) (in eval mode; the file's written predict(self.model, x) "
               "where fwport wrote one)",
    "evaluate": "compute the loss and metrics of the validation data in a loop under torch.no_grad()",
    "fit": "an nn.Module does not train itself", "compile": "an nn.Module does not train itself",
    "save": "torch.save(self.model.state_dict(), path)", "save_weights": "torch.save(self.model.state_dict(), path)",
    "load_weights": "self.model.load_state_dict(torch.load(path))",
    "get_weights": "[p.detach().numpy() for p in self.model.parameters()]",
    "set_weights": "self.model.load_state_dict(...)", "name": "a name of your choosing",
    "layers": "self.model.children() or the attributes the module holds", "get_layer": "the module's attribute",
    "summary": "print(self.model)", "inputs": "the tensors forward takes", "outputs": "what forward returns",
    "metrics": "the metric objects of the training loop", "trainable_weights": "self.model.parameters()",
    "weights": "self.model.state_dict()"}
_VARIABLE_LISTS = ("trainable_variables", "trainable_weights")
#: the model of each ``X.parameters()`` in what :func:`_params_of` gives (two gradients over one model's
#: parameters cannot both go through backward(): .grad would hold their sum)
_OWNER = re.compile(r"([\w.\[\]]+)\.parameters\(\)")


def _persistent_only(call: cst.Call) -> bool:
    """``tf.GradientTape(persistent=True)`` (that argument alone)."""
    a = call.args
    return (len(a) == 1 and a[0].keyword is not None and a[0].keyword.value == "persistent"
            and isinstance(a[0].value, cst.Name) and a[0].value.value == "True")
# what keras.Model gives a train_step from its compile, which TrainStepModule does not carry
COMPILED = {
    "compiled_loss": "the loss compile was given (Keras 2)",
    "compute_loss": "the loss compile was given",
    "compiled_metrics": "the metrics compile was given (Keras 2)",
    "compute_metrics": "the metrics compile was given",
}


def _transform(ctx: FileContext, q: str | None) -> str | None:
    rule = ctx.pack.by_name.get(q) if q else None
    return rule.emit.get("transform") if rule is not None else None


def _params_of(variables: cst.BaseExpression) -> str | None:
    """``model.trainable_variables`` → ``model.parameters()``; a sum of such lists → one list."""
    if isinstance(variables, cst.Attribute) and variables.attr.value in _VARIABLE_LISTS:
        return f"{code(variables.value)}.parameters()"
    if isinstance(variables, (cst.List, cst.Tuple)) and variables.elements and all(
            isinstance(e, cst.Element) and isinstance(e.value, (cst.Name, cst.Attribute)) for e in variables.elements):
        return code(variables.with_changes(lpar=[], rpar=[])) if isinstance(variables, cst.List) else \
            "[" + ", ".join(code(e.value) for e in variables.elements) + "]"  # tf.Variables: torch leaf tensors
    if _dict_values(variables):  # list(weights.values()): a dict's tf.Variables, torch leaf tensors
        return code(variables.with_changes(lpar=[], rpar=[]))
    if isinstance(variables, cst.BinaryOperation) and isinstance(variables.operator, cst.Add):
        left, right = _params_of(variables.left), _params_of(variables.right)
        if left and right:
            parts = [p[1:-1] if p.startswith("[") else f"*{p[5:-1]}" if p.startswith("list(") else f"*{p}"
                     for p in (left, right)]
            return "[" + ", ".join(parts) + "]"
    return None


def _dict_values(node: cst.BaseExpression) -> str | None:
    """``list(D.values())`` (D a name) → D."""
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "list"
            and len(node.args) == 1 and not node.args[0].keyword and not node.args[0].star):
        inner = node.args[0].value
        if (isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, cst.Attribute)
                and inner.func.attr.value == "values" and isinstance(inner.func.value, cst.Name)):
            return inner.func.value.value
    return None


def _dicts_in(node: cst.BaseExpression) -> list[str] | None:
    """The dicts of ``list(D.values())`` or a sum of such lists (and of ``m.trainable_variables``); None where
    ``node`` is something else."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        left, right = _dicts_in(node.left), _dicts_in(node.right)
        return None if left is None or right is None else left + right
    d = _dict_values(node)
    if d is not None:
        return [d]
    return [] if _variable_lists(node) else None


def _zip_of(call: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``zip(grads, variables)`` (or ``list(zip(grads, variables))``, the same pairs) → (grads, variables); a list or
    tuple of pairs written out, ``[(g, v), (g2, v2)]`` (a style transfer's ``[(grads, image)]``), → the list of
    its gradients and the list of its variables, ``[g, g2]`` and ``[v, v2]``."""
    if isinstance(call, (cst.List, cst.Tuple)):
        pairs = [e.value for e in call.elements]
        if not pairs or any(isinstance(e, cst.StarredElement) for e in call.elements) or not all(
                isinstance(p, cst.Tuple) and len(p.elements) == 2
                and not any(isinstance(x, cst.StarredElement) for x in p.elements) for p in pairs):
            return None
        return (cst.List([cst.Element(p.elements[0].value) for p in pairs]),
                cst.List([cst.Element(p.elements[1].value) for p in pairs]))
    if not isinstance(call, cst.Call):
        return None
    if (isinstance(call.func, cst.Name) and call.func.value == "list" and len(call.args) == 1
            and not call.args[0].keyword and not call.args[0].star and isinstance(call.args[0].value, cst.Call)):
        call = call.args[0].value
    if (isinstance(call.func, cst.Name) and call.func.value == "zip" and len(call.args) == 2
            and not any(a.keyword or a.star for a in call.args)):
        return call.args[0].value, call.args[1].value
    return None


def _apply_gradients(node: cst.CSTNode) -> tuple[str, cst.BaseExpression, cst.BaseExpression] | None:
    """``opt.apply_gradients(zip(g, V))`` as a statement → (opt, g, V)."""
    if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Expr)):
        return None
    call = node.body[0].value
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "apply_gradients" and _dotted_name(call.func.value)
            and len(call.args) == 1 and not call.args[0].keyword
            and isinstance(call.args[0].value, (cst.Call, cst.List, cst.Tuple))):
        return None
    pair = _zip_of(call.args[0].value)
    return (code(call.func.value), *pair) if pair else None


def _dotted_name(node: cst.BaseExpression) -> bool:
    """``opt`` or ``self.d_optimizer``: a name or attributes of a name."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def _gradient(node: cst.CSTNode, tape: str) -> tuple[str, cst.BaseExpression, cst.BaseExpression] | None:
    """``g = tape.gradient(loss, V)`` → (g, loss, V)."""
    if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Assign)):
        return None
    a = node.body[0]
    call = a.value
    if not (len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute) and call.func.attr.value == "gradient"
            and isinstance(call.func.value, cst.Name) and call.func.value.value == tape
            and len(call.args) == 2 and not any(a.keyword or a.star for a in call.args)):
        return None
    return a.targets[0].target.value, call.args[0].value, call.args[1].value


# the fit / evaluate / predict arguments the written loops do not take, at the value that changes nothing
_DEFAULTS = {"sample_weight": None, "initial_epoch": 0, "validation_batch_size": None, "validation_freq": 1,
             "class_weight": None, "callbacks": None, "steps": None, "validation_steps": None,
             "steps_per_epoch": None, "shuffle": True, "verbose": 1}


@dataclasses.dataclass
class GivenCompile:
    """A planned compile of a function's parameter, as seen from a call after ``function(model)`` compiled model."""

    compiled: fitloop.Compiled
    function: str


def _default_value(arg: str, value) -> bool:
    """``arg=value`` (a literal) is the argument's default, or a verbosity (what fit prints, not what it computes):
    leaving it out of the written call changes no result (``True == 1`` in Python: the type is compared too)."""
    if arg in ("verbose", *fitloop.LOADING):
        return value is not NOT_LITERAL
    if arg in ("callbacks",) and value in ([], ()):
        return True
    default = _DEFAULTS.get(arg, NOT_LITERAL)
    return default is not NOT_LITERAL and value is not NOT_LITERAL and type(value) is type(default) \
        and value == default


def _method_of(call: cst.Call) -> str | None:
    """``M.fit(...)`` → "fit" for a plain name M."""
    f = call.func
    return f.attr.value if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) else None


def _alike_losses(plan, name: str, bound: list) -> bool:
    """Every binding of ``name`` (``plan.bound_at``: assignments, defs, classes) is a loss object with a literal
    from_logits, all of one loss class, one from_logits and one reduction (literals): a call of the name then takes
    its arguments in the same order and form whichever of them it sees."""
    if len(bound) == 1:  # (its reduction, whatever it is, is the loss transform's to judge)
        return bound[0] is not None and len(plan.bound_at.get(name, [])) == 1
    reductions = plan.loss_reduction_list.get(name, [])
    return (bool(bound) and bound[0] is not None and all(b == bound[0] for b in bound)
            and len(plan.bound_at.get(name, [])) == len(bound)
            and len(reductions) == len(bound) and all(r == reductions[0] for r in reductions)
            and reductions[0] in ("sum_over_batch_size", "auto", "sum", "none", None))


def _loop_method(call: cst.Call) -> str | None:
    """:func:`_method_of`, Keras 2's ``M.fit_generator(...)`` (evaluate_, predict_) as the method it runs."""
    method = _method_of(call)
    return fitloop.GENERATORS[method][0] if method in fitloop.GENERATORS else method


def _loop_args(call: cst.Call, method: str) -> dict | None:
    """The arguments of a fit / evaluate / predict call (or its generator method's) by the method's names."""
    generator = fitloop.GENERATORS.get(_method_of(call))
    if generator is None:
        return fitloop.bind(call, fitloop.METHODS[method][0])
    args = fitloop.bind(call, generator[1])
    if args is not None and "verbose" not in args and generator[2] != 1:
        args["verbose"] = cst.Integer(str(generator[2]))
    return args


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _names_in(nodes) -> set[str]:
    v = _Names()
    for n in nodes:
        scan(n, v)
    return v.names


class _TapeCalls(cst.CSTVisitor):
    """The ``<tape>.gradient(...)`` calls in a statement; ``other``: the tape is used otherwise."""

    def __init__(self, tape: str) -> None:
        self.tape, self.calls, self.other, self._seen = tape, [], False, set()

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == self.tape
                and f.attr.value == "gradient"):
            self.calls.append(node)
            self._seen.add(id(f.value))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.tape and id(node) not in self._seen:
            self.other = True


class _Replace(cst.CSTTransformer):
    """Replaces the calls given by identity."""

    def __init__(self, by_id: dict) -> None:
        self.by_id = by_id

    def leave_Call(self, original_node, updated_node):
        return self.by_id.get(id(original_node), updated_node)


def _dropped_line(ctx: FileContext) -> cst.SimpleStatementLine:
    """A statement holding the line of one that goes (a tape's ``with``): findings are located by
    line until :func:`finish` removes it."""
    ctx.options["_split_lines"] = True
    return cst.SimpleStatementLine([cst.Expr(cst.Call(cst.Name(MARK), []))])


def _deletes(stmt, name: str) -> bool:
    """``del <name>`` as a statement."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Del)
            and isinstance(stmt.body[0].target, cst.Name) and stmt.body[0].target.value == name)


def _attrs_in(nodes) -> set[str]:
    found: set[str] = set()

    class _A(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            found.add(node.attr.value)
    for n in nodes:
        scan(n, _A())
    return found


# --- analysis: optimizers and the variables they update -------------------------------------------

class _Plan(ScopedResolver, cst.CSTVisitor):
    """Which names hold optimizers (and over which parameters) and losses; where names are bound."""

    def __init__(self, ctx: FileContext):
        super().__init__()
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.order = 0
        self.bound_at: dict[str, list[tuple[int, int]]] = {}  # name → (order, scope depth) of each binding
        self.optimizers: dict[str, list[tuple[int, int]]] = {}  # name → (order, depth) of its creation
        self.variables: dict[str, list[cst.BaseExpression]] = {}  # optimizer name → variables given to it
        self.clips: dict[str, dict] = {}  # optimizer name → its clipnorm / global_clipnorm / clipvalue
        # learning-rate schedules: names bound to one (a keras.optimizers.schedules object, or an instance
        # of a LearningRateSchedule subclass of the file), those classes, and the optimizers given one
        # (name → the scope they are bound in); shared with the optimizer transform (optim.is_schedule)
        self.schedules: set[str] = ctx.analyses.setdefault("schedules", set())
        self.schedule_classes: set[str] = ctx.analyses.setdefault("schedule_classes", set())
        self.scheduled: dict[str, int] = {}
        self.rate_writes: set[int] = set()  # attributes written (assigned, .assign(...)): not plain reads
        self.loss_rules: dict[str, list] = {}  # name → (loss rule, from_logits) of each loss it is bound to
        self.loss_reductions: dict[str, object] = {}  # name → the reduction= its loss object was given
        self.loss_reduction_list: dict[str, list] = {}  # name → the reduction of each loss object it is bound to
        self.loss_calls: dict[str, tuple[cst.Call, int]] = {}  # name → the loss object it is bound to, its scope
        self.optimizer_calls: dict[str, cst.Call] = {}  # optimizer name → the call it is bound to (the last)
        self.optimizer_scopes: dict[str, int] = {}  # ... and the scope of that binding (0: the module)
        # optimizer name → (statement, scope) of each binding to a Keras optimizer call, and that call (a notebook
        # binds `optimizer` again before each compile)
        self.optimizer_bindings: dict[str, list[tuple[int, int, cst.Call]]] = {}
        self.values: dict[str, list[tuple[int, int, cst.BaseExpression]]] = {}  # name → (statement, scope, value)
        self.model_calls: list[tuple[str, cst.Call]] = []  # (name, call) of each `name.fit/evaluate/predict(...)`
        self.left_keras: _LeftModels | None = None  # values binding functional models left as written (_functional_left)
        self.compile_statements: dict[int, cst.SimpleStatementLine] = {}  # id of a compile call → its statement
        self._statement: cst.SimpleStatementLine | None = None
        self.compiled_optimizers: set[str] = set()  # optimizer names a planned compile creates over its model
        self.fit_orders: dict[str, list[tuple[int, int]]] = {}  # name → (statement, scope) of each `name.fit(...)`
        # each `M.save("path")` (a string literal): its path → [(M, the call, its statement, its scope)], and the id of each
        # evaluate of a model `keras.models.load_model("path")` gives back → the planned compile of the M saved there
        self.saves: dict[str, list[tuple[str, cst.Call, int, int]]] = {}
        self.loaded: dict[int, fitloop.Compiled] = {}
        # the id of each evaluate of a model `keras.models.load_model("path")` gives back where a ModelCheckpoint of
        # the file wrote path in M.fit(...) → (that fit call, M): the evaluate takes the compile that fit trains with
        self.checkpointed: dict[int, tuple[cst.Call, str]] = {}
        self.mentions: dict[str, int] = {}  # each string literal → how many times the file writes it
        self.loads: dict[str, int] = {}  # each string literal → how many load_model(...) calls it is the path of

        self.compiles: list[tuple[str, cst.Call, int]] = []  # (model name, compile call, scope) of `M.compile(...)`
        self.uses: set[tuple[str, int]] = set()  # (name, scope) of each `name.fit/evaluate/predict(...)`
        self.call_order: dict[int, int] = {}  # id of each compile / fit / evaluate / predict call → its statement
        self.call_scope: dict[int, int] = {}  # id of each fit / evaluate / predict call → its scope
        self.calls_of: dict[str, list[cst.Call]] = {}  # name → the calls of it (`get_model()`)
        self.call_fn: dict[int, cst.FunctionDef | cst.Lambda | None] = {}  # id(such a call) → the function it is in
        # each opt.apply_gradients(zip(grads, V)): (opt's text, the function it is in, V) (_through_calls)
        self.applied: list[tuple[str, cst.FunctionDef | cst.Lambda | None, cst.BaseExpression]] = []
        # ... and (its statement, the function it is in, V) of each, keyed by opt's text (_reached_variables)
        self.applied_at: dict[str, list[tuple[int, cst.FunctionDef | cst.Lambda | None, cst.BaseExpression]]] = {}
        self.assigned_call: dict[int, str] = {}  # id of a call of a name that is `target = <call>` → target
        self.discarded_calls: set[int] = set()  # id of a call of a name that is a statement of its own (`f(x)`)
        self.name_refs: dict[str, int] = {}  # each name → how many times the file writes it (defs included)
        self.top_functions: dict[int, cst.FunctionDef] = {}  # id → the module's own functions (run sets it)
        self.module: cst.Module | None = None  # the module (run sets it)
        self.fit_results: set[str] = set()  # names bound to `M.fit(...)` (their .history is the dict itself)
        self.train_step_classes: set[str] = set()  # keras.Model subclasses with their own train_step
        self.test_step_classes: set[str] = set()  # ... that also define test_step
        self.own_metrics: set[str] = set()  # ... that define their metrics property
        self.instances: dict[str, set[str]] = {}  # name → the classes of the file it is bound to instances of
        # name → for each of its bindings, (its order, its scope, the inputs and the outputs of the functional
        # keras.Model(inputs, outputs) it is bound to; None: any other value); name → the name= of the keras.Input it
        # is bound to (None: anything else)
        self.model_inputs: dict[str, list] = {}
        self.input_names: dict[str, list] = {}
        # name → for each of its bindings, the literal name= of the layer whose call gives it (`Dense(1, name="a")(h)`;
        # None: anything else): the names of a functional model's outputs, by which Keras keys their losses
        self.layer_names: dict[str, list] = {}
        # name → (statement, scope, that literal name= or None) of each `name = ...` binding, and (statement, scope) of
        # each other binding (an element of an unpacking, a for / with / walrus / augmented target): which layer's
        # output a keras.Model(...) statement sees under a name the file binds again elsewhere
        self.layer_bindings: dict[str, list[tuple[int, int, object]]] = {}
        self.input_bindings: dict[str, list[tuple[int, int, object]]] = {}  # the same of input_names
        self.other_bindings: dict[str, list[tuple[int, int]]] = {}
        # the file trains with code of its own (a GradientTape, apply_gradients / minimize, a read of a model's
        # .losses): the terms layers give add_loss may be summed there, where no written loop adds them
        self.own_training = False
        self.add_loss = False  # the file calls add_loss (a compile without a loss then trains on its terms alone)
        self.add_loss_kept = False  # ... and each call has the shape the subclass pass keeps (_add_loss_kept)
        self.compile_args: set[str] = set()  # names passed to a `.compile(...)` call
        self.custom_compiles: set[str] = set()  # train_step classes that define compile
        self.metric_calls: dict[str, list[cst.Call]] = {}  # name → the Keras metric objects it is bound to
        # name → (the literal list / tuple, its scope, its statement) of each `name = [...]` (compile's metrics=name)
        self.lists: dict[str, tuple[cst.List | cst.Tuple, int, int]] = {}
        self.changed: set[str] = set()  # names whose list a method changes (`name.append(...)`) or `name += ...`
        self.names_seen: set[str] = set()  # every name the file writes (an import, a parameter, a use)
        self._not_names: set[int] = set()  # keywords and attribute names (x.metrics, metrics=)
        # train_step classes → what of Keras 2's compiled loss / metrics their methods read (COMPILED, "metrics")
        self.compiled_uses: dict[str, set[str]] = {}
        # a class name defined more than once (a tutorial's successive `class CustomModel`): each definition's
        # (statement, ClassDef) and its own compiled uses (id(ClassDef) → them), so each pairs with its own compiles
        self.class_defs: dict[str, list[tuple[int, cst.ClassDef]]] = {}
        self.compiled_uses_at: dict[int, set[str]] = {}
        self.train_step_defs: set[int] = set()  # id of each ClassDef of train_step_classes
        self.metric_attrs: dict[str, list[str]] = {}  # ... and the Keras metric objects they keep as attributes
        self.class_methods: dict[str, set[str]] = {}  # class of the file → the methods it defines
        self.star_inits: set[str] = set()  # classes of the file whose __init__ takes *args or **kwargs
        self.loss_classes: set[str] = set()  # the file's keras.losses.Loss subclasses (KerasLoss in the output)
        # name → (the call of such a class it is bound to, its scope, its statement) of each binding to one
        self.loss_objects: dict[str, list[tuple[cst.Call, int, int]]] = {}
        self.globals: set[str] = set()  # names a function declares global
        self._classes: list[str] = []

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.order += 1
        self._statement = node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        self.bound_at.setdefault(node.name.value, []).append((self.order, len(self._scopes)))
        return super().visit_FunctionDef(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.bound_at.setdefault(node.name.value, []).append((self.order, len(self._scopes)))
        self.class_defs.setdefault(node.name.value, []).append((self.order, node))
        if any(b.keyword is None and self.qualname(b.value) == SCHEDULE for b in node.bases):
            self.schedule_classes.add(node.name.value)
        if any(b.keyword is None and self.qualname(b.value) == runtime.LOSS_BASE for b in node.bases):
            self.loss_classes.add(node.name.value)
        methods = {s.name.value for s in node.body.body if isinstance(s, cst.FunctionDef)}
        self.class_methods[node.name.value] = methods
        if any(isinstance(s, cst.FunctionDef) and s.name.value == "__init__" and (
                isinstance(s.params.star_arg, cst.Param) or s.params.star_kwarg is not None) for s in node.body.body):
            self.star_inits.add(node.name.value)  # (its *args may be Keras's functional constructor's: _value_class)
        if "train_step" in methods and any(b.keyword is None and self.qualname(b.value) == "keras.Model"
                                           for b in node.bases):
            self.train_step_classes.add(node.name.value)
            self.train_step_defs.add(id(node))
            if "test_step" in methods:
                self.test_step_classes.add(node.name.value)
            if "metrics" in methods:
                self.own_metrics.add(node.name.value)
            if "compile" in methods:
                self.custom_compiles.add(node.name.value)
            uses = _CompiledUses(self)
            scan(node.body, uses)
            # a method the class defines itself (its own compute_loss) is no attribute Keras's compile gives it
            self.compiled_uses[node.name.value] = uses.used - (methods - {"metrics"})
            self.compiled_uses_at[id(node)] = self.compiled_uses[node.name.value]
            self.metric_attrs[node.name.value] = uses.metric_attrs

    def visit_Assign(self, node: cst.Assign) -> None:
        if (isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name) and len(node.targets) == 1
                and isinstance(node.targets[0].target, cst.Name)):
            self.assigned_call[id(node.value)] = node.targets[0].target.value
            self.call_order[id(node.value)] = self.order
            self.call_scope[id(node.value)] = self._scope_id()
        if isinstance(node.value, cst.Call) and _loop_method(node.value) == "fit":
            self.fit_results |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                name = t.target.value
                self.bound_at.setdefault(name, []).append((self.order, len(self._scopes)))
                self.values.setdefault(name, []).append((self.order, self._scope_id(), node.value))
                if isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name):
                    self.instances.setdefault(name, set()).add(node.value.func.value)
                    if node.value.func.value in self.schedule_classes:
                        self.schedules.add(name)
                    if node.value.func.value in self.loss_classes:
                        self.loss_objects.setdefault(name, []).append((node.value, self._scope_id(), self.order))
                else:
                    self.instances.setdefault(name, set()).add("")
                if isinstance(node.value, (cst.List, cst.Tuple)):
                    self.lists[name] = (node.value, self._scope_id(), self.order)
                q = self.qualname(node.value.func) if isinstance(node.value, cst.Call) else None
                functional = q == "keras.Model"
                self.model_inputs.setdefault(name, []).append(
                    (self.order, self._scope_id(), call_argument(node.value, "inputs", 0, star_stops=True) if functional else None,
                     call_argument(node.value, "outputs", 1, star_stops=True) if functional else None))
                # (name= by keyword: Keras 2's third positional parameter is name, Keras 3's dtype)
                given = call_argument(node.value, "name", star_stops=True) if q == "keras.Input" else None
                self.input_names.setdefault(name, []).append(literal_value(given, None) if given is not None
                                                             else None)
                self.input_bindings.setdefault(name, []).append((self.order, self._scope_id(),
                                                                 self.input_names[name][-1]))
                layer = node.value.func if isinstance(node.value, cst.Call) else None
                named_as = call_argument(layer, "name", star_stops=True) if isinstance(layer, cst.Call) else None
                self.layer_names.setdefault(name, []).append(literal_value(named_as, None) if named_as is not None
                                                             else None)
                self.layer_bindings.setdefault(name, []).append((self.order, self._scope_id(),
                                                                 self.layer_names[name][-1]))
                if isinstance(node.value, cst.Call):
                    q = self.qualname(node.value.func)
                    kind = _transform(self.ctx, q)
                    if kind == "optimizer":
                        self.optimizers.setdefault(name, []).append((self.order, len(self._scopes)))
                        self.optimizer_calls[name] = node.value
                        self.optimizer_scopes[name] = self._scope_id()
                        self.optimizer_bindings.setdefault(name, []).append((self.order, self._scope_id(), node.value))
                        values = bind_call(node.value, self.ctx.pack.by_name[q]).values
                        clips = {k: values[k] for k in optim.CLIPS
                                 if k in values and literal_value(values[k], NOT_LITERAL) is not None}
                        if clips:
                            self.clips[name] = clips
                        if optim.is_schedule(values.get("learning_rate"), self.ctx):
                            self.scheduled[name] = self._scope_id()
                    elif kind == "schedule":
                        self.schedules.add(name)
                    elif kind == "metric":
                        self.metric_calls.setdefault(name, []).append(node.value)
                    elif kind == "loss":
                        rule = self.ctx.pack.by_name[q]
                        bound = bind_call(node.value, rule)
                        value = bound.values.get("from_logits")
                        logits = False if value is None else literal_value(value, NOT_LITERAL)
                        self.loss_rules.setdefault(name, []).append((rule, logits) if logits in (True, False) else None)
                        self.loss_calls[name] = (node.value, self._scope_id())
                        if "reduction" in bound.values:
                            self.loss_reductions[name] = optim.reduction_literal(bound.values["reduction"], self.ctx)
                        self.loss_reduction_list.setdefault(name, []).append(
                            optim.reduction_literal(bound.values["reduction"], self.ctx)
                            if "reduction" in bound.values else "sum_over_batch_size")
            else:
                self._other_binding(t.target)

    def _scope_id(self) -> int:
        return id(self._scopes[-1]) if self._scopes else 0

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.rate_writes.add(id(node.target))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._not_names:
            self.names_seen.add(node.value)
            self.name_refs[node.value] = self.name_refs.get(node.value, 0) + 1

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:  # (a keyword, not a name of the file)
            self._not_names.add(id(node.keyword))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_names.add(id(node.attr))
        if node.attr.value == "add_loss":
            self.add_loss = True
        if node.attr.value in ("GradientTape", "apply_gradients", "minimize", "train_on_batch") or (
                node.attr.value == "losses" and not (self.qualname(node) or "").startswith("keras.")):
            self.own_training = True  # (keras.losses: the module)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.mentions[node.value] = self.mentions.get(node.value, 0) + 1

    def visit_Global(self, node: cst.Global) -> None:
        self.globals |= {n.name.value for n in node.names}

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.rate_writes.add(id(node.target))
        if isinstance(node.target, cst.Name):
            self.changed.add(node.target.value)
        self._other_binding(node.target)

    def _other_binding(self, target) -> None:
        """Each name ``target`` binds (a name, the elements of an unpacking), in :attr:`other_bindings`."""
        if isinstance(target, cst.Name):
            self.other_bindings.setdefault(target.value, []).append((self.order, self._scope_id()))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._other_binding(e.value)
        elif isinstance(target, cst.StarredElement):
            self._other_binding(target.value)

    def visit_For(self, node: cst.For) -> None:
        self._other_binding(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._other_binding(node.asname.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._other_binding(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name):
            self.calls_of.setdefault(node.func.value, []).append(node)
            self.call_fn[id(node)] = self._scopes[-1] if self._scopes else None
            self.call_order.setdefault(id(node), self.order)  # (`compile_and_fit(model)`: where it compiles model)
            self.call_scope.setdefault(id(node), self._scope_id())
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "exclude_from_weight_decay":
            self.call_order.setdefault(id(node), self.order)  # (`model.optimizer.exclude_...`: the compile before)
            self.call_scope.setdefault(id(node), self._scope_id())
        if (isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name)
                and node.func.attr.value in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse")):
            self.changed.add(node.func.value.value)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "assign":
            self.rate_writes.add(id(node.func.value))  # opt.learning_rate.assign(v)
        if _loop_method(node) in fitloop.FUNCTIONS:
            self.uses.add((node.func.value.value, self._scope_id()))
            self.call_order[id(node)] = self.order
            self.call_scope[id(node)] = self._scope_id()
            self.model_calls.append((node.func.value.value, node))
            if _loop_method(node) == "fit":
                self.fit_orders.setdefault(node.func.value.value, []).append((self.order, self._scope_id()))
        if (node.args and isinstance(node.args[0].value, cst.SimpleString) and (
                node.func.attr.value if isinstance(node.func, cst.Attribute) else getattr(node.func, "value", "")) in (
                "load_model",)):
            self.loads[node.args[0].value.value] = self.loads.get(node.args[0].value.value, 0) + 1
        if (isinstance(node.func, cst.Attribute) and node.func.attr.value == "save" and isinstance(node.func.value, cst.Name)
                and node.args and isinstance(node.args[0].value, cst.SimpleString) and node.args[0].keyword is None):
            self.saves.setdefault(node.args[0].value.value, []).append(
                (node.func.value.value, node, self.order, self._scope_id()))
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "compile":
            self.compile_args |= {a.value.value for a in node.args if isinstance(a.value, cst.Name)}

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name):
            self.discarded_calls.add(id(call))
        if isinstance(call, cst.Call) and _method_of(call) == "compile" and isinstance(call.func.value, cst.Name):
            self.compiles.append((call.func.value.value, call, self._scope_id()))
            self.call_order[id(call)] = self.order
            self.compile_statements[id(call)] = self._statement
        if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "apply_gradients" and _dotted_name(call.func.value)
                and call.args and isinstance(call.args[0].value, (cst.Call, cst.List, cst.Tuple))):
            pair = _zip_of(call.args[0].value)
            fn = self._scopes[-1] if self._scopes else None
            if pair and isinstance(call.args[0].value, (cst.List, cst.Tuple)) and isinstance(
                    fn, (cst.FunctionDef, cst.Lambda)) and _names_in([pair[1]]) & bound_names(fn):
                pair = None  # [(grad, image)] on a parameter or local of a function: not the module's image
            if pair:  # keyed by the optimizer's name, or `self.d_optimizer` for an attribute
                variables = _bound_variables(fn, pair[1])
                self.variables.setdefault(code(call.func.value), []).append(variables)
                self.applied.append((code(call.func.value), fn, variables))
                self.applied_at.setdefault(code(call.func.value), []).append((self.order, fn, variables))


def _bound_variables(fn, variables: cst.BaseExpression) -> cst.BaseExpression:
    """``trainable_vars`` bound once, in the enclosing function, to ``X.trainable_variables`` (or
    ``trainable_weights``) and nowhere else → that attribute (whose parameters fwport names); else as given."""
    if not (isinstance(variables, cst.Name) and isinstance(fn, cst.FunctionDef)):
        return variables
    name = variables.value
    if name in {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)}:
        return variables
    values: list = []

    class _Bindings(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(name in {n.value for n in _target_names(t.target)} for t in node.targets):
                values.append(node.value if len(node.targets) == 1
                              and isinstance(node.targets[0].target, cst.Name) else None)

        def visit_AugAssign(self, node) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                values.append(None)

        def visit_AnnAssign(self, node) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                values.append(None)

        def visit_For(self, node) -> None:
            if name in {n.value for n in _target_names(node.target)}:
                values.append(None)

        def visit_WithItem(self, node) -> None:
            if node.asname is not None and name in {n.value for n in _target_names(node.asname.name)}:
                values.append(None)

    scan(fn.body, _Bindings())
    if len(values) == 1 and (_variable_lists(values[0]) or _dicts_in(values[0])) and name not in _names_in([values[0]]):
        return values[0]
    return variables


def _variable_lists(node: cst.BaseExpression) -> bool:
    """``a.trainable_variables`` or a sum of such lists (``g.trainable_variables + e.trainable_variables``)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return _variable_lists(node.left) and _variable_lists(node.right)
    return isinstance(node, cst.Attribute) and node.attr.value in _VARIABLE_LISTS and _dotted_name(node.value)


class _CompiledUses(cst.CSTVisitor):
    """In a train_step class: the attributes of Keras 2's compile it reads (``self.compiled_loss``,
    ``self.compiled_metrics``, ``self.metrics``, ``self.compute_loss``...) and the Keras metric objects it
    keeps as attributes (``self.loss_tracker = keras.metrics.Mean()``: Keras lists them in self.metrics)."""

    def __init__(self, plan: "_Plan") -> None:
        self.plan, self.used, self.metric_attrs = plan, set(), []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if (isinstance(node.value, cst.Name) and node.value.value == "self"
                and (node.attr.value in COMPILED or node.attr.value == "metrics")):
            self.used.add(node.attr.value)

    def visit_Call(self, node: cst.Call) -> None:
        if _is_self_attr(node.func, "compiled_loss") and (len([a for a in node.args if a.keyword is None]) > 2 or any(
                a.keyword is not None and a.keyword.value == "sample_weight" for a in node.args)):
            self.used.add("weighted_loss")  # compiled_loss(y, y_pred, sample_weight=...)
        if _is_self_attr(node.func, "compute_loss") and (len([a for a in node.args if a.keyword is None]) > 3 or any(
                a.keyword is not None and a.keyword.value == "sample_weight" for a in node.args)):
            self.used.add("weighted_loss")  # compute_loss(x, y, y_pred, sample_weight=...)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and _transform(self.plan.ctx, self.plan.qualname(node.value.func)) == "metric":
            self.metric_attrs += [code(t.target) for t in node.targets if isinstance(t.target, cst.Attribute)]


def _called_as_loss(cls: cst.ClassDef, attr: str) -> bool:
    """Whether every ``self.<attr>`` in the class is assigned or called as ``self.<attr>(y_true, y_pred)``
    (what a lambda in Keras's order takes: no sample_weight, no attribute of the loss object)."""
    calls = {id(c.func) for c in find_all(cls.body, cst.Call)
             if len(c.args) == 2 and all(a.keyword is None and not a.star for a in c.args)}
    targets = {id(t.target) for t in find_all(cls.body, cst.AssignTarget)}
    uses = [n for n in find_all(cls.body, cst.Attribute) if _is_self_attr(n, attr)]
    return bool(uses) and all(id(n) in calls | targets for n in uses) and any(id(n) in calls for n in uses)


def _kept_as_attribute(fn: cst.FunctionDef, param: str | int) -> str | None:
    """The attribute a compile method keeps its parameter in (``self.loss_fn = loss_fn``, the parameter used
    nowhere else); ``param``: its name, or its position after self."""
    params = list(fn.params.params)
    if isinstance(param, int):
        if param >= len(params):
            return None
        param = params[param].name.value
    elif param not in {p.name.value for p in (*params, *fn.params.kwonly_params)}:
        return None
    attrs = {id(a.attr) for a in find_all(fn.body, cst.Attribute)}  # (self.loss_fn's loss_fn is no use of it)
    names = [n for n in find_all(fn.body, cst.Name) if n.value == param and id(n) not in attrs]
    kept = [a for a in find_all(fn.body, cst.Assign) if isinstance(a.value, cst.Name) and a.value.value == param
            and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Attribute)
            and _is_self_attr(a.targets[0].target, a.targets[0].target.attr.value)]
    return kept[0].targets[0].target.attr.value if len(kept) == 1 and len(names) == 1 else None


def _given_model(fn, name: str) -> bool:
    """``name`` is a parameter of the function ``fn`` (``def run_experiment(model, ...)``) that its body never binds
    again: the model exists when the function starts, whatever the file binds to that name in other functions later
    in the file (a torch optimizer created there takes its parameters)."""
    if not isinstance(fn, cst.FunctionDef):
        return False
    p = fn.params
    if name not in {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}:
        return False

    class _Binds(cst.CSTVisitor):
        found = False

        def visit_Name(self, node):
            return None

        def _targets(self, target):
            if any(isinstance(n, cst.Name) and n.value == name for n in find_all(target, cst.Name)):
                self.found = True

        def visit_AssignTarget(self, node):
            self._targets(node.target)

        def visit_AugAssign(self, node):
            self._targets(node.target)

        def visit_AnnAssign(self, node):
            self._targets(node.target)

        def visit_For(self, node):
            self._targets(node.target)

        def visit_AsName(self, node):
            self._targets(node.name)

        def visit_NamedExpr(self, node):
            self._targets(node.target)

        def visit_Global(self, node):
            self.found = True  # (conservative)

        def visit_Nonlocal(self, node):
            self.found = True

    binds = _Binds()
    fn.body.visit(binds)
    return not binds.found


def _self_owners(variables: cst.BaseExpression) -> list[str] | None:
    """``self.g.trainable_variables`` (or a sum of such) → ["g"]; None for anything else."""
    if isinstance(variables, cst.Attribute) and variables.attr.value in _VARIABLE_LISTS:
        owner = variables.value
        if isinstance(owner, cst.Attribute) and _is_self_attr(owner, owner.attr.value):
            return [owner.attr.value]
        return None
    if isinstance(variables, cst.BinaryOperation) and isinstance(variables.operator, cst.Add):
        left, right = _self_owners(variables.left), _self_owners(variables.right)
        return left + right if left is not None and right is not None else None
    return None


def _self_attr_bindings(cls: cst.ClassDef, attr: str) -> int:
    """How many times the class's code binds ``self.<attr>`` (assignments, augmented ones, for targets)."""
    n = 0
    for kind in (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For):
        for node in find_all(cls.body, kind):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            n += sum(1 for t in targets for a in find_all(t, cst.Attribute) if _is_self_attr(a, attr))
    return n


def _only_applied(cls: cst.ClassDef, attr: str) -> bool:
    """Every read of ``self.<attr>`` in the class is ``self.<attr>.apply_gradients(...)`` or an argument of a
    tf.train.Checkpoint(...) (which saves it); its binding is the one target."""
    class _Reads(cst.CSTVisitor):
        def __init__(self):
            self.ok = True
            self._allowed: set[int] = set()

        def visit_Assign(self, node):
            for t in node.targets:
                self._allowed.add(id(t.target))

        def visit_Call(self, node):
            f = node.func
            name = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else ""
            if name in ("Checkpoint", "CheckpointManager"):
                for a in node.args:
                    self._allowed.add(id(a.value))

        def visit_Attribute(self, node):
            if isinstance(node.value, cst.Attribute) and _is_self_attr(node.value, attr):
                if node.attr.value == "apply_gradients":
                    self._allowed.add(id(node.value))
            if _is_self_attr(node, attr) and id(node) not in self._allowed:
                self.ok = False

    reads = _Reads()
    cls.body.visit(reads)
    return reads.ok


def _is_self_attr(node: cst.BaseExpression, attr: str) -> bool:
    """``self.<attr>``."""
    return (isinstance(node, cst.Attribute) and node.attr.value == attr and isinstance(node.value, cst.Name)
            and node.value.value == "self")


# compile's metric strings → the written metric class (Keras 2 names the metric by the string given)
_STRING_METRICS = {"sparse_categorical_accuracy": "SparseCategoricalAccuracy",
                   "categorical_accuracy": "CategoricalAccuracy", "binary_accuracy": "BinaryAccuracy",
                   "mae": "MeanAbsoluteError", "mean_absolute_error": "MeanAbsoluteError",
                   "mse": "MeanSquaredError", "mean_squared_error": "MeanSquaredError",
                   "mape": "MeanAbsolutePercentageError", "mean_absolute_percentage_error": "MeanAbsolutePercentageError",
                   # a loss's name: Keras's mean of that loss over the epoch (a MeanMetricWrapper of the loss function)
                   "binary_crossentropy": "BinaryCrossentropy", "categorical_crossentropy": "CategoricalCrossentropy",
                   "sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
                   "cosine_similarity": "CosineSimilarity"}
# a Keras metric function given itself (`metrics=[keras.metrics.binary_accuracy]`): Keras wraps it in a
# MeanMetricWrapper named after the function (its __name__: tf_keras's mse alias is mean_squared_error), the same
# numbers as the string of that name
_FUNCTION_METRICS = {n: n for n in ("sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy",
                                    "mean_absolute_error", "mean_squared_error", "mean_absolute_percentage_error",
                                    "binary_crossentropy", "categorical_crossentropy", "sparse_categorical_crossentropy")}
_FUNCTION_METRICS.update(mae="mean_absolute_error", mse="mean_squared_error", mape="mean_absolute_percentage_error")
# "accuracy" under a loss whose labels decide it (Keras 2: sparse labels → sparse_categorical_accuracy,
# one-hot → categorical_accuracy; a binary cross-entropy's depends on the outputs' last axis)
_ACCURACY_FOR_LOSS = {"keras.losses.SparseCategoricalCrossentropy": "SparseCategoricalAccuracy",
                      "keras.losses.CategoricalCrossentropy": "CategoricalAccuracy"}


def _compile_metrics(node, plan, ctx: FileContext, qualname, accuracy: str | None, lists=None,
                     crossentropy: list | None = None, confusion: list | None = None) -> list | str:
    """compile's metrics= (a list written there; with ``lists``, also a name ``lists(name)`` gives the one literal
    list it is bound to) → [(Keras's name for it, the metric's expression, written class or "")], or why not. A
    string names its class, under the string's name; ``accuracy``: the class "accuracy" / "acc" is (None: refused,
    Keras 2 would pick it by shapes the pass does not know). A metric object keeps its name= or Keras's default
    name; the expression of an element of a named list is ``name[i]`` (the list's own object). ``crossentropy``:
    gets the names of the cross-entropy metrics (fitloop.CROSSENTROPY_METRICS), which take the loop's logits;
    ``confusion``: those of the confusion-matrix metrics (fitloop.CONFUSION_METRICS)."""
    if node is None or literal_value(node, NOT_LITERAL) in (None, [], ()):
        return []
    owner = None
    if isinstance(node, cst.Name) and lists is not None:
        owner, node = node.value, lists(node.value)
        if node is None:
            return (f"metrics={owner}: {owner} is not a name bound once, before the compile, to a literal list (nor a "
                    "parameter whose default is one, which no call gives)")
    if not isinstance(node, (cst.List, cst.Tuple)):
        return f"metrics={code(node)} is not a list written in the compile"
    out = []
    for i, e in enumerate(node.elements):
        m = e.value
        if isinstance(e, cst.StarredElement):
            return f"metrics={code(node)} unpacks a list: write its metrics out"
        lit = literal_value(m, NOT_LITERAL)
        function = qualname(m) if isinstance(m, (cst.Attribute, cst.Name)) else None
        if function is not None and function.startswith("keras.metrics.") and \
                function[len("keras.metrics."):] in _FUNCTION_METRICS:
            lit = _FUNCTION_METRICS[function[len("keras.metrics."):]]
        if isinstance(lit, str):
            cls = _STRING_METRICS.get(lit)
            if lit in fitloop.ACCURACY:
                # no loss to tell it: Keras picks it from the shapes of the labels and outputs, as the
                # written ShapeAccuracy does at each update
                cls = accuracy
                if cls is None:
                    return (f"metrics=[{lit!r}]: Keras 2 picks the accuracy from the labels' and outputs' shapes "
                            "here; name it (keras.metrics.SparseCategoricalAccuracy(), ...)")
            if cls is None:
                return f"the metric {lit!r} is not translated"
            out.append((lit, parsed_expression(f"{cls}()"), cls))
            optim.keras2_metric_warning(ctx, m, cls)
            if crossentropy is not None and cls in fitloop.CROSSENTROPY_METRICS:
                crossentropy.append(lit)
            if confusion is not None and cls in fitloop.CONFUSION_METRICS:
                confusion.append(lit)
            continue
        call = m
        if isinstance(m, cst.Name) and _metric_function(plan, m.value):
            # the file's own metric function: Keras wraps it in a MeanMetricWrapper named after it
            wrapped = f"MeanMetricWrapper({m.value}{', keras2=True' if ctx.version == 2 else ''})"
            out.append((m.value, parsed_expression(wrapped), "MeanMetricWrapper"))
            continue
        if isinstance(m, cst.Name):
            bound = plan.metric_calls.get(m.value, [])
            if len(bound) != 1 or len(plan.bound_at.get(m.value, [])) != 1:
                return f"the metric {m.value} is not a name bound once to a Keras metric object"
            call = bound[0]
        q = qualname(call.func) if isinstance(call, cst.Call) else None
        if _transform(ctx, q) != "metric" or q == "keras.metrics.Mean":
            return f"the metric {code(m)} is not a Keras metric object of y_true and y_pred fwport translates"
        rule = ctx.pack.by_name[q]
        given = bind_call(call, rule).values.get("name")
        default = next((p.default for p in rule.params if p.name == "name"), None)
        name = literal_value(given, NOT_LITERAL) if given is not None else (
            literal_value(parsed_expression(default), NOT_LITERAL) if default else NOT_LITERAL)
        if name is None and given is None:  # Keras names it after its class: TruePositives → true_positives
            name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", q.split(".")[-1])).lower()
        if not isinstance(name, str):
            return f"the metric {code(m)}: its name is not a literal"
        out.append((name, parsed_expression(f"{owner}[{i}]") if owner else m, ""))
        if crossentropy is not None and rule.emit.get("options", {}).get("class") in fitloop.CROSSENTROPY_METRICS:
            crossentropy.append(name)
        if confusion is not None and rule.emit.get("options", {}).get("class") in fitloop.CONFUSION_METRICS:
            confusion.append(name)
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        return "two compiled metrics have one name"
    return out


def _metric_function(plan, name: str) -> bool:
    """Whether ``name`` is a function of the module, bound once, of (y_true, y_pred) (a metric function)."""
    fn = next((f for f in plan.top_functions.values() if f.name.value == name), None)
    if fn is None or len(plan.bound_at.get(name, [])) != 1:
        return False
    p = fn.params
    required = [x for x in (*p.posonly_params, *p.params) if x.default is None]
    return len(required) == 2 and all(x.default is not None for x in p.kwonly_params)


def _receiver_root(func: cst.BaseExpression) -> cst.Name | None:
    """The name under ``a.b[0].c`` (subscripts by a name or a literal only: the receiver is written
    twice, once in its train()/eval() line); None for anything else."""
    while True:
        if isinstance(func, cst.Attribute):
            func = func.value
        elif (isinstance(func, cst.Subscript) and len(func.slice) == 1
              and isinstance(func.slice[0].slice, cst.Index)
              and isinstance(func.slice[0].slice.value, (cst.Name, cst.Integer, cst.SimpleString))):
            func = func.value
        else:
            return func if isinstance(func, cst.Name) else None


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names a for-target binds (``x``, ``(i, (a, b))``, ``[*rest]``)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


def _without_bases(original_node: cst.ClassDef, updated_node: cst.ClassDef, removed: list) -> cst.ClassDef:
    bases = [b for o, b in zip(original_node.bases, updated_node.bases) if o not in removed]
    if bases:
        bases[-1] = bases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(bases=bases)
    return updated_node.with_changes(bases=[], lpar=cst.MaybeSentinel.DEFAULT, rpar=cst.MaybeSentinel.DEFAULT)


# --- rewriting ---------------------------------------------------------------------------------------

_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


class _Training(ScopedResolver, cst.CSTTransformer):
    def __init__(self, ctx: FileContext, plan: _Plan, models: _Models, compiled: list[fitloop.Compiled] = ()):
        super().__init__()
        self.compiled = list(compiled)  # the file's compiles the written-out loop reproduces
        self.ctx = ctx
        self.plan = plan
        self.models = models
        self._init_scopes(ctx.imports)
        self.order = 0
        self.prefixes: list[list[cst.BaseExpression]] = []  # per open simple statement: lines to put before it
        self.suffixes: list[list[cst.BaseSmallStatement]] = []  # ... and statements to put on a line after it
        self.schedulers: dict[str, str] = {}  # optimizer name → the name of its LambdaLR
        self.classes: list[str] = []  # the enclosing class definitions
        self._keras_class: list[bool] = []  # per enclosing class: a Keras model or layer (the subclass pass's)
        self._callback_class: list[bool] = []  # ... a keras.callbacks.Callback subclass
        self._callback_predicts: set[int] = set()  # self.model.predict of callbacks → the written predict
        self._class_nodes: list[cst.ClassDef] = []  # the enclosing class definitions (input tree)
        self._moves: dict[int, list] = {}  # id of an __init__ → optimizer lines to move after their models
        self._module_moves: list = []  # module-level optimizer lines to move after their models (_movable)
        self._keras_classes: set[str] = set()
        self._comprehensions: list[cst.CSTNode] = []
        self._deferred = 0  # open lambdas, conditional expressions, and / or: code that may run later or never
        self._defined_names: set[str] | None = None
        self._compiled_why: dict[tuple[str, int], str | None] = {}  # train_step class → why its compiles cannot be kept
        self._accepted: set[int] = set()  # self.compiled_loss / compiled_metrics / metrics nodes read as Keras 2 does
        self._not_accepted: dict[int, str] = {}  # ... and why others are not
        # loss name → (rule, from_logits): names bound only to loss objects with a literal from_logits, each of the
        # same class, from_logits and reduction (bound once, or rebound alike: whichever binding a call sees, its
        # arguments are adapted the same way; each binding becomes the torch loss of its own arguments)
        self.loss_names = {n: b[0] for n, b in plan.loss_rules.items() if _alike_losses(plan, n, b)}

    def on_leave(self, original_node, updated_node):
        # nodes an earlier pass settled keep their identity for the passes after this one
        out = default_leave_transform(self, original_node, updated_node)
        return original_node if self.ctx.is_settled(original_node) else out

    # -- scopes of the model analysis
    def _chain(self):
        top = self.models.scopes.get(id(self.module))
        chain = [top] if top is not None else []
        for fn in self._scopes:
            s = self.models.scopes.get(id(fn))
            if s is not None:
                chain.append(s)
        return chain

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.order += 1
        self.prefixes.append([])
        self.suffixes.append([])

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node.name.value)
        keras = any((self.qualname(b.value) or "").startswith(("keras.", "tensorflow."))
                    or (isinstance(b.value, cst.Name) and b.value.value in self._keras_classes) for b in node.bases)
        if keras:
            self._keras_classes.add(node.name.value)
        self._keras_class.append(keras)
        self._callback_class.append(any(b.keyword is None and self.qualname(b.value) == CALLBACK for b in node.bases))
        self._class_nodes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        self._keras_class.pop()
        self._callback_class.pop()
        self._class_nodes.pop()
        callback = [b for b in original_node.bases if b.keyword is None and self.qualname(b.value) == CALLBACK]
        schedule = [b for b in original_node.bases if b.keyword is None and self.qualname(b.value) == SCHEDULE]
        if schedule:  # a plain class: its __call__(step) is what LambdaLR calls (see _scheduler)
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{original_node.name.value}(LearningRateSchedule) → a plain class: an optimizer given "
                            "an instance gets a torch.optim.lr_scheduler.LambdaLR that calls it with the step, as a "
                            "tensor, before each update, as Keras does", schedule[0].value)
            return _without_bases(original_node, updated_node, schedule)
        if not callback:
            return updated_node
        # a keras.callbacks.Callback subclass: a plain class, which TrainStepModule.fit (and the generated
        # fit) give .model and call on_epoch_end(epoch, logs) as Keras does
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{original_node.name.value}(keras.callbacks.Callback) → a plain class: fit sets its .model "
                        "and calls its on_train_begin(), on_epoch_begin(epoch), on_epoch_end(epoch, logs) and "
                        "on_train_end() as Keras does", callback[0].value)
        seen = set()
        for attr in find_all(original_node.body, cst.Attribute):
            if (isinstance(attr.value, cst.Attribute) and dotted_text(attr.value) == "self.model"
                    and attr.attr.value in CALLBACK_MODEL_ONLY and attr.attr.value not in seen):
                seen.add(attr.attr.value)
                if id(attr) in self._callback_predicts:  # → the file's written predict(self.model, x)
                    continue
                if self.plan.train_step_classes and attr.attr.value in ("fit", "compile", "evaluate", "predict"):
                    # the model may be a TrainStepModule of the file, which has these (written where they are used)
                    self.ctx.options[f"_train_step_{attr.attr.value}"] = True
                    continue
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"self.model.{attr.attr.value}: fit gives {original_node.name.value} the nn.Module it "
                                f"trains, which has no {attr.attr.value} (only the .optimizer and .stop_training "
                                f"fit sets): {CALLBACK_MODEL_ONLY[attr.attr.value]}", attr)
        for stmt in original_node.body.body:  # hooks no translated fit calls would silently never run
            if (isinstance(stmt, cst.FunctionDef) and stmt.name.value.startswith("on_")
                    and stmt.name.value not in CALLBACK_HOOKS):
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"{original_node.name.value}.{stmt.name.value}: the translated fit calls only "
                                f"{', '.join(CALLBACK_HOOKS)}; call this hook from your training loop (per batch: "
                                "inside it) or move its work to one of those", stmt)
        return _without_bases(original_node, updated_node, callback)

    def leave_FunctionDef(self, original_node, updated_node):
        updated_node = super().leave_FunctionDef(original_node, updated_node)
        moves = self._moves.pop(id(original_node), None)
        if moves:
            updated_node = self._move_optimizers(updated_node, moves)
        if (original_node.name.value == "compile" and self._in_train_step_class()
                and len(self._scopes) == 0):
            return self._custom_compile(updated_node)
        return updated_node

    def _custom_compile(self, fn: cst.FunctionDef) -> cst.FunctionDef:
        """A train_step model's own ``compile(self, d_optimizer, ...)``: ``self.d_optimizer = d_optimizer``
        → ``self.d_optimizer = d_optimizer(<the parameters self.d_optimizer.apply_gradients updates>)``
        (the optimizers given to compile are factories, see _train_step_call)."""
        params = {p.name.value for p in fn.params.params}
        body = list(fn.body.body)
        changed = False
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                    and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1):
                continue
            a = stmt.body[0]
            target, value = a.targets[0].target, a.value
            if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                    and target.value.value == "self" and isinstance(value, cst.Name) and value.value in params):
                continue
            variables = self.plan.variables.get(code(target), [])
            texts = {code(v) for v in variables}
            if not texts:
                continue
            made = _params_of(variables[0]) if len(texts) == 1 else None
            if made is None:
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"{code(target)} = {value.value}: this optimizer updates {' and '.join(sorted(texts))}; "
                                "fwport creates a torch optimizer given to compile over the parameters of one "
                                "model's trainable_variables: create it by hand over the parameters it updates", a)
                continue
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{code(target)} = {value.value} → {value.value}({made}): the optimizer given to compile "
                            f"is created over the parameters {code(target)}.apply_gradients updates", a)
            body[i] = stmt.with_changes(body=[a.with_changes(value=parsed_expression(f"{value.value}({made})"))])
            changed = True
        return fn.with_changes(body=fn.body.with_changes(body=body)) if changed else fn

    def leave_SimpleStatementLine(self, original_node, updated_node):
        compiled = self._compile_statement(original_node, updated_node)
        if compiled is not None:
            self.prefixes.pop()
            self.suffixes.pop()
            return compiled
        before, after = self.prefixes.pop(), self.suffixes.pop()
        if not before and not after:
            return updated_node
        marked = [m for b in before for m in (
            (b, cst.Expr(cst.Call(cst.Name(MARK)))) if isinstance(b, cst.BaseSmallStatement)  # a statement, a break
            else (cst.Expr(cst.Call(cst.Name(MARK), [cst.Arg(b)])),))]
        if after:
            after = [cst.Expr(cst.Call(cst.Name(MARK))), *after]  # a line break, then those statements
        self.ctx.options["_split_lines"] = True
        return updated_node.with_changes(body=[*marked, *updated_node.body, *after])

    # -- compile / fit / evaluate / predict
    def _compiled(self, call: cst.Call, method: str) -> fitloop.Compiled | None:
        """The planned compile a ``M.compile/fit/evaluate/predict(...)`` call belongs to: the compile itself;
        for the others, the model's only compile, or (several) the last one before the call in its scope,
        else in the module."""
        if _loop_method(call) != method or not self.compiled:
            return None
        name = call.func.value.value
        if method == "compile":
            c = next((c for c in self.compiled if c.call is call), None)
        elif id(call) in self.plan.loaded:  # a model load_model gives back from the file's own M.save(path)
            return self.plan.loaded[id(call)][0]
        elif id(call) in self.plan.checkpointed:  # ... from the file a ModelCheckpoint of M.fit(...) wrote
            return self._compiled(self.plan.checkpointed[id(call)][0], "fit")
        else:
            # (order, scope, compile) of each compile of `name`, and of each `name = <factory>(...)`
            events = []
            for c in self.compiled:
                if c.factory:
                    events += [(self.plan.call_order.get(id(k), 0), self.plan.call_scope.get(id(k), 0), c)
                               for k in self.plan.calls_of.get(c.factory, [])
                               if self.plan.assigned_call.get(id(k)) == name]
                elif c.model == name:
                    events.append((c.order, c.scope, c))
            events += self._given_compiles(name)
            planned = {id(c.call) for c in self.compiled}
            # a compile of the model left as written: the calls after it train what it compiled, not a loop
            events += [(self.plan.call_order.get(id(k), 0), s, k) for m, k, s in self.plan.compiles
                       if m == name and id(k) not in planned and id(k) in self.ctx.analyses.get("compile_refusals", {})]
            at, scope = self.plan.call_order.get(id(call), 0), self.plan.call_scope.get(id(call), 0)
            # a compile in another function (of its own parameter or local of that name) binds its optimizer there
            events = [e for e in events if e[1] in (0, scope)]
            if len(events) > 1:
                events.sort(key=lambda e: e[0])
                before = [e for e in events if e[1] == scope and e[0] < at] or \
                         [e for e in events if e[1] == 0 and (e[0] < at or scope != 0)]
                events = before[-1:]
            c = events[0][2] if events else None
            if isinstance(c, cst.Call):  # a compile left as written (run said why on this call)
                return None
            if isinstance(c, GivenCompile):  # compiled by a function it was given to, before this call
                if not events[0][0] < at or not self.models.is_model_expr(
                        call.func.value, self._chain()):
                    return None
                return c
        if c is None:
            return None
        # a model of the file, or a name the file never binds (a snippet, a model made elsewhere)
        if not self.models.is_model_expr(call.func.value, self._chain()) and c.model in self.plan.bound_at:
            return None
        return c

    def _given_compiles(self, name: str) -> list:
        """(order, scope, GivenCompile) of each call ``F(..., name, ...)`` of a module function whose planned compile
        compiles the parameter ``name`` is given to, a statement of F's body itself (not under an if or a loop: every
        call compiles it), the last compile of that parameter there."""
        out = []
        for c in self.compiled:
            fn = self.plan.top_functions.get(c.scope) if c.scope else None
            if fn is None or c.factory or c.call is not max(
                    (k for m, k, s in self.plan.compiles if m == c.model and s == c.scope),
                    key=lambda k: self.plan.call_order.get(id(k), 0)):
                continue
            params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
            statement = self.plan.compile_statements.get(id(c.call))
            if c.model not in params or not isinstance(fn.body, cst.IndentedBlock) or statement not in fn.body.body:
                continue
            for k in self.plan.calls_of.get(fn.name.value, []):
                args = bind_def(k, fn)
                given = args.get(c.model) if args else None
                if isinstance(given, cst.Name) and given.value == name:
                    out.append((self.plan.call_order.get(id(k), 0), self.plan.call_scope.get(id(k), 0),
                                GivenCompile(c, fn.name.value)))
        return out

    def _given_call(self, original_node: cst.Call, given: "GivenCompile", method: str, args: dict):
        """``M.evaluate / predict(...)`` after ``F(M)`` compiled and trained M inside F: predict needs nothing of the
        compile; evaluate takes the compile's loss (and metric objects, which evaluate resets) written again here, a
        torch loss being stateless; fit would continue F's optimizer, whose state F keeps: an error. Returns the
        (loss, metrics) expressions for the head, or the reason for an error."""
        c, receiver = given.compiled, original_node.func.value.value
        if method == "predict":
            return []
        if method in ("fit", "train_on_batch"):
            return (f"{receiver} was compiled inside {given.function}(), and Keras's fit goes on with the optimizer "
                    f"that compile made (its state, e.g. Adam's moments, after {given.function}()'s fits), which "
                    f"stays inside {given.function}() in torch: return the optimizer from {given.function}() and "
                    f"call the written fit with it")
        fn = next(f for f in self.plan.top_functions.values() if f.name.value == given.function)
        local = bound_names(fn) | {p.name.value for p in (*fn.params.posonly_params, *fn.params.params,
                                                            *fn.params.kwonly_params)}
        loss = self._fresh_loss(c)
        if loss is None or (set(_names_in([loss])) & local):
            return (f"{receiver} was compiled inside {given.function}(), and its loss there is not one fwport can "
                    f"create again here: return the loss from {given.function}() and call the written "
                    f"evaluate with it")
        out = [loss]
        if c.metrics:
            metrics = self._metric_dict(c, c.call, fresh=True)
            if set(_names_in([metrics])) & local:
                return (f"{receiver} was compiled inside {given.function}(), and its metrics there read names of "
                        f"that function: return the metric objects from {given.function}() and call the written "
                        f"evaluate with them")
            out.append(metrics)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{receiver}.evaluate(...) after {given.function}() compiled {receiver}: the written evaluate "
                        "with that compile's loss" + (" and metric objects" if c.metrics else "") + " created again "
                        "here (they keep no state between evaluations)", original_node)
        return out

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        """A model factory's `return model` → `return model, optimizer, loss_fn` (`, metrics`: its metric objects)."""
        c = next((c for c in self.compiled if c.factory and c.factory_return is original_node.value), None)
        if c is None:
            return updated_node
        return updated_node.with_changes(value=parsed_expression(", ".join(self._factory_binding(c, c.model))))

    def _factory_binding(self, c: fitloop.Compiled, receiver: str) -> list[str]:
        """What a model factory's return gives and its caller binds: the model, its optimizer, the optimizer's
        LambdaLR where the compile gives it a schedule, its loss (and metric objects): factory_names."""
        opt, *rest = factory_names(c, receiver)
        return [receiver, opt, *([self._scheduler_name(opt)] if c.schedule else []), *rest]

    def _factory_call(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign | None:
        """`m = get_model()` of a model factory → `m, optimizer, loss_fn = get_model()`."""
        value = original_node.value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return None
        c = next((c for c in self.compiled if c.factory == value.func.value), None)
        if c is None or id(value) not in self.plan.assigned_call:
            return None
        receiver = self.plan.assigned_call[id(value)]
        bound = ", ".join(self._factory_binding(c, receiver))
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{receiver} = {c.factory}(...) → {bound} = "
                        f"{c.factory}(...): the factory compiles its model; torch keeps the optimizer and the loss "
                        + ("(and the metric objects) " if c.metrics else "") + "beside it", original_node)
        return updated_node.with_changes(targets=[cst.AssignTarget(parsed_expression(bound))])

    def _compile_statement(self, original_node, updated_node):
        """The statement line holding a planned ``M.compile(...)``, with the optimizer and the loss in its place."""
        c = next((c for c in self.compiled for b in original_node.body
                  if isinstance(b, cst.Expr) and b.value is c.call), None)
        if c is None:
            return None
        at = next((i for i, b in enumerate(original_node.body)
                   if isinstance(b, cst.Expr) and b.value is c.call), None)
        if at is None or self._compiled(c.call, "compile") is None:
            return None
        call = c.call
        opt_kind, opt_rule, opt_node, *_ = c.optimizer
        loss_kind, loss_rule, loss_node, *_ = c.loss
        by_name = self.ctx.pack.by_name
        opt_rule = by_name[opt_rule] if isinstance(opt_rule, str) else opt_rule
        loss_rule = by_name[loss_rule] if isinstance(loss_rule, str) else loss_rule
        params = parsed_expression(f"{c.model}.parameters()")
        if opt_kind == "name":  # created where it is bound (_optimizer, over the model's parameters)
            opt, m_opt = cst.Name(c.names["optimizer"]), None
        else:
            m_opt = map_call(opt_node if opt_kind == "call" else cst.Call(cst.Name("optimizer")), opt_rule, self.ctx,
                             opt_node)
            m_opt.extras.update(params=params, clipping_handled=True, schedule_handled=True)  # the fit does both
            opt = build_call(m_opt, self.ctx)
        factory_made = loss_kind == "function" and loss_rule is None and not c.loss[3]  # loss=loss(margin=1)
        if loss_kind == "name" or (loss_kind == "function" and loss_rule is None and not factory_made) or (
                loss_kind == "object" and c.loss[3]):
            loss = None  # a loss bound to a name (translated there, its calls adapted) or the file's own function
        elif loss_kind == "object" or factory_made:  # the file's own loss class, or the function a factory of the
            # file returns, made here: the argument as the passes leave it
            compiled = updated_node.body[at].value
            loss = next((u.value for o, u in zip(call.args, compiled.args) if o.value is loss_node), None) \
                if isinstance(compiled, cst.Call) and len(compiled.args) == len(call.args) else None
        elif loss_kind == "function":
            loss = _loss_function(loss_node, loss_rule, self.ctx)
        elif loss_kind == "added":  # no loss: the written loop's is the terms the layers gave add_loss
            loss = cst.Name("None")
        elif c.outputs:  # a loss per output: {output name: its torch loss}, which the written loops index
            loss = self._output_losses(c)
        else:
            m = map_call(loss_node if loss_kind == "call" else cst.Call(cst.Name("loss")), loss_rule, self.ctx,
                         loss_node)
            m.extras.update(calls_adapted=True, compiled=True)
            if c.activation_logits:  # the loss of the final activation's logits, as Keras takes it
                m.kwargs["from_logits"] = cst.Name("True")
            loss = build_call(m, self.ctx)
        # no loss statement made
        kept = loss_kind == "name" or (loss_kind == "function" and loss_rule is None and not factory_made) or (
            loss_kind == "object" and bool(c.loss[3]))
        if opt is None or (loss is None and not kept):  # refused by a rule (its error says why): compile stays
            self.ctx.settle(call)
            self.ctx.settle(updated_node.body[at].value)
            return updated_node
        self.ctx.settle(opt, *([loss] if loss is not None else []))
        n = c.names
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{c.model}.compile(...) → " + (", ".join(
                            [f"{n[k]} = ..." for k, kind in (("optimizer", opt_kind), ("loss_fn", loss_kind))
                             if kind != "name" and not (k == "loss_fn" and loss is None)]) or "nothing") + " (used by the generated fit / evaluate / predict "
                        "functions" + "".join(f", with {n[k]}" for k, kind in (("optimizer", opt_kind),
                                                                               ("loss_fn", loss_kind))
                                              if kind == "name" or (k == "loss_fn" and loss is None)) + ")",
                        call)
        self.ctx.options["_split_lines"] = True
        body = list(updated_node.body)
        made = [] if opt_kind == "name" else [cst.Assign([cst.AssignTarget(cst.Name(n["optimizer"]))], opt),
                                              cst.Expr(cst.Call(cst.Name(MARK)))]
        for kind, value in c.clips.items():
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{kind}={value} → " + {"clipnorm": f"clip_grad_norm_(param, {value}) for each parameter",
                                                    "global_clipnorm": f"clip_grad_norm_(model.parameters(), {value})",
                                                    "clipvalue": f"clip_grad_value_(model.parameters(), {value})"}[kind]
                            + " in the generated fit, before each optimizer.step()", opt_node)
        if m_opt is not None and "schedule_expr" in m_opt.extras:  # (a named one's: next to it)
            made += [self._scheduler(n["optimizer"], m_opt, opt_node, opt_rule), cst.Expr(cst.Call(cst.Name(MARK)))]
        if loss is not None:
            made.append(cst.Assign([cst.AssignTarget(cst.Name(n["loss_fn"]))], loss))
        elif made:
            made.pop()  # (the line break after the optimizer)
        if c.metrics:
            made += [cst.Expr(cst.Call(cst.Name(MARK)))] if made else []
            made.append(cst.Assign([cst.AssignTarget(cst.Name(n["metrics"]))], self._metric_dict(c, call)))
        if not made:
            made = [cst.Expr(cst.Call(cst.Name(MARK)))]  # nothing: the statement goes (finish)
        body[at:at + 1] = made
        if at + 1 < len(body) - len(made) + 1:  # what followed compile on its line goes on with the loss's line
            body.insert(at + len(made), cst.Expr(cst.Call(cst.Name(MARK))))
        return updated_node.with_changes(body=body)

    def _output_losses(self, c: fitloop.Compiled) -> cst.Dict | None:
        """A compile's loss per output → ``{"out_a": nn.MSELoss(), ...}`` in the outputs' order (None where a rule
        refuses one)."""
        elements = []
        for name, (kind, rule, node, *_), _, _ in c.outputs:
            rule = self.ctx.pack.by_name[rule] if isinstance(rule, str) else rule
            m = map_call(node if kind == "call" else cst.Call(cst.Name("loss")), rule, self.ctx, node)
            m.extras.update(calls_adapted=True, compiled=True)
            built = build_call(m, self.ctx)
            if built is None:
                return None
            elements.append(cst.DictElement(cst.SimpleString(fitloop.quoted(name)), built))
        return cst.Dict(elements)

    def _fresh_loss(self, c: fitloop.Compiled) -> cst.BaseExpression | None:
        """The torch loss of a planned compile, built again (for an evaluate outside the function that compiled):
        a loss rule's object or function, or the name a module-level loss / the file's own loss function has;
        None for a loss object of the file's class created in the compile."""
        loss_kind, loss_rule, loss_node, *_ = c.loss
        loss_rule = self.ctx.pack.by_name[loss_rule] if isinstance(loss_rule, str) else loss_rule
        if c.outputs:
            return self._output_losses(c)
        if loss_kind == "name" or (loss_kind == "function" and loss_rule is None and c.loss[3]) or (
                loss_kind == "object" and c.loss[3]):
            return cst.Name(c.names["loss_fn"])
        if loss_kind == "object" or (loss_kind == "function" and loss_rule is None):  # made in the compile
            return None
        if loss_kind == "added":
            return cst.Name("None")
        if loss_kind == "function":
            loss = _loss_function(loss_node, loss_rule, self.ctx)
        else:
            m = map_call(loss_node if loss_kind == "call" else cst.Call(cst.Name("loss")), loss_rule, self.ctx,
                         loss_node)
            m.extras.update(calls_adapted=True, compiled=True)
            if c.activation_logits:
                m.kwargs["from_logits"] = cst.Name("True")
            loss = build_call(m, self.ctx)
        if loss is not None:
            self.ctx.settle(loss)
        return loss

    def _metric_dict(self, c: fitloop.Compiled, call: cst.Call, fresh: bool = False) -> cst.Dict:
        """compile's metrics → ``{Keras's name: metric object}``, which the written fit / evaluate update per batch
        (a string's class written into the file; a metric object translated where it stands, by its rule).
        ``fresh``: new copies of the metric objects (for an evaluate outside the function that compiled)."""
        for _, _, cls in c.metrics:
            if cls:
                self.ctx.options.setdefault("_metric_classes", set()).add(cls)
        if fresh:
            return cst.Dict([cst.DictElement(cst.SimpleString(repr(k) if set(k) & set("'\"\\") else f'"{k}"'),
                                             fresh_copy(v)) for k, v, _ in c.metrics])
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"metrics=[...] → {c.names['metrics']} = {{{', '.join(f'{k!r}: ...' for k, _, _ in c.metrics)}}}"
                        ": the written fit / evaluate reset them every epoch, update them with (y, the model's "
                        "outputs) of every batch and report each result() under the name Keras gives it", call)

        def newline(last: str) -> cst.ParenthesizedWhitespace:
            return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), indent=True,
                                               last_line=cst.SimpleWhitespace(last))
        several = len(c.metrics) > 2  # one metric a line
        elements = [cst.DictElement(cst.SimpleString(repr(k) if set(k) & set("'\"\\") else f'"{k}"'), v,
                                    comma=cst.Comma(whitespace_after=newline("    " if i < len(c.metrics) - 1 else ""))
                                    if several else cst.MaybeSentinel.DEFAULT)
                    for i, (k, v, _) in enumerate(c.metrics)]
        return cst.Dict(elements, lbrace=cst.LeftCurlyBrace(whitespace_after=newline("    ")) if several
                        else cst.LeftCurlyBrace())

    def _fit_call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression | None:
        method = _loop_method(original_node)
        if method not in fitloop.METHODS:
            return None
        if _left_keras(self.plan, original_node.func.value.value, original_node,
                                                 self.plan.call_scope.get(id(original_node), 0)):
            return None  # a Keras model: model_api's error says why (compile_refusals)
        c = self._compiled(original_node, method)
        given = c if isinstance(c, GivenCompile) else None
        c = given.compiled if given is not None else c
        if c is None and method == "predict":
            c = self._predict_only(original_node)
        if c is None:
            name = original_node.func.value.value
            made = [k for c in self.compiled if c.factory for k in self.plan.calls_of.get(c.factory, [])
                    if self.plan.assigned_call.get(id(k)) == name]
            seen = _binding_seen(self.plan, name, self.plan.call_order.get(id(original_node), 0),
                                 self.plan.call_scope.get(id(original_node), 0))
            if made and seen is not None and not any(seen is k for k in made) and self.plan.call_scope.get(
                    id(original_node), 0) == 0 and all(self.plan.call_scope.get(id(k)) == 0 for k in made):
                made = []  # (every binding a module statement: the one it sees is no factory's; model_api's error)
            if made:  # its binding became `name, optimizer, loss_fn = factory()`: never left silently
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"{code(original_node)}: {name} comes from a model factory, but fwport cannot tell "
                                "which of its bindings this call sees: call the written "
                                f"{method}({name}, ...) by hand", original_node)
                self.ctx.settle(original_node)
            return None
        params, taken = fitloop.METHODS[method]
        args = _loop_args(updated_node, method)
        bad = None if args is not None else "its arguments cannot be bound statically"
        weighted = method == "fit" and args is not None and "class_weight" in args and literal_value(
            args["class_weight"], NOT_LITERAL) is not None
        # sample_weight= of an evaluate / test_on_batch / train_on_batch: each sample's loss times its weight, where
        # the loss is a torch loss module whose values per element the loop can weigh (as class_weight's)
        # (and of a fit of arrays: the training loss weighed likewise, validation_split's held-out weights weigh
        # val_loss; not the distributed fit's)
        sample_weighted = method in ("evaluate", "train_on_batch", "fit") and args is not None \
            and "sample_weight" in args and literal_value(args["sample_weight"], NOT_LITERAL) is not None \
            and not (method == "fit" and self.ctx.options.get(runtime.DISTRIBUTED))
        for k, v in (args or {}).items():
            if k in ("class_weight", "sample_weight") and c.weighted_metrics and literal_value(v, NOT_LITERAL) is not None:
                bad = (f"{k}= with compile's weighted_metrics is not translated (Keras weighs those metrics by these "
                       "weights; the generated loop's metrics are not weighted)")
                continue
            if k == "class_weight" and weighted and self._weighs_classes(c):
                continue
            if k == "sample_weight" and sample_weighted and self._weighs_classes(c) and not c.outputs:
                continue
            if k in fitloop.LOADING:
                self.ctx.report(Severity.INFO, "dropped-argument",
                                f"{k}={code(v)}: Keras 2's worker setting for reading a Sequence or generator; the "
                                f"generated {c.base_names[method]}() reads the batches in order in this process (load "
                                "them in parallel with DataLoader(num_workers=...))", v)
                continue
            if k == "return_dict" and method in ("evaluate", "train_on_batch"):
                continue  # the written evaluate / train_on_batch takes it (return_dict below)
            if k not in taken and not _default_value(k, literal_value(v, NOT_LITERAL)):
                bad = f"{k}= is not translated" + (
                    " (the generated loop weighs the classes for a loss compile gives as a Keras cross-entropy, MSE, "
                    "MAE or Huber)" if k == "class_weight" else
                    " (the generated fit / evaluate / train_on_batch weigh the samples of a model of one output whose "
                    "loss compile gives as a Keras cross-entropy, MSE, MAE or Huber" + (
                        "; not in a distributed fit" if method == "fit" else "") + ")"
                    if k == "sample_weight" and method in ("evaluate", "train_on_batch", "fit") else "")
        if bad is None and method == "fit" and "y" in args and literal_value(
                args.get("steps_per_epoch", cst.Name("None")), NOT_LITERAL) is not None and literal_value(
                args.get("epochs", cst.Integer("1")), NOT_LITERAL) != 1:
            # (checked: 4 batches, steps_per_epoch=3, 3 epochs: Keras 3 runs batches 0-2, 3, 0-2; Keras 2 0-2, 3 0 1,
            # 2 3 0; the written loop takes each epoch's first steps_per_epoch batches, exact for one epoch)
            bad = ("steps_per_epoch= with arrays over several epochs: Keras 3 runs on through one pass of the samples "
                   "across epochs and ends an epoch early where the pass runs out, Keras 2 cycles through the samples; "
                   "the written fit takes each epoch's first steps_per_epoch batches: give epochs=1 per call, or a "
                   "DataLoader's batches")
        if bad is None and method == "fit" and weighted and sample_weighted:
            bad = ("class_weight= with sample_weight=: Keras 3 refuses them together (ValueError: You cannot "
                   "`class_weight` and `sample_weight` at the same time), Keras 2 multiplies each sample's two weights: "
                   "give one sample_weight, the product, as the program means it")
        rebound = self._rebound(original_node, c) if bad is None and given is None and method in (
            "fit", "train_on_batch") else None
        if rebound is not None:
            bad = (f"{original_node.func.value.value} is bound again after the compile before this call "
                   f"(= {code(rebound)}), and the written loop would train the model it is now with that compile's "
                   "optimizer, created over the parameters of the model compiled (a Keras model loaded or compiled "
                   "elsewhere keeps its own): create the optimizer and loss for this model where it is bound")
        # a functional model of the file taking several inputs: the written loops take x as a list of arrays,
        # batch each with the same indices and call model(*xb) (also for x given as a name: Keras too needs one
        # array per input, so it is a list, or an iterable of batches whose x is one)
        receiver = original_node.func.value.value
        several = bad is None and self._input_count(receiver, original_node) is not None
        if several and self._several_outputs(receiver, original_node) and not c.outputs:
            bad = (f"{receiver} takes several inputs and gives several outputs, and the generated loops compute one "
                   "loss and predict one array: write the loop by hand")
            several = False
        if bad is None and isinstance(args.get("x"), (cst.List, cst.Tuple, cst.Dict)) \
                and literal_value(args["x"], NOT_LITERAL) is NOT_LITERAL:
            # a literal list of numbers (model.predict([100.0])) is one array, as Keras reads it
            listed = self._inputs_listed(receiver, args["x"], original_node)
            if isinstance(listed, str):
                bad = listed
            else:
                args["x"] = listed
        elif several and "x" in args and literal_value(args["x"], NOT_LITERAL) is not NOT_LITERAL:
            count = self._input_count(receiver, original_node)
            bad = (f"x={code(args['x'])} is one array, and {receiver} takes {count} inputs: give a list of one array "
                   "per input")
        if bad is None and c.outputs and method != "predict":  # a loss per output: the plain loop of arrays
            steps = {"steps_per_epoch", "validation_steps", "steps"} & {
                k for k, v in args.items() if literal_value(v, NOT_LITERAL) is not None}
            if method == "train_on_batch":
                bad = "train_on_batch of a model of several outputs is not written yet (fit of arrays is)"
            elif _method_of(original_node) == "test_on_batch" and not c.keras2:
                # (checked: 40 samples, Keras 3 gives out_b_loss 7.12 for the one batch, the batches of 32 8.56)
                bad = ("test_on_batch of a model of several outputs: Keras 3 gives each output's loss of the one "
                       "batch, and the written evaluate averages each output's loss over its batches of 32 as Keras 3's "
                       "evaluate does: call the written evaluate with batch_size= the number of samples")
            elif "y" not in args or steps:
                bad = ("x is an iterable of batches or steps are counted, which the written loop of a model of several "
                       "outputs does not read yet: give x and y as arrays")
            elif not self._same_outputs(receiver, original_node, c):
                # (`model = get_model()` after the compile: the fit trains another model than it compiled)
                bad = (f"{receiver} may be bound here to another model than the one of {len(c.outputs)} outputs its "
                       "compile before this call compiled, which the written loop would train with that compile's loss "
                       "and optimizer: compile the model this call trains where it is bound")
            elif weighted:
                bad = ("class_weight= of a model of several outputs: Keras refuses it (ValueError: class_weight is "
                       "only supported for Models with a single output)")
            elif given is not None:
                bad = "the model is given to a function of the file, which the written loop of several outputs does not follow"
        fresh = self._given_call(original_node, given, method, args) if given is not None and bad is None else []
        if isinstance(fresh, str):
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(original_node)}: {fresh}", original_node)
            self.ctx.settle(original_node)
            return updated_node
        if bad is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{code(original_node)}: {bad}; the generated {c.base_names[method]}() takes "
                            f"{', '.join(taken)}", original_node)
            self.ctx.settle(original_node)
            return updated_node
        counted = {"steps_per_epoch", "validation_steps", "steps"} & set(
            k for k, v in args.items() if literal_value(v, NOT_LITERAL) is not None)
        added = c.loss is not None and c.loss[0] == "added"  # a compile without a loss (the add_loss terms alone)
        if added and method in ("fit", "evaluate") and (
                counted or self._dataset_value(args.get("x"))):
            bad = ("its compile gives no loss (the loop's loss: the terms the layers give add_loss), and the loop "
                   "written for it reads arrays (x, and y or none), not an iterable of batches nor counted steps")
        if bad is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{code(original_node)}: {bad}; the generated {c.base_names[method]}() takes "
                            f"{', '.join(taken)}", original_node)
            self.ctx.settle(original_node)
            return updated_node
        if method in ("fit", "evaluate") and not added and ("y" not in args or counted):
            c.batches = True  # an iterable of batches, or steps counted: the general loop
        if method == "predict" and self._dataset_value(args.get("x")):
            c.predict_batches = True  # a tf.data pipeline: predict iterates its batches
        if method == "fit" and "callbacks" in args and literal_value(args["callbacks"], NOT_LITERAL) not in (None, [], ()):
            c.callbacks = True
        if weighted:
            c.class_weight = True
        if sample_weighted:
            c.sample_weight = True  # (a fit's: its validation's evaluate takes the held-out weights)
            c.fit_sample_weight = c.fit_sample_weight or method == "fit"
        dict_result = method in ("evaluate", "train_on_batch") and "return_dict" in args and literal_value(args["return_dict"],
                                                                                       NOT_LITERAL) is not False
        if dict_result and method == "evaluate":
            c.return_dict = True
        if method == "train_on_batch":
            c.train_batch = True
        if several:
            c.several = True
        model, opt, loss = c.model, c.names["optimizer"], c.names["loss_fn"]
        metrics = [c.names["metrics"]] if c.metrics else []
        if c.factory:  # `m = get_model()`: m's own optimizer and loss (and metrics), bound beside it
            model = original_node.func.value.value
            opt, loss, *metrics = factory_names(c, model)
        if id(original_node) in self.plan.loaded or id(original_node) in self.plan.checkpointed:
            # the loaded copy of the model that compile compiled
            checkpoint = id(original_node) in self.plan.checkpointed
            saved = (self.plan.checkpointed if checkpoint else self.plan.loaded)[id(original_node)][1]
            model = original_node.func.value.value
            if c.factory:
                opt, loss, *metrics = factory_names(c, saved)
            how = (f"a ModelCheckpoint of {saved}.fit(...) saved {saved} there (its best or last epoch's weights; "
                   "load_checkpointed: a copy of it)" if checkpoint else
                   f"the file saved {saved} there itself ({saved}.save(path), the whole module)")
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{model}.evaluate(...) of the model keras.models.load_model(path) gives back → "
                            f"evaluate({model}, {loss}, ...) with the loss and metrics of {saved}'s compile: "
                            f"{how}, and Keras's file holds that compile, which load_model restores", original_node)
        fit_head = [model, opt, *([self._scheduler_name(opt)] if c.schedule else []), loss, *metrics]
        head = {"fit": fit_head, "train_on_batch": fit_head, "evaluate": [model, loss, *metrics], "predict": [model]}[method]
        out = [cst.Arg(cst.Name(h)) for h in head]
        if given is not None:  # `F(M)` compiled M: M, and the loss (and metric objects) made again here
            out = [cst.Arg(cst.Name(original_node.func.value.value)), *(cst.Arg(e) for e in fresh)]
        for k in (*taken, *(("class_weight",) if weighted else ()), *(("sample_weight",) if sample_weighted else ()),
                  *(("return_dict",) if dict_result else ())):
            if k in args:
                out.append(cst.Arg(args[k]) if k in ("x", "y") else
                           cst.Arg(args[k], keyword=cst.Name(k), equal=_EQ))
        self.ctx.options.setdefault("_fit_helpers", set()).add(id(c))
        return cst.Call(cst.Name(c.names[method]), out)

    def _exclude_from_weight_decay(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression | None:
        """``opt.exclude_from_weight_decay(var_names=[...])`` on an optimizer the pass creates over ``model.parameters()``
        → ``exclude_from_weight_decay(opt, model, var_names=[...])``, a function written into the file that moves the
        parameters whose Keras variable name matches into a group with weight_decay 0 (as Keras matches them: each
        name a regular expression searched in Variable.name); where the model or the names are unknown, an error."""
        func = original_node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "exclude_from_weight_decay"
                and isinstance(func.value, cst.Attribute) and func.value.attr.value == "optimizer"
                and isinstance(func.value.value, cst.Name)):
            return self._compiled_exclusion(original_node, updated_node, func.value.value.value)
        if not (isinstance(func, cst.Attribute) and func.attr.value == "exclude_from_weight_decay"
                and isinstance(func.value, cst.Name) and func.value.value in self.plan.optimizers):
            return None
        name = func.value.value
        args = fitloop.bind(updated_node, ("var_list", "var_names"))
        texts = {code(v) for v in self.plan.variables.get(name, [])}
        variables = self.plan.variables[name][0] if len(texts) == 1 else None
        model = (code(variables.value) if isinstance(variables, cst.Attribute) and variables.attr.value in _VARIABLE_LISTS
                 and isinstance(variables.value, (cst.Name, cst.Attribute)) else None)
        why = None
        if args is None:
            why = "its arguments cannot be bound statically"
        elif literal_value(args.get("var_list", cst.Name("None")), NOT_LITERAL) is not None:
            why = ("var_list= gives Keras variables themselves: pass their torch parameters in a group of their own, "
                   "torch.optim...([{'params': others}, {'params': excluded, 'weight_decay': 0.0}], ...)")
        elif "var_names" not in args:
            why = "no var_names= is given"
        elif model is None:
            why = (f"fwport cannot tell which model's parameters {name} updates (" + (
                " and ".join(sorted(texts)) if texts else "no apply_gradients or compile of it in this file")
                + "), whose Keras variable names the names match")
        if why is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{code(original_node)}: {why}; a torch optimizer excludes parameters from its weight "
                            "decay by parameter groups: [{'params': decayed}, {'params': excluded, 'weight_decay': 0.0}]",
                            original_node)
            self.ctx.settle(original_node)
            return updated_node
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{code(original_node)} → exclude_from_weight_decay({name}, {model}, var_names=...), written into "
                        f"the file: the parameters of {model} whose Keras variable name (kernel, bias, gamma, beta, "
                        "embeddings, by their module) matches go to a parameter group with weight_decay 0",
                        original_node)
        helper = helpers.use(self.ctx, "exclude_from_weight_decay")
        return cst.Call(cst.Name(helper), [cst.Arg(cst.Name(name)), cst.Arg(cst.parse_expression(model)),
                                           cst.Arg(args["var_names"], keyword=cst.Name("var_names"), equal=_EQ)])

    def _compiled_exclusion(self, original_node: cst.Call, updated_node: cst.Call, model: str) -> cst.BaseExpression | None:
        """``model.optimizer.exclude_from_weight_decay(var_names=[...])``: the optimizer of the model's compile before
        the call in its scope, which the pass created over ``model.parameters()`` under its own name →
        ``exclude_from_weight_decay(optimizer, model, var_names=[...])``; Keras heeds it only before the first fit (its
        traced train function decays as configured then): a fit, a rebinding or another compile between, an error.
        None for a model fwport does not know (another pass says what it is)."""
        at, scope = self.plan.call_order.get(id(original_node), 0), self.plan.call_scope.get(id(original_node), 0)
        mine = [c for c in self.compiled if c.model == model and not c.factory and c.scope in (0, scope)]
        if not mine and not any(m == model for m, _, _ in self.plan.compiles):
            return None
        before = sorted((c for c in mine if c.scope == scope and c.order < at), key=lambda c: c.order) or sorted(
            (c for c in mine if c.scope == 0 and (c.order < at or scope != 0)), key=lambda c: c.order)
        c = before[-1] if before else None
        why = None
        if c is None or c.optimizer is None:
            why = f"fwport does not follow a compile of {model} before it that gives {model} its optimizer"
        elif any(m == model and c.order < self.plan.call_order.get(id(k), 0) < at and s == c.scope
                 for m, k, s in self.plan.compiles if k is not c.call):
            why = f"{model} is compiled again before it"
        elif any(c.order < order < at for order, where, _ in self.plan.values.get(model, []) if where == c.scope):
            why = f"{model} is bound again after its compile"
        elif any(c.order < order < at for order, where in self.plan.fit_orders.get(model, [])):
            why = (f"{model}.fit(...) ran before it: Keras (3, TensorFlow) then keeps decaying the names, as the train "
                   "function the first fit traced does (checked): exclude them before the first fit, or drop the call")
        args = fitloop.bind(updated_node, ("var_list", "var_names"))
        if why is None and (args is None or "var_names" not in args or literal_value(
                args.get("var_list", cst.Name("None")), NOT_LITERAL) is not None):
            why = "only var_names= given alone (names bound statically) is translated"
        if why is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{code(original_node)}: {why}; the translated {model} is an nn.Module, which has no "
                            "optimizer: a torch optimizer excludes parameters from its weight decay by parameter groups: "
                            "[{'params': decayed}, {'params': excluded, 'weight_decay': 0.0}]", original_node)
            self.ctx.settle(original_node)
            return updated_node
        opt = c.names["optimizer"]
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{code(original_node)} → exclude_from_weight_decay({opt}, {model}, var_names=...), written "
                        f"into the file: {opt} is the optimizer {model}'s compile gives it; the parameters of {model} "
                        "whose Keras variable name (kernel, bias, gamma, beta, embeddings, by their module) matches go "
                        "to a parameter group with weight_decay 0", original_node)
        helper = helpers.use(self.ctx, "exclude_from_weight_decay")
        return cst.Call(cst.Name(helper), [cst.Arg(cst.Name(opt)), cst.Arg(cst.Name(model)),
                                           cst.Arg(args["var_names"], keyword=cst.Name("var_names"), equal=_EQ)])

    def _inputs_listed(self, model: str, x: cst.BaseExpression, call: cst.Call) -> cst.BaseExpression | str:
        """x given to a model of several inputs (a list or a dict of arrays) → the list of them in the order
        the model takes them, as the written loops batch them and call model(*xb); or why not. Known where
        every binding of ``model`` the call may see is a functional ``keras.Model(inputs, outputs)`` whose inputs
        are a list (:meth:`_input_count`): a list of as many arrays is that list, a dict is its values in the order
        of the inputs' names (the name= of each keras.Input), as Keras matches them."""
        what = f"x={code(x)} gives {model} a {type(x).__name__.lower()} of arrays"
        count = self._input_count(model, call)
        if count is None:
            return (f"{what}, and fwport does not know how {model} takes them (it reads the inputs of a functional "
                    "keras.Model(inputs=[...], outputs) of two inputs or more bound to that name; a dict of inputs, "
                    "a subclass or a model made elsewhere: write the loop by hand, batching every array with the same "
                    "indices)")
        if isinstance(x, (cst.List, cst.Tuple)):
            if any(isinstance(e, cst.StarredElement) for e in x.elements) or len(x.elements) != count:
                return f"{what}, and {model} takes {count} inputs"
            return x
        # a dict: its values in the order of the inputs' names
        keys = [literal_value(e.key, None) if isinstance(e, cst.DictElement) else None for e in x.elements]
        names = {tuple(_output_layer_name(self.plan, e.value, b, inputs=True) for e in b[2].elements)
                 for b in self._model_bindings(model, call)}
        if len(names) != 1 or None in next(iter(names)) or not all(isinstance(k, str) for k in keys):
            return (f"{what}, and fwport does not know the names of {model}'s inputs (the name= of each "
                    "keras.Input, bound to a name last before the model) by which Keras matches the keys: give the arrays as a list in "
                    "the order of the model's inputs")
        order = next(iter(names))
        if sorted(keys) != sorted(order):
            return f"{what} whose keys are not the names of {model}'s inputs ({', '.join(order)})"
        values = {k: e.value for k, e in zip(keys, x.elements)}
        return cst.List([cst.Element(values[k]) for k in order])

    def _model_inputs(self, model: str, call: cst.Call, part: int = 2) -> list:
        """The inputs (``part`` 3: the outputs; or None) of the bindings of ``model`` a fit / evaluate / predict call
        may see: the last one before it in its scope, else every binding of the module's
        (:attr:`_Plan.model_inputs`)."""
        return [b[part] for b in self._model_bindings(model, call)]

    def _model_bindings(self, model: str, call: cst.Call) -> list:
        """Those bindings of ``model`` themselves: (statement, scope, inputs, outputs)."""
        bindings = self.plan.model_inputs.get(model, [])
        at, scope = self.plan.call_order.get(id(call), 0), self.plan.call_scope.get(id(call), 0)
        before = [b for b in bindings if b[1] == scope and b[0] < at]
        if before:
            return [before[-1]]
        return [b for b in bindings if b[1] == 0] if scope != 0 else []

    def _several_outputs(self, model: str, call: cst.Call) -> bool:
        """Whether a binding of ``model`` the call may see is a functional model of several outputs (a list, tuple or
        dict of them): the written loops compute one loss and predict one array."""
        return any(isinstance(o, cst.Dict) or (isinstance(o, (cst.List, cst.Tuple)) and len(o.elements) != 1)
                   for o in self._model_inputs(model, call, 3))

    def _rebound(self, call: cst.Call, c: fitloop.Compiled) -> cst.BaseExpression | None:
        """The value ``model`` is bound to after the compile ``c`` (not a model factory's) that ``model.fit(...)``
        uses and before the call, in the call's scope: ``model = keras.models.load_model(path)`` or another
        model after ``model.compile(...)``. The optimizer written for that compile holds the compiled model's
        parameters, which the model now bound does not share. None where there is none. A model factory's compile
        (``model = make_model()``, the compile inside it): the binding of ``model`` before the call in its scope, where
        it is not a call of that factory (another model, a loaded one: the factory's optimizer does not train it)."""
        model = call.func.value.value
        at, scope = self.plan.call_order.get(id(call), 0), self.plan.call_scope.get(id(call), 0)
        if c.factory:
            before = [value for order, where, value in self.plan.values.get(model, []) if where == scope and order < at]
            last = before[-1] if before else None
            made = isinstance(last, cst.Call) and isinstance(last.func, cst.Name) and last.func.value == c.factory
            return None if last is None or made or (isinstance(last, cst.Name) and last.value == model) else last
        since = c.order if c.scope == scope else -1  # (a module compile seen from a function: any local binding)
        for order, where, value in self.plan.values.get(model, []):
            if where == scope and since < order < at and not (isinstance(value, cst.Name) and value.value == model):
                return value
        return None

    def _same_outputs(self, model: str, call: cst.Call, c: fitloop.Compiled) -> bool:
        """Whether every binding of ``model`` the call may see is a functional model of as many outputs as ``c``
        compiled (given as a list, tuple or dict), or a call of the model factory that compiled it: the model a
        compile of several outputs compiled, not one bound to the name after it (:attr:`_Plan.values`, bound alike
        with :attr:`_Plan.model_inputs`)."""
        bindings = self.plan.values.get(model, [])
        at, scope = self.plan.call_order.get(id(call), 0), self.plan.call_scope.get(id(call), 0)
        before = [b[2] for b in bindings if b[1] == scope and b[0] < at]
        seen = before[-1:] or ([b[2] for b in bindings if b[1] == 0] if scope != 0 else [])
        outputs = self._model_inputs(model, call, 3)
        if not seen or len(seen) != len(outputs):
            return False
        return all((isinstance(o, (cst.List, cst.Tuple, cst.Dict)) and len(o.elements) == len(c.outputs)) or (
            bool(c.factory) and isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value == c.factory)
            for v, o in zip(seen, outputs))

    def _input_count(self, model: str, call: cst.Call) -> int | None:
        """The number of inputs of ``model`` where every binding of that name the call may see is a functional
        ``keras.Model(inputs=[...], outputs)`` of the same two inputs or more (given as a list or tuple), else None."""
        bindings = self._model_inputs(model, call)
        counts = {len(b.elements) if isinstance(b, (cst.List, cst.Tuple))
                  and not any(isinstance(e, cst.StarredElement) for e in b.elements) else 0 for b in bindings}
        return counts.pop() if len(counts) == 1 and min(counts) >= 2 else None

    @staticmethod
    def _weighs_classes(c: fitloop.Compiled) -> bool:
        """Whether the written fit can weigh this compile's loss by class: a torch loss module of Keras's
        cross-entropies / MSE / MAE / Huber, whose values per element (reduction="none") averaged over each
        sample are Keras's per-sample values (not a loss function of the file, nor KLDivergence's sum)."""
        if c.loss is None or c.loss[0] in ("function", "object"):
            return False
        rule = c.loss[1]
        name = rule if isinstance(rule, str) else rule.names[0] if rule is not None else ""
        # (not CosineSimilarity: a per-sample loss of its own, whose weighting the loop's tests do not check)
        return name in fitloop.LOSSES.values() and name != "keras.losses.CosineSimilarity"

    def _callback_predict(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression | None:
        """``self.model.predict(x)`` in a keras.callbacks.Callback subclass of a file with one compile and no
        train_step class: the model fit gives the callback is that compile's nn.Module, which the file's written
        ``predict(model, x)`` predicts with as Keras's predict does (batches of 32, inference mode, NumPy)."""
        func = original_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "predict"
                and isinstance(func.value, cst.Attribute) and dotted_text(func.value) == "self.model"
                and self._callback_class and self._callback_class[-1] and len(self.compiled) == 1
                and not self.plan.train_step_classes and self.compiled[0].loss is not None):
            return None
        c = self.compiled[0]
        params, taken = fitloop.METHODS["predict"]
        args = fitloop.bind(updated_node, params)
        if args is None or any(k not in taken and not _default_value(k, literal_value(v, NOT_LITERAL))
                               for k, v in args.items()):
            return None  # (the class's error names it)
        out = [cst.Arg(updated_node.func.value)]
        for k in taken:
            if k in args:
                out.append(cst.Arg(args[k]) if k in ("x", "y") else cst.Arg(args[k], keyword=cst.Name(k), equal=_EQ))
        self._callback_predicts.add(id(func))
        self.ctx.options.setdefault("_fit_helpers", set()).add(id(c))
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{code(original_node)} in a callback → the written predict(self.model, ...): fit gives the "
                        f"callback the nn.Module {c.model}.compile trains, which predicts as Keras's predict does",
                        original_node)
        return cst.Call(cst.Name(c.names["predict"]), out)

    def _dataset_value(self, node: cst.BaseExpression | None) -> bool:
        """``node`` is a tf.data dataset: made by tf.data.Dataset (and its methods), or a name the file binds only
        to such values (valuekinds' reading)."""
        if node is None:
            return False
        datasets = self.ctx.analyses.get("training-datasets")
        if datasets is None:
            datasets = set()
            resolve = self.ctx.imports.resolve
            changed = True
            while changed:  # `ds = make(...)`, `ds2 = ds.batch(8)`: until nothing changes
                changed = False
                for name, values in self.plan.values.items():
                    if name not in datasets and values and all(
                            valuekinds._dataset(v, datasets, resolve) for _, _, v in values):
                        datasets.add(name)
                        changed = True
            self.ctx.analyses["training-datasets"] = datasets
        return valuekinds._dataset(node, datasets, self.ctx.imports.resolve)

    def _predict_only(self, call: cst.Call) -> fitloop.Compiled | None:
        """``model.predict(x)`` of a model of the file that no compile of the file gives a loop: predict needs no
        optimizer or loss, so a plan without them (one per model name) writes the predict function alone."""
        receiver = call.func.value
        if (not isinstance(receiver, cst.Name) or self._train_step_model(receiver.value)
                or not self.models.is_model_expr(receiver, self._chain())):
            return None
        args = _loop_args(call, "predict")
        if args is None or (isinstance(args.get("x"), (cst.List, cst.Tuple, cst.Dict))
                            and self._input_count(receiver.value, call) is None):
            return None  # several inputs of a model fwport does not know: the error says what to write
        if self._several_outputs(receiver.value, call):
            return None  # several outputs: Keras's predict gives a list of arrays, the written predict one
        name = receiver.value
        plans = self.ctx.analyses.setdefault("compiled", [])
        made = self.ctx.analyses.setdefault("predict_only", {})
        if name in made:
            return made[name]
        taken = set(self.plan.bound_at)

        def free(base: str) -> str:
            return base if base not in taken else f"{name}_{base}"
        c = fitloop.Compiled(name, call, None, None)
        c.names = {"optimizer": "", "loss_fn": "", "fit": "fit", "evaluate": "evaluate", "predict": free("predict"),
                   "train_on_batch": "train_on_batch",
                   "tensor": free("as_float32"), "inputs": free("channels_first"), "loss_args": ""}
        for k in ("tensor", "inputs"):  # one set of array conversions for the file
            c.names[k] = plans[0].names[k] if plans else c.names[k]
        c.key = ("predict",)
        c.sources = {name, *self.plan.instances.get(name, ())} - {""}
        fn = self._scopes[-1] if self._scopes else None
        for arg in self.models.param_args.get((id(fn), name), []):  # a parameter: the models its callers give
            if isinstance(arg, cst.Name):
                c.sources |= {arg.value, *self.plan.instances.get(arg.value, ())} - {""}
            elif isinstance(arg, cst.Call) and isinstance(arg.func, cst.Name):
                c.sources.add(arg.func.value)
        c.base_names = {k: c.names[k] for k in fitloop.FUNCTIONS}
        c.placeholders = {k: f"__fwport_{k}_{len(plans)}__" for k in fitloop.FUNCTIONS}
        c.names.update(c.placeholders)
        c.group = c
        plans.append(c)
        made[name] = c
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{name}.predict(...) → {c.base_names['predict']}({name}, ...): a function written into the "
                        "file (batches of 32 by default, inference mode, a NumPy array as Keras returns)", call)
        return c

    # -- models with their own train_step: compile / fit stay methods (of the written TrainStepModule)
    def _train_step_model(self, name: str, call: cst.Call | None = None) -> bool:
        if call is not None and _not_train_step_def(self.plan, name, call):
            return False
        made = _made_class(self.plan, self.models, name, call) if call is not None else None
        if made is not None:  # the binding the call sees (a factory's model too; not one left Keras: model_api's)
            return made in self.plan.train_step_classes and not _left_keras(
                self.plan, name, call, self.plan.call_scope.get(id(call), 0))
        classes = self.plan.instances.get(name)
        return bool(classes) and classes <= self.plan.train_step_classes

    def _classes_at(self, name: str, call: cst.Call) -> set[str]:
        """The classes of the file ``name`` may be an instance of where ``call`` reads it: the one the binding it
        sees makes (:func:`_made_class`), else every class the name is bound to an instance of."""
        made = _made_class(self.plan, self.models, name, call)
        return {made} if made else self.plan.instances.get(name, set())

    def _def_at(self, cls: str, name: str, call: cst.Call) -> cst.ClassDef | None:
        return _def_of(self.plan, cls, name, call)

    def _in_train_step_class(self) -> bool:
        """Whether the class being translated defines its own train_step (this definition of its name)."""
        return bool(self.classes) and self.classes[-1] in self.plan.train_step_classes and (
            len(self.plan.class_defs.get(self.classes[-1], [])) < 2 or id(self._class_nodes[-1]) in self.plan.train_step_defs)

    def _uses(self, cls: str, node: cst.ClassDef | None = None) -> set[str]:
        """What of Keras 2's compiled loss / metrics ``cls`` reads: that definition's where ``node`` is one."""
        if node is not None and id(node) in self.plan.compiled_uses_at:
            return self.plan.compiled_uses_at[id(node)]
        return self.plan.compiled_uses.get(cls, set())

    def _custom_compile_of(self, name: str) -> bool:
        """Whether the model's class defines its own compile (whose parameters mean what it says)."""
        return any(c in self.plan.custom_compiles for c in self.plan.instances.get(name, ()))

    def _train_step_call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression | None:
        """``M.compile(...)`` / ``M.fit(...)`` of a model whose class defines train_step (or, for a model
        the file does not build, a compile without a loss, which only such a model can train with): kept
        as the methods TrainStepModule gives the class; the optimizers compile is given become
        factories (functools.partial), created by compile over the parameters they update."""
        method = _method_of(original_node)
        if method not in ("compile", "fit", "evaluate", "predict"):
            return None
        name = original_node.func.value.value
        if not self._train_step_model(name, original_node):
            if method != "compile" or name in self.plan.bound_at or name in self.plan.train_step_classes:
                return None
            if any(c.call is original_node for c in self.compiled):
                return None  # a compile with a loss: the written-out loop
            keys = {a.keyword.value for a in original_node.args if a.keyword is not None}
            if "loss" in keys or any(a.keyword is None for a in original_node.args[1:]):
                return None
        out = updated_node
        classes = self._classes_at(name, original_node)
        one = next(iter(classes)) if len(classes) == 1 else None
        node = self._def_at(one, name, original_node) if one else None
        # Keras 2's own test_step (the compiled loss and metrics), which TrainStepModule writes where they are kept
        tested = classes <= self.plan.test_step_classes or (
            one is not None and "compiled_loss" in self._uses(one, node)
            and self._compiled_refusal(one, node) is None)
        if method == "evaluate" and not tested:
            return None  # Keras's own test_step (the compiled loss and metrics): model_api's error
        if method == "fit":
            why = self._train_step_fit_refusal(original_node, tested)
            if why is not None:
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"{code(original_node)}: {why}; TrainStepModule.fit takes x, y, batch_size, epochs, "
                                "verbose, callbacks, shuffle, steps_per_epoch"
                                + (", validation_split, validation_data (evaluated by test_step), validation_steps"
                                   if tested else ""),
                                original_node)
                self.ctx.settle(original_node)
                return updated_node
            if any(a.keyword is not None and a.keyword.value in ("validation_data", "validation_split")
                   for a in original_node.args):
                self.ctx.options["_train_step_evaluate"] = True
            if any(a.keyword is not None and a.keyword.value == "validation_split" for a in original_node.args):
                self.ctx.options["_train_step_split"] = True
            if any(a.keyword is not None and a.keyword.value == "validation_steps" for a in original_node.args):
                self.ctx.options["_train_step_validation_steps"] = True
        elif method == "evaluate":
            self.ctx.options["_train_step_evaluate"] = True
        elif method == "predict":
            self.ctx.options["_train_step_predict"] = True
        if method == "compile":
            args = []
            for at, (o, a) in enumerate(zip(original_node.args, updated_node.args)):
                q = self.qualname(o.value.func) if isinstance(o.value, cst.Call) else None
                lit = literal_value(o.value, NOT_LITERAL)
                is_optimizer = (o.keyword.value == "optimizer") if o.keyword is not None else at == 0
                if (is_optimizer and isinstance(lit, str) and lit.lower() in fitloop.OPTIMIZERS
                        and not self._custom_compile_of(name)):  # Keras's name: the class with its defaults
                    q = fitloop.OPTIMIZERS[lit.lower()]
                    m = map_call(cst.Call(cst.Name("optimizer")), self.ctx.pack.by_name[q], self.ctx, o.value)
                elif _transform(self.ctx, q) == "optimizer":
                    m = map_call(a.value, self.ctx.pack.by_name[q], self.ctx, o.value)
                else:
                    m = None
                if m is not None:
                    m.extras["factory"] = True
                    made = build_call(m, self.ctx)
                    if made is None:
                        self.ctx.settle(o.value, a.value)
                    else:
                        self.ctx.settle(made)
                        self.ctx.report(Severity.INFO, "idiom-replaced",
                                        f"{code(o.value)} given to compile → {code(made)}: compile creates it over "
                                        "the parameters it updates (a torch optimizer needs them when created)",
                                        o.value)
                        a = a.with_changes(value=made)
                args.append(a)
            out = updated_node.with_changes(args=self._compiled_args(original_node, args))
            if self._custom_compile_of(name):
                out = out.with_changes(args=self._custom_compile_losses(original_node, list(out.args)))
        self.ctx.analyses.setdefault("train_step_calls", set()).add(id(out))
        return out

    def _custom_compile_losses(self, call: cst.Call, args: list[cst.Arg]) -> list[cst.Arg]:
        """A loss object given to a model's own compile (``compile(self, ..., loss_fn)``, which keeps it as
        ``self.loss_fn`` and calls it in train_step): ``lambda y_true, y_pred: <torch loss>(<input>, <target>)``,
        called in Keras's order wherever the class calls it (another use of it fails loudly: a lambda has no
        attributes and takes no sample_weight)."""
        classes = self._classes_at(call.func.value.value, call)
        cls = next((s for s in self.module.body if isinstance(s, cst.ClassDef) and {s.name.value} == classes), None)
        compile_fn = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "compile"),
                          None) if cls is not None else None
        out = []
        for at, (o, a) in enumerate(zip(call.args, args)):
            if (isinstance(o.value, cst.Call) and isinstance(a.value, cst.Call) and compile_fn is not None
                    and _transform(self.ctx, self.qualname(o.value.func)) == "loss"):
                attr = _kept_as_attribute(compile_fn, o.keyword.value if o.keyword is not None else at + 1)
                loss = self._loss_rule(o.value) if attr is not None and _called_as_loss(cls, attr) else None
                made = self._compiled_loss(o.value, a.value, *loss,
                                           why="the model's own compile keeps it, and its methods call it in "
                                               "Keras's order") if loss is not None else None
                if made is not None:
                    a = a.with_changes(value=made)
            out.append(a)
        return out

    def _compiled_args(self, call: cst.Call, args: list[cst.Arg]) -> list[cst.Arg]:
        """A compile of a model whose train_step reads Keras 2's compiled loss / metrics: its loss as
        ``lambda y_true, y_pred: <torch loss>(<y_pred>, <y_true>)`` (Keras's order, torch's loss) and its
        metrics as ``{name: metric}`` (Keras's names, which the written metric classes do not keep)."""
        classes = self._classes_at(call.func.value.value, call)
        if len(classes) != 1:
            return args
        cls = next(iter(classes))
        node = self._def_at(cls, call.func.value.value, call)
        uses = self._uses(cls, node)
        if not uses & {"compiled_loss", "compute_loss", "compiled_metrics", "metrics"} or (
                uses == {"metrics"} and cls in self.plan.own_metrics) or self._compiled_refusal(cls, node) is not None:
            return args
        custom = cls in self.plan.custom_compiles
        bound = self._compile_args(call, cls) or {}
        loss = self._loss_rule(bound["loss"]) if uses & {"compiled_loss", "compute_loss"} and "loss" in bound else None
        out = []
        for at, (o, a) in enumerate(zip(call.args, args)):
            key = o.keyword.value if o.keyword is not None else (None if custom or at >= len(fitloop.COMPILE)
                                                                 else fitloop.COMPILE[at])
            if key == "loss" and loss is not None:
                made = self._compiled_loss(o.value, a.value, *loss, weighted="weighted_loss" in uses)
                if made is not None:
                    a = a.with_changes(value=made)
            elif key == "metrics" and uses & {"compiled_metrics", "metrics"}:
                metrics = self._metrics_of(o.value, loss if loss is not None else (
                    self._loss_rule(bound["loss"]) if "loss" in bound else None))
                if isinstance(metrics, list):
                    by_id = {id(e.value): e.value for e in o.value.elements} if isinstance(
                        o.value, (cst.List, cst.Tuple)) else {}
                    updated = {id(oe.value): ue.value for oe, ue in zip(o.value.elements, a.value.elements)} \
                        if isinstance(a.value, (cst.List, cst.Tuple)) else {}
                    elements = []
                    for (name, node, cls_name), e in zip(metrics, getattr(o.value, "elements", [])):
                        if cls_name:
                            self.ctx.options.setdefault("_metric_classes", set()).add(cls_name)
                            value = node
                        else:
                            value = updated.get(id(e.value), by_id.get(id(e.value)))
                        elements.append(cst.DictElement(cst.SimpleString(repr(name).replace("'", '"')), value))
                    a = a.with_changes(value=cst.Dict(elements))
                    self.ctx.report(Severity.INFO, "idiom-replaced",
                                    f"metrics={code(o.value)} → {{{', '.join(f'{n!r}: ...' for n, _, _ in metrics)}}}: "
                                    "the compiled metrics by the names Keras gives them (train_step's results are "
                                    "keyed by them)", o.value)
            out.append(a)
        return out

    def _compiled_loss(self, original: cst.BaseExpression, updated: cst.BaseExpression, rule, from_logits,
                       why: str = "TrainStepModule's compiled_loss calls it in Keras's order", weighted: bool = False):
        """compile's loss= → ``lambda y_true, y_pred: <torch loss>(<input>, <target>)``; None where its rule refuses.
        ``weighted``: a compiled_loss call passes a sample_weight, which the lambda takes (``weighted_loss``: the
        torch loss's elements times the weights, Keras's sum over the number of elements)."""
        if isinstance(original, cst.Name):
            func = updated
        else:
            node = original if isinstance(original, cst.Call) else cst.Call(cst.Name("loss"))
            m = map_call(updated if isinstance(updated, cst.Call) else node, rule, self.ctx, original)
            m.extras.update(calls_adapted=True, compiled=True)
            func = build_call(m, self.ctx)
            if func is None:
                self.ctx.settle(original, updated)
                return None
            self.ctx.settle(func)
        fake = cst.Call(func, [cst.Arg(cst.Name("y_true")), cst.Arg(cst.Name("y_pred"))])
        adapted = self._loss_call(fake, fake, rule, from_logits)
        if weighted:
            if not (isinstance(adapted, cst.Call) and len(adapted.args) == 2
                    and not any(a.keyword or a.star for a in adapted.args)):
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"loss={code(original)}: the model's train_step passes compiled_loss a sample_weight, "
                                "which fwport weighs for a Keras loss object it makes a torch loss module; compute "
                                "this loss's per-sample values and weigh them in train_step", original)
                self.ctx.settle(original, updated)
                return None
            self.ctx.options["_weighted_loss"] = True
            self.ctx.spell_text("copy.copy")
            self.ctx.spell_text("torch.as_tensor")
            func, (inp, target) = code(adapted.func), (code(a.value) for a in adapted.args)
            made = parsed_expression(f"lambda y_true, y_pred, sample_weight=None: {code(adapted)} if sample_weight "
                                     f"is None else weighted_loss({func}, {inp}, {target}, sample_weight)")
        else:
            made = parsed_expression(f"lambda y_true, y_pred: {code(adapted)}")
        self.ctx.settle(made)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"loss={code(original)} given to compile → {code(made)}: {why}", original)
        return made

    @staticmethod
    def _train_step_fit_refusal(call: cst.Call, tested: bool) -> str | None:
        """Why TrainStepModule.fit cannot take this fit call's arguments as Keras does."""
        taken = {"x", "y", "batch_size", "epochs", "verbose", "callbacks", "shuffle", "steps_per_epoch"}
        for at, a in enumerate(call.args):
            if a.star:
                return "its arguments cannot be bound statically"
            if a.keyword is None and at >= 6:
                return "arguments after callbacks are taken by name only"
            k = a.keyword.value if a.keyword is not None else None
            if k in ("validation_data", "validation_split", "validation_steps") and not tested and literal_value(
                    a.value, NOT_LITERAL) not in (None, 0, 0.0, False):
                return (f"{k} is evaluated by Keras's own test_step (the compiled loss and metrics); "
                        "define test_step in the model's class")
            if k is not None and k not in taken | {"validation_data", "validation_split", "validation_steps"} and literal_value(a.value, NOT_LITERAL) not in (
                    None, 0, 0.0, False):
                return f"{k}= is not translated"
        return None

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if original_node.attr.value in ("learning_rate", "lr", "iterations") and self._rate_of(original_node):
            return self._rate(original_node, updated_node)
        if original_node.attr.value == "losses" and not self.ctx.is_settled(original_node):
            penalties = self._model_losses(original_node)
            if penalties is not None:
                return penalties
        if (original_node.attr.value == "metrics" and isinstance(original_node.value, cst.Name)
                and original_node.value.value == "self" and self._in_train_step_class()
                and self.classes[-1] not in self.plan.own_metrics
                and not self.ctx.is_settled(original_node)):
            self.ctx.settle(original_node)
            why = self._compiled_refusal(self.classes[-1], self._class_nodes[-1])
            if why is None:
                self._keep_compiled(original_node)
                return updated_node
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"self.metrics: Keras's own list (a loss tracker named \"loss\" and the metrics compile was "
                            f"given), which the translated TrainStepModule keeps only where the file's compiles of "
                            f"{self.classes[-1]} tell them; here {why}: define `metrics` as a property returning the "
                            "class's metric objects (self.loss_tracker = keras.metrics.Mean() ...)", original_node)
            return updated_node
        if (original_node.attr.value in COMPILED and isinstance(original_node.value, cst.Name)
                and original_node.value.value == "self" and self._in_train_step_class() and not self.ctx.is_settled(original_node)
                and original_node.attr.value not in self.plan.class_methods.get(self.classes[-1], ())):
            self.ctx.settle(original_node)
            attr = original_node.attr.value
            why = self._compiled_refusal(self.classes[-1], self._class_nodes[-1])
            if why is None and id(original_node) in self._accepted:
                self._keep_compiled(original_node)
                return updated_node
            if why is None:
                why = self._not_accepted.get(id(original_node))
            if why is None:
                why = ("only self.compiled_loss(y_true, y_pred[, regularization_losses=self.losses]) is translated"
                       if attr == "compiled_loss" else
                       "only self.compiled_metrics.update_state(y_true, y_pred) is translated"
                       if attr == "compiled_metrics" else
                       "only self.compute_loss(x, y, y_pred[, sample_weight]) is translated"
                       if attr == "compute_loss" else "Keras 3's compute_metrics is not translated")
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"self.{attr}: {COMPILED[attr]}, kept by a Keras model; the translated TrainStepModule "
                            f"keeps it where the file's compiles of {self.classes[-1]} tell it, but {why}: compute "
                            "the loss with a torch loss (loss_fn(y_pred, y)) and the metrics with metric objects of "
                            "the class (self.loss_tracker = keras.metrics.Mean() ... → the written Mean)", original_node)
            return updated_node
        # history.history[...] of a translated fit: the dict fit returns is the history itself
        if self.compiled and original_node.attr.value == "history":
            value = original_node.value
            if isinstance(value, cst.Name) and value.value in self.plan.fit_results:
                return updated_node.value
            if isinstance(value, cst.Call) and self._compiled(value, "fit") is not None:
                return updated_node.value
        return updated_node

    def _model_losses(self, node: cst.Attribute) -> cst.BaseExpression | None:
        """``model.losses`` of a model of the file, read by the file's own training code (a GradientTape step):
        Keras's list of the layers' weight regularizer penalties, recomputed from the current weights on each
        read. The translated classes compute them in ``regularization_loss()`` (regularizers.py): the list of
        those of every module. The other terms Keras lists are errors of their own in a file that trains with its
        own code (add_loss: the subclass pass; activity regularizers: the layers' rules); in a file that calls
        add_loss the read itself is an error too (the list would lack those terms)."""
        receiver = node.value
        if not (isinstance(receiver, cst.Name) and receiver.value != "self"
                and self.models.is_model_expr(receiver, self._chain())):
            return None
        name = receiver.value
        if any(a.attr.value == "add_loss" for a in find_all(self.module, cst.Attribute)):
            # the add_loss terms are errors of their own; the list without them would read as Keras's
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{name}.losses: Keras lists the terms layers give add_loss in this file as well as the "
                            "weight regularizer penalties, and torch modules keep no such list: add the terms the "
                            "forward returns (see the add_loss errors) and sum(m.regularization_loss() for m in "
                            f"{name}.modules() if hasattr(m, 'regularization_loss')) to the loss", node)
            return None
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{name}.losses → the regularization_loss() of each of {name}'s modules: Keras lists its "
                        "layers' weight regularizer penalties (computed from the current weights); torch modules "
                        "have no such list", node)
        return cst.parse_expression(
            f'[m.regularization_loss() for m in {name}.modules() if hasattr(m, "regularization_loss")]')

    # -- an optimizer's learning rate read or written
    def _rate_of(self, node: cst.BaseExpression) -> str | None:
        """``opt.learning_rate`` / ``opt.lr`` on an optimizer this pass creates (bound once) → opt."""
        if not (isinstance(node, cst.Attribute) and node.attr.value in ("learning_rate", "lr", "iterations")):
            return None
        v = node.value
        if (isinstance(v, cst.Name) and len(self.plan.optimizers.get(v.value, [])) == 1
                and len(self.plan.bound_at.get(v.value, [])) == 1 and not self.shadowed(v.value)):
            return v.value
        if (isinstance(v, cst.Attribute) and v.attr.value.endswith("optimizer") and isinstance(v.value, cst.Name)
                and v.value.value == "self" and self._in_train_step_class()):
            return code(v)  # a torch optimizer TrainStepModule.compile (or the class's compile) created
        return None

    def _rate(self, original_node: cst.Attribute, updated_node) -> cst.BaseExpression:
        opt = self._rate_of(original_node)
        if opt is None or self.ctx.is_settled(original_node):
            return updated_node
        if original_node.attr.value == "iterations":
            self.ctx.settle(original_node)
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{code(original_node)}: a torch optimizer does not count its updates in one place; count "
                            "them in the training loop" + (f" (or read {self._scheduler_name(opt)}.last_epoch, which "
                                                          "counts the same steps)" if opt in self.plan.scheduled
                                                          else ""), original_node)
            return updated_node
        if id(original_node) in self.plan.rate_writes:
            self.ctx.settle(original_node)
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{code(original_node)} set: a torch optimizer keeps its rate in each parameter group: "
                            f"`for group in {opt}.param_groups: group[\"lr\"] = value`"
                            + (" (its LambdaLR would overwrite it at the next step: change the schedule)"
                               if opt in self.plan.scheduled else ""), original_node)
            return updated_node
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{code(original_node)} → {opt}.param_groups[0][\"lr\"] (a float: the rate of the next "
                        "update" + (", which the LambdaLR set from the schedule" if opt in self.plan.scheduled else "")
                        + ")", original_node)
        return parsed_expression(f'{opt}.param_groups[0]["lr"]')

    # -- Keras 2's compiled loss and metrics read by a train_step: TrainStepModule keeps them
    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if not (self._in_train_step_class() and isinstance(f, cst.Attribute)):
            return
        if _is_self_attr(f, "compiled_loss"):
            why = self._compiled_loss_args(node)
            if why is None:
                self._accepted.add(id(f))
            else:
                self._not_accepted[id(f)] = why
        elif _is_self_attr(f, "compute_loss"):
            why = self._compute_loss_args(node)
            if why is None:
                self._accepted.add(id(f))
            else:
                self._not_accepted[id(f)] = why
        elif (f.attr.value == "update_state" and _is_self_attr(f.value, "compiled_metrics")
              and len(node.args) == 2 and not any(a.keyword or a.star for a in node.args)):
            self._accepted.add(id(f.value))

    def _keep_compiled(self, node: cst.Attribute) -> None:
        """``self.compiled_loss`` / ``compiled_metrics`` / ``metrics`` read as Keras 2 gives them: methods of the
        written TrainStepModule (compile keeps the loss and the metrics it is given); an info finding the first time."""
        self.ctx.options["_train_step_compiled"] = True
        self.ctx.options.setdefault("_metric_classes", set()).add("Mean")
        self.ctx.spell_text("torch.as_tensor")
        cls = self.classes[-1]
        if self.ctx.analyses.setdefault("compiled_kept", set()) >= {cls}:
            return
        self.ctx.analyses["compiled_kept"].add(cls)
        if node.attr.value == "compute_loss":
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{cls}'s train_step calls Keras 3's built-in self.compute_loss: the written "
                            "TrainStepModule keeps compile's loss (as loss(y_true, y_pred)); its compute_loss is that "
                            "loss of (y, y_pred[, sample_weight]) plus each of self.losses summed (the layers' "
                            "regularization_loss()), as Keras 3's Trainer.compute_loss", node)
            return
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{cls}'s train_step reads what compile gives it (self.{node.attr.value}): the written "
                        "TrainStepModule keeps compile's loss (as loss(y_true, y_pred)) and its metrics by their Keras "
                        "names; self.compiled_loss adds the regularization losses given and tracks the total as the "
                        "metric \"loss\" (a mean weighted by the batch size), self.metrics lists that tracker and the "
                        "compiled metrics, as Keras 2 (tf_keras) runs them (Keras 3's deprecated shims of the same "
                        "names would feed the predictions to the \"loss\" tracker)", node)

    @staticmethod
    def _compiled_loss_args(call: cst.Call) -> str | None:
        """Why ``self.compiled_loss(...)`` is not the call TrainStepModule.compiled_loss takes: (y, y_pred)
        and ``regularization_losses=self.losses`` (None: it is)."""
        positional = [a for a in call.args if a.keyword is None and not a.star]
        for a in call.args:
            if a.star:
                return "its arguments cannot be bound statically"
            if a.keyword is not None and a.keyword.value in ("y_true", "y_pred"):
                continue
            if a.keyword is not None and a.keyword.value == "regularization_losses":
                if not _is_self_attr(a.value, "losses"):
                    return "regularization_losses= other than self.losses is not translated"
            elif a.keyword is not None and a.keyword.value != "sample_weight" or len(positional) > 3:
                return "it takes y_true, y_pred, sample_weight and regularization_losses"
        if len(call.args) - (1 if any(a.keyword is not None and a.keyword.value == "regularization_losses"
                                      for a in call.args) else 0) not in (2, 3):
            return "it takes y_true and y_pred"
        return None

    @staticmethod
    def _compute_loss_args(call: cst.Call) -> str | None:
        """Why ``self.compute_loss(...)`` is not the call TrainStepModule.compute_loss takes: Keras 3's
        (x, y, y_pred, sample_weight, training), bound statically (None: it is)."""
        names = ("x", "y", "y_pred", "sample_weight", "training")
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in call.args):
            return "its arguments cannot be bound statically"
        if len(positional) > len(names) or any(a.keyword is not None and a.keyword.value not in names
                                                for a in call.args):
            return "it takes x, y, y_pred, sample_weight and training"
        given = set(names[:len(positional)]) | {a.keyword.value for a in call.args if a.keyword is not None}
        if not {"y", "y_pred"} <= given:
            return "it is given no y or no y_pred"
        return None

    def _compiles_of(self, cls: str, node: cst.ClassDef | None = None) -> tuple[list[cst.Call], bool]:
        """The compile calls of the file on instances of ``cls`` (names bound only to them), and whether
        some compile is of a name bound to such an instance and to other things (which fwport cannot follow).
        With ``node``, one definition of a class name defined more than once: not the compiles of instances
        another definition made (:meth:`_def_at`)."""
        calls, unsure = [], False
        for name, call, _ in self.plan.compiles:
            if node is not None and self._def_at(cls, name, call) not in (None, node):
                continue
            made = self._compiled_class(name, call)
            if made is not None:  # the binding the compile sees makes one class's instance (or no class's)
                if made == cls:
                    calls.append(call)
                continue
            classes = self.plan.instances.get(name, set())
            if classes == {cls}:
                calls.append(call)
            elif cls in classes:
                unsure = True
        return calls, unsure

    def _compiled_class(self, name: str, call: cst.Call) -> str | None:
        return _made_class(self.plan, self.models, name, call)

    def _compiled_refusal(self, cls: str, node: cst.ClassDef | None = None) -> str | None:
        """Why the compiles of ``cls``'s instances cannot give its train_step what Keras 2's compile gives it
        (the loss as ``self.compiled_loss``, the metrics as ``self.compiled_metrics``, both in ``self.metrics``);
        None when every one can (TrainStepModule keeps them). ``node``: the definition meant, where the file
        defines the name more than once (each pairs with the compiles of the instances it made)."""
        if len(self.plan.class_defs.get(cls, [])) < 2:
            node = None
        key = (cls, id(node))
        if key in self._compiled_why:
            return self._compiled_why[key]
        uses = self._uses(cls, node)
        calls, unsure = self._compiles_of(cls, node)
        why = None
        if "compute_metrics" in uses:
            why = "Keras 3's compute_metrics is not translated"
        elif "compute_loss" in uses and uses & {"compiled_loss", "compiled_metrics", "metrics"}:
            why = ("Keras 3's compute_loss is translated in a train_step that reads none of Keras 2's compiled loss "
                   "and metrics (Keras 3 lists a \"loss\" tracker in self.metrics that compute_loss does not update)")
        elif unsure:
            why = f"a compiled model may or may not be a {cls} (its name is bound to other things too)"
        elif not calls:
            why = f"no compile of a {cls} in this file tells which loss and metrics"
        elif "metrics" in uses and cls not in self.plan.own_metrics and self.plan.metric_attrs.get(cls):
            why = (f"{cls} also keeps metric objects ({', '.join(self.plan.metric_attrs[cls])}), which Keras lists in "
                   "self.metrics by names the translation does not keep: define `metrics` as a property returning them")
        for call in calls:
            if why is not None:
                break
            args = self._compile_args(call, cls)
            if args is None:
                why = f"{code(call)}: its arguments cannot be bound statically"
                break
            loss = args.get("loss")
            if uses & {"compiled_loss", "compute_loss"}:
                why = ("the compile of " + code(call.func.value) + " gives no loss") if loss is None else \
                    self._loss_refusal(loss)
            if why is None and uses & {"compiled_metrics", "metrics"}:
                metrics = self._metrics_of(args.get("metrics"), self._loss_rule(loss) if loss is not None else None)
                why = metrics if isinstance(metrics, str) else None
        self._compiled_why[key] = why
        return why

    def _compile_args(self, call: cst.Call, cls: str) -> dict | None:
        """A compile call's loss / metrics by name: keyword-only for a class with its own compile."""
        if cls in self.plan.custom_compiles:
            return {a.keyword.value: a.value for a in call.args if a.keyword is not None
                    and a.keyword.value == "metrics"}
        return fitloop.bind(call, fitloop.COMPILE)

    def _loss_rule(self, node: cst.BaseExpression):
        """compile's loss= → (its loss rule, from_logits), or None."""
        lit = literal_value(node, NOT_LITERAL)
        if isinstance(lit, str):
            q = fitloop.LOSSES.get(lit.lower())
            return (self.ctx.pack.by_name[q], False) if q else None
        if isinstance(node, cst.Name):  # (a per-sample loss is no compiled loss)
            reduction = self.plan.loss_reductions.get(node.value, "sum_over_batch_size")
            return self.loss_names.get(node.value) if reduction in ("sum_over_batch_size", "auto") else None
        if isinstance(node, cst.Call):
            q = self.qualname(node.func)
            if _transform(self.ctx, q) != "loss":
                return None
            rule = self.ctx.pack.by_name[q]
            flag = bind_call(node, rule).values.get("from_logits")
            flag = False if flag is None else literal_value(flag, NOT_LITERAL)
            return (rule, flag) if flag in (True, False) else None
        return None

    def _loss_refusal(self, node: cst.BaseExpression) -> str | None:
        if self._loss_rule(node) is not None:
            return None
        return (f"loss={code(node)} is neither one of {', '.join(sorted(fitloop.LOSSES))}, a Keras loss object with a "
                "literal from_logits, nor a name bound once to one")

    def _metrics_of(self, node, loss) -> list | str:
        """compile's metrics= → [(Keras's name for it, the metric's expression, written class or "")], or
        why not (:func:`_compile_metrics`; a list written in the compile, or one metric alone)."""
        node = fitloop.metrics_listed(node)
        if node is not None and literal_value(node, NOT_LITERAL) not in (None, [], ()) and not isinstance(
                node, (cst.List, cst.Tuple)):
            return f"metrics={code(node)} is not a list written in the compile"
        cls = (_ACCURACY_FOR_LOSS.get(loss[0].names[0]) if loss is not None else "ShapeAccuracy")
        return _compile_metrics(node, self.plan, self.ctx, self.qualname, cls)

    # -- the training flag of a model call
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.ctx.is_settled(original_node):
            return updated_node
        if (isinstance(original_node.func, cst.Attribute) and original_node.func.attr.value == "numpy"
                and not original_node.args and self._rate_of(original_node.func.value) is not None
                and id(original_node.func.value) not in self.plan.rate_writes):
            return updated_node.func.value  # the rate is already a float
        kept = self._train_step_call(original_node, updated_node)
        if kept is not None:
            return kept
        if isinstance(original_node.func, cst.Name) and factory_model_only(self.plan, original_node):
            c = next((c for c in self.compiled if c.factory == original_node.func.value), None)
            if c is not None:
                self.ctx.report(Severity.WARNING, "approximate",
                                f"{code(original_node)} → {code(original_node)}[0]: {c.factory}() compiles its model "
                                f"and returns {', '.join(self._factory_binding(c, c.model))}; here the model "
                                "alone is taken, and that compile's optimizer and loss do not follow it: where it is "
                                "trained, bind them too (`model, optimizer, loss_fn = "
                                f"{c.factory}(...)`) or create them", original_node)
                return cst.Subscript(updated_node, [cst.SubscriptElement(cst.Index(cst.Integer("0")))])
        if (self.classes and self.classes[-1] in self.plan.schedule_classes and self._scopes
                and getattr(self._scopes[-1], "name", None) is not None and self._scopes[-1].name.value == "__init__"
                and isinstance(original_node.func, cst.Attribute) and original_node.func.attr.value == "cast"
                and self.qualname(original_node.func) in ("tensorflow.cast", "keras.ops.cast")):
            # a schedule is built from Python numbers, which torch's x.to(dtype) does not take: the
            # conversion (tf.convert_to_tensor → torch.as_tensor) casts numbers and tensors alike
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{code(original_node)} in {self.classes[-1]}.__init__ → a conversion to a tensor of that "
                            "dtype (torch.as_tensor): a schedule is built from Python numbers, which x.to(dtype) "
                            "does not take", original_node)
            return updated_node.with_changes(func=updated_node.func.with_changes(attr=cst.Name("convert_to_tensor")))
        excluded = self._exclude_from_weight_decay(original_node, updated_node)
        if excluded is not None:
            return excluded
        fitted = self._fit_call(original_node, updated_node)
        if fitted is not None:
            return fitted
        predicted = self._callback_predict(original_node, updated_node)
        if predicted is not None:
            return predicted
        func = original_node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "reset_states" and not original_node.args
                and isinstance(func.value, cst.Attribute) and dotted_text(func.value) == "self.model"
                and self._callback_class and self._callback_class[-1]):
            helper = helpers.use(self.ctx, "reset_rnn_states")
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"self.model.reset_states() in a callback → {helper}(self.model) (written out in this "
                            "file): every stateful recurrent layer of the nn.Module fit gives the callback starts its "
                            "next call from zeros, as Keras's reset_states() does", original_node)
            return cst.Call(cst.Name(helper), [cst.Arg(updated_node.func.value)])
        training = next((a for a in updated_node.args if a.keyword is not None and a.keyword.value == "training"), None)
        if training is not None and (self.models.is_model_expr(original_node.func, self._chain())
                                     or self._train_step_attr(original_node.func)):
            return self._training_flag(original_node, updated_node, training)
        if training is not None and self._unresolved_callee(original_node.func):
            return self._training_flag(original_node, updated_node, training, assumed=True)
        loss = self._loss_of(original_node)
        if loss is not None:
            return self._loss_call(original_node, updated_node, *loss)
        labels = self._attribute_loss_labels(original_node, updated_node)
        if labels is not None:
            return labels
        inline = self._inline_loss(original_node, updated_node)
        if inline is not None:
            return inline
        return updated_node

    def _attribute_loss_labels(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call | None:
        """``self.loss_fn(y, logits)`` in a method of a class whose ``__init__`` made ``self.loss_fn`` a lambda in
        Keras's order (leave_Assign), ``y`` a NumPy value there (a parameter every call of the method gives one:
        valuekinds' analysis): ``self.loss_fn(torch.as_tensor(y), logits)``. Keras's loss object converts the
        labels; the lambda's torch loss takes tensors (``y.long()`` is no NumPy method)."""
        func = original_node.func
        if not (self._class_nodes and isinstance(func, cst.Attribute) and _is_self_attr(func, func.attr.value)
                and len(original_node.args) == 2 and not any(a.keyword or a.star for a in original_node.args)):
            return None
        cls, attr = self._class_nodes[-1], func.attr.value
        made = [a.value for a in find_all(cls.body, cst.Assign) if len(a.targets) == 1
                and _is_self_attr(a.targets[0].target, attr) and isinstance(a.value, cst.Call)]
        rules = [self._loss_rule(v) for v in made]
        if len(made) != 1 or rules[0] is None or not _called_as_loss(cls, attr) \
                or not self._numpy_labels(original_node.args[0].value):
            return None
        as_tensor = self.ctx.spell_text("torch.as_tensor")
        y = code(updated_node.args[0].value)
        target = optim.loss_options(rules[0][0], self.ctx).get("target", "")
        converted = f"{as_tensor}({y})" if target in ("long", "float") else \
            f"{as_tensor}({y}, dtype={self.ctx.spell_text('torch.float32')})"
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{code(original_node)}: {y} is a NumPy array here (every call of the method gives one) → "
                        f"{converted}: Keras's loss converts it, the torch loss takes tensors", original_node)
        args = list(updated_node.args)
        args[0] = args[0].with_changes(value=parsed_expression(converted))
        return updated_node.with_changes(args=args)

    def _inline_loss(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression | None:
        """``keras.losses.X(...)(y_true, y_pred)``, a loss object created and called at once (TensorFlow's
        distributed tutorials: ``SparseCategoricalCrossentropy(from_logits=True, reduction=NONE)(y, predictions)``)
        → the torch loss called as a loss object bound to a name is (:meth:`_loss_call`: torch's order, the labels
        as it takes them, Keras's per-sample reduction). Only two positional arguments and a literal from_logits and
        reduction; else None (the loss transform refuses the object)."""
        inner = original_node.func
        if not isinstance(inner, cst.Call) or not isinstance(updated_node.func, cst.Call) \
                or self.ctx.is_settled(inner):
            return None
        if len(original_node.args) != 2 or any(a.keyword or a.star for a in original_node.args):
            return None
        q = self.qualname(inner.func)
        if _transform(self.ctx, q) != "loss":
            return None
        loss = self._loss_rule(inner)
        if loss is None:
            return None
        values = bind_call(inner, loss[0]).values
        reduction = optim.reduction_literal(values["reduction"], self.ctx) if "reduction" in values \
            else "sum_over_batch_size"
        if reduction not in ("sum_over_batch_size", "auto", "sum", "none", None):
            return None
        m = map_call(updated_node.func, loss[0], self.ctx, inner)
        m.extras["calls_adapted"] = True
        func = build_call(m, self.ctx)
        if func is None:
            self.ctx.settle(inner)
            self.ctx.settle(updated_node.func)
            return updated_node
        self.ctx.settle(func)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{code(inner.func)}(...)(y_true, y_pred), a loss object created and called at once → {code(func)} "
                        "called on its input and target as torch takes them", inner,
                        loss[0])
        return self._loss_call(original_node, updated_node.with_changes(func=func), *loss, reduction=reduction)

    def _train_step_attr(self, func: cst.BaseExpression) -> bool:
        """``self.generator`` in a method of a model with its own train_step: its sub-models (Keras
        layers and models, which take ``training=``), nn.Modules once translated."""
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
                and self._in_train_step_class()):
            return False
        # a method of the class (shiftvit's self._calculate_loss(data, training=True)) takes training= itself
        return not any(isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value
                       for s in self._class_nodes[-1].body.body)

    # -- callees a ``training=`` argument marks as Keras models or layers
    def visit_ListComp(self, node) -> None:
        self._comprehensions.append(node)

    def leave_ListComp(self, original_node, updated_node):
        self._comprehensions.pop()
        return updated_node

    visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_ListComp
    leave_SetComp = leave_GeneratorExp = leave_DictComp = leave_ListComp

    def visit_Lambda(self, node) -> None:
        self._deferred += 1

    def leave_Lambda(self, original_node, updated_node):
        self._deferred -= 1
        return updated_node

    visit_IfExp = visit_BooleanOp = visit_Lambda
    leave_IfExp = leave_BooleanOp = leave_Lambda

    def _unresolved_callee(self, func: cst.BaseExpression) -> bool:
        """``model(x, training=True)`` where ``model`` is none of the file's models but no function,
        class or import of the file either: a parameter (``def step(model, x)``), an attribute
        (``self.model`` of a trainer class), a name bound to what fwport cannot follow. ``training=``
        is Keras's call-mode argument, which a translated module does not take: it is a model or a
        layer. Calls inside Keras classes are the subclass pass's."""
        if any(self._keras_class):
            return False
        head = _receiver_root(func)
        if head is None or self.qualname(func) is not None:
            return False  # a framework API, a call's result
        if isinstance(func, cst.Name) and func.value in self._defined():
            return False  # a function or (plain) class of this file: it takes training= as written
        return True

    def _defined(self) -> set[str]:
        """The names the file binds with def or class, or imports (which may be functions taking
        ``training=``)."""
        if self._defined_names is None:
            names: set[str] = set()

            class _Defs(cst.CSTVisitor):
                def visit_FunctionDef(self, node):
                    names.add(node.name.value)

                def visit_ClassDef(self, node):
                    names.add(node.name.value)

                def visit_ImportAlias(self, node):
                    alias = node.asname.name if node.asname else node.name
                    if isinstance(alias, cst.Name):
                        names.add(alias.value)

            scan(self.module, _Defs())
            self._defined_names = names
        return self._defined_names

    def _comprehension_bound(self, receiver: cst.BaseExpression) -> bool:
        """The receiver's root name is bound by an enclosing comprehension or lambda of the statement
        (a line put before the statement could not name it)."""
        head = _receiver_root(receiver)
        if head is None:
            return True
        if self._scopes and isinstance(self._scopes[-1], cst.Lambda):
            return True
        for comp in self._comprehensions:
            for_in = comp.for_in
            while for_in is not None:
                if head.value in {n.value for n in _target_names(for_in.target)}:
                    return True
                for_in = for_in.inner_for_in
        return False

    def _training_flag(self, original_node, updated_node, training: cst.Arg, assumed: bool = False) -> cst.BaseExpression:
        receiver = updated_node.func
        simple = isinstance(receiver, cst.Name) or self._train_step_attr(receiver) or assumed
        flag = literal_value(training.value, NOT_LITERAL)
        who = code(receiver)
        if flag is True:
            mode = f"{who}.train()"
        elif flag is False:
            mode = f"{who}.eval()"
        else:
            mode = f"{who}.train({code(training.value)})"
        args = [a for a in updated_node.args if a is not training]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        why = (f" ({who} is taken for a Keras model or layer: it is called with training=, which only they take)"
               if assumed else "")
        if simple and self.prefixes and (isinstance(receiver, cst.Name) or assumed) \
                and self._comprehension_bound(receiver):
            # inside a comprehension or lambda that binds the receiver: train()/eval() return the module
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"training={code(training.value)} → {mode} called on the spot (it returns the "
                            f"module): a torch module keeps its mode{why}", original_node)
            return updated_node.with_changes(func=parsed_expression(mode), args=args)
        if not simple or not self.prefixes:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{code(original_node)}: the training flag of a model call outside a simple statement "
                            "cannot be moved; call model.train() / model.eval() before it", original_node)
            self.ctx.settle(original_node)
            return updated_node
        self.prefixes[-1].append(parsed_expression(mode))
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"training={code(training.value)} → {mode} before the call: a torch module keeps its mode{why}",
                        original_node)
        return updated_node.with_changes(args=args)

    # -- losses: creation and calls
    def _loss_of(self, call: cst.Call):
        if isinstance(call.func, cst.Name) and call.func.value in self.loss_names:
            return self.loss_names[call.func.value]
        return None

    def _loss_call(self, original_node, updated_node, rule, from_logits, reduction=NOT_LITERAL) -> cst.BaseExpression:
        args = updated_node.args
        if len(args) != 2 or any(a.keyword or a.star for a in args):
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{code(original_node)}: only loss(y_true, y_pred) is translated (sample_weight: "
                            "multiply the per-sample loss, reduction='none', and divide by the batch size)",
                            original_node, rule)
            return updated_node
        y_true, y_pred = args[0].value, args[1].value
        opts = optim.loss_options(rule, self.ctx)
        target = opts.get("target", "")
        if target and not _plain(y_pred):
            y_pred = self._prediction_named(original_node, y_pred)
        t = code(y_true)
        p = code(y_pred)
        atom = lambda s, n: s if isinstance(n, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({s})"  # noqa: E731
        t_atom = atom(t, y_true)
        if self._numpy_labels(y_true):  # Keras converts NumPy labels (to the loss's float32, then as it needs)
            t_atom = f"{self.ctx.spell_text('torch.as_tensor')}({t})" if target in ("long", "float") else \
                f"{self.ctx.spell_text('torch.as_tensor')}({t}, dtype={self.ctx.spell_text('torch.float32')})"
            t = t_atom
        if target == "long":
            t_out = f"{t_atom}.long()"
            if _plain(y_pred):  # (n,) or (n, 1): Keras drops a trailing axis of 1
                t_out += f".reshape({p}.shape[:-1])"
        elif target == "float":
            t_out = f"{t_atom}.float()"
        else:
            t_out = t
        if target in ("float", "same") and _plain(y_pred):
            t_out = f"{t_out if t_out != t else t_atom}.view_as({p})"
        prob = opts.get("probabilities_input", "") if not from_logits else ""
        if opts.get("probabilities_helper") and not from_logits and any(
                isinstance(fn, cst.FunctionDef) and any(self.qualname(d.decorator.func if isinstance(
                    d.decorator, cst.Call) else d.decorator) == "tensorflow.function" for d in fn.decorators)
                for fn in self._scopes):
            self.ctx.report(Severity.WARNING, "approximate",
                            f"{code(original_node)} in a tf.function: Keras 2 adds 1e-7 inside the logs of its binary "
                            "cross-entropy, and TensorFlow's graph optimizer computes 1 - p + 1e-7 there as "
                            "(1 + 1e-7) - p; the translation computes it in the eager order, which differs by up to "
                            "0.09 in a sample's loss where a probability is within 1e-6 of 1 (create the loss with "
                            "Keras2BCELoss(graph=True) for the graph's values)", original_node, rule)
        if rule.emit.get("options", {}).get("probabilities_input") and not from_logits:
            optim.probabilities_warning(self.ctx, original_node, rule.names[0].rsplit(".", 1)[-1])
        p_atom = atom(p, y_pred)
        if prob == "log-clip":
            p_out = f"{self.ctx.spell_text('torch.log')}({p_atom}.clamp(1e-7, 1 - 1e-7))"
        elif prob == "clip":
            p_out = f"{p_atom}.clamp(1e-7, 1 - 1e-7)"
        else:
            p_out = p
        if opts.get("classes_first"):  # the class axis: Keras's last, torch's second (no-op for 2-D)
            p_out = f"{p_out if p_out != p else p_atom}.movedim(-1, 1)"
            if target != "long":
                t_out = f"{t_out if t_out != t else t_atom}.movedim(-1, 1)"
        out = updated_node.with_changes(args=[cst.Arg(parsed_expression(p_out)),
                                              cst.Arg(parsed_expression(t_out))])
        if reduction is NOT_LITERAL:  # (an object created in the call: the caller's)
            reduction = self.plan.loss_reductions.get(original_node.func.value, "sum_over_batch_size") \
                if isinstance(original_node.func, cst.Name) else "sum_over_batch_size"
        if opts.get("mean_last") and reduction in ("none", None, "sum"):
            # Keras's per-sample loss: the mean over the last axis of torch's elementwise one ('sum': their sum)
            suffix = ".mean(-1)" + (".sum()" if reduction == "sum" else "")
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{code(original_node)} with reduction={reduction!r} → {code(out)}{suffix}: torch's "
                            "reduction='none' keeps every element, Keras's per-sample loss is their mean over the last "
                            "axis" + (", summed over the samples" if reduction == "sum" else ""), original_node, rule)
            return parsed_expression(code(out) + suffix)
        return out

    def _prediction_named(self, original_node: cst.Call, y_pred: cst.BaseExpression) -> cst.BaseExpression:
        """A loss call's prediction written as an expression (``loss_fn(y, model(x))``): bound to a name on a line
        before the statement (``y_pred = model(x)``), so that the labels can take its shape (Keras matches (n,) and
        (n, 1) labels to the predictions; torch refuses them, or broadcasts (n,) against (n, 1) to (n, n)). Where the
        statement cannot gain a line before it (a lambda, a comprehension, a conditional expression, a compound
        statement's header): the expression as it is, with a warning that the labels need the predictions' shape."""
        if not self.prefixes or self._comprehensions or self._deferred:
            self.ctx.report(Severity.WARNING, "shape-unknown",
                            f"{code(original_node)}: Keras matches labels of shape (n,) or (n, 1) to the predictions, "
                            "torch takes them only of the predictions' shape (less the class axis for sparse labels): "
                            "bind the predictions to a name on a line of their own, y_pred = ..., and call the loss "
                            "on it (fwport then reshapes the labels)", original_node)
            return y_pred
        scope = self._scopes[-1] if self._scopes else self.module
        taken = _names_in([scope, *self.prefixes[-1]])
        name = next(n for n in ("y_pred", "y_pred_", "y_pred2", "y_pred3", "fwport_y_pred") if n not in taken)
        self.prefixes[-1].append(cst.Assign([cst.AssignTarget(cst.Name(name))], y_pred))
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{code(original_node)}: the predictions bound to {name} on a line before, so that the labels "
                        "take their shape as Keras matches them", original_node)
        return cst.Name(name)

    def _numpy_labels(self, y_true: cst.BaseExpression) -> bool:
        """``y_true`` is a NumPy value where the loss is called (valuekinds.py's analysis of the source)."""
        path = ".".join(fn.name.value for fn in self._scopes if isinstance(fn, cst.FunctionDef))
        kinds = valuekinds.numpy_kinds(self.ctx, path, self.qualname)
        return kinds is not None and kinds.of(y_true).numpy

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.BaseSmallStatement:
        made = self._factory_call(original_node, updated_node)
        if made is not None:
            return made
        frozen = self._trainable(original_node, updated_node)
        if frozen is not None:
            return frozen
        value = original_node.value
        if (isinstance(value, cst.Call) and len(original_node.targets) == 1
                and _is_self_attr(original_node.targets[0].target, original_node.targets[0].target.attr.value
                                  if isinstance(original_node.targets[0].target, cst.Attribute) else "")
                and _transform(self.ctx, self.qualname(value.func)) == "optimizer"):
            return self._optimizer_attribute(original_node, updated_node)
        if (isinstance(value, cst.Call) and len(original_node.targets) == 1 and isinstance(updated_node.value, cst.Call)
                and _is_self_attr(original_node.targets[0].target, original_node.targets[0].target.attr.value
                                  if isinstance(original_node.targets[0].target, cst.Attribute) else "")
                and _transform(self.ctx, self.qualname(value.func)) == "loss"):
            # `self.loss_fn = keras.losses.X(...)`: its calls in the class's methods are in Keras's order
            attr = original_node.targets[0].target.attr.value
            loss = self._loss_rule(value) if self._class_nodes and _called_as_loss(self._class_nodes[-1], attr) \
                else None
            made = self._compiled_loss(value, updated_node.value, *loss,
                                       why=f"{code(original_node.targets[0].target)} is called in Keras's order"
                                       ) if loss is not None else None
            if made is not None:
                return updated_node.with_changes(value=made)
        if not (isinstance(value, cst.Call) and len(original_node.targets) == 1
                and isinstance(original_node.targets[0].target, cst.Name)):
            return updated_node
        name = original_node.targets[0].target.value
        q = self.qualname(value.func)
        kind = _transform(self.ctx, q)
        if kind == "optimizer":
            return self._optimizer(original_node, updated_node, name, q)
        if kind == "loss":
            return self._loss(original_node, updated_node, name, q)
        return updated_node

    def _trainable(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Expr | None:
        """``model.trainable = False`` (a Keras layer or model: a tf.Variable's flag cannot be set) →
        ``model.requires_grad_(False)``: a torch module has no such flag, and the attribute alone would
        freeze nothing. Its parameters then get no gradient, which every torch optimizer skips."""
        if not (len(original_node.targets) == 1 and isinstance(original_node.targets[0].target, cst.Attribute)
                and original_node.targets[0].target.attr.value == "trainable"):
            return None
        receiver = updated_node.targets[0].target.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"self.trainable = {code(original_node.value)}: Keras freezes the layer's weights, also "
                            "those it creates later; torch has no such flag: call self.requires_grad_(False) once "
                            "every parameter exists (at the end of __init__, after a first call for lazy layers)",
                            original_node)
            return updated_node
        made = cst.Expr(cst.Call(cst.Attribute(receiver, cst.Name("requires_grad_")), [cst.Arg(updated_node.value)]))
        if isinstance(receiver, cst.Name):  # finish: a Lazy module's parameters are frozen one by one
            self.ctx.options.setdefault(_FROZEN_NAMES, set()).add(receiver.value)
        keras2 = (" Keras 2 also reads the flag when a model is compiled: a model compiled before this line "
                  "keeps training these weights in its own fit / train_on_batch, which torch does not do."
                  if self.ctx.version == 2 else "")
        parsed = self.ctx.analyses.get("parsed")
        written = bool(self.compiled) and parsed is not None and "BatchNormalization" in parsed[1]
        if literal_value(updated_node.value, NOT_LITERAL) is not True:  # regularizers.py: Keras 3's model.losses
            self.ctx.analyses.setdefault(regularizers.FROZEN, code(original_node.targets[0].target))
        if written and literal_value(updated_node.value, NOT_LITERAL) is False:
            self.ctx.analyses[FROZEN_BATCHNORM] = True  # the written fit keeps frozen BatchNorm in inference mode
        self.ctx.report(Severity.WARNING, "idiom-replaced",
                        f"{code(original_node.targets[0].target)} = {code(original_node.value)} → "
                        f"{code(made.value)}: a torch module has no trainable flag; its parameters get no gradient, "
                        "so no optimizer moves them. Keras also runs the BatchNormalization layers of a frozen layer "
                        "in inference mode, torch keeps them in the mode of train() / eval(): where it holds "
                        f"BatchNorm, call {code(receiver)}.eval() after each model.train()"
                        + (" (the written fit does: it puts every BatchNorm whose parameters are all frozen in eval "
                           "mode after its model.train())" if written else "") + "." + keras2 + _LAZY_FREEZE,
                        original_node)
        return made

    def _settle(self, call: cst.Call, updated_node: cst.Assign) -> cst.Assign:
        """A refused call: the rule pass (which sees the rebuilt node) must not report it again."""
        self.ctx.settle(call)
        self.ctx.settle(updated_node.value)
        return updated_node

    def _optimizer(self, original_node, updated_node, name: str, q: str) -> cst.Assign:
        rule = self.ctx.pack.by_name[q]
        call = original_node.value
        variables = self.plan.variables.get(name, [])
        reached = self._reached_variables(original_node, name)
        if isinstance(reached, str):
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{name} = {code(call)}: a torch optimizer takes the parameters it updates when it is "
                            f"created, and {reached}: keep it a Keras optimizer until that compile is translated",
                            call, rule)
            return self._settle(call, updated_node)
        if reached is not None:
            variables = reached
        texts = {code(v) for v in variables}
        params = _params_of(variables[0]) if len(texts) == 1 else None
        if params is None and not variables and name in self.plan.compile_args:
            return self._optimizer_factory(original_node, updated_node, name, rule)
        if params is None:
            why = ("it is not used with apply_gradients(zip(grads, model.trainable_variables)) in this file"
                   if not variables else f"it updates {' and '.join(sorted(texts))}")
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{name} = {code(call)}: a torch optimizer takes the parameters it updates when it is "
                            f"created, and fwport cannot tell which ({why}); write "
                            f"{rule.emit.get('options', {}).get('target', 'torch.optim...')}(model.parameters(), ...)",
                            call, rule)
            return self._settle(call, updated_node)
        dicts = _dicts_in(variables[0]) or []
        for d in dicts:
            why = self._fixed_variables(d)
            if why is not None:
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"{name} = {code(call)}: a torch optimizer takes the parameters it updates when it is "
                                f"created, and {name}.apply_gradients updates the values of {d}, which fwport cannot "
                                f"take there ({why}); write {rule.emit.get('target', 'torch.optim...')}("
                                f"list({d}.values()), ...) where {d} holds its final tensors", call, rule)
                return self._settle(call, updated_node)
        owners = _names_in([variables[0]]) - ({"list", "values"} if dicts else set())
        if "self" in owners and not self.classes:
            # apply_gradients in a method, on the method's own variables: `self` here is no model
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{name} = {code(call)}: a torch optimizer takes the parameters it updates when it is "
                            f"created, and {name}.apply_gradients updates {code(variables[0])} inside a class, whose "
                            f"instance does not exist here: give the optimizer to compile and call "
                            f"self.optimizer.apply_gradients(...) in the class (or create it over model.parameters() "
                            "once the model exists)", call, rule)
            return self._settle(call, updated_node)
        late = [o for o in owners if o in self.plan.bound_at and not any(
            order < self.order or depth < len(self._scopes) for order, depth in self.plan.bound_at[o])
            and not _given_model(self._scopes[-1] if self._scopes else None, o)]
        if late:
            why = self._movable(original_node, name, late)
            if why is not None:
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"{name} = {code(call)} is created before {', '.join(sorted(late))}: a torch optimizer "
                                f"takes the parameters when it is created, and fwport cannot move this line after "
                                f"{'them' if len(late) > 1 else 'it'} ({why}): move it after the model is built",
                                call, rule)
                return self._settle(call, updated_node)
        m = map_call(updated_node.value, rule, self.ctx, call)
        m.extras["params"] = parsed_expression(params)
        m.extras["clipping_handled"] = True  # written before each step() of its tape steps
        scheduled = name in self.plan.scheduled
        if scheduled:
            why = self._unscheduled(name)
            if why:
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"{name} = {code(call)}: its learning rate is a schedule, {why}; create "
                                "torch.optim.lr_scheduler.LambdaLR(optimizer, schedule) (the optimizer with lr=1.0) "
                                "and call its step() after each optimizer.step()", call, rule)
                return self._settle(call, updated_node)
            m.extras["schedule_handled"] = True
        out = build_call(m, self.ctx)
        if out is None:
            return self._settle(call, updated_node)
        self.ctx.settle(out)
        if scheduled:
            self.suffixes[-1].append(self._scheduler(name, m, call, rule))
        made = updated_node.with_changes(value=out)
        if late:
            self._module_moves.append((made, sorted(late)))
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{name} = {code(call.func)}(...) moves to just after {', '.join(sorted(late))} is bound: "
                            "a torch optimizer takes its parameters when it is created (nothing in between reads "
                            f"{name})", call, rule)
        return made

    def _reached_variables(self, original_node: cst.Assign, name: str) -> list[cst.BaseExpression] | str | None:
        """``optimizer = keras.optimizers.X(...)`` written again before each training loop of a notebook or guide
        (one model after another, the name bound each time): the variables of the apply_gradients calls this
        binding reaches (:func:`_reached_bindings`), so that each torch optimizer is created over its own model's
        parameters. None where the name is bound once, where which binding a call reads is not plain, or where this
        binding is given to planned compiles (which say over which model: _rebound_optimizer); why not where it is
        given to a compile left as written."""
        if self._scopes or self.classes:
            return None
        reached = _reached_bindings(self.plan, self.module, name)
        mine = next((order for order, _, call in self.plan.optimizer_bindings.get(name, [])
                     if call is original_node.value), None)
        if reached is None or mine is None:
            return None
        if mine in reached.compiled:
            planned = {id(c.call) for c in self.compiled}
            given = [k for _, k, _ in self.plan.compiles if isinstance(call_argument(k, "optimizer", 0), cst.Name)
                     and call_argument(k, "optimizer", 0).value == name
                     and _reads_binding(self.plan, name, self.plan.call_order.get(id(k), 0)) == mine]
            # a planned compile: over its model's parameters (plan.variables); else it stays Keras's
            left = [k for k in given if id(k) not in planned]
            return None if not left or not reached.applied else (f"this binding is given to {code(left[0].func)}(...), which stays Keras's "
                                          "(see the error there), and apply_gradients calls take other bindings")
        mine_applied = [v for (_, _, v), order in zip(self.plan.applied_at.get(name, []), reached.applied)
                        if order == mine]
        return mine_applied or None  # (a binding no call reaches: as the name's other uses say)

    def _fixed_variables(self, d: str) -> str | None:
        """Whether the optimizer may take ``list(d.values())`` when it is created (None), else why not: ``d`` is
        bound once, at the module's top level before this line, to a dict literal of tf.Variables (torch leaf
        tensors), and the file only reads it (``d[k]``, ``d.values()``, ``d.keys()``, ``d.items()``, ``d.get(k)``):
        the tensors the optimizer holds are those apply_gradients would update."""
        bound = self.plan.bound_at.get(d, [])
        if len(bound) != 1 or bound[0][1] != 0 or bound[0][0] >= self.order or d in self.plan.globals:
            return f"{d} is not bound once, at the module's top level, before it"
        value = next((v for _, where, v in self.plan.values.get(d, []) if where == 0), None)
        if not (isinstance(value, cst.Dict) and value.elements and all(
                isinstance(e, cst.DictElement) and isinstance(e.value, cst.Call)
                and self.qualname(e.value.func) == "tensorflow.Variable" for e in value.elements)):
            return f"{d} is not a dict literal of tf.Variables"
        reads = set()  # ids of the Name nodes of d that only read it
        for sub in find_all(self.module, cst.Subscript):
            if isinstance(sub.value, cst.Name) and sub.value.value == d:
                reads.add(id(sub.value))
        for c in find_all(self.module, cst.Call):
            f = c.func
            if (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == d
                    and f.attr.value in ("values", "keys", "items", "get")):
                reads.add(id(f.value))
        written = set()  # d[k] = ..., del d[k], d[k] += ...
        for node in [x for kind in (cst.AssignTarget, cst.AugAssign, cst.Del) for x in find_all(self.module, kind)]:
            target = node.target
            for sub in [target, *find_all(target, cst.Subscript)]:
                if isinstance(sub, cst.Subscript) and isinstance(sub.value, cst.Name) and sub.value.value == d:
                    written.add(id(sub.value))
        for n in find_all(self.module, cst.Name):
            if n.value != d:
                continue
            if id(n) in written or (id(n) not in reads and not self._binding_name(n, d)):
                return f"the file uses {d} otherwise than by reading its entries"
        return None

    def _binding_name(self, n: cst.Name, d: str) -> bool:
        """``n`` is the target of ``d = {...}`` (the one binding) or an attribute's name (``x.d``)."""
        for a in find_all(self.module, cst.Assign):
            if any(t.target is n for t in a.targets):
                return True
        return any(attr.attr is n for attr in find_all(self.module, cst.Attribute))

    def _movable(self, original_node: cst.Assign, name: str, late: list[str]) -> str | None:
        """Whether the module-level line ``name = keras.optimizers.X(...)``, written before the models ``late``
        whose parameters it updates are bound, can move to just after the last line binding them (None), else
        why not. It can where the line is a top-level statement of its own, ``name`` and each model are bound once
        in the file, each model by a top-level ``model = ...`` line below it, and nothing in between runs code
        that reads ``name`` or rebinds a name the optimizer's arguments read: no statement in between (other
        than a def or class, whose body does not run there) mentions them, nor a function or class of the file
        whose body mentions them (followed through the functions that call those)."""
        if self._scopes or self.classes:
            return "it is not at the module's top level"
        body = list(self.module.body)
        here = next((i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine)
                     and any(b is original_node for b in s.body)), None)
        if here is None or len(body[here].body) != 1:
            return "it is not a statement of its own at the module's top level"
        if len(self.plan.bound_at.get(name, [])) != 1 or name in self.plan.globals:
            return f"{name} is bound more than once"
        last = here
        for o in late:
            at = [i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine) and any(
                isinstance(b, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == o
                                                  for t in b.targets) for b in s.body)]
            if len(self.plan.bound_at.get(o, [])) != 1 or len(at) != 1 or at[0] < here:
                return f"{o} is not bound once, by a line of the module's top level below it"
            last = max(last, at[0])
        # (the names of TensorFlow / Keras the file imports, `keras` of keras.optimizers.schedules...: code in
        # between that reads them changes nothing the optimizer's arguments read; one the file may rebind counts)
        fixed = self.ctx.imports.source_aliases() - (self.ctx.imports.rebindable
                                                     if self.ctx.imports.rebindable is not None else
                                                     self.ctx.imports.source_aliases())
        read = (_names_in([a.value for a in original_node.value.args]) - fixed) | {name}
        defs = {s.name.value: s for s in body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
        while True:  # the file's functions and classes that read those names, or call one that does
            more = {n for n, d in defs.items() if n not in read and _names_in([d.body]) & read}
            if not more:
                break
            read |= more
        for s in body[here + 1:last + 1]:
            if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
                outside = [*s.decorators, *(getattr(s, "bases", ()) or ()), *(getattr(s, "keywords", ()) or ())]
                if isinstance(s, cst.FunctionDef):
                    outside += [p.default for p in find_all(s.params, cst.Param) if p.default is not None]
                if _names_in(outside) & read:
                    return f"{s.name.value}, defined in between, reads it where it is defined"
                continue
            mentioned = _names_in([s]) & read
            if mentioned:
                return f"{', '.join(sorted(mentioned))} is read in between"
        return None

    def _optimizer_attribute(self, original_node, updated_node) -> cst.Assign:
        """``self.g_optimizer = keras.optimizers.Adam(...)`` in the compile of a model with its own train_step
        (a GAN's): the torch optimizer over the parameters of the variables ``self.g_optimizer.apply_gradients``
        updates (compile runs once the model exists). Elsewhere the optimizer's rule says what to write."""
        target = code(original_node.targets[0].target)
        fn = self._scopes[-1] if self._scopes else None
        if (isinstance(fn, cst.FunctionDef) and fn.name.value == "__init__" and len(self._scopes) == 1
                and self.classes and not self._keras_class[-1] and not self._callback_class[-1]):
            return self._trainer_optimizer(original_node, updated_node, fn)
        if not (self._in_train_step_class() and isinstance(fn, cst.FunctionDef)
                and fn.name.value == "compile" and len(self._scopes) == 1):
            return updated_node
        call = original_node.value
        rule = self.ctx.pack.by_name[self.qualname(call.func)]
        texts = {code(v) for v in self.plan.variables.get(target, [])}
        params = _params_of(self.plan.variables[target][0]) if len(texts) == 1 else None
        if params is None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{target} = {code(call)}: a torch optimizer takes the parameters it updates when it is "
                            "created, and fwport cannot tell which ("
                            + (f"{target}.apply_gradients updates {' and '.join(sorted(texts))}" if texts else
                               f"{target}.apply_gradients(zip(grads, model.trainable_variables)) is not in this file")
                            + f"); write {rule.emit.get('target', 'torch.optim...')}(<those parameters>, ...)", call, rule)
            return self._settle(call, updated_node)
        m = map_call(updated_node.value, rule, self.ctx, call)
        m.extras["params"] = parsed_expression(params)
        out = build_call(m, self.ctx)
        if out is None:
            return self._settle(call, updated_node)
        self.ctx.settle(out)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{target} = {code(call.func)}(...) in compile → over {params}, the parameters "
                        f"{target}.apply_gradients updates (compile runs once the model exists)", call, rule)
        return updated_node.with_changes(value=out)

    def _trainer_optimizer(self, original_node: cst.Assign, updated_node: cst.Assign,
                           fn: cst.FunctionDef) -> cst.Assign:
        """``self.g_optimizer = keras.optimizers.Adam(...)`` in the ``__init__`` of a plain class (a GAN trainer
        object, not a Keras model) whose methods call ``self.g_optimizer.apply_gradients(zip(grads,
        self.generator.trainable_variables))``, with ``self.generator`` bound once, in this ``__init__``: the
        torch optimizer over ``self.generator.parameters()``. A torch optimizer needs the model when it is
        created: where ``self.generator`` is bound after this line, the line moves down to just after it
        (leave_FunctionDef), when the lines in between neither read the optimizer nor call a method of the
        class. Anything else is left to the optimizer's rule, which refuses."""
        target = code(original_node.targets[0].target)
        attr = original_node.targets[0].target.attr.value
        cls = self._class_nodes[-1]
        texts = {code(v) for v in self.plan.variables.get(target, [])}
        params = _params_of(self.plan.variables[target][0]) if len(texts) == 1 else None
        if params is None:
            return updated_node
        owners = _self_owners(self.plan.variables[target][0])
        if owners is None or not owners:
            return updated_node
        # the optimizer: bound once in the class, read only as self.<attr>.apply_gradients (or kept by a Checkpoint)
        if _self_attr_bindings(cls, attr) != 1 or not _only_applied(cls, attr):
            return updated_node
        body = list(fn.body.body)
        here = next((i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine)
                     and any(b is original_node for b in s.body)), None)
        if here is None or len(body[here].body) != 1:
            return updated_node
        last = -1
        for owner in owners:  # each bound once in the class, by a line of this __init__'s own body
            if _self_attr_bindings(cls, owner) != 1:
                return updated_node
            at = [i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine) and any(
                isinstance(b, cst.Assign) and any(_is_self_attr(t.target, owner) for t in b.targets) for b in s.body)]
            if len(at) != 1:
                return updated_node
            last = max(last, at[0])
        methods = self.plan.class_methods.get(cls.name.value, set())
        between = body[here + 1:last + 1]
        if any(_is_self_attr(a, attr) or (isinstance(a, cst.Attribute) and _is_self_attr(a, a.attr.value)
                                          and a.attr.value in methods)
               for s in between for a in find_all(s, cst.Attribute)):
            return updated_node
        call = original_node.value
        rule = self.ctx.pack.by_name[self.qualname(call.func)]
        m = map_call(updated_node.value, rule, self.ctx, call)
        m.extras["params"] = parsed_expression(params)
        out = build_call(m, self.ctx)
        if out is None:
            return self._settle(call, updated_node)
        self.ctx.settle(out)
        made = updated_node.with_changes(value=out)
        moved = last > here
        if moved:
            self._moves.setdefault(id(fn), []).append((made, [o for o in owners]))
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{target} = {code(call.func)}(...) in {cls.name.value}.__init__ → over {params}, the "
                        f"parameters {target}.apply_gradients updates"
                        + (f"; created after {', '.join('self.' + o for o in owners)} (a torch optimizer takes its "
                           "parameters when it is created)" if moved else ""), call, rule)
        return made

    def _move_optimizers(self, fn: cst.FunctionDef, moves) -> cst.FunctionDef:
        """Each optimizer line _trainer_optimizer made moves to just after the last line binding its models."""
        body = list(fn.body.body)
        for made, owners in moves:
            line = next((s for s in body if isinstance(s, cst.SimpleStatementLine)
                         and any(b is made for b in s.body)), None)
            if line is None:
                continue
            body.remove(line)
            last = max((i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine) and any(
                isinstance(b, cst.Assign) and any(_is_self_attr(t.target, o) for t in b.targets for o in owners)
                for b in s.body)), default=None)
            if last is None:  # not found in the output: leave the line where it was written
                return fn
            body.insert(last + 1, line)
        return fn.with_changes(body=fn.body.with_changes(body=body))

    def _unscheduled(self, name: str) -> str | None:
        """Why the optimizer ``name`` given a schedule cannot get a LambdaLR stepped by its tape steps."""
        if len(self.plan.optimizers.get(name, [])) != 1 or len(self.plan.bound_at.get(name, [])) != 1:
            return f"and {name} is bound more than once (its scheduler would not follow it)"
        if not self.prefixes:
            return "and it is not created by a statement of its own"
        return None

    def _scheduler_name(self, opt: str) -> str:
        if opt not in self.schedulers:
            base = opt[:-len("optimizer")] + "scheduler" if opt.endswith("optimizer") else f"{opt}_scheduler"
            name, n = base, 1
            while name in self.plan.bound_at or name in self.schedulers.values():
                n += 1
                name = f"{base}{n}"
            self.schedulers[opt] = name
        return self.schedulers[opt]

    def _scheduler(self, opt: str, m, call: cst.Call, rule) -> cst.Assign:
        """``<opt>_scheduler = LambdaLR(opt, schedule)`` for an optimizer created with ``lr=1.0`` whose
        learning_rate was a schedule (the value LambdaLR multiplies 1.0 by at each step)."""
        expr = m.extras["schedule_expr"]
        classes = self.plan.schedule_classes
        if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in classes) or (
                isinstance(expr, cst.Name) and self.plan.instances.get(expr.value, set()) & classes):
            # a LearningRateSchedule of the file: Keras calls it with the step as a tensor
            tensor = self.ctx.spell_text("torch.tensor")
            expr = parsed_expression(f"lambda step: float({code(expr)}({tensor}(step)))")
        name = self._scheduler_name(opt)
        lambda_lr = self.ctx.spell_text(LAMBDA_LR)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"learning_rate={m.written('learning_rate')} → lr=1.0 and {name} = {lambda_lr}({opt}, ...), "
                        f"stepped after each {opt}.step(): Keras evaluates the schedule at every update, at the "
                        "number of updates done so far", call, rule)
        momentum = literal_value(m.bound.values.get("momentum", cst.Integer("0")), NOT_LITERAL)
        if rule.emit.get("target") in ("torch.optim.SGD", "torch.optim.RMSprop") and momentum != 0:
            self.ctx.report(Severity.WARNING, "approximate",
                            f"{code(call.func)}(momentum=...) under a learning-rate schedule: Keras scales each "
                            "gradient by the rate of its own step inside the momentum buffer, torch scales the whole "
                            "buffer by the current rate; the updates differ by the relative change of the rate "
                            "over the buffer's memory (about 1 / (1 - momentum) steps): 0.1% for a rate decaying "
                            "by 1e-4 per step with momentum 0.9, up to the ratio of two values for a few steps "
                            "after a PiecewiseConstantDecay boundary", call, rule)
        return cst.Assign([cst.AssignTarget(cst.Name(name))],
                          cst.Call(parsed_expression(lambda_lr), [cst.Arg(cst.Name(opt)), cst.Arg(expr)]))

    def _optimizer_factory(self, original_node, updated_node, name: str, rule) -> cst.Assign:
        """``opt = keras.optimizers.X(...)`` given only to compile calls: ``functools.partial(torch.optim.X,
        ...)``, which the compile calls with the parameters the optimizer updates."""
        call = original_node.value
        m = map_call(updated_node.value, rule, self.ctx, call)
        m.extras["factory"] = True
        out = build_call(m, self.ctx)
        if out is None:
            return self._settle(call, updated_node)
        self.ctx.settle(out)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{name} = {code(call)} is given to compile: {name} becomes a factory, "
                        f"{code(out)}, which compile calls with the parameters it updates (a torch "
                        "optimizer takes them when it is created)", call, rule)
        return updated_node.with_changes(value=out)

    def _loss(self, original_node, updated_node, name: str, q: str) -> cst.Assign:
        rule = self.ctx.pack.by_name[q]
        call = original_node.value
        m = map_call(updated_node.value, rule, self.ctx, call)
        if name in self.loss_names:  # its calls are adapted to torch's argument order
            m.extras["calls_adapted"] = True
        out = build_call(m, self.ctx)
        if out is None:
            return self._settle(call, updated_node)
        self.ctx.settle(out)
        return updated_node.with_changes(value=out)

    # -- tape blocks
    def leave_IndentedBlock(self, original_node, updated_node):
        body = self._tapes(list(updated_node.body), list(original_node.body))
        return updated_node.with_changes(body=body) if body is not None else updated_node

    def _tapes(self, body: list, originals: list) -> list | None:
        """The tape steps of one block rewritten; ``originals``: the same statements in the input
        tree (findings point there)."""
        out: list = []
        changed = False
        self._originals = originals
        i = 0
        while i < len(body):
            stmt = body[i]
            tape = self._tape_of(stmt)
            if tape is None:
                done = self._tapes_step(stmt, body, i, report=True)
                if done is None:
                    done = self._given_gradients(stmt, i)
                if done is not None:
                    out += done[0]
                    i = done[1]
                    changed = True
                    continue
                out.append(stmt)
                i += 1
                continue
            source = self._tape_of(originals[i]) if i < len(originals) else None
            inside = self._gradient_inside(stmt, tape[0])
            if inside is not None and i < len(originals) and self._gradient_inside(originals[i], tape[0]):
                # `grads = tape.gradient(...)` and the update written inside the with block: the same step in
                # torch, whose block the with line does not open (its statements go one level out)
                flat = body[:i] + list(inside) + body[i + 1:]
                flat_originals = originals[:i] + list(self._gradient_inside(originals[i], tape[0])) + originals[i + 1:]
                self._originals = flat_originals
                done = self._tape_step(inside[0], tape, flat, i, source[1] if source else tape[1])
                if done is None:
                    self._originals = originals
                    out.append(stmt)
                    i += 1
                    continue
                body, originals = flat, flat_originals
                new, consumed = done
                out += new
                i = consumed
                changed = True
                continue
            done = self._watch_tape(stmt, tape, body, i, source[1] if source else tape[1])
            if done is None:
                done = self._plain_tape(stmt, tape, body, i, source[1] if source else tape[1])
                if done is None and getattr(self, "_plain_refused", None) is tape[1]:
                    out.append(stmt)  # refused with its reason (_unordered_use): not an optimizer step either
                    i += 1
                    continue
            if done is None and _persistent_only(tape[1]):  # several gradients, several optimizers
                done = self._tapes_step(stmt, body, i, report=True)
                if done is None and self.ctx.is_settled(tape[1]):
                    out.append(stmt)
                    i += 1
                    continue
            if done is None:
                done = self._tape_step(stmt, tape, body, i, source[1] if source else tape[1])
            if done is None:
                out.append(stmt)
                i += 1
                continue
            new, consumed = done
            out += new
            i = consumed
            changed = True
        return out if changed else None

    def _given_gradients(self, stmt, i: int):
        """``opt.apply_gradients([(grads, image)])`` (or ``zip([g, g2], [v, v2])``) apart from any tape step, on
        variables that are names bound to ``tf.Variable(...)`` (torch leaf tensors of the same shapes) that ``opt``
        was created over (a style transfer: the gradients of one image, computed elsewhere):

            opt.apply_gradients([(grads, image)])    →    image.grad = grads
                                                          opt.step()          (and its scheduler's step)

        Each gradient is written to its variable's ``.grad``, which torch's step reads (Keras's apply_gradients
        takes the pairs). Returns (statements, next index) or None."""
        apply = _apply_gradients(stmt)
        if apply is None:
            return None
        opt, grads, variables = apply
        if not (isinstance(variables, (cst.List, cst.Tuple)) and variables.elements):
            return None
        if not hasattr(self, "_variable_bindings"):
            from fwport.packs.tf2torch.passes.variables import variable_bindings
            self._variable_bindings = variable_bindings(self.module, self.ctx)
        names = self._variable_bindings[0]
        items = [e.value for e in variables.elements]
        if not all(isinstance(v, cst.Name) and v.value in names for v in items):
            return None
        given = {code(_bound_variables(None, v)) for v in self.plan.variables.get(opt, [])}
        params = _params_of(variables)
        if given != {code(variables)} or params is None or self._schedule_refusal(opt) is not None:
            return None
        pairs = isinstance(grads, (cst.List, cst.Tuple)) and len(grads.elements) == len(items) and not any(
            isinstance(e, cst.StarredElement) for e in grads.elements)
        taken = _names_in([stmt])
        if pairs:
            writes = [parsed_statement(f"{v.value}.grad = {code(g.value)}\n") for v, g in zip(items, grads.elements)]
            for w in writes:  # (torch's attribute of the variable's tensor: the variables pass leaves it)
                self.ctx.settle(w.body[0].targets[0].target)
        else:
            p = next(n for n in ("param", "param_", "fwport_param") if n not in taken)
            g = next(n for n in ("grad", "grad_", "fwport_grad") if n not in taken)
            writes = [parsed_statement(f"for {p}, {g} in zip({params}, {code(grads)}):\n    {p}.grad = {g}\n")]
        source = self._originals[i] if i < len(self._originals) else stmt
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{opt}.apply_gradients(...) of gradients computed elsewhere → each gradient written to its "
                        f"variable's .grad, then {opt}.step(): torch's step reads .grad", source)
        step = self._step(opt, params, source, taken)
        writes[0] = writes[0].with_changes(leading_lines=stmt.leading_lines)
        return [*writes, stmt.with_changes(body=step, leading_lines=[])], i + 1

    def _gradient_inside(self, stmt: cst.With, tape: str) -> list | None:
        """A tape's ``with`` whose block holds ``g = tape.gradient(...)`` after other statements (and
        nothing else reads the tape): [the with holding what comes before it, *the statements from it on]."""
        if not isinstance(stmt.body, cst.IndentedBlock):
            return None
        inner = list(stmt.body.body)
        at = next((g for g, s in enumerate(inner) if _gradient(s, tape) is not None), None)
        if not at or any(tape in _names_in([s]) for s in inner[:at]):
            return None
        return [stmt.with_changes(body=stmt.body.with_changes(body=inner[:at])), *inner[at:]]

    def _tape_of(self, stmt) -> tuple[str, cst.Call] | None:
        if not isinstance(stmt, cst.With) or len(stmt.items) != 1:
            return None
        item = stmt.items[0]
        call = item.item
        if (isinstance(call, cst.Call) and self.qualname(call.func) == TAPE and item.asname is not None
                and isinstance(item.asname.name, cst.Name)):
            return item.asname.name.value, call
        return None

    def _per_sample_loss(self, loss: cst.BaseExpression, stmts: list) -> str | None:
        """The Keras loss function (``keras.losses.mean_squared_error``: one value per sample) whose call the tape's
        target ``loss`` is, or a name the statements bind (last) to one; else None."""
        value = loss
        if isinstance(loss, cst.Name):
            value = None
            for stmt in stmts:
                for small in (stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []):
                    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                            small.targets[0].target, cst.Name) and small.targets[0].target.value == loss.value:
                        value = small.value
                    elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and isinstance(small.target, cst.Name) \
                            and small.target.value == loss.value:
                        value = None
        if not isinstance(value, cst.Call):
            return None
        q = self.qualname(value.func) or ""
        for prefix in ("keras.losses.", "tensorflow.keras.losses.", "keras.metrics.", "tensorflow.keras.metrics."):
            fn = q[len(prefix):] if q.startswith(prefix) else ""
            if fn and "." not in fn and fn[0].islower() and fn not in ("get", "deserialize", "serialize"):
                return q
        return None

    def _tape_step(self, stmt: cst.With, tape: tuple[str, cst.Call], body: list, i: int, call: cst.Call):
        name = tape[0]
        refuse = None
        if call.args and not _persistent_only(call):  # persistent=True alone: one gradient changes nothing
            refuse = "a tape with arguments (watch_accessed_variables=...)"
        grad = apply = None
        j = i + 1
        if refuse is None:
            while j < len(body):
                grad = _gradient(body[j], name)
                if grad is not None:
                    break
                if name in _names_in([body[j]]):
                    refuse = f"{name} is used otherwise than by one {name}.gradient(loss, variables)"
                    break
                j += 1
            if grad is None and refuse is None:
                refuse = f"no `grads = {name}.gradient(loss, variables)` follows in the same block"
        k = j + 1
        grads = grad[0] if grad else None
        variables = self._variables_of(grad[2]) if grad else None  # a name bound to X.trainable_variables: X's
        used = False  # the gradients go through other code before apply_gradients
        clip = None  # (index, norm name, clip_norm) of `grads, norm = tf.clip_by_global_norm(grads, c)`
        if refuse is None:
            while k < len(body):
                apply = _apply_gradients(body[k])
                if apply is not None:
                    break
                clipped = self._global_clip(body[k], grads)
                if clipped is not None and clip is None:
                    grads, norm, max_norm = clipped
                    clip = (k, norm, max_norm)
                elif grads in _names_in([body[k]]):
                    if clip is not None or _params_of(variables) is None:
                        refuse = (f"the gradients {grads} are used before apply_gradients, together with a global "
                                  f"norm clip or on variables whose parameters are not known")
                        break
                    used = True  # read from param.grad after backward(), written back before step()
                k += 1
            if apply is None and refuse is None:
                refuse = "no `optimizer.apply_gradients(zip(grads, variables))` follows in the same block"
        if refuse is None:
            if (code(apply[1]) != grads and not used) or code(apply[2]) != code(grad[2]):
                refuse = f"apply_gradients does not take zip({grads}, {code(grad[2])})"
            elif {grad[0], grads} & _names_in(self._until_rebound(body, k + 1, name)) or name in _names_in(
                    self._until_rebound(body, j + 1, name)):
                refuse = f"{grads} or {name} is used after the step"
            elif (clip is not None or self.plan.clips.get(apply[0])) and _params_of(variables) is None:
                refuse = f"the parameters of {code(grad[2])} are not known (clipping needs them)"
            else:
                refuse = self._schedule_refusal(apply[0])
        if refuse is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"tf.GradientTape: {refuse}; only `with tf.GradientTape() as tape: ...` + "
                            "`grads = tape.gradient(loss, model.trainable_variables)` + "
                            "`optimizer.apply_gradients(zip(grads, model.trainable_variables))` is translated "
                            "(to optimizer.zero_grad(), loss.backward(), optimizer.step())", call)
            self.ctx.settle(call)
            self.ctx.settle(tape[1])  # the node the rule pass will see: no second error there
            return None
        opt = apply[0]
        loss = grad[1]
        loss_text = code(loss) if isinstance(loss, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({code(loss)})"
        inner = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else [stmt.body]
        per_sample = self._per_sample_loss(loss, [*inner, *body[i + 1:j]])
        if per_sample is not None:
            # tape.gradient of a non-scalar target is the gradient of its sum; torch's backward() needs a scalar
            loss_text = f"{loss_text}.sum()"
            self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(loss)} is {per_sample}'s loss per sample (not "
                            f"reduced): tape.gradient differentiates its sum, so {loss_text}.backward() (torch's "
                            "backward() takes a scalar)", call)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"tf.GradientTape step → {opt}.zero_grad(), {loss_text}.backward(), {opt}.step()", call)
        inner = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else [stmt.body]
        zero = cst.SimpleStatementLine([cst.Expr(parsed_expression(f"{opt}.zero_grad()"))],
                                       leading_lines=stmt.leading_lines)
        new = [zero, *inner, *body[i + 1:j]]
        backward = cst.Expr(parsed_expression(f"{loss_text}.backward()"))
        if (opt == "self.optimizer" and self._in_train_step_class()
                and code(variables) not in ("self.trainable_weights", "self.trainable_variables")):
            # TrainStepModule.compile creates self.optimizer over all the parameters: only those of
            # the variables apply_gradients gets may receive gradients (step() moves any that has one)
            params = _params_of(variables)
            if params is None:
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"self.optimizer updates {code(grad[2])}, whose parameters fwport cannot name; "
                                "the translated self.optimizer holds all the model's parameters: call "
                                "loss.backward(inputs=<those parameters>) so that step() moves only them", call)
            else:
                inputs = params if params.startswith("[") else f"list({params})"
                backward = cst.Expr(parsed_expression(f"{loss_text}.backward(inputs={inputs})"))
        if used:  # the gradients as a list, shaped as torch's parameters
            params = _params_of(variables)
            self.ctx.options["_split_lines"] = True
            backward = [cst.Expr(cst.Call(cst.Name(MARK), [cst.Arg(backward.value)])),
                        cst.Assign([cst.AssignTarget(cst.Name(grad[0]))],
                                   parsed_expression(f"[p.grad for p in {params}]"))]
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{grad[0]} = {name}.gradient(...) → {grad[0]} = [p.grad for p in {params}] after "
                            f"backward(), written back to the parameters' .grad before {opt}.step(): each "
                            "gradient is shaped as its torch parameter (a Dense kernel's is transposed)", call)
        new.append(body[j].with_changes(body=backward if isinstance(backward, list) else [backward]))
        between = list(body[j + 1:k])
        if clip is not None:
            at, norm, max_norm = clip
            clip_call = (f"{self.ctx.spell_text('torch.nn.utils.clip_grad_norm_')}({_params_of(variables)}, "
                         f"{code(max_norm)})")
            stmt_clip = cst.Expr(parsed_expression(clip_call)) if norm is None else cst.Assign(
                [cst.AssignTarget(cst.Name(norm))], parsed_expression(clip_call))
            between[at - j - 1] = body[at].with_changes(body=[stmt_clip])
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"tf.clip_by_global_norm → {clip_call} after backward(): the same global norm "
                            "(returned before clipping, like TensorFlow's); torch divides by norm + 1e-6, "
                            "a relative difference under 1e-6 / clip_norm", self._source_of(at, self._global_clip_node))
        new += between
        step = self._step(opt, _params_of(variables), call, _names_in(body))
        if used:
            taken = _names_in(body)
            p_name = next(n for n in ("param", "param_", "fwport_param") if n not in taken)
            g_name = next(n for n in ("grad", "grad_", "fwport_grad") if n not in taken)
            write = parsed_statement(f"for {p_name}, {g_name} in zip({_params_of(variables)}, {code(apply[1])}):\n"
                                     f"    {p_name}.grad = {g_name}\n")
            new.append(write.with_changes(leading_lines=body[k].leading_lines))
            new.append(body[k].with_changes(body=step, leading_lines=[]))
        else:
            new.append(body[k].with_changes(body=step))
        return new, k + 1

    def _variables_of(self, variables: cst.BaseExpression) -> cst.BaseExpression:
        return _bound_variables(self._scopes[-1] if self._scopes else None, variables)

    def _schedule_refusal(self, opt: str) -> str | None:
        """Why a step of ``opt``, whose learning rate is a schedule, cannot step its LambdaLR here (created
        next to the optimizer: this step must see that name)."""
        if opt not in self.plan.scheduled:
            return None
        here = self._scopes[-1] if self._scopes else None
        bound = self.plan.scheduled[opt]
        if bound == 0 and (here is None or opt not in bound_names(here)):
            return None
        if here is not None and bound == id(here):
            return None
        return (f"{opt}'s learning rate is a schedule, whose torch scheduler is created next to {opt}, out of "
                "this step's reach (step it here by hand after each step())")

    def _step(self, opt: str, params: str | None, call: cst.CSTNode, taken: set[str]) -> list:
        """What the line of ``opt.apply_gradients(...)`` becomes: the optimizer's clipping (Keras clips in
        apply_gradients), ``opt.step()``, and its scheduler's step (Keras steps a schedule with every update)."""
        out: list = []
        for kind, value in self.plan.clips.get(opt, {}).items():
            fn = self.ctx.spell_text("torch.nn.utils." + ("clip_grad_value_" if kind == "clipvalue" else "clip_grad_norm_"))
            if kind == "clipnorm":  # per variable: the norm of each parameter's gradient
                p = next(n for n in ("param", "param_", "fwport_param") if n not in taken)
                text = f"for {p} in {params}:\n    {fn}({p}, {code(value)})\n"
                out.append(cst.Expr(cst.Call(cst.Name(MARK), [cst.Arg(cst.SimpleString(repr(text)))])))
                done = f"{fn}({p}, {code(value)}) for each parameter {p}"
            else:
                done = f"{fn}({params}, {code(value)})"
                out.append(cst.Expr(cst.Call(cst.Name(MARK), [cst.Arg(parsed_expression(done))])))
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{opt}'s {kind}={code(value)} → {done} before {opt}.step()"
                            + ("; torch divides by the norm + 1e-6, a relative difference under 1e-6 / "
                               f"{code(value)}" if kind != "clipvalue" else ""), call)
        step = parsed_expression(f"{opt}.step()")
        if opt in self.plan.scheduled:
            out += [cst.Expr(cst.Call(cst.Name(MARK), [cst.Arg(step)])),
                    cst.Expr(parsed_expression(f"{self._scheduler_name(opt)}.step()"))]
        else:
            out.append(cst.Expr(step))
        owners = list(dict.fromkeys(_OWNER.findall(params or "")))
        if owners:  # the weights' constraints of the models it updates (finish: where the file's modules have some)
            m = next(n for n in ("m", "module", "fwport_module") if n not in taken)
            modules = f"{owners[0]}.modules()" if len(owners) == 1 else \
                "[" + ", ".join(f"*{o}.modules()" for o in owners) + "]"
            text = (f"for {m} in {modules}:  # the weights' constraints: Keras's optimizer applies them after each "
                    f"update\n    if hasattr({m}, \"apply_constraints\"):\n        {m}.apply_constraints()\n")
            out.append(cst.Expr(cst.Call(cst.Name(_CONSTRAINED_STEP), [cst.Arg(cst.SimpleString(repr(text)))])))
            self.ctx.options["_constrained_steps"] = True
        if len(out) > 1:
            self.ctx.options["_split_lines"] = True
        return out

    def _tapes_step(self, stmt, body: list, i: int, report: bool = False):
        """A GAN step, two forms of one meaning:

            with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:      (one tape per loss)
            with tf.GradientTape(persistent=True) as tape:                       (one tape, several gradients)

        each ``grads = tape.gradient(loss, V)`` and ``opt.apply_gradients(zip(grads, V))`` right after
        the block become ``loss.backward(inputs=list(V's parameters), retain_graph=True)`` (no
        retain_graph on the last) and ``opt.step()`` (a ``del tape`` right after them goes), every
        optimizer's zero_grad() on the ``with`` line: each loss reaches only the parameters its gradient is taken for, as in TensorFlow, and
        every step comes after every gradient (TensorFlow differentiates the one forward pass; a torch
        step before a later backward changes, in place, parameters that backward needs). Returns
        (statements, next index) or None (left to the single-tape forms and errors); with ``report``,
        why not is an error finding on the tape."""
        def refuse(why: str):
            if report:
                source = self._originals[i] if i < len(self._originals) else stmt
                call = source.items[0].item if isinstance(source, cst.With) else stmt.items[0].item
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"tf.GradientTape: {why}; translated are `with tf.GradientTape() as t1, "
                                "tf.GradientTape() as t2:` or `with tf.GradientTape(persistent=True) as tape:` "
                                "whose block does not use the tapes, followed right after it by one "
                                "`g = tape.gradient(loss, model.trainable_variables)` per optimizer and then "
                                "each `opt.apply_gradients(zip(g, model.trainable_variables))` (to zero_grad(), "
                                "loss.backward(inputs=..., retain_graph=True), step())", call)
                if isinstance(source, cst.With):
                    for item in source.items:
                        self.ctx.settle(item.item)
                for item in stmt.items:
                    self.ctx.settle(item.item)
            return None

        if not isinstance(stmt, cst.With) or not isinstance(stmt.body, cst.IndentedBlock):
            return None
        tapes = []
        for item in stmt.items:
            call = item.item
            if not (isinstance(call, cst.Call) and self.qualname(call.func) == TAPE
                    and item.asname is not None and isinstance(item.asname.name, cst.Name)):
                return None
            tapes.append(item.asname.name.value)
        persistent = len(tapes) == 1 and _persistent_only(stmt.items[0].item)
        if len(tapes) < 2 and not persistent:
            return None
        if len(tapes) > 1 and any(item.item.args for item in stmt.items):
            return refuse("tapes with arguments in one with statement")
        if set(tapes) & _names_in(stmt.body.body):
            return refuse(f"the block uses {' or '.join(tapes)} (watch, a gradient inside it)")
        if persistent:  # as many gradients as follow the block (each taken once)
            uses = [small for small in self._until_rebound(body, i + 1, tapes[0]) if tapes[0] in _names_in([small])]
            if len(uses) == 1 and _gradient(uses[0], tapes[0]) is not None:
                return None  # one gradient: the step of a plain tape (persistence changes nothing)
            n = at = 0  # the gradients among the gradients and apply_gradients right after the block
            while i + 1 + at < len(body) and (_gradient(body[i + 1 + at], tapes[0]) is not None
                                              or _apply_gradients(body[i + 1 + at]) is not None):
                n += _gradient(body[i + 1 + at], tapes[0]) is not None
                at += 1
            if n < 2:
                return refuse(f"a persistent tape with fewer than two `g = {tapes[0]}.gradient(loss, variables)` "
                              "right after its block, or used otherwise")
            slots = [tapes[0]] * n
        else:
            slots = list(tapes)
            n = len(tapes)
        after = body[i + 1:i + 1 + 2 * n]
        if len(after) < 2 * n:
            return refuse("fewer statements after the block than gradients and apply_gradients")
        grads: list = [None] * n  # slot → (grads name, loss, V, position)
        applies: dict[str, tuple] = {}  # grads name → (optimizer, V, position)
        for at, small in enumerate(after):
            for k, t in enumerate(slots):
                g = _gradient(small, t) if grads[k] is None else None
                if g is not None:
                    grads[k] = (*g, at)
                    break
            else:
                a = _apply_gradients(small)
                if a is None or not isinstance(a[1], cst.Name) or a[1].value in applies:
                    return refuse(f"statement {at + 1} after the block is neither a tape's gradient nor "
                                  "`opt.apply_gradients(zip(g, variables))` of one")
                applies[a[1].value] = (a[0], a[2], at)
        if any(g is None for g in grads) or len(applies) != n:
            return refuse("not one gradient and one apply_gradients per " + ("gradient" if persistent else "tape"))
        plan = []
        for k in range(n):
            g, loss, variables, at = grads[k]
            if g not in applies or applies[g][2] < at or code(applies[g][1]) != code(variables):
                return refuse(f"{g} is not applied, after it is taken, with the same variables ({code(variables)})")
            params = _params_of(variables)
            if params is None:
                return refuse(f"the parameters of {code(variables)} are not known")
            why = self._schedule_refusal(applies[g][0])
            if why is not None:
                return refuse(why)
            plan.append((slots[k], g, loss, params, at, applies[g][0], applies[g][2]))
        opts = [p[5] for p in plan]
        if len(set(opts)) != n:
            return refuse("one optimizer applies two gradients (torch's backward sums them into .grad)")
        owners = [set(_OWNER.findall(p[3])) or {p[3]} for p in plan]
        for a in range(n):
            for b in range(a + 1, n):
                if any(x == y or x.startswith(y + ".") or y.startswith(x + ".")  # a model and its layer
                       for x in owners[a] for y in owners[b]):
                    return refuse(f"{code(plan[a][2])} and {code(plan[b][2])} are differentiated with respect to "
                                  "the same parameters (torch's backward would sum the two gradients into .grad)")
        end = i + 1 + 2 * n
        deleted = persistent and end < len(body) and _deletes(body[end], tapes[0])  # `del tape`: its line goes
        if (set(tapes) | {p[1] for p in plan}) & _names_in(self._until_rebound(body, end + deleted, tapes[0])):
            return refuse(f"{' or '.join(sorted(set(tapes) | {p[1] for p in plan}))} is used after the step")
        # the steps after every backward (a step changes the parameters the next backward differentiates at)
        last = max(p[4] for p in plan)
        if min(p[6] for p in plan) < last:
            return refuse("an apply_gradients comes before the last gradient (write every gradient first)")
        new_after = list(after)
        for t, g, loss, params, at, opt, apply_at in plan:
            text = code(loss) if isinstance(loss, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({code(loss)})"
            inputs = params if params.startswith("[") else f"list({params})"
            retain = "" if at == last else ", retain_graph=True"
            new_after[at] = after[at].with_changes(
                body=[cst.Expr(parsed_expression(f"{text}.backward(inputs={inputs}{retain})"))])
            new_after[apply_at] = after[apply_at].with_changes(
                body=self._step(opt, params, stmt.items[0].item, _names_in(body)))
        zeros = [cst.Expr(cst.Call(cst.Name(MARK), [cst.Arg(parsed_expression(f"{p[5]}.zero_grad()"))]))
                 for p in plan[:-1]]
        zeros.append(cst.Expr(parsed_expression(f"{plan[-1][5]}.zero_grad()")))
        self.ctx.options["_split_lines"] = True
        first = cst.SimpleStatementLine(zeros, leading_lines=stmt.leading_lines)
        inner = list(stmt.body.body)
        source = self._originals[i] if i < len(self._originals) else stmt
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        (f"a persistent GradientTape with {n} gradients → " if persistent else f"{n} GradientTapes → ")
                        + "; ".join(f"{p[5]}.zero_grad(), backward(inputs=<{p[3]}>), {p[5]}.step()" for p in plan)
                        + ": each loss reaches only the parameters of its gradient's variables, every step after "
                        "every backward", source.items[0].item if isinstance(source, cst.With) else stmt.items[0].item)
        if deleted:
            new_after.append(_dropped_line(self.ctx).with_changes(leading_lines=body[end].leading_lines))
        return [first, *inner, *new_after], end + deleted

    def _until_rebound(self, body: list, start: int, name: str) -> list:
        """The statements from ``start`` up to a later ``with tf.GradientTape() as <name>:`` (a new tape
        under the same name: what follows is about that one)."""
        for at in range(start, len(body)):
            tape = self._tape_of(body[at])
            if tape is not None and tape[0] == name:
                return body[start:at]
        return body[start:]

    def _watch_tape(self, stmt: cst.With, tape: tuple[str, cst.Call], body: list, i: int, call: cst.Call):
        """A tape that differentiates with respect to tensors it watches (a gradient penalty):

            with tf.GradientTape() as t:            x.requires_grad_(True)
                t.watch(x)                     →    pred = critic(x)
                pred = critic(x)                    g = torch.autograd.grad(pred.sum(), [x], create_graph=True)[0]
            g = t.gradient(pred, [x])[0]

        TensorFlow sums a non-scalar target (``.sum()``) and lets an enclosing tape differentiate the
        gradient itself (``create_graph=True``). Returns (statements, next index) or None."""
        name = tape[0]
        if tape[1].args or not isinstance(stmt.body, cst.IndentedBlock):
            return None
        inner = list(stmt.body.body)
        watched: list[str] = []
        for at, small in enumerate(inner):
            w = self._watch_of(small, name)
            if w is not None:
                watched.append(w)
                inner[at] = small.with_changes(body=[cst.Expr(parsed_expression(f"{w}.requires_grad_(True)"))])
            elif name in _names_in([small]):
                return None
        if not watched:
            return None
        j = i + 1
        while j < len(body) and name not in _names_in([body[j]]):
            j += 1
        if j == len(body) or not (isinstance(body[j], cst.SimpleStatementLine) and len(body[j].body) == 1
                                  and isinstance(body[j].body[0], cst.Assign)):
            return None
        assign = body[j].body[0]
        value, index = assign.value, None
        if isinstance(value, cst.Subscript):
            value, index = value.value, value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                and code(value.func) == f"{name}.gradient" and len(value.args) == 2
                and not any(a.keyword or a.star for a in value.args)):
            return None
        target, sources = value.args[0].value, value.args[1].value
        single = isinstance(sources, cst.Name)
        names = [sources] if single else (
            [e.value for e in sources.elements] if isinstance(sources, (cst.List, cst.Tuple)) else [])
        if not names or any(not isinstance(n, cst.Name) or n.value not in watched for n in names):
            return None
        if name in _names_in(self._until_rebound(body, j + 1, name)):
            return None
        t = code(target) if isinstance(target, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({code(target)})"
        grad = (f"{self.ctx.spell_text('torch.autograd.grad')}({t}.sum(), {code(sources)}, create_graph=True)"
                + ("[0]" if single else ""))
        new_value = parsed_expression(grad)
        if index is not None:
            new_value = index.with_changes(value=new_value)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"tf.GradientTape watching {', '.join(watched)} → requires_grad_(True) and {grad}: the sum "
                        "of a non-scalar target as TensorFlow takes it, create_graph=True so that a loss built on "
                        "the gradient (a gradient penalty) can be differentiated in turn", call)
        first = inner[0].with_changes(leading_lines=[*stmt.leading_lines, *inner[0].leading_lines])
        out = [_dropped_line(self.ctx), first, *inner[1:], *body[i + 1:j],
               body[j].with_changes(body=[assign.with_changes(value=new_value)])]
        return out, j + 1

    def _plain_tape(self, stmt: cst.With, tape: tuple[str, cst.Call], body: list, i: int, call: cst.Call):
        """A tape whose gradients no optimizer applies (manual SGD on tf.Variables, gradients printed):

            with tf.GradientTape() as tape:              loss = f(w, b)
                loss = f(w, b)                     →     dw, db = torch.autograd.grad(loss.sum(), [w, b])
            dw, db = tape.gradient(loss, [w, b])

        The body one level out; each ``tape.gradient(target, sources)`` → ``torch.autograd.grad``,
        the sum of a non-scalar target as TensorFlow takes it; a list / tuple of sources gives a tuple,
        a single source ``[0]``. Every source must be a name or attribute bound to ``tf.Variable(...)``
        in the file (a leaf that requires grad in the translation) or a name the tape watches
        (``tape.watch(x)`` → ``x.requires_grad_(True)``, as in ``_watch_tape``); a persistent tape's gradient
        calls keep the graph (``retain_graph=True``) but for the last. Returns (statements, next index)
        or None (left to the optimizer forms and their errors)."""
        name = tape[0]
        persistent = False
        if tape[1].args:
            a = tape[1].args
            if not (len(a) == 1 and a[0].keyword is not None and a[0].keyword.value == "persistent"
                    and isinstance(a[0].value, cst.Name) and a[0].value.value == "True"):
                return None
            persistent = True
        if not isinstance(stmt.body, cst.IndentedBlock):
            return None
        inner = list(stmt.body.body)
        watched: set[str] = set()  # tape.watch(x) → x.requires_grad_(True), x then a valid source
        for at, small in enumerate(inner):
            w = self._watch_of(small, name)
            if w is not None:
                watched.add(w)
                inner[at] = small.with_changes(body=[cst.Expr(parsed_expression(f"{w}.requires_grad_(True)"))])
            elif name in _names_in([small]):
                return None
        after = self._until_rebound(body, i + 1, name)
        from fwport.packs.tf2torch.passes.variables import tf_module_instances, variable_bindings  # the sources
        if not hasattr(self, "_variable_bindings"):
            self._variable_bindings = variable_bindings(self.module, self.ctx)
        names, attrs, lists = self._variable_bindings
        if not hasattr(self, "_tf_module_instances"):
            self._tf_module_instances = tf_module_instances(self.module, self.ctx)
        calls: list[tuple[int, cst.Call]] = []  # (statement index in body, the gradient call)
        deleted: list[int] = []  # `del tape` statements (their lines go)
        defs: list[cst.FunctionDef] = []  # functions defined after the tape that bind their own `name`
        for at, small in enumerate(after, start=i + 1):
            if isinstance(small, cst.FunctionDef) and (name not in _names_in([small])
                                                       or name in bound_names(small)):
                defs.append(small)  # not run here, and its tape is its own (a notebook's later training step)
                continue
            if name not in _names_in([small]):
                continue
            if _deletes(small, name):
                deleted.append(at)
                continue
            found = _TapeCalls(name)
            scan(small, found)
            if not isinstance(small, cst.SimpleStatementLine) or found.other or not found.calls:
                return None
            calls += [(at, c) for c in found.calls]
        if not calls or (len(calls) > 1 and not persistent):
            return None
        # the gradients an optimizer applies are the optimizer forms' (a function defined later applies its own
        # unless it reads the names these gradients are bound to)
        results = _names_in([body[at] for at, _ in calls]) - _names_in([c for _, c in calls])
        if "apply_gradients" in _attrs_in([s for s in after if not any(s is d for d in defs)]
                                          + [d for d in defs if (_names_in([d]) - bound_names(d)) & results]):
            return None
        for _, c in calls:
            if len(c.args) != 2 or any(a.keyword or a.star for a in c.args):
                return None
            sources = c.args[1].value
            if self._variable_list(sources, lists) is not None:
                # model.trainable_variables, a tf.Module's variables, params = [w, b]: leaves, a tuple; not where
                # the file applies gradients with an optimizer (returned from here, applied elsewhere: the
                # optimizer forms, or their errors)
                if not hasattr(self, "_applies_gradients"):
                    self._applies_gradients = "apply_gradients" in _attrs_in(self.module.body)
                if self._applies_gradients:
                    return None
                continue
            items = [e.value for e in sources.elements if not isinstance(e, cst.StarredElement)] if isinstance(
                sources, (cst.List, cst.Tuple)) else [sources]
            if isinstance(sources, (cst.List, cst.Tuple)) and len(items) != len(sources.elements) or not items:
                return None
            for s in items:
                if not (isinstance(s, cst.Name) and (s.value in names or s.value in watched)
                        or isinstance(s, cst.Attribute) and s.attr.value in attrs):
                    return None
        for at, c in calls:
            unordered = self._unordered_use(c, body[at], body[at + 1:])
            if unordered is not None:
                self.ctx.report(Severity.ERROR, "unsupported-construct", unordered, call)
                self.ctx.settle(call)
                self.ctx.settle(tape[1])
                self._plain_refused = tape[1]
                return None
        grad = self.ctx.spell_text("torch.autograd.grad")
        replaced: dict[int, cst.Call] = {}
        for n, (_, c) in enumerate(calls):
            target, sources = c.args[0].value, c.args[1].value
            t = code(target) if isinstance(target, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({code(target)})"
            retain = ", retain_graph=True" if n < len(calls) - 1 else ""
            single = not isinstance(sources, (cst.List, cst.Tuple)) and self._variable_list(sources, lists) is None
            replaced[id(c)] = parsed_expression(f"{grad}({t}.sum(), {code(sources)}{retain})" + ("[0]" if single else ""))
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"tf.GradientTape{' (persistent)' if persistent else ''} whose gradients no optimizer "
                        f"applies → the body one level out and {grad}(target.sum(), sources): the sum of a "
                        "non-scalar target as TensorFlow takes it; a list of sources gives a tuple of gradients"
                        + ("; retain_graph=True on all but the last gradient" if persistent else ""), call)
        first = inner[0].with_changes(leading_lines=[*stmt.leading_lines, *inner[0].leading_lines])
        last = max(at for at, _ in calls + [(d, None) for d in deleted])
        out = [_dropped_line(self.ctx), first, *inner[1:]]
        for at in range(i + 1, last + 1):
            if at in deleted:
                out.append(_dropped_line(self.ctx).with_changes(leading_lines=body[at].leading_lines))
            else:
                out.append(rewrite(body[at], _Replace(replaced)) if any(a == at for a, _ in calls) else body[at])
        return out, last + 1

    def _unordered_use(self, c: cst.Call, line, rest: list) -> str | None:
        """Why the gradients of ``c`` (a tape.gradient call over a tf.Module instance's variables) cannot be
        translated: TensorFlow lists a tf.Module's variables sorted by attribute name, the translated module's
        parameters() in the order they were assigned, so only gradients paired with those same variables by
        ``zip(grads, M.variables)`` are the same; an index or an unpacking may pick another variable's."""
        sources = c.args[1].value
        if not (isinstance(sources, cst.Attribute) and isinstance(sources.value, cst.Name)
                and sources.value.value in self._tf_module_instances):
            return None
        classes = {s.name.value for s in self.module.body if isinstance(s, cst.ClassDef)}
        for made in self._tf_module_instances[sources.value.value]:
            for arg in made.args:
                if isinstance(arg.value, (cst.List, cst.Tuple)) and any(
                        isinstance(e.value, cst.Call) and isinstance(e.value.func, cst.Name)
                        and e.value.func.value in classes for e in arg.value.elements):
                    return (f"tf.GradientTape: {code(sources.value)} = {code(made.func)}(...) is given a list of "
                            f"modules ({code(arg.value)[:60]}), whose variables TensorFlow tracks in a list "
                            "attribute, where an nn.Module registers only the modules assigned to it directly or "
                            f"in an nn.ModuleList, so {code(sources.value)}.parameters() would miss theirs; keep "
                            f"the list as nn.ModuleList(...) in {code(made.func)}.__init__, then translate again")
        why = (f"tf.GradientTape: the gradients over {code(sources)} (a tf.Module's, which TensorFlow lists sorted by "
               "attribute name, where the translated module's parameters() come in the order they were assigned) "
               "are used otherwise than paired by zip() with those same variables; write "
               f"`for g, v in zip(grads, {code(sources)}): ...`, or name the variables in the gradient call "
               f"(tape.gradient(loss, [{code(sources.value)}.w, {code(sources.value)}.b]))")
        a = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
        if not (isinstance(a, cst.Assign) and a.value is c and len(a.targets) == 1
                and isinstance(a.targets[0].target, cst.Name)):
            return why
        name, wanted = a.targets[0].target.value, code(sources)
        zipped: set[int] = set()  # the names paired by zip(name, sources) / zip(sources, name)
        for z in (z for stmt in rest for z in find_all(stmt, cst.Call)):
            if (isinstance(z.func, cst.Name) and z.func.value == "zip" and len(z.args) == 2
                    and not any(x.keyword or x.star for x in z.args)):
                texts = [code(x.value) for x in z.args]
                if sorted(texts) == sorted([name, wanted]):
                    zipped |= {id(x.value) for x in z.args}
        for n in (n for stmt in rest for n in find_all(stmt, cst.Name)):
            if n.value == name and id(n) not in zipped:
                return why
        return None

    def _variable_list(self, sources: cst.BaseExpression, lists: set[str]) -> str | None:
        """What a tape's sources are when they are a list of variables that the translation makes a list of leaf
        tensors requiring grad: ``X.trainable_variables`` / ``X.trainable_weights`` (the parameters that train,
        model_api / variables), ``M.variables`` / ``M.weights`` of a model (model_api) or of an instance of a
        tf.Module class of the file (variables), a name bound only to lists of variables; else None."""
        if isinstance(sources, cst.Name) and sources.value in lists:
            return "a list of tf.Variables"
        if not (isinstance(sources, cst.Attribute) and isinstance(sources.value, (cst.Name, cst.Attribute))):
            return None
        attr, receiver = sources.attr.value, sources.value
        if attr in _VARIABLE_LISTS:
            return f"{code(receiver)}'s trainable parameters"
        if attr in ("variables", "weights") and (
                isinstance(receiver, cst.Name) and receiver.value in self._tf_module_instances
                or self.models.is_model_expr(receiver, self._chain())):
            return f"{code(receiver)}'s parameters"
        return None

    def _watch_of(self, stmt, name: str) -> str | None:
        """``<name>.watch(x)`` as a statement → x."""
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
            return None
        c = stmt.body[0].value
        if (isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and code(c.func) == f"{name}.watch"
                and len(c.args) == 1 and isinstance(c.args[0].value, cst.Name) and not c.args[0].keyword):
            return c.args[0].value.value
        return None

    def _source_of(self, at: int, node: cst.CSTNode) -> cst.CSTNode:
        """The input tree's value of the one-assignment statement ``at`` of this block (findings point there)."""
        orig = self._originals[at] if at < len(self._originals) else None
        if isinstance(orig, cst.SimpleStatementLine) and len(orig.body) == 1 and isinstance(orig.body[0], cst.Assign):
            return orig.body[0].value
        return node

    def _global_clip(self, stmt, grads: str | None):
        """``g2, norm = tf.clip_by_global_norm(g, c)`` on the gradients → (g2, norm or None for ``_``, c)."""
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1):
            return None
        a = stmt.body[0]
        target, call = a.targets[0].target, a.value
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2
                and all(isinstance(e.value, cst.Name) for e in target.elements) and isinstance(call, cst.Call)
                and self.qualname(call.func) == "tensorflow.clip_by_global_norm" and len(call.args) == 2
                and not any(x.star for x in call.args) and code(call.args[0].value) == grads
                and (call.args[1].keyword is None or call.args[1].keyword.value == "clip_norm")):
            return None
        self._global_clip_node = call
        new_grads, norm = (e.value.value for e in target.elements)
        return new_grads, None if norm == "_" else norm, call.args[1].value


class _Mentions(cst.CSTVisitor):
    """Whether a statement holds something this pass rewrites (cheap, shadowing ignored)."""

    def __init__(self, ctx: FileContext, losses: set[str]):
        self.ctx = ctx
        self.losses = losses
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        return not self.found and default_visit(self, node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in ("history", "metrics", "learning_rate", "lr", "iterations", "trainable") \
                or node.attr.value in COMPILED:
            self.found = True

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if any(self.ctx.imports.resolve(b.value) in (CALLBACK, SCHEDULE) for b in node.bases):
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        if _loop_method(node) in ("compile", *fitloop.FUNCTIONS) or _method_of(node) == "exclude_from_weight_decay" or (
                isinstance(node.func, cst.Attribute) and node.func.attr.value == "exclude_from_weight_decay"):
            self.found = True
        elif isinstance(node.func, (cst.Name, cst.Attribute)) and any(
                a.keyword is not None and a.keyword.value == "training" for a in node.args):
            self.found = True
        elif isinstance(node.func, cst.Name) and node.func.value in self.losses:
            self.found = True  # a loss object's call; also a model factory's (model = get_model())
        elif _transform(self.ctx, self.ctx.imports.resolve(node.func)) in ("optimizer", "loss"):
            self.found = True
        elif self.ctx.imports.resolve(node.func) == TAPE:
            self.found = True
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "apply_gradients":
            self.found = True  # (apart from a tape step: _given_gradients)


class _Rebase(cst.CSTTransformer):
    """Names (not attribute names) replaced: a function's parameters by what one call passes."""

    def __init__(self, given: dict[str, cst.BaseExpression]):
        super().__init__()
        self.given = given
        self.missing: list[str] = []  # parameters the call leaves at their default

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return False  # its .attr is a Name too: only its value is rebased (leave_Attribute)

    def leave_Attribute(self, original_node, updated_node):
        return updated_node.with_changes(value=original_node.value.visit(self))

    def leave_Name(self, original_node, updated_node):
        value = self.given.get(original_node.value, updated_node)
        if value is _NOT_PASSED:
            self.missing.append(original_node.value)
            return updated_node
        return value


#: a parameter the call does not pass (left at its default)
_NOT_PASSED = cst.Name("_")


def _passed(fn: cst.FunctionDef, call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """The value each plain parameter of ``fn`` gets at ``call`` (_NOT_PASSED where it takes its default);
    None where the call passes ``*args`` / ``**kwargs``, which fwport does not follow."""
    if any(a.star for a in call.args) or fn.params.star_kwarg is not None:
        return None
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    given: dict[str, cst.BaseExpression] = {}
    for i, a in enumerate(call.args):
        if a.keyword is not None:
            given[a.keyword.value] = a.value
        elif i < len(params):
            given[params[i]] = a.value
        else:
            return None
    return {p: given.get(p, _NOT_PASSED) for p in (*params, *(k.name.value for k in fn.params.kwonly_params))}


def _through_calls(plan: _Plan) -> None:
    """``def step(model, opt, ...): ... opt.apply_gradients(zip(g, model.trainable_variables))`` called as
    ``step(critic, optimizer, ...)``: the optimizer is what the callers pass, and it updates what they pass
    for ``model``. Keyed by the parameter's name alone, a caller's optimizer of the same name would be taken
    for one over the parameter's model, whichever model the caller gives (a silent wrong translation). So an
    apply_gradients on a parameter of a function the file calls is keyed, call by call, by the caller's
    argument, with the function's parameters replaced by the caller's values, up the chain of callers
    (``train(model, optimizer)`` → ``step(model, optimizer)``); a call that passes something other than a
    name gives that optimizer no parameters fwport can name (its creation stays an error).
    A function the file never calls keeps the name-keyed entry."""
    pending = [(k, fn, v, 0) for k, fn, v in plan.applied]
    while pending:
        key, fn, variables, depth = pending.pop()
        if not (isinstance(fn, cst.FunctionDef) and "." not in key and depth < 8
                and key in {p.name.value for p in (*fn.params.posonly_params, *fn.params.params,
                                                   *fn.params.kwonly_params)}):
            continue
        calls = plan.calls_of.get(fn.name.value, [])
        if not calls:
            continue
        entries = [e for e in plan.variables.get(key, []) if e is not variables]
        if entries:
            plan.variables[key] = entries
        else:
            plan.variables.pop(key, None)
        for call in calls:
            given = _passed(fn, call)
            arg = given.get(key) if given is not None else None
            if not isinstance(arg, cst.Name):
                continue  # the optimizer made at the call, or passed by *args: not followed
            rebase = _Rebase(given)
            rebased = variables.visit(rebase)
            if rebase.missing:  # a string: no parameters fwport can name (_params_of), said in the error
                rebased = cst.SimpleString(repr(f"{code(variables)}, whose {rebase.missing[0]} this call of "
                                                f"{fn.name.value} does not pass"))
            plan.variables.setdefault(arg.value, []).append(rebased)
            pending.append((arg.value, plan.call_fn.get(id(call)), rebased, depth + 1))


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    plan = _Plan(ctx)
    scan(module, plan)
    _through_calls(plan)
    plan.top_functions = {id(s): s for s in module.body if isinstance(s, cst.FunctionDef)}
    plan.module = module
    plan.add_loss_kept = plan.add_loss and _add_loss_kept(module)
    models = None
    if plan.compiles:  # (a compiled function parameter is a model where its callers give it one)
        models = models_of(module, ctx)
    if plan.compiles or plan.model_calls:
        plan.left_keras = _functional_left(module, ctx, plan)
    compiled = _plan_compiles(plan, ctx, models)
    _refused_compiles_said(plan, ctx, compiled, module)
    factories = {c.factory for c in compiled if c.factory}
    relevant = []
    for i, stmt in enumerate(module.body):
        v = _Mentions(ctx, set(plan.loss_rules) | factories)
        scan(stmt, v)
        if v.found:
            relevant.append(i)
    if not relevant:
        return module
    if models is None:
        models = models_of(module, ctx)
    t = _Training(ctx, plan, models, compiled)
    t.module = module
    body = list(module.body)
    # statements are visited in order (an optimizer's position decides whether its model exists)
    order = 0
    for i, stmt in enumerate(body):
        if i in relevant:
            t.order = order
            body[i] = rewrite(stmt, t)
            order = t.order
        else:
            counter = _Count()
            scan(stmt, counter)
            order += counter.n
    tapes = t._tapes(body, list(module.body))
    if t._module_moves:
        tapes = _moved_lines(tapes if tapes is not None else body, t._module_moves, ctx)
    fits = [c for c in compiled if id(c) in ctx.options.get("_fit_helpers", ()) and c.loss is not None]
    if fits and not plan.own_training and not plan.train_step_classes:
        ctx.analyses[fitloop.ADDED_LOSSES] = False  # the subclass pass may translate add_loss (True: it did)
    return module.with_changes(body=tapes if tapes is not None else body)




def _moved_lines(body: list, moves: list, ctx: FileContext) -> list:
    """Each module-level optimizer line :meth:`_Training._movable` allowed, moved to just after the last line
    binding its models (in the order written, after the lines moved there before it)."""
    body = list(body)
    after: dict[tuple, int] = {}  # models → how many lines were moved after the last line binding them
    for made, owners in moves:
        line = next((s for s in body if isinstance(s, cst.SimpleStatementLine) and any(b is made for b in s.body)),
                    None)
        def anchors():
            return [i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine) and any(
                isinstance(b, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value in owners
                                                  for t in b.targets) for b in s.body)]
        if line is None or not anchors():  # (not expected: the translation must not create it before its model)
            ctx.report(Severity.ERROR, "unsupported-construct",
                       f"an optimizer over {', '.join(owners)} is created before {'them' if len(owners) > 1 else 'it'} "
                       "and fwport could not move its line: move it after the model is built", made.value)
            continue
        i = next(i for i, x in enumerate(body) if x is line)
        # the comment lines just above it go with it; blank lines and a notebook's cell markers stay
        lead = list(line.leading_lines)
        k = len(lead)
        while k and lead[k - 1].comment is not None and not lead[k - 1].comment.value.startswith("# %%"):
            k -= 1
        if i + 1 < len(body) and k:
            nxt = body[i + 1]
            body[i + 1] = nxt.with_changes(leading_lines=[*lead[:k], *nxt.leading_lines])
        line = line.with_changes(leading_lines=lead[k:])
        del body[i]
        last = max(anchors())
        key = tuple(owners)
        at = last + 1 + after.get(key, 0)
        after[key] = after.get(key, 0) + 1
        body.insert(at, line)
    return body


def _functional_left(module: cst.Module, ctx: FileContext, plan: _Plan) -> _LeftModels | None:
    """The values (``keras.Model(...)``, ``m = build()`` of a builder that returns one) that bind names to
    functional models the functional pass leaves as written: Keras objects, whose compile / fit stay Keras code.
    Asked of the functional pass on a throwaway context (it runs after this pass, on the same statements), the first
    time a binding that may be one is asked about (:class:`_LeftModels`)."""
    source = ctx.analyses.get("parsed", (None, ""))[1]
    if not ("Input" in source and "Model" in source):
        return None
    return _LeftModels(module, ctx, plan)


class _LeftModels:
    """:func:`_functional_left`'s answer, worked out on demand: the throwaway context is copied when the pass asks (the
    state the functional pass would have seen then: the settled nodes, the options), the functional pass run on it only
    once a binding that may be such a model is asked about (a call of ``keras.Model``, of a top-level function or
    class of the file). On keras-io most files with a compile or a fit ask only about other bindings (a Sequential,
    a subclass's instance), and the run (a whole functional pass) is skipped."""

    def __init__(self, module: cst.Module, ctx: FileContext, plan: _Plan):
        self.module, self.ctx, self.plan = module, ctx, plan
        self.scratch = dataclasses.replace(
            ctx, options={k: (v.copy() if isinstance(v, (set, dict, list)) else v) for k, v in ctx.options.items()},
            pending=[], findings=[], needed_imports=set(), layers=[], models={}, settled=dict(ctx.settled),
            subscript_hooks={}, argument_hooks={}, plans=Plans(),
            analyses={k: ctx.analyses[k] for k in ("parsed", "layout") if k in ctx.analyses})
        self.top = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
        self.ids: set[int] | None = None

    def holds(self, value: cst.BaseExpression) -> bool:
        """``value`` binds a functional model left as written. Only a call can: a refused ``keras.Model(...)`` (or
        ``EmbeddingModel(...)`` of a file's class, :func:`functional._step_models`) or a builder's call (a Name)."""
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if not (isinstance(func, cst.Name) and func.value in self.top) and \
                self.ctx.imports.resolve(func) != functional.MODEL:
            return False
        if self.ids is None:
            self.ids = self._run()
        return id(value) in self.ids

    def _run(self) -> set[int]:
        refused = functional.refused_model_calls(self.module, self.scratch)
        self.scratch = None
        self.ctx.analyses[functional.FIRST_LEFT] = (self.module, refused)  # (model_api's answer too: left_model_calls)
        left = {id(n) for n in refused}
        if not left:
            return set()
        plan = self.plan
        for fn in plan.top_functions.values():  # a builder whose model is left: the models its callers bind
            if any(id(n) in left for n in find_all(fn, cst.Call)):
                left |= {id(k) for k in plan.calls_of.get(fn.name.value, []) if id(k) in plan.assigned_call}
        return left


def _binding_seen(plan: _Plan, name: str, at: int, scope: int) -> cst.BaseExpression | None:
    """The value of the assignment of ``name`` a statement (order ``at``, scope ``scope``) sees: the last one before
    it in its scope, else the module's (any, for a function's statement)."""
    bound = plan.values.get(name, [])
    before = [b for b in bound if b[1] == scope and b[0] < at] or \
             [b for b in bound if b[1] == 0 and (b[0] < at or scope != 0)]
    return before[-1][2] if before else None


def _left_keras(plan: _Plan, name: str, call: cst.Call, scope: int) -> str | None:
    """Why ``name.compile/fit/...(...)`` stays Keras code where ``name`` is a functional model left as written."""
    seen = _binding_seen(plan, name, plan.call_order.get(id(call), 0), scope)
    if seen is None or plan.left_keras is None or not plan.left_keras.holds(seen):
        return None
    return (f"{name} is a functional model fwport leaves as written (the errors at its keras.Model(...) say why), so "
            "it stays a Keras object and its training code too: once the model is translated (by hand, as an "
            "nn.Module), fwport writes its compile and fits out as a loop")


def _saved_compile(plan: _Plan, load: cst.Call, at: int, scope: int,
                   compiled: list[fitloop.Compiled]) -> tuple[fitloop.Compiled, str] | None:
    """The planned compile (and the name) of the model a ``keras.models.load_model("path")`` gives back, where the file saved it there
    itself: ``M.save("path")`` (the translation: torch.save(M, path), the whole module; load_model: torch.load) the one
    call of the file naming that path literal but the loads, a statement of the module before the evaluate (or of its
    function), M bound once at the module's top, compiled once there before the save by a compile fwport writes out
    (not a factory's), or bound there by a call of a model factory whose compile fwport writes out (the binding the
    save sees, where M is bound again elsewhere; M not compiled at the module's top in between, and after the save no
    compile nor another factory's call before the evaluate, a module statement, binds the loss's name again). Keras's saved file holds that compile (loss, metrics), which load_model restores: the
    evaluate of the loaded model computes them, as the written evaluate does with that compile's loss and metrics.
    None otherwise (another saving, a path that is not a literal, a model compiled again or left Keras)."""
    if not load.args or not isinstance(load.args[0].value, cst.SimpleString) or load.args[0].keyword is not None:
        return None
    path = load.args[0].value.value
    saves = plan.saves.get(path, [])
    if len(saves) != 1 or plan.mentions.get(path, 0) != 1 + plan.loads.get(path, 0):
        return None
    model, _, order, where = saves[0]
    if where != 0 or not (order < at or scope != 0):
        return None
    bound = plan.values.get(model, [])
    mine = [k for m, k, _ in plan.compiles if m == model]
    seen = [b for b in bound if b[1] == 0 and b[0] < order]
    if len(bound) != 1 and seen and isinstance(seen[-1][2], cst.Call) and isinstance(seen[-1][2].func, cst.Name):
        # `M = build_and_compile()` bound again elsewhere (a notebook makes a fresh model per cell): the binding the
        # save sees, a factory call whose compile fwport writes out, M compiled nowhere at the module's top between
        value = seen[-1][2]
        c = next((c for c in compiled if c.factory and c.factory == value.func.value), None)
        between = [k for m, k, s in plan.compiles if m == model and s == 0
                   and seen[-1][0] <= plan.call_order.get(id(k), 0) < order]
        # after the save, before the evaluate: no compile, nor another factory's call, binds M's loss names again
        later = [k for _, k, _ in plan.compiles if order < plan.call_order.get(id(k), 0) < at] + [
            k for o in compiled if o.factory and o.factory != value.func.value
            for k in plan.calls_of.get(o.factory, []) if order < plan.call_order.get(id(k), 0) < at]
        if c is None or between or later or scope != 0 or plan.assigned_call.get(id(value)) != model:
            return None
        return c, model
    if len(bound) != 1 or bound[0][1] != 0 or not bound[0][0] < order:
        return None
    value = bound[0][2]
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and not mine:
        # `M = build_and_compile(...)`, a model factory whose compile fwport writes out (its caller binds M's
        # optimizer and loss beside it: factory_names)
        c = next((c for c in compiled if c.factory and c.factory == value.func.value), None)
        return (c, model) if c is not None and plan.assigned_call.get(id(value)) == model else None
    c = next((c for c in compiled if c.model == model), None)
    if len(mine) != 1 or c is None or c.call is not mine[0] or c.factory or c.scope != 0 or not bound[0][0] < c.order < order:
        return None
    return c, model


def _checkpoint_fit(plan: _Plan, load: cst.Call, scope: int, ctx: FileContext,
                    module: cst.Module | None) -> tuple[cst.Call, str] | None:
    """(the fit call, its model M) where ``load`` is ``keras.models.load_model(path)`` of the file a
    ``keras.callbacks.ModelCheckpoint`` of M.fit(...) writes (saving.checkpointed: the pairing that makes the load
    ``load_checkpointed(M, path)``, a copy of M holding the file's weights), bound in the scope of the evaluate that
    reads it, M a name that fit's statement does not bind again. Keras's checkpoint saves the whole model with its
    compile (loss, metrics), which load_model restores: the loaded model's evaluate is the written evaluate with the
    compile that fit trains with. None otherwise."""
    from fwport.packs.tf2torch import saving
    if module is None:
        return None
    where = next((b for bs in plan.values.values() for b in bs if b[2] is load), None)
    found = saving.checkpointed(load, ctx, module)
    if where is None or where[1] != scope or found is None or found[0] is None or found[2] is None:
        return None
    if _loop_method(found[2]) != "fit" or id(found[2]) not in plan.call_order:
        return None
    return found[2], found[0]


def _refused_compiles_said(plan: _Plan, ctx: FileContext, compiled: list | None = None,
                           module: cst.Module | None = None) -> None:
    """Each fit / evaluate / predict of a model whose last compile before it (in its scope, else the module's) is
    left as written says so, with that compile's reason, in model_api's error on it."""
    refusals = ctx.analyses.setdefault("compile_refusals", {})
    for name, call in plan.model_calls:
        at, scope = plan.call_order.get(id(call), 0), plan.call_scope.get(id(call), 0)
        left = _left_keras(plan, name, call, scope)
        if left is not None:
            refusals.setdefault(id(call), left)
            ctx.analyses.setdefault("left_keras_calls", set()).add(id(call))
            continue
        compiles = sorted(((plan.call_order.get(id(k), 0), s, k) for m, k, s in plan.compiles if m == name),
                          key=lambda e: e[0])
        before = [e for e in compiles if e[1] == scope and e[0] < at] or \
                 [e for e in compiles if e[1] == 0 and (e[0] < at or scope != 0)]
        if before and id(before[-1][2]) in refusals and id(call) not in refusals:
            refusals[id(call)] = f"the {name}.compile(...) before it is left as written ({refusals[id(before[-1][2])]})"
        seen = _binding_seen(plan, name, at, scope) if not before else None
        if (isinstance(seen, cst.Call) and id(call) not in refusals and _loop_method(call) != "predict"
                and ctx.imports.resolve(seen.func) in ("keras.models.load_model", "keras.saving.load_model")):
            saved = _saved_compile(plan, seen, at, scope, compiled or [])
            if saved is not None and _loop_method(call) == "evaluate":
                plan.loaded[id(call)] = saved
                continue
            found = _checkpoint_fit(plan, seen, scope, ctx, module) if _loop_method(call) == "evaluate" else None
            if found is not None:
                fit, model = found
                if id(fit) in refusals:
                    refusals[id(call)] = (f"{name} comes from {code(seen.func)}(...) of the file the ModelCheckpoint "
                                          f"of {model}.fit(...) wrote, whose compile is left as written "
                                          f"({refusals[id(fit)]})")
                    continue
                fit_at = plan.call_order.get(id(fit), 0)
                between = [k for _, k, _ in plan.compiles if fit_at < plan.call_order.get(id(k), 0) < at] + [
                    k for c in compiled or [] if c.factory for k in plan.calls_of.get(c.factory, [])
                    if fit_at < plan.call_order.get(id(k), 0) < at]
                if between:  # (the names of that fit's optimizer, loss and metrics may be bound again there)
                    refusals[id(call)] = (f"{name} comes from {code(seen.func)}(...) of the file the ModelCheckpoint "
                                          f"of {model}.fit(...) wrote, and a compile after that fit, before this "
                                          "evaluate, may bind its loss and metrics' names again: evaluate before "
                                          f"compiling again, or compile {name} itself (model.compile(...))")
                    continue
                plan.checkpointed[id(call)] = found
                continue
            refusals[id(call)] = (f"{name} comes from {code(seen.func)}(...), which gives back the model compiled "
                                  "with the optimizer and loss it was saved with; fwport does not know them: compile "
                                  f"{name} again in the file (model.compile(optimizer=..., loss=...)), whose fits "
                                  "fwport writes out")
        if isinstance(seen, cst.Call) and isinstance(seen.func, cst.Name) and id(call) not in refusals:
            # `model = build()`, a function of the module that compiles the model it returns
            fn = next((f for f in plan.top_functions.values() if f.name.value == seen.func.value), None)
            made = [k for m, k, s in plan.compiles if fn is not None and s == id(fn) and id(k) in refusals]
            if made:
                refusals[id(call)] = (f"{name} comes from {fn.name.value}(), whose compile is left as written "
                                      f"({refusals[id(made[-1])]})")


def _plan_compiles(plan: _Plan, ctx: FileContext, models: _Models | None) -> list[fitloop.Compiled]:
    """The file's compiles the written-out loop reproduces (the others stay with model_api's errors).
    A notebook compiles one model after another: each fit / evaluate / predict uses the last compile of
    its model before it (:meth:`_Training._compiled`). The optimizer and loss names are the model's (a
    second model's are prefixed with its name); compiles whose loops would be the same text share one
    set of fit / evaluate / predict functions, the others get theirs (``fit_2``, ...)."""
    out: list[fitloop.Compiled] = []
    owner: dict[str, str] = {}  # optimizer / loss_fn name → the model it belongs to
    for model, call, scope in plan.compiles:
        c = _plan_compile(plan, ctx, model, call, scope, owner, models)
        if c is None:
            continue
        c.order, c.scope = plan.call_order.get(id(call), 0), scope
        loss_rule = c.loss[1] if c.loss[0] in ("call", "name", "function", "object", "added") \
            else ctx.pack.by_name[c.loss[1]]
        c.key = (loss_rule.id if loss_rule is not None else (c.loss[0], c.loss[3]), c.from_logits,
                 c.activation_logits, c.accuracy, c.accuracy_name, c.accuracy_kind, bool(c.schedule),
                 tuple(sorted(c.clips.items())), bool(c.metrics), c.logit_metrics,
                 tuple((name, plan_[1] if isinstance(plan_[1], str) else plan_[1].id, logits, factor)
                       for name, plan_, logits, factor in c.outputs),
                 c.keras2 if c.outputs or c.loss[0] == "added" else False,
                 tuple(c.metric_outputs), tuple(c.history_names), c.dict_outputs)
        # where the model comes from, for finish to read its layout (ctx.models): its name, its builder
        c.sources = {model, c.factory, *plan.instances.get(model, ())} - {""}
        for arg in models.param_args.get((scope, model), []) if models is not None else ():
            if isinstance(arg, cst.Name):  # a compiled parameter: the models its callers give it
                c.sources |= {arg.value, *plan.instances.get(arg.value, ())} - {""}
            elif isinstance(arg, cst.Call) and isinstance(arg.func, cst.Name):
                c.sources.add(arg.func.value)
        # the functions are named by finish, once the models' layouts are known (a channels-first
        # Sequential's fit moves the images, a functional model's does not): placeholders until then
        c.base_names = {k: c.names[k] for k in fitloop.FUNCTIONS}
        c.placeholders = {k: f"__fwport_{k}_{len(out)}__" for k in fitloop.FUNCTIONS}
        c.names.update(c.placeholders)
        for k in ("tensor", "inputs", "loss_args", "class_weights"):  # one set of array conversions for the file
            c.names[k] = out[0].names[k] if out else c.names[k]
        c.group = c
        out.append(c)
    ctx.analyses["compiled"] = out
    return out


# a cross-entropy of probabilities → the activation whose logits it takes as the logits form of the same loss
_LOGITS_OF = {"keras.losses.BinaryCrossentropy": "sigmoid", "keras.losses.CategoricalCrossentropy": "softmax",
              "keras.losses.SparseCategoricalCrossentropy": "softmax"}
_ACTIVATIONS = {"sigmoid": "sigmoid", "softmax": "softmax", "keras.activations.sigmoid": "sigmoid",
                "keras.activations.softmax": "softmax"}


def _final_activation(plan: _Plan, ctx: FileContext, model: str, scope: int, models: _Models | None) -> str | None:
    """"sigmoid" / "softmax" where every value ``model`` is bound to in its scope is a ``keras.Sequential([...])``
    whose last layer ends in that activation over the last axis (``Dense(..., activation=...)``,
    ``Activation(...)``, ``Softmax()``), inline or returned by a builder function of the module (every return of
    it, a name bound there the same way), and nothing adds or removes layers (``.add`` / ``.pop`` on those names):
    its translation is an nn.Sequential whose last module is that activation, and Keras's cross-entropies of its
    outputs take the activation's input (the logits Keras caches on them). Else None."""
    if models is None:
        return None
    parsed = ctx.analyses.get("parsed")
    if parsed is None:
        return None
    functions = getattr(models, "top_functions", {})

    def of_name(name: str, where, seen: set) -> str | None:
        values = where.assigned.get(name) if where is not None else None
        if not values or None in values or re.search(rf"\b{re.escape(name)}\s*\.\s*(add|pop)\s*\(", parsed[1]):
            return None
        found = {of_value(v, seen) for v in values}
        return found.pop() if len(found) == 1 else None

    def of_value(value, seen: set) -> str | None:
        if not isinstance(value, cst.Call):
            return None
        if isinstance(value.func, cst.Name) and value.func.value in functions and value.func.value not in seen:
            fn = functions[value.func.value]
            inner = models.scopes.get(id(fn))
            returns = _returned_values(fn)
            found = {of_name(r.value, inner, seen | {fn.name.value}) if isinstance(r, cst.Name)
                     else of_value(r, seen | {fn.name.value}) for r in returns}
            return found.pop() if len(found) == 1 else None
        return _sequential_activation(value, ctx)
    return of_name(model, models.top if scope == 0 else models.scopes.get(scope), set())


def _sequential_activation(seq: cst.Call, ctx: FileContext) -> str | None:
    """The activation that ends ``keras.Sequential([..., last])``'s last layer, or None."""
    if ctx.imports.resolve(seq.func) not in ("keras.Sequential", "keras.models.Sequential"):
        return None
    layers = seq.args[0].value if seq.args and seq.args[0].keyword is None else None
    if not isinstance(layers, cst.List) or not layers.elements or not isinstance(layers.elements[-1], cst.Element):
        return None
    last = layers.elements[-1].value
    if not isinstance(last, cst.Call) or any(a.star for a in last.args):
        return None
    kind = ctx.imports.resolve(last.func)
    args = {a.keyword.value if a.keyword else i: a.value for i, a in enumerate(last.args)}

    def activation(node) -> str | None:
        lit = literal_value(node, NOT_LITERAL) if node is not None else None
        if isinstance(lit, str):
            return _ACTIVATIONS.get(lit)
        q = ctx.imports.resolve(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        return _ACTIVATIONS.get(q) if q and q.startswith("keras.") else None
    if kind == "keras.layers.Dense":
        return activation(args.get("activation", args.get(2)))
    if kind == "keras.layers.Activation":
        return activation(args.get("activation", args.get(0)))
    if kind == "keras.layers.Softmax" and not args:
        return "softmax"
    return None


_NOT_THIS_ONE = "fwport writes a compile and its fits out as a loop, but not this one: "  # (model_api's words)


def _plan_compile(plan: _Plan, ctx: FileContext, model: str, call: cst.Call, scope: int,
                  owner: dict[str, str], models: _Models | None = None) -> fitloop.Compiled | None:
    """One compile, when the written-out loop reproduces it; else why not, for model_api's error on it
    (``ctx.analyses["compile_refusals"]``: id of the call → the reason)."""
    refusals = ctx.analyses.setdefault("compile_refusals", {})

    def refuse(why: str) -> None:
        # translating a translation says the same again (its optimizers are torch's by then)
        said = comment_error(plan.compile_statements.get(id(call)), f"{model}.compile(...) is a Keras model method")
        if said is not None and _NOT_THIS_ONE in said[1] and said[1].endswith(")"):
            why = said[1].split(_NOT_THIS_ONE, 1)[1][:-1]
        refusals[id(call)] = why
        return None
    said = comment_error(plan.compile_statements.get(id(call)), f"{model}.compile(...) is a Keras model method")
    if said is not None and _NOT_THIS_ONE in said[1] and said[1].endswith(")"):
        # a translation's compile that fwport refused: refused again (its model is an nn.Module by then, whose
        # outputs fwport no longer reads as a Keras model's)
        return refuse("")
    classes = plan.instances.get(model)
    made = _made_class(plan, models, model, call)
    left = _left_keras(plan, model, call, scope)
    if ((classes and classes <= plan.train_step_classes) if made is None else (made in plan.train_step_classes
                                                                               and left is None)) and not \
            _not_train_step_def(plan, model, call):
        return None  # its compile / fit are TrainStepModule's methods
    if left is not None:
        ctx.analyses.setdefault("left_keras_calls", set()).add(id(call))  # (model_api's error says it stays Keras)
        return refuse(left)
    given = models.param_refusals.get((scope, model)) if models is not None else None
    if given is not None:
        fn = models.functions[scope].name.value
        return refuse(f"{model} is a parameter of {fn}(), and a call gives it {given[0]}, which fwport leaves a "
                      "Keras object, not an nn.Module: train that model in Keras, or build it from layers fwport "
                      "translates")
    factory = None
    if scope and (model, scope) not in plan.uses:
        # compiled inside a function that does not train it there: the optimizer and loss live on the
        # Keras model object, which a torch module cannot carry. A model factory (`def get_model(): ...
        # model.compile(...); return model`, every call `m = get_model()`) returns them beside the model.
        factory = _factory(plan, scope, model)
        if isinstance(factory, str):
            return refuse(f"it is compiled inside a function that does not fit it there, and {factory} (an "
                          "nn.Module carries no optimizer or loss out of it): create them where the model is "
                          "trained")
    optimizer_why: list[str] = []  # why a name given as the optimizer is not one (the refusal says it)

    def named(n: cst.Name) -> cst.Call | None:
        """An optimizer bound once, by a statement of the compile's scope or the module's, used by no
        apply_gradients: the training pass creates it over the compiled model's parameters. Or, a notebook's
        way, a name the module binds to a new optimizer before each compile (:func:`_rebound_optimizer`)."""
        o = n.value
        if (len(plan.optimizers.get(o, [])) != 1 or len(plan.bound_at.get(o, [])) != 1 or o in plan.variables
                or plan.optimizer_scopes[o] not in (0, scope)):
            local = _local_optimizer(plan, models, o, n, call, scope)
            if local is not None:
                return local
            made = _rebound_optimizer(plan, o, model, call, scope)
            if isinstance(made, str):
                optimizer_why[:] = [made]
                return None
            return made
        return plan.optimizer_calls[o]

    def named_loss(n: cst.Name) -> cst.Call | None:
        """A loss object bound once, before the compile, by a statement of its scope or the module's, with a
        literal from_logits and Keras's mean reduction: that binding becomes the torch loss the loop calls."""
        o = n.value
        bound, where = plan.loss_rules.get(o, []), plan.bound_at.get(o, [])
        if len(bound) != 1 or bound[0] is None or len(where) != 1 or o not in plan.loss_calls:
            return None
        made, at = plan.loss_calls[o]
        if at not in (0, scope) or (at == scope and where[0][0] >= plan.call_order.get(id(call), 0)):
            return None
        if plan.loss_reductions.get(o, "sum_over_batch_size") not in ("sum_over_batch_size", "auto"):
            return None
        return made

    def loss_function(n: cst.BaseExpression):
        """loss= a function: ``keras.losses.hinge`` (its per-sample rule), or a function of the module bound once,
        taking (y_true, y_pred) ("" ); else None."""
        q = ctx.imports.resolve(n) if isinstance(n, (cst.Name, cst.Attribute)) else None
        rule = ctx.pack.by_name.get(q) if q else None
        if rule is not None:
            return rule if rule.emit.get("transform") == "loss-function" else None
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name):  # a factory of the file: loss(margin=1)
            return "" if _loss_factory(plan, n.func.value) is not None else None
        fn = next((f for f in plan.top_functions.values() if isinstance(n, cst.Name) and f.name.value == n.value), None)
        if fn is None or len(plan.bound_at.get(n.value, [])) != 1:
            return None
        p = fn.params
        required = [x for x in (*p.posonly_params, *p.params) if x.default is None]
        return "" if len(required) == 2 and all(x.default is not None for x in p.kwonly_params) else None

    def loss_object(n: cst.BaseExpression) -> bool:
        """loss= an instance of the file's own keras.losses.Loss subclass (a KerasLoss, which reduces as Keras does):
        created there (``MyLoss(...)``), or a name the module binds once, before the compile, to one (functions may
        bind the name locally; none declares it global)."""
        if isinstance(n, cst.Call):
            return (isinstance(n.func, cst.Name) and n.func.value in plan.loss_classes
                    and len(plan.bound_at.get(n.func.value, [])) == 1)
        if not isinstance(n, cst.Name) or n.value in plan.globals:
            return False
        made = plan.loss_objects.get(n.value, [])
        at_module = [b for b in plan.bound_at.get(n.value, []) if b[1] == 0]
        if len(made) != 1 or made[0][1] != 0 or len(at_module) != 1 or made[0][2] >= plan.call_order.get(id(call), 0):
            return False
        return scope == 0 or len(plan.bound_at[n.value]) == 1  # (in a function: bound nowhere else)

    def listed(name: str) -> cst.List | cst.Tuple | None:
        """The literal list a name given as metrics= is bound to: once, by a statement of the compile's scope or
        the module's before it, and not changed after (append, +=)."""
        default = _default_list(plan, scope, name)
        if default is not None:
            return default
        bound = plan.lists.get(name)
        if (bound is None or len(plan.bound_at.get(name, [])) != 1 or name in plan.changed
                or bound[1] not in (0, scope) or (bound[1] == scope and bound[2] >= plan.call_order.get(id(call), 0))):
            return None
        return bound[0]

    crossentropy: list = []  # compile's cross-entropy metrics, by name

    def metric_list(node: cst.BaseExpression, loss: tuple) -> list | str:
        """Several metrics (or one the single-metric loop does not compute): the metric objects fit / evaluate
        update; "accuracy" is the class Keras picks by the shapes of labels and outputs (the loss's own where
        its labels tell it)."""
        rule = loss[1] if loss[0] in ("call", "name") else ctx.pack.by_name.get(loss[1]) if loss[0] == "string" \
            else None
        accuracy = _ACCURACY_FOR_LOSS.get(rule.names[0], "ShapeAccuracy") if rule is not None else "ShapeAccuracy"
        confusion = []
        out = _compile_metrics(node, plan, ctx, ctx.imports.resolve, accuracy, listed, crossentropy, confusion)
        if isinstance(out, list) and fitloop.sparse_confusion(confusion, loss):
            return fitloop.sparse_confusion(confusion, loss)
        return out if isinstance(out, list) else f"{out} (the written-out loop updates the metric strings and " \
            "keras.metrics objects fwport has a class for; compute the others by hand in the loop)"

    rule_of = lambda n: ctx.pack.by_name.get(ctx.imports.resolve(n.func) or "")  # noqa: E731
    outputs = _compiled_outputs(plan, model, call, scope, ctx.version == 2)
    history_names = None
    if isinstance(outputs, tuple):  # a dict of outputs: its keys (sorted, Keras's order), and the History's names
        outputs, history_names = outputs
    per_output = None  # several outputs: [(name, its loss's node, its factor as written or "")]
    planned = call
    if outputs is None and not isinstance(call_argument(call, "loss", 1), (cst.List, cst.Tuple, cst.Dict)):
        several = _subclass_outputs(plan, model, call, scope, ctx)  # (a loss per output: refused below)
        if several:
            return refuse(several)
    if isinstance(outputs, str):
        given = call_argument(call, "loss", 1)
        values = ([e.value for e in given.elements if isinstance(e, (cst.Element, cst.DictElement))]
                  if isinstance(given, (cst.List, cst.Tuple, cst.Dict)) else [])
        if any(literal_value(v, NOT_LITERAL) is None for v in values):
            return refuse(_NO_LOSS.format(what=f"one of {model}'s outputs"))
        return refuse(outputs)
    if outputs is not None:
        per_output = _per_output_losses(call, model, outputs, ctx.version == 2)
        if isinstance(per_output, str):
            return refuse(per_output)
        # the optimizer (and what else compile gives) planned as a compile of the first output's loss alone
        planned = _with_loss(call, per_output[0][1])
    # a compile without a loss in a file whose layers give add_loss, trained only by the written loops: the loop's loss
    # is those terms alone, as Keras's (the subclass pass keeps them on the modules: fitloop.ADDED_LOSSES)
    added_only = plan.add_loss_kept and not plan.own_training and per_output is None
    c = fitloop.plan_compile(planned, model, rule_of, named, named_loss, loss_function, metric_list, loss_object,
                             added_only)
    if not isinstance(c, str) and c.loss[0] == "added":
        c.keras2 = ctx.version == 2  # (Keras 2's History averages the added terms over the batches)
        if c.keras2 and ctx.options.get(runtime.DISTRIBUTED):
            return refuse("no loss is given (Keras then trains on the terms the layers give add_loss alone), and Keras "
                          "2's History averages them over the global batches, which the distributed loop does not")
    if not isinstance(c, str) and c.weighted_metrics:
        if per_output is not None:
            return refuse("weighted_metrics of a model of several outputs is not translated")
        given = call_argument(call, "weighted_metrics")
        ctx.report(Severity.INFO, "idiom-replaced",
                   f"weighted_metrics={code(given)} → the loop's metrics of those names: Keras weighs them by the "
                   "sample weights a batch brings, here none (the loop takes (x, y) batches: a dataset of (x, y, "
                   "sample_weight) ones stops it with a ValueError; fit's / evaluate's sample_weight= and class_weight= "
                   "are refused), and, as every compile metric, averages them over the steps an output's Keras mask "
                   "keeps (a loss-mask warning at the model says where the loop does not)", given or call)
    if per_output is not None and not isinstance(c, str):
        c.call = call
        made = _plan_outputs(c, per_output, rule_of, ctx)
        if made is None:
            c.history_names = history_names or outputs
            c.dict_outputs = history_names is not None
            made = _plan_output_metrics(c, call, outputs, metric_list, ctx)
        if isinstance(made, str):
            return refuse(made)
    if isinstance(c, str):
        if c == "no loss is given" and plan.add_loss:
            c = ("no loss is given: Keras then trains the model on the terms its layers give add_loss alone (its "
                 "History's \"loss\" their sum), which the written loops reproduce only where every add_loss is a "
                 "statement self.add_loss(term) of its own in a layer's call and the file has no training code of its own "
                 "(a GradientTape, a read of .losses): write the loop by hand, its loss the sum of the terms the "
                 "layers' forward return")
        if c.startswith("optimizer= is neither") and optimizer_why:
            c = f"optimizer={code(call_argument(call, 'optimizer', 0))}: {optimizer_why[0]}"
        elif c.startswith("optimizer= is neither"):
            c += _unknown_optimizer(plan, ctx, call_argument(call, "optimizer", 0), scope)
        given = call_argument(call, "loss", 1)
        if (c.startswith("loss= is neither") or c.startswith("loss_weights")) and isinstance(
                given, (cst.List, cst.Tuple, cst.Dict)):
            c = (f"loss={'{...}' if isinstance(given, cst.Dict) else '[...]'} gives a loss per output of a model of "
                 "several outputs, which the written loop does not compute yet: write the loop by hand, its loss "
                 + _per_output_sum(given, call_argument(call, "loss_weights") if sum(
                     a.keyword is None for a in call.args) <= 2 else cst.Name("loss_weights")))  # (Keras 2's order
            # of compile's parameters is not Keras 3's after loss: a third positional argument is not read)
        elif c.startswith("loss_weights"):
            c = ("loss_weights= scales the losses of a model of several outputs (or its one loss), which the written "
                 "loop does not do yet: write the loop by hand, its loss the weighted sum of each output's loss")
        return refuse(c)
    if c.loss[0] in ("call", "name"):
        value = bind_call(c.loss[2], c.loss[1]).values.get("from_logits")
        flag = False if value is None else literal_value(value, NOT_LITERAL)
        if flag not in (True, False):
            return refuse("the loss's from_logits is not a literal True/False")
        c.from_logits = flag
    if c.accuracy_kind in fitloop.NAMED_ACCURACIES and c.loss[0] not in ("function", "object"):  # its labels say
        rule = c.loss[1] if c.loss[0] in ("call", "name") else ctx.pack.by_name[c.loss[1]]
        if fitloop.NAMED_ACCURACIES[c.accuracy_kind] != rule.emit.get("options", {}).get("target", "same"):
            return refuse(f"the metric {c.accuracy_kind} reads other labels than the loss")
    if c.loss[0] not in ("function", "object", "added") and not c.from_logits:  # a probabilities' cross-entropy
        rule = c.loss[1] if c.loss[0] in ("call", "name") else ctx.pack.by_name[c.loss[1]]
        if rule.emit.get("options", {}).get("probabilities_input"):
            activation = _final_activation(plan, ctx, model, scope, models) if c.loss[0] != "name" else None
            if activation is not None and activation == _LOGITS_OF.get(rule.names[0]):
                c.from_logits = c.activation_logits = True
                ctx.report(Severity.INFO, "idiom-replaced",
                           f"{rule.names[0].rsplit('.', 1)[-1]} of {model}'s {activation} outputs → the loss of their "
                           f"logits (from_logits): Keras computes it from the input its final {activation} keeps on "
                           f"the outputs; the generated loop takes logits = {model}[:-1](x), the outputs "
                           f"{model}[-1](logits)", call)
            else:
                optim.probabilities_warning(ctx, call, rule.names[0].rsplit(".", 1)[-1])
    if crossentropy and c.metrics:
        if c.activation_logits:  # Keras's cross-entropy metrics also take the logits the final activation keeps
            c.logit_metrics = True
        else:
            optim.probabilities_warning(ctx, call, f"the metric {crossentropy[0]!r}")
    if not _builds(c, ctx):
        return refuse("its optimizer or loss is refused where it stands (see the finding on it, once written "
                      "as a torch.optim / torch.nn object)")
    if c.optimizer[0] in ("call", "name"):  # what the written fit does besides step(): clipping, a schedule
        values = bind_call(c.optimizer[2], c.optimizer[1]).values
        c.clips = {k: code(values[k]) for k in optim.CLIPS
                   if k in values and literal_value(values[k], NOT_LITERAL) is not None}
        c.schedule = optim.is_schedule(values.get("learning_rate"), ctx)
    if factory is not None:
        # (a schedule of an optimizer created in the compile: the factory returns its LambdaLR too)
        if c.optimizer[0] == "name" and (c.schedule or (
                not _factory_optimizer(plan, c.optimizer[3], model, scope)
                and not _factory_local_optimizer(plan, models, c.optimizer[3], model, call, scope))):
            return refuse("it is compiled inside a model factory with an optimizer bound elsewhere or bound by name "
                          "with a learning-rate schedule, which the factory's return does not carry yet")
        c.factory, c.factory_return = factory
    taken = set(plan.bound_at) | written.module_names(ctx)  # (an import too: `from conlleval import evaluate`)

    def free(name: str, owned: bool = False) -> str:
        """``name``, or ``<model>_name`` where the file binds it (or, ``owned``: another model's compile has it)."""
        if name in taken or (owned and owner.get(name, model) != model):
            name = f"{model}_{name}"
        if owned:
            owner[name] = model
        return name
    if c.optimizer[0] == "name":  # created where it is bound, over the model's parameters (_optimizer)
        plan.variables[c.optimizer[3]] = [parsed_expression(f"{model}.trainable_variables")]
        plan.compiled_optimizers.add(c.optimizer[3])
    named_optimizer = c.optimizer[3] if c.optimizer[0] == "name" else None
    # (its binding is translated as a loss whose calls are adapted; a KerasLoss object's is the file's own)
    named = c.loss[3] if c.loss[0] == "name" or (c.loss[0] == "object" and c.loss[3]) else None
    c.names = {"optimizer": named_optimizer or free("optimizer", True), "loss_fn": named or free("loss_fn", True),
               "fit": free("fit"),
               "evaluate": free("evaluate"), "predict": free("predict"), "train_on_batch": free("train_on_batch"),
               "tensor": free("as_float32"),
               "inputs": free("channels_first"), "loss_args": free("keras_loss_args"),
               "class_weights": free("class_weights")}
    if c.metrics:  # the metric objects, {Keras's name: metric}, which the compile statement binds (under a
        # name the file uses nowhere: `from sklearn import metrics`, a parameter)
        taken |= plan.names_seen
        c.names["metrics"] = free("metrics", True)
    if c.loss[0] == "function" and c.loss[1] is None and c.loss[3]:  # the file's own function: the loop calls it
        c.names["loss_fn"] = c.loss[3]
    return c


def _add_loss_kept(module: cst.Module) -> bool:
    """Whether every add_loss of the file is one the subclass pass keeps as ``self.added_losses = ... + [term]``: a
    statement ``self.add_loss(term)`` of its own in a class's ``call`` (fitloop.kept_add_losses). Elsewhere (in a
    functional model's code, a nested function, another method) the call stays an error, and a compile without a
    loss stays one too: its loop would have no terms to train on."""
    kept = set()
    for cls in find_all(module, cst.ClassDef):
        for fn in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
            calls = fitloop.kept_add_losses(fn) if isinstance(fn, cst.FunctionDef) and fn.name.value == "call" else None
            kept |= {id(call.func) for call in find_all(fn, cst.Call) if id(call) in calls} if calls else set()
    return all(id(a) in kept for a in find_all(module, cst.Attribute) if a.attr.value == "add_loss")


def _def_of(plan: _Plan, cls: str, name: str, call: cst.Call) -> cst.ClassDef | None:
    """Which of the definitions of ``cls``, a class name the file defines more than once, made the instance ``name``
    is where ``call`` (its compile, fit...) reads it: the binding it sees, ``name = cls(...)`` at module level, was made
    under the last definition before it. None where the name has one definition, or where this is not known (a
    binding in a function, which runs when it is called)."""
    defs = plan.class_defs.get(cls, [])
    if len(defs) < 2 or plan.call_scope.get(id(call), 0) != 0:
        return None
    at = plan.call_order.get(id(call), 0)
    before = [(order, v) for order, where, v in plan.values.get(name, []) if where == 0 and order < at]
    if not before:
        return None
    bound, value = before[-1]
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == cls):
        return None
    made = [node for order, node in defs if order < bound]
    return made[-1] if made else None


def _not_train_step_def(plan: _Plan, name: str, call: cst.Call) -> bool:
    """Whether ``name`` is, where ``call`` reads it, an instance of a definition without train_step of a class name
    that another definition of the file gives one (a tutorial's successive ``class CustomModel``)."""
    classes = plan.instances.get(name, set())
    if len(classes) != 1:
        return False
    node = _def_of(plan, next(iter(classes)), name, call)
    return node is not None and id(node) not in plan.train_step_defs


def _made_class(plan: _Plan, models, name: str, call: cst.Call) -> str | None:
    """The class of the file whose instance ``name`` is where ``call`` (its compile, fit...) reads it, by the binding
    of ``name`` the call sees: the last one before it in its scope, ``name = Cls(...)`` or ``name = factory(...)`` of
    a module function every return of which is ``Cls(...)`` (or a name its body binds only to ``Cls(...)``), Cls a
    class with its own train_step; "" for a binding to something else that is no class of the file
    (``keras.Model(...)``, ``load_model(...)``); None where it is not known (no binding in its scope, a name, a
    function of other returns: the names' bindings over the file decide, plan.instances)."""
    at, scope = plan.call_order.get(id(call), 0), plan.call_scope.get(id(call), 0)
    before = [v for order, where, v in plan.values.get(name, []) if where == scope and order < at]
    if before:
        return _value_class(plan, models, before[-1])
    fn = getattr(models, "functions", {}).get(scope) if scope and models is not None else None
    if fn is None or name in {p.name.value for p in find_all(fn.params, cst.Param)}:
        return None
    # a function's call of a module-level model it does not bind: the class every module binding makes
    made = {_value_class(plan, models, v) for order, where, v in plan.values.get(name, []) if where == 0}
    return made.pop() if len(made) == 1 else None


def _value_class(plan: _Plan, models, value: cst.BaseExpression) -> str | None:
    """:func:`_made_class` of one bound value. A class without its own ``__init__`` called with arguments is Keras's
    functional constructor (``MyModel(inputs, outputs)``), which fwport may leave Keras: not known here (None: the
    names' bindings decide, as before)."""
    if not isinstance(value, cst.Call):
        return None
    classes = plan.train_step_classes

    def made_by(call) -> str | None:
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in classes):
            return None
        functional = bool(call.args) and ("__init__" not in plan.class_methods.get(call.func.value, set())
                                          or call.func.value in plan.star_inits)
        return None if functional else call.func.value

    if not isinstance(value.func, cst.Name):
        return ""
    if value.func.value in classes:
        return made_by(value)
    fn = getattr(models, "top_functions", {}).get(value.func.value) if models is not None else None
    if fn is None:
        return None
    made: set = set()
    for r in (r.value for r in find_all(fn, cst.Return)):
        if isinstance(r, cst.Name):  # `model = Cls(...)` ... `return model`: each binding of it in the body
            bound = [a.value for a in find_all(fn, cst.Assign)
                     if any(isinstance(t.target, cst.Name) and t.target.value == r.value for t in a.targets)]
            made |= {made_by(b) for b in bound} if bound else {None}
        else:
            made.add(made_by(r))
    return made.pop() if len(made) == 1 and None not in made else None


def _local_optimizer(plan: _Plan, models, o: str, given: cst.Name, call: cst.Call, scope: int) -> cst.Call | None:
    """``optimizer = keras.optimizers.Adam(...)`` then ``model.compile(optimizer=optimizer)`` inside a function, the
    file binding ``optimizer`` elsewhere too (each builder function its own): Python's scoping gives the compile the
    function's own binding, where the function binds the name once, by a statement of its body's top level (straight-
    line code, which has run when the compile runs) before the compile, and mentions it nowhere else (no parameter,
    global, nested function, other use). That binding's call; None where this is not so."""
    fn = getattr(models, "functions", {}).get(scope) if scope and models is not None else None
    if fn is None or o in plan.globals or o in plan.scheduled:
        return None
    model = next((m for m, k, _ in plan.compiles if k is call), None)
    if model is None or (o in plan.variables and (o not in plan.compiled_optimizers or {
            code(v) for v in plan.variables[o]} != {f"{model}.trainable_variables"})):
        return None  # (an accepted compile of it makes every binding of the name an optimizer over its model)
    # the training pass creates every binding of the name over the parameters of the model the accepted compiles
    # give (plan.variables is by name): only where each binding is a function's own, given to the compile of a
    # model of the same name there
    bindings = plan.optimizer_bindings.get(o, [])
    if len(bindings) != len(plan.bound_at.get(o, [])) or len({b[1] for b in bindings}) != len(bindings) or any(
            b[1] == 0 or not any(m == model and s == b[1] and _gives_optimizer(k, o) for m, k, s in plan.compiles)
            for b in bindings):
        return None
    at = plan.call_order.get(id(call), 0)
    mine = [b for b in bindings if b[1] == scope]
    if len(mine) != 1 or mine[0][0] >= at or len([v for v in plan.values.get(o, []) if v[1] == scope]) != 1:
        return None
    made = mine[0][2]
    top = [s for s in fn.body.body if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
           and isinstance(s.body[0], cst.Assign) and s.body[0].value is made]
    if len(top) != 1 or len(top[0].body[0].targets) != 1:
        return None

    class _Mentions(cst.CSTVisitor):  # the name o read or bound anywhere in the function, not as x.o or o=
        def __init__(self):
            self.nodes: list[cst.Name] = []

        def visit_Attribute(self, node):
            node.value.visit(self)
            return False

        def visit_Arg(self, node):
            node.value.visit(self)
            return False

        def visit_Name(self, node):
            if node.value == o:
                self.nodes.append(node)

    mentions = _Mentions()
    fn.visit(mentions)
    target = top[0].body[0].targets[0].target
    return made if {id(x) for x in mentions.nodes} == {id(target), id(given)} else None


def _unknown_optimizer(plan: _Plan, ctx: FileContext, given: cst.BaseExpression | None, scope: int) -> str:
    """What a compile's optimizer= is where it is no Keras optimizer fwport follows (the refusal's detail, "" where
    there is nothing more to say): a call of a class without a rule (TensorFlow Addons' LAMB, a wrapper, the file's
    own optimizer class), a name bound once to one, a function's parameter."""
    what = given
    name = ""
    if isinstance(given, cst.Name):
        name = given.value
        values = [v for _, where, v in plan.values.get(name, []) if where in (0, scope)]
        fn = plan.top_functions.get(scope) if scope else None
        if fn is not None and name in {p.name.value for p in find_all(fn.params, cst.Param)}:
            return (f" ({name} is a parameter of {fn.name.value}(), whose callers' values fwport does not follow into "
                    "the compile: create the torch optimizer where the model is trained, over its parameters)")
        what = values[0] if len(values) == 1 else None
    if not isinstance(what, cst.Call):
        return ""
    if isinstance(what.func, cst.Name) and any(f.name.value == what.func.value for f in plan.top_functions.values()):
        return (f" ({name + ' is ' if name else ''}what {what.func.value}() returns, which fwport does not follow into "
                "the compile: give the compile the Keras optimizer call itself)")
    q = ctx.imports.resolve(what.func) if isinstance(what.func, (cst.Name, cst.Attribute)) else None
    own = isinstance(what.func, cst.Name) and what.func.value in plan.class_defs
    if (q is None and not own) or (q is not None and q in ctx.pack.by_name):
        return ""
    return (f" ({name + ' is ' if name else ''}{code(what.func)}(...), "
            + ("a class of the file, " if own else "")
            + "which fwport has no torch optimizer for: write the loop by hand with a torch optimizer that "
            "updates as it does)")


def _reads_binding(plan: _Plan, name: str, order: int) -> int | None:
    """The binding of ``name`` to an optimizer that a module-level statement at ``order`` reads (the order of the last
    one before it), else None."""
    before = [o for o, _, _ in plan.optimizer_bindings.get(name, []) if o < order]
    return max(before) if before else None


class _Reached(NamedTuple):
    """Which binding of a rebound optimizer name each of its uses reads (the binding's statement order)."""
    applied: list[int]  # of each plan.applied_at[name] entry
    compiled: set[int]  # the bindings some compile given the name reads


def _reached_bindings(plan: _Plan, module: cst.Module, name: str) -> _Reached | None:
    """``optimizer = keras.optimizers.X(...)`` bound again before each training loop of a guide or notebook: which
    binding each ``optimizer.apply_gradients`` and each compile given the name reads, the last one before it, where
    that is plain: each binding a top-level statement of its own binding a Keras optimizer (no schedule, no clipping,
    no global), each apply_gradients either at the module's top level or in a top-level function that the module only
    calls, at its top level, between the same two bindings, each compile at the module's top level. Else None."""
    bindings = plan.optimizer_bindings.get(name, [])
    if (len(bindings) < 2 or name in plan.globals or len(bindings) != len(plan.bound_at.get(name, []))
            or any(b[1] != 0 for b in bindings) or name in plan.scheduled or name in plan.clips):
        return None
    top = {id(s.body[0].value) for s in module.body if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
           and isinstance(s.body[0], cst.Assign)}
    if not all(id(call) in top for _, _, call in bindings):
        return None

    def reads(order: int) -> int | None:
        return _reads_binding(plan, name, order)

    compiled = set()
    for _, k, scope in plan.compiles:
        given = call_argument(k, "optimizer", 0)
        if isinstance(given, cst.Name) and given.value == name:
            at = reads(plan.call_order.get(id(k), 0))
            if scope != 0 or at is None:
                return None
            compiled.add(at)
    functions = {id(s) for s in module.body if isinstance(s, cst.FunctionDef)}
    not_uses = ({id(d.name) for d in find_all(module, cst.FunctionDef)}  # (a method of that name: not the function)
                | {id(a.attr) for a in find_all(module, cst.Attribute)}  # x.train_step
                | {id(a.keyword) for a in find_all(module, cst.Arg) if a.keyword is not None})  # train_step=
    applied = []
    for order, fn, _ in plan.applied_at.get(name, []):
        if fn is None:
            at = reads(order)
        elif id(fn) in functions:
            f = fn.name.value
            calls = plan.calls_of.get(f, [])
            uses = [n for n in find_all(module, cst.Name) if n.value == f and id(n) not in not_uses]
            methods = [d for c in find_all(module, cst.ClassDef) for d in c.body.body
                       if isinstance(d, cst.FunctionDef) and d.name.value == f]
            if (not calls or len(uses) != len(calls)
                    or [depth for _, depth in plan.bound_at.get(f, [])].count(0) != 1 + len(methods)
                    or any(plan.call_scope.get(id(c)) != 0 for c in calls)):
                return None
            spans = {reads(plan.call_order[id(c)]) for c in calls}
            if len(spans) != 1:
                return None
            at = spans.pop()
        else:
            return None
        if at is None or at in compiled:
            return None
        applied.append(at)
    return _Reached(applied, compiled)


def _rebound_optimizer(plan: _Plan, o: str, model: str, call: cst.Call, scope: int) -> cst.Call | str | None:
    """``optimizer = keras.optimizers.SGD(...)`` before each ``model.compile(optimizer=optimizer)``, all at the
    module's top level (a notebook trying one setting after another): the binding that reaches this compile, which
    the training pass creates over ``model``'s parameters like every binding of the name. Only where that is what
    Keras does: each binding is a Keras optimizer (no schedule; an apply_gradients only of a binding given to no
    compile, :func:`_reached_bindings`), made after the model it trains
    is built, given to compiles of this model only, and not bound again before a fit this compile trains; else why
    not (None: the name is no optimizer bound several times)."""
    bindings = plan.optimizer_bindings.get(o, [])
    if len(bindings) < 2:
        return None
    if (scope != 0 or o in plan.globals or len(bindings) != len(plan.bound_at.get(o, []))
            or any(b[1] != 0 for b in bindings)):
        return (f"{o} is bound several times, not all of them to a Keras optimizer at the module's top level, and "
                "fwport cannot tell which one this compile is given: give each its own name, bound once")
    reached = _reached_bindings(plan, plan.module, o) if plan.module is not None else None
    if o in plan.scheduled or (o in plan.variables and o not in plan.compiled_optimizers and reached is None):
        return (f"{o} is bound several times and also "
                + ("given a learning-rate schedule" if o in plan.scheduled else "used by apply_gradients")
                + ": give the optimizer of this compile its own name, bound once")
    at = plan.call_order.get(id(call), 0)
    before = [b for b in bindings if b[0] < at]
    built = [order for order, depth in plan.bound_at.get(model, []) if depth == 0 and order < at]
    if not before or not built or built[-1] > before[-1][0]:
        return (f"the {o} this compile is given is not created after {model} is built, and a torch optimizer takes "
                f"the parameters it updates when it is created: create it after `{model} = ...`")
    for other, k, _ in plan.compiles:
        given = call_argument(k, "optimizer", 0)
        if other != model and isinstance(given, cst.Name) and given.value == o:
            return (f"{o} is given to the compiles of {model} and of {other}, and a torch optimizer updates the "
                    "parameters of one model: give each model's optimizer its own name")
    compiles = sorted(plan.call_order.get(id(k), 0) for m, k, s in plan.compiles if m == model and s == 0)
    for u, s in plan.fit_orders.get(model, []):
        last = [c for c in compiles if c < u]
        if s != 0 or (last and last[-1] == at and [b for b in bindings if b[0] < u][-1] is not before[-1]):
            return (f"{o} is bound again before a {model}.fit(...) that trains with this compile's optimizer, where "
                    f"the written fit would take the new one: give each optimizer its own name")
    return before[-1][2]


# ctx.analyses: a `.trainable = False` of a file with BatchNormalization and written fit loops (Keras runs a frozen
# BatchNormalization in inference mode: the loops put a BatchNorm whose parameters are all frozen in eval mode)
FROZEN_BATCHNORM = "tf2torch-frozen-batchnorm"
#: what the warning of `x.trainable = False` → `x.requires_grad_(False)` adds about Lazy modules (checked with torch
#: 2.13: requires_grad_ raises ValueError on an UninitializedParameter; the attribute can be set, and it stays set
#: when the parameter materializes at the first call: finish writes that for a name bound to a Lazy module)
_LAZY_FREEZE = (" Where the name is bound to a Lazy module (nn.LazyLinear, nn.LazyConv2d ...), whose requires_grad_ "
                "raises ValueError before its first call, the translation sets p.requires_grad on each of its "
                "parameters instead, which holds before they are materialized and stays after; a Lazy module reached "
                "otherwise needs the same")


def _default_list(plan: _Plan, scope: int, name: str) -> cst.List | cst.Tuple | None:
    """The literal list a parameter ``name`` of the module's function ``scope`` always is: its default is a name the
    module binds once, before the function, to a literal list nothing changes (``def make_model(metrics=METRICS)``),
    the function reads the parameter only there (the compile's metrics=), and no call of it gives that parameter
    (none unpacks arguments)."""
    fn = plan.top_functions.get(scope)
    if fn is None:
        return None
    params = list(fn.params.params)
    index = next((i for i, p in enumerate(params) if p.name.value == name), None)
    param = params[index] if index is not None else next(
        (p for p in fn.params.kwonly_params if p.name.value == name), None)
    if param is None or not isinstance(param.default, cst.Name):
        return None
    listed = param.default.value
    bound = plan.lists.get(listed)
    where = plan.bound_at.get(fn.name.value, [])
    if (bound is None or bound[1] != 0 or len(plan.bound_at.get(listed, [])) != 1 or listed in plan.changed
            or len(where) != 1 or bound[2] > where[0][0]):
        return None
    # the function reads the parameter once (the compile's metrics=) and binds it nowhere
    not_read = {id(n) for a in find_all(fn.body, cst.Arg) if a.keyword is not None for n in [a.keyword]} | {
        id(a.attr) for a in find_all(fn.body, cst.Attribute)}
    if len([n for n in find_all(fn.body, cst.Name) if n.value == name and id(n) not in not_read]) != 1:
        return None
    for call in plan.calls_of.get(fn.name.value, []):
        if any(a.star for a in call.args) or any(a.keyword is not None and a.keyword.value == name for a in call.args):
            return None
        if index is not None and len([a for a in call.args if a.keyword is None]) > index:
            return None
    return bound[0]


def _factory(plan: _Plan, scope: int, model: str) -> tuple[str, cst.BaseExpression] | str:
    """(the function's name, the value its return gives) when the compile's scope is a model factory:
    a function of the module whose one return gives the compiled model, which the file calls, and uses
    only by calling it (not passed as a value, e.g. to a tuner, which would get the tuple); else what stops
    it. Its calls `m = F(...)` bind the optimizer and loss beside m; a call as a statement of its own
    discards what it gives; any other (`return F()`) takes the model alone (:func:`factory_model_only`)."""
    fn = plan.top_functions.get(scope)
    if fn is None:
        return "that function is not one of the module's own"
    returns = _returned_values(fn)
    if len(returns) != 1 or not (isinstance(returns[0], cst.Name) and returns[0].value == model):
        return f"{fn.name.value}() does not end in one `return {model}`"
    name = fn.name.value
    calls = plan.calls_of.get(name, [])
    if not calls:
        return f"{name}() is called nowhere in this file (its callers elsewhere expect a Keras model)"
    if plan.name_refs.get(name, 0) != len(calls) + 1:  # (+ the def's own name)
        return f"{name} is used other than by calling it (given as a function, whose caller expects a Keras model)"
    if not any(id(k) in plan.assigned_call for k in calls):
        return f"{name}() is never called as `name = {name}(...)`"
    return name, returns[0]


def factory_model_only(plan: _Plan, call: cst.Call) -> bool:
    """A call of a model factory that neither binds a name (`m = F(...)`) nor is a statement of its own: it
    takes the model alone from the factory's (model, optimizer, loss_fn)."""
    return id(call) not in plan.assigned_call and id(call) not in plan.discarded_calls


def _factory_optimizer(plan: _Plan, name: str, model: str, scope: int) -> bool:
    """Whether the optimizer ``name`` a model factory compiles with is its own: bound once, by a statement of the
    factory after every binding of its model there (``model = keras.Model(...)``; ``opt = keras.optimizers.Adam(...)``;
    ``model.compile(optimizer=opt, ...)``), so that it is created over the model's parameters and the factory's return
    carries it out beside the model, as it does an optimizer created in the compile."""
    made = plan.optimizers.get(name, [])
    if len(made) != 1 or len(plan.bound_at.get(name, [])) != 1 or plan.optimizer_scopes.get(name) != scope:
        return False
    models = [order for order, where, _ in plan.values.get(model, []) if where == scope]
    return bool(models) and max(models) < made[0][0]


def _gives_optimizer(compile_call: cst.Call, o: str) -> bool:
    """``M.compile(optimizer=o, ...)``."""
    given = call_argument(compile_call, "optimizer", 0)
    return isinstance(given, cst.Name) and given.value == o


def _factory_local_optimizer(plan: _Plan, models, name: str, model: str, call: cst.Call, scope: int) -> bool:
    """:func:`_factory_optimizer` for a name other functions bind too: the factory's own binding
    (:func:`_local_optimizer`), made after every binding of its model there."""
    given = call_argument(call, "optimizer", 0)
    if not isinstance(given, cst.Name) or given.value != name:
        return False
    if _local_optimizer(plan, models, name, given, call, scope) is None:
        return False
    mine = [order for order, where, _ in plan.optimizer_bindings.get(name, []) if where == scope]
    built = [order for order, where, _ in plan.values.get(model, []) if where == scope]
    return bool(built) and max(built) < mine[0]


def factory_names(c: fitloop.Compiled, receiver: str) -> tuple[str, ...]:
    """The optimizer and loss (and metric objects, where the compile has them) a factory's caller binds beside
    ``receiver``: the factory's own names for a receiver named like its model, else prefixed with the receiver's
    name."""
    keys = ("optimizer", "loss_fn", *(("metrics",) if c.metrics else ()))
    if receiver == c.model:
        return tuple(c.names[k] for k in keys)
    return tuple(f"{receiver}_{k}" for k in keys)


def _fit_functions(compiled: list[fitloop.Compiled], ctx: FileContext) -> list[str]:
    """One set of fit / evaluate / predict functions per distinct loop: the compile's loss, metric,
    schedule and clipping, and whether its model takes channels-first images (a Sequential the passes
    made NCHW; a functional model keeps Keras's layout). The first set gets the plain names, the
    others ``fit_2``, ...; each compile's ``group`` is the compile whose names it calls."""
    file_nchw = any(m.layout == "nchw" for m in ctx.models.values())
    regularized = bool(ctx.analyses.get(regularizers.KEY))  # modules with a regularization_loss()
    added = bool(ctx.analyses.get(fitloop.ADDED_LOSSES))  # modules keeping the term their forward gave add_loss
    distributed = bool(ctx.options.get(runtime.DISTRIBUTED))  # a MirroredStrategy made DistributedDataParallel

    groups: dict[tuple, list[fitloop.Compiled]] = {}
    for c in compiled:
        infos = [ctx.models[k] for k in c.sources if k in ctx.models]
        nchw = any(i.layout == "nchw" for i in infos) if infos else file_nchw
        # its outputs: feature maps a Sequential gives channels-first
        nchw_out = any(i.output_layout == "nchw" for i in infos)
        groups.setdefault((c.key, nchw, nchw_out, c.several), []).append(c)
    texts = []
    inputs_written = loss_args_written = weights_written = False
    for i, ((_, channels_first, out_first, _), members) in enumerate(groups.items()):
        rep = members[0]
        suffix = f"_{i + 1}" if i else ""
        rep.names.update({k: rep.base_names[k] + suffix for k in fitloop.FUNCTIONS})
        rep.batches = any(c.batches for c in members)
        rep.frozen_batchnorm = bool(ctx.analyses.get(FROZEN_BATCHNORM))
        rep.constrained = bool(ctx.analyses.get(regularizers.CONSTRAINTS))  # modules with an apply_constraints()
        rep.predict_batches = any(c.predict_batches for c in members)
        rep.callbacks = any(c.callbacks for c in members)
        rep.class_weight = any(c.class_weight for c in members)
        rep.sample_weight = any(c.sample_weight for c in members)
        rep.fit_sample_weight = any(c.fit_sample_weight for c in members)
        rep.return_dict = any(c.return_dict for c in members)
        rep.train_batch = any(c.train_batch for c in members)
        for c in members:
            c.group = rep
        if rep.loss is None:  # a model predicted with, never compiled: predict alone
            texts.append(fitloop.helpers(rep, {}, ctx.spell_text, channels_first, shared=i == 0,
                                         inputs_written=inputs_written, outputs_channels_first=out_first,
                                         regularized=regularized, added=added, distributed=distributed))
            inputs_written = inputs_written or channels_first
            continue
        if rep.outputs:  # a loss per output
            options = [optim.loss_options(ctx.pack.by_name[r] if isinstance(r, str) else r, ctx)
                       for _, (_, r, *_), _, _ in rep.outputs]
            texts.append(fitloop.multi_helpers(rep, options, ctx.spell_text, shared=i == 0, regularized=regularized,
                                               added=added))
            continue
        kind, rule, *_ = rep.loss
        if kind == "string":
            rule = ctx.pack.by_name[rule]
        # a loss function: the labels its named accuracy reads (the loop calls the function in Keras's order)
        options = {"target": fitloop.NAMED_ACCURACIES.get(rep.accuracy_kind, "")} if kind in ("function", "object") \
            else {} if kind == "added" else optim.loss_options(rule, ctx)
        if kind == "object" and ctx.version == 2:  # Keras 2's compile adds a trailing axis to 1-D labels of 2-D outputs
            options["keras2_rank"] = True
        texts.append(fitloop.helpers(rep, options, ctx.spell_text, channels_first, shared=i == 0,
                                     inputs_written=inputs_written, loss_args_written=loss_args_written,
                                     class_weights_written=weights_written, outputs_channels_first=out_first,
                                     regularized=regularized, added=added, distributed=distributed))
        inputs_written = inputs_written or channels_first
        loss_args_written = loss_args_written or kind == "function"
        weights_written = weights_written or rep.class_weight
    return texts


_NO_LOSS = ("loss= gives {what} no loss (None), and Keras then trains only the others, with other "
            "History keys: give every output a loss, or write the loop by hand")


def _subclass_outputs(plan: _Plan, model: str, call: cst.Call, scope: int, ctx) -> str | None:
    """Why not, where the model a compile compiles is an instance of a keras.Model subclass of the file (the binding of
    the name the compile sees: ``model = MyModel(...)``) whose ``call`` returns several outputs (a tuple, list or dict
    of them): Keras then gives each output its loss (one loss: the same for each) and sums them, times loss_weights=;
    the written loops compute one loss of one output (a tuple given to it failed at run time). None otherwise."""
    parsed = ctx.analyses.get("parsed")
    if parsed is None:
        return None
    at = plan.call_order.get(id(call), 0)
    bindings = plan.values.get(model, [])
    before = [value for order, where, value in bindings if where == scope and order < at]
    seen = [before[-1]] if before else [value for _, where, value in bindings if where == 0]
    classes = {c.name.value: c for c in parsed[0].body if isinstance(c, cst.ClassDef)}
    for value in seen:
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in classes):
            continue
        cls = classes[value.func.value]
        for fn in cls.body.body:
            if not (isinstance(fn, cst.FunctionDef) and fn.name.value == "call"):
                continue
            for r in find_all(fn, cst.Return):
                v = r.value
                if isinstance(v, cst.Dict) or (isinstance(v, (cst.List, cst.Tuple)) and len(v.elements) != 1):
                    return (f"{model} is a {cls.name.value}, whose call returns several outputs ({code(v)}): Keras "
                            "gives each output its loss (one loss= string or object: the same for each; a list or "
                            "dict: one per output) and trains on their sum, times loss_weights=, which the written "
                            "loop, of one output, does not compute: write the loop by hand, its loss the sum of each "
                            "output's loss times its factor")
    return None


def _output_layer_name(plan: _Plan, value: cst.BaseExpression, model_binding: tuple, inputs: bool = False) -> str | None:
    """The literal name= of the layer whose call gives the output ``value`` (a name) of the keras.Model(...) bound by
    ``model_binding`` ((statement, scope, inputs, outputs) of :attr:`_Plan.model_inputs`): the name's one binding in
    the file, or the last binding of it in that statement's scope before it (its module's, for a model built in a
    function that does not bind it), a `name = Layer(..., name="...")(h)` (a notebook binds `priority` again in a later
    cell, or inside a subclass's call); None where fwport cannot tell. ``inputs``: the name= of the keras.Input an
    input of the model is bound to, alike."""
    if not isinstance(value, cst.Name):
        return None
    bound = (plan.input_names if inputs else plan.layer_names).get(value.value, [])
    if len(bound) == 1:
        return bound[0] if isinstance(bound[0], str) else None
    at, scope = model_binding[0], model_binding[1]
    events = [(o, 0, s, v) for o, s, v in (plan.input_bindings if inputs else plan.layer_bindings).get(value.value, [])] + \
             [(o, 1, s, None) for o, s in plan.other_bindings.get(value.value, [])]
    local = sorted(e for e in events if e[2] == scope and e[0] < at)
    if not local and scope != 0:
        return None  # (the module's binding it reads depends on when the function runs)
    if not local or local[-1][1] != 0:
        return None
    return local[-1][3] if isinstance(local[-1][3], str) else None


def _compiled_outputs(plan: _Plan, model: str, call: cst.Call, scope: int,
                      keras2: bool = False) -> list[str] | tuple | str | None:
    """The names of the outputs of the model a compile compiles, where it is a functional ``keras.Model(inputs,
    [out_a, out_b, ...])`` of several outputs (every binding of the name the compile may see, as
    :meth:`_Training._model_inputs` reads them): each output a name bound once to a layer's call given a literal
    ``name=``, as Keras keys the losses by them; why not where the model has several outputs whose names fwport
    does not know; None for a model of one output or one fwport does not follow. A dict of outputs ``{"a": out_a, ...}``:
    (its keys sorted, as Keras orders the outputs and keys their losses, metrics and labels; the names of the History's
    keys: the keys in Keras 3, the output layers' names in Keras 2, measured)."""
    bindings = plan.model_inputs.get(model, [])
    at = plan.call_order.get(id(call), 0)
    before = [b for b in bindings if b[1] == scope and b[0] < at]
    seen_at = [before[-1]] if before else [b for b in bindings if b[1] == 0] if scope != 0 else []
    seen = [b[3] for b in seen_at]
    several = [o for o in seen if isinstance(o, cst.Dict) or (isinstance(o, (cst.List, cst.Tuple))
                                                              and len(o.elements) != 1)]
    if not several:
        return None
    names = set()
    if len(seen) == 1 and isinstance(seen[0], cst.Dict):
        items = [(literal_value(e.key, NOT_LITERAL), e.value) if isinstance(e, cst.DictElement) else (None, None)
                 for e in seen[0].elements]
        keys = [k for k, _ in items]
        if not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
            return (f"{model} gives a dict of outputs whose keys are not distinct literal strings: write the loop by "
                    "hand, its loss the sum of each output's loss times its loss_weights= factor")
        by_key = dict(items)
        order = sorted(keys)
        if not keras2:
            return order, order
        layers = []
        for k in order:
            layers.append(_output_layer_name(plan, by_key[k], seen_at[0]))
        if None in layers:
            return (f"{model} gives a dict of outputs, and fwport does not know the name of each output's layer, by "
                    "which Keras 2 writes its loss into the History (\"out_loss\"): name the output layers")
        return order, layers
    for binding, o in zip(seen_at, seen):
        if not isinstance(o, (cst.List, cst.Tuple)) or any(not isinstance(e, cst.Element) for e in o.elements):
            return (f"{model} gives several outputs, not as a list of names (a dict of outputs, a model fwport does not "
                    "follow): write the loop by hand, its loss the sum of each output's loss times its loss_weights= "
                    "factor")
        found = [_output_layer_name(plan, e.value, binding) for e in o.elements]
        if None in found:
            return (f"{model} gives several outputs, and fwport does not know the name of each (a name bound, last "
                    "before the model, to a layer's call given a literal name=, `out = layers.Dense(1, name=\"out\")(h)`), by which Keras "
                    "matches a dict of losses and writes each output's loss into the History (\"out_loss\"): name "
                    "the output layers")
        names.add(tuple(found))
    if len(names) != 1:
        return f"{model} is bound to models of different outputs before this compile: compile each where it is built"
    return list(names.pop())


def _per_output_losses(call: cst.Call, model: str, outputs: list[str], keras2: bool) -> list | str:
    """compile's loss= for a model of several outputs → [(output name, its loss's node, its loss_weights= factor as
    written, "" for none)] in the outputs' order: a list / tuple of one loss per output, a dict keyed by every
    output's name, or one loss (Keras gives it to every output); loss_weights= a literal list or dict of numbers
    (a dict's missing output: no factor in Keras 2; Keras 3 raises a KeyError). Else why not: a loss for only some outputs or a None (Keras 3
    refuses the first and both Keras train only the outputs given one: not what the written loop sums)."""
    args = fitloop.bind(call, fitloop.COMPILE)
    if args is None:
        return "its arguments cannot be bound statically"
    if sum(a.keyword is None for a in call.args) > 2:
        return ("compile's arguments after loss= are given by position, which Keras 2 and Keras 3 read in different "
                "orders (loss_weights, metrics): give them by keyword")
    given = args.get("loss")
    if given is None:
        return "no loss is given"
    k = len(outputs)
    if isinstance(given, (cst.List, cst.Tuple)):
        values = [e.value if isinstance(e, cst.Element) else None for e in given.elements]
        if None in values or len(values) != k:
            return (f"loss=[...] gives {len(values)} losses, and {model} has {k} outputs ({', '.join(outputs)}): give "
                    "one loss per output, in their order (Keras trains only the outputs given one)")
        losses = dict(zip(outputs, values))
    elif isinstance(given, cst.Dict):
        keys = [literal_value(e.key, NOT_LITERAL) if isinstance(e, cst.DictElement) else NOT_LITERAL
                for e in given.elements]
        if not all(isinstance(x, str) for x in keys) or len(set(keys)) != len(keys) or set(keys) != set(outputs):
            return (f"loss={{...}} is not keyed by exactly the names of {model}'s outputs ({', '.join(outputs)}): give "
                    "every output a loss (Keras 3 refuses a dict that misses one, Keras 2 trains only those given)")
        by_key = dict(zip(keys, (e.value for e in given.elements)))
        losses = {name: by_key[name] for name in outputs}
    else:
        losses = {name: given for name in outputs}  # one loss: Keras gives it to every output
    for name, v in losses.items():
        if literal_value(v, NOT_LITERAL) is None:
            return _NO_LOSS.format(what=f"{model}'s output {name!r}")
    weights = args.get("loss_weights")
    factors: dict = {}
    if weights is not None and literal_value(weights, NOT_LITERAL) is not None:
        if isinstance(weights, (cst.List, cst.Tuple)) and all(isinstance(e, cst.Element) for e in weights.elements) \
                and len(weights.elements) == k:
            factors = dict(zip(outputs, (e.value for e in weights.elements)))
        elif isinstance(weights, cst.Dict) and all(isinstance(e, cst.DictElement) for e in weights.elements):
            keys = [literal_value(e.key, NOT_LITERAL) for e in weights.elements]
            if not all(isinstance(x, str) and x in outputs for x in keys) or len(set(keys)) != len(keys):
                return f"loss_weights={{...}} is not keyed by names of {model}'s outputs ({', '.join(outputs)})"
            if not keras2 and set(keys) != set(outputs):
                return (f"loss_weights={{...}} gives no factor to some of {model}'s outputs ({', '.join(outputs)}), "
                        "which Keras 3 refuses (KeyError when it builds the loss): give every output its factor")
            factors = dict(zip(keys, (e.value for e in weights.elements)))
        else:
            return (f"loss_weights={code(weights)} is not a literal list of one number per output of {model} or a dict "
                    "by their names")
        for name, f in factors.items():
            value = literal_value(f, NOT_LITERAL)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                return f"loss_weights= gives {name!r} {code(f)}, not a literal number"
    return [(name, losses[name], code(factors[name]).strip() if name in factors else "") for name in outputs]


def _with_loss(call: cst.Call, loss: cst.BaseExpression) -> cst.Call:
    """The compile call with ``loss`` as its loss and no loss_weights nor metrics (the plan of its optimizer; each
    output's metrics are planned by :func:`_plan_output_metrics`)."""
    args, at = [], 0
    for a in call.args:
        if a.keyword is None:
            args.append(a.with_changes(value=loss) if at == 1 else a)
            at += 1
        elif a.keyword.value == "loss":
            args.append(a.with_changes(value=loss))
        elif a.keyword.value not in ("loss_weights", "metrics"):
            args.append(a)
    return call.with_changes(args=args)


def _output_metric_lists(call: cst.Call, outputs: list[str], keras2: bool) -> list | str:
    """compile's metrics= for a model of several outputs → [(output index, the list of its metrics' nodes)], as Keras
    gives each output its metrics (measured, Keras 3.15 and tf_keras 2.21): a dict by the outputs' names (some of
    them; a value one metric or a list), a list of one list per output; a flat list is every output's list in Keras 2,
    and one metric per output in Keras 3 (where it has as many as the model has outputs; else Keras 3 raises). Else
    why not."""
    node = fitloop.metrics_listed((fitloop.bind(call, fitloop.COMPILE) or {}).get("metrics"))
    k = len(outputs)
    if node is None or literal_value(node, NOT_LITERAL) in (None, [], (), {}):
        return []

    def listed(value: cst.BaseExpression) -> list | None:
        value = fitloop.metrics_listed(value)
        if isinstance(value, (cst.List, cst.Tuple)) and all(isinstance(e, cst.Element) for e in value.elements):
            return [e.value for e in value.elements]
        return None
    if isinstance(node, cst.Dict):
        keys = [literal_value(e.key, NOT_LITERAL) if isinstance(e, cst.DictElement) else NOT_LITERAL
                for e in node.elements]
        if not all(isinstance(x, str) and x in outputs for x in keys) or len(set(keys)) != len(keys):
            return f"metrics={{...}} is not keyed by names of the model's outputs ({', '.join(outputs)})"
        by_key = {x: listed(e.value) for x, e in zip(keys, node.elements)}
        if None in by_key.values():
            return "metrics={...} gives an output something else than a metric or a list of them written there"
        return [(outputs.index(x), by_key[x]) for x in sorted(by_key, key=outputs.index)]
    if not isinstance(node, (cst.List, cst.Tuple)) or not all(isinstance(e, cst.Element) for e in node.elements):
        return f"metrics={code(node)} is not a list or dict written in the compile"
    values = [e.value for e in node.elements]
    nested = [isinstance(v, (cst.List, cst.Tuple)) for v in values]
    if all(nested):
        if len(values) != k:
            return f"metrics=[...] gives {len(values)} lists of metrics, and the model has {k} outputs"
        per = [listed(v) for v in values]
        if None in per:
            return "metrics=[[...], ...] holds something else than metrics written there"
        return list(enumerate(per))
    if any(nested):
        return "metrics=[...] mixes lists and metrics: give one list per output, or a dict by the outputs' names"
    if keras2:  # every output gets every metric: each a string, a new object per output
        if not all(isinstance(literal_value(v, NOT_LITERAL), str) for v in values):
            return ("metrics=[...] of metric objects for a model of several outputs: Keras 2 gives every output "
                    "each of them; give them per output (a dict by the outputs' names)")
        return [(i, values) for i in range(k)]
    if len(values) != k:
        return (f"metrics=[...] gives {len(values)} metrics, and the model has {k} outputs: Keras 3 refuses it "
                "(ValueError); give one list per output, or a dict by the outputs' names")
    return [(i, [v]) for i, v in enumerate(values)]


def _plan_output_metrics(c: fitloop.Compiled, call: cst.Call, outputs: list[str], metric_list,
                         ctx: FileContext) -> str | None:
    """Each output's metrics planned (``c.metrics`` named as Keras names them in the History, "<output>_<metric>",
    ``c.metric_outputs`` the output each reads), in the order of Keras's evaluate list: Keras 3 sorts them by name,
    Keras 2 takes them output by output as given; else why not."""
    lists = _output_metric_lists(call, outputs, ctx.version == 2)
    if isinstance(lists, str):
        return lists
    planned = []
    for i, nodes in lists:
        made = metric_list(cst.List([cst.Element(n) for n in nodes]), c.outputs[i][1])
        if isinstance(made, str):
            return made
        planned += [(f"{c.history_names[i]}_{name}", expr, cls, i) for name, expr, cls in made]
    names = [p[0] for p in planned]
    if len(set(names)) != len(names):
        return "two compiled metrics have one name"
    if ctx.version != 2:
        planned.sort(key=lambda p: p[0])
    c.metrics = [p[:3] for p in planned]
    c.metric_outputs = [p[3] for p in planned]
    return None


def _plan_outputs(c: fitloop.Compiled, per_output: list, rule_of, ctx: FileContext) -> str | None:
    """Each output's loss planned (``c.outputs``): a Keras loss by its name or an object the compile creates
    (``keras.losses.Huber(delta=2.0)``), with a literal from_logits; else why not."""
    if c.schedule:
        return "a learning-rate schedule with a loss per output is not translated yet"
    c.outputs = []
    for name, node, factor in per_output:
        one = fitloop.plan_compile(cst.Call(cst.Name("compile"), [cst.Arg(node, keyword=cst.Name("loss"))]), c.model,
                                   rule_of)
        if isinstance(one, str) or one.loss[0] not in ("string", "call"):
            return (f"the loss of output {name!r}, {code(node)}, is neither one of Keras's loss names "
                    f"({', '.join(sorted(fitloop.LOSSES))}) nor a Keras loss object created there")
        logits = False
        if one.loss[0] == "call":
            value = bind_call(one.loss[2], one.loss[1]).values.get("from_logits")
            logits = False if value is None else literal_value(value, NOT_LITERAL)
            if logits not in (True, False):
                return f"the loss of output {name!r} has a from_logits that is not a literal True/False"
        rule = one.loss[1] if one.loss[0] == "call" else ctx.pack.by_name[one.loss[1]]
        if not logits and optim.loss_options(rule, ctx).get("probabilities_input"):
            optim.probabilities_warning(ctx, c.call, rule.names[0].rsplit(".", 1)[-1])
        probe = fitloop.Compiled(c.model, c.call, c.optimizer, one.loss)
        if not _builds(probe, ctx):
            return (f"the loss of output {name!r} is refused where it stands (see the finding on it, once written as "
                    "a torch.nn object)")
        c.outputs.append((name, one.loss, logits, factor))
    c.keras2 = ctx.version == 2
    return None


def _plain(node: cst.BaseExpression) -> bool:
    """A name, an attribute or a subscript of one by names and integers (``pred``, ``self.out``, ``preds[i][-1]``):
    a value read again without computing anything, so a loss call's labels can take its shape by naming it."""
    if isinstance(node, cst.Name):
        return True
    if isinstance(node, cst.Attribute):
        return _plain(node.value)
    if isinstance(node, cst.Subscript):
        def index(e) -> bool:
            v = e.slice.value if isinstance(e.slice, cst.Index) else None
            if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus):
                v = v.expression
            return isinstance(v, (cst.Name, cst.Integer))
        return _plain(node.value) and all(index(e) for e in node.slice)
    return False


def _per_output_sum(losses: cst.List | cst.Tuple | cst.Dict, weights: cst.BaseExpression | None) -> str:
    """The loss Keras computes from compile's loss per output, for the guidance of a refused compile: each output's
    loss times its loss_weights= factor (1 where none is given), summed; a dict's keys are the outputs' names (a
    functional model's output layers' names), a list's order the outputs' order. Written out where the losses and
    weights are literals (``1.0 * 'mse'(out_a) + 0.5 * 'binary_crossentropy'(out_b)``)."""
    if isinstance(losses, cst.Dict):
        items = [(e.key, e.value) for e in losses.elements if isinstance(e, cst.DictElement)]
        keys = [literal_value(k, NOT_LITERAL) for k, _ in items]
        wanted = all(isinstance(k, str) for k in keys) and len(items) == len(losses.elements)
    else:
        items = [(None, e.value) for e in losses.elements if isinstance(e, cst.Element)]
        keys = list(range(len(items)))
        wanted = len(items) == len(losses.elements)
    w = literal_value(weights, NOT_LITERAL) if weights is not None else {}
    factors = (w if isinstance(w, dict) else dict(enumerate(w)) if isinstance(w, (list, tuple)) else None)
    how = ("the sum of each output's loss times its loss_weights= factor (1.0 where it has none), as Keras sums them"
           + (", each dict key the name of the output it is for (a functional model's output layer's name)"
              if isinstance(losses, cst.Dict) else ", in the order of the model's outputs"))
    if not wanted or factors is None:
        return how
    terms = []
    for k, (_, v) in zip(keys, items):
        f = factors.get(k, 1.0)
        if not isinstance(f, (int, float)) or isinstance(f, bool):
            return how
        terms.append(f"{f!r} * {code(v)}({k if isinstance(k, str) else f'outputs[{k}]'})")
    return f"{how}: {' + '.join(terms)}"


class _Rename(cst.CSTTransformer):
    """The placeholder names of the written functions → their names (:func:`_fit_functions`)."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.names.get(updated_node.value)
        return updated_node if new is None else updated_node.with_changes(value=new)


def _builds(c: fitloop.Compiled, ctx: FileContext) -> bool:
    """Whether the compile's optimizer and loss translate (a dry run whose findings are dropped): a
    refused one leaves the whole compile / fit to model_api, never fit calls without their optimizer."""
    mark, imports = len(ctx.pending), set(ctx.needed_imports)
    ok = True
    for kind, rule, node, *_ in (c.optimizer, c.loss):
        if kind in ("object", "added"):  # the file's own class, translated where it is defined; no loss
            continue
        if kind == "function":
            if rule is not None and _loss_function(node, rule, ctx) is None:
                ok = False
            continue
        rule = ctx.pack.by_name[rule] if isinstance(rule, str) else rule
        m = map_call(node if kind in ("call", "name") else cst.Call(cst.Name("x")), rule, ctx, node)
        m.extras.update(params=cst.Name("params"), calls_adapted=True, clipping_handled=True, schedule_handled=True,
                        compiled=True)
        ok = ok and build_call(m, ctx) is not None
    del ctx.pending[mark:]
    ctx.needed_imports = imports
    return ok


def _loss_factory(plan, name: str) -> cst.FunctionDef | None:
    """``def loss(margin=1): def contrastive_loss(y_true, y_pred): ...; return contrastive_loss`` (keras-io's
    siamese_contrastive): a function of the module, bound once, whose one return, its last statement, gives a
    function it defines in its body taking (y_true, y_pred). The loop calls what the factory returned, as the file's
    own loss function; None for anything else."""
    fn = next((f for f in plan.top_functions.values() if f.name.value == name), None)
    if fn is None or len(plan.bound_at.get(name, [])) != 1 or not isinstance(fn.body, cst.IndentedBlock):
        return None
    nested = {id(r) for d in find_all(fn.body, cst.FunctionDef) for r in find_all(d, cst.Return)}
    returns = [r for r in find_all(fn.body, cst.Return) if id(r) not in nested]  # the factory's own
    last = fn.body.body[-1] if fn.body.body else None
    if (len(returns) != 1 or not isinstance(last, cst.SimpleStatementLine) or last.body[0] is not returns[0]
            or not isinstance(returns[0].value, cst.Name)):
        return None
    inner = [s for s in fn.body.body if isinstance(s, cst.FunctionDef) and s.name.value == returns[0].value.value]
    if len(inner) != 1 or inner[0].decorators or inner[0].asynchronous:
        return None
    p = inner[0].params
    required = [x for x in (*p.posonly_params, *p.params) if x.default is None]
    return inner[0] if len(required) == 2 and all(x.default is not None for x in p.kwonly_params) else None


def _loss_function(node: cst.BaseExpression, rule, ctx: FileContext) -> cst.BaseExpression | None:
    """``keras.losses.hinge`` given to compile → the torch function the loop calls as ``f(y_true, y_pred)``: the
    rule's translation of ``keras.losses.hinge(y_true, y_pred)`` as a lambda (a call: a helper it calls is
    written into the file); None where the rule refuses."""
    m = map_call(cst.Call(node, [cst.Arg(cst.Name("y_true")), cst.Arg(cst.Name("y_pred"))]), rule, ctx, node)
    out = build_call(m, ctx)
    return None if out is None else parsed_expression(f"lambda y_true, y_pred: {code(out)}")


class _Count(cst.CSTVisitor):
    def __init__(self) -> None:
        self.n = 0

    def visit_SimpleStatementLine(self, node) -> None:
        self.n += 1


# --- finish: the lines statements gained ----------------------------------------------------------------

class _Split(cst.CSTTransformer):
    def _split(self, body) -> list:
        out = []
        for stmt in body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                out.append(stmt)
                continue
            if not any(_marked(b) for b in stmt.body):
                out.append(stmt)
                continue
            lines: list = [[]]
            for small in stmt.body:
                if _marked(small) and small.value.args and isinstance(small.value.args[0].value, cst.SimpleString):
                    # a compound statement of its own (a for loop), carried as its text
                    lines += [parsed_statement(literal_eval(small.value.args[0].value.value)), []]
                elif _marked(small) and small.value.args:  # a statement of its own before the rest
                    lines[-1].append(cst.Expr(small.value.args[0].value))
                    lines.append([])
                elif _marked(small):  # a line break
                    lines.append([])
                else:
                    lines[-1].append(small)
            lines = [line for line in lines if line]
            for i, line in enumerate(lines):
                leading = stmt.leading_lines if i == 0 else []
                if not isinstance(line, list):
                    out.append(line.with_changes(leading_lines=leading))
                    continue
                line[-1] = line[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                out.append(stmt.with_changes(body=line, leading_lines=leading))
        return out

    def leave_IndentedBlock(self, original_node, updated_node):
        return updated_node.with_changes(body=self._split(updated_node.body))

    def leave_Module(self, original_node, updated_node):
        return updated_node.with_changes(body=self._split(updated_node.body))


class _ConstrainedSteps(cst.CSTTransformer):
    """The apply_constraints() loop after a tape step's ``opt.step()`` (:meth:`_Training._step`): a statement of its
    own where the file's modules have Keras constraints (Keras's apply_gradients projects each updated variable
    with its constraint), removed where they have none."""

    def __init__(self, keep: bool):
        super().__init__()
        self.keep = keep

    def leave_SimpleStatementLine(self, original_node, updated_node):
        body = []
        for small in updated_node.body:
            if (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                    and isinstance(small.value.func, cst.Name) and small.value.func.value == _CONSTRAINED_STEP):
                if self.keep:
                    body.append(small.with_changes(value=small.value.with_changes(func=cst.Name(MARK))))
                continue
            body.append(small)
        if len(body) == len(updated_node.body) and not self.keep:
            return updated_node
        body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(body=body)


def _marked(small) -> bool:
    return (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
            and isinstance(small.value.func, cst.Name) and small.value.func.value == MARK)


#: ctx.options: the names whose `.trainable = ...` became `name.requires_grad_(...)` (finish: Lazy modules)
_FROZEN_NAMES = "_frozen_names"


class _LazyFreeze(cst.CSTTransformer):
    """``name.requires_grad_(flag)`` statements of a name the output binds to a Lazy module (nn.LazyLinear(...),
    a Lazy* helper, an nn.Sequential holding one) → ``for param in name.parameters(): param.requires_grad = flag``: requires_grad_ raises
    ValueError on a parameter not yet materialized (torch 2.13); the attribute can be set on it and stays set when
    the first call materializes it. On a module whose parameters all exist, the same as requires_grad_."""

    def __init__(self, names: set[str], loop: str):
        self.names, self.loop = names, loop

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if len(updated_node.body) != 1 or not isinstance(updated_node.body[0], cst.Expr):
            return updated_node
        call = updated_node.body[0].value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "requires_grad_" and isinstance(call.func.value, cst.Name)
                and call.func.value.value in self.names and len(call.args) == 1 and call.args[0].keyword is None):
            return updated_node
        flag = call.args[0].value
        target = cst.Attribute(cst.Name(self.loop), cst.Name("requires_grad"))
        body = cst.IndentedBlock([cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], flag)])])
        return cst.For(cst.Name(self.loop), cst.Call(cst.Attribute(call.func.value, cst.Name("parameters")), []),
                       body, leading_lines=updated_node.leading_lines)


def _lazy_frozen(module: cst.Module, names: set[str]) -> cst.Module:
    """:class:`_LazyFreeze` over the module, for the names of ``names`` it binds somewhere to a call that makes a
    Lazy module (or a module holding one)."""
    lazy = set()
    for a in find_all(module, cst.Assign):
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and a.targets[0].target.value in names \
                and any((dotted_text(c.func) or "").rsplit(".", 1)[-1].startswith("Lazy") for c in find_all(a.value, cst.Call)):
            lazy.add(a.targets[0].target.value)  # (nn.LazyLinear(...), or a module holding one: nn.Sequential(...))
    if not lazy:
        return module
    used = {n.value for n in find_all(module, cst.Name)}
    loop = next(n for n in ("param", *(f"param{i}" for i in range(1, 1000))) if n not in used)
    return module.visit(_LazyFreeze(lazy, loop))


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Put the statements :func:`run` added before a statement on lines of their own; write the
    metric classes the rule pass used and the fit / evaluate / predict functions a translated
    compile needs after the imports; freeze a Lazy module's parameters one by one (:class:`_LazyFreeze`)."""
    frozen = ctx.options.pop(_FROZEN_NAMES, None)
    if frozen:
        module = _lazy_frozen(module, frozen)
    if ctx.options.pop("_constrained_steps", False):
        module = rewrite(module, _ConstrainedSteps(bool(ctx.analyses.get(regularizers.CONSTRAINTS))))
        ctx.options["_split_lines"] = True
    if ctx.options.pop("_split_lines", False):
        module = rewrite(module, _Split())
    texts = []
    metrics = ctx.options.pop("_metric_classes", None)
    if metrics:
        texts.append(fitloop.metric_classes(metrics, ctx.spell_text))
    schedules = ctx.options.pop("_schedule_classes", None)
    if schedules:
        texts.append(optim.schedule_classes(schedules, ctx.spell_text))
    callbacks = ctx.options.pop("_callback_classes", None)
    if callbacks:
        texts.append(fitloop.callback_classes(callbacks, ctx.spell_text))
    if ctx.options.pop("_train_step_module", False):
        texts.append(fitloop.train_step_module(ctx.spell_text, ctx.options.pop("_train_step_evaluate", False),
                                               ctx.options.pop("_train_step_predict", False),
                                               ctx.options.pop("_train_step_compiled", False),
                                               ctx.options.get("_weighted_loss", False),
                                               ctx.options.pop("_train_step_split", False),
                                               ctx.options.pop("_train_step_validation_steps", False)))
    if ctx.options.pop("_weighted_loss", False):
        texts.append(fitloop.weighted_loss(ctx.spell_text))
    used = ctx.options.pop("_fit_helpers", set())
    compiled = [c for c in ctx.analyses.get("compiled", []) if id(c) in used]
    if compiled:
        texts += _fit_functions(compiled, ctx)
        renames = {c.placeholders[k]: c.group.names[k] for c in compiled for k in fitloop.FUNCTIONS}
        module = rewrite(module, _Rename(renames))  # (libcst's visit would rebuild the whole module)
    if texts:
        module = insert_after_imports(module, [texts[0], *("\n\n" + t for t in texts[1:])], ctx)
    return module
