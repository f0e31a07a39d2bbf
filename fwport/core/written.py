"""The names of the definitions a translation writes into its output (the packs' helpers: torch2jax's ``PReLU``,
``Upsample``, ``NumpyLoader``; tf2torch's ``SamePad2d``, ``Rescaling``, ``load_img``) against the names the file
itself binds.

A file may define, import or assign a name a helper has (``class PReLU(nn.Module)`` of its own beside
``nn.PReLU()``, ``from mylib import Upsample``, ``def load_img(...)``): written under that name, the helper and the
file's object would be one name, and one of them would silently stand for both. So a helper is written under a
name the file binds nowhere: its own where the file does not bind it, else its name with ``_`` after it (then
``_2``, ``_3``, ...), chosen the same on every run. The file's names are never changed (other code imports them).

- :func:`name` — the name a helper is called and written under in this file (a transform asks it when it writes
  the call, through its pack's ``use``);
- :func:`renamed` — the helpers written under another name than their own (the finishing step that writes the
  definitions renames them, and every helper's reference to another, with :func:`rename`);
- :func:`clash` — whether the file binds a name (for a definition written without asking :func:`name`).

What counts as the file binding a name: any binding at any scope (module, class, function: a local or a parameter
shadows the helper where the call is written), an import from anything but the source framework (an import of the
source framework's object of that name is the object the helper stands for, and the import fixer removes it), and,
in a file with ``from module import *`` of another package, every name the file reads (that import may bind it).
The walk runs only for a file whose source text holds the helper's name as a word, once per file."""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.names import find_all, scan
from fwport.core.rewrite import rewrite

_NAMES = "written.names"  # ctx.analyses: helper → the name it is written under (every helper asked)
_BOUND = "written.bound"  # ctx.analyses: the names the source binds (the walk's answer)


