"""Planner: ``tf.TensorShape(dims)`` of known dimensions → ``torch.Size``, and what its code asks of it.

    s = tf.TensorShape([2, n, 3])                →  s = torch.Size([2, n, 3])
    s.as_list()                                  →  list(s)
    s.rank / s.ndims                             →  len(s)
    s.is_fully_defined()                         →  True          (a torch.Size holds ints only)
    s.num_elements()                             →  s.numel()
    s[i], s[1:], len(s), for d in s, f(s)        →  as written    (the same ints, a torch.Size slice)
    tf.TensorShape(x).as_list()                  →  list(x)       (x as given: a list, tuple or shape)
    tf.TensorShape(x).rank / .ndims              →  len(x)
    tf.TensorShape([2, 3]).is_fully_defined()    →  True          (a literal of known dims; else
                                                                   all(d is not None for d in x))
    tf.TensorShape(5)                            →  torch.Size((5,))   (TensorFlow reads an int as one dim)

A shape name is a name every binding of which in its scope is a ``tf.TensorShape(...)`` call (the scopes and
reads are those of rngs.py's walker). A torch.Size is a tuple, where a TensorShape is not: it compares unequal to a
list (``TensorShape([2, 3]) == [2, 3]`` is True), a scalar shape is false (``bool(TensorShape([]))`` is True), and
it has none of TensorShape's other methods (``dims``, ``merge_with``, ``concatenate``, ...). So a shape name
compared (``==``, ``!=``, ``is``), tested for truth, or read by another attribute is an error where it is used
(a call compared or tested where it is made, ``bool(tf.TensorShape([]))``, keeps its error),
and its calls keep their no-rule error; a shape with an unknown dimension (``None`` written in the literal) or
an unknown rank (``TensorShape(None)``) has no torch.Size and keeps it too. A ``tf.TensorShape(...)`` the code
hands on without a name (returned, passed, in a list) becomes ``torch.Size(...)`` with a warning naming those
differences; one bound to a name that is not a shape name (bound otherwise too) keeps its error.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code
from fwport.core.finding import Severity
from fwport.core.names import scan
from fwport.packs.tf2torch.rngs import _Generators

TENSOR_SHAPE = "tensorflow.TensorShape"
TRIGGER_WORD = "TensorShape"
_ATTRIBUTES = ("rank", "ndims")
_METHODS = ("as_list", "is_fully_defined", "num_elements")
_TUPLE_NOTE = ("a torch.Size is a tuple: unlike a TensorShape it compares unequal to a list, a scalar shape "
               "(torch.Size([])) is false, and it has no as_list / rank / dims methods")


def run(module: cst.Module, ctx) -> cst.Module:
    finder = _Shapes(ctx)
    scan(module, finder)
    finder.plan()
    return module


def _dims(call: cst.Call) -> tuple[cst.BaseExpression | None, str]:
    """The ``dims`` argument of a TensorShape call, or None and why it has no torch.Size."""
    args = list(call.args)
    if len(args) != 1 or args[0].star or (args[0].keyword is not None and args[0].keyword.value != "dims"):
        return None, "arguments other than one dims argument"
    value = args[0].value
    if isinstance(value, cst.Name) and value.value == "None":
        return None, "an unknown rank (TensorShape(None)): a torch.Size has a length"
    if isinstance(value, (cst.List, cst.Tuple)):
        for el in value.elements:
            if isinstance(el, cst.StarredElement):
                continue
            if isinstance(el.value, cst.Name) and el.value.value == "None":
                return None, "an unknown (None) dimension: a torch.Size holds ints only"
    return value, ""


def _known(value: cst.BaseExpression) -> bool:
    """A literal list / tuple of integers (every dimension known where it is written)."""
    return isinstance(value, (cst.List, cst.Tuple)) and all(
        not isinstance(el, cst.StarredElement) and isinstance(el.value, cst.Integer) for el in value.elements)


def _as_dims(arg: cst.BaseExpression) -> cst.BaseExpression:
    """An int literal as the one-dimension tuple TensorFlow reads it as."""
    if isinstance(arg, cst.Integer):
        return cst.Tuple([cst.Element(arg)])
    return arg


class _Shapes(_Generators):
    QUALNAME = TENSOR_SHAPE
    _SPELLED = "torch.Size"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.calls: list[cst.Call] = []  # every tf.TensorShape(...) call, in the order met
        self.chained: dict[int, tuple[cst.CSTNode, str]] = {}  # id(call) → (the attribute / method call, name)
        self.refused: set[int] = set()  # ids of the calls read by another attribute where they are made
        self.truths: dict[int, cst.Call] = {}  # id(call) → the bool(call) around it

    # --- the reads of a name --------------------------------------------------------------------------
    def _mark(self, node: cst.BaseExpression, kind: str, at: cst.CSTNode) -> None:
        if kind in ("compare", "truth") and isinstance(node, cst.Call) and self._resolve(node.func) == TENSOR_SHAPE:
            self.refused.add(id(node))  # bool(tf.TensorShape([])) is True, bool(torch.Size([])) False: kept
            return
        if isinstance(node, cst.Name) and id(node) not in self.seen:
            self.seen.add(id(node))
            self._use(node, kind, at)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if self._resolve(func) == TENSOR_SHAPE:
            self.calls.append(node)
            return
        if isinstance(func, cst.Attribute) and func.attr.value in _METHODS and not node.args:
            self.seen.add(id(func.attr))
            if isinstance(func.value, cst.Call) and self._resolve(func.value.func) == TENSOR_SHAPE:
                self.chained[id(func.value)] = (node, func.attr.value)
            else:
                self._mark(func.value, "method", node)
        elif isinstance(func, cst.Name) and func.value == "bool" and len(node.args) == 1:
            arg = node.args[0].value
            if isinstance(arg, cst.Call) and self._resolve(arg.func) == TENSOR_SHAPE:
                self.truths[id(arg)] = node  # bool(tf.TensorShape(dims)): whether the rank is known
            self._mark(arg, "truth", node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.seen.add(id(node.attr))
        if node.attr.value in _ATTRIBUTES:
            if isinstance(node.value, cst.Call) and self._resolve(node.value.func) == TENSOR_SHAPE:
                self.chained[id(node.value)] = (node, node.attr.value)
                return
            self._mark(node.value, "attribute", node)
        elif isinstance(node.value, cst.Call) and self._resolve(node.value.func) == TENSOR_SHAPE:
            if id(node.value) not in self.chained:  # tf.TensorShape(...).dims / .merge_with(...): no torch.Size has it
                self.refused.add(id(node.value))
        else:
            self._mark(node.value, "other-attribute", node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for operand in (node.left, *(c.comparator for c in node.comparisons)):
            self._mark(operand, "compare", node)

    def _truth(self, test: cst.BaseExpression, at: cst.CSTNode) -> None:
        self._mark(test, "truth", at)

    def visit_If(self, node: cst.If) -> None:
        self._truth(node.test, node.test)

    def visit_While(self, node: cst.While) -> None:
        self._truth(node.test, node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._truth(node.test, node.test)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._truth(node.test, node.test)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            self._truth(node.expression, node)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._truth(node.left, node)
        self._truth(node.right, node)

    # --- the plan -------------------------------------------------------------------------------------
    def plan(self) -> None:
        resolve = self._resolve
        sealed = self.ctx.plans.sealed()  # inside an edit another planner made whole (a dropped decorator)
        self.calls = [c for c in self.calls if id(c) not in sealed]
        done: set[int] = set()  # ids of the calls a shape name's decision covers
        bound: set[int] = set()  # ids of every call that is the value of a binding of a name
        for scope in self.scopes.values():
            for values in scope.values.values():
                bound.update(id(v) for v in values if isinstance(v, cst.Call))
        for scope in self.scopes.values():
            for name in sorted(scope.generators(resolve, TENSOR_SHAPE)):
                calls = scope.values[name]
                done.update(id(c) for c in calls)
                uses = self.uses.get((id(scope), name), [])
                if any(id(c) in sealed for c in calls) or any(id(n) in sealed for _, n in uses):
                    continue
                refused = [(n, kind) for kind, n in uses if kind in ("compare", "truth", "other-attribute")]
                unknown = [why for why in (_dims(c)[1] for c in calls) if why]
                if refused or unknown:
                    for n, kind in refused:
                        what = {"compare": "compared", "truth": "tested for truth",
                                "other-attribute": "read by a TensorShape attribute fwport does not map"}[kind]
                        self.ctx.report(Severity.ERROR, "unsupported-construct",
                                        f"{code(n)}: the TensorShape {name} is {what}: {_TUPLE_NOTE}, so {name} is "
                                        "left a TensorShape (write the dims as a tuple, or a torch.Size, and "
                                        "compare tuples)", n)
                    continue  # the calls keep their no-rule error (with the unknown dimension's reason)
                for c in calls:
                    self._plan_call(c, Severity.INFO, f"{name} = {code(c)} → torch.Size: every use of {name} "
                                    "here is one torch.Size has (indexing, len, iteration, as_list, rank)")
                for kind, n in uses:
                    if kind in ("method", "attribute"):
                        self._plan_use(n, name)
        for c in self.calls:
            if id(c) in self.truths and id(c) not in done and id(c) not in bound:
                self._plan_truth(c)
                continue
            if id(c) in done or id(c) in self.refused or (id(c) in bound and id(c) not in self.chained):
                continue  # bound to a name fwport does not follow: keeps its no-rule error
            dims, why = _dims(c)
            if dims is None:
                continue
            if id(c) in self.chained:
                self._plan_chained(c, dims)
            else:
                self._plan_call(c, Severity.WARNING, f"{code(c)} → torch.Size: {_TUPLE_NOTE}; check the code that "
                                "receives it")

    def _plan_call(self, call: cst.Call, severity: Severity, message: str) -> None:
        spelled = self.ctx.spell_text(self._SPELLED)
        self.ctx.report(severity, "idiom-replaced", message, call)
        self.ctx.plans.add(call, lambda orig, upd: cst.Call(cst.parse_expression(spelled),
                                                            [cst.Arg(_as_dims(upd.args[0].value))]),
                           by="tensor_shapes")

    def _plan_truth(self, call: cst.Call) -> None:
        """``bool(tf.TensorShape(dims))`` is whether the rank is known (TensorShape.__bool__), whatever the
        dims: True for a literal list, tuple or int (``[]`` and ``[None]`` too), False for ``None``; other dims
        (a name that may hold None) keep the call's error."""
        args = list(call.args)
        if len(args) != 1 or args[0].star or (args[0].keyword is not None and args[0].keyword.value != "dims"):
            return
        value = args[0].value
        if isinstance(value, cst.Name) and value.value == "None":
            text = "False"
        elif isinstance(value, (cst.List, cst.Tuple, cst.Integer)):
            text = "True"
        else:
            return
        outer = self.truths[id(call)]
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(outer)} → {text}: a TensorShape is true where its "
                        "rank is known, whatever its dimensions (a torch.Size, a tuple, is false when empty)", outer)
        self.ctx.plans.add(outer, lambda orig, upd, t=text: cst.Name(t), descend=False, by="tensor_shapes")

    def _plan_use(self, node: cst.CSTNode, name: str) -> None:
        if isinstance(node, cst.Call):
            method = node.func.attr.value  # type: ignore[union-attr]
            text = {"as_list": f"list({name})", "is_fully_defined": "True", "num_elements": f"{name}.numel()"}[method]
        else:
            method, text = node.attr.value, f"len({name})"  # type: ignore[union-attr]
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(node)} → {text}", node)
        self.ctx.plans.add(node, lambda orig, upd, t=text: cst.parse_expression(t), descend=False,
                           by="tensor_shapes")

    def _plan_chained(self, call: cst.Call, dims: cst.BaseExpression) -> None:
        outer, method = self.chained[id(call)]
        known = _known(dims)
        size = self.ctx.spell_text(self._SPELLED) if method == "num_elements" else "torch.Size"
        # the inner call is read by the outer edit only (its translated dims)
        self.ctx.plans.add(call, lambda orig, upd: cst.Call(cst.parse_expression(size),
                                                            [cst.Arg(_as_dims(upd.args[0].value))]),
                           by="tensor_shapes")

        def apply(orig, upd, method=method, known=known):
            inner = upd.func.value if isinstance(upd, cst.Call) else upd.value
            value = _as_dims(inner.args[0].value)  # the translated dims
            arg = code(value)
            literal = isinstance(value, (cst.List, cst.Tuple)) and not any(
                isinstance(el, cst.StarredElement) for el in value.elements)
            if method == "as_list":
                return cst.List(list(value.elements)) if literal else cst.parse_expression(f"list({arg})")
            if method in _ATTRIBUTES:
                return cst.Integer(str(len(value.elements))) if literal else cst.parse_expression(f"len({arg})")
            if method == "is_fully_defined":
                return cst.parse_expression("True" if known else f"all(d is not None for d in {arg})")
            return cst.parse_expression(f"{code(inner)}.numel()")

        self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(outer)}: a TensorShape's {method} on the dims "
                        "it is given", outer)
        self.ctx.plans.add(outer, apply, by="tensor_shapes")


