"""A model's layer state (BatchNorm) threaded through a script's top-level functions.

``model, state = eqx.nn.make_with_state(Net)(key=...)`` binds the state where the model is made; a
function that runs a model it receives (``def train(args, model, ...)``, ``def test(model, loader)``)
reads and writes ``state`` in its translation (the model's call, the train_step's). Such a function takes
``state`` after the model's parameter; one that runs the model in training mode (the statistics move)
hands it back too: a threaded training function returns ``model, opt_state, state`` (its callers rebind
the three), another function returning nothing returns ``state`` (``state = f(model, state, ...)``), and
one evaluating (``model.eval()``) only takes it; one running the module's own model declares ``global state``. Each call in the file passes ``state``; a call fwport
cannot give it (a scope without the state, a use that is not a call) is an error on that line.

``plan`` (from the training pass, on the source) decides and reports; ``finish`` writes the parameters,
returns and calls.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.finding import Severity
from fwport.core.names import ValueVisitor, find_all, scan
from fwport.packs.torch2jax.ranks import target_names

#: ctx.analyses: model name → the name of its layer state: ``state``, or ``<model>_state`` for a model made in a
#: scope that makes another one keeping a state (a GAN's generator and discriminator: ``generator_state``)
STATE_NAMES = "torch2jax.state-names"


def state_names(stateful: set[str], shared: set[str], used: set[str]) -> dict[str, str]:
    """The state name of each model of ``stateful`` (STATE_NAMES): ``state``, or for those of ``shared`` a name of
    their own that ``used`` does not hold already."""
    out = {}
    for m in sorted(stateful):
        name = f"{m}_state" if m in shared else "state"
        while m in shared and name in used:
            name += "_"
        out[m] = name
    return out


def state_name(ctx, model: str) -> str:
    return ctx.analyses.get(STATE_NAMES, {}).get(model, "state")


#: ctx.analyses: top-level function → {"model": its model parameter, "back": hands the state back,
#: "threaded": returns model, opt_state too}
STATE_THREAD = "torch2jax.state-thread"


def _made(scope, ctors: set[str]) -> set[str]:
    """Names ``scope`` assigns an instance of one of ``ctors`` (``model = Net().to(device)``)."""
    out: set[str] = set()
    for a in find_all(scope, cst.Assign):
        v = a.value
        while isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in ("to", "cuda", "cpu"):
            v = v.func.value
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value in ctors:
            out.update(n for t in a.targets for n in target_names(t.target))
    return out


def _mentions(node, name: str) -> bool:
    return any(n.value == name for n in find_all(node, cst.Name))


def _method_called(f, name: str, method: str) -> bool:
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value == method and isinstance(c.func.value, cst.Name)
               and c.func.value.value == name for c in find_all(f, cst.Call))


def _bound(call: cst.Call, params: list[str], name: str):
    """The argument of ``call`` bound to parameter ``name`` and whether by keyword; None if not found."""
    for i, a in enumerate(call.args):
        if a.star:
            return None
        if a.keyword is None and i < len(params) and params[i] == name:
            return a.value, False
        if a.keyword is not None and a.keyword.value == name:
            return a.value, True
    return None


def _returns(f: cst.FunctionDef) -> bool:
    from fwport.packs.torch2jax.passes.training import _returns_or_yields
    return _returns_or_yields(f)


def plan(module: cst.Module, ctx, stateful: set[str], ctors: set[str], threaded: dict) -> None:
    """The functions whose model keeps a state they do not bind (module docstring), into STATE_THREAD;
    errors for what cannot be threaded."""
    funcs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    module_made = set()
    for s in module.body:
        if not isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            module_made |= _made(s, ctors)
    needs: dict[str, dict] = {}
    changed = True
    while changed:  # a function handing its model to one that needs the state needs it too
        changed = False
        for name, f in funcs.items():
            if name in needs or _mentions(f, "state"):  # (a name of the source's own: left alone)
                continue
            params = [p.name.value for p in f.params.params]
            called = {c.func.value for c in find_all(f, cst.Call) if isinstance(c.func, cst.Name) and c.func.value in stateful}
            back = False
            for c in find_all(f, cst.Call):
                if isinstance(c.func, cst.Name) and c.func.value in needs:
                    info = needs[c.func.value]
                    b = _bound(c, info["params"], info["model"])
                    if b is not None and isinstance(b[0], cst.Name):
                        called.add(b[0].value)
                        back = back or info["back"]
            given = sorted((called - _made(f, ctors)) & set(params))
            if not given:
                if (called - _made(f, ctors) - set(params)) & module_made:  # the module's model: its state is global
                    from fwport.packs.torch2jax.passes.training import GLOBALS  # (as PyTorch's call moves the module's)
                    ctx.analyses.setdefault(GLOBALS, {}).setdefault(name, set()).update(
                        state_name(ctx, m) for m in (called - _made(f, ctors) - set(params)) & module_made)
                continue
            if len(given) > 1 or f.params.star_arg not in (cst.MaybeSentinel.DEFAULT, None) or f.params.posonly_params:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{name} runs {', '.join(given)}, which keep a layer "
                           "state (BatchNorm): fwport threads one model's state through a function's parameters; give each "
                           "model's state as a parameter (`state`) and return it where the model runs in training mode",
                           f.name)
                needs[name] = {"model": given[0], "back": False, "threaded": False, "params": params, "refused": True}
                changed = True
                continue
            model = given[0]
            evaluates = _method_called(f, model, "eval") and not _method_called(f, model, "train")
            back = back or not evaluates
            info = {"model": model, "back": back, "threaded": threaded.get(name, {}).get("model") == model,
                    "params": params}
            if back and not info["threaded"] and _returns(f):
                ctx.report(Severity.ERROR, "unsupported-construct", f"{name} runs {model} in training mode (BatchNorm "
                           "moves its running statistics) and returns a value: fwport cannot hand the new `state` back "
                           f"beside it; return `state` too and rebind it where {name} is called, or call "
                           f"{model}.eval() first", f.name)
                info["refused"] = True
            needs[name] = info
            changed = True
    if not needs:
        return
    _check_callers(module, ctx, needs, funcs, ctors, module_made)
    ctx.analyses[STATE_THREAD] = {k: v for k, v in needs.items() if not v.get("refused")}


def _check_callers(module, ctx, needs: dict, funcs: dict, ctors: set[str], module_made: set[str]) -> None:
    """Each use of a function in ``needs``: a call in a scope holding the state (one that makes the model,
    one that is given it, the module's own), as a statement of its own where the function hands it back."""
    scan(module, _CallerCheck(module, ctx, needs, ctors, module_made))


class _CallerCheck(ValueVisitor):
    def __init__(self, module, ctx, needs: dict, ctors: set[str], module_made: set[str]):
        super().__init__()
        self.ctx, self.needs, self.ctors, self.module_made = ctx, needs, ctors, module_made
        self.scopes: list = [module]
        self.statements: list = []
        self.calls = find_all(module, cst.Call)

    def visit_FunctionDef(self, n) -> None:
        self.scopes.append(n)

    def leave_FunctionDef(self, n) -> None:
        self.scopes.pop()

    def visit_SimpleStatementLine(self, n) -> None:
        self.statements.append(n)

    def leave_SimpleStatementLine(self, n) -> None:
        self.statements.pop()

    def visit_Call(self, n: cst.Call) -> None:
        if isinstance(n.func, cst.Name) and n.func.value in self.needs:
            self.check(n)

    def visit_Name(self, n: cst.Name) -> None:
        if n.value in self.needs and not any(isinstance(c, cst.Call) and c.func is n for c in self.calls):
            if not (isinstance(self.scopes[-1], cst.FunctionDef) and self.scopes[-1].name is n):
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"{n.value} takes the model's layer state "
                                "(`state`, BatchNorm) in the translation: this use is not a call fwport can give it "
                                "to; pass `state` by hand", n)

    def check(self, call: cst.Call) -> None:
        name = call.func.value
        info = self.needs[name]
        if info.get("refused"):
            return
        scopes, module_made = self.scopes, self.module_made
        scope = scopes[-1]
        b = _bound(call, info["params"], info["model"])
        top = scopes[1] if len(scopes) > 1 else None
        holds = b is not None and isinstance(b[0], cst.Name) and (
            top is None and b[0].value in module_made
            or top is not None and (b[0].value in _made(top, self.ctors)
                                    or top.name.value in self.needs and self.needs[top.name.value]["model"] == b[0].value
                                    or b[0].value in module_made and not _mentions(top, "state")))
        if not holds or scope is not top and top is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{name} takes the model's layer state (`state`, "
                            "BatchNorm) in the translation, and fwport cannot find that model's state here: pass "
                            "`state` (from `eqx.nn.make_with_state`) with the model", call)
            return
        stmt = self.statements[-1] if self.statements else None
        alone = stmt is not None and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) \
            and stmt.body[0].value is call
        if info["back"] and not alone and not info["threaded"]:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{name} runs the model in training mode and "
                            "hands its new layer state back (`state = ...`) in the translation: call it as a statement "
                            "of its own", call)


