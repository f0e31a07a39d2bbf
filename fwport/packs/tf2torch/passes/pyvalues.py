"""Planner (read-only analysis): Python numbers among the tensors of ``tf.stack`` / ``tf.concat``, and
the Python int given to ``tf.split`` as its number of parts.

TensorFlow converts every element of the list it stacks or concatenates: ``tf.stack([lengths - 1,
batch_range], axis=1)`` with ``batch_range = [i for i in range(batch_size)]`` is fine in TensorFlow,
while ``torch.stack`` / ``torch.cat`` take tensors only (a list element is a TypeError). This
analysis finds the elements that are certainly Python numbers (not tensors), for the ``tensors``
call transform (ops.py), which writes each as ``torch.as_tensor(element)`` (with
``dtype=torch.int32`` where it holds ints only: TensorFlow's dtype for them):

- number literals, and list / tuple displays of them;
- ``range(...)``, ``len(...)``, ``int(...)``, ``float(...)`` (whatever their arguments), and
  ``list(...)`` / ``tuple(...)`` of such values;
- comprehensions over ``range(...)`` (or such values) whose element is arithmetic on the loop
  variables and numbers (``[i for i in range(n)]``, ``[2 * i + 1 for i in range(n)]``);
- a name every binding of which, in the scope the name is read from (a function, else the module),
  is an assignment of one of these (not a parameter, not a loop variable, not a global).

Anything else is left as written: it may be a tensor, or a list of tensors, which ``as_tensor``
would not take. ``ctx.analyses[PY_NUMBERS]``: element id → whether it holds ints only. Runs after the rewriting
passes (the rule pass walks the very nodes it recorded).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.names import param_names, scan
from fwport.packs.tf2torch.ops import PY_NUMBERS

#: the calls whose first argument is a list of tensors (resolved by the rule: the transform decides)
_LISTS_OF = frozenset({"stack", "concat", "concatenate"})
_NUMBER_CALLS = frozenset({"len", "int", "float", "range"})
_CONTAINER_CALLS = frozenset({"list", "tuple"})


def python_number(node: cst.BaseExpression, known: set[str], loop_vars: frozenset[str] = frozenset(),
                  ints: bool = False) -> bool:
    """``node`` is certainly a Python number, or a (nested) sequence of them, whatever the names in
    ``known`` (names bound only to such values) and ``loop_vars`` (comprehension variables over them).
    ``ints``: Python ints only (no float literal, ``float()``, ``/``, nor ``**`` but to a literal power)."""
    def again(n: cst.BaseExpression, loops: frozenset[str] = loop_vars) -> bool:
        return python_number(n, known, loops, ints)

    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Float):
        return not ints
    if isinstance(node, cst.Name):
        return node.value in known or node.value in loop_vars
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return again(node.expression)
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.MatrixMultiply) or ints and (isinstance(node.operator, cst.Divide) or (
                isinstance(node.operator, cst.Power) and not isinstance(node.right, cst.Integer))):
            return False  # (an int to a power written as a literal, never negative here, is an int)
        return _scalar(node.left) and _scalar(node.right) and again(node.left) and again(node.right)
    if isinstance(node, (cst.List, cst.Tuple)):
        return bool(node.elements) and all(isinstance(e, cst.Element) and again(e.value) for e in node.elements)
    if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
        names = set(loop_vars)
        comp = node.for_in
        while comp is not None:
            if comp.asynchronous is not None or not isinstance(comp.target, cst.Name) \
                    or not again(comp.iter, frozenset(names)):
                return False
            names.add(comp.target.value)
            comp = comp.inner_for_in
        return again(node.elt, frozenset(names))
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and not any(a.star for a in node.args):
        name = node.func.value
        if name in _NUMBER_CALLS:  # whatever their arguments
            return not (ints and name == "float")
        if name in _CONTAINER_CALLS and len(node.args) == 1:
            return again(node.args[0].value)
    return False


def _scalar(node: cst.BaseExpression) -> bool:
    """An operand of arithmetic that is not a sequence (``+`` of displays is a concatenation)."""
    if isinstance(node, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
        return False
    return not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
                and node.func.value in (*_CONTAINER_CALLS, "range"))


class _Scope(BindingWalker):
    """Every binding of one scope's body (nested functions and classes are scopes of their own)."""

    def __init__(self) -> None:
        super().__init__(comprehensions=False)
        self.values: dict[str, list[cst.BaseExpression | None]] = {}

    def bound(self, target: cst.BaseExpression, how: str, value) -> None:
        if isinstance(target, cst.Name):
            self.values.setdefault(target.value, []).append(value if how in ("assign", "annassign") else None)


