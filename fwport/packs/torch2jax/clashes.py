"""Names the translation writes that the file itself binds: ``np = 3`` (a count of points), ``import numpy as
jnp``. The output reads ``jnp.``, ``jax.``, ``eqx.``, ``optax.`` and (in the helpers written into the file)
``np.`` as module globals, so a module-level binding of one of them by anything but that module's own import
would make the translated code read the file's value.

- numpy, which only the helpers written into the file spell (data.py, vision.py): spelled through a name the
  file does not bind: the file's own ``import numpy as onp`` where it has one, else ``numpy``, else ``np_``...;
- the others, which every rule writes: an error finding at the file's binding (rename it in the source).

The bindings are read from the parsed source by the shared binding walker (fwport/core/bindings.py): module-level
statements (and their blocks: ifs, loops, with, try) and names a function declares ``global``; a function's
local names do not reach the helpers, which are module-level."""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.engine import comment_text
from fwport.core.finding import Finding, Severity
from fwport.core.names import scan
from fwport.core.position import node_positions

KEY = "torch2jax.module-bindings"  # ctx.analyses: name → [(line, column, the module an import binds or None)]


class _Module(BindingWalker):
    """The module-level bindings (the shared walker's: statements at the top and in their blocks), and the names a
    function or class body declares ``global`` (their bodies walked only for that, where the source says
    ``global``); each binding's node, where a finding would stand, and the module an import binds."""

    def __init__(self, globals_: bool) -> None:
        super().__init__(lambdas=False)
        self.globals, self.depth, self.at = globals_, 0, None
        self.bound_nodes: list[tuple[str, cst.CSTNode, str | None]] = []

    def enter_scope(self, node) -> bool:
        if isinstance(node, cst.Lambda) or not self.globals:
            return False
        self.depth += 1  # (left in leave_FunctionDef / leave_ClassDef)
        return True

    def leave_FunctionDef(self, original_node) -> None:
        self.depth -= self.globals

    leave_ClassDef = leave_FunctionDef  # type: ignore[assignment]

    def visit_Import(self, node) -> bool:
        self.at = node
        return super().visit_Import(node)

    def visit_ImportFrom(self, node) -> bool:
        self.at = node
        return super().visit_ImportFrom(node)

    def bound(self, target, how, value) -> None:
        if not isinstance(target, cst.Name) or how == "del" or (self.depth and how != "global"):
            return  # (a depth counts the enclosing function or class, entered by enter_scope)
        if how == "import":
            self.bound_nodes.append((target.value, self.at, self.imported))
        else:
            self.bound_nodes.append((target.value, target, None))


def module_bindings(ctx) -> dict[str, list[tuple[int, int, str | None]]]:
    """Every module-level binding of the source, by name (computed once per file)."""
    found = ctx.analyses.get(KEY)
    if found is None:
        found = ctx.analyses[KEY] = {}
        parsed = ctx.analyses.get("parsed")
        if parsed is None:
            return found
        tree, source = parsed
        walker = _Module(globals_=re.search(r"\bglobal\b", source) is not None)
        scan(tree, walker)
        # (the translation's Layout: the source's statements are rendered once, for the findings' positions too)
        where = node_positions(tree, [n for _, n, _ in walker.bound_nodes], ctx.analyses.get("layout"))
        for name, node, module in walker.bound_nodes:
            line, col = where.get(id(node), (0, 0))
            found.setdefault(name, []).append((line, col, module))
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