# --- x.shape.as_list() on any receiver ---------------------------------------------------------------------

AS_LIST_TRIGGER = r"\.\s*as_list\s*\("


class _AsList(cst.CSTVisitor):
    """``x.shape.as_list()`` / ``x.get_shape().as_list()`` with ``x`` of a type fwport does not follow →
    ``list(x.shape)``. Exact on whatever ``x`` is in the translation: a torch tensor (its torch.Size is a tuple of
    ints), a NumPy array (a tuple), a Keras 3 tensor (a tuple) or a TensorFlow tensor a model left as written gives
    (list(TensorShape) is its as_list(): the same ints and Nones)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.sealed = ctx.plans.sealed()
        self.said = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if node.args or not isinstance(func, cst.Attribute) or func.attr.value != "as_list":
            return
        inner = func.value
        if isinstance(inner, cst.Attribute) and inner.attr.value == "shape":
            getter = False
        elif isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, cst.Attribute) \
                and inner.func.attr.value == "get_shape":
            getter = True
        else:
            return
        receiver = inner.func.value if getter else inner.value
        if id(node) in self.sealed or self.ctx.plans.get(node) is not None or self.ctx.is_settled(node) \
                or self.ctx.imports.resolve(receiver) is not None:
            return  # (planned by another planner, left as written, or a name of TensorFlow's)

        def apply(orig: cst.Call, upd: cst.Call) -> cst.BaseExpression:
            got = upd.func.value
            recv = got.func.value if isinstance(got, cst.Call) else got.value
            return cst.Call(cst.Name("list"), [cst.Arg(cst.Attribute(recv, cst.Name("shape")))])

        if not self.said:
            self.said = True
            self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(node)} → list(...shape): a torch tensor's shape "
                            "is a torch.Size (a tuple of ints) with no as_list(); list() of it gives the same ints "
                            "(every size is known when torch runs)", node)
        self.ctx.plans.add(node, apply, by="shape_as_list")


def run_as_list(module: cst.Module, ctx) -> cst.Module:
    """Plans ``x.shape.as_list()`` → ``list(x.shape)`` (see _AsList) and returns ``module`` itself."""
    module.visit(_AsList(ctx))
    return module
