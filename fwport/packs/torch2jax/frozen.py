"""Frozen parameters before a training loop → the optimizer's update of them set to zero (called by nograd.plan).

PyTorch's optimizer skips a parameter whose ``requires_grad`` is False (no gradient: no step, no weight decay, no
moment). Equinox has no such flag: every array of ``eqx.filter(model, eqx.is_array)`` is differentiated and
updated. What a JAX user writes for a frozen part is a second transformation for it, ``optax.set_to_zero()``,
chosen per array by labels (``optax.multi_transform``): the frozen arrays then keep their values exactly, the
others train as before, and the training step stays as it is. The statements freezing them go; the optimizer
over that model becomes

    optax.multi_transform({"trained": optax.sgd(learning_rate=0.1), "frozen": optax.set_to_zero()},
                          frozen_labels(lambda m: (m.encoder,)))

(``frozen_labels``: a helper written into the file, labelling the arrays under the parts its ``where`` picks, as
eqx.tree_at's). Freezes read this way, at the top level of the scope creating the only optimizer over the model's
``.parameters()`` in the file, before the first statement of that scope holding a ``backward()``:

- ``for p in model.encoder.parameters(): p.requires_grad = False`` (or ``p.requires_grad_(False)``), the loop's
  only statement;
- ``model.encoder.requires_grad_(False)``;
- ``model.fc.weight.requires_grad = False`` (a parameter by its attribute path).

Anything else (a freeze inside a loop or an if, one chosen by name in ``named_parameters()``, a file that sets
``requires_grad`` True again somewhere, a model trained by several optimizers) stays nograd.py's error.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.names import find_all

#: ctx.analyses: the model's source name → the attribute paths of its frozen parts ("encoder", "fc.weight"; "" the
#: whole model), read by ops.optimizer
FROZEN = "torch2jax.frozen-parameters"
FROZEN_CALLS = "torch2jax.frozen-calls"  # ctx.analyses: ids of the calls in the freezes removed here


def _chain(node) -> list[str] | None:
    """``model.encoder.fc`` → ["model", "encoder", "fc"]; None for anything but a name's attribute path."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    return [node.value, *reversed(parts)] if isinstance(node, cst.Name) else None


def _false(args) -> bool:
    return len(args) == 1 and not args[0].star and (args[0].keyword is None or args[0].keyword.value == "requires_grad") \
        and isinstance(args[0].value, cst.Name) and args[0].value.value == "False"


def _frozen_by(small) -> list[str] | None:
    """The attribute path a small statement sets requires_grad False on: ``X.requires_grad = False`` /
    ``X.requires_grad_(False)``."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        t = small.targets[0].target
        if isinstance(t, cst.Attribute) and t.attr.value == "requires_grad" and isinstance(small.value, cst.Name) \
                and small.value.value == "False":
            return _chain(t.value)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        f = small.value.func
        if isinstance(f, cst.Attribute) and f.attr.value == "requires_grad_" and _false(small.value.args):
            return _chain(f.value)
    return None


def _smalls(block) -> list:
    """The small statements of a loop's body, None for a compound one."""
    if isinstance(block, cst.SimpleStatementSuite):
        return list(block.body)
    return [x for st in block.body for x in (st.body if isinstance(st, cst.SimpleStatementLine) else [None])]


def freeze_path(stmt) -> list[str] | None:
    """The model's attribute path a statement freezes (its first name the model's), else None."""
    if isinstance(stmt, cst.For):
        it = stmt.iter
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value == "parameters"
                and not it.args and isinstance(stmt.target, cst.Name) and stmt.orelse is None):
            return None
        smalls = _smalls(stmt.body)
        if len(smalls) != 1 or smalls[0] is None or _frozen_by(smalls[0]) != [stmt.target.value]:
            return None
        return _chain(it.func.value)
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        path = _frozen_by(stmt.body[0])  # (a name alone: the model itself by requires_grad_(False))
        return path if path is not None and (len(path) >= 2 or isinstance(stmt.body[0], cst.Expr)) else None
    return None


