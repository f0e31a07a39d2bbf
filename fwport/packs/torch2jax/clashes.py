"""Names the translation writes that the file itself binds: ``np = 3`` (a count of points), ``import numpy as
jnp``. The output reads ``jnp.``, ``jax.``, ``eqx.``, ``optax.`` and (in the helpers written into the file)
``np.`` as module globals, so a module-level binding of one of them by anything but that module's own import
would make the translated code read the file's value.

- numpy, which only the helpers written into the file spell (data.py, vision.py): spelled through a name the
  file does not bind: the file's own ``import numpy as onp`` where it has one, else ``numpy``, else ``np_``...;
- the others, which every rule writes: an error finding at the file's binding (rename it in the source).

The bindings are read from the source with stdlib ``ast``: module-level statements (and their blocks: ifs,
loops, with, try) and names a function declares ``global``; a function's local names do not reach the
helpers, which are module-level."""
from __future__ import annotations

import ast
import re

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.engine import comment_text
from fwport.core.finding import Finding, Severity
from fwport.core.names import scan

KEY = "torch2jax.module-bindings"  # ctx.analyses: name → [(line, column, the module an import binds or None)]


def _imported(alias: ast.alias, module: str | None) -> tuple[str, str]:
    """(the name an import binds, the module or object it binds to it)."""
    if module is None:  # import a.b.c [as x]
        return (alias.asname, alias.name) if alias.asname else (alias.name.split(".")[0], alias.name.split(".")[0])
    return alias.asname or alias.name, f"{module}.{alias.name}"


class _Module(ast.NodeVisitor):
    def __init__(self) -> None:
        self.bound: dict[str, list[tuple[int, int, str | None]]] = {}

    def _add(self, name: str, node: ast.AST, module: str | None = None) -> None:
        self.bound.setdefault(name, []).append((node.lineno, node.col_offset + 1, module))

    def _targets(self, t: ast.AST) -> None:
        if isinstance(t, ast.Name):
            self._add(t.id, t)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._targets(e)
        elif isinstance(t, ast.Starred):
            self._targets(t.value)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            name, full = _imported(a, None)
            self._add(name, node, full)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            if a.name != "*":
                name, full = _imported(a, ("." * node.level) + (node.module or ""))
                self._add(name, node, full)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._targets(t)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._targets(node.target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets(node.target)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._targets(node.target)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._targets(node.target)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._targets(node.optional_vars)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._add(node.name, node)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._add(node.name, node)
        for g in ast.walk(node):  # its body is a scope of its own, but `global x` binds the module's x
            if isinstance(g, ast.Global):
                for n in g.names:
                    self._add(n, g)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._add(node.name, node)  # (its body binds class attributes, not globals; its methods may say global)
        for g in ast.walk(node):
            if isinstance(g, ast.Global):
                for n in g.names:
                    self._add(n, g)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return None

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.generic_visit(node)  # (its target is the comprehension's own, left out; a := inside binds the module's)


def module_bindings(ctx) -> dict[str, list[tuple[int, int, str | None]]]:
    """Every module-level binding of the source, by name (computed once per file)."""
    found = ctx.analyses.get(KEY)
    if found is None:
        parsed = ctx.analyses.get("parsed")
        walker = _Module()
        try:
            walker.visit(ast.parse(parsed[1]))
        except (SyntaxError, TypeError, ValueError):
            pass
        found = ctx.analyses[KEY] = walker.bound
    return found


def _others(bindings, short: str, module: str) -> list[tuple[int, int, str | None]]:
    """The bindings of ``short`` other than an import of ``module`` itself."""
    return [b for b in bindings.get(short, ()) if b[2] != module]


def numpy_name(ctx) -> str:
    """The name the helpers spell numpy with (its import recorded): ``np`` unless the file binds np otherwise."""
    bindings = module_bindings(ctx)
    if not _others(bindings, "np", "numpy"):
        ctx.needed_imports.add("import numpy as np")
        return "np"
    own = [n for n, bs in bindings.items() if n != "np" and bs and all(b[2] == "numpy" for b in bs)]
    if own:  # the file's own alias of numpy, bound by nothing else (`import numpy as onp`): already imported
        return sorted(own)[0]
    for name in ("numpy", "np_", "numpy_", "_np"):
        if name not in bindings:
            ctx.needed_imports.add("import numpy" if name == "numpy" else f"import numpy as {name}")
            return name
    n = 2
    while f"np{n}" in bindings:
        n += 1
    ctx.needed_imports.add(f"import numpy as np{n}")
    return f"np{n}"


class _Binds(BindingWalker):
    def __init__(self, names: set[str]) -> None:
        super().__init__(lambdas=False, imports=False)
        self.names, self.found = names, set()

    def bound(self, target, how, value) -> None:
        if isinstance(target, cst.Name) and target.value in self.names:
            self.found.add(target.value)


def finish(module, ctx):
    """An error for each target name the output reads that a module-level binding of the file takes, and its
    ``# fwport:`` comment above the output's top-level statement that binds it (an import: the import fixer's
    lines stand above; the comment goes on the statement where the file binds it otherwise)."""
    imports = ctx.needed_imports
    if not imports:
        return module
    bindings = None
    said: dict[str, Finding] = {}
    source = ctx.analyses["parsed"][1] if "parsed" in ctx.analyses else ""
    for sp in ctx.direction.spellings:
        if sp.import_line not in imports:
            continue
        short = sp.short.rstrip(".")
        target = sp.prefix.rstrip(".")
        if not re.search(rf"\b{short}\b", source):
            continue  # (the source never writes the name: the common case, without a parse)
        if bindings is None:
            bindings = module_bindings(ctx)
        if short not in bindings:
            continue
        for line, col, what in _others(bindings, short, target):
            bound = f"imports {what} as `{short}`" if what else f"binds `{short}`"
            # (a finding of the whole file's finishing step: placed by its line, as x64.py's)
            f = Finding(Severity.ERROR, "unsupported-construct",
                        f"this file {bound}, the name the translation reads {target} by ({sp.import_line}): the "
                        f"translated code would read the file's `{short}`; rename it in the source and translate again",
                        ctx.path, line, col)
            ctx.findings.append(f)
            said.setdefault(short, f)
    if not said:
        return module
    body = list(module.body)
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom))
                                                             for s in stmt.body):
            continue  # (an import of another module under the name: the comment goes with its first other binding)
        walker = _Binds(set(said))
        scan(stmt, walker)
        for name in sorted(walker.found):
            text = comment_text(said.pop(name))
            if not any(ln.comment is not None and ln.comment.value == text for ln in stmt.leading_lines):
                stmt = stmt.with_changes(leading_lines=[*stmt.leading_lines, cst.EmptyLine(comment=cst.Comment(text))])
        body[i] = stmt
    return module.with_changes(body=body)
