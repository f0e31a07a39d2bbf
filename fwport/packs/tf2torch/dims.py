"""Sizes written with names: what a layer's size expression means where the layer is built.

Real Keras code spells shapes with names: module constants (``NUM_FEATURES = 20``,
``input_shape = (28, 28, 1)``), builder parameters (``def build(seq_len, dim): keras.Input((seq_len,
dim))``) and arithmetic on them. A dimension is therefore one of

- an ``int``: a literal, or a module constant's value (:class:`Named`, an int that is spelled by its
  name in the output, so ``nn.Linear(NUM_FEATURES, 64)`` reads as the source did);
- a ``str``: a symbolic size, the text of a Python expression that is valid, with the same value,
  wherever the layers of the model are built (``dim``, ``input_shape[-1]``, ``(h - 2) // 2``);
- ``None``: unknown.

Only *stable* names become symbols: a function parameter that the function never rebinds, or a
module-level name bound exactly once (and not shadowed where it is used). A parameter's default value
is never used: the caller may pass another one, and the symbol is exact at any value.
Translation code: no framework import here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.bindings import BindingWalker
from fwport.core.engine import LayerContext, code
from fwport.core.names import scan


class Named(int):
    """An int known from a module constant, written with the constant's name in the output."""

    text: str

    def __new__(cls, value: int, text: str) -> "Named":
        obj = super().__new__(cls, value)
        obj.text = text
        return obj

    def __reduce__(self):  # results cross process boundaries: unpickle with both arguments
        return (Named, (int(self), self.text))

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def is_int(d) -> bool:
    return isinstance(d, int) and not isinstance(d, bool)


def known(d) -> bool:
    """A size that can be written in the output (an int or a symbolic expression)."""
    return is_int(d) or isinstance(d, str)


def plain(d):
    """The value for records and model infos, which hold ints only: symbolic sizes become None."""
    return int(d) if is_int(d) else None


# --- arithmetic on sizes: ints where both are ints, readable expressions otherwise ----------------------

_TRAILING = re.compile(r"^(.*\S) ([+-]) (\d+)$")


def _loose(text: str) -> bool:
    """Whether the expression needs parentheses as an operand of * or //."""
    return " + " in text or " - " in text or text.startswith("-")


def _par(text: str) -> str:
    return f"({text})" if _loose(text) else text


def add(a, c: int):
    """``a + c`` for an int ``c`` (negative to subtract)."""
    if a is None:
        return None
    if is_int(a):
        return int(a) + c
    if c == 0:
        return a
    m = _TRAILING.match(a)
    if m:  # `h - 2` + 1 → `h - 1` (+ and - are left-associative and bind loosest)
        total = (int(m.group(3)) if m.group(2) == "+" else -int(m.group(3))) + c
        head = m.group(1)
        return head if total == 0 else f"{head} {'+' if total > 0 else '-'} {abs(total)}"
    return f"{a} {'+' if c > 0 else '-'} {abs(c)}"


def mul(a, b):
    if a is None or b is None:
        return None
    if is_int(a) and is_int(b):
        return int(a) * int(b)
    if is_int(a) and a == 1:
        return b
    if is_int(b) and b == 1:
        return a
    right = str(b)
    # `a * (h // 2)` is not `a * h // 2` (Python groups it as `(a * h) // 2`): a right operand holding a
    # floor division or a modulo keeps its parentheses
    right = f"({right})" if _loose(right) or "//" in right or "%" in right else right
    return f"{_par(str(a))} * {right}"


def floordiv(a, s: int):
    if a is None:
        return None
    if is_int(a):
        return int(a) // s
    return a if s == 1 else f"{_par(a)} // {s}"