class _Bound(BindingWalker):
    """Every name the source binds, at any scope, but by an import of the source framework."""

    def __init__(self, is_source) -> None:
        super().__init__(lambdas=True)
        self.is_source = is_source
        self.names: set[str] = set()
        self.first: dict[str, cst.CSTNode] = {}  # a module-level name → the node of its first binding there
        self.star: cst.CSTNode | None = None
        self.depth = 0  # the functions, classes and lambdas around the walk

    def add(self, name: str, node: cst.CSTNode) -> None:
        self.names.add(name)
        if not self.depth:
            self.first.setdefault(name, node)

    def enter_scope(self, node) -> bool:
        self.depth += 1
        return True

    def leave_FunctionDef(self, original_node) -> None:
        self.depth -= 1

    leave_ClassDef = leave_Lambda = leave_FunctionDef  # type: ignore[assignment]

    def bound(self, target, how, value) -> None:
        if not isinstance(target, cst.Name):
            return
        if how == "import" and not self.imported.startswith(".") and self.is_source(self.imported):
            return
        self.add(target.value, target)

    def visit_Param(self, node: cst.Param) -> None:
        self.add(node.name.value, node.name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if isinstance(node.names, cst.ImportStar):
            module = "." * len(node.relative) + (_dotted(node.module) if node.module is not None else "")
            if node.relative or not self.is_source(module):
                self.star = self.star or node
            return False
        return super().visit_ImportFrom(node)


def _dotted(node: cst.BaseExpression) -> str:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
    return ".".join(reversed(parts))


def _source(ctx) -> tuple[cst.Module | None, str]:
    parsed = ctx.analyses.get("parsed")
    return (parsed[0], parsed[1]) if parsed is not None else (None, "")


def _walk(ctx) -> _Bound:
    found = ctx.analyses.get(_BOUND)
    if found is None:
        tree, _ = _source(ctx)
        found = ctx.analyses[_BOUND] = _Bound(ctx.imports.is_source)
        if tree is not None:
            scan(tree, found)
            if found.star is not None:  # `from mylib import *`: any name the file reads may be that module's
                for n in find_all(tree, cst.Name):
                    found.add(n.value, found.star)
    return found


def _bound(ctx) -> set[str]:
    return _walk(ctx).names


def clash(ctx, name: str) -> bool:
    """Whether the file binds ``name`` (see the module docstring)."""
    _, source = _source(ctx)
    # (each pattern starts with its literal word, which re looks for in C: `(?<![\w.])name\b` and `\bimport\s*\*`,
    # the same matches, are tried at every position of the text)
    word = re.escape(name)
    if not re.search(rf"{word}(?<![\w.]{word})\b", source) and not re.search(r"import(?<=\bimport)\s*\*", source):
        return False  # (the common case: the source never writes the name, and nothing imports *)
    return name in _bound(ctx)


def module_names(ctx) -> set[str]:
    """The names the file binds at module level (by anything but an import of the source framework): a step that
    names its definitions itself (the fit functions of a compile) keeps clear of them."""
    return set(_walk(ctx).first)


def name(ctx, helper: str) -> str:
    """The name helper ``helper`` is written under in this file: its own, unless the file binds it; then
    ``helper_``, ``helper_2``, ... (the first the file binds nowhere and no other helper took)."""
    names = ctx.analyses.setdefault(_NAMES, {})
    chosen = names.get(helper)
    if chosen is None:
        chosen = helper
        if clash(ctx, helper):
            taken = set(names.values()) | set(names)
            candidates = (f"{helper}_", *(f"{helper}_{i}" for i in range(2, 1000)))
            chosen = next(c for c in candidates if c not in taken and not clash(ctx, c))
        names[helper] = chosen
    return chosen


def renamed(ctx) -> dict[str, str]:
    """The helpers asked in this file that are written under another name: helper → that name."""
    return {k: v for k, v in ctx.analyses.get(_NAMES, {}).items() if k != v}


def back(ctx) -> dict[str, str]:
    """The written name → the helper, for the helpers written under another name."""
    return {v: k for k, v in renamed(ctx).items()}


class _Rename(cst.CSTTransformer):
    def __init__(self, mapping: dict[str, str]) -> None:
        super().__init__()
        self.mapping = mapping

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.mapping.get(updated_node.value)
        return updated_node if new is None else updated_node.with_changes(value=new)

    # an attribute's name, a keyword and what an import names are not the helper's name
    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node if updated_node.attr is original_node.attr else updated_node.with_changes(
            attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node if updated_node.keyword is original_node.keyword else updated_node.with_changes(
            keyword=original_node.keyword)

    def leave_ImportAlias(self, original_node: cst.ImportAlias, updated_node: cst.ImportAlias) -> cst.ImportAlias:
        return original_node


def rename(statements, mapping: dict[str, str]) -> list[cst.BaseStatement]:
    """The helpers' ``statements`` with every helper of ``mapping`` called by its written name (its definition and
    the other helpers' references to it). Statements without one of those names are returned as they are."""
    if not mapping:
        return list(statements)
    out = []
    for st in statements:
        if any(n.value in mapping for n in find_all(st, cst.Name)):
            st = rewrite(st, _Rename(mapping), fresh=True)
        out.append(st)
    return out


def defined(statements) -> list[tuple[str, cst.CSTNode]]:
    """The names the top-level ``statements`` define (classes, functions, assignments) with their nodes."""
    out = []
    for st in statements:
        if isinstance(st, (cst.ClassDef, cst.FunctionDef)):
            out.append((st.name.value, st))
        elif isinstance(st, cst.SimpleStatementLine):
            for s in st.body:
                if isinstance(s, (cst.Assign,)):
                    out += [(t.target.value, st) for t in s.targets if isinstance(t.target, cst.Name)]
                elif isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name):
                    out.append((s.target.value, st))
    return out


def check(ctx, statements) -> list[cst.BaseStatement]:
    """``statements`` (definitions a finishing step writes into the output), each that defines a name the file
    binds at module level (an import of another package, a definition, an assignment) with an error finding at the file's binding and its ``# fwport:`` comment above the definition: a
    definition written without asking :func:`name` (a pack's step that names its definitions itself) must
    not take the file's name silently."""
    from fwport.core.engine import comment_text
    from fwport.core.finding import Finding, Severity
    from fwport.core.position import node_positions

    out = list(statements)
    for i, st in enumerate(out):
        for n, _ in defined([st]):
            if not clash(ctx, n) or n not in _walk(ctx).first:
                continue  # (a parameter or local of a function: the written definition is module-level, where
                # the file's calls of it stand)
            tree, _ = _source(ctx)
            node = _walk(ctx).first[n]
            line, col = node_positions(tree, [node], ctx.analyses.get("layout")).get(id(node), (0, 0)) \
                if tree is not None and node is not None else (0, 0)
            f = Finding(Severity.ERROR, "unsupported-construct",
                        f"the translation writes a definition of `{n}` into this file, the name the file binds here: "
                        f"one of the two would stand for both; rename the file's `{n}` and translate again",
                        ctx.path, line, col)
            ctx.findings.append(f)
            out[i] = st = st.with_changes(leading_lines=[*st.leading_lines,
                                                         cst.EmptyLine(comment=cst.Comment(comment_text(f)))])
    return out
