"""Learning rates set through an optimizer's ``param_groups`` (torch2jax).

PyTorch changes the rate as training goes by writing the optimizer's groups::

    for g in optimizer.param_groups:        # or optimizer.param_groups[0]['lr'] = lr
        g['lr'] = lr

and reads it back as ``optimizer.param_groups[0]['lr']``. An optax optimizer is a pair of functions, so the rate
must live in its state: the optimizer is built with ``optax.inject_hyperparams(optax.adam)(learning_rate=...)``
(only where the file sets or reads the rate) and the write becomes ``opt_state.hyperparams['learning_rate'] =
jnp.asarray(lr)`` on the opt_state the training pass threads (``opt_state`` / ``opt_state_D``: _Finish.state);
the read, ``opt_state.hyperparams['learning_rate']``. A helper taking the optimizer (``def update_lr(optimizer,
lr)``, pytorch-tutorial's resnet) takes that state instead, ``update_lr(opt_state, curr_lr)``: the write changes
the state's dict in place, as PyTorch's changes the optimizer's, so the helper needs to return nothing.

``plan`` (read-only, in the training pass) chooses the optimizers and helpers and settles the ``param_groups``
reads it translates (the training pass reports the others as errors); ``finish`` (after training's finish)
writes them. Refused (the error stays): an optimizer created elsewhere than in plain ``torch.optim.X(model.
parameters(), ...)`` of one scope, one with an epoch schedule (the schedule sets the rate), RMSprop with momentum
(optax scales its momentum trace by the rate of each step: a changed rate acts at once in PyTorch, through the
trace in optax), and any other use of ``param_groups``."""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code, expr
from fwport.core.finding import Severity
from fwport.core.names import find_all, scan
from fwport.core.rewrite import rewrite

# ctx.analyses: {"opts": {(scope, optimizer)}, "helpers": {function: (its optimizer parameter, its parameters)}}
LR_GROUPS = "torch2jax.lr-groups"

# the optimizers whose update is the rate times a value the rate does not change (so a new rate acts as PyTorch's)
RATED = {"torch.optim.Adam", "torch.optim.AdamW", "torch.optim.SGD", "torch.optim.RMSprop"}


def _lr_key(node) -> bool:
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "lr"


def _index(sub: cst.Subscript):
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    return sub.slice[0].slice.value


def _groups_of(node) -> str | None:
    """``R.param_groups`` → R."""
    if isinstance(node, cst.Attribute) and node.attr.value == "param_groups" and isinstance(node.value, cst.Name):
        return node.value.value
    return None


def first_group_lr(node) -> str | None:
    """``R.param_groups[0]['lr']`` → R."""
    if not (isinstance(node, cst.Subscript) and _lr_key(_index(node)) and isinstance(node.value, cst.Subscript)):
        return None
    zero = _index(node.value)
    if not (isinstance(zero, cst.Integer) and zero.value == "0"):
        return None
    return _groups_of(node.value.value)


def group_loop(node) -> tuple[str, cst.BaseSmallStatement] | None:
    """``for g in R.param_groups: g['lr'] = v`` (or ``g['lr'] *= v``), v not reading g → (R, that statement)."""
    if not (isinstance(node, cst.For) and node.orelse is None and node.asynchronous is None
            and isinstance(node.target, cst.Name) and _groups_of(node.iter) and isinstance(node.body, cst.IndentedBlock)
            and len(node.body.body) == 1 and isinstance(node.body.body[0], cst.SimpleStatementLine)
            and len(node.body.body[0].body) == 1):
        return None
    g = node.target.value
    small = node.body.body[0].body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
    elif isinstance(small, cst.AugAssign):
        target = small.target
    else:
        return None
    if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value == g
            and _lr_key(_index(target))) or any(n.value == g for n in find_all(small.value, cst.Name)):
        return None
    return _groups_of(node.iter), small