def ceildiv(a, s: int):
    """``ceil(a / s)`` exactly, as integer arithmetic."""
    if is_int(a):
        return -(-int(a) // s)
    return floordiv(add(a, s - 1), s)


def prod(dims) -> object:
    out: object = 1
    for d in dims:
        out = mul(out, d)
    return out


# --- which names are stable -------------------------------------------------------------------------------

class _Bindings(BindingWalker):
    """How many times each name is bound in one scope (nested functions, classes, lambdas and
    comprehensions are scopes of their own); a binding inside a loop counts as many, and a name
    changed in place, deleted or declared global/nonlocal is never stable (99)."""

    def __init__(self) -> None:
        super().__init__(comprehensions=False)
        self.count: dict[str, int] = {}

    def bound(self, target: cst.BaseExpression, how: str, value) -> None:
        if not isinstance(target, cst.Name) or how == "annotation":
            return
        if how in ("augassign", "del", "global"):
            self.count[target.value] = 99
        else:
            self.count[target.value] = self.count.get(target.value, 0) + (2 if self.loop else 1)


def bindings(body: cst.CSTNode) -> dict[str, int]:
    v = _Bindings()
    scan(body, v)
    return v.count


class _Globals(cst.CSTVisitor):
    """Names declared ``global`` in any function: they may change at run time. Only statements
    can hold a ``global``, so expressions are skipped (most of a tree, so most of the cost)."""

    def __init__(self, counts: dict[str, int]):
        self.counts = counts

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.Global):
                    for n in small.names:
                        self.counts[n.name.value] = 99
            return False
        return not isinstance(node, cst.BaseExpression)


def module_scope(module: cst.Module, ctx=None) -> tuple[dict[str, object], set[str]]:
    """(constants, stable names) of a module: names bound once at module level (and declared
    ``global`` nowhere), with the int / tuple-of-int value of those bound to literals (or to
    arithmetic on earlier constants).

    With ``ctx`` (a FileContext), computed once per file: the structural passes leave module-level
    constants and bindings as they were, so every pass sees the same answer."""
    if ctx is not None:
        cached = ctx.analyses.get("module_scope")
        if cached is None:
            cached = ctx.analyses["module_scope"] = module_scope(module)
        return cached
    counts = bindings(module)
    scan(module, _Globals(counts))
    stable = {n for n, c in counts.items() if c == 1}
    constants: dict[str, object] = {}
    probe = Sizes(constants, set())
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                target, value = small.target, small.value
            else:
                continue
            for name, part in _pairs(target, value):
                if name.value in stable:
                    v = probe.constant(part)
                    if v is not None:
                        constants[name.value] = v
    return constants, stable


