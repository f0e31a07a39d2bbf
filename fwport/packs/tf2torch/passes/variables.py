"""Planner: ``tf.Variable`` objects and their methods.

The call ``tf.Variable(...)`` itself is the rule ``variable`` (a leaf tensor that requires grad
when trainable and floating; see rules/tf2torch/variable.toml). This read-only planner
(fwport/core/plan.py) does what the rule cannot see:

- a ``tf.Variable(...)`` inside an ``nn.Module`` class (a Layer/Model the subclass pass
  translated) is marked for the rule's transform, which then writes ``nn.Parameter(...)`` so that
  ``parameters()`` and the state_dict hold it;
- the methods of a variable bound to a name (``v = tf.Variable(...)``) or to an attribute
  (``self.W = tf.Variable(...)``, read anywhere as ``<obj>.W``) are translated:

      v.assign(x)       → v.data.copy_(torch.as_tensor(x))   (in place, outside autograd, like TensorFlow's assign;
      v.assign_add(x)   → v.data.add_(x)        ``with torch.no_grad():`` is a statement, and the
      v.assign_sub(x)   → v.data.sub_(x)        call may be an expression)
      v.numpy()         → v.detach().numpy()   (a tensor that requires grad has no numpy())
      v.read_value()    → v.clone()            (a snapshot: a later in-place assign does not change
      v.value()         → v.clone()             it, and gradients still flow to v, as in TensorFlow)
      v.trainable       → v.requires_grad

  ``.shape``, ``.dtype``, ``.ndim`` and arithmetic need nothing. ``x.assign(value)`` (and assign_add /
  assign_sub) on any other receiver is translated the same way: only a tf.Variable has such a method (a
  target network's soft update loops over ``model.variables``). Every other ``x.numpy()`` of the file
  becomes ``x.detach().numpy()`` too: a model's output, a loss or anything computed from a parameter or a
  variable requires grad, and torch refuses numpy() on it where TensorFlow's eager tensors always give
  one (detach() changes nothing else, and costs nothing on a tensor that needs no grad), except where x is the output
  of a module-level Keras layer or model that stays Keras (``y = disc(x)`` with ``disc = layers.Discretization(...)``
  refused, or a functional model left as written: a TensorFlow tensor, which has no detach()): decided in the rule
  pass, once the constructor's own statement is settled or refused. Any other method or attribute of a
  name or attribute bound only to variables is an error (``unsupported-construct``): left as
  written, never silently kept. Names and attributes are matched by spelling across the file (a
  receiver also bound to something else gets its known methods translated and no error for the
  others, which may be tensor methods).

Runs after the rewriting planners (only the read-only pyvalues follows): it reads the class bases the
subclass pass wrote, and no pass after it rebuilds the nodes whose edits it records.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.finding import Severity
from fwport.core.names import ScopedResolver, find_all, param_names, scan
from fwport.core.position import render
from fwport.packs.tf2torch.ops import IN_MODULE, UNTRACKED
from fwport.packs.tf2torch.passes.model_api import plan_attribute

VARIABLE = "tensorflow.Variable"
#: ctx.analyses: the names of the file's classes the subclass pass translated from a Keras Layer / Model (directly
#: or through a class of the file), not from tf.Module (tf.Module tracks its tf.Variable attributes; Keras 3 does not)
KERAS_CLASSES = "tf2torch-keras-classes"
#: variable methods → (the torch method chain on the receiver, what it means); None: the receiver itself copied
METHODS = {
    "assign": ".data.copy_",
    "assign_add": ".data.add_",
    "assign_sub": ".data.sub_",
    "numpy": ".detach().numpy",
    "read_value": ".clone",
    "value": ".clone",
}
#: attributes a torch tensor has with TensorFlow's meaning (or close enough: device is a torch.device)
SAME_ATTRIBUTES = {"shape", "dtype", "ndim", "device"}
RENAMED_ATTRIBUTES = {"trainable": "requires_grad"}
# attribute names only Keras layers and models (and tf.Module) have: on a receiver model_api could not tell is
# a model (a loop variable over self.stages, a parameter) they are still a translated module's, unless the
# file gives something of its own that attribute (model_api.ATTRIBUTES says what each becomes)
KERAS_ONLY_ATTRIBUTES = ("trainable_variables", "trainable_weights", "non_trainable_variables",
                         "non_trainable_weights")


class _Bindings(ScopedResolver, cst.CSTVisitor):
    """First walk: the names and attributes bound to ``tf.Variable(...)`` (and to anything else),
    and the variable calls inside nn.Module classes."""

    def __init__(self, ctx: FileContext):
        super().__init__()
        self._init_scopes(ctx.imports)
        self.ctx = ctx
        self.module_spellings = {"nn.Module", "torch.nn.Module"}  # as the subclass pass writes the base
        self.classes: list[bool] = []  # per enclosing class: is it an nn.Module
        self.names: set[str] = set()
        self.attrs: set[str] = set()
        self.other_names: set[str] = set()
        self.other_attrs: set[str] = set()
        self.in_module: set[int] = set()
        self.untracked: set[int] = set()  # in_module, in a Keras 3 layer / model class (ops.UNTRACKED)
        self.lists: dict[str, list] = {}  # name → each list / tuple display bound to it (params = [w, b])
        self.keras_classes: list[bool] = []  # per enclosing class: was it a Keras Layer / Model (subclass pass)
        self._keras = ctx.analyses.get(KERAS_CLASSES, set()) if ctx.version != 2 else set()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(any(render(b.value) in self.module_spellings for b in node.bases)
                            or node.name.value in self._keras)
        self.keras_classes.append(node.name.value in self._keras)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()
        self.keras_classes.pop()

    def _is_variable(self, value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.Call) and self.qualname(value.func) == VARIABLE

    def visit_Call(self, node: cst.Call) -> None:
        if self.classes and self.classes[-1] and self.qualname(node.func) == VARIABLE:
            self.in_module.add(id(node))
            if self.keras_classes[-1]:
                self.untracked.add(id(node))

    def _bind(self, target: cst.BaseExpression, is_var: bool) -> None:
        if isinstance(target, cst.Name):
            (self.names if is_var else self.other_names).add(target.value)
        elif isinstance(target, cst.Attribute):
            (self.attrs if is_var else self.other_attrs).add(target.attr.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._bind(e.value, False)

    def visit_Assign(self, node: cst.Assign) -> None:
        is_var = self._is_variable(node.value)
        for t in node.targets:
            pairs = _pairs(t.target, node.value)
            if pairs is not None:  # w, b = tf.Variable(...), tf.Variable(...): element by element
                for target, value in pairs:
                    self._bind(target, self._is_variable(value))
                continue
            self._bind(t.target, is_var)
            if isinstance(t.target, cst.Name) and isinstance(node.value, (cst.List, cst.Tuple)):
                self.lists.setdefault(t.target.value, []).append(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, self._is_variable(node.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target, False)


class _Methods(cst.CSTVisitor):
    """Second walk: plans the edit of each variable method call and attribute, reports the rest."""

    def __init__(self, ctx: FileContext, b: _Bindings):
        self.ctx = ctx
        self.b = b
        self.called: set[int] = set()  # the Attribute nodes that are a call's func
        self.detach_reported = False
        self.module: cst.Module | None = None  # the file (run sets it), for _own_attributes
        self.own: set[str] | None = None
        self.tf_modules: dict | None = None  # tf_module_instances
        self.bindings: tuple[dict, set[str]] | None = None  # _module_bindings

    def _receiver(self, node: cst.BaseExpression) -> tuple[str, bool] | None:
        """(spelling, bound only to variables) when ``node`` reads a variable."""
        if isinstance(node, cst.Name) and node.value in self.b.names:
            return node.value, node.value not in self.b.other_names
        if isinstance(node, cst.Attribute) and node.attr.value in self.b.attrs:
            return render(node), node.attr.value not in self.b.other_attrs
        return None

    def visit_Call(self, node: cst.Call) -> bool | None:
        if self.ctx.is_settled(node):
            return False  # the rule pass does not look inside: an edit there would never be applied
        func = node.func
        if not isinstance(func, cst.Attribute):
            return None
        recv = self._receiver(func.value)
        if recv is None:
            if func.attr.value == "numpy" and not node.args:
                if not _detached_already(func.value) and self.ctx.plans.get(node) is None:  # (strings.py's chain)
                    self._detached(node, self._keras_sources(func.value))
                return None
            if not (func.attr.value.startswith("assign") and func.attr.value in METHODS and len(node.args) == 1
                    and node.args[0].keyword is None and not node.args[0].star and not _on_self(func.value)):
                return None  # (self.w.assign(...): a weight the class passes own, add_weight's, KerasMetric's)
            # v.assign(x) on a receiver not bound to tf.Variable(...) here (a loop over model.variables, a
            # parameter): assign is a tf.Variable's method alone (no torch tensor, array or list has one, and
            # pandas' DataFrame.assign takes keywords only), so it is one, and as written it fails in torch
            recv = (render(func.value), False)
        self.called.add(id(func))
        method = func.attr.value
        chain = METHODS.get(method)
        if chain is None:
            if recv[1] and method not in SAME_ATTRIBUTES:
                self.ctx.report(Severity.ERROR, "unsupported-construct",
                                f"{recv[0]}.{method}(...): {recv[0]} is a tf.Variable (a torch tensor in the "
                                f"translation) and fwport does not translate its method {method}; write it by hand",
                                node)
                self.ctx.settle(node)
                return False
            return None
        positional = [a for a in node.args if a.keyword is None and not a.star]
        takes = 1 if method.startswith("assign") else 0
        if len(positional) != takes or len(node.args) != takes:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{recv[0]}.{method}(...) with these arguments: only {recv[0]}.{method}("
                            f"{'value' if takes else ''}) is translated (to {recv[0]}{chain}(...))", node)
            self.ctx.settle(node)
            return False
        why = {"assign": "in place, outside autograd", "numpy": "a tensor that requires grad has no numpy()",
               "read_value": "a snapshot that later in-place updates do not change; gradients still reach the variable"}
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{recv[0]}.{method}() on a tf.Variable → {recv[0]}{chain}(): "
                        f"{why.get(method, why.get(method.split('_')[0], why['read_value']))}", node)

        def apply(orig: cst.Call, upd: cst.Call, chain: str = chain) -> cst.BaseExpression:
            receiver = render(upd.func.value)
            if "\n" in receiver and not getattr(upd.func.value, "lpar", None):  # spread over lines: kept parsable
                receiver = f"({receiver})"
            args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in upd.args]
            if chain == ".data.copy_" and not isinstance(args[0].value, (cst.Integer, cst.Float, cst.UnaryOperation)):
                # copy_ takes a tensor (or a number): a list or an array is made one first
                args = [args[0].with_changes(value=cst.parse_expression(
                    f"{self.ctx.spell_text('torch.as_tensor')}({render(args[0].value)})"))]
            return cst.Call(cst.parse_expression(f"{receiver}{chain}"), args)
        self.ctx.plans.add(node, apply, by="variables")

    def _module_bindings(self) -> tuple[dict[str, list[cst.BaseExpression]], set[str]]:
        """The values the module's own statements bind to each plain name, and the names bound inside a
        function or class (their uses may read something else)."""
        if self.bindings is None:
            top: dict[str, list[cst.BaseExpression]] = {}
            for stmt in self.module.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assign):
                            for t in small.targets:
                                top.setdefault(t.target.value if isinstance(t.target, cst.Name) else "", []
                                               ).append(small.value if isinstance(t.target, cst.Name) else None)
                elif not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    for t in find_all(stmt, cst.AssignTarget):  # (under if / for / with: a value not followed)
                        if isinstance(t.target, cst.Name):
                            top.setdefault(t.target.value, []).append(None)
            other = [*(f.target for f in find_all(self.module, cst.For)),
                     *(w.asname.name for w in find_all(self.module, cst.WithItem) if w.asname is not None),
                     *(a.target for k in (cst.AugAssign, cst.AnnAssign, cst.NamedExpr) for a in find_all(self.module, k)),
                     *(a.asname.name if a.asname is not None else a.name for a in find_all(self.module, cst.ImportAlias))]
            for t in other:  # any other binding: the value is not followed
                for n in ([t] if isinstance(t, cst.Name) else find_all(t, cst.Name)):
                    top.setdefault(n.value, []).append(None)
            inner = {t.target.value for d in self.module.body if isinstance(d, (cst.FunctionDef, cst.ClassDef))
                     for t in find_all(d, cst.AssignTarget) if isinstance(t.target, cst.Name)}
            inner |= {p for d in find_all(self.module, cst.FunctionDef) for p in param_names(d)}
            self.bindings = (top, inner)
        return self.bindings

    def _keras_sources(self, receiver: cst.BaseExpression, depth: int = 0) -> list[cst.Call] | None:
        """The Keras constructor calls (``layers.X(...)``, ``keras.Model(...)``, ``keras.Sequential(...)``) at
        module level whose objects give ``receiver`` its value (``N(x)``, ``y`` with ``y = N(x)``), where
        every binding on the way is one; None where the value may come from anything else."""
        top, inner = self._module_bindings()
        if depth > 4:
            return None
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name):
            name = receiver.func.value
            values = top.get(name)
            if not values or name in inner or any(v is None for v in values):
                return None
            out = []
            for v in values:
                q = self.ctx.imports.resolve(v.func) if isinstance(v, cst.Call) else None
                if not q or not q.startswith(("keras.layers.", "keras.Model", "keras.models.", "keras.Sequential")):
                    return None
                out.append(v)
            return out
        if isinstance(receiver, cst.Name):
            values = top.get(receiver.value)
            if not values or receiver.value in inner or any(v is None for v in values):
                return None
            out = []
            for v in values:
                got = self._keras_sources(v, depth + 1)
                if got is None:
                    return None
                out += got
            return out
        return None

    def _left_keras(self, calls: list[cst.Call]) -> bool:
        """Whether every one of these constructor calls is left as written (settled, or refused with an error at
        it) by the time the rule pass reaches a later statement."""
        errors = {id(p.node) for p in self.ctx.pending if p.finding.severity is Severity.ERROR}
        translated = self.ctx.analyses.get("functional_translated_models", {})  # settled, but by a translation
        return all(self.ctx.is_settled(c) and translated.get(id(c)) is not c or id(c) in errors for c in calls)

    def _detached(self, node: cst.Call, sources: list[cst.Call] | None = None) -> None:
        """``x.numpy()`` on any other receiver: ``x.detach().numpy()`` (x may be a model's output, a loss, or
        computed from a variable, all of which require grad; detach() changes nothing else). Where x is the
        output of a module-level Keras layer or model that stays Keras (left as written), x is a TensorFlow
        tensor, which has numpy() and no detach(): the call stays as it is."""
        if sources:
            def apply(orig: cst.Call, upd: cst.Call) -> cst.BaseExpression:
                if self._left_keras(sources):
                    return upd
                self._say_detached(orig)
                return upd.with_changes(func=upd.func.with_changes(
                    value=cst.Call(cst.Attribute(upd.func.value, cst.Name("detach")))))
            self.ctx.plans.add(node, apply, by="variables")
            return
        self._say_detached(node)
        # (built, not parsed from text: a receiver spread over lines inside parentheses renders with newlines)
        self.ctx.plans.add(node, lambda orig, upd: upd.with_changes(func=upd.func.with_changes(
            value=cst.Call(cst.Attribute(upd.func.value, cst.Name("detach"))))), by="variables")

    def _say_detached(self, node: cst.Call) -> None:
        if not self.detach_reported:
            self.detach_reported = True
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            "x.numpy() → x.detach().numpy(): a torch tensor that requires grad (a model's output, "
                            "a loss, anything computed from a parameter) has no numpy(), where TensorFlow's eager "
                            "tensors always give one (detach() changes nothing else)",
                            node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node) in self.called or self.ctx.is_settled(node):  # (the training pass's `image.grad = grads`)
            return
        recv = self._receiver(node.value)
        if recv is None:
            if node.attr.value in KERAS_ONLY_ATTRIBUTES and node.attr.value not in self._own_attributes():
                self._keras_attribute(node)
            elif (node.attr.value == "variables" and isinstance(node.value, cst.Name)
                  and node.value.value in self._tf_modules() and "variables" not in self._own_attributes()
                  and not self.ctx.is_settled(node) and self.ctx.plans.get(node) is None):
                # a tf.Module's variables (sorted by attribute name, nested modules' after): the module's
                plan_attribute(self.ctx, node, by="variables", why_more=f"; {node.value.value} is an instance of "
                               "a tf.Module class, whose variables TensorFlow lists sorted by attribute name")
            return
        attr = node.attr.value
        if attr in SAME_ATTRIBUTES:
            return
        if attr in RENAMED_ATTRIBUTES:
            new = RENAMED_ATTRIBUTES[attr]
            self.ctx.plans.add(node, lambda orig, upd: upd.with_changes(attr=cst.Name(new)), by="variables")
            return
        if recv[1]:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{recv[0]}.{attr}: {recv[0]} is a tf.Variable (a torch tensor in the translation) "
                            f"and fwport does not translate its attribute {attr}; write it by hand", node)


    def _tf_modules(self) -> dict:
        if self.tf_modules is None:
            self.tf_modules = tf_module_instances(self.module, self.ctx)
        return self.tf_modules

    def _own_attributes(self) -> set[str]:
        """The attribute names the file gives objects of its own (``x.attr = ...``, a def of that name)."""
        if self.own is None:
            self.own = {t.target.attr.value for t in find_all(self.module, cst.AssignTarget)
                        if isinstance(t.target, cst.Attribute)}
            self.own |= {f.name.value for f in find_all(self.module, cst.FunctionDef)}
        return self.own

    def _keras_attribute(self, node: cst.Attribute) -> None:
        """``x.trainable_variables`` on a receiver model_api did not know for a model: as for a model (the
        parameters that train), ``x.non_trainable_*`` an error."""
        if self.ctx.is_settled(node) or self.ctx.plans.get(node) is not None:
            return
        plan_attribute(self.ctx, node, by="variables", why_more=f" ({render(node.value)} taken for a Keras layer "
                       f"or model: only they have {node.attr.value})")


def _on_self(node: cst.BaseExpression) -> bool:
    """``self.x`` / ``self.x.y``: an attribute of the object whose method this is."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name) and node.value == "self"


