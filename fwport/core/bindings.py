"""One walker for "which names does this code bind": every analysis that asks it (shadowed imports,
stable module constants, model variables, followed Sequential chains) subclasses
:class:`BindingWalker` and says what each binding means to it in :meth:`BindingWalker.bound`.

A binding is reported once per leaf target, after tuple/list/starred unpacking, as
``bound(target, how, value)``: ``target`` is the bound expression (a ``cst.Name``, or an
``Attribute``/``Subscript`` for ``self.x = ...``), ``value`` the assigned expression when the
statement is a plain ``target = value`` (one target, no unpacking), else None. ``how`` is one of

    assign        x = ...              annassign   x: T = ...          annotation  x: T (no value)
    augassign     x += ...             for         for x in ...        as          with/except ... as x
    walrus        (x := ...)           import      import x / from m import x (a local import)
    def / class   def x / class x      del         del x               global      global x / nonlocal x

For ``import``, ``self.imported`` is what the name is bound to: the module (``numpy`` for ``import numpy as
np``, ``a`` for ``import a.b``) or the module's object (``m.x`` for ``from m import x``; a relative import
keeps its dots: ``.m.x``). ``self.loop`` is the number of ``for``/``while`` loops around the binding (a ``for`` target is
inside its loop). Nested functions and classes are scopes of their own: their name is bound and
their bodies are not walked unless :meth:`enter_scope` says so. Options: ``expressions=False``
skips expressions altogether (only ``:=`` binds inside one: the cheap walk), ``lambdas`` and
``comprehensions`` whether their bodies are walked (a ``:=`` in a comprehension binds outside it).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.hooks import TypeTest, default_visit

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_IS_EXPRESSION = TypeTest(cst.BaseExpression)
_IS_COMPREHENSION = TypeTest(*_COMPREHENSIONS)


def _head(name: cst.BaseExpression) -> str:
    while isinstance(name, cst.Attribute):
        name = name.value
    return name.value if isinstance(name, cst.Name) else "_"


def _text(name: cst.BaseExpression | None) -> str:
    """``a.b.c`` of a dotted name node ("" for none)."""
    parts = []
    while isinstance(name, cst.Attribute):
        parts.append(name.attr.value)
        name = name.value
    if isinstance(name, cst.Name):
        parts.append(name.value)
    return ".".join(reversed(parts))


class BindingWalker(cst.CSTVisitor):
    def __init__(self, *, expressions: bool = True, lambdas: bool = False, comprehensions: bool = True,
                 imports: bool = True) -> None:
        super().__init__()
        self.expressions, self.lambdas, self.comprehensions, self.imports = (
            expressions, lambdas, comprehensions, imports)
        self.loop = 0
        self.imported = ""

    # --- what a subclass says ---------------------------------------------------------------------
    def bound(self, target: cst.BaseExpression, how: str, value: cst.BaseExpression | None) -> None:
        """One binding (see the module docstring)."""

    def enter_scope(self, node: cst.FunctionDef | cst.ClassDef | cst.Lambda) -> bool:
        """Whether to walk the body of a nested function, class or lambda (default: no)."""
        return isinstance(node, cst.Lambda) and self.lambdas

    # --- the walk -----------------------------------------------------------------------------------
    def on_visit(self, node: cst.CSTNode) -> bool:
        t = node.__class__
        if _IS_EXPRESSION[t]:
            if not self.expressions:
                return False
            if _IS_COMPREHENSION[t] and not self.comprehensions:
                return False
        return default_visit(self, node)  # CSTVisitor.on_visit, its hooks looked up once per node type

    def _targets(self, t: cst.BaseExpression, how: str, value: cst.BaseExpression | None = None) -> None:
        c = t.__class__  # (libcst's concrete node classes have no subclasses)
        if c is cst.Tuple or c is cst.List:
            for e in t.elements:
                self._targets(e.value, how)
        elif c is cst.StarredElement:
            self._targets(t.value, how)
        else:
            self.bound(t, how, value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.bound(node.name, "def", None)
        return self.enter_scope(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.bound(node.name, "class", None)
        return self.enter_scope(node)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return self.enter_scope(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        single = len(node.targets) == 1
        for t in node.targets:
            self._targets(t.target, "assign", node.value if single else None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is None:
            self.bound(node.target, "annotation", None)
        else:
            self._targets(node.target, "annassign", node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target, "augassign")

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target, "walrus")

    def visit_For(self, node: cst.For) -> None:
        self.loop += 1
        self._targets(node.target, "for")

    def leave_For(self, original_node: cst.For) -> None:
        self.loop -= 1

    def visit_While(self, node: cst.While) -> None:
        self.loop += 1

    def leave_While(self, original_node: cst.While) -> None:
        self.loop -= 1

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._targets(node.asname.name, "as")

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._targets(node.name.name, "as")

    def visit_ExceptStarHandler(self, node: cst.ExceptStarHandler) -> None:
        if node.name is not None:
            self._targets(node.name.name, "as")

    def visit_Del(self, node: cst.Del) -> None:
        self._targets(node.target, "del")

    def visit_Global(self, node: cst.Global) -> None:
        for n in node.names:
            self.bound(n.name, "global", None)

    visit_Nonlocal = visit_Global  # type: ignore[assignment]

    def visit_Import(self, node: cst.Import) -> bool:
        if self.imports:
            for a in node.names:
                if a.asname is not None and isinstance(a.asname.name, cst.Name):
                    self.imported = _text(a.name)
                    self.bound(a.asname.name, "import", None)
                else:
                    self.imported = _head(a.name)
                    self.bound(cst.Name(self.imported), "import", None)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if self.imports and not isinstance(node.names, cst.ImportStar):
            module = "." * len(node.relative) + _text(node.module)
            for a in node.names:
                self.imported = f"{module}.{_text(a.name)}"
                if a.asname is not None and isinstance(a.asname.name, cst.Name):
                    self.bound(a.asname.name, "import", None)
                elif isinstance(a.name, cst.Name):
                    self.bound(a.name, "import", None)
        return False


def target_name(target: cst.BaseExpression) -> str | None:
    """The name a binding binds, when its target is a plain name."""
    return target.value if isinstance(target, cst.Name) else None