def _with_arg(call: cst.Call, info: dict, name: str = "state") -> cst.Call:
    b = None
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is None and i < len(info["params"]) and info["params"][i] == info["model"] \
                or a.keyword is not None and a.keyword.value == info["model"]:
            b = i
    if b is None:
        return call
    kw = args[b].keyword is not None
    new = cst.Arg(cst.Name(name), keyword=cst.Name("state") if kw else None,
                  equal=args[b].equal if kw else cst.MaybeSentinel.DEFAULT, comma=args[b].comma)
    args[b] = args[b].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.insert(b + 1, new)
    return call.with_changes(args=args)


class _Thread(cst.CSTTransformer):
    def __init__(self, needs: dict, names: dict[str, str] | None = None):
        super().__init__()
        self.needs = needs
        self.names = names or {}  # model name → its state's name where the caller makes it (STATE_NAMES)
        self.depth = 0
        self.top: list[str] = []  # the top-level function being visited

    def state_of(self, call: cst.Call) -> str:
        """The name of the state a call passes: ``state`` in a function given its model, else the model's own."""
        info = self.needs[call.func.value]
        b = _bound(call, info["params"], info["model"])
        if b is None or not isinstance(b[0], cst.Name):
            return "state"
        here = self.needs.get(self.top[-1]) if self.top else None
        if here is not None and here["model"] == b[0].value:
            return "state"
        return self.names.get(b[0].value, "state")

    def visit_FunctionDef(self, node) -> None:
        if self.depth == 0:
            self.top.append(node.name.value)
        self.depth += 1

    def leave_FunctionDef(self, original, updated):
        self.depth -= 1
        if self.depth == 0:
            self.top.pop()
        info = self.needs.get(updated.name.value) if self.depth == 0 else None
        if info is None:
            return updated
        params = list(updated.params.params)
        i = next((k for k, p in enumerate(params) if p.name.value == info["model"]), None)
        if i is None:
            return updated
        params.insert(i + 1, cst.Param(cst.Name("state"), comma=params[i].comma))
        params[i] = params[i].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        body = list(updated.body.body)
        if info["back"]:
            last = body[-1] if body else None
            ret = last.body[0] if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return) else None
            if info["threaded"] and ret is not None and isinstance(ret.value, cst.Tuple):  # return model, opt_state
                value = ret.value.with_changes(elements=[*ret.value.elements[:-1],
                                                         ret.value.elements[-1].with_changes(
                                                             comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                                         cst.Element(cst.Name("state"))])
                body[-1] = last.with_changes(body=[ret.with_changes(value=value)])
            elif not info["threaded"]:
                body.append(cst.parse_statement("return state\n"))
        return updated.with_changes(params=updated.params.with_changes(params=params),
                                    body=updated.body.with_changes(body=body))

    def leave_Call(self, original, updated):
        if isinstance(updated.func, cst.Name) and updated.func.value in self.needs:
            return _with_arg(updated, self.needs[updated.func.value], self.state_of(original))
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        if len(updated.body) != 1:
            return updated
        small = updated.body[0]
        call = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in self.needs):
            return updated
        info = self.needs[call.func.value]
        if not info["back"]:
            return updated
        name = self.state_of(call)
        if isinstance(small, cst.Expr) and not info["threaded"]:
            return updated.with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(name))], call)])
        if isinstance(small, cst.Assign) and info["threaded"] and len(small.targets) == 1 \
                and isinstance(small.targets[0].target, cst.Tuple):  # model, opt_state = train(...)
            t = small.targets[0].target
            t = t.with_changes(elements=[*t.elements[:-1], t.elements[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Element(cst.Name(name))])
            return updated.with_changes(body=[small.with_changes(targets=[small.targets[0].with_changes(target=t)])])
        return updated


def finish(module: cst.Module, ctx) -> cst.Module:
    needs = ctx.analyses.get(STATE_THREAD)
    if not needs:
        return module
    from fwport.core.rewrite import rewrite
    return rewrite(module, _Thread(needs, ctx.analyses.get(STATE_NAMES)))


def stateful_ctors(module: cst.Module, ctx, plans: dict) -> tuple[set[str], set[str]]:
    """The module's classes whose instance keeps a layer state, with the top-level functions returning one
    that the modules pass builds with its state (``def ResNet18(): return ResNet(BasicBlock, [2, 2, 2, 2])``:
    ``net, state = eqx.nn.make_with_state(ResNet18)(key=...)``); and the other such functions (a model that
    draws nothing at its initialisation), whose instances are left without their state."""
    from fwport.packs.torch2jax.passes.modules import OUTSIDE, _returning
    classes = {n for n, p in plans.items() if p.get("stateful")}
    if not classes:
        return set(), set()
    outside = ctx.analyses.get(OUTSIDE, {})
    returning = _returning(module, classes, set(outside.get("builders", ())))
    built = returning & set(outside.get("models", ()))
    return classes | built, returning - built