def _pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.Name, cst.BaseExpression]]:
    """The names an assignment binds with the value each gets: ``X = 3``, and the tuple unpacking
    of a literal of the same length, ``IMG_ROWS, IMG_COLS = 16, 12`` (nested alike)."""
    if isinstance(target, cst.Name):
        return [(target, value)]
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
            and len(target.elements) == len(value.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
        return [p for t, v in zip(target.elements, value.elements) for p in _pairs(t.value, v.value)]
    return []


_FUNCTION_STABLE: dict[int, tuple[cst.FunctionDef, tuple[set[str], set[str]]]] = {}


def function_stable(fn: cst.FunctionDef) -> tuple[set[str], set[str]]:
    """(stable names, all names bound) of a function: its parameters that it never rebinds.

    Kept by the function node's identity (nodes never change; the node is held so that its id is
    not reused): every layer built in one function asks about the same function."""
    hit = _FUNCTION_STABLE.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    if len(_FUNCTION_STABLE) > 256:
        _FUNCTION_STABLE.clear()
    result = _function_stable(fn)
    _FUNCTION_STABLE[id(fn)] = (fn, result)
    return result


def _function_stable(fn: cst.FunctionDef) -> tuple[set[str], set[str]]:
    counts = bindings(fn.body)
    params = fn.params
    names = [p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            counts[star.name.value] = counts.get(star.name.value, 0) + 1
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return {n for n in names if counts[n] == 1}, set(counts)


@dataclass
class Sizes:
    """Reads size expressions where a model's layers are built.

    ``constants``: module names with a known int / tuple value (not shadowed here);
    ``stable``: names that may be written as symbols here."""

    constants: dict[str, object]
    stable: set[str]

    @classmethod
    def at(cls, module_constants: dict[str, object], module_stable: set[str],
           functions: list[cst.FunctionDef]) -> "Sizes":
        """The sizes visible inside the innermost of ``functions`` (outermost first)."""
        constants = dict(module_constants)
        stable = set(module_stable)
        for fn in functions:
            fn_stable, fn_bound = function_stable(fn)
            for n in fn_bound:  # a local shadows the module's name
                constants.pop(n, None)
                stable.discard(n)
            stable |= fn_stable
        return cls(constants, stable)

    def constant(self, node: cst.BaseExpression):
        """An int or tuple of ints that the expression always has here, else None."""
        lit = literal_value(node, NOT_LITERAL)
        if is_int(lit):
            return lit
        if isinstance(lit, tuple) and all(is_int(x) for x in lit):
            return lit
        if isinstance(node, (cst.Tuple, cst.List)):
            items = [self.dim(e.value) if not isinstance(e, cst.StarredElement) else None for e in node.elements]
            if all(is_int(x) for x in items):
                return tuple(items)
            # a shape with unknown sizes written as None: `input_shape = (None, 10, HEIGHT, WIDTH, 3)` (the sizes
            # a slice of it reads, input_shape[1:], are known); its None items stay None wherever it is read
            if any(is_int(x) for x in items) and all(
                    is_int(x) or (isinstance(e.value, cst.Name) and e.value.value == "None")
                    for x, e in zip(items, node.elements)):
                return tuple(items)
            return None
        d = self.dim(node)
        if is_int(d):
            return d
        if isinstance(node, cst.Name) and isinstance(self.constants.get(node.value), tuple):
            return self.constants[node.value]
        return None

    def dim(self, node: cst.BaseExpression | None):
        """One size: an int, a symbolic expression text, or None."""
        if node is None:
            return None
        if isinstance(node, cst.Integer):
            return int(node.evaluated_value)
        if isinstance(node, cst.Name):
            v = self.constants.get(node.value)
            if is_int(v):
                return Named(v, node.value)
            if v is None and node.value in self.stable:
                return node.value
            return None
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            v = self.dim(node.expression)
            return -v if is_int(v) else None
        if isinstance(node, cst.Subscript):
            base = node.value
            if not (isinstance(base, cst.Name) and len(node.slice) == 1
                    and isinstance(node.slice[0].slice, cst.Index)):
                return None
            i = literal_value(node.slice[0].slice.value, None)
            if not is_int(i):
                return None
            v = self.constants.get(base.value)
            if isinstance(v, tuple):
                return v[i] if -len(v) <= i < len(v) else None
            return code(node) if v is None and base.value in self.stable else None
        if isinstance(node, cst.BinaryOperation) and type(node.operator) in _OPS:
            a, b = self.dim(node.left), self.dim(node.right)
            if a is None or b is None:
                return None
            if is_int(a) and is_int(b):
                if isinstance(node.operator, cst.FloorDivide) and b == 0:
                    return None
                v = _OPS[type(node.operator)](int(a), int(b))
                return Named(v, code(node)) if isinstance(a, Named) or isinstance(b, Named) else v
            return code(node)
        return None

    def shape(self, node: cst.BaseExpression | None, rank1: bool = False) -> tuple | None:
        """A shape argument as a tuple of sizes; None when even its rank is unknown."""
        if node is None:
            return None
        if rank1:
            return (self.dim(node),)
        if isinstance(node, (cst.Tuple, cst.List)):
            out: list = []
            for e in node.elements:
                if isinstance(e, cst.StarredElement):  # (*IMAGE_SIZE, 3) with IMAGE_SIZE a module constant
                    part = self.constants.get(e.value.value) if isinstance(e.value, cst.Name) else None
                    if not isinstance(part, tuple):
                        return None
                    out.extend(part)
                else:
                    out.append(self.dim(e.value))
            return tuple(out)
        if isinstance(node, cst.Name) and isinstance(self.constants.get(node.value), tuple):
            return tuple(self.constants[node.value])
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("tuple", "list") \
                and len(node.args) == 1 and not node.args[0].star and node.args[0].keyword is None \
                and isinstance(node.args[0].value, (cst.Tuple, cst.List, cst.Name, cst.Subscript)):
            return self.shape(node.args[0].value)  # tuple([k_neighbours]) + input_shape
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
            # input_shape[1:] of a shape known here (a module constant, a display): the sizes it keeps
            sl = node.slice[0].slice
            bounds = [None if b is None else literal_value(b, NOT_LITERAL) for b in (sl.lower, sl.upper, sl.step)]
            whole = self.shape(node.value) if isinstance(node.value, (cst.Name, cst.Tuple, cst.List)) \
                and not (isinstance(node.value, cst.Name) and node.value.value not in self.constants) else None
            if whole is not None and bounds[2] is None and all(b is None or is_int(b) for b in bounds[:2]):
                return tuple(whole[bounds[0]:bounds[1]])
            return None
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add) \
                and _shape_operand(node.left) and _shape_operand(node.right):
            # target_shape + (3,): shapes joined, each known here (a module constant, a display)
            left, right = self.shape(node.left), self.shape(node.right)
            if left is not None and right is not None and not (
                    isinstance(node.left, cst.Name) and node.left.value not in self.constants) and not (
                    isinstance(node.right, cst.Name) and node.right.value not in self.constants):
                return left + right
        d = self.dim(node)
        return (d,) if is_int(d) else None

    def shape_name(self, node: cst.BaseExpression | None) -> str | None:
        """A stable name given as a whole shape (``shape=input_shape``): its rank is unknown here."""
        if isinstance(node, cst.Name) and node.value in self.stable and node.value not in self.constants:
            return node.value
        return None


def _shape_operand(node: cst.BaseExpression) -> bool:
    """What a shape joined with + may be made of: a display, a name, a join, tuple(...) / list(...), a slice."""
    if isinstance(node, cst.Subscript):
        return len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice)
    return isinstance(node, (cst.Tuple, cst.List, cst.Name, cst.BinaryOperation, cst.Call))


