"""Feature tests of PyTorch → what the translation has (a read-only planner; the rule pass applies the edits).

``'fused' in inspect.signature(torch.optim.AdamW).parameters`` (nanoGPT) asks whether an argument is taken: it is
``True`` where the rule maps that argument, ``False`` where the rule drops it (a speed option) or lacks it.

A file written for several PyTorch versions asks whether a function exists before it uses it:
``self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')`` (nanoGPT). In the
translation the question is whether the translation of that name exists: where a rule of this direction
translates ``torch.nn.functional.scaled_dot_product_attention``, the test is ``True`` (an info finding
says so), and the branch that uses it is the one that runs. A name no rule translates is left to the
residue scan, so the reader decides.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.names import dotted_text, scan
from fwport.core.finding import Severity


class _FeatureTests(cst.CSTVisitor):
    """plan: the feature tests (``hasattr(<torch module>, name)``, ``'x' in inspect.signature(f).parameters``) a rule
    answers → their answer."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Name) and node.func.value == "hasattr" and len(node.args) == 2
                and all(a.keyword is None and not a.star for a in node.args)):
            return
        target, attr = node.args[0].value, node.args[1].value
        if not isinstance(attr, cst.SimpleString) or dotted_text(target) is None or self.ctx.plans.get(node) is not None:
            return
        q = self.ctx.imports.resolve(target)
        name = attr.evaluated_value
        if not q or not isinstance(name, str) or self.ctx.pack.by_name.get(f"{q}.{name}") is None:
            return

        def apply(original: cst.Call, updated: cst.Call, q=f"{q}.{name}") -> cst.BaseExpression:
            self.ctx.report(Severity.INFO, "idiom-replaced", f"hasattr(..., {name!r}) → True: a PyTorch feature "
                            f"test; {q} has a translation (its rule's), so the branch using it is the one kept",
                            original)
            return cst.Name("True")

        self.ctx.plans.add(node, apply, descend=False, by="feature-tests")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # 'fused' in inspect.signature(torch.optim.AdamW).parameters: does the translation take that argument?
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, cst.In) \
                or not isinstance(node.left, cst.SimpleString) or self.ctx.plans.get(node) is not None:
            return
        params = node.comparisons[0].comparator
        if not (isinstance(params, cst.Attribute) and params.attr.value == "parameters"
                and isinstance(params.value, cst.Call) and dotted_text(params.value.func) == "inspect.signature"
                and len(params.value.args) == 1):
            return
        q = self.ctx.imports.resolve(params.value.args[0].value)
        rule = self.ctx.pack.by_name.get(q) if q else None
        name = node.left.evaluated_value
        if rule is None or not isinstance(name, str):
            return
        spec = rule.args.get(name)
        taken = spec is not None and spec.verb not in ("drop", "unsupported")

        def apply(original: cst.Comparison, updated: cst.Comparison, q=q, taken=taken) -> cst.BaseExpression:
            why = "its rule maps that argument" if taken else (
                f"its rule drops it ({spec.value})" if spec is not None and spec.verb == "drop"
                else "its rule does not take it")
            self.ctx.report(Severity.INFO, "idiom-replaced", f"{name!r} in inspect.signature({q}).parameters → "
                            f"{taken}: a PyTorch feature test; {why}", original)
            return cst.Name(str(taken))

        self.ctx.plans.add(node, apply, descend=False, by="feature-tests")


def plan(module: cst.Module, ctx) -> cst.Module:
    """Record ``True`` for each ``hasattr(<a torch module>, '<name>')`` whose ``module.name`` a rule translates."""
    scan(module, _FeatureTests(ctx))
    return module
