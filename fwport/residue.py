"""The residue scan: every reference to the source framework still in the output is a finding."""
from __future__ import annotations

import libcst as cst

from fwport.context import FileContext
from fwport.finding import Severity
from fwport.names import ScopedResolver, dotted_text, is_source_name


class ResidueScanner(ScopedResolver, cst.CSTVisitor):
    def __init__(self, ctx: FileContext):
        super().__init__()
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.found: list[tuple[cst.CSTNode, str]] = []

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def _check(self, node: cst.BaseExpression) -> bool:
        q = self.qualname(node)
        if q is not None and is_source_name(q):
            self.found.append((node, dotted_text(node) or q))
            return False  # report the longest chain once
        return True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if self._check(node):
            node.value.visit(self)  # the attribute name (nn.Dropout's Dropout) is no reference
        return False

    def visit_Name(self, node: cst.Name) -> bool:
        return self._check(node)

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        for part in (node.annotation, node.default):
            if part is not None:
                part.visit(self)
        return False


def scan_residue(module: cst.Module, ctx: FileContext) -> None:
    """Report remaining source-framework references (as pending findings on ``module``)."""
    v = ResidueScanner(ctx)
    module.visit(v)
    for node, text in v.found:
        ctx.report(Severity.ERROR, "residue", f"still references the source framework: {text}", node)