_OPS = {cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b, cst.Multiply: lambda a, b: a * b,
        cst.FloorDivide: lambda a, b: a // b}

#: Literal sizes only: what a layer translated with no pass around it can read.
LITERAL = Sizes({}, set())


@dataclass
class SizedContext(LayerContext):
    """A :class:`LayerContext` that also knows how to read size expressions where the layer is built."""

    sizes: Sizes | None = None
    # Keras's mask along a Sequential chain (passes/sequential.py): mask_in, the layer's input is a
    # PackedSequence of the unmasked steps; mask_out, the next layer is a recurrent one that takes it
    mask_in: bool = False
    mask_out: bool = False
    # Keras's mask in a functional model (masks.py): mask_tracked, the pass carries an Embedding(mask_zero=True)'s
    # mask (ids != 0) to the layers after it; mask_keep, the layer's input carries it and its module is called
    # with it (mask=)
    mask_tracked: bool = False
    mask_keep: bool = False
    # the module is written somewhere else than the layer call (the functional pass builds it in a generated
    # class's __init__): an argument is readable there only as the sizes say, not as written
    moved: bool = False
    # the pass writes the layer's call site itself (passes/inline.py): it moves a channels-last input to
    # channels-first for a layout-bound module and writes a merge layer's operation out
    call_site: bool = False


def sizes_of(lctx: LayerContext) -> Sizes:
    return getattr(lctx, "sizes", None) or LITERAL


def symbolic_shape(name: str, rank: int) -> tuple:
    """``input_shape`` of a known rank: ``(input_shape[0], input_shape[1], input_shape[-1])``."""
    return tuple(f"{name}[{i}]" for i in range(rank - 1)) + (f"{name}[-1]",)