class _Uses(cst.CSTVisitor):
    """In one scope (not its nested functions and classes): the ``param_groups`` attributes of each receiver, and
    those inside a form this module writes (group_loop, first_group_lr)."""

    def __init__(self, scope):
        self.scope = scope
        self.all: dict[str, list] = {}
        self.handled: set[int] = set()
        self.forms: list = []

    def visit_FunctionDef(self, n) -> bool:
        return n is self.scope

    def visit_ClassDef(self, n) -> bool:
        return False

    def visit_Attribute(self, n) -> None:
        r = _groups_of(n)
        if r is not None:
            self.all.setdefault(r, []).append(n)

    def visit_For(self, n) -> None:
        if group_loop(n):
            self.handled.add(id(n.iter))
            self.forms.append(n)

    def visit_Subscript(self, n) -> None:
        if first_group_lr(n):
            self.handled.add(id(n.value.value))
            self.forms.append(n)


def _uses(scope) -> _Uses:
    v = _Uses(scope)
    scan(scope, v)
    return v


def _refusal(call: cst.Call, q: str) -> str | None:
    """Why a rate set as training goes would not act as PyTorch's on this optimizer (None: it would)."""
    if q not in RATED:
        return f"{q.rsplit('.', 1)[-1]}'s update is not translated with a rate set as training goes"
    if q == "torch.optim.RMSprop":
        pos = [a for a in call.args if a.keyword is None]
        momentum = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "momentum"),
                        pos[5].value if len(pos) > 5 else None)
        if momentum is not None and code(momentum) not in ("0", "0.0"):
            return ("RMSprop with momentum: optax.rmsprop scales its momentum trace by the rate of each step, PyTorch "
                    "scales the trace when it steps, so a changed rate acts at once in PyTorch and gradually in optax")
    return None


def plan(module: cst.Module, ctx, schedules: dict) -> None:
    """The optimizers whose rate the file sets or reads through param_groups in forms finish writes (LR_GROUPS),
    those uses settled; helpers taking such an optimizer as a parameter."""
    from fwport.packs.torch2jax.passes.training import _bound, _local_names, _optimizer_models
    funcs = [s for s in module.body if isinstance(s, cst.FunctionDef)]
    uses = {id(s): _uses(s) for s in [module, *funcs]}
    # helpers: a top-level function whose plain parameter is used only as the receiver of the written forms
    helpers: dict[str, str] = {}
    for f in funcs:
        u = uses[id(f)]
        params = [p.name.value for p in f.params.params]
        for p, attrs in u.all.items():
            if p in params and all(id(a) in u.handled for a in attrs) \
                    and sum(1 for n in find_all(f.body, cst.Name) if n.value == p) == len(attrs):
                helpers[f.name.value] = p
    # the calls of each helper, by scope: (call, the optimizer given for its parameter)
    calls: dict[str, list] = {h: [] for h in helpers}
    names_used: dict[str, int] = {h: 0 for h in helpers}
    for n in find_all(module, cst.Name):
        if n.value in names_used:
            names_used[n.value] += 1
    opts: set = set()
    settled: list = []
    module_models = _optimizer_models(ctx, module)
    for scope in [module, *funcs]:
        sname = scope.name.value if isinstance(scope, cst.FunctionDef) else ""
        models = dict(_optimizer_models(ctx, scope))
        outer = {}  # a module's optimizer a function uses without binding it: the module's opt_state
        if sname:
            local = _local_names(scope)
            outer = {o: m for o, m in module_models.items() if o not in local and o not in models
                     and "opt_state" not in local}
        u = uses[id(scope)]
        helper_calls = [c for c in find_all(scope, cst.Call) if isinstance(c.func, cst.Name) and c.func.value in helpers
                        and _in_scope(scope, c)]
        for c in helper_calls:
            given = _bound(c, [p.name.value for p in next(f for f in funcs if f.name.value == c.func.value).params.params],
                           helpers[c.func.value])
            calls[c.func.value].append((sname, given.value if isinstance(given, cst.Name) else None, c))
        for opt, model in [*models.items(), *outer.items()]:
            mine = u.all.get(opt, [])
            given = [c for c in helper_calls if any(
                isinstance(a.value, cst.Name) and a.value.value == opt for a in c.args)]
            if not mine and not given:
                continue
            why = _made(ctx, module if opt in outer else scope, opt, model, schedules)
            if why is None and any(id(a) not in u.handled for a in mine):
                why = "param_groups is used otherwise than to set or read the rate"
            if why is not None:
                for a in mine:
                    ctx.report(Severity.ERROR, "unsupported-construct", f"{code(a)}: the learning rate set or read "
                               f"here is not translated: {why}; write optax.inject_hyperparams(optax.<name>)"
                               "(learning_rate=...) and opt_state.hyperparams['learning_rate'] by hand", a)
                    settled.append(a)
                continue
            opts.add((sname, opt))
            if opt in outer:
                opts.add(("", opt))
            settled += mine
    # a helper is written only where each of its calls gives it an optimizer written above, and nothing else names it
    kept: dict[str, str] = {}
    for h, p in helpers.items():
        cs = calls[h]
        if cs and len(cs) == names_used[h] - 1 and all(o is not None and (s, o) in opts for s, o, _ in cs):
            f = next(f for f in funcs if f.name.value == h)
            kept[h] = (p, [q.name.value for q in f.params.params])
            settled += uses[id(f)].all[p]
            for form in uses[id(f)].forms:
                _report(ctx, form)
    for scope in [module, *funcs]:
        sname = scope.name.value if isinstance(scope, cst.FunctionDef) else ""
        for form in uses[id(scope)].forms:
            r = form.iter.value.value if isinstance(form, cst.For) else first_group_lr(form)
            if (sname, r) in opts:
                _report(ctx, form)
    ctx.settle(*settled)
    if opts:
        ctx.analyses[LR_GROUPS] = {"opts": opts, "helpers": kept}


