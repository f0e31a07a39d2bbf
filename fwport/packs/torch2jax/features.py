"""Feature tests of PyTorch → what the translation has (a read-only planner; the rule pass applies the edits).

A file written for several PyTorch versions asks whether a function exists before it uses it:
``self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')`` (nanoGPT). In the
translation the question is whether the translation of that name exists: where a rule of this direction
translates ``torch.nn.functional.scaled_dot_product_attention``, the test is ``True`` (an info finding
says so), and the branch that uses it is the one that runs. A name no rule translates is left to the
residue scan, so the reader decides.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.names import dotted_text
from fwport.core.finding import Severity


def plan(module: cst.Module, ctx) -> cst.Module:
    """Record ``True`` for each ``hasattr(<a torch module>, '<name>')`` whose ``module.name`` a rule translates."""

    class Tests(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if not (isinstance(node.func, cst.Name) and node.func.value == "hasattr" and len(node.args) == 2
                    and all(a.keyword is None and not a.star for a in node.args)):
                return
            target, attr = node.args[0].value, node.args[1].value
            if not isinstance(attr, cst.SimpleString) or dotted_text(target) is None or ctx.plans.get(node) is not None:
                return
            q = ctx.imports.resolve(target)
            name = attr.evaluated_value
            if not q or not isinstance(name, str) or ctx.pack.by_name.get(f"{q}.{name}") is None:
                return

            def apply(original: cst.Call, updated: cst.Call, q=f"{q}.{name}") -> cst.BaseExpression:
                ctx.report(Severity.INFO, "idiom-replaced", f"hasattr(..., {name!r}) → True: a PyTorch feature "
                           f"test; {q} has a translation (its rule's), so the branch using it is the one kept",
                           original)
                return cst.Name("True")

            ctx.plans.add(node, apply, descend=False, by="feature-tests")

    module.visit(Tests())
    return module