def _detached_already(receiver: cst.BaseExpression) -> bool:
    """``x.detach()`` / ``x.detach().cpu()``: a translation's own ``.numpy()`` receiver (a fixpoint)."""
    while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and not receiver.args:
        if receiver.func.attr.value == "detach":
            return True
        if receiver.func.attr.value != "cpu":
            return False
        receiver = receiver.func.value
    return False


def _pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list | None:
    """``a, b = x, y`` → [(a, x), (b, y)] (no starred element, as many targets as values), else None."""
    if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))
            and len(target.elements) == len(value.elements)):
        return None
    if any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
        return None
    return [(t.value, v.value) for t, v in zip(target.elements, value.elements)]


def variable_bindings(module: cst.Module, ctx: FileContext) -> tuple[set[str], set[str], set[str]]:
    """The names and the attribute names bound to ``tf.Variable(...)`` in ``module`` (the training
    pass asks which tape sources are variables), and the names bound only to lists or tuples of names
    bound only to variables (``params = [w, b]``)."""
    b = _Bindings(ctx)
    scan(module, b)
    only = b.names - b.other_names
    lists = {name for name, values in b.lists.items() if name not in b.names and all(
        v.elements and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) and e.value.value in only
                           for e in v.elements) for v in values) and len(values) == _binding_count(module, name)}
    return b.names, b.attrs, lists


