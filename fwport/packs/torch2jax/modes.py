"""A module's train / eval mode read inside it (``if self.training:``, ``p if self.training else 0.``) → the flag
an Equinox module keeps for it: a field ``inference`` (False when built: PyTorch builds modules in training mode),
read as ``not self.inference``. ``eqx.nn.inference_mode(model, value)``, what ``model.eval()`` / ``model.train()``
become, sets every ``inference`` field of the model's tree, eqx.nn.Dropout's and BatchNorm's and this one alike, so
the module follows its mode as in PyTorch.

A rewriting planner, before the modules pass (which declares the field from ``self.inference = False`` in
``__init__``: a leaf, not static, or inference_mode could not set it). Left alone: ``p if self.training else 0``
given to F.scaled_dot_product_attention (its dropout_p: the attention rule follows the module's dropout,
ops.training_dropout). An error: a read in ``__init__`` (where PyTorch's is always True), in a class with no
``__init__`` of its own, or in one assigning self.training."""
from __future__ import annotations

import libcst as cst

from fwport.core.direction import fast
from fwport.core.finding import Severity
from fwport.core.names import dotted_text
from fwport.core.rewrite import rewrite

TRIGGER = fast(r"\bself\.training\b")
FIELD = "inference"
#: parents under which ``not self.inference`` needs no parentheses (it binds looser than comparisons and arithmetic)
_LOOSE = (cst.If, cst.While, cst.IfExp, cst.BooleanOperation, cst.Arg, cst.Assign, cst.Return, cst.Element,
          cst.AnnAssign, cst.Assert, cst.UnaryOperation)


def _is_training(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and dotted_text(node) == "self.training"


class _Modes(cst.CSTTransformer):
    def __init__(self, ctx, classes: set[str]):
        super().__init__()
        self.ctx = ctx
        self.classes = classes  # the file's nn.Module subclasses
        self.module: list[bool] = []  # per class entered: one of them
        self.stack: list[cst.CSTNode] = []
        self.method: str | None = None
        self.depth = 0  # classes entered (a nested class is its own)
        self.read: list[bool] = []  # per class: a method other than __init__ read self.training
        self.changed = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        return super().on_visit(node)

    def on_leave(self, original, updated):
        self.stack.pop()
        return super().on_leave(original, updated)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.read.append(False)
        self.module.append(node.name.value in self.classes)

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        read = self.read.pop()
        self.module.pop()
        if not read:
            return updated
        body = list(updated.body.body)
        i = next((i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if i is None:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"class {original.name.value} reads self.training "
                            "but has no __init__ of its own to give it the field an Equinox module keeps its mode in: "
                            f"add `self.{FIELD} = False` to an __init__ and read `not self.{FIELD}`", original)
            return updated
        init = body[i]
        line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Attribute(cst.Name("self"), cst.Name(FIELD)))],
                                                   cst.Name("False"))])
        body[i] = init.with_changes(body=init.body.with_changes(body=[*init.body.body, line]))
        self.ctx.report(Severity.INFO, "idiom-replaced", f"class {original.name.value}: self.training → not "
                        f"self.{FIELD}, a field eqx.nn.inference_mode sets (model.eval() / model.train())", original)
        self.changed = True
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.read and isinstance(self.stack[-2] if len(self.stack) > 1 else None, cst.IndentedBlock) \
                and len(self.stack) > 2 and isinstance(self.stack[-3], cst.ClassDef):
            self.method = node.name.value

    def leave_FunctionDef(self, original, updated):
        if len(self.stack) > 1 and isinstance(self.stack[-1], cst.IndentedBlock) and len(self.stack) > 1 \
                and isinstance(self.stack[-2], cst.ClassDef):
            self.method = None
        return updated

    def leave_UnaryOperation(self, original: cst.UnaryOperation, updated: cst.UnaryOperation) -> cst.BaseExpression:
        # `not self.training` → `self.inference` (rather than `not not self.inference`)
        if isinstance(original.operator, cst.Not) and _is_training(original.expression) and self.rewritable(original):
            self.read[-1] = True
            return cst.Attribute(cst.Name("self"), cst.Name(FIELD), lpar=updated.lpar, rpar=updated.rpar)
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if not _is_training(original) or not self.read:
            return updated
        parent = self.stack[-1] if self.stack else None
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            return updated  # its parent rewrites the pair
        if isinstance(parent, cst.AssignTarget) or not self.rewritable(original):
            return updated
        self.read[-1] = True
        lpar, rpar = ([cst.LeftParen()], [cst.RightParen()]) if not isinstance(parent, _LOOSE) else ((), ())
        if original.lpar:
            lpar, rpar = original.lpar, original.rpar
        return cst.UnaryOperation(cst.Not(), cst.Attribute(cst.Name("self"), cst.Name(FIELD)), lpar=lpar, rpar=rpar)

    def rewritable(self, node: cst.CSTNode) -> bool:
        """A read of self.training this pass rewrites: in a method other than __init__ of a module class, and not
        the test of `p if self.training else 0` given as dropout_p (the attention rule's)."""
        if not self.read or not self.module[-1] or self.method is None:
            return False
        if self.method == "__init__":
            self.ctx.report(Severity.ERROR, "unsupported-construct", "self.training in __init__ is always True in "
                            "PyTorch (modules are built in training mode): write True", node)
            return False
        s = self.stack
        if len(s) > 2 and isinstance(s[-1], cst.IfExp) and s[-1].test is node and isinstance(s[-2], cst.Arg) \
                and isinstance(s[-3], cst.Call) \
                and (dotted_text(s[-3].func) or "").endswith("scaled_dot_product_attention"):
            return False  # dropout_p (by keyword or position): the attention rule's
        return True


def module_classes(module: cst.Module, ctx) -> set[str]:
    """The file's top-level classes deriving from torch.nn.Module, directly or through another of them."""
    out: set[str] = set()
    classes = [c for c in module.body if isinstance(c, cst.ClassDef)]
    grew = True
    while grew:
        grew = False
        for c in classes:
            if c.name.value not in out and any(
                    ctx.imports.resolve(b.value) == "torch.nn.Module"
                    or isinstance(b.value, cst.Name) and b.value.value in out for b in c.bases):
                out.add(c.name.value)
                grew = True
    return out


class _Assigned(cst.CSTVisitor):
    """Whether a module class assigns self.training itself (its own attribute then, not the mode)."""

    def __init__(self):
        super().__init__()
        self.found = False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.found = self.found or _is_training(node.target)


def plan(module: cst.Module, ctx) -> cst.Module:
    """Rewrite each module class's reads of self.training (see the module docstring)."""
    classes = module_classes(module, ctx)
    for c in module.body:
        if isinstance(c, cst.ClassDef) and c.name.value in classes:
            v = _Assigned()
            c.visit(v)
            if v.found:
                classes.discard(c.name.value)
                ctx.report(Severity.ERROR, "unsupported-construct", f"class {c.name.value} assigns self.training, "
                           "which PyTorch's train() / eval() set: in Equinox the mode is the `inference` field "
                           "eqx.nn.inference_mode sets; rewrite the mode changes with it", c)
    if not classes:
        return module
    t = _Modes(ctx, classes)
    out = rewrite(module, t)
    return out if t.changed else module