def _made(ctx, scope, opt: str, model, schedules: dict) -> str | None:
    """Why the rate of ``opt``, which ``scope`` creates, is not written (None: it is)."""
    from fwport.packs.torch2jax.passes.training import _scope_assigns
    made = [a for a in _scope_assigns(scope) if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name)
            and a.targets[0].target.value == opt]
    q = ctx.imports.resolve(made[0].value.func) if len(made) == 1 and isinstance(made[0].value, cst.Call) else None
    if model is None or q is None or not q.startswith("torch.optim."):
        return "this scope does not create it as torch.optim.X(model.parameters(), ...)"
    if (scope.name.value if isinstance(scope, cst.FunctionDef) else "", opt) in schedules:
        return "its learning rate is already an optax schedule (the scheduler's)"
    return _refusal(made[0].value, q)


def _in_scope(scope, node) -> bool:
    """Whether ``node`` is in ``scope`` itself, not in a function or class nested in it."""
    for f in [*find_all(scope, cst.FunctionDef), *find_all(scope, cst.ClassDef)]:
        if f is not scope and any(n is node for n in find_all(f, cst.Call)):
            return False
    return True


def _report(ctx, form) -> None:
    if isinstance(form, cst.For):
        what = f"for ... in {code(form.iter)}: ...['lr'] = v"
        to = "opt_state.hyperparams['learning_rate'] = jnp.asarray(v)"
    else:
        what, to = code(form), "opt_state.hyperparams['learning_rate']"
    ctx.report(Severity.INFO, "idiom-replaced", f"{what} → {to}: the optimizer is built with "
               "optax.inject_hyperparams, which keeps its learning rate in its state (opt_state), read by each step", form)


def finish(module: cst.Module, ctx, suffix: dict) -> cst.Module:
    info = ctx.analyses.get(LR_GROUPS)
    if not info:
        return module
    return rewrite(module, _Write(ctx, info["opts"], info["helpers"], suffix))


