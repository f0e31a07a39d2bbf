"""Parameter groups of a torch.optim optimizer → optax's ``mask=`` (a read-only planner; the rule pass applies it).

nanoGPT's ``configure_optimizers`` decays the matrices and not the biases and norms:

    param_dict = {pn: p for pn, p in self.named_parameters()}
    decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
    optim_groups = [{'params': decay_params, 'weight_decay': weight_decay},
                    {'params': nodecay_params, 'weight_decay': 0.0}]
    optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

optax takes no parameter lists: the same optimizer is ``optax.adamw(..., weight_decay=weight_decay,
mask=lambda params: jax.tree_util.tree_map(lambda p: p.ndim >= 2, params))``, the mask saying which arrays decay.
That is what this planner writes, where it can prove it: two groups whose ``params`` are comprehensions over the
same parameters with complementary tests of the parameter alone (``p.dim() >= 2`` / ``p.dim() < 2``), one of them
with a weight decay of 0 and no other per-group option. ``**extra_args`` bound in the function to dicts
(``dict(fused=True) if use_fused else dict()``) whose keys the rule drops (speed options: fused, foreach) goes too.
Anything else is left to the rule, which refuses groups with a message.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code, expr, literal_value, map_call
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, find_all, scan
from fwport.packs.torch2jax.batch import names_in

#: the comparisons whose negation is the other one (p.dim() >= 2 / p.dim() < 2)
_COMPLEMENT = {cst.GreaterThanEqual: cst.LessThan, cst.LessThan: cst.GreaterThanEqual,
               cst.GreaterThan: cst.LessThanEqual, cst.LessThanEqual: cst.GreaterThan,
               cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}
_OPTIMIZERS = ("torch.optim.AdamW", "torch.optim.Adam", "torch.optim.SGD")


class _Assigns(cst.CSTVisitor):
    """_bindings: each name assigned (a single target) → the values assigned, into ``out``."""

    def __init__(self, out):
        super().__init__()
        self.out = out

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.out.setdefault(t.target.value, []).append(node.value if len(node.targets) == 1 else None)


def _bindings(fn: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
    """Each name the function assigns (a single target) → the values assigned, in order."""
    out: dict[str, list[cst.BaseExpression]] = {}
    scan(fn, _Assigns(out))
    return out


def _names(node: cst.CSTNode) -> set[str]:
    return names_in(node)


def _group_test(value: cst.BaseExpression | None) -> tuple[cst.Comparison, str, str] | None:
    """``[p for n, p in D.items() if <p compared with a number>]`` → (the test, p, D's text)."""
    if not (isinstance(value, cst.ListComp) and isinstance(value.elt, cst.Name) and value.for_in.inner_for_in is None
            and len(value.for_in.ifs) == 1):
        return None
    p = value.elt.value
    target = value.for_in.target
    names = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else [target]
    if not names or not isinstance(names[-1], cst.Name) or names[-1].value != p:
        return None
    it = value.for_in.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in ("items", "values")
            and not it.args and (len(names) == 2) == (it.func.attr.value == "items")):
        return None
    test = value.for_in.ifs[0].test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and type(test.comparisons[0].operator) in _COMPLEMENT
            and isinstance(test.comparisons[0].comparator, cst.Integer) and _names(test) == {p}):
        return None
    return test, p, code(it.func.value)


def _params_of(d: str, binds: dict, seen: int = 0) -> str | None:
    """The module whose parameters the dict named ``d`` holds: bound to ``{pn: p for pn, p in M.named_parameters()}``
    (perhaps refiltered, ``{pn: p for pn, p in d.items() if p.requires_grad}``), else None."""
    values = binds.get(d, [])
    if seen > 4 or not values or any(not isinstance(v, cst.DictComp) for v in values):
        return None
    root = None
    for v in values:
        it = v.for_in.iter
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args):
            return None
        if it.func.attr.value == "named_parameters":
            root = code(it.func.value)
        elif it.func.attr.value == "items" and code(it.func.value) == d:
            if any(not (isinstance(i.test, cst.Attribute) and i.test.attr.value == "requires_grad") for i in v.for_in.ifs):
                return None  # a filter other than requires_grad (every JAX array trains)
        else:
            return None
    return root


def _extra(arg: cst.Arg, binds: dict, rule) -> str | None:
    """``**name`` bound only to dicts whose keys the rule drops (speed options) → those keys joined; else None."""
    if not isinstance(arg.value, cst.Name) or len(binds.get(arg.value.value, [])) != 1:
        return None
    value = binds[arg.value.value][0]
    parts = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
    keys: set[str] = set()
    for p in parts:
        if isinstance(p, cst.Call) and dotted_text(p.func) == "dict" and all(a.keyword is not None for a in p.args):
            keys |= {a.keyword.value for a in p.args}
        elif isinstance(p, cst.Dict) and all(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                                             for e in p.elements):
            keys |= {e.key.evaluated_value for e in p.elements}
        else:
            return None
    if any(rule.args.get(k) is None or rule.args[k].verb != "drop" for k in keys):
        return None
    return ", ".join(sorted(keys)) or "none"


class _OptimizerGroups(cst.CSTVisitor):
    """groups.plan: in each function, the optimizers over complementary parameter groups → their edits (``edit``:
    (the group's edit, the optimizer's rule) → the plan's function)."""

    def __init__(self, ctx, edit):
        super().__init__()
        self.ctx = ctx
        self.edit = edit

    def visit_FunctionDef(self, fn: cst.FunctionDef) -> None:
        binds = None
        for call in _calls(fn):
            q = self.ctx.imports.resolve(call.func)
            rule = self.ctx.pack.by_name.get(q) if q in _OPTIMIZERS else None
            if rule is None or self.ctx.plans.get(call) is not None or not call.args:
                continue
            binds = binds if binds is not None else _bindings(fn)
            edit = _groups(call, rule, binds)
            if edit is not None:
                self.ctx.plans.add(call, self.edit(edit, rule), by="param-groups")


