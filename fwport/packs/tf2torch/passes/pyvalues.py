"""Planner (read-only analysis): Python numbers among the tensors of ``tf.stack`` / ``tf.concat``.

TensorFlow converts every element of the list it stacks or concatenates: ``tf.stack([lengths - 1,
batch_range], axis=1)`` with ``batch_range = [i for i in range(batch_size)]`` is fine in TensorFlow,
while ``torch.stack`` / ``torch.cat`` take tensors only (a list element is a TypeError). This
analysis finds the elements that are certainly Python numbers (not tensors), for the ``tensors``
call transform (ops.py), which writes each as ``torch.as_tensor(element)``:

- number literals, and list / tuple displays of them;
- ``range(...)``, ``len(...)``, ``int(...)``, ``float(...)`` (whatever their arguments), and
  ``list(...)`` / ``tuple(...)`` of such values;
- comprehensions over ``range(...)`` (or such values) whose element is arithmetic on the loop
  variables and numbers (``[i for i in range(n)]``, ``[2 * i + 1 for i in range(n)]``);
- a name every binding of which, in the scope the name is read from (a function, else the module),
  is an assignment of one of these (not a parameter, not a loop variable, not a global).

Anything else is left as written: it may be a tensor, or a list of tensors, which ``as_tensor``
would not take. The elements' ids go to ``ctx.analyses[PY_NUMBERS]``. Runs after the rewriting
passes (the rule pass walks the very nodes it recorded).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.names import scan
from fwport.packs.tf2torch.ops import PY_NUMBERS
#: the calls whose first argument is a list of tensors (resolved by the rule: the transform decides)
_LISTS_OF = frozenset({"stack", "concat", "concatenate"})
_NUMBER_CALLS = frozenset({"len", "int", "float"})
_CONTAINER_CALLS = frozenset({"list", "tuple"})


def python_number(node: cst.BaseExpression, known: set[str], loop_vars: frozenset[str] = frozenset()) -> bool:
    """``node`` is certainly a Python number, or a (nested) sequence of them, whatever the names in
    ``known`` (names bound only to such values) and ``loop_vars`` (comprehension variables over them)."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.Name):
        return node.value in known or node.value in loop_vars
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return python_number(node.expression, known, loop_vars)
    if isinstance(node, cst.BinaryOperation):
        return (not isinstance(node.operator, cst.MatrixMultiply)
                and _scalar(node.left, known, loop_vars) and _scalar(node.right, known, loop_vars))
    if isinstance(node, (cst.List, cst.Tuple)):
        return bool(node.elements) and all(
            isinstance(e, cst.Element) and python_number(e.value, known, loop_vars) for e in node.elements)
    if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
        names = set(loop_vars)
        comp = node.for_in
        while comp is not None:
            if comp.asynchronous is not None or not isinstance(comp.target, cst.Name) or not python_number(comp.iter, known, frozenset(names)):
                return False
            names.add(comp.target.value)
            comp = comp.inner_for_in
        return python_number(node.elt, known, frozenset(names))
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and not any(a.star for a in node.args):
        name = node.func.value
        if name in _NUMBER_CALLS or name == "range":  # whatever their arguments
            return True
        if name in _CONTAINER_CALLS and len(node.args) == 1:
            return python_number(node.args[0].value, known, loop_vars)
    return False


def _scalar(node: cst.BaseExpression, known: set[str], loop_vars: frozenset[str]) -> bool:
    """An operand of arithmetic: a number (a display would make ``+`` a concatenation)."""
    if isinstance(node, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
        return False
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in (*_CONTAINER_CALLS, "range"):
        return False
    return python_number(node, known, loop_vars)


class _Scope(BindingWalker):
    """Every binding of one scope's body (nested functions and classes are scopes of their own)."""

    def __init__(self) -> None:
        super().__init__(comprehensions=False)
        self.values: dict[str, list[cst.BaseExpression | None]] = {}

    def bound(self, target: cst.BaseExpression, how: str, value) -> None:
        if isinstance(target, cst.Name):
            self.values.setdefault(target.value, []).append(value if how in ("assign", "annassign") else None)


def _known(body: cst.CSTNode, params: set[str], outer: set[str]) -> tuple[set[str], set[str]]:
    """(names bound in this scope, those bound only to Python numbers); a name read but not bound
    here is looked up in ``outer`` (the enclosing scopes' known names)."""
    s = _Scope()
    scan(body, s)
    bound = set(s.values) | params
    candidates = {n: vs for n, vs in s.values.items() if n not in params and all(v is not None for v in vs)}
    known = (outer - bound) | set(candidates)
    changed = True
    while changed:  # drop names with a binding that is not a Python number, until nothing changes
        changed = False
        for n in list(known & set(candidates)):
            if not all(python_number(v, known) for v in candidates[n]):
                known.discard(n)
                changed = True
    return bound, known


def _params(fn: cst.FunctionDef | cst.Lambda) -> set[str]:
    p = fn.params
    names = {x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]}
    for star in (p.star_arg, p.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


class _Elements(cst.CSTVisitor):
    def __init__(self, found: set[int], known: set[str]) -> None:
        super().__init__()
        self.found = found
        self.known = [known]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.known.append(_known(node.body, _params(node), self.known[-1])[1])

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.known.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.known.append(self.known[-1] - _params(node))

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.known.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.known.append(set())  # a class body's names are not seen from its methods: nothing assumed

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.known.pop()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if last not in _LISTS_OF or not node.args:
            return
        keyword = node.args[0].keyword
        if keyword is not None and keyword.value not in ("values", "tensors", "x", "xs"):
            return
        values = node.args[0].value
        if not isinstance(values, (cst.List, cst.Tuple)):
            return
        known = self.known[-1]
        self.found.update(id(e.value) for e in values.elements
                          if isinstance(e, cst.Element) and python_number(e.value, known))


def run(module: cst.Module, ctx) -> cst.Module:
    """Records the Python-number elements (module docstring) and returns ``module`` itself."""
    found: set[int] = set()
    scan(module, _Elements(found, _known(module, set(), set())[1]))
    if found:
        ctx.analyses[PY_NUMBERS] = found
    return module
