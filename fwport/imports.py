"""Import fixing, applied once at the end: drop source-framework imports no longer used, add the
target imports the emitted code needs (where the first source import stood)."""
from __future__ import annotations

import libcst as cst

from fwport.context import IMPORT_ORDER
from fwport.names import collect_imports, is_source_name


class _UsedNames(cst.CSTVisitor):
    def __init__(self) -> None:
        self.used: set[str] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.used.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # the attribute name itself is not a reference
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # keyword names are not references
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        if node.annotation:
            node.annotation.visit(self)
        if node.default:
            node.default.visit(self)
        return False


def used_names(module: cst.Module) -> set[str]:
    v = _UsedNames()
    module.visit(v)
    return v.used


def _module_text(node: cst.BaseExpression | None) -> str:
    return cst.Module([]).code_for_node(node) if node is not None else ""


def _prune(stmt: cst.BaseSmallStatement, used: set[str]) -> cst.BaseSmallStatement | None:
    """The import statement without its unused source-framework names (None: drop it)."""
    if isinstance(stmt, cst.Import):
        keep = []
        for a in stmt.names:
            full = _module_text(a.name)
            local = a.asname.name.value if a.asname else full.split(".")[0]  # type: ignore[union-attr]
            if is_source_name(full) and local not in used:
                continue
            keep.append(a)
        if len(keep) == len(stmt.names):
            return stmt
        return stmt.with_changes(names=_fix_commas(keep)) if keep else None
    if isinstance(stmt, cst.ImportFrom) and not stmt.relative and not isinstance(stmt.names, cst.ImportStar):
        if not is_source_name(_module_text(stmt.module)):
            return stmt
        keep = []
        for a in stmt.names:
            local = a.asname.name.value if a.asname else _module_text(a.name)  # type: ignore[union-attr]
            if local in used:
                keep.append(a)
        if len(keep) == len(stmt.names):
            return stmt
        if not keep:
            return None
        return stmt.with_changes(names=_fix_commas(keep), lpar=stmt.lpar if len(keep) > 1 else None,
                                 rpar=stmt.rpar if len(keep) > 1 else None)
    return stmt


def _fix_commas(names: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    out = list(names)
    out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def _existing_imports(module: cst.Module) -> set[str]:
    have = set()
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, (cst.Import, cst.ImportFrom)):
                    have.add(cst.Module([]).code_for_node(s).strip())
    return have


class _Pruner(cst.CSTTransformer):
    def __init__(self, used: set[str]):
        self.used = used

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in updated_node.body):
            return updated_node
        body = []
        for s in updated_node.body:
            p = _prune(s, self.used) if isinstance(s, (cst.Import, cst.ImportFrom)) else s
            if p is not None:
                body.append(p)
        if not body:
            if updated_node.leading_lines and any(l.comment for l in updated_node.leading_lines):
                return cst.RemovalSentinel.REMOVE  # comments above a removed import go with it
            return cst.RemovalSentinel.REMOVE
        if len(body) != len(updated_node.body):
            body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(body=body)


class _FillEmptyBlocks(cst.CSTTransformer):
    """A block whose only statement was a removed import gets ``pass`` (e.g. ``try: import tf``)."""

    def leave_IndentedBlock(self, original_node, updated_node):
        if not updated_node.body:
            return updated_node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated_node


def _is_source_import_line(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, cst.Import) and any(is_source_name(_module_text(a.name)) for a in s.names):
            return True
        if isinstance(s, cst.ImportFrom) and not s.relative and is_source_name(_module_text(s.module)):
            return True
    return False


def _insert_index(module: cst.Module) -> int:
    for i, stmt in enumerate(module.body):
        if _is_source_import_line(stmt):
            return i
    i = 0
    body = module.body
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        i = 1
    while i < len(body) and isinstance(body[i], cst.SimpleStatementLine) and \
            isinstance(body[i].body[0], cst.ImportFrom) and _module_text(body[i].body[0].module) == "__future__":
        i += 1
    return i


def fix_imports(module: cst.Module, needed: set[str]) -> cst.Module:
    have = _existing_imports(module)
    add = [imp for imp in IMPORT_ORDER if imp in needed and imp not in have]
    add += sorted(imp for imp in needed if imp not in IMPORT_ORDER and imp not in have)
    if add:
        idx = _insert_index(module)
        new = [cst.parse_statement(imp + "\n") for imp in add]
        if idx < len(module.body):
            # keep the comments/blank lines that preceded the statement we insert before
            first = module.body[idx]
            new[0] = new[0].with_changes(leading_lines=first.leading_lines)
            rest = list(module.body)
            rest[idx] = first.with_changes(leading_lines=[])
            module = module.with_changes(body=rest[:idx] + new + rest[idx:])
        else:
            module = module.with_changes(body=list(module.body) + new)
    used = used_names(module)
    if collect_imports(module).source_aliases() - used:
        module = module.visit(_Pruner(used)).visit(_FillEmptyBlocks())
    return module