def _unfreezes(module: cst.Module) -> bool:
    """Whether the file sets requires_grad other than False anywhere (a part trained again later)."""
    for a in find_all(module, cst.Assign):
        if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad" for t in a.targets) \
                and not (isinstance(a.value, cst.Name) and a.value.value == "False"):
            return True
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "requires_grad_" and not _false(c.args)
               for c in find_all(module, cst.Call))


def _optimizer_model(stmt, ctx) -> str | None:
    """``opt = torch.optim.X(model.parameters(), ...)`` → "model"."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    v = stmt.body[0].value
    q = ctx.imports.resolve(v.func) if isinstance(v, cst.Call) else None
    rule = ctx.pack.by_name.get(q) if q else None
    if rule is None or rule.emit.get("transform") != "optimizer" or not v.args:
        return None  # (ops.optimizer writes the zero updates: another transform, LBFGS's, would not)
    first = v.args[0].value
    if isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute) and first.func.attr.value == "parameters" \
            and not first.args and isinstance(first.func.value, cst.Name):
        return first.func.value.value
    return None


def _backward(stmt) -> bool:
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward" for c in find_all(stmt, cst.Call))


def plan(module: cst.Module, ctx) -> set[int]:
    """Plans the removal of the freezes read here (module docstring) and records their paths (FROZEN); returns the
    ids of the statements it took (nograd.py reports the others)."""
    if _unfreezes(module):
        return set()
    scopes = [module.body, *(f.body.body for f in find_all(module, cst.FunctionDef)
                             if isinstance(f.body, cst.IndentedBlock))]
    optimizers: dict[str, int] = {}
    for body in scopes:
        for s in body:
            m = _optimizer_model(s, ctx)
            if m is not None:
                optimizers[m] = optimizers.get(m, 0) + 1
    # (every optimizer of the file, one over a model's parameters() or not, and anywhere)
    everywhere = sum(1 for c in find_all(module, cst.Call) if (ctx.imports.resolve(c.func) or "").startswith(
        "torch.optim.") and not (ctx.imports.resolve(c.func) or "").startswith("torch.optim.lr_scheduler"))
    taken: set[int] = set()
    found: dict[str, list[str]] = {}
    for body in scopes:
        models = {m for m in map(lambda s: _optimizer_model(s, ctx), body) if m is not None}
        trains = next((i for i, s in enumerate(body) if _backward(s)), None)
        for i, s in enumerate(body):
            path = freeze_path(s)
            if path is None or path[0] not in models or optimizers.get(path[0]) != 1 or everywhere != 1 \
                    or trains is None or i > trains:
                continue
            taken.add(id(s))
            # (their requires_grad_ calls are left to this removal: training.py's leave_Call)
            ctx.analyses.setdefault(FROZEN_CALLS, set()).update(id(c) for c in find_all(s, cst.Call))
            found.setdefault(path[0], []).append(".".join(path[1:]))
            ctx.plans.add(s, lambda o, u: cst.RemoveFromParent(), descend=False, by="frozen-parameters")
    if found:
        ctx.analyses[FROZEN] = found
    return taken


def optimizer(text: str, model: str | None, ctx, node) -> str:
    """The optax optimizer ``text`` over ``model``, its frozen parts (FROZEN) set to zero."""
    paths = ctx.analyses.get(FROZEN, {}).get(model) if model is not None else None
    if not paths:
        return text
    from fwport.core.finding import Severity
    from fwport.packs.torch2jax import layers
    zero = f"{ctx.spell_text('optax.set_to_zero')}()"
    ctx.report(Severity.INFO, "idiom-replaced", f"{', '.join(f'{model}.{p}' if p else model for p in paths)}: frozen "
               "(requires_grad False), which PyTorch's optimizer skips: their updates are optax.set_to_zero() "
               "(optax.multi_transform, labels from frozen_labels), so they keep their values", node)
    if "" in paths:
        return zero
    where = f"m.{paths[0]}" if len(paths) == 1 else f"({', '.join(f'm.{p}' for p in paths)})"
    return (f'{ctx.spell_text("optax.multi_transform")}({{"trained": {text}, "frozen": {zero}}}, '
            f'{layers.use(ctx, "frozen_labels")}(lambda m: {where}))')