Known = tuple[set[str], set[str]]  # names bound only to Python numbers, and those only to ints


def _known(body: cst.CSTNode, params: set[str], outer: Known) -> Known:
    """The names of this scope bound only to Python numbers (and only to ints); a name read but
    not bound here is looked up in ``outer`` (the enclosing scopes')."""
    s = _Scope()
    scan(body, s)
    bound = set(s.values) | params
    candidates = {n: vs for n, vs in s.values.items() if n not in params and all(v is not None for v in vs)}
    result = []
    for ints, outer_known in ((False, outer[0]), (True, outer[1])):
        known = (outer_known - bound) | set(candidates)
        changed = True
        while changed:  # drop names with a binding that is not a Python number, until nothing changes
            changed = False
            for n in list(known & set(candidates)):
                if not all(python_number(v, known, ints=ints) for v in candidates[n]):
                    known.discard(n)
                    changed = True
        result.append(known)
    return result[0], result[1]


class _Lazy:
    """A scope's known names, computed the first time a stack / concat call in it asks."""

    def __init__(self, make) -> None:
        self.make, self.value = make, None

    def get(self) -> Known:
        if self.value is None:
            self.value = self.make()
        return self.value


class _Elements(cst.CSTVisitor):
    def __init__(self, found: dict[int, bool], module: cst.Module) -> None:
        super().__init__()
        self.found = found
        self.known = [_Lazy(lambda: _known(module, set(), (set(), set())))]

    def _push(self, make) -> None:
        self.known.append(_Lazy(make))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        outer = self.known[-1]
        self._push(lambda: _known(node.body, param_names(node), outer.get()))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.known.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        outer = self.known[-1]
        self._push(lambda: (outer.get()[0] - param_names(node), outer.get()[1] - param_names(node)))

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.known.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # its methods see the enclosing scope's names, not the class body's: nothing assumed of those
        outer = self.known[-1]

        def make() -> Known:
            s = _Scope()
            scan(node.body, s)
            return outer.get()[0] - set(s.values), outer.get()[1] - set(s.values)
        self._push(make)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.known.pop()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if last == "split":
            self._split_count(node)
            return
        if last not in _LISTS_OF or not node.args:
            return
        keyword = node.args[0].keyword
        if keyword is not None and keyword.value not in ("values", "tensors", "x", "xs"):
            return
        values = node.args[0].value
        if not isinstance(values, (cst.List, cst.Tuple)):
            return
        numbers, ints = self.known[-1].get()
        for e in values.elements:
            if isinstance(e, cst.Element) and python_number(e.value, numbers):
                self.found[id(e.value)] = python_number(e.value, ints, ints=True)


    def _split_count(self, node: cst.Call) -> None:
        """``tf.split(x, n)`` with ``n`` a name or expression certainly a Python int (``slices =
        int(...)``): a number of equal parts, which the split transform writes as ``torch.chunk``."""
        arg = next((a for i, a in enumerate(node.args) if (i == 1 and a.keyword is None) or (
            a.keyword is not None and a.keyword.value == "num_or_size_splits")), None)
        if arg is None or arg.star or not _scalar(arg.value):
            return
        if python_number(arg.value, self.known[-1].get()[1], ints=True):
            self.found[id(arg.value)] = True


def run(module: cst.Module, ctx) -> cst.Module:
    """Records the Python-number elements (module docstring) and returns ``module`` itself: element
    id → whether it holds ints only (TensorFlow makes int32 of those where no tensor sets the dtype)."""
    found: dict[int, bool] = {}
    scan(module, _Elements(found, module))
    if found:
        ctx.analyses[PY_NUMBERS] = found
    return module