class _Write(cst.CSTTransformer):
    def __init__(self, ctx, opts: set, helpers: dict, suffix: dict):
        super().__init__()
        self.ctx, self.opts, self.helpers, self.suffix = ctx, opts, helpers, suffix
        self.scopes: list[str] = []
        self.classes = 0

    def scope(self) -> str:
        return self.scopes[0] if self.scopes else ""

    def state(self, r: str) -> str | None:
        """The opt_state of receiver ``r`` where it is read or written (None: leave it)."""
        if self.classes or len(self.scopes) > 1:
            return None
        if self.scopes and self.helpers.get(self.scopes[0], (None,))[0] == r:
            return "opt_state"
        if (self.scope(), r) in self.opts:
            return f"opt_state_{self.suffix[r]}" if r in self.suffix else "opt_state"
        return None

    def visit_ClassDef(self, node) -> None:
        self.classes += 1

    def leave_ClassDef(self, original, updated):
        self.classes -= 1
        return updated

    def visit_FunctionDef(self, node) -> None:
        self.scopes.append(node.name.value)

    def leave_FunctionDef(self, original, updated):
        self.scopes.pop()
        if self.scopes or self.classes or updated.name.value not in self.helpers:
            return updated
        p = self.helpers[updated.name.value][0]
        params = [q.with_changes(name=cst.Name("opt_state")) if q.name.value == p else q for q in updated.params.params]
        return updated.with_changes(params=updated.params.with_changes(params=params))

    def hyperparam(self, state: str) -> cst.BaseExpression:
        return expr(f"{state}.hyperparams['learning_rate']")

    def asarray(self, value) -> cst.BaseExpression:
        return expr(f"{self.ctx.spell_text('jax.numpy.asarray')}({code(value)})")

    def leave_For(self, original, updated):
        found = group_loop(updated)
        state = self.state(found[0]) if found else None
        if state is None:
            return updated
        small = found[1]
        if isinstance(small, cst.Assign):
            new = cst.Assign([cst.AssignTarget(self.hyperparam(state))], self.asarray(small.value))
        else:
            new = small.with_changes(target=self.hyperparam(state))
        return cst.SimpleStatementLine([new], leading_lines=updated.leading_lines)

    def leave_Call(self, original, updated):
        """``update_lr(optimizer, lr)`` of a helper writing the rate → ``update_lr(opt_state, lr)``."""
        if not (isinstance(updated.func, cst.Name) and updated.func.value in self.helpers):
            return updated
        p, params = self.helpers[updated.func.value]
        args = list(updated.args)
        for i, a in enumerate(args):
            if (a.keyword is None and i < len(params) and params[i] == p or a.keyword is not None
                    and a.keyword.value == p) and isinstance(a.value, cst.Name) and self.state(a.value.value):
                args[i] = a.with_changes(value=cst.Name(self.state(a.value.value)),
                                         keyword=cst.Name("opt_state") if a.keyword is not None else None)
        return updated.with_changes(args=args)

    def leave_Subscript(self, original, updated):
        r = first_group_lr(updated)
        state = self.state(r) if r else None
        return self.hyperparam(state) if state else updated

    def leave_Assign(self, original, updated):
        if len(original.targets) == 1 and first_group_lr(original.targets[0].target) \
                and self.state(first_group_lr(original.targets[0].target)):
            return updated.with_changes(value=self.asarray(updated.value))
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        """``opt = optax.X(learning_rate=lr, ...)`` → ``opt = optax.inject_hyperparams(optax.X)(learning_rate=lr,
        ...)``; a wrapper of it (optax.chain(optax.add_decayed_weights(wd), optax.adam(learning_rate=lr))) →
        ``optax.inject_hyperparams(lambda learning_rate: <the wrapper of learning_rate>)(learning_rate=lr)``."""
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.Assign) or len(updated.body[0].targets) != 1:
            return updated
        a = updated.body[0]
        t = a.targets[0].target
        if not (isinstance(t, cst.Name) and (self.scope(), t.value) in self.opts and not self.classes
                and len(self.scopes) <= 1 and isinstance(a.value, cst.Call)):
            return updated
        inject = self.ctx.spell_text("optax.inject_hyperparams")
        call = a.value
        if any(x.keyword is not None and x.keyword.value == "learning_rate" for x in call.args):
            value = cst.Call(cst.Call(expr(inject), [cst.Arg(call.func)]), call.args)
        else:
            named = _NamedRate()
            inner = rewrite(call, named)
            if named.rate is None:
                return updated
            value = expr(f"{inject}(lambda learning_rate: {code(inner)})(learning_rate={code(named.rate)})")
        return updated.with_changes(body=[a.with_changes(value=value)])


class _NamedRate(cst.CSTTransformer):
    """The first ``learning_rate=v`` argument of a wrapped optimizer → ``learning_rate=learning_rate`` (v kept in
    ``rate``): the factory inject_hyperparams is given takes the rate as its parameter."""

    def __init__(self):
        super().__init__()
        self.rate = None

    def leave_Arg(self, original, updated):
        if updated.keyword is not None and updated.keyword.value == "learning_rate" and self.rate is None:
            self.rate = updated.value
            return updated.with_changes(value=cst.Name("learning_rate"))
        return updated