def _binding_count(module: cst.Module, name: str) -> int:
    """How many times ``name`` is bound in ``module`` (assignments, for targets, parameters, with / except / import
    names, augmented assignments), counted by spelling."""
    n = 0
    for t in find_all(module, cst.AssignTarget):
        n += sum(1 for x in find_all(t.target, cst.Name) if x.value == name)
    for kind in (cst.For, cst.AugAssign, cst.AnnAssign, cst.Param, cst.AsName, cst.CompFor):
        for node in find_all(module, kind):
            target = getattr(node, "target", None) or getattr(node, "name", None)
            if isinstance(target, cst.CSTNode) and any(x.value == name for x in find_all(target, cst.Name)):
                n += 1
    return n


def tf_module_instances(module: cst.Module, ctx: FileContext) -> dict[str, list[cst.Call]]:
    """The names bound only to ``C(...)``, C a top-level class of the file deriving (through classes of the file)
    from tf.Module: its ``.variables`` is the translated module's parameters. Each with its constructor calls."""
    classes = [s for s in module.body if isinstance(s, cst.ClassDef)]
    keras = ctx.analyses.get(KERAS_CLASSES, set())
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for c in classes:
            # (tf.Module as written, or the nn.Module the subclass pass wrote for it: not for a Keras class)
            if c.name.value not in found and c.name.value not in keras and any(
                    b.keyword is None and (ctx.imports.resolve(b.value) == "tensorflow.Module"
                                           or render(b.value) in ("nn.Module", "torch.nn.Module")
                                           or isinstance(b.value, cst.Name) and b.value.value in found)
                    for b in c.bases):
                found.add(c.name.value)
                changed = True
    if not found:
        return {}
    made: dict[str, list[cst.Call]] = {}
    for a in find_all(module, cst.Assign):
        if (len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and isinstance(a.value, cst.Call)
                and isinstance(a.value.func, cst.Name) and a.value.func.value in found):
            made.setdefault(a.targets[0].target.value, []).append(a.value)
    return {name: calls for name, calls in made.items() if len(calls) == _binding_count(module, name)}


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Plans the edits (see the module docstring) and returns ``module`` itself."""
    b = _Bindings(ctx)
    scan(module, b)
    if b.in_module:
        ctx.analyses[IN_MODULE] = b.in_module
    if b.untracked:
        ctx.analyses[UNTRACKED] = b.untracked
    methods = _Methods(ctx, b)
    methods.module = module
    scan(module, methods)  # the trigger saw a Variable, an x.numpy(), an x.assign(...) or a Keras-only attribute
    return module
