"""PyTorch's types where a program names them rather than calls them (a read-only planner; the rule pass applies
the edits):

- a ``torch.utils.data.Dataset`` base class is dropped: the class's ``__len__`` and ``__getitem__`` are what
  NumpyLoader (data.py) reads, example by example, and PyTorch's base adds nothing else a loop uses (its
  ``__add__`` builds a ConcatDataset, which has no rule: such a use stays an error);
- ``torch.nn.Module`` in an annotation (``def train(model: nn.Module)``, ``Module | None``) → ``eqx.Module``, the
  base of every translated module; ``torch.optim.Optimizer`` → ``optax.GradientTransformation``, ``DataLoader`` →
  ``typing.Iterable``, ``Dataset`` → ``typing.Any`` (ANNOTATIONS). Elsewhere (a base the modules pass did not translate, ``isinstance``) it stays, and is
  reported by the residue scan."""
from __future__ import annotations

import libcst as cst

from fwport.core.finding import Severity
from fwport.core.names import scan

DATASET = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})
MODULE = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
#: PyTorch types in annotations → what the translation's values are: a module → eqx.Module, an optimizer → optax's
#: GradientTransformation, a loader → an iterable of batches (NumpyLoader, or a generator), a dataset → any object
#: with __len__ / __getitem__ (the translated datasets have no common base)
ANNOTATIONS = {**{m: "equinox.Module" for m in MODULE},
               "torch.optim.Optimizer": "optax.GradientTransformation",
               "torch.optim.optimizer.Optimizer": "optax.GradientTransformation",
               "torch.utils.data.DataLoader": "typing.Iterable",
               "torch.utils.data.dataloader.DataLoader": "typing.Iterable",
               **{d: "typing.Any" for d in DATASET}}


class _Types(cst.CSTVisitor):
    """plan: a Dataset base class → dropped; ``nn.Module`` in an annotation → ``eqx.Module``."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        kept = [b for b in node.bases if self.ctx.imports.resolve(b.value) not in DATASET]
        if len(kept) == len(node.bases) or self.ctx.plans.get(node) is not None or any(b.star for b in node.bases):
            return
        names = {id(b.value) for b in kept}

        def drop(original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
            self.ctx.report(Severity.INFO, "idiom-replaced", f"class {original.name.value}: the Dataset base is "
                            "dropped; its __len__ and __getitem__ are what the loader reads", original)
            bases = [u for o, u in zip(original.bases, updated.bases) if id(o.value) in names]
            if bases:
                bases[-1] = bases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated.with_changes(bases=bases)
            if updated.keywords:
                return updated.with_changes(bases=[])
            return updated.with_changes(bases=[], lpar=cst.MaybeSentinel.DEFAULT, rpar=cst.MaybeSentinel.DEFAULT)

        self.ctx.settle(*(b.value for b in node.bases if id(b.value) not in names))  # removed: no residue
        self.ctx.plans.add(node, drop, by="types")

    def visit_Annotation(self, node: cst.Annotation) -> None:
        # every type the annotation names, inside a union or a subscript too (`Module | dict | None`)
        stack = [node.annotation]
        while stack:
            ann = stack.pop()
            if isinstance(ann, cst.BinaryOperation) and isinstance(ann.operator, cst.BitOr):
                stack += [ann.left, ann.right]
                continue
            if isinstance(ann, cst.Subscript):
                stack += [e.slice.value for e in ann.slice if isinstance(e.slice, cst.Index)]
                stack.append(ann.value)
                continue
            target = ANNOTATIONS.get(self.ctx.imports.resolve(ann) or "")
            if target is not None and self.ctx.plans.get(ann) is None:
                self.ctx.settle(ann)  # replaced: no residue
                self.ctx.plans.add(ann, lambda original, updated, t=target: self.ctx.spell(t), descend=False,
                                   by="types")


def plan(module: cst.Module, ctx) -> cst.Module:
    """Record the edits of PyTorch types named, not called (see the module docstring)."""
    scan(module, _Types(ctx))
    return module