def plan(module: cst.Module, ctx) -> cst.Module:
    """Record the optax call for each optimizer over complementary parameter groups (see the module docstring)."""
    from fwport.packs.torch2jax.ops import optimizer

    def _apply(edit, rule):
        mask, wd, model, dropped, kept = edit

        def apply(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            args = [cst.Arg(expr(f"{model}.parameters()"))]
            args += [a for a, o in zip(updated.args[1:], original.args[1:]) if id(o) in kept]
            args.append(cst.Arg(wd, keyword=cst.Name("weight_decay")))
            m = map_call(cst.Call(updated.func, args), rule, ctx, node=original)
            out = None if m.failed else optimizer(m, ctx)
            if not isinstance(out, cst.Call):
                return updated
            ctx.report(Severity.INFO, "idiom-replaced", f"parameter groups → one {code(out.func)} with mask=: the "
                       f"arrays for which `{mask[1]}` holds are decayed, the others not, as the groups did"
                       + (f"; **{code(original.args[-1].value)} ({dropped}) dropped: speed options of PyTorch"
                          if dropped else "") + "; JAX arrays have no requires_grad: every array of the model trains",
                       original, rule)
            tmap = ctx.spell_text("jax.tree_util.tree_map")
            return out.with_changes(args=[*out.args[:-1], out.args[-1].with_changes(comma=cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(
                expr(f"lambda params: {tmap}(lambda {mask[0]}: {mask[1]}, params)"),
                keyword=cst.Name("mask"), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        return apply

    scan(module, _OptimizerGroups(ctx, _apply))
    return module


def _groups(call: cst.Call, rule, binds: dict):
    """(the mask as (p, "<test of p>"), the decay, the model, the dropped ** keys, ids of the arguments kept) or None."""
    first = call.args[0]
    if first.keyword is not None or first.star or not isinstance(first.value, cst.Name):
        return None
    gs = binds.get(first.value.value, [])
    if len(gs) != 1 or not isinstance(gs[0], cst.List) or len(gs[0].elements) != 2:
        return None
    groups = []
    for e in gs[0].elements:
        d = e.value
        if not isinstance(d, cst.Dict) or not all(isinstance(x, cst.DictElement) and isinstance(x.key, cst.SimpleString)
                                                  for x in d.elements):
            return None
        entries = {x.key.evaluated_value: x.value for x in d.elements}
        if set(entries) - {"params", "weight_decay"} or not isinstance(entries.get("params"), cst.Name):
            return None
        pv = binds.get(entries["params"].value, [])
        test = _group_test(pv[0]) if len(pv) == 1 else None
        if test is None:
            return None
        groups.append((test, entries.get("weight_decay")))
    (t1, w1), (t2, w2) = groups
    c1, c2 = t1[0].comparisons[0], t2[0].comparisons[0]
    if t1[2] != t2[2] or code(t1[0].left).replace(t1[1], "P") != code(t2[0].left).replace(t2[1], "P") \
            or c1.comparator.evaluated_value != c2.comparator.evaluated_value \
            or _COMPLEMENT[type(c1.operator)] is not type(c2.operator):
        return None  # not complementary tests of the same parameters
    model = _params_of(t1[2], binds)
    if model is None:
        return None
    zero = [literal_value(w, None) in (0, 0.0) if w is not None else False for w in (w1, w2)]
    if zero.count(True) != 1:
        return None
    (test, p, _), wd = (t1, w1) if not zero[0] else (t2, w2)
    if wd is None:
        return None
    kept, dropped = set(), ""
    for a in call.args[1:]:
        if a.star == "**":
            dropped = _extra(a, binds, rule)
            if dropped is None:
                return None
        elif a.star:
            return None
        elif a.keyword is not None and a.keyword.value == "weight_decay":
            return None  # the groups' decay is the one
        else:
            kept.add(id(a))
    text = code(test).replace(".dim()", ".ndim").replace(".numel()", ".size")
    return (p, text), wd, model, dropped, kept


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    return find_all(node, cst.Call)


#: ctx.analyses: the file builds an nn.Embedding.from_pretrained table frozen (freeze not False): its optimizers mask it
FROZEN_TABLES = "torch2jax.frozen-tables"


class _FrozenTables(cst.CSTVisitor):
    """frozen_tables: a frozen ``nn.Embedding.from_pretrained`` table sets ctx.analyses[FROZEN_TABLES]."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.imports.resolve(node.func) != "torch.nn.Embedding.from_pretrained":
            return
        freeze = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "freeze"]
        freeze += [a.value for a in node.args[1:2] if a.keyword is None and not a.star]
        if not freeze or code(freeze[0]) != "False":
            self.ctx.analyses[FROZEN_TABLES] = True


def frozen_tables(module: cst.Module, ctx) -> cst.Module:
    """(read-only) Whether the file builds a frozen ``nn.Embedding.from_pretrained`` table (``freeze`` left out or not
    ``False``): PyTorch's optimizer over ``model.parameters()`` leaves it alone (no gradient: no step, no weight decay),
    where optax would still decay it (AdamW, ``add_decayed_weights``); the optimizer rule then writes
    ``optax.masked(<optimizer>, unfrozen)`` (ops.optimizer)."""
    scan(module, _FrozenTables(ctx))
    return module
