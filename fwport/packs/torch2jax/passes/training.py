"""Training code: ``torch.optim`` loops → optax with an ``@eqx.filter_jit`` step.

The pass (before the rule pass, keeping line structure): ``torch.manual_seed(s)`` → ``key =
jax.random.key(s)`` (a root key instead of global state); ``model.train()`` / ``model.eval()`` on
a model an optimizer trains → ``model = eqx.nn.inference_mode(model, False / True)``; and an error
for a ``loss.backward()`` whose loop has not the shape the finishing step rewrites.

The rules translate the optimizer (``optax.sgd(...)``, ops.optimizer). The finishing step (it adds
and removes lines) then writes, after the optimizer, ``opt_state = optim.init(eqx.filter(model,
eqx.is_array))``; before the loop, a ``train_step(model, opt_state, <the loss's inputs>)`` with the
loss statements inside ``loss_fn`` (the model called through ``jax.vmap``), ``eqx.filter_value_and_grad``,
``optim.update`` and ``eqx.apply_updates``; and in the loop, ``zero_grad()`` / ``backward()`` /
``step()`` become one call of it. A model with dropout gets a key per step (``train_step(..., key)``,
split in the loop); a function stepping an optimizer it receives threads ``opt_state`` through its
signature, one stepping the module's optimizer declares ``global model, opt_state``; a StepLR /
ExponentialLR stepped once per epoch becomes the optimizer's optax schedule (``_schedules``). Before all
this, a step written in an equivalent spelling or order (``model.zero_grad()``, ``zero_grad(set_to_none=True)``,
zero_grad after the step) is put in the shape read (``_normal_steps``); so is a body stepping several optimizers (a
GAN) whose gradients a ``reset_grad()`` helper or ``model.zero_grad()`` clears. One loss stepped by several optimizers,
one after another (seq2seq's encoder and decoder optimizers), becomes one train_step differentiating the loss with
respect to the models together (_joint_steps, check_joint, joint_step). A loop stepping by hand (``for p in
model.parameters(): p.data.add_(p.grad, alpha=-lr)``, no optimizer) becomes a jitted ``sgd_step`` (_manual_plan).
Mixed precision (a ``with autocast`` around the loss, a GradScaler) and a ``retain_graph`` no later backward reads are
read as the plain step (plain_spellings); gradient accumulation (the step under ``if (i + 1) % k == 0:``) becomes a
train_step adding the gradients up in ``grads_acc`` and applying the update where the condition holds (_accumulated).
Checkpoint dicts saved and loaded with ``torch.save`` / ``torch.load`` → ``save_checkpoint`` / ``load_checkpoint``
(helpers written into the output); numpy data saved with ``torch.save`` → ``save_pickled_arrays`` (save_data).
"""
from __future__ import annotations

import builtins
import re

import libcst as cst

from fwport.core import written
from fwport.core.hooks import default_leave_transform
from fwport.core.engine import code, expr
from fwport.core.engine import expr as parsed_expression, statement as parsed_statement  # (parsed once per process, a fresh copy per call)
from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.finding import Severity
from fwport.core.names import ValueVisitor, children, dotted, dotted_text, find_all, method_of, scan
from fwport.core.rewrite import rewrite
from fwport.packs.torch2jax import keys, nograd
from fwport.packs.torch2jax.backends import AUTOCAST
from fwport.packs.torch2jax.frozen import FROZEN_CALLS
from fwport.packs.torch2jax.batch import _atom_code  # the receiver, parenthesised when not an atom
from fwport.packs.torch2jax.ops import LBFGS_STEPS, OPTIMIZERS, STATEFUL, chained_models, model_group
from fwport.packs.torch2jax.passes import learning_rate, state
from fwport.packs.torch2jax.passes.state import state_name as _state_name  # step() binds `state`
from fwport.packs.torch2jax.passes.modules import BARE_LAYERS, OUTSIDE, PLANS, keyed_layer
from fwport.packs.torch2jax.ranks import target_names

_PARAMS = re.compile(r"\b([A-Za-z_]\w*)\.parameters\(\s*\)")


def _method_stmt(stmt: cst.CSTNode, method: str) -> str | None:
    """``X.method()`` as a whole statement → X's text."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr):
        call = stmt.body[0].value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == method \
                and not call.args:
            return dotted_text(call.func.value)
    return None


def _zero_grad(stmt: cst.CSTNode) -> str | None:
    """``X.zero_grad()`` or ``X.zero_grad(set_to_none=...)`` as a whole statement → X's text (whether the
    gradients become None or zeros changes nothing in a step that computes them afresh)."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr):
        call = stmt.body[0].value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "zero_grad" \
                and all(a.keyword is not None and a.keyword.value == "set_to_none" for a in call.args):
            return dotted_text(call.func.value)
    return None


def _calls_again(scope: cst.CSTNode, call: cst.Call, name: str) -> bool:
    """Whether ``scope`` (a function, or the module's top-level code) calls ``name`` (``model``, ``model.sample``) in
    more than one place, or makes ``call`` inside a for / while statement: the same key read as it is would draw alike."""
    body = scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body
    calls, looped = 0, False
    for st in body:
        if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            continue
        calls += sum(1 for c in find_all(st, cst.Call) if isinstance(c.func, (cst.Name, cst.Attribute))
                     and dotted_text(c.func) == name)  # model(...), or model.method(...) for a drawing method
        for loop in [*find_all(st, cst.For), *find_all(st, cst.While)]:
            looped = looped or any(c is call for c in find_all(loop, cst.Call))
    return calls > 1 or looped


def _int_counters(loop: cst.For) -> set[str]:
    """The names ``loop`` binds to Python ints: ``for i in range(...)``, ``for i, batch in enumerate(...)``."""
    it = loop.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("range", "enumerate")):
        return set()
    target = loop.target
    if it.func.value == "enumerate":
        if not (isinstance(target, cst.Tuple) and target.elements):
            return set()
        target = target.elements[0].value
    return {target.value} if isinstance(target, cst.Name) else set()


_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)


class _Chains(cst.CSTVisitor):
    """_arithmetic_only: for each load of ``name``, whether it only computes (arithmetic up to the loss's value)."""

    def __init__(self, name: str, loss: str):
        super().__init__()
        self.name, self.loss = name, loss
        self.stack: list[cst.CSTNode] = []
        self.ok = True

    def on_visit(self, node) -> bool:
        if isinstance(node, cst.Name) and node.value == self.name:
            self.ok = self.ok and self.computes(node)
        self.stack.append(node)
        return True

    def on_leave(self, node) -> None:
        self.stack.pop()

    def visit_Attribute(self, node) -> bool:
        return True

    def computes(self, node) -> bool:
        child, i = node, len(self.stack) - 1
        while i >= 0 and isinstance(self.stack[i], (cst.BinaryOperation, cst.UnaryOperation)):
            parent = self.stack[i]
            if isinstance(parent, cst.UnaryOperation):
                if not isinstance(parent.operator, (cst.Minus, cst.Plus)):
                    return False
            elif not isinstance(parent.operator, _ARITHMETIC):
                return False
            elif isinstance(parent.operator, cst.Power) and not (
                    child is parent.right and isinstance(parent.left, cst.Float)
                    or child is parent.left and isinstance(parent.right, cst.Integer)):
                return False  # (an integer array to a negative power, an int to a large one: not Python's)
            child, i = parent, i - 1
        # the top of the chain: the loss's value (loss = ... * (epoch + 1), loss = loss + ...)
        top = self.stack[i] if i >= 0 else None
        return child is not node and isinstance(top, cst.Assign) and top.value is child and len(top.targets) == 1 \
            and isinstance(top.targets[0].target, cst.Name) and top.targets[0].target.value == self.loss


def _arithmetic_only(stmts: list, name: str, loss: str) -> bool:
    """Whether every read of ``name`` in ``stmts`` (the loss statements) is an operand of arithmetic (+ - * / // %
    and a float's power) whose result is the value assigned to ``loss``: there a traced array computes as the Python
    int (jnp.asarray(name): one compilation of train_step for every value)."""
    v = _Chains(name, loss)
    for st in stmts:
        scan(st, v)
    return v.ok


def _traced_counters(scope, stmts: list, names, loss: str) -> set[str]:
    """The ``names`` (a train_step's inputs) that are Python ints a for statement of ``scope`` counts and nothing
    else binds, only computed with in the loss statements ``stmts`` (_arithmetic_only)."""
    counters: set[str] = set()
    bound: set[str] = set()
    for f in find_all(scope, cst.For):
        own = _int_counters(f)
        counters |= own
        bound |= set(target_names(f.target)) - own
    for a in find_all(scope, cst.Assign):
        for t in a.targets:
            bound |= set(target_names(t.target)) if not isinstance(t.target, cst.Name) else {t.target.value}
    for node in [*find_all(scope, cst.AugAssign), *find_all(scope, cst.AnnAssign)]:
        bound |= set(target_names(node.target))
    for node in [*find_all(scope, cst.NamedExpr), *find_all(scope, cst.AsName), *find_all(scope, cst.Param),
                 *find_all(scope, cst.CompFor)]:
        bound |= set(target_names(getattr(node, "target", None) or getattr(node, "name", None)))
    return {n for n in names if n in counters and n not in bound and _arithmetic_only(stmts, n, loss)}


class _NormalSteps(cst.CSTTransformer):
    """A loop body whose step is written in an equivalent order or spelling (_normal_steps) → the shape
    _loop_plan reads: ``X.zero_grad()`` (or ``set_to_none=``) of the optimizer or of the model it trains →
    ``optimizer.zero_grad()``, and a zero_grad after ``optimizer.step()`` (clearing for the next iteration)
    moved to the top of the body where the gradients are clear when the loop starts."""

    def __init__(self, ctx, module: cst.Module):
        super().__init__()
        self.ctx = ctx
        self.scopes: list = [module]
        self.rebuilt: dict[int, tuple] = {}  # id of a rebuilt node → (it, the node it replaces)
        self.opts: dict[int, dict] = {}
        self.helpers: dict[str, list[str]] = {}  # functions that only clear optimizers (_zero_helpers)
        self.scalers: set[str] = set()  # GradScalers read plainly (plain_spellings)
        self.counters: list[set[str]] = []  # per enclosing for statement: the Python ints it counts (_int_counters)
        self.loop_depth: list[int] = [0]  # per scope (the module, each function): the loops enclosing the visit
        self.module = module

    def on_leave(self, original_node, updated_node):
        out = default_leave_transform(self, original_node, updated_node)  # (CSTTransformer.on_leave)
        if out is not original_node and isinstance(out, cst.CSTNode):
            self.rebuilt[id(out)] = (out, original_node)
            if self.ctx.is_settled(original_node):
                self.ctx.settle(out)
        return out

    def visit_ClassDef(self, node) -> bool:
        return False

    def visit_FunctionDef(self, node) -> None:
        self.scopes.append(node)
        self.loop_depth.append(0)

    def leave_FunctionDef(self, original, updated):
        self.scopes.pop()
        self.loop_depth.pop()
        return updated

    def visit_While(self, node) -> None:
        self.loop_depth[-1] += 1

    def leave_IndentedBlock(self, original, updated):
        if self.loop_depth[-1]:
            return updated
        body = self.straight_normal(list(updated.body))
        return updated if body is None else updated.with_changes(body=body)

    def straight_normal(self, body: list) -> list | None:
        """A block's straight-line steps (_straight_segments) in the shape _loop_plan reads: ``model.zero_grad()``
        (or ``set_to_none=``) of the model the optimizer trains → ``optimizer.zero_grad()``; and none at all where the
        gradients are clear (a notebook's first step: ``model = Net()`` built in this block, no backward() since, nor a
        call of a function of the file that has one) → ``optimizer.zero_grad()`` read before backward(). None where
        nothing changes."""
        if not any(_backward(st) for st in body):
            return None
        scope = self.scopes[-1]
        if id(scope) not in self.opts:
            self.opts[id(scope)] = _optimizer_models(self.ctx, scope)
        opts = self.opts[id(scope)]
        classes = {st.name.value for st in self.module.body if isinstance(st, cst.ClassDef)}
        backwarding = {st.name.value for st in self.module.body if isinstance(st, cst.FunctionDef) and any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward" for c in find_all(st, cst.Call))}
        out = list(body)
        changed = False
        for first, end in reversed(_straight_segments(body, opts)):
            opt = _method_stmt(body[end - 1], "step")
            model = opts.get(opt)
            if model is None:
                continue
            seg = body[first:end]
            zeros = [first + i for i, st in enumerate(seg) if _zero_grad(st) in (opt, model)]
            back = next(first + i for i, st in enumerate(seg) if _backward(st))
            if len(zeros) == 1:
                z = zeros[0]
                if _method_stmt(body[z], "zero_grad") == opt:
                    continue
                what = f"{_zero_grad(body[z])}.zero_grad({'...' if body[z].body[0].value.args else ''}) as {opt}.zero_grad()"
                out[z] = body[z].with_changes(body=[cst.Expr(parsed_expression(f"{opt}.zero_grad()"))])
            elif zeros or any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "zero_grad"
                              for st in seg for c in find_all(st, cst.Call)):
                continue
            else:
                built = next((k for k in range(back - 1, -1, -1) if _assigns_anywhere(body[k], model)), None)
                if built is None or not _is_assign(body[built]):
                    continue
                value = body[built].body[0].value
                while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                        and value.func.attr.value in ("to", "cuda", "cpu", "double", "float"):
                    value = value.func.value
                if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in classes):
                    continue
                if any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward"
                       or isinstance(c.func, cst.Name) and c.func.value in backwarding
                       for st in body[built + 1:back] for c in find_all(st, cst.Call)):
                    continue
                what = (f"{opt}.zero_grad() before {_backward(body[back])}.backward(): the gradients are clear there "
                        f"({model} is built above and nothing computes gradients since)")
                out.insert(back, parsed_statement(f"{opt}.zero_grad()\n"))
            changed = True
            self.ctx.report(Severity.INFO, "idiom-replaced", f"training step read with {what}: the train_step "
                            "computes the gradients afresh at each step", body[back])
        return out if changed else None

    def visit_For(self, node) -> None:
        self.counters.append(_int_counters(node))
        self.loop_depth[-1] += 1

    def leave_For(self, original, updated):
        self.loop_depth[-1] -= 1
        out = self.normal(original, updated)
        counters = set().union(*self.counters)
        self.counters.pop()
        if counters and isinstance(out, cst.For) and isinstance(out.body, cst.IndentedBlock):
            body = list(out.body.body)
            plan = _loop_plan(body)
            scope = self.scopes[-1]
            if plan is not None and id(scope) not in self.opts:
                self.opts[id(scope)] = _optimizer_models(self.ctx, scope)
            model = self.opts[id(scope)].get(plan[0]) if plan is not None else None
            if model is not None and any(_assigns_loss(body[i], plan[1]) for i in range(plan[2], plan[3])):
                names = _Names()
                moved = _split_block(body, plan, model)[0]  # the statements that go into loss_fn
                for st in moved:
                    scan(st, names)
                # (those only computed with go in as jnp.asarray(counter): the step's _traced_counters)
                traced = _traced_counters(scope, moved, sorted(counters & set(names.loaded)), plan[1])
                static = sorted(n for n in counters & set(names.loaded) if n not in traced)
                if traced:
                    self.ctx.report(Severity.INFO, "idiom-replaced", f"the loss computes with {', '.join(sorted(traced))}"
                                    ", a Python int a for statement counts: train_step takes it as jnp.asarray(...), a "
                                    "traced array (eqx.filter_jit would take an int as static and compile train_step "
                                    "again for every value)", original)
                if static:
                    said = ", ".join(static)
                    self.ctx.report(Severity.WARNING, "idiom-replaced", f"the loss reads {said}, a Python int a for "
                                    "statement counts: train_step takes it as an argument, which eqx.filter_jit treats "
                                    "as static, so train_step compiles again for every new value; where the loss only "
                                    f"computes with it, pass jnp.asarray({static[0]}) instead (a traced array: one "
                                    "compilation)", original)
        return out

    def leave_While(self, original, updated):
        self.loop_depth[-1] -= 1
        return self.normal(original, updated)

    def normal(self, original, updated):
        body = list(updated.body.body)
        if isinstance(updated.body, cst.IndentedBlock):
            plain = self.plain_spellings(original, body)
            if plain is not None:
                body = plain
                updated = updated.with_changes(body=updated.body.with_changes(body=body))
        if not isinstance(updated.body, cst.IndentedBlock) or not any(_backward(st) for st in body):
            return updated
        summed = _summed_backwards(body)
        if summed is not None:
            body, what = summed
            self.ctx.report(Severity.INFO, "idiom-replaced", f"training step read with {what}: the gradients "
                            "of a sum are the sum of the gradients, which is what the backward() calls left in "
                            "the parameters before the step", original)
            updated = updated.with_changes(body=updated.body.with_changes(body=body))
        scope = self.scopes[-1]
        if id(scope) not in self.opts:
            self.opts[id(scope)] = _optimizer_models(self.ctx, scope)
        again = _recomputed(body, self.opts[id(scope)], self.ctx, scope)
        if again is not None:
            body, what = again
            self.ctx.report(Severity.INFO, "idiom-replaced", f"training step read with {what}: PyTorch's backward() "
                            "reaches the model through the value computed earlier; a JAX loss function differentiates "
                            "only what it computes (the same value: the model and its inputs are unchanged since)",
                            original)
            updated = updated.with_changes(body=updated.body.with_changes(body=body))
        if len({_method_stmt(st, "step") for st in body} - {None}) > 1 \
                or any(_helper_call(st, self.helpers) for st in body):
            return self.normal_steps(original, updated, body)
        if _loop_plan(body) is not None:
            return updated
        steps = [i for i, st in enumerate(body) if _method_stmt(st, "step")]
        scope = self.scopes[-1]
        if id(scope) not in self.opts:
            self.opts[id(scope)] = _optimizer_models(self.ctx, scope)
        opt = _method_stmt(body[steps[0]], "step") if len(steps) == 1 else None
        model = self.opts[id(scope)].get(opt)
        zeros = [i for i, st in enumerate(body) if _zero_grad(st) in (opt, model)]
        if model is None or len(zeros) != 1:
            return updated
        z, step = zeros[0], steps[0]
        new = body[z].with_changes(body=[cst.Expr(parsed_expression(f"{opt}.zero_grad()"))])
        what = [] if _zero_grad(body[z]) == opt and _method_stmt(body[z], "zero_grad") else \
            [f"{_zero_grad(body[z])}.zero_grad({'...' if body[z].body[0].value.args else ''}) as {opt}.zero_grad()"]
        if z > step:  # cleared after the step for the next iteration: the same as before the loss where the
            # gradients are clear at the loop's start (no other backward() in the scope) and no iteration skips it
            inside = {id(c) for c in find_all(original, cst.Call)}
            others = [c for c in find_all(scope, cst.Call) if isinstance(c.func, cst.Attribute)
                      and c.func.attr.value == "backward" and id(c) not in inside]
            if others or find_all(original, cst.Continue) or any(_backward(st) for st in body[step:]):
                return updated
            body = [new, *body[:z], *body[z + 1:]]
            what.append(f"{opt}.zero_grad() after {opt}.step() as at the top of the body (the gradients are clear "
                        "when the loop starts)")
        else:
            body[z] = new
        if _loop_plan(body) is None:
            return updated
        self.ctx.report(Severity.INFO, "idiom-replaced", f"training step read with {' and '.join(what)}: the "
                        "train_step computes the gradients afresh at each step", original)
        return updated.with_changes(body=updated.body.with_changes(body=body))


    def bound_value(self, name: str) -> cst.BaseExpression | None:
        """The value of the one assignment binding ``name`` in the loop's scope (else in the module), or None."""
        for scope in (self.scopes[-1], self.scopes[0]):
            found = [a for a in _scope_assigns(scope) if any(
                isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)]
            if found:
                return found[0].value if len(found) == 1 and len(found[0].targets) == 1 else None
        return None

    def autocast_with(self, st) -> str | None:
        """``with <autocast>:`` holding only simple statements and no backward() (the loss computed in mixed
        precision): "call" where the item is a ``torch.autocast(...)`` call (its warning is the unwrapping's),
        "name" where it is a name bound once to autocast calls or ``contextlib.nullcontext()`` (nanoGPT's
        ``ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(...)``, whose rule warns), else None."""
        if not (isinstance(st, cst.With) and len(st.items) == 1 and st.items[0].asname is None and st.asynchronous is None
                and isinstance(st.body, cst.IndentedBlock)
                and all(isinstance(x, cst.SimpleStatementLine) for x in st.body.body)):
            return None
        if any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward"
               for x in st.body.body for c in find_all(x, cst.Call)):
            return None
        item = st.items[0].item
        resolve = self.ctx.imports.resolve
        if isinstance(item, cst.Call):
            return "call" if resolve(item.func) in AUTOCAST else None
        if not isinstance(item, cst.Name):
            return None
        value = self.bound_value(item.value)
        if not isinstance(value, (cst.Call, cst.IfExp)):
            return None
        calls = [resolve(c.func) for c in find_all(value, cst.Call)]
        top = [value] if isinstance(value, cst.Call) else [value.body, value.orelse]
        if not all(isinstance(v, cst.Call) for v in top) or not calls or not any(q in AUTOCAST for q in calls) \
                or not all(q in AUTOCAST or q == "contextlib.nullcontext" for q in calls):
            return None
        return "name"

    def scaler_of(self, node) -> str | None:
        """``S`` of ``S.<method>(...)`` where S is a name bound once to a ``GradScaler(...)``, else None."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
            value = self.bound_value(node.func.value.value)
            if isinstance(value, cst.Call) and self.ctx.imports.resolve(value.func) in GRAD_SCALERS:
                return node.func.value.value
        return None

    def unscaled(self, body: list) -> tuple[list, str] | None:
        """A body stepping through a GradScaler (``S.scale(loss).backward()``, ``S.step(opt)``, ``S.update()``,
        maybe ``S.unscale_(opt)`` before a clipping) → ``loss.backward()`` and ``opt.step()``, the others gone; with the
        scaler's name, or None where the scaler is used otherwise in the loop."""
        names: set[str] = set()
        uses = {"backward": 0, "step": 0}

        def plain(line):
            if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(line.body[0], cst.Expr)
                    and isinstance(line.body[0].value, cst.Call)):
                return line
            call = line.body[0].value
            f = call.func
            if isinstance(f, cst.Attribute) and f.attr.value == "backward" and self.scaler_of(f.value) \
                    and f.value.func.attr.value == "scale" and len(f.value.args) == 1 and f.value.args[0].keyword is None:
                names.add(self.scaler_of(f.value))
                uses["backward"] += 1
                return line.with_changes(body=[cst.Expr(call.with_changes(
                    func=f.with_changes(value=f.value.args[0].value)))])
            s = self.scaler_of(call)
            if s is None:
                return line
            names.add(s)
            method = f.attr.value
            if method == "step" and len(call.args) == 1 and call.args[0].keyword is None \
                    and isinstance(call.args[0].value, (cst.Name, cst.Attribute)):
                uses["step"] += 1
                return line.with_changes(body=[cst.Expr(parsed_expression(f"{code(call.args[0].value)}.step()"))])
            if method in ("update", "unscale_") and len(call.args) <= 1 and not any(a.keyword for a in call.args):
                return None
            return line

        def block(stmts: list, top: bool) -> list | None:
            out = []
            for st in stmts:
                if isinstance(st, cst.If) and isinstance(st.body, cst.IndentedBlock) and st.orelse is None and top:
                    inner = block(list(st.body.body), False)
                    if inner is None:
                        return None
                    st = st.with_changes(body=st.body.with_changes(body=inner))
                else:
                    st = plain(st)
                if st is not None:
                    out.append(st)
            return out or None

        if "scale" not in code(cst.Module(body=body)):
            return None
        out = block(body, True)
        if out is None or len(names) != 1 or uses != {"backward": 1, "step": 1}:
            return None
        s = names.pop()
        if any(isinstance(n, cst.Name) and n.value == s for st in out for n in find_all(st, cst.Name)):
            return None  # the scaler read otherwise (its scale logged, a state_dict saved)
        return out, s

    def plain_spellings(self, original, body: list) -> list | None:
        """A training loop's body with its mixed-precision and graph-keeping spellings written plainly (the
        translation computes in float32 and differentiates a function, keeping no graph): a ``with autocast:``
        holding the loss statements unwrapped, a GradScaler's scale / step / update read as the plain step
        (unscaled), and ``loss.backward(retain_graph=...)`` of the loop's only backward() as ``loss.backward()``.
        None where nothing changes."""
        if not any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward"
                   for st in body for c in find_all(st, cst.Call)):
            return None
        what: list[str] = []
        out: list = []
        for st in body:
            kind = self.autocast_with(st)
            if kind is None:
                out.append(st)
                continue
            inner = list(st.body.body)
            inner[0] = inner[0].with_changes(leading_lines=[*st.leading_lines, *inner[0].leading_lines])
            out += inner
            what.append(f"`with {code(st.items[0].item)}:` unwrapped")
            if kind == "call":
                enabled = next((a.value for a in st.items[0].item.args
                                if a.keyword is not None and a.keyword.value == "enabled"), None)
                if not (isinstance(enabled, cst.Name) and enabled.value == "False"):
                    self.ctx.report(Severity.WARNING, "approximate", f"`with {code(st.items[0].item)}:` unwrapped: JAX "
                                    "has no autocast: the loss computes in its arrays' own dtype (float32 here, where "
                                    "PyTorch computes eligible ops in float16 / bfloat16): more precise and slower",
                                    st.items[0].item)
        scaled = self.unscaled(out)
        if scaled is not None:
            out, s = scaled
            self.scalers.add(s)
            what.append(f"{s}.scale(loss).backward() / {s}.step(opt) / {s}.update() as loss.backward() / opt.step() "
                        f"(GradScaler: the translation computes in float32 and takes every step, where {s} multiplies "
                        "the loss and divides the gradients by the same power of two, and skips a step whose "
                        "gradients hold inf or NaN)")
        backs = [c for st in out for c in find_all(st, cst.Call)
                 if isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward"]
        kept = [i for i, st in enumerate(out) if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1
                and isinstance(st.body[0], cst.Expr) and isinstance(st.body[0].value, cst.Call)
                and isinstance(st.body[0].value.func, cst.Attribute) and st.body[0].value.func.attr.value == "backward"
                and st.body[0].value.args
                and all(a.keyword is not None and a.keyword.value == "retain_graph" for a in st.body[0].value.args)]
        if len(backs) == 1 and kept:
            # the graph kept is read by no later iteration: no value the loss reads is carried over from the previous
            # one (a hidden state not detached, whose graph the next backward() would go through)
            first: dict[str, str] = {}
            for st in out[:kept[0] + 1]:
                _first_uses(st, first)
            assigned: dict[str, str] = {}
            for st in out:
                _first_uses(st, assigned)
            carried = {n for n, how in first.items() if how == "load" and n in assigned and assigned[n] == "load"
                       and any(_assigns_anywhere(st, n) for st in out)}
            if not carried:
                st = out[kept[0]]
                call = st.body[0].value
                out[kept[0]] = st.with_changes(body=[cst.Expr(call.with_changes(args=[]))])
                what.append(f"{code(call)} as {code(call.func)}() (no later backward() reads the graph it keeps)")
        if not what:
            return None
        self.ctx.report(Severity.INFO, "idiom-replaced", f"training step read with {'; '.join(what)}", original)
        return out

    def leave_Module(self, original, updated):
        """The ``S = GradScaler(...)`` bindings of the scalers read plainly (unscaled), removed where nothing
        reads S any more."""
        body = self.straight_normal(list(updated.body))
        if body is not None:
            updated = updated.with_changes(body=body)
        for s in sorted(self.scalers):
            t = _DropBinding(s, self.ctx)
            out = updated.visit(t)
            if t.dropped and not any(n.value == s for n in find_all(out, cst.Name)):
                updated = out
        return updated

    def normal_steps(self, original, updated, body: list):
        """A body stepping several optimizers (a GAN's discriminator, then its generator) whose gradients are
        cleared by ``model.zero_grad()`` or by a helper clearing several optimizers (``reset_grad()``, _zero_helpers):
        each optimizer's one ``optimizer.zero_grad()``, the last clearing of it in its own step (after the previous
        step, before its first backward()); its other clearings go. Those elsewhere clear gradients the kept one
        clears again before they are read (or that no step reads): the train_steps compute each optimizer's gradients
        from its own loss. As written where a clearing falls between an optimizer's backward() and its step(), or a
        step's gradients would add up over an earlier backward() (no clearing of its own in its step)."""
        scope = self.scopes[-1]
        if id(scope) not in self.opts:
            self.opts[id(scope)] = _optimizer_models(self.ctx, scope)
        opts = self.opts[id(scope)]
        steps = [_method_stmt(st, "step") for st in body if _method_stmt(st, "step")]
        if len(set(steps)) != len(steps) or any(o not in opts for o in steps):
            return updated
        by_model: dict[str, str | None] = {}
        for o in steps:
            m = opts[o]
            if m is not None:
                by_model[m] = o if m not in by_model else None  # one model trained by two optimizers: not read
        local = _local_names(scope) if isinstance(scope, cst.FunctionDef) else set()
        flat: list[tuple[cst.CSTNode, str | None]] = []  # (statement, the optimizer it clears)
        what: list[str] = []
        for st in body:
            helper = _helper_call(st, self.helpers)
            if helper:
                cleared = self.helpers[helper]
                if any(o not in steps or o in local for o in cleared):
                    return updated  # clears an optimizer this loop does not step, or a local of that name
                for k, o in enumerate(cleared):
                    line = parsed_statement(f"{o}.zero_grad()\n")
                    flat.append((line.with_changes(leading_lines=st.leading_lines) if k == 0 else line, o))
                what.append(f"{helper}() as {', '.join(f'{o}.zero_grad()' for o in cleared)}")
                self.ctx.analyses.setdefault(ZERO_HELPERS, set()).add(helper)
                continue
            z = _zero_grad(st)
            if z is None:
                flat.append((st, None))
                continue
            o = z if z in steps else by_model.get(z)
            if o is None:
                return updated
            if z != o or not _method_stmt(st, "zero_grad"):
                what.append(f"{z}.zero_grad({'...' if st.body[0].value.args else ''}) as {o}.zero_grad()")
            flat.append((st, o))
        keep: set[int] = set()
        prev = -1
        group = None  # (the statement before the step's loss statements, its first backward())
        for k, (st, _) in enumerate(flat):
            o = _method_stmt(st, "step")
            if o is None:
                continue
            backs = [j for j in range(prev + 1, k) if _backward(flat[j][0])]
            if backs:
                group = (prev, backs[0])
            elif group is None or prev != k - 1:  # (a step right after another: on the same loss, _joint_steps)
                return updated
            zeros = [j for j in range(group[0] + 1, group[1]) if flat[j][1] == o]
            if not zeros or any(flat[j][1] == o for j in range(group[1], k)):
                return updated
            keep.add(zeros[-1])
            prev = k
        out, carried = [], []
        for k, (st, o) in enumerate(flat):
            if o is not None and k not in keep:
                carried += [ln for ln in st.leading_lines if ln.comment is not None]
                continue
            if o is not None:
                st = parsed_statement(f"{o}.zero_grad()\n").with_changes(leading_lines=st.leading_lines)
            if carried:
                st = st.with_changes(leading_lines=[*carried, *st.leading_lines])
                carried = []
            out.append(st)
        if sum(1 + len(_joint_steps(rest, plan)) for rest, plan in _sequential_plans(out)) != len(steps):
            return updated
        dropped = len(flat) - len(body) + sum(1 for st in body if _helper_call(st, self.helpers)) \
            + sum(1 for st in body if _zero_grad(st)) - len(keep)
        if dropped:
            what.append("each optimizer's zero_grad() in its own step only (the others clear gradients no step reads)")
        if what:
            self.ctx.report(Severity.INFO, "idiom-replaced", f"training steps read with {'; '.join(what)}: each "
                            "train_step computes its optimizer's gradients afresh from its own loss", original)
        return updated.with_changes(body=updated.body.with_changes(body=out))


#: the GradScaler classes (torch.amp's and its deprecated CUDA / CPU spellings)
GRAD_SCALERS = frozenset({"torch.amp.GradScaler", "torch.GradScaler", "torch.cuda.amp.GradScaler",
                          "torch.cpu.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})


class _DropBinding(cst.CSTTransformer):
    """Removes the statements ``name = GradScaler(...)`` (dropped: how many)."""

    def __init__(self, name: str, ctx):
        super().__init__()
        self.name, self.ctx, self.dropped = name, ctx, 0

    def leave_SimpleStatementLine(self, original, updated):
        if _is_assign(updated) and len(updated.body[0].targets) == 1 \
                and isinstance(updated.body[0].targets[0].target, cst.Name) \
                and updated.body[0].targets[0].target.value == self.name \
                and isinstance(updated.body[0].value, cst.Call) \
                and self.ctx.imports.resolve(updated.body[0].value.func) in GRAD_SCALERS:
            self.dropped += 1
            return cst.RemoveFromParent()
        return updated


def _summed_backwards(body: list) -> tuple[list, str] | None:
    """A loop body whose step reads the gradients of several losses added up (pytorch/examples' dcgan:
    ``errD_real.backward()``, later ``errD_fake.backward()``, then ``optimizerD.step()``, nothing clearing the
    gradients between them) → one backward() of their sum where the last one was: the sum a statement between the
    last backward() and the step already computes (``errD = errD_real + errD_fake``, moved up) or ``<first
    loss>_total``. (the new body, what was read) or None where no step reads such a sum, or where a loss is
    assigned again after its backward(), the gradients are read or cleared between the backward() calls, or a
    backward() sits in a nested block there."""
    out, what, start = list(body), [], 0
    k = 0
    while k < len(out):
        opt = _method_stmt(out[k], "step")
        if opt is None:
            k += 1
            continue
        seg = range(start, k)
        backs = [i for i in seg if _backward(out[i])]
        start = k + 1
        if len(backs) < 2:
            k += 1
            continue
        losses = [_backward(out[i]) for i in backs]
        if len(set(losses)) != len(losses) or any(not l.isidentifier() for l in losses):
            return None
        first, last = backs[0], backs[-1]
        for i in range(first, last + 1):
            if i in backs:
                continue
            st = out[i]
            calls = find_all(st, cst.Call)
            if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in ("zero_grad", "backward", "step")
                   for c in calls) or any(a.attr.value == "grad" for a in find_all(st, cst.Attribute)):
                return None
        for loss, b in zip(losses, backs):
            if not any(_assigns(out[i], loss) for i in range(seg.start, b)) \
                    or any(_assigns(out[i], loss) for i in range(b + 1, k)):
                return None
        # the sum already written between the last backward() and the step: N = l1 + l2 (+ ...)
        total, at = None, None
        for i in range(last + 1, k):
            st = out[i]
            if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign) \
                    and len(st.body[0].targets) == 1 and isinstance(st.body[0].targets[0].target, cst.Name):
                terms, node = [], st.body[0].value
                while isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
                    terms.append(node.right)
                    node = node.left
                terms.append(node)
                if all(isinstance(t, cst.Name) for t in terms) and sorted(t.value for t in terms) == sorted(losses):
                    name = st.body[0].targets[0].target.value
                    n = _Names()
                    for j in range(last + 1, i):
                        scan(out[j], n)
                    if name not in n.loaded and name not in n.stored and name not in losses:
                        total, at = name, i
                    break
        if total is None:
            total = f"{losses[0]}_total"
            n = _Names()
            for st in body:
                scan(st, n)
            if total in n.loaded or total in n.stored:
                return None
            line = parsed_statement(f"{total} = {' + '.join(losses)}\n")
        else:
            line = out[at].with_changes(leading_lines=())
        back = out[last]
        new = [line.with_changes(leading_lines=back.leading_lines),
               parsed_statement(f"{total}.backward()\n")]
        rebuilt, carried = [], []
        for i, st in enumerate(out):
            if i in backs[:-1] or i == at:  # its comments stay, on the next statement
                carried += [ln for ln in st.leading_lines if ln.comment is not None]
                continue
            for s_ in (new if i == last else [st]):
                if carried:
                    s_ = s_.with_changes(leading_lines=[*carried, *s_.leading_lines])
                    carried = []
                rebuilt.append(s_)
        what.append(f"{', '.join(l + '.backward()' for l in losses)} before {opt}.step() as {total}.backward() "
                    f"({total} = {' + '.join(losses)})")
        k = k - len(backs) + 2 - (at is not None)
        out = rebuilt
        start = k + 1
        k += 1
    return (out, "; ".join(what)) if what else None


def _names_loaded(stmt) -> list[str]:
    n = _Names()
    scan(stmt, n)
    return list(n.loaded)


def _model_cast(call: cst.Call) -> bool:
    """``Net(...).double()`` / ``.float()`` / ``.half()``: a model built and cast in one expression (tensor_methods'
    model_cast casts its arrays leaf by leaf): still a model of the class."""
    return call.func.attr.value in ("double", "float", "half") and not call.args and isinstance(call.func.value, cst.Call) \
        and isinstance(call.func.value.func, cst.Name)


def _instance_classes(scope, plans: dict) -> dict[str, str]:
    """``name = Cls(...)`` of a module class of the file (``.to(device)`` / ``.cuda()`` after it allowed) in a
    scope: name → Cls."""
    out = {}
    for a in _scope_assigns(scope):
        value = a.value
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and (value.func.attr.value in ("to", "cuda", "cpu") or _model_cast(value)):
            value = value.func.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in plans:
            out.update((n, value.func.value) for t in a.targets for n in target_names(t.target))
    return out


#: ctx.analyses: the model calls _recomputed repeats in a step of a model keeping a layer state (BatchNorm): in
#: training mode its output uses the batch's statistics, not the state it is given, and in inference mode the state
#: is as PyTorch read it; the new state is dropped (``fake, _ = ...``): PyTorch updated the statistics once
STATE_KEPT = "torch2jax.state_kept"


def _recomputed(body: list, opts: dict, ctx, scope) -> tuple[list, str] | None:
    """A step whose loss reaches its model only through a value computed earlier in the loop body (dcgan's
    generator step: ``errG = criterion(netD(fake), label)`` with ``fake = netG(noise)`` computed for the
    discriminator's step) → that assignment repeated after the step's zero_grad(), so that the loss statements
    compute it from the model (what jax differentiates). Only where the assignment reads the model directly, neither
    it, the model nor what it reads is assigned again before the step, and the model's class (a module of this file)
    draws nothing (dropout would draw again); one keeping a layer state (BatchNorm) is called again with the state the
    loop holds and its new state dropped (STATE_KEPT): the statistics are updated once, as in PyTorch.
    (the new body, what was read) or None."""
    plans = ctx.analyses.get(PLANS, {})
    classes = None
    out, what, prev = list(body), [], -1
    k = 0
    while k < len(out):
        opt = _method_stmt(out[k], "step")
        if opt is None:
            k += 1
            continue
        lo, prev = prev + 1, k
        model = opts.get(opt)
        zeros = [i for i in range(lo, k) if _zero_grad(out[i]) in (opt, model)]
        backs = [i for i in range(lo, k) if _backward(out[i])]
        if model is None or not model.isidentifier() or len(zeros) != 1 or len(backs) != 1 or backs[0] < zeros[0]:
            k += 1
            continue
        z, b = zeros[0], backs[0]
        loss = _backward(out[b])
        last = next((i for i in range(b - 1, z, -1) if _assigns(out[i], loss)), None)
        if last is None:
            k += 1
            continue
        start = last  # the loss statements: the assignments just before backward() (_step_span)
        while start - 1 > z and _is_assign(out[start - 1]) and not _mode_switch(out[start - 1]):
            start -= 1
        n = _Names()
        for i in range(start, b):
            scan(out[i], n)
        if model in n.loaded:
            k += 1
            continue
        first: dict[str, str] = {}
        for i in range(start, b):
            _first_uses(out[i], first)
        defs: dict[str, int] = {}
        for i in range(start):
            st = out[i]
            if _is_assign(st) and len(st.body[0].targets) == 1 and isinstance(st.body[0].targets[0].target, cst.Name):
                m = _Names()
                scan(st.body[0].value, m)
                name = st.body[0].targets[0].target.value
                if model in m.loaded:
                    defs[name] = i
                elif name in defs:
                    del defs[name]
        wanted = [name for name, i in sorted(defs.items(), key=lambda x: x[1]) if first.get(name) == "load"]
        if not wanted:
            k += 1
            continue
        if classes is None:
            classes = _instance_classes(scope, plans)
        plan = plans.get(classes.get(model))
        if plan is None or plan.get("key_sites") or plan.get("key_required"):
            k += 1
            continue
        at = next(i for i in range(start, b) if set(_names_loaded(out[i])) & set(wanted))  # before its first reader
        inserted = []
        for name in wanted:
            d = defs[name]
            m = _Names()
            scan(out[d].body[0].value, m)
            reads = set(m.loaded) | {name}
            later = _Names()
            for i in range(d + 1, at):
                scan(out[i], later)
            if reads & set(later.stored) or any(_method_stmt(out[i], "step") == opt for i in range(d + 1, at)):
                return None
            inserted.append(out[d].with_changes(leading_lines=()))
        if plan.get("stateful"):  # its new layer state (BatchNorm's) is dropped: PyTorch updated it once (STATE_KEPT)
            ctx.analyses.setdefault(STATE_KEPT, []).extend(inserted)
        out = out[:at] + inserted + out[at:]
        what.append(f"{', '.join(code(st.body[0]) for st in inserted)} computed again in {opt}'s step"
                    + (" from the layer state the loop holds, its new state dropped (in training mode the output uses "
                       "the batch's statistics; PyTorch updated them once)" if plan.get("stateful") else ""))
        k += len(inserted) + 1
    return (out, "; ".join(what)) if what else None


#: ctx.analyses: the zero_grad helpers (_zero_helpers) a loop's step was read through; finish removes those no
#: longer called (an optax optimizer has no zero_grad)
ZERO_HELPERS = "torch2jax.zero-helpers"


def _helper_call(stmt, helpers: dict) -> str | None:
    """The name of a zero_grad helper (_zero_helpers) called with no arguments as a whole statement."""
    if helpers and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 \
            and isinstance(stmt.body[0], cst.Expr):
        call = stmt.body[0].value
        if isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Name) \
                and call.func.value in helpers:
            return call.func.value
    return None


def _zero_helpers(module: cst.Module) -> dict[str, list[str]]:
    """The module's functions of no parameters and no decorators whose body only clears optimizers (``def
    reset_grad(): d_optimizer.zero_grad(); g_optimizer.zero_grad()``, a docstring allowed): name → the names
    cleared (module globals, each once)."""
    out = {}
    for f in module.body:
        if not isinstance(f, cst.FunctionDef) or f.decorators or f.asynchronous or f.params.params \
                or f.params.posonly_params or f.params.kwonly_params or isinstance(f.params.star_arg, cst.Param) \
                or f.params.star_kwarg or not isinstance(f.body, cst.IndentedBlock):
            continue
        stmts = list(f.body.body)
        if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and len(stmts[0].body) == 1 \
                and isinstance(stmts[0].body[0], cst.Expr) and isinstance(stmts[0].body[0].value, cst.SimpleString):
            stmts = stmts[1:]
        names = [_zero_grad(st) for st in stmts]
        if names and all(n is not None and n.isidentifier() for n in names) and len(set(names)) == len(names):
            out[f.name.value] = names
    return out


def _normal_steps(module: cst.Module, ctx) -> tuple[cst.Module, dict[int, tuple]]:
    """The module with its loops' steps in the shape the pass reads (_NormalSteps), and the nodes rebuilt (id →
    (the new node, the one it replaces)): findings on them are located at the nodes they replace."""
    text = module.code if "parsed" not in ctx.analyses else ctx.analyses["parsed"][1]
    if "zero_grad" not in text and "backward" not in text:  # (a straight-line step may have no zero_grad)
        return module, {}
    t = _NormalSteps(ctx, module)
    t.helpers = _zero_helpers(module)
    return rewrite(module, t), t.rebuilt


class _FromNumpyUses(cst.CSTVisitor):
    """Counts the reads of ``name`` inside the arguments of ``torch.from_numpy`` and elsewhere."""

    def __init__(self, name: str, ctx):
        self.name, self.ctx = name, ctx
        self.depth = 0
        self.inside = self.outside = 0

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.imports.resolve(node.func) == "torch.from_numpy":
            self.depth += 1

    def leave_Call(self, node: cst.Call) -> None:
        if self.ctx.imports.resolve(node.func) == "torch.from_numpy":
            self.depth -= 1

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return not (isinstance(node.target, cst.Name) and node.target.value == self.name)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        scan(node.value, self)  # `x.data`: not a read of a name `data`
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            if self.depth:
                self.inside += 1
            else:
                self.outside += 1


# --- the pass ----------------------------------------------------------------------------------------

class _Pass(cst.CSTTransformer):
    def __init__(self, ctx, module: cst.Module, models: set[str], stateful: set[str] = frozenset(),
                 outputs: set[str] = frozenset()):
        super().__init__()
        self.ctx = ctx
        self.models = models
        self.stateful = stateful  # models whose layers keep a state (BatchNorm)
        self.module = module
        self.scopes: list[cst.FunctionDef] = []
        self.optimizers: dict[int, dict] = {}  # scope → the names a torch.optim optimizer is assigned to there → model
        self.outputs = outputs  # names assigned a model's output outside classes (`outputs = model(x)`)
        self.in_class = 0
        self.assigned: set[int] = set()
        self.written: set[int] = set()  # ids of assignment targets (visit_Assign)
        self.imported: set[str] | None = None  # the names the module's imports bind (unknown_holder)
        self.instances: dict[str, str] = {}  # model name → its translated class
        self.planned: set[int] = set()  # the loss.backward() statements of loops checked (rewritten or reported)
        self.threaded: dict[str, dict] = {}  # functions whose optimizer parameter's state is threaded (_threaded)
        self.keyed_classes: list[str] = []  # the classes whose __call__ takes key= (dropout)
        self.key_required: set[str] = set()  # model names whose forward draws (a key at every call, inference too)
        self.given_models: dict[str, set[str]] = {}  # top-level function → its parameters every call gives a model
        self.given_classes: dict[str, dict[str, set[str] | None]] = {}  # ... → those parameters' classes (_given_classes)
        self.whole: set[str] = set()  # model names of classes that take a whole graph (called without jax.vmap)
        self.aliases: dict[str, cst.Attribute] = {}  # module-level names of a legacy tensor type → torch.XTensor
        self.input_grads: dict[int, str] = {}  # id of a torch.autograd.grad(...)[0] → its JAX text (_input_grads)
        self.gradient_names: set[str] = set()  # the names assigned such a gradient (arrays: their methods translated)
        self.global_trained: dict[str, dict] = {}  # functions stepping a module-level optimizer (_global_trained)
        self.module_names = _local_names(module)  # names the module binds at its own level
        self._detached: set[int] | None = None  # (detached_by_rules)
        self.closures: dict[int, list] = {}  # id of a loop → its LBFGS closure steps (_closure_steps) to write out
        self.containers: dict[str, str | None] = {}  # names of lists of the module's instances → their class
        self.step_calls: set[int] = set()  # ids of model calls a keyed train_step takes in (its key: _VmapModel)
        self.bound_inputs: set[str] = set()  # the names call_key binds inputs to (bound_input)
        self.module_names_all: set[str] | None = None  # every name the module reads or binds (bound_input)
        self.split_per_statement = False  # call_key's last call took a split made above its statement (keys.py)
        self.unkeyed_calls: set[int] = set()  # ... a train_step without a key takes in (check_keys's error)
        self.stepped: dict[tuple, str] = {}  # (scope, optimizer) → the text of its first loop's step (other_step)
        self.checkpoint_edits: dict[int, tuple] = {}  # id of a statement → its checkpoint edit (plan_checkpoint_saves)
        self.loop_depth: list[int] = [0]  # per scope (the module, each function): the loops enclosing the visit
        self.step_bodies: set[int] = set()  # ids of the bodies of functions that are one step (checked as loops)

    def on_leave(self, original_node, updated_node):
        out = default_leave_transform(self, original_node, updated_node)
        if self.ctx.is_settled(original_node) and isinstance(out, cst.CSTNode):
            self.ctx.settle(out)  # refused by the modules pass: still refused in this pass's output
        return out

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self.assigned.add(id(node.value))
        self.written.update(id(t.target) for t in node.targets)  # (`x.data = v`: a write, not a read tensor_name drops)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.written.add(id(node.target))

    def leave_Assign(self, original, updated):
        v = original.value
        if id(v) in self.assigned and isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value in self.stateful:
            vmap = self.ctx.spell_text("jax.vmap")
            name = state.state_name(self.ctx, v.func.value)
            inputs = sum(1 for a in v.args if a.keyword is None and not a.star)  # each mapped, the state not
            call = parsed_expression(f'{vmap}({v.func.value}, axis_name="batch", in_axes=({"0, " * inputs}None), '
                                     'out_axes=(0, None))')
            value = updated.value.with_changes(func=call, args=[*[a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                                                  for a in updated.value.args], cst.Arg(cst.Name(name))])
            target = cst.Tuple([cst.Element(updated.targets[0].target), cst.Element(cst.Name(name))], lpar=[], rpar=[])
            return updated.with_changes(targets=[updated.targets[0].with_changes(target=target)], value=value)
        return updated

    def visit_Module(self, node: cst.Module) -> None:
        self.plan_checkpoint_saves(node)
        self.check_straight(list(node.body))
        self.check_closures(node, list(node.body))

    def leave_Module(self, original, updated):
        return self.write_closures(original, updated)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if not self.in_class and not self.loop_depth[-1] and id(node) not in self.step_bodies:
            self.check_straight(list(node.body))
            self.check_closures(node, list(node.body))

    def leave_IndentedBlock(self, original, updated):
        return self.write_closures(original, updated)

    def check_straight(self, body: list) -> None:
        """The straight-line steps of a block no loop of its scope encloses (_straight_segments: a notebook's
        ``opt.zero_grad(); loss = crit(model(x), y); loss.backward(); opt.step()`` at module level, in a function,
        under an if): each checked as a loop's body (check_plan), and written as one train_step call by the
        finishing step where its optimizer is created in this scope; a backward() of no such step keeps its error."""
        if not any(_backward(st) for st in body):
            return
        for first, end in _straight_segments(body, self.scope_optimizers()):
            seg = body[first:end]
            plan = _loop_plan(seg)
            if plan is None or len([st for st in seg if _backward_with_args(st)]) != 1:
                continue
            self.planned.update(id(st) for st in seg if _backward(st))
            self.check_plan(seg[-1], seg, plan, "training step")

    def visit_ClassDef(self, node) -> None:
        self.in_class += 1

    def leave_ClassDef(self, original, updated):
        self.in_class -= 1
        return updated

    def visit_FunctionDef(self, node) -> None:
        self.scopes.append(node)
        if not self.in_class:
            self.plan_checkpoint_saves(node)
        if len(self.scopes) == 1:
            found = _input_grads(node, self.ctx, self.models | self.model_params(), self.whole,
                                 self.ctx.analyses.setdefault(DROPPED, set()), self.aliases)
            self.input_grads.update(found)
            self.gradient_names = {t.target.value for a in _scope_assigns(node) for t in a.targets
                                   if isinstance(t.target, cst.Name) and any(id(sub) in found for sub in _subscripts(a.value))}
        self.loop_depth.append(0)
        if len(self.scopes) == 1 and (self.threaded.get(node.name.value, {}).get("step")
                                      or self.global_trained.get(node.name.value, {}).get("step")):
            self.step_bodies.add(id(node.body))
            self.check_loop(node)  # a function that is one step: its body is checked as a loop's

    def leave_FunctionDef(self, original, updated):
        self.scopes.pop()
        self.loop_depth.pop()
        return updated

    def model_params(self) -> set[str]:
        """The parameters of the top-level function being visited that every call of it gives a model."""
        f = self.scopes[0] if self.scopes and not self.in_class else None
        return self.given_models.get(f.name.value, set()) if f is not None else set()

    def threaded_here(self, opt: str) -> str | None:
        """The model parameter of the function being visited when its optimizer parameter ``opt`` is threaded,
        or the module-level model of a function stepping the module-level optimizer ``opt`` (_global_trained)."""
        f = self.scopes[-1] if self.scopes else None
        for table in (self.threaded, self.global_trained):
            info = table.get(f.name.value) if f is not None and len(self.scopes) == 1 else None
            if info and info["opt"] == opt:
                return info["model"]
        return None

    def note_global(self, name: str) -> None:
        """``name = ...`` written into the top-level function being visited for a module-level model that the
        function does not bind itself (``model.train()`` → ``model = eqx.nn.inference_mode(model, False)``):
        the function declares it ``global`` (finish), as PyTorch's call changed the module's model in place."""
        f = self.scopes[-1] if len(self.scopes) == 1 else None
        if f is None or name not in self.module_names or name in _local_names(f):
            return
        self.ctx.analyses.setdefault(GLOBALS, {}).setdefault(f.name.value, set()).add(name)

    def model_classes(self, name: str) -> set[str] | None:
        """The translated classes a model name outside the classes holds: an instance of the module's (``model =
        VAE()``), or a parameter of the top-level function every call gives a model (``def sample(m, x)`` called as
        ``sample(model, x)``); None where a class is not known."""
        if self.in_class:
            return None
        if name in self.instances:
            return {self.instances[name]}
        f = self.scopes[0] if self.scopes else None
        if f is not None and name in self.model_params():
            return self.given_classes.get(f.name.value, {}).get(name)
        return None

    def method_call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """``model.m(...)`` outside the classes, ``m`` a method of the model's class that ``__call__`` reaches (it
        sees one example, as ``__call__`` does: ``encode``, ``decode``, ``reparameterize``) → ``jax.vmap(model.m)(...)``
        over the batch the caller holds; a method drawing at call time (``reparameterize``'s
        ``torch.randn_like``, a ``generate`` sampling with torch.multinomial) gets a key of the scope
        (call_key: one per example where vmapped), else an error. ``model.forward(x)`` is the model's call. None:
        not such a call."""
        f = original.func
        if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name)):
            return None
        name, method = f.value.value, f.attr.value
        classes = self.model_classes(name)
        plans = self.ctx.analyses.get(PLANS, {})
        if classes is None:  # a name of unknown class calling a method of a class of the file
            keyed = sorted(c for c, p in plans.items() if method in p.get("keyed_methods", ()))
            single = sorted(c for c, p in plans.items() if method in p.get("per_example", ()))
            model = name in self.models | self.model_params()
            if keyed and name != "self":
                self.ctx.report(Severity.ERROR if model else Severity.WARNING, "unsupported-construct",
                                f"{name}.{method}(...): " + ("" if model else f"if {name} is a {' or '.join(keyed)}, ")
                                + f"{method} draws random numbers at call time (in {', '.join(keyed)}) and takes a "
                                f"key{'' if model else ', which this call does not pass'}; the class of {name} is not "
                                f"known here: pass {name}.{method}(..., key=...)"
                                + (" and call it through jax.vmap (it sees one example)" if single else ""), original)
            elif single and model:
                self.ctx.report(Severity.WARNING, "batch-axis", f"{name}.{method}(...): in {', '.join(single)} "
                                f"{method} is called by forward and sees one example; the class of {name} is not "
                                f"known here, so the call is left as written: a batch needs jax.vmap({name}.{method})",
                                original)
            return None
        if not classes or any(c not in plans for c in classes):
            return None
        infos = [plans[c] for c in classes]
        if method == "forward":
            updated = updated.with_changes(func=updated.func.value)  # the model's own call
            return self.model_call(original.with_changes(func=f.value), updated, classes)
        per_example = [method in p.get("per_example", ()) or method in p.get("layers", ()) for p in infos]
        keyed = [method in p.get("keyed_methods", ()) for p in infos]
        if not any(per_example) and not any(keyed):
            return None  # a method seeing whole arrays (get_num_params) or not the class's own
        if len(set(per_example)) > 1 or len(set(keyed)) > 1:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{name}.{method}(...): {name} holds one of "
                            f"{', '.join(sorted(classes))}, whose {method} differ in taking one example or a key; "
                            "call it as each class needs (jax.vmap for one example, key= for a draw)", original)
            return updated
        whole = not per_example[0] or all(p.get("whole") for p in infos)
        if not whole:
            self.ctx.report(Severity.INFO, "idiom-replaced", f"{name}.{method}(...): {method} is " + (
                "a layer of the module" if method in infos[0].get("layers", ()) else "called by the module's forward")
                + f" and sees one example, as __call__ does: the batch here goes through jax.vmap({name}.{method})",
                original)
            updated = updated.with_changes(func=cst.Call(self.ctx.spell("jax.vmap"), [cst.Arg(updated.func)]))
            updated = self.static_arguments(original, updated, f"{name}.{method}", classes, method)
        if keyed[0]:
            updated = self.call_key(original, updated, whole, f"{name}.{method}", f"{method} of {'/'.join(sorted(classes))}")
        return updated

    def model_call(self, original: cst.Call, updated: cst.Call, classes: set[str] | None = None) -> cst.BaseExpression:
        """``model(x)`` outside the classes, ``model`` a translated module taking one example: ``jax.vmap(model)(x)``
        (a whole-graph model as it is), with keys where its forward draws (call_key)."""
        name = original.func.value
        plans = self.ctx.analyses.get(PLANS, {})
        if classes is None:
            classes = self.model_classes(name) or set()
        whole = name in self.whole or bool(classes) and all(plans.get(c, {}).get("whole") for c in classes)
        if not whole:  # a translated module takes one example: a batch goes through jax.vmap
            # (with the model's axes where its inputs or outputs hold the batch axis elsewhere than first)
            axes = self.ctx.analyses.get(VMAP_AXES, {}).get(name)
            vmap = self.ctx.spell("jax.vmap")
            updated = updated.with_changes(func=cst.Call(vmap, [cst.Arg(updated.func)]) if axes is None else
                                           parsed_expression(f"{code(vmap)}({code(updated.func)}, {axes})"))
            updated = self.static_arguments(original, updated, name, classes)
        if name in self.key_required or any(plans.get(c, {}).get("key_required") for c in classes):
            updated = self.call_key(original, updated, whole)
        elif classes and all(c in self.keyed_classes for c in classes) and self.training_at_module_level(name, original):
            # its dropout is active (PyTorch builds a module in training mode, and no .eval() came before): an
            # Equinox dropout in training draws, so the call takes a key as a drawing forward's does
            self.split_per_statement = False
            updated = self.call_key(original, updated, whole, name, f"{'/'.join(sorted(classes))}, in training "
                                    "mode here: its dropout draws")
            if _binds_key(self.module, self.ctx) and not self.split_per_statement:  # torch.manual_seed's root key: read as it is, not split per call
                self.ctx.report(Severity.WARNING, "key-added", f"{name}(...) in training mode: its dropout takes keys "
                                "from the module's root key as it is, so every such call draws the same dropout masks "
                                "where PyTorch draws new ones: split the key before each call (key, subkey = "
                                "jax.random.split(key)) and pass subkey's splits", original)
        merged = None if whole else self.ctx.analyses.get(MERGED_OUT, {}).get(name)
        return updated if merged is None else self.merge_batch(original, updated, merged, name)

    def python_defaults(self, classes, method: str) -> set[str]:
        """The parameters of ``method`` (forward: the call) whose default is a number, a string or a bool in every
        one of ``classes`` (``def forward(self, input, future=0)``): they take Python values, not a batch."""
        found = None
        for cls in classes or ():
            c = next((s for s in self.module.body if isinstance(s, cst.ClassDef) and s.name.value == cls), None)
            f = None if c is None else method_of(c, method) or (method_of(c, "__call__") if method == "forward" else None)
            if f is None:
                return set()
            p = f.params
            names = {x.name.value for x in [*p.params, *p.kwonly_params] if x.default is not None
                     and type(literal_value(x.default)) in (int, float, str, bool)}
            found = names if found is None else found & names
        return found or set()

    def static_arguments(self, original: cst.Call, updated: cst.Call, name: str, classes=(), method: str = "forward") -> cst.Call:
        """A vmapped call ``jax.vmap(F)(x, future=future)`` whose arguments include Python values that hold no
        batch (static_value: ``future = 1000``, ``mode="greedy"``): jax.vmap maps every keyword argument and every
        positional one by default, and fails on a number. Keywords are given to every example as they are,
        ``jax.vmap(functools.partial(F, future=future))(x)``, positionals get ``in_axes=(0, None)`` (where the
        model names no axes of its own). The key and arrays stay mapped."""
        vmapped = updated.func
        if not (isinstance(vmapped, cst.Call) and vmapped.args) or any(a.star for a in updated.args):
            return updated
        scopes = [self.module, *self.scopes]
        defaults = self.python_defaults(classes, method)
        fixed = [a for a in updated.args if a.keyword is not None and a.keyword.value != "key"
                 and (static_value(a.value, scopes) or a.keyword.value in defaults)]
        positional = [a for a in updated.args if a.keyword is None]
        axes = [None if static_value(a.value, scopes) else 0 for a in positional]
        mapped = [a for a in updated.args if a.keyword is not None and a not in fixed]
        if None in axes and (len(vmapped.args) > 1 or (0 not in axes and not mapped)):
            axes = [0] * len(axes)  # (the model's own in_axes, or nothing left to map: left as written)
        if not fixed and None not in axes:
            return updated
        told = [code(a.keyword) for a in fixed] + [code(a.value) for a, x in zip(positional, axes) if x is None]
        self.ctx.report(Severity.INFO, "batch-axis", f"{name}(...): {', '.join(told)} "
                        f"{'is a Python value' if len(told) == 1 else 'are Python values'} holding no batch: given to "
                        "every example as " + ("it is" if len(told) == 1 else "they are") + ", not mapped by jax.vmap ("
                        + " and ".join(w for w, c in (("functools.partial", fixed), ("in_axes None", None in axes)) if c)
                        + ")", original)
        func = vmapped.args[0].value
        if fixed:
            last = fixed[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            func = cst.Call(self.ctx.spell("functools.partial"), [
                cst.Arg(func, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                *[a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in fixed[:-1]], last])
        vargs = [vmapped.args[0].with_changes(value=func), *vmapped.args[1:]]
        if None in axes:
            tup = "(" + ", ".join("None" if x is None else "0" for x in axes) + ("," if len(axes) == 1 else "") + ")"
            vargs = [vargs[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                     cst.Arg(parsed_expression(tup), keyword=cst.Name("in_axes"),
                             equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]
        args = [a for a in updated.args if not any(a is f for f in fixed)]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(func=vmapped.with_changes(args=vargs), args=args)

    def merge_batch(self, original: cst.Call, updated: cst.Call, merged: str, name: str) -> cst.BaseExpression:
        """A vmapped call of a model whose forward merges the batch axis into an axis (a view's ``(L * N, V)``):
        the output in PyTorch's layout, ``batch_merged(jax.vmap(model, ...)(x), axes)`` (layers' helper)."""
        from fwport.packs.torch2jax import layers
        self.ctx.report(Severity.INFO, "batch-axis", f"{name}(...): its forward's view merges the batch axis into an "
                        f"axis (its examples the inner factor, as PyTorch's (L * N, V)): the vmapped output's axes are "
                        f"merged in the same way, batch_merged(..., {merged})", original)
        return cst.Call(cst.Name(layers.use(self.ctx, "batch_merged")), [  # (the call's own nodes: keys.py finds its split)
            cst.Arg(updated, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(parsed_expression(merged))])

    def built_call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """``Net(...)(x)`` outside the classes: a module of the file built and called at once, its call one of
        a model (model_call's): ``jax.vmap(Net(key=...))(x)`` where it takes one example, a key where its forward
        draws (a new module is in training mode: its dropout draws too). A class keeping a layer state (BatchNorm)
        is an error: its call takes and returns the state. None: not such a call."""
        f = original.func
        if not (isinstance(f, cst.Call) and isinstance(f.func, cst.Name)) or not original.args:
            return None
        cls = f.func.value
        plans = self.ctx.analyses.get(PLANS, {})
        if cls not in plans or cls in self.module_names - {s.name.value for s in self.module.body
                                                           if isinstance(s, cst.ClassDef)}:
            return None
        info = plans[cls]
        if info.get("stateful"):
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{cls}(...)(...): {cls} keeps a layer state "
                            "(BatchNorm) that its call takes and returns: build it on a statement of its own "
                            f"(`m = {cls}(...)`) and call it there", original)
            return updated
        whole = bool(info.get("whole"))
        if not whole:
            axes = info.get("vmap_axes")
            vmap = self.ctx.spell("jax.vmap")
            updated = updated.with_changes(func=cst.Call(vmap, [cst.Arg(updated.func)]) if axes is None else
                                           parsed_expression(f"{code(vmap)}({code(updated.func)}, {axes})"))
            updated = self.static_arguments(original, updated, f"{cls}(...)", {cls})
        if info.get("key_required"):
            updated = self.call_key(original, updated, whole, f"{cls}(...)", cls)
        elif cls in self.keyed_classes:
            updated = self.call_key(original, updated, whole, f"{cls}(...)", f"{cls}, in training mode here (a new "
                                    "module): its dropout draws")
        if not whole and info.get("merged_out") and info.get("vmap_axes"):
            return self.merge_batch(original, updated, info["merged_out"], f"{cls}(...)")
        return updated

    def training_at_module_level(self, name: str, original: cst.Call) -> bool:
        """``name(...)`` called by the module's own top-level code (not in a function or a class), where ``name``
        is in training mode: no ``name.eval()`` / ``name.train(False)`` comes before the statement holding the
        call, or a ``name.train()`` after the last of them (a statement's own mode calls: in their text order)."""
        if self.scopes or self.in_class or name not in self.instances:
            return False
        training = True
        for st in self.module.body:
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
                continue  # (a function's `model.eval()` runs when it is called, on its own `model`)
            calls = find_all(st, cst.Call)
            if any(c is original for c in calls):
                return training
            for c in calls:
                if not (isinstance(c.func, cst.Attribute) and dotted_text(c.func.value) == name
                        and c.func.attr.value in ("eval", "train")):
                    continue
                off = c.func.attr.value == "eval" or bool(c.args) and code(c.args[0].value) in ("False", "0")
                training = not off
        return False

    def call_key(self, original: cst.Call, updated: cst.Call, whole: bool, name: str | None = None,
                 what: str | None = None) -> cst.Call:
        """A model whose forward draws random numbers (``torch.randn_like`` in it or a method it calls) is called
        with a key even in inference: ``jax.vmap(model)(x, key=jax.random.split(key, x.shape[0]))`` (one per
        example; a whole-graph model ``key=key``), from the key in scope (the function's, else the module's
        root key); with none in scope, an error (never a name the code does not bind). A call moved into a
        train_step gets the step's key there instead (_VmapModel, _KeyModel replace this one)."""
        if any(a.keyword and a.keyword.value == "key" for a in original.args) or not original.args and not whole \
                or id(original) in self.step_calls:  # (moved into a keyed train_step: its key, _VmapModel)
            return updated
        if name is None:
            name = original.func.value
            what = f"{self.instances.get(name)}, in its forward"
        scope = self.scopes[-1] if self.scopes else self.module
        here = _binds_key(scope, self.ctx)
        axes = self.ctx.analyses.get(VMAP_AXES, {}).get(name) or ""
        first = re.match(r"in_axes=\(?(\d+)", axes)  # the first input's batch axis (the keys: one per example)
        batch = f".shape[{first.group(1) if first else 0}]"
        defer = False
        plain = updated
        updated, batch_of = self.bound_input(original, updated, whole)
        if not here and (scope is self.module or "key" in _local_names(scope) or not _binds_key(self.module, self.ctx)):
            text = self.ctx.analyses["parsed"][1] if "parsed" in self.ctx.analyses else self.module.code
            defer = not whole and id(original) not in self.unkeyed_calls and (
                keys.will_key(self.module, text) or scope is self.module and keys.will_key_module(self.module, text))
        if defer:  # keys.py makes the scope's root key and splits it for this statement (else it reports the error)
            split = self.ctx.spell_text("jax.random.split")
            keyed = parsed_expression(f"{split}(key, {batch_of}{batch})")
            self.ctx.analyses.setdefault(keys.MODEL_DRAWS, {})[id(keyed)] = (keyed, f"{name} ({what})")
            self.ctx.report(Severity.INFO, "key-added", f"{name} ({what}) draws random numbers: called with "
                            f"key={code(keyed)}, one key per example, split from the root key fwport makes in this "
                            "scope (key, subkey = jax.random.split(key) before the statement)", original)
            return updated.with_changes(args=[*updated.args[:-1], updated.args[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(keyed, keyword=cst.Name("key"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        if not here and (scope is self.module or "key" in _local_names(scope) or not _binds_key(self.module, self.ctx)):
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{name} ({what}) draws random numbers "
                            "(torch.randn_like or the like, in inference too) and takes a key per call: no key is in "
                            "scope here (torch.manual_seed in this function or at module level makes one); pass "
                            f"{name}(..., key=...)" + ("" if whole else " one per example"), original)
            return plain
        split = self.ctx.spell_text("jax.random.split")
        value = "key" if whole else f"{split}(key, {batch_of}{batch})"
        text = self.ctx.analyses["parsed"][1] if "parsed" in self.ctx.analyses else self.module.code
        if here and not whole and id(original) not in self.unkeyed_calls and keys.TRIGGER.search(text):
            # a seeded scope (torch.manual_seed's root key): keys.py splits that key above the statement and this
            # call's keys come from the split (subkey), anew at each call and iteration as PyTorch's generator moves on
            keyed = parsed_expression(value)
            again = _calls_again(scope, original, name)
            self.ctx.analyses.setdefault(keys.SEEDED_MODEL_DRAWS, {})[id(keyed)] = (
                keyed, f"{name} ({what})", again)
            self.split_per_statement = True
            return updated.with_changes(args=[*updated.args[:-1], updated.args[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(keyed, keyword=cst.Name("key"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        if here and _calls_again(scope, original, name):
            # the scope's own key read as it is by several calls (or one in a loop): each draws the same numbers
            self.ctx.report(Severity.WARNING, "key-added", f"{name} ({what}) draws random numbers: called with "
                            f"key={value} from this scope's key as it is, the same at every call here (several "
                            "calls, or one in a loop), which then draw the same numbers where PyTorch draws new "
                            "ones: split the key before each call (key, subkey = jax.random.split(key)) and pass "
                            "subkey", original)
        else:  # a function reading the module's root key: the same key at every call of it, where PyTorch draws anew
            self.ctx.report(Severity.INFO if here else Severity.WARNING, "key-added", f"{name} ({what}) draws random "
                            f"numbers: called with key={value} from the " + ("function's key" if here else
                            "module's root key, the same at every call of this function, which then draws the same "
                            "numbers each time where PyTorch draws new ones: give the function a `key` argument and "
                            "pass it a split per call (key, subkey = jax.random.split(key))"), original)
        args = [*updated.args]
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(args=[*args, cst.Arg(parsed_expression(value), keyword=cst.Name("key"),
                                                         equal=cst.AssignEqual(cst.SimpleWhitespace(""),
                                                                               cst.SimpleWhitespace("")))])

    def bound_input(self, original: cst.Call, updated: cst.Call, whole: bool) -> tuple[cst.Call, str]:
        """The text of the input a call's per-example keys are counted from (``x`` in ``jax.random.split(key,
        x.shape[0])``): an input that calls anything (``torch.randn(2, 4)``, ``loader.next()``) is bound to a fresh
        name where it is passed, ``jax.vmap(model)(inputs := ..., key=jax.random.split(key, inputs.shape[0]))``, so
        that it is evaluated once (a random input drawn once), not written again for its size."""
        if whole or not updated.args:
            return updated, ""
        first = updated.args[0]
        if first.star or first.keyword is not None or not find_all(first.value, cst.Call) or self.in_class \
                or any(c is original for f in find_all(self.module, cst.CompFor) for c in find_all(f.iter, cst.Call)):
            # (no := in a class body or a comprehension's iterable: the input written again, as before)
            return updated, _atom_code(first.value)
        if self.module_names_all is None:
            self.module_names_all = {n.value for n in find_all(self.module, cst.Name)}
        taken = self.module_names_all | self.bound_inputs
        name = next(n for n in (f"inputs{i or ''}" for i in range(len(taken) + 2)) if n not in taken)
        self.bound_inputs.add(name)
        value = first.value.with_changes(lpar=[], rpar=[]) if isinstance(first.value, cst.NamedExpr) else first.value
        bound = cst.NamedExpr(target=cst.Name(name), value=value)
        return updated.with_changes(args=[first.with_changes(value=bound), *updated.args[1:]]), name

    def scope_optimizers(self) -> dict[str, str | None]:
        """Names a torch.optim optimizer is assigned to in the scope being visited → the model whose
        parameters it takes (None when not ``model.parameters()``)."""
        return self.optimizers_of(self.scopes[-1] if self.scopes else self.module)

    def optimizers_of(self, scope) -> dict[str, str | None]:
        if id(scope) not in self.optimizers:
            self.optimizers[id(scope)] = _optimizer_models(self.ctx, scope)
        return self.optimizers[id(scope)]

    def leave_Call(self, original, updated):
        if isinstance(original.func, cst.Name) and original.func.value in self.stateful and not self.in_class:
            if id(original) not in self.assigned:
                model, name = original.func.value, state.state_name(self.ctx, original.func.value)
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"{model} keeps a layer state (BatchNorm), and "
                                "this call is not one fwport moves to a statement of its own (inside a lambda, a "
                                "comprehension, a conditional expression, an and/or, or a compound statement's header): "
                                f"call it as `y, {name} = jax.vmap({model}, axis_name=\"batch\", in_axes=(0, None), "
                                f"out_axes=(0, None))(x, {name})` where it runs", original)
            return updated
        if isinstance(original.func, cst.Name) and not self.in_class and (
                original.func.value in self.models or self.model_classes(original.func.value)):
            return self.model_call(original, updated)
        built = None if self.in_class else self.built_call(original, updated)
        if built is not None:
            return built
        f = original.func
        if not self.in_class and isinstance(f, cst.Subscript) and isinstance(f.value, cst.Name) \
                and f.value.value in self.containers:  # `models[0](x)`: an instance of the module, one example
            cls = self.containers[f.value.value]
            plans = self.ctx.analyses.get(PLANS, {})
            if cls is None or not plans.get(cls, {}).get("whole"):
                updated = updated.with_changes(func=cst.Call(self.ctx.spell("jax.vmap"), [cst.Arg(updated.func)]))
            if cls is not None and plans.get(cls, {}).get("key_required"):
                updated = self.call_key(original, updated, bool(plans[cls].get("whole")), code(f), cls)
            elif cls is None and any(plans.get(c, {}).get("key_required") for c in plans):
                self.ctx.report(Severity.WARNING, "unsupported-construct", f"{code(f)}(...): if it draws random numbers "
                                "in its forward, it takes key= (one per example), which this call does not pass", original)
            return updated
        method = None if self.in_class else self.method_call(original, updated)
        if method is not None:
            return method
        alias = self.alias_call(original, updated)
        if alias is not None:
            return alias
        tensor_method = self.tensor_method(original, updated)
        if tensor_method is not None:
            return tensor_method
        if isinstance(original.func, cst.Attribute) and original.func.attr.value == "requires_grad_" \
                and len(original.args) <= 1 and id(original) not in self.ctx.analyses.get(FROZEN_CALLS, ()):
            return updated.func.value  # JAX differentiates with respect to what jax.grad is given
        q = self.ctx.imports.resolve(original.func)
        if q == "torch.Tensor" and isinstance(updated.func, cst.Attribute):
            # the legacy constructor called (nn.Parameter(torch.Tensor(n, m))): torch.FloatTensor's rule translates it
            return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("FloatTensor")))
        if q in NO_GRAD or id(original) in self.ctx.analyses.get(nograd.SETTLED, ()):
            self.ctx.settle(updated)  # removed by the finishing step (nograd.py reported it and detached its values)
            if id(original) not in self.ctx.analyses.get(nograd.SETTLED, ()):
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{q}() removed: JAX differentiates only what "
                                "jax.grad (eqx.filter_grad) is given", original)
            return updated
        f = original.func
        if isinstance(f, cst.Attribute) and f.attr.value == "size" and not self.in_class:
            shape = _size_call(original, updated)
            if shape is not None:
                return shape
        if isinstance(f, cst.Attribute) and f.attr.value == "to_sparse" and not original.args and not self.in_class:
            # a dense matrix → its sparse (BCOO) form, what torch.spmm's JAX counterpart (a @ b) takes
            return cst.Call(self.ctx.spell("jax.experimental.sparse.BCOO.fromdense"), [cst.Arg(updated.func.value)])
        # (non_blocking: an asynchronous copy from pinned memory, which JAX's placement is too)
        moved = [a for a in original.args if not (a.keyword is not None and a.keyword.value == "non_blocking")]
        if isinstance(f, cst.Attribute) and (f.attr.value in ("cuda", "cpu") and not moved
                                             or f.attr.value == "to" and len(moved) == 1 and not moved[0].star
                                             and (moved[0].keyword is None or moved[0].keyword.value == "device") and _is_device(moved[0].value, self.ctx)):
            return updated.func.value  # JAX places arrays itself (jax.device_put where it matters)
        return updated

    def leave_Subscript(self, original, updated):
        text = self.input_grads.get(id(original))
        if text is None:
            return updated
        self.ctx.settle(original.value)  # not the rule's refusal: the call is gone
        self.ctx.report(Severity.INFO, "idiom-replaced", "torch.autograd.grad(outputs=D(x), inputs=x, grad_outputs=ones) "
                        "→ the gradient of D's output with respect to each example, jax.vmap(jax.grad(...)); it is "
                        "differentiable again where a loss uses it (create_graph is implicit in JAX)", original)
        return parsed_expression(text.format(vmap=self.ctx.spell_text("jax.vmap"), grad=self.ctx.spell_text("jax.grad"),
                                                sum=self.ctx.spell_text("jax.numpy.sum")))

    def tensor_method(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """Outside modules, in a function that computes a gradient penalty (whose names hold arrays):
        ``g.view(n, -1)`` → ``g.reshape(n, -1)``; ``g.norm(p, dim=d)`` → ``jnp.linalg.norm(g, ord=p, axis=d)``."""
        f = original.func
        if self.in_class or not self.scopes or not isinstance(f, cst.Attribute) or not isinstance(f.value, cst.Name) \
                or f.value.value not in self.gradient_names:
            return None
        if f.attr.value == "view" and original.args and all(a.keyword is None and not a.star for a in original.args):
            return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("reshape")))
        if f.attr.value == "norm" and len(original.args) == 2 and original.args[0].keyword is None \
                and original.args[1].keyword is not None and original.args[1].keyword.value == "dim":
            eq = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
            return cst.Call(self.ctx.spell("jax.numpy.linalg.norm"),
                            [cst.Arg(updated.func.value), cst.Arg(updated.args[0].value, keyword=cst.Name("ord"), equal=eq),
                             cst.Arg(updated.args[1].value, keyword=cst.Name("axis"), equal=eq)])
        return None

    def alias_call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """Calls through a type alias (``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``):
        ``Tensor(data)`` / ``Tensor(n, m)`` → ``torch.FloatTensor(...)`` (its rule writes jnp.asarray / jnp.empty),
        ``Tensor(n, m).fill_(v)`` → ``torch.full((n, m), v, dtype=torch.float32)``, ``x.type(Tensor)`` →
        ``x.astype(jnp.float32)``."""
        f = original.func
        if isinstance(f, cst.Name) and f.value in self.aliases:
            return updated.with_changes(func=self.aliases[f.value])
        if not isinstance(f, cst.Attribute):
            return None
        if f.attr.value == "fill_" and len(original.args) == 1 and isinstance(f.value, cst.Call) \
                and isinstance(f.value.func, cst.Name) and f.value.func.value in self.aliases and f.value.args \
                and all(a.keyword is None and a.star in ("", "*") for a in f.value.args):
            cpu = self.aliases[f.value.func.value]
            inner = updated.func.value  # (`Tensor(n, *shape)`: sizes, shape unpacked)
            size = cst.Tuple([cst.StarredElement(a.value) if a.star else cst.Element(a.value) for a in inner.args])
            dtype = cpu.with_changes(attr=cst.Name(LEGACY_TYPES[cpu.attr.value]))
            return cst.Call(cpu.with_changes(attr=cst.Name("full")),
                            [cst.Arg(size), cst.Arg(updated.args[0].value),
                             cst.Arg(dtype, keyword=cst.Name("dtype"), equal=cst.AssignEqual(
                                 cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        if f.attr.value == "type" and len(original.args) == 1 and isinstance(original.args[0].value, cst.Name) \
                and original.args[0].value.value in self.aliases:
            dtype = LEGACY_TYPES[self.aliases[original.args[0].value.value].attr.value]
            return cst.Call(cst.Attribute(updated.func.value, cst.Name("astype")),
                            [cst.Arg(self.ctx.spell(f"jax.numpy.{dtype}"))])
        return None


    def unread_gradients(self, original: cst.SimpleStatementLine) -> bool:
        """Whether ``loss.backward()`` is a statement of the module's own level after which no statement reads a
        gradient: none names ``.grad``, ``.step``, ``.backward`` or ``torch.autograd``, nor calls a function of this
        file or a method a class of this file defines (which could). Such a backward changes nothing later code sees."""
        if self.scopes:
            return False
        i = next((k for k, st in enumerate(self.module.body) if st is original), None)
        if i is None:
            return False
        defined = {st.name.value for st in self.module.body if isinstance(st, cst.FunctionDef)}
        methods = {m.name.value for st in self.module.body if isinstance(st, cst.ClassDef)
                   for m in st.body.body if isinstance(m, cst.FunctionDef)}
        for st in self.module.body[i + 1:]:
            if any(a.attr.value in ("grad", "step", "backward") for a in find_all(st, cst.Attribute)) \
                    or any((dotted_text(n) or "").startswith("torch.autograd") for n in find_all(st, cst.Attribute)):
                return False
            for c in find_all(st, cst.Call):
                if isinstance(c.func, cst.Name) and c.func.value in defined \
                        or isinstance(c.func, cst.Attribute) and c.func.attr.value in methods:
                    return False
        return True

    def leave_SimpleStatementLine(self, original, updated):
        if any(st is original for st in self.ctx.analyses.get(STATE_KEPT, ())) and _is_assign(updated) \
                and isinstance(updated.body[0].targets[0].target, cst.Tuple):
            target = updated.body[0].targets[0].target
            elements = [*target.elements[:-1], target.elements[-1].with_changes(value=cst.Name("_"))]
            out = updated.with_changes(body=[updated.body[0].with_changes(
                targets=[updated.body[0].targets[0].with_changes(target=target.with_changes(elements=elements))])])
            self.ctx.analyses[STATE_KEPT].append(out)  # its state an input of the train_step (step)
            return out
        aliased = [i for i, x in enumerate(original.body) if isinstance(x, cst.Assign) and len(x.targets) == 1
                   and isinstance(x.targets[0].target, cst.Name) and x.targets[0].target.value in self.aliases] \
            if self.aliases and not self.scopes and not self.in_class else []
        if aliased:  # (each statement of the line that binds one: `cuda = False; Tensor = torch.FloatTensor`)
            body = list(updated.body)
            for i in aliased:
                name = original.body[i].targets[0].target.value
                dtype = LEGACY_TYPES[self.aliases[name].attr.value]
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{name} (a legacy tensor type on the CPU or CUDA): "
                                f"its calls create {dtype} arrays (JAX places arrays itself); the alias goes where "
                                "nothing else reads it", original)
                body[i] = body[i].with_changes(value=self.ctx.spell(f"jax.numpy.{dtype}"))
            return updated.with_changes(body=body)
        edit = self.checkpoint_edits.get(id(original))
        if edit is not None:
            return self.write_checkpoint_edit(edit, updated)
        data = self.load_data(original) or self.load_model(original) or self.load_checkpoint(original) \
            or self.load_named_state_dict(original) or self.save_data(original)
        if data is not None:
            return updated.with_changes(body=[data])
        if len(original.body) != 1 or not isinstance(original.body[0], cst.Expr):
            return updated
        if _backward(original) and id(original) not in self.planned and not self.in_class \
                and self.unread_gradients(original):
            self.ctx.report(Severity.INFO, "idiom-replaced", f"{_backward(original)}.backward() at the module's level, "
                            "with nothing after it that reads the gradients it accumulates (no optimizer step, no "
                            ".grad, no function or method of this file called): JAX computes a gradient only where "
                            "it is asked for (jax.grad), so the statement is dropped", original)
            return cst.RemoveFromParent()
        if _backward(original) and id(original) not in self.planned and not self.in_class:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{_backward(original)}.backward() is not at the level of a loop's body (inside an if or "
                            "with block, or outside a loop) with the rest of its step: only a loop or a block (the "
                            "module's or a function's statements, an if's) holding zero_grad(), the loss, backward() and "
                            "step() at its own level becomes a train_step; write this step with "
                            "eqx.filter_value_and_grad, optim.update and eqx.apply_updates by hand", original)
            return updated
        if _backward(original) and self.in_class:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{_backward(original)}.backward() in a method of a class (a trainer object's step): fwport "
                            "rewrites training steps in functions and at module level, where the optimizer is created; "
                            "an optax optimizer keeps its state outside the model and the optimizer, so keep it on the "
                            "object (self.opt_state = optimizer.init(eqx.filter(model, eqx.is_array))) and write this "
                            "step by hand (loss, grads = eqx.filter_value_and_grad(loss_fn)(self.model); updates, "
                            "self.opt_state = self.optimizer.update(grads, self.opt_state, eqx.filter(self.model, "
                            "eqx.is_array)); self.model = eqx.apply_updates(self.model, updates))", original)
            return updated
        call = original.body[0].value
        if not isinstance(call, cst.Call):
            return updated
        if self.ctx.imports.resolve(call.func) == "torch.manual_seed" and len(call.args) == 1:
            seed = call.args[0].value
            self.ctx.report(Severity.INFO, "key-added", "torch.manual_seed(...) → a root key: split it for every "
                            "random draw (model initialisation, dropout) in place of PyTorch's global state", original)
            return updated.with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name("key"))],
                                                         cst.Call(self.ctx.spell("jax.random.key"), [cst.Arg(seed)]))])
        loaded = self.load_state_dict(call, original)
        if loaded is not None:
            return updated.with_changes(body=[loaded])
        for method, value in (("train", "False"), ("eval", "True")):
            target = _method_stmt(original, method)
            if target is not None and (target in self.models or target in self.model_params()):
                mode = self.ctx.spell_text("equinox.nn.inference_mode")
                self.note_global(target)
                return updated.with_changes(body=[parsed_statement(f"{target} = {mode}({target}, {value})\n").body[0]])
        cast = None  # model.to(torch.float64) / model.type(torch.half) as a statement: model.double()'s cast
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "type"):
            from fwport.packs.torch2jax.ops import cast_dtype
            cast = cast_dtype(call, self.ctx)
        for method, dtype in (("double", "float64"), ("float", "float32"), ("half", "float16"), ("bfloat16", "bfloat16"),
                              *(((call.func.attr.value, cast),) if cast else ())):
            target = _method_stmt(original, method) if method not in ("to", "type") else dotted_text(call.func.value)
            if target is not None and target in self.models:
                # model.double(): every floating parameter and buffer cast; a module is a pytree of them
                tree_map, is_float = self.ctx.spell_text("jax.tree_util.tree_map"), self.ctx.spell_text("equinox.is_inexact_array")
                self.note_global(target)
                return updated.with_changes(body=[parsed_statement(
                    f"{target} = {tree_map}(lambda a: a.astype({self.ctx.spell_text('jax.numpy.' + dtype)}) "
                    f"if {is_float}(a) else a, {target})\n").body[0]])
        return updated

    def check_host_random(self, loop, body, plan, model) -> None:
        """numpy's (or Python's) random numbers drawn inside the loss, or in a function of the file it calls, would be
        drawn once when eqx.filter_jit traces the train_step, and reused at every step: that step is written without
        the jit (HOST_RANDOM), its draws made at each call, in PyTorch's order from numpy's own generator (WGAN-GP's
        interpolation weights). An info finding says so and how to jit it (a key per step, jax.random)."""
        if model is None:
            return
        block, _ = _split_block(body, plan, model)
        funcs = {s.name.value: s for s in self.module.body if isinstance(s, cst.FunctionDef)}
        seen = [code(s) for s in block]
        for s in block:
            seen += [code(funcs[c.func.value]) for c in _calls(s) if isinstance(c.func, cst.Name) and c.func.value in funcs]
        if any(re.search(r"\b(np|numpy|random)\.random\b|\brandom\.(random|uniform|gauss)\(", t) for t in seen):
            f = self.scopes[-1] if len(self.scopes) == 1 else None
            self.ctx.analyses.setdefault(HOST_RANDOM, set()).add((f.name.value if f is not None else "", plan[0]))
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            "the loss draws numpy random numbers (here or in a function it calls): its step is written "
                            "without @eqx.filter_jit, which would draw them once, when it traces the step, and reuse them "
                            "at every step; unjitted, they are drawn at each step as in PyTorch (slower); to jit it, give "
                            "the step a key (split per step) and draw them with jax.random", loop)

    def check_keys(self, loop, body, plan) -> None:
        """A model whose layers draw random numbers in training (dropout) needs a key per step: where the
        model's class is known to be one, the written train_step takes a ``key`` and the loop splits one per
        step (``key, step_key = jax.random.split(key)``; the model called as ``jax.vmap(model)(x,
        key=jax.random.split(key, x.shape[0]))``), recorded here for the finishing step (KEYED); an error
        where that cannot be written (the model called more than once in the loss, a threaded function's
        caller without its own key); a warning where the trained model is a name of unknown class and the
        file has such classes."""
        n = _Names()
        for stmt in body[:plan[3]]:
            scan(stmt, n)
        called = [m for m in n.loaded if m in self.models]
        f = self.scopes[-1] if len(self.scopes) == 1 else None
        info = self.threaded.get(f.name.value) if f is not None else None
        if info and info["model"] in n.loaded:  # a threaded function's model: what its callers pass
            called = [m for m in called if m != info["model"]] + info["callers"]
        known = [m for m in called if self.instances.get(m) in self.keyed_classes]
        if known:
            model = self.threaded_here(plan[0]) or self.scope_optimizers().get(plan[0])
            whole = info["whole"] if info is not None and info["opt"] == plan[0] else model in self.whole
            why = _unkeyable(body, plan, model, whole)
            if why is None and info is not None and info["opt"] == plan[0] and not all(
                    _binds_key(sc, self.ctx) or self.rooted_before(sc, c) for c, sc in zip(info["call_nodes"],
                                                                                          info["caller_scopes"])):
                why = (f"{f.name.value}() would take a key from each caller, and a caller has none of its own "
                       "(torch.manual_seed in the calling function, or a draw above the call that gives it a root key)")
            glob = self.global_trained.get(f.name.value) if f is not None else None
            if why is None and glob is not None and glob["opt"] == plan[0] and not _binds_key(self.module, self.ctx):
                why = "the module has no key of its own (torch.manual_seed at module level) for the step to split"
            if why is None:
                self.ctx.analyses.setdefault(KEYED, set()).add((f.name.value if f is not None else "", plan[0]))
                # the loss's calls of the model go into the train_step, which gives them the step's key
                self.step_calls.update(self.step_model_calls(body, plan, model, known))
                if (info is None or info["opt"] != plan[0]) and (glob is None or glob["opt"] != plan[0]) \
                        and not _binds_key(self.scopes[-1] if self.scopes else self.module, self.ctx):
                    self.ctx.report(Severity.INFO, "key-added", "train_step takes a key: a root key `key = "
                                    "jax.random.key(0)` is created before this loop (seed it as you like)", loop)
                self.ctx.report(Severity.INFO, "key-added", f"{known[0]} ({self.instances[known[0]]}) draws random "
                                "numbers in training (dropout, or a draw in its forward): train_step takes a key, split "
                                "from `key` at each step (key, step_key = jax.random.split(key)), " + (
                                    "given to the whole-graph model (model(..., key=key))" if whole else
                                    "one per example (jax.vmap(model)(x, key=jax.random.split(key, x.shape[0])))"), loop)
                return
            self.unkeyed_calls.update(self.step_model_calls(body, plan, model, known))
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{known[0]} ({self.instances[known[0]]}) draws random numbers in training (dropout, or a "
                            f"draw in its forward) and the train_step written here calls it without a key: {why}; "
                            "give train_step a `key`, split it per step (key, step_key = jax.random.split(key)) and call the model as "
                            "jax.vmap(model)(x, key=jax.random.split(step_key, x.shape[0]))", loop)
        elif self.keyed_classes and any(m not in self.instances for m in called):
            self.ctx.report(Severity.WARNING, "unsupported-construct",
                            f"if the model trained here is a {' or '.join(self.keyed_classes)}, it draws random numbers "
                            "in training (dropout) and needs key= in train_step (split per step; jax.vmap(model)(x, "
                            "key=jax.random.split(step_key, x.shape[0]))): the train_step written here passes none", loop)

    def rooted_before(self, scope, call: cst.Call) -> bool:
        """Whether keys.py makes ``scope`` (a caller of a threaded function, with no seed of its own) a root key above
        ``call``: a statement of the scope before the one holding ``call`` draws from PyTorch's global generator
        (``x = torch.randn(...)``: the root key is made above it)."""
        body = scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body
        for st in body:
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
                continue
            calls = find_all(st, cst.Call)
            if any(c is call for c in calls):
                return False
            if any(self.ctx.imports.resolve(c.func) in _GLOBAL_DRAWS for c in calls):
                return True
        return False

    @staticmethod
    def step_model_calls(body: list, plan, model: str | None, known: list[str]) -> set[int]:
        """The ids of the calls of the models ``known`` in the loss statements a loop's train_step takes in."""
        block = _split_block(body, plan, model)[0] if model is not None else body[plan[2]:plan[3]]
        return {id(c) for st in block for c in _calls(st) if isinstance(c.func, cst.Name) and c.func.value in known}

    def _load_assign(self, stmt) -> cst.Assign | None:
        """``name = torch.load(f)`` (map_location= / weights_only= allowed) as a statement outside a class: the
        assignment; else None."""
        if self.in_class or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
            return None
        a = stmt.body[0]
        call = a.value
        if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name) or not isinstance(call, cst.Call) \
                or self.ctx.imports.resolve(call.func) not in ("torch.load", "torch.serialization.load") \
                or not call.args or call.args[0].keyword is not None or call.args[0].star \
                or not all(x.keyword is not None and x.keyword.value in ("map_location", "weights_only")
                           for x in call.args[1:]):
            return None
        return a

    # --- checkpoint dicts: torch.save({'model': model.state_dict(), 'epoch': epoch, ...}, f) and their loads ---

    def checkpoint_tree(self, owner, scope, load: bool = False) -> str | None:
        """The pytree a checkpoint keeps for ``owner.state_dict()`` (or restores by ``owner.load_state_dict``): the
        model ``owner`` (``(model, model_state)`` for one with a layer state), or ``opt_state`` of the optimizer
        ``owner`` where it is the one optimizer that trains a model in its scope (for a load: the load's scope, where
        its state is rebound); None for anything else (a scheduler, an attribute)."""
        if not isinstance(owner, cst.Name):
            return None
        name = owner.value
        if name in self.models or name in self.model_params():
            return f"({name}, {state.state_name(self.ctx, name)})" if name in self.stateful else name
        for sc in [scope] if load or scope is self.module or name in _local_names(scope) else [scope, self.module]:
            opts = self.optimizers_of(sc)
            if name in opts:
                trained = {o for o, m in opts.items() if m is not None}
                return "opt_state" if trained == {name} else None
        return None

    def checkpoint_trees(self, d: cst.Dict, scope) -> dict[str, tuple[cst.BaseExpression, str]] | None:
        """A dict display saved as a checkpoint: its string keys holding ``X.state_dict()`` of a model or a trained
        optimizer → (the key as written, the pytree saved: checkpoint_tree); None where it holds another state_dict,
        a key that is not a string, or ``**``."""
        trees = {}
        for el in d.elements:
            key = _str_key(el.key) if isinstance(el, cst.DictElement) else None
            if key is None:
                return None
            v = el.value
            if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "state_dict" \
                    and not v.args:
                tree = self.checkpoint_tree(v.func.value, scope)
                if tree is None:
                    return None
                trees[key] = (el.key, tree)
            elif any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "state_dict" for c in find_all(v, cst.Call)):
                return None
        return trees

    def plan_checkpoint_saves(self, scope) -> None:
        """``torch.save(d, f)`` statements of a scope, ``d`` a dict display (or a name the scope binds once to
        one and reads only there) holding ``X.state_dict()`` of models or a trained optimizer next to plain
        values → ``save_checkpoint(f, d, trees=(<the keys of the pytrees>,))`` with each ``X.state_dict()``
        the pytree itself (checkpoint_tree): edits kept by statement (write_checkpoint_edit)."""
        for stmt in _scope_statements(scope):
            call = stmt.body[0].value if len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) else None
            if not isinstance(call, cst.Call) or len(call.args) != 2 \
                    or self.ctx.imports.resolve(call.func) not in ("torch.save", "torch.serialization.save") \
                    or any(a.keyword is not None or a.star for a in call.args):
                continue
            obj, bound = call.args[0].value, None
            if isinstance(obj, cst.Name):
                assigns = [st for st in _scope_statements(scope) if _assigns(st, obj.value)]
                if len(assigns) != 1 or not isinstance(assigns[0].body[0].value, cst.Dict) \
                        or len(assigns[0].body[0].targets) != 1 or _reads(scope, obj.value) != 1:
                    continue
                bound = assigns[0]
                obj = bound.body[0].value
            if not isinstance(obj, cst.Dict):
                continue
            trees = self.checkpoint_trees(obj, scope)
            if not trees:
                continue
            if bound is not None:
                self.checkpoint_edits[id(bound)] = ("dict", trees)
            self.checkpoint_edits[id(stmt)] = ("save", trees, bound is None)

    def load_checkpoint(self, stmt) -> cst.BaseSmallStatement | None:
        """``ck = torch.load(f)`` where the scope reads ``ck`` only as ``ck['key']`` and restores models or its
        trained optimizer by ``X.load_state_dict(ck['key'])`` statements → ``ck = load_checkpoint(f, {'key':
        X, ...})`` (written into the output; it reads what save_checkpoint wrote, each pytree into the one given
        under its key) and each of those statements → ``X = ck['key']`` (``opt_state = ck['key']`` for the
        optimizer, which must be created above the load). None (the rule's error) for anything else."""
        a = self._load_assign(stmt)
        if a is None:
            return None
        name, scope = a.targets[0].target.value, self.scopes[-1] if self.scopes else self.module
        reads = _KeyReads(name)
        scan(scope, reads)
        if reads.other or len([st for st in _scope_statements(scope) if _assigns(st, name)]) != 1:
            return None
        restores: dict[int, str] = {}
        like: dict[str, tuple[cst.BaseExpression, str]] = {}
        order = _scope_assigns(scope)
        for st in _scope_statements(scope):
            call = st.body[0].value if len(st.body) == 1 and isinstance(st.body[0], cst.Expr) else None
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                    and call.func.attr.value == "load_state_dict"):
                continue
            arg = call.args[0].value if len(call.args) == 1 and call.args[0].keyword is None else None
            key = _str_key(arg.slice[0].slice.value) if isinstance(arg, cst.Subscript) and isinstance(arg.value, cst.Name) \
                and arg.value.value == name and len(arg.slice) == 1 and isinstance(arg.slice[0].slice, cst.Index) else None
            if key is None:
                if any(isinstance(n, cst.Name) and n.value == name for n in find_all(call, cst.Name)):
                    return None  # load_state_dict(ck['model'], strict=False), or of a computed value
                continue
            tree = self.checkpoint_tree(call.func.value, scope, load=True)
            if tree is None or like.get(key, (None, tree))[1] != tree:
                return None
            if tree == "opt_state":  # its opt_state (written after the optimizer) must exist at the load
                opt = call.func.value.value
                made = [i for i, x in enumerate(order) if any(opt in target_names(t.target) for t in x.targets)]
                if not made or made[0] > next(i for i, x in enumerate(order) if x is a):
                    return None
            like[key] = (arg.slice[0].slice.value, tree)
            restores[id(st)] = tree.strip("()")
            if tree != "opt_state":
                self.note_global(call.func.value.value)
        if not like:
            return None
        for st_id, target in restores.items():
            self.checkpoint_edits[st_id] = ("restore", target)
        from fwport.packs.torch2jax.ops import HELPERS
        self.ctx.analyses.setdefault(HELPERS, set()).add("load_checkpoint")
        keys = ", ".join(code(k) for k, _ in like.values())
        self.ctx.report(Severity.INFO, "idiom-replaced", f"torch.load of a checkpoint dict → load_checkpoint (written "
                        f"into this file): it reads the file save_checkpoint writes (the translated torch.save of such a "
                        f"dict), {keys} into the pytrees given as their like, the other values unpickled; not a PyTorch "
                        "checkpoint", stmt)
        entries = ", ".join(f"{code(k)}: {tree}" for k, tree in like.values())
        return a.with_changes(value=parsed_expression(f"{written.name(self.ctx, 'load_checkpoint')}({code(a.value.args[0].value)}, {{{entries}}})"))

    def load_named_state_dict(self, stmt) -> cst.BaseSmallStatement | None:
        """``sd = torch.load(f)`` where the scope reads ``sd`` once, as the one argument of a later
        ``model.load_state_dict(sd)`` statement of a model (a translated module, made above the load where the scope
        makes it) → ``sd = eqx.tree_deserialise_leaves(f, model)`` (the leaves the translated
        ``torch.save(model.state_dict(), f)`` wrote, read into the model's structure; ``(model, model_state)`` for a
        model with a layer state) and that statement → ``model = sd``. None (the rule's error) for anything else: a
        state_dict changed before the load (keys renamed or deleted), read elsewhere, or given to something else."""
        a = self._load_assign(stmt)
        if a is None:
            return None
        name, scope = a.targets[0].target.value, self.scopes[-1] if self.scopes else self.module
        statements = _scope_statements(scope)
        if _reads(scope, name) != 1 or len([st for st in statements if _assigns(st, name)]) != 1:
            return None
        at = next((i for i, st in enumerate(statements) if st is stmt), None)
        restore = None
        for st in statements[at + 1:] if at is not None else ():
            call = st.body[0].value if len(st.body) == 1 and isinstance(st.body[0], cst.Expr) else None
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                    and call.func.attr.value == "load_state_dict" and len(call.args) == 1 \
                    and call.args[0].keyword is None and not call.args[0].star \
                    and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == name:
                restore = (st, call.func.value)
                break
        if restore is None:
            return None
        st, owner = restore
        tree = self.checkpoint_tree(owner, scope, load=True)
        if tree is None or tree == "opt_state":
            return None
        model = owner.value
        order = _scope_assigns(scope)
        made = [i for i, x in enumerate(order) if any(model in target_names(t.target) for t in x.targets)]
        if made and made[0] > next(i for i, x in enumerate(order) if x is a):
            return None  # the model is made after the load: no structure to read the leaves into there
        self.checkpoint_edits[id(st)] = ("restore", tree.strip("()"))
        self.note_global(model)
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{name} = torch.load(f) given to {model}.load_state_dict("
                        f"{name}) → {name} = eqx.tree_deserialise_leaves(f, {tree.strip('()')}) and {model} = {name}: "
                        "it reads the leaves the translated torch.save(model.state_dict(), f) wrote "
                        "(eqx.tree_serialise_leaves), not a PyTorch checkpoint", stmt)
        load = self.ctx.spell_text("equinox.tree_deserialise_leaves")
        return a.with_changes(value=parsed_expression(f"{load}({code(a.value.args[0].value)}, {tree})"))

    def write_checkpoint_edit(self, edit: tuple, updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """A statement planned by plan_checkpoint_saves or load_checkpoint, written."""
        if edit[0] == "restore":
            target, value = edit[1], updated.body[0].value.args[0].value
            return updated.with_changes(body=[parsed_statement(f"{target} = {code(value)}\n").body[0]])
        trees = edit[1]

        def with_trees(d: cst.Dict) -> cst.Dict:
            return d.with_changes(elements=[el.with_changes(value=parsed_expression(trees[_str_key(el.key)][1]))
                                            if _str_key(el.key) in trees else el for el in d.elements])

        small = updated.body[0]
        if edit[0] == "dict":
            return updated.with_changes(body=[small.with_changes(value=with_trees(small.value))])
        from fwport.packs.torch2jax.ops import HELPERS
        self.ctx.analyses.setdefault(HELPERS, set()).add("save_checkpoint")
        obj, path = small.value.args[0].value, small.value.args[1].value
        keys = [code(k) for k, _ in trees.values()]
        self.ctx.report(Severity.INFO, "idiom-replaced", "torch.save of a checkpoint dict → save_checkpoint (written "
                        f"into this file): {', '.join(keys)} (models, optimizer states) with eqx.tree_serialise_leaves, "
                        "the other values pickled, in one file that load_checkpoint reads back; not a PyTorch checkpoint",
                        updated)
        names = f"({', '.join(keys)},)" if len(keys) == 1 else f"({', '.join(keys)})"
        call = cst.Call(cst.Name(written.name(self.ctx, "save_checkpoint")), [
            cst.Arg(path, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(with_trees(obj) if edit[2] else obj, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(parsed_expression(names), keyword=cst.Name("trees"),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        return updated.with_changes(body=[small.with_changes(value=call)])

    def load_data(self, stmt) -> cst.BaseSmallStatement | None:
        """``data = torch.load(f)`` where every use of ``data`` goes through ``torch.from_numpy``: the file holds
        numpy arrays, not tensors → ``data = load_pickled_arrays(f)`` (data.py, written into the output), which
        reads torch.save's archive without PyTorch and fails on a tensor inside; a warning says so."""
        a = self._load_assign(stmt)
        if a is None:
            return None
        call = a.value
        name = a.targets[0].target.value
        uses = _FromNumpyUses(name, self.ctx)
        scan(self.module, uses)
        if not uses.inside or uses.outside:
            return None
        from fwport.packs.torch2jax.ops import HELPERS
        self.ctx.analyses.setdefault(HELPERS, set()).add("load_pickled_arrays")
        self.ctx.report(Severity.WARNING, "unsupported-construct",
                        f"torch.load of numpy data ({name} is only read through torch.from_numpy) → load_pickled_arrays, "
                        "written into this file: it reads torch.save's archive without PyTorch and fails if the file "
                        "holds a tensor; better, convert the file once (np.save) and read it with np.load", stmt)
        return a.with_changes(value=cst.Call(cst.Name(written.name(self.ctx, "load_pickled_arrays")), [call.args[0].with_changes(
            comma=cst.MaybeSentinel.DEFAULT)]))

    def save_data(self, stmt) -> cst.BaseSmallStatement | None:
        """``torch.save(data, f)`` where ``data`` is a name its scope binds once, to numpy data (_numpy_value: a
        numpy call, or an array method of one; ``data = np.sin(x).astype('float64')``) → ``save_pickled_arrays(data,
        f)`` (data.py, written into the output): the pickle in a zip archive of torch.save's layout, which
        load_pickled_arrays (the translated ``torch.load`` of numpy data) and torch.load(f, weights_only=False)
        read. None (the rule's error) for anything else."""
        if self.in_class or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
            return None
        call = stmt.body[0].value
        if not isinstance(call, cst.Call) or self.ctx.imports.resolve(call.func) not in ("torch.save", "torch.serialization.save") \
                or len(call.args) != 2 or any(a.star or a.keyword is not None for a in call.args):
            return None
        obj, path = call.args[0].value, call.args[1].value
        scope = self.scopes[-1] if self.scopes else self.module
        if not isinstance(obj, cst.Name) or isinstance(scope, cst.FunctionDef) and obj.value in {
                p.name.value for p in [*scope.params.params, *scope.params.kwonly_params, *scope.params.posonly_params]}:
            return None
        binds = [st for st in _scope_statements(scope) if any(obj.value in target_names(t) for t in [
            *(x.target for x in find_all(st, cst.AssignTarget)), *(x.target for x in find_all(st, cst.AugAssign)),
            *(x.target for x in find_all(st, cst.AnnAssign))])]
        loops = [t for t in [*(n.target for n in find_all(scope, cst.For)), *(n.target for n in find_all(scope, cst.CompFor)),
                             *(n.name for n in find_all(scope, cst.AsName))] if obj.value in target_names(t)]
        if len(binds) != 1 or loops or not _assigns(binds[0], obj.value) or len(binds[0].body[0].targets) != 1 \
                or not _numpy_value(binds[0].body[0].value, self.ctx.imports.resolve):
            return None
        from fwport.packs.torch2jax.ops import HELPERS
        self.ctx.analyses.setdefault(HELPERS, set()).add("save_pickled_arrays")
        self.ctx.report(Severity.INFO, "idiom-replaced", f"torch.save of numpy data ({obj.value} = "
                        f"{code(binds[0].body[0].value)[:60]}) → save_pickled_arrays, written into this file: the same "
                        "pickle in a zip archive of torch.save's layout, which the translated torch.load "
                        "(load_pickled_arrays) and torch.load(f, weights_only=False) read", stmt)
        return stmt.body[0].with_changes(value=cst.Call(cst.Name(written.name(self.ctx, "save_pickled_arrays")), [
            cst.Arg(obj, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(path)]))

    def load_model(self, stmt) -> cst.BaseSmallStatement | None:
        """``model = torch.load(f)``, a whole module pickled by ``torch.save(model, f)`` → ``model =
        eqx.tree_deserialise_leaves(f, like)``: the file the translated torch.save wrote (the model's arrays),
        read into ``like``, a model of the same structure in scope: ``model`` itself where the code builds it
        elsewhere (the load replaces its weights), else the one model the file saves to the same path. None
        (the rule's error) where no such model is known."""
        a = self._load_assign(stmt)
        if a is None:
            return None
        call = a.value
        name, path = a.targets[0].target.value, call.args[0].value
        scope = self.scopes[-1] if self.scopes else self.module
        like = None
        if name in self.models and (_builds(self.module, name, self.ctx) or isinstance(scope, cst.FunctionDef)
                                    and name in {p.name.value for p in scope.params.params}):
            like = name
        else:
            saved = _saved_models(self.module, code(path), self.models, self.ctx)
            if len(saved) == 1 and next(iter(saved)) in _local_names(scope) | self.module_names:
                like = next(iter(saved))
        if like is None or (name in self.stateful or like in self.stateful) and like != name:
            return None
        if like in self.stateful:
            like = f"{like}, {state.state_name(self.ctx, like)}"
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{name} = torch.load(f) → eqx.tree_deserialise_leaves(f, "
                        f"{like.split(',')[0]}): it reads the model's arrays the translated torch.save(model, f) wrote "
                        f"(eqx.tree_serialise_leaves) into {like.split(',')[0]}, a model of the same structure, not a "
                        "pickled PyTorch module", stmt)
        load = self.ctx.spell_text("equinox.tree_deserialise_leaves")
        target = like if like != name else name
        wrapped = f"({like})" if "," in like else like
        return parsed_statement(f"{target if ',' in like else name} = {load}({code(path)}, {wrapped})\n").body[0]

    def load_state_dict(self, call: cst.Call, stmt) -> cst.BaseSmallStatement | None:
        """``model.load_state_dict(torch.load(f, ...))`` → ``model = eqx.tree_deserialise_leaves(f, model)``
        (``model, state`` for a model with a layer state): the file the translated torch.save wrote."""
        f = call.func
        if not (isinstance(f, cst.Attribute) and f.attr.value == "load_state_dict" and isinstance(f.value, cst.Name)
                and len(call.args) == 1 and call.args[0].keyword is None):
            return None
        inner = call.args[0].value
        if not (isinstance(inner, cst.Call) and self.ctx.imports.resolve(inner.func) in ("torch.load", "torch.serialization.load")
                and inner.args and inner.args[0].keyword is None
                and all(a.keyword is not None and a.keyword.value in ("map_location", "weights_only") for a in inner.args[1:])):
            return None
        model = f.value.value
        like = f"{model}, {state.state_name(self.ctx, model)}" if model in self.stateful else model
        self.ctx.report(Severity.INFO, "idiom-replaced", "model.load_state_dict(torch.load(f)) → "
                        "eqx.tree_deserialise_leaves(f, model): it reads the leaves the translated torch.save wrote "
                        "(eqx.tree_serialise_leaves), not a PyTorch checkpoint", stmt)
        load = self.ctx.spell_text("equinox.tree_deserialise_leaves")
        return parsed_statement(f"{like} = {load}({code(inner.args[0].value)}, {'(' + like + ')' if model in self.stateful else like})\n").body[0]

    def leave_Attribute(self, original, updated):
        if original.attr.value == "param_groups" and not self.in_class and not self.ctx.is_settled(original):
            # (an optax optimizer is a pair of functions: no groups, no learning rate to set in place)
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(original)}: an optax optimizer has no "
                            "param_groups; to change its learning rate as training goes, create it with "
                            "optax.inject_hyperparams(optax.<name>)(learning_rate=...) and set "
                            "opt_state.hyperparams['learning_rate'] = lr where PyTorch sets group['lr'] (or give it "
                            "an optax schedule)", original)
            return updated
        # `outputs.data` of a model's output (a JAX array has no .data; the values are the same)
        if original.attr.value == "data" and isinstance(original.value, cst.Name) and original.value.value in self.outputs \
                and not self.in_class:
            return updated.value
        # `real.data` of a name the scope binds only to tensors PyTorch's functions make (`real = torch.randn(...)`)
        if original.attr.value == "data" and isinstance(original.value, cst.Name) and not self.in_class \
                and id(original) not in self.written and self.tensor_name(original.value.value):
            return updated.value
        if original.attr.value == "data" and not isinstance(original.value, cst.Name) and not self.in_class:
            from fwport.packs.torch2jax.inplace import _is_tensor
            if _is_tensor(original.value, set(), self.ctx):  # `torch.randn(3).data`, `(torch.ones(3) * 2).data`
                return updated.value
            # `model.fc.weight.data` read: the model's array itself (writes into it are params.py's)
            chain = dotted(original.value)  # (model, ..., weight)
            if id(original) not in self.written and chain and len(chain) > 1 and chain[-1] in ("weight", "bias") \
                    and (chain[0] in self.models or chain[0] in self.model_params()):
                return updated.value
        if original.attr.value == "data" and not self.in_class and id(original) not in self.written \
                and self.unknown_holder(original.value) and not self.ctx.is_settled(original) \
                and id(original) not in self.detached_by_rules():
            self.ctx.report(Severity.WARNING, "unsupported-construct", f"{code(original)} is left as written: fwport "
                            f"cannot tell whether {code(original.value)} is a PyTorch tensor, whose .data a jax array "
                            f"does not have (it fails there: write {code(original.value)} itself, its values, or "
                            f"jax.lax.stop_gradient({code(original.value)}) where a gradient flows through it), or an "
                            "object with a data attribute (a dataset, a record)", original)
        return updated

    def detached_by_rules(self) -> set[int]:
        """The ``x.data`` inputs of ``torch.max`` / ``torch.min`` calls: their rule's transform writes them
        ``jax.lax.stop_gradient(x)`` (not left as written)."""
        if self._detached is None:
            self._detached = {id(c.args[0].value) for c in find_all(self.module, cst.Call)
                              if c.args and isinstance(c.args[0].value, cst.Attribute) and c.args[0].value.attr.value == "data"
                              and self.ctx.imports.resolve(c.func) in ("torch.max", "torch.min")}
        return self._detached

    def unknown_holder(self, node: cst.BaseExpression) -> bool:
        """Whether ``x`` of a ``x.data`` read the passes above leave is a name (or an item of one: ``out["x"]``) whose
        kind fwport does not know: not ``self``, not a module, not the options ``parser.parse_args()`` returns."""
        while isinstance(node, cst.Subscript):
            node = node.value
        if not isinstance(node, cst.Name) or node.value in _OPTIONS or self.ctx.imports.resolve(node) is not None:
            return False
        if self.imported is None:  # (`import detectron2.data`: a package, whatever the imports fwport resolves)
            imports = [*find_all(self.module, cst.Import), *find_all(self.module, cst.ImportFrom)]
            self.imported = {(dotted_text(m) or "").split(".")[0] for m in
                             [i.module for i in imports if isinstance(i, cst.ImportFrom) and i.module is not None]
                             + [a.name for i in imports if isinstance(i, cst.Import) for a in i.names]}
            self.imported |= {a.asname.name.value for i in imports if not isinstance(i.names, cst.ImportStar)
                              for a in i.names if a.asname and isinstance(a.asname.name, cst.Name)}
        if node.value in self.imported:
            return False
        scope = self.scopes[-1] if self.scopes else self.module
        values = [a.value for sc in (scope, self.module) for a in _scope_assigns(sc)
                  if any(node.value in target_names(t.target) for t in a.targets)]
        return not any(isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute)
                       and v.func.attr.value in ("parse_args", "parse_known_args") for v in values)

    def tensor_name(self, name: str) -> bool:
        """Whether the scope being visited (a function, or the module's own code) binds ``name`` only by plain
        assignments of a tensor a torch function makes (inplace._is_tensor: ``torch.randn(...)``, ``x * 2`` of
        one), never as a parameter or a loop target."""
        from fwport.packs.torch2jax.inplace import _is_tensor
        scope = self.scopes[-1] if self.scopes else self.module
        if isinstance(scope, cst.FunctionDef) and name in {p.name.value for p in (
                *scope.params.params, *scope.params.kwonly_params, *scope.params.posonly_params)}:
            return False
        if any(name in target_names(f.target) for f in find_all(scope, cst.For)):
            return False
        values = [a.value for a in _scope_assigns(scope) if any(name in target_names(t.target) for t in a.targets)]
        if not values or any(not (len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name))
                             for a in _scope_assigns(scope) if any(name in target_names(t.target) for t in a.targets)):
            return False
        return all(_is_tensor(v, set(), self.ctx) for v in values)

    def visit_For(self, node: cst.For) -> None:
        self.check_loop(node)
        self.loop_depth[-1] += 1

    def visit_While(self, node: cst.While) -> None:
        self.check_loop(node)
        self.loop_depth[-1] += 1

    def leave_For(self, original, updated):
        self.loop_depth[-1] -= 1
        return self.write_closures(original, updated)

    def leave_While(self, original, updated):
        self.loop_depth[-1] -= 1
        return self.write_closures(original, updated)

    def write_closures(self, original, updated):
        """``def closure(): ...`` and ``optimizer.step(closure)`` (checked by check_closures) → ``for _ in
        range(max_iter):`` holding the closure's statements and ``optimizer.step()``: a loop the finishing step
        writes as train_step calls."""
        found = self.closures.get(id(original))
        if not found:
            return updated
        block = isinstance(updated, (cst.Module, cst.IndentedBlock))  # a straight block's (check_straight's)
        body = list(updated.body if block else updated.body.body)
        rest = {}
        for def_i, step_i, opt, max_iter in found:
            fn = body[def_i]
            stmts = _one_per_line(list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else [fn.body])
            stmts = stmts[:-1] + [parsed_statement(f"{opt}.step()\n")]
            loop = parsed_statement(f"for _ in range({max_iter}):  # torch.optim.LBFGS's max_iter: "
                                    "its iterations in one step(closure)\n    pass\n")
            loop = loop.with_changes(body=loop.body.with_changes(body=stmts), leading_lines=fn.leading_lines)
            if len(body[step_i].body) > 1:  # `opt.step(closure); done = True`: the rest of the line after the loop
                rest[step_i] = body[step_i].with_changes(body=body[step_i].body[1:], leading_lines=())
            body[step_i] = loop
        drop = {d for d, *_ in found}
        kept = [x for i, st in enumerate(body) if i not in drop for x in ([st, rest[i]] if i in rest else [st])]
        return updated.with_changes(body=kept) if block else updated.with_changes(body=updated.body.with_changes(body=kept))

    def check_closures(self, loop, body: list) -> None:
        """The LBFGS steps of the loop body (_closure_steps) whose optimizer this scope creates with line_search_fn
        None and a literal max_iter: checked as a loop's, recorded for write_closures and the rule (LBFGS_STEPS),
        and an approximate warning saying where optax.lbfgs's iterations differ from PyTorch's."""
        scope = self.scopes[-1] if self.scopes else self.module
        for def_i, step_i, opt, inner in _closure_steps(body):
            call = next((a.value for a in _scope_assigns(scope) if isinstance(a.value, cst.Call)
                         and self.ctx.imports.resolve(a.value.func) in ("torch.optim.LBFGS", "torch.optim.lbfgs.LBFGS")
                         and any(opt in target_names(t.target) for t in a.targets)), None)
            bound = _bind_text(call, LBFGS_SIGNATURE) if call is not None else None
            if bound is None or bound["line_search_fn"] != "None" or not bound["max_iter"].isdigit() \
                    or bound["max_eval"] != "None" or opt not in self.scope_optimizers():
                continue
            plan = _loop_plan(inner)
            if plan is None or plan[0] != opt:
                continue
            self.planned.update(id(st) for st in inner if _backward(st))
            model = self.scope_optimizers()[opt]
            problem = _loop_problem(inner, plan, model)
            if problem:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"this training step stays as written: {problem}",
                                body[step_i])
                continue
            self.check_keys(loop, inner, plan)
            self.check_host_random(loop, inner, plan, model)
            self.closures.setdefault(id(loop), []).append((def_i, step_i, opt, bound["max_iter"]))
            self.ctx.analyses.setdefault(LBFGS_STEPS, set()).add(code(call))
            self.ctx.report(Severity.WARNING, "approximate", LBFGS_DIFFERS.format(opt=opt, n=bound["max_iter"]), body[step_i])

    def check_loop(self, loop) -> None:
        body = list(loop.body.body)
        self.check_block_steps(body)
        self.check_closures(loop, body)
        if not any(_backward_with_args(s) for s in body):
            return
        plan = _loop_plan(body)
        self.planned.update(id(st) for st in body if _backward(st))
        accumulated = _accumulation(body) if plan is None else None
        if accumulated is not None:
            opt, cond, loss = accumulated
            why = self.accumulation_problem(loop, body)
            if why is None:
                return
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"gradient accumulation: {loss}.backward() adds this iteration's gradients to the earlier "
                            f"ones and {opt}.step() runs only `if {cond}:`; fwport rewrites it (the gradients added up "
                            f"in a pytree, the update applied under the condition) where the block starts with "
                            f"{opt}.step(); {opt}.zero_grad(), the condition only reads names, the gradients are clear "
                            f"when the loop starts ({opt}.zero_grad() just before it) and nothing between the backward() "
                            f"and the step reads the model; here {why}: write the step with optax.MultiSteps({opt}, "
                            "every_k_schedule=k) (eqx.filter_value_and_grad, update, eqx.apply_updates at every "
                            "iteration); MultiSteps averages the k gradients where PyTorch sums them, so drop a "
                            "division of the loss by k", loop)
            return
        manual = _manual_plan(body) if plan is None else None
        if manual is not None:
            self.check_manual(loop, body, *manual)
            return
        if plan is None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            "a training loop is rewritten when its body holds, at its own level, optimizer.zero_grad(), "
                            "the assignments computing the loss, loss.backward() and optimizer.step() in that order; "
                            "write the optax step by hand here (eqx.filter_value_and_grad, optim.update, "
                            f"eqx.apply_updates){_unplanned(body, self.scope_optimizers())}", loop)
            return
        for rest, plan in _sequential_plans(body, self.ctx):  # a GAN's generator step, then its discriminator's
            self.check_plan(loop, rest, plan)

    def accumulation_problem(self, loop, body: list) -> str | None:
        """A loop accumulating gradients: None where it is rewritten (_accumulated; checked as the one step it
        becomes, errors reported by check_plan; recorded in ACCUMULATED), else why not."""
        acc = _accumulated(body)
        if acc is None:
            return ("the block does not start with the step and zero_grad(), or its condition reads more than names "
                    "or a name the loop assigns before it")
        opt = acc["opt"]
        scope = self.scopes[-1] if self.scopes else self.module
        model = self.scope_optimizers().get(opt) if opt in self.scope_optimizers() else self.threaded_here(opt)
        if model is None:
            return f"{opt} is not created in this scope from a model's parameters"
        prev = _previous_statement(scope, loop)
        nested = any(outer is not loop and any(x is loop for x in [*find_all(outer, cst.For), *find_all(outer, cst.While)])
                     for outer in [*find_all(scope, cst.For), *find_all(scope, cst.While)])
        others = [c for c in find_all(scope, cst.Call) if isinstance(c.func, cst.Attribute)
                  and c.func.attr.value == "backward" and all(c is not x for x in find_all(loop, cst.Call))]
        if not (prev is not None and _zero_grad(prev) == opt
                or isinstance(scope, cst.Module) and not nested and not others):
            return (f"the gradients may not be clear when the loop starts (no {opt}.zero_grad() just before it: "
                    "PyTorch adds the gradients left by an earlier backward() or loop to the first ones)")
        for st in [*acc["after"], *acc["rest"]]:
            n = _Names()
            scan(st, n)
            if model in n.loaded and any(st is x for x in acc["after"]) or "grad" in n.loaded:
                return f"`{_first_line(st)}` reads {model} or its gradients before the update"
        fn = self.scopes[0].name.value if self.scopes else ""
        self.ctx.analyses.setdefault(ACCUMULATED, set()).add((fn, opt))
        self.ctx.report(Severity.INFO, "idiom-replaced", f"gradient accumulation: each iteration's gradients are "
                        f"added up in {GRADS_ACC} (as backward() adds them in PyTorch) and the update applied to their "
                        f"sum `if {code(acc['cond'])}:`, where {opt}.step() runs", loop)
        self.check_plan(loop, acc["body"], acc["plan"])
        return None

    def check_manual(self, loop, body: list, plan, delta: str) -> None:
        """A loop stepping by hand (_manual_plan): rewritten (the finishing step's sgd_step) where the model is a
        model of this file bound in this scope (not a parameter, whose caller's model PyTorch updates in place), without
        a layer state or dropout, and the update's learning rate is plain names and numbers (passed to the step at
        each call); else an error saying why."""
        model = plan[0]
        scope = self.scopes[-1] if self.scopes else self.module
        bound = {n for a in _scope_assigns(scope) for t in a.targets for n in target_names(t.target)}
        self.planned.update(id(st) for st in body if _backward(st))
        if model not in self.models:
            why = f"{model} is not a model this file builds"
        elif model not in bound:
            why = (f"{model} is not assigned in this {'function' if self.scopes else 'module'} (a parameter or a "
                   "global): the step rebinds the model, which PyTorch updates in place for its caller too")
        elif model in self.stateful:
            why = f"{model}'s layers keep a state (BatchNorm) that the step would have to thread"
        elif self.instances.get(model) in self.keyed_classes:
            why = f"{model} ({self.instances[model]}) draws random numbers in training (dropout): the step needs a key"
        elif not _plain(parsed_expression(delta)):
            why = f"the update {delta} (g the gradient) reads more than names and numbers"
        elif _reads_grads(body, plan[4]):
            why = f"line {_first_line(_reads_grads(body, plan[4]))}: reads gradients PyTorch keeps (.grad, or the " \
                  "update's parameter), which the step does not return"
        elif not _split_block(body, plan, model)[0]:
            why = f"the loss {plan[1]} is not computed from {model} in this loop's body"
        else:
            why = _loop_problem(body, plan, model, self.ctx.imports.resolve)
        if why:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"this hand-written SGD step stays as written: "
                            f"{why}; write it by hand (loss, grads = eqx.filter_value_and_grad(loss_fn)({model}); "
                            f"{model} = eqx.apply_updates({model}, jax.tree_util.tree_map(lambda g: {delta}, grads)))",
                            loop)
            return
        self.keep_clip(body, plan, model)
        self.check_host_random(loop, body, plan, model)
        for call in find_all(body[plan[4]], cst.Call):  # the update goes as a whole (sgd_step): not translated
            self.ctx.plans.add(call, lambda original, updated: updated, descend=False, by="training-manual")
        self.ctx.analyses.setdefault(MANUAL, set()).add((self.scopes[-1].name.value if self.scopes else "", model, plan[1]))
        self.ctx.report(Severity.INFO, "idiom-replaced", f"the hand-written SGD update of {model}'s parameters → "
                        f"jax.tree_util.tree_map(lambda g: {delta}, grads) over the gradients of the loss (a jitted "
                        "sgd_step; its learning rate passed at each call)", body[plan[4]])

    def check_plan(self, loop, body: list, plan, what: str = "training loop") -> None:
        """One step of a loop's body (check_loop), or a straight-line step (check_straight, ``what`` "training
        step", ``loop`` its step() statement): rewritten where this scope creates its optimizer, else an error."""
        others = _joint_steps(body, plan)
        grouped = len(model_group(self.scope_optimizers().get(plan[0]))) > 1
        if (others or grouped) and self.check_joint(loop, body, plan, others, what):
            return
        if grouped or self.threaded_here(plan[0]) is None and any(
                len(model_group(self.scope_optimizers().get(o))) > 1 for o in others):
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"this {what} stays as written: {plan[0]} trains "
                            "several models' parameters chained together, which fwport writes as one train_step over "
                            "the tuple of the models only where the optimizers stepped on this loss are all created in "
                            "this scope; write that step by hand (loss, grads = eqx.filter_value_and_grad(loss_fn)"
                            "((a, b)), then the optimizer's update of the tuple)", loop)
            return
        if plan[0] in self.scope_optimizers() or self.threaded_here(plan[0]):
            model = self.scope_optimizers()[plan[0]] if plan[0] in self.scope_optimizers() else self.threaded_here(plan[0])
            problem = _loop_problem(body, plan, model, self.ctx.imports.resolve)
            if problem:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"this {what} stays as written: {problem}",
                                loop)
            elif self.other_step(body, plan, model):
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"this {what} stays as written: an "
                                f"earlier step of this scope steps {plan[0]} too, with other loss statements (or {plan[0]} "
                                "is created again otherwise): fwport writes one train_step per optimizer and scope; give "
                                f"this {what.split()[-1]} an optimizer of its own name, or write its optax step by hand", loop)
            else:
                self.keep_clip(body, plan, model)
                self.check_keys(loop, body, plan)
                self.check_host_random(loop, body, plan, model)
        else:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{plan[0]}.step(): {plan[0]} is not created in this function by torch.optim.X(model.parameters(), "
                            "...) (a parameter, a global, an attribute): an optax optimizer keeps its state outside, so "
                            "the step is rewritten only where the optimizer is created; pass opt_state in and return the "
                            "model and opt_state from this function, or create the optimizer here", loop)


    def check_joint(self, loop, body: list, plan, others: list[str], what: str) -> bool:
        """One loss whose backward() several optimizers step on (_joint_steps), each created in this scope from one
        model's parameters or several models' chained (``itertools.chain(a.parameters(), b.parameters())``: the
        optimizer's models, model_group; ``others`` may then be empty): recorded (JOINT) for the finishing step, which
        writes one train_step differentiating the loss with respect to the models together (a model's layer state
        threaded), where no model draws (dropout) or takes a whole graph, no two models are built with one module
        instance (_shared_module), nothing clips the gradients and nothing between the loss and the steps reads a
        model, an optimizer or gradients; else an error saying which. False where the optimizers are not all this
        scope's own (check_plan reports then)."""
        opts = [plan[0], *others]
        made = self.scope_optimizers()
        if any(o not in made or self.threaded_here(o) for o in opts):
            return False
        if any(made[o] is None for o in opts):
            return False
        models = [m for o in opts for m in model_group(made[o])]  # (an optimizer over chained models: each of them)
        if any(not m.isidentifier() for m in models) or len(set(models)) != len(models):
            return False
        rest = _without_steps(body, others)
        p = _loop_plan(rest)
        loss = plan[1]
        why = None
        if p is None or p[0] != plan[0]:
            why = "the steps are not in the shape read once the other optimizers' zero_grad() and step() are set aside"
        elif any(m in self.whole for m in models):
            why = f"{next(m for m in models if m in self.whole)} takes a whole graph (called without jax.vmap)"
        elif any(self.instances.get(m) in self.keyed_classes for m in models):
            m = next(m for m in models if self.instances.get(m) in self.keyed_classes)
            why = f"{m} ({self.instances[m]}) draws random numbers in training (dropout): the step would need a key"
        elif self.keyed_classes and any(m not in self.instances for m in models):
            why = (f"{next(m for m in models if m not in self.instances)} is of a class fwport does not know here, and "
                   f"{' or '.join(self.keyed_classes)} draws random numbers in training (dropout)")
        elif _shared_module(self.scopes[-1] if self.scopes else self.module, models):
            why = _shared_module(self.scopes[-1] if self.scopes else self.module, models)
        elif _loop_problem(rest, p, models[0], self.ctx.imports.resolve):
            why = _loop_problem(rest, p, models[0], self.ctx.imports.resolve)
        elif any(isinstance(c.func, (cst.Name, cst.Attribute)) and self.ctx.imports.resolve(c.func) in CLIP_NAMES
                 for st in rest for c in find_all(st, cst.Call)):
            why = "the gradients are clipped"
        else:
            block, _ = _split_block(rest, p, tuple(models))
            called = set()
            for st in block:
                called |= set(_names_loaded(st))
            missing = [m for m in models if m not in called]
            if missing:
                why = (f"no statement computing {loss} calls {missing[0]}: its gradients come through a value "
                       "computed earlier, which a JAX loss function does not differentiate")
            for i in p[5]:
                loaded = set(_names_loaded(rest[i]))
                if why is None and (loaded & {*models, *opts} or "grad" in loaded):
                    why = (f"line {_first_line(rest[i])}: a statement between the loss and the steps uses a model, an "
                           "optimizer or gradients")
            scope = self.scopes[-1] if self.scopes else self.module
            text = "".join(code(st) for st in block) + repr(_step_outputs(rest, p, tuple(models)))
            if why is None and self.stepped.setdefault((id(scope), *opts), text) != text:
                why = ("an earlier loop of this scope steps these optimizers on other loss statements (fwport writes one "
                       "train_step per group of optimizers and scope)")
        if why is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"this {what} stays as written: {loss}.backward() gives its gradients to "
                            f"{', '.join(o + '.step()' for o in opts)} (one loss training {len(models)} models); fwport "
                            f"writes one train_step differentiating {loss} with respect to "
                            f"({', '.join(models)}) together, but here {why}; write that step by hand (loss, grads = "
                            f"eqx.filter_value_and_grad(loss_fn)(({', '.join(models)})), then each optimizer's update "
                            "of its model's gradients)", loop)
            return True
        self.check_host_random(loop, rest, p, tuple(models))
        fn = self.scopes[-1].name.value if self.scopes else ""
        self.ctx.analyses.setdefault(JOINT, {})[(fn, plan[0])] = tuple(others)
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{loss}.backward() then {', '.join(o + '.step()' for o in opts)}: one train_step "
                        f"differentiating {loss} with respect to ({', '.join(models)}) together "
                        "(eqx.filter_value_and_grad of the tuple), " + (
                            "each model updated by its own optimizer" if len(models) == len(opts) else
                            "each optimizer updating the models whose parameters it takes (chained parameters: one "
                            "update of the tuple of the models, as PyTorch's optimizer steps each parameter from its "
                            "own gradient)"), loop)
        return True

    def other_step(self, body: list, plan, model: str) -> bool:
        """Whether an earlier loop of the scope steps the same optimizer (created in the scope) with other loss
        statements or clipping, or the scope creates that optimizer with different arguments: the finishing step
        writes one train_step per optimizer and scope (a second loop of the same step calls it again)."""
        if not (self.threaded_here(plan[0]) is None and plan[0] in self.scope_optimizers()):
            return False
        scope = self.scopes[-1] if self.scopes else self.module
        made = {code(a.value) for a in _scope_assigns(scope) if any(plan[0] in target_names(t.target) for t in a.targets)}
        clip = _step_clip(body, plan, model, self.ctx.imports.resolve)
        text = "".join(code(st) for st in _split_block(body, plan, model)[0]) + repr(_step_outputs(body, plan, model)) \
            + (code(clip[1][0]) if clip else "")
        seen = self.stepped.setdefault((id(scope), plan[0]), text)
        return seen is not text and (seen != text or len(made) > 1)

    def keep_clip(self, body: list, plan, model: str) -> None:
        """The gradient clipping the finishing step moves into the train_step (_step_clip): the rule pass leaves its
        call as written (it has no rule of its own), and an info finding says where it goes."""
        clip = _step_clip(body, plan, model, self.ctx.imports.resolve)
        if clip is None:
            return
        call = clip[1][0]
        self.ctx.plans.add(call, lambda original, updated: updated, descend=False, by="training-clip")
        self.ctx.report(Severity.INFO, "idiom-replaced", "clip_grad_norm_: the train_step scales the gradients by "
                        "min(1, max_norm / (global norm + 1e-6)) before the optimizer's update, as PyTorch does", call)

    def check_block_steps(self, body: list) -> None:
        """The steps inside ``if`` / ``with`` blocks at the loop's level (_block_plan) whose optimizer this scope
        creates: checked as a loop's (the finishing step writes each its train_step); others keep the error of a
        backward() not at a loop's level."""
        for i in range(len(body)):
            found = _block_plan(body, i)
            if found is None or found[2][0] not in self.scope_optimizers():
                continue
            inner, _, plan = found
            self.planned.update(id(st) for st in inner if _backward(st))
            model = self.scope_optimizers()[plan[0]]
            if len(model_group(model)) > 1:  # an optimizer over chained models: the joint step's tuple
                self.check_plan(body[i], inner, plan, "training step")
                continue
            problem = _loop_problem(inner, plan, model, self.ctx.imports.resolve)
            if problem:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"this training step stays as written: {problem}",
                                body[i])
            else:
                self.keep_clip(inner, plan, model)
                self.check_keys(body[i], inner, plan)
                self.check_host_random(body[i], inner, plan, model)


#: PyTorch's draws from its global generator (keys.py gives the scope of a statement drawing so a root key above it)
_GLOBAL_DRAWS = frozenset(f"torch.{n}" for n in ("randn", "rand", "randint", "randperm", "normal", "bernoulli",
                                                 "multinomial", "randn_like", "rand_like", "randint_like"))

NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})


# names that hold a CUDA device's index in distributed code (`x.to(rank)`, `x.to(self.gpu_id)`, `x.to(args.gpu)`):
# `.to(<int>)` is a move to that device (an int is no dtype nor tensor)
_DEVICE_INDEX = frozenset({"rank", "local_rank", "gpu", "gpu_id"})


def _is_device(node, ctx) -> bool:
    """A device argument of ``.to(...)``: a device name (``device``, ``args.device``, ``DEVICE``), a device index
    (_DEVICE_INDEX), a device string or ``torch.device(...)``."""
    text = dotted_text(node)
    if text is not None:
        last = text.rsplit(".", 1)[-1].lower()
        return "device" in last or last in _DEVICE_INDEX
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value.split(":")[0] in ("cuda", "cpu", "mps")
    return isinstance(node, cst.Call) and ctx.imports.resolve(node.func) == "torch.device"


class _ScriptOnly(cst.CSTVisitor):
    """The TorchScript-only decorators (SCRIPT_ONLY) of the file's functions: settled here, removed by finish."""

    def __init__(self, ctx):
        self.ctx = ctx

    def visit_Decorator(self, node: cst.Decorator) -> None:
        d = node.decorator
        if self.ctx.imports.resolve(d.func if isinstance(d, cst.Call) else d) in SCRIPT_ONLY:
            self.ctx.settle(d, d.func) if isinstance(d, cst.Call) else self.ctx.settle(d)


def run(module: cst.Module, ctx) -> cst.Module:
    ctx.analyses[OPT_METHODS] = _optimizer_methods(module, ctx)
    if "jit" in (ctx.analyses["parsed"][1] if "parsed" in ctx.analyses else module.code):
        scan(module, _ScriptOnly(ctx))
    module, rebuilt = _normal_steps(module, ctx)
    out = _run(module, ctx)
    for pending in ctx.pending:  # findings on the nodes _normal_steps rebuilt: located at the nodes they replace
        if pending.node is not None and id(pending.node) in rebuilt:
            pending.node = rebuilt[id(pending.node)][1]
    return out


def _run(module: cst.Module, ctx) -> cst.Module:
    text = ctx.analyses["parsed"][1] if "parsed" in ctx.analyses else module.code
    models = set(_PARAMS.findall(text))
    plans = ctx.analyses.get(PLANS, {})
    stateful: set[str] = set()
    instances: dict[str, str] = {}  # model name → its translated class
    ctors, unbuilt = state.stateful_ctors(module, ctx, plans)  # the classes and builders whose instance keeps a state
    if plans:  # `model = Net(...)`: an instance of a translated module
        for stmt in module.body:
            if isinstance(stmt, cst.ClassDef):
                continue
            for a in _walk_assigns(stmt):
                value = a.value
                while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                        and (value.func.attr.value in ("to", "cuda", "cpu") or _model_cast(value)):
                    value = value.func.value  # Net().to(device): the moves are removed; Net().double(): a cast
                if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in plans:
                    names = [n for t in a.targets for n in target_names(t.target)]
                    models.update(names)
                    if plans[value.func.value]["stateful"]:
                        stateful.update(names)
                    instances.update((n, value.func.value) for n in names)
                elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ctors:
                    names = [n for t in a.targets for n in target_names(t.target)]  # `net = ResNet18()`
                    models.update(names)
                    stateful.update(names)
                elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in unbuilt:
                    ctx.report(Severity.ERROR, "unsupported-construct", f"{value.func.value}() returns a model with a "
                               "layer state (BatchNorm) that the translation builds without it: write `model, state = "
                               f"eqx.nn.make_with_state({value.func.value})()` and call the model as `y, state = "
                               "jax.vmap(model, axis_name=\"batch\", in_axes=(0, None), out_axes=(0, None))(x, state)`", value)
    models |= _bare_layers(module, ctx)
    containers = _model_containers(module, plans) if plans else {}
    for name, cls in _container_loops(module, containers).items():  # `for m in models:` / `[m(x) for m in models]`
        models.add(name)
        if cls is not None:
            instances[name] = cls
    for name, saved in _loaded_models(module, models, ctx).items():  # `copy = torch.load(f)` of a saved model
        if saved not in stateful:
            models.add(name)
            if saved in instances:
                instances[name] = instances[saved]
    ctx.analyses[STATEFUL] = stateful
    ctx.analyses[MODELS] = models
    hoisted = ctx.analyses.get(HOISTED, set())
    outputs = set()
    for stmt in module.body:
        for a in _walk_assigns(stmt):
            if isinstance(a.value, cst.Name) and a.value.value in hoisted and not isinstance(stmt, cst.ClassDef):
                outputs.update(n for t in a.targets for n in target_names(t.target))  # `p, aux = discriminator_out`
            elif isinstance(a.value, cst.Call) and not isinstance(stmt, cst.ClassDef) and (
                    isinstance(a.value.func, cst.Name) and a.value.func.value in models
                    or ctx.imports.resolve(a.value.func) in ("torch.autograd.Variable", "torch.autograd.variable.Variable")):
                outputs.update(n for t in a.targets for n in target_names(t.target))  # arrays: x.data is x
    p = _Pass(ctx, module, models, stateful, outputs)
    p.containers = containers
    p.aliases = _type_aliases(module, ctx)
    opt_models: dict[str, str | None] = {}  # optimizer name → the model it trains, from the source (any scope)
    scopes: list = [module, *(f for s in module.body for f in ([s] if isinstance(s, cst.FunctionDef) else []))]
    for scope in scopes:
        opt_models.update(_optimizer_models(ctx, scope))
    ctx.analyses[OPT_MODELS] = opt_models
    if p.aliases:
        ctx.analyses[DROPPED] = {(None, n) for n in p.aliases}
    p.threaded = ctx.analyses[THREADED] = _threaded(module, ctx)
    p.global_trained = ctx.analyses[GLOBAL_TRAINED] = _global_trained(module, ctx)
    ctx.analyses[SCHEDULES] = _schedules(module, ctx, p.threaded, p.global_trained)
    if "param_groups" in text:  # the learning rate set through param_groups → optax.inject_hyperparams
        learning_rate.plan(module, ctx, ctx.analyses[SCHEDULES])
    p.instances = instances
    state.plan(module, ctx, stateful, ctors, p.threaded)
    p.keyed_classes = sorted(n for n, plan in plans.items() if plan.get("key_sites"))
    p.key_required = {n for n, c in instances.items() if plans.get(c, {}).get("key_required")}
    p.whole = ctx.analyses[WHOLE] = {n for n, c in instances.items() if plans.get(c, {}).get("whole")}
    # models whose inputs or outputs hold the batch axis elsewhere than first (PyTorch's sequence layers): their axes
    ctx.analyses[VMAP_AXES] = {n: plans[c]["vmap_axes"] for n, c in instances.items() if plans.get(c, {}).get("vmap_axes")}
    # ... and whose outputs hold it merged into an axis (a view's (L * N, V)): the axes their call merges
    ctx.analyses[MERGED_OUT] = {n: plans[c]["merged_out"] for n, c in instances.items()
                                if plans.get(c, {}).get("merged_out") and plans[c].get("vmap_axes")}
    p.given_models = _given_models(module, models)
    p.given_classes = _given_classes(module, p.given_models, instances)
    for name, info in p.threaded.items():
        classes = {instances.get(c) for c in info["callers"]}
        # a step function of whole-graph models: no jax.vmap (a key, if dropout, is threaded as any: KEYED)
        info["whole"] = bool(info["step"] and classes and all(plans.get(c, {}).get("whole") for c in classes))
    return rewrite(rewrite(module, p), _SelfAssigns())


#: names that hold the object itself or a script's options by convention, never a tensor: their .data is no tensor's
_OPTIONS = frozenset({"self", "cls", "args", "opt", "opts", "cfg", "config", "hparams", "flags"})


def _self_assign(st: cst.BaseStatement) -> bool:
    """``D = D``: what ``D = D.to(device)`` / ``x = x.cuda()`` leaves once the move is removed."""
    if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1 or not isinstance(st.body[0], cst.Assign):
        return False
    a = st.body[0]
    return len(a.targets) == 1 and isinstance(a.value, (cst.Name, cst.Attribute)) \
        and isinstance(a.targets[0].target, (cst.Name, cst.Attribute)) and code(a.targets[0].target) == code(a.value)


def _step_body(body: list, zero: int, start: int, end: int, call: list, between: list[int]) -> list:
    """A loop body with its step (``body[start:end + 1]``, the loss to the update) written as ``call`` (the statements
    computed before it and the train_step call), the statements of ``between`` (those after the loss the update does
    not read) after it, and zero_grad() (``body[zero]``) removed: its comments (``# train with real``) go to the
    statement now in its place."""
    keep = [s for i, s in enumerate(body) if not (start <= i <= end) and i != zero]
    at = len([i for i in range(start) if i != zero])
    out = keep[:at] + call + [body[i] for i in between] + keep[at:]
    comments = [ln for ln in body[zero].leading_lines if ln.comment is not None]
    if comments and out:
        after = body[zero + 1] if zero + 1 < len(body) and not start <= zero + 1 <= end else None
        k = min(next((k for k, s in enumerate(out) if s is after), at), len(out) - 1)
        out[k] = out[k].with_changes(leading_lines=[*comments, *out[k].leading_lines])
    return out


class _SelfAssigns(cst.CSTTransformer):
    """Removes the self-assignments left by removed device moves (an engineer deletes them): their blank lines and
    comments go to the statement that follows, a block left empty gets ``pass``."""

    def leave_IndentedBlock(self, original, updated):
        return self.drop(updated)

    def leave_Module(self, original, updated):
        return self.drop(updated)

    @staticmethod
    def drop(node):
        if not any(_self_assign(s) for s in node.body):
            return node
        out, carried = [], []
        for s in node.body:
            if _self_assign(s):
                carried += list(s.leading_lines)
                continue
            out.append(s.with_changes(leading_lines=[*carried, *s.leading_lines]) if carried else s)
            carried = []
        if not out and isinstance(node, cst.IndentedBlock):
            return node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)])
        return node.with_changes(body=out, footer=[*carried, *node.footer])  # the last one's comments: at the end


#: ctx.analyses: (top-level function or None for the module, name) whose assignments the finishing step removes
#: when nothing reads the name any more (a type alias, a gradient penalty's outputs and grad_outputs)
DROPPED = "torch2jax.dropped"
#: the legacy typed constructors an alias may name (``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``)
LEGACY_TYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "LongTensor": "int64", "IntTensor": "int32"}


def _last_value(body: list, name: str, before) -> cst.BaseExpression | None:
    """The value of the last ``name = ...`` among the top-level statements of ``body`` before ``before``."""
    value = None
    for st in body:
        if st is before:
            return value
        if _assigns(st, name):
            value = st.body[0].value
    return None


def _last_output(body: list, name: str, before) -> tuple[cst.BaseExpression | None, int | None]:
    """``name``'s value as _last_value gives it (index None), or where the last statement binding ``name`` before
    ``before`` unpacks a value into names (``o, _ = D(x)``, a model with several outputs): that value and
    ``name``'s position among them."""
    value, index = None, None
    for st in body:
        if st is before:
            return value, index
        if _assigns(st, name):
            value, index = st.body[0].value, None
        elif _is_assign(st) and len(st.body[0].targets) == 1 and isinstance(st.body[0].targets[0].target, cst.Tuple) \
                and name in target_names(st.body[0].targets[0].target):
            elements = st.body[0].targets[0].target.elements
            named = [isinstance(e.value, cst.Name) and e.value.value == name for e in elements]
            value, index = (st.body[0].value, named.index(True)) if any(named) and all(
                isinstance(e.value, cst.Name) for e in elements) else (None, None)
    return None, None


#: the calls that make a tensor of numpy's array (``torch.FloatTensor(np.ones(shape))``), beside a legacy type alias's
_FROM_NUMPY = frozenset({"torch.tensor", "torch.from_numpy", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor",
                         "torch.DoubleTensor", "torch.cuda.FloatTensor", "torch.cuda.DoubleTensor"})


def _ones(node: cst.BaseExpression, ctx, aliases=()) -> bool:
    """An array of ones: ``X(...).fill_(1.0)``, ``torch.ones(...)`` / ``ones_like``, a tensor of numpy's ones
    (``FloatTensor(np.ones(o.shape))``, ``FloatTensor`` a legacy type alias of ALIASES or torch's), under
    ``Variable(...)``."""
    while isinstance(node, cst.Call) and ctx.imports.resolve(node.func) in ("torch.autograd.Variable",
                                                                            "torch.autograd.variable.Variable"):
        node = node.args[0].value
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "fill_" and len(node.args) == 1:
        v = node.args[0].value
        return isinstance(v, (cst.Integer, cst.Float)) and float(v.value) == 1.0
    if len(node.args) == 1 and node.args[0].keyword is None and isinstance(node.args[0].value, cst.Call) and (
            isinstance(node.func, cst.Name) and node.func.value in aliases or ctx.imports.resolve(node.func) in _FROM_NUMPY):
        return ctx.imports.resolve(node.args[0].value.func) in ("numpy.ones", "numpy.ones_like")
    return ctx.imports.resolve(node.func) in ("torch.ones", "torch.ones_like")


def _input_grads(fn: cst.FunctionDef, ctx, models: set[str], whole: set[str], dropped: set,
                 aliases=()) -> dict[int, str]:
    """The gradient penalty's ``torch.autograd.grad(outputs=o, inputs=x, grad_outputs=ones, ...)[0]`` in a
    top-level function, where ``o = D(x)`` is assigned before it and ``D`` is a model (of the file's calls or a
    parameter every call gives one): → ``jax.vmap(jax.grad(lambda x: jnp.sum(D(x))))(x)``, the gradient of each
    example's output (a translated module takes one example; a whole-graph model without vmap). Torch's sum over
    the batch weighted by ones is that per example gradient when the examples do not mix (no BatchNorm in D).
    ``o, _ = D(x)`` (a model with several outputs): the gradient of that output, ``jnp.sum(D(x)[0])``.
    ``o = D(x)`` and the ones are removed when nothing else reads them (DROPPED)."""
    out: dict[int, str] = {}
    body = list(fn.body.body)
    for st in body:
        for sub in _subscripts(st):
            call = sub.value
            if not (isinstance(call, cst.Call) and ctx.imports.resolve(call.func) == "torch.autograd.grad"
                    and len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index)
                    and isinstance(sub.slice[0].slice.value, cst.Integer) and sub.slice[0].slice.value.value == "0"):
                continue
            named = {}
            for i, a in enumerate(call.args):
                if a.star:
                    break
                named[a.keyword.value if a.keyword else ("outputs", "inputs", "grad_outputs")[min(i, 2)]] = a.value
            else:
                if set(named) - {"outputs", "inputs", "grad_outputs", "create_graph", "retain_graph", "only_inputs"}:
                    continue
                o, x, g = named.get("outputs"), named.get("inputs"), named.get("grad_outputs")
                if isinstance(x, (cst.List, cst.Tuple)) and len(x.elements) == 1:
                    x = x.elements[0].value
                if not (isinstance(o, cst.Name) and isinstance(x, cst.Name) and isinstance(g, cst.Name)):
                    continue
                value, index = _last_output(body, o.value, st)
                if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in models
                        and len(value.args) == 1 and isinstance(value.args[0].value, cst.Name)
                        and value.args[0].value.value == x.value and not value.args[0].keyword):
                    continue
                ones = _last_value(body, g.value, st)
                if ones is None or not _ones(ones, ctx, aliases):
                    continue
                d = value.func.value
                v = "xi" if d == "x" else "x"
                picked = "" if index is None else f"[{index}]"  # the output differentiated, of several
                grad = f"{{grad}}(lambda {v}: {{sum}}({d}({v}){picked}))"
                out[id(sub)] = f"{grad}({x.value})" if d in whole else f"{{vmap}}({grad})({x.value})"
                dropped.update({(fn.name.value, o.value), (fn.name.value, g.value)})
    return out


def _saved_models(module: cst.Module, path: str, models: set[str], ctx) -> set[str]:
    """The models (names) the module saves whole to ``path`` (its text): ``torch.save(model, path)``."""
    return {code(c.args[0].value) for c in _calls(module) if ctx.imports.resolve(c.func) in
            ("torch.save", "torch.serialization.save") and len(c.args) >= 2 and c.args[0].keyword is None
            and c.args[1].keyword is None and isinstance(c.args[0].value, cst.Name)
            and c.args[0].value.value in models and code(c.args[1].value) == path}


def _loaded_models(module: cst.Module, models: set[str], ctx) -> dict[str, str]:
    """``copy = torch.load(path)`` where the module saves one model whole to that path: copy → that model (an
    instance of its class, read back by the training pass's load_model)."""
    out: dict[str, str] = {}
    if "parsed" in ctx.analyses and "load" not in ctx.analyses["parsed"][1]:
        return out  # (torch.load is spelled with its name in the source, by any import of it: no walk for a file without)
    for a in find_all(module, cst.Assign):
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and isinstance(a.value, cst.Call) \
                and ctx.imports.resolve(a.value.func) in ("torch.load", "torch.serialization.load") and a.value.args \
                and a.value.args[0].keyword is None and a.targets[0].target.value not in models:
            saved = _saved_models(module, code(a.value.args[0].value), models, ctx)
            if len(saved) == 1:
                out[a.targets[0].target.value] = next(iter(saved))
    return out


def _builds(module: cst.Module, name: str, ctx) -> bool:
    """Whether ``name`` is assigned somewhere in the module by something other than torch.load (the model the
    code builds: a class of the file, a builder)."""
    return any(any(name in target_names(t.target) for t in a.targets) and not (
        isinstance(a.value, cst.Call) and ctx.imports.resolve(a.value.func) in ("torch.load", "torch.serialization.load"))
        for a in find_all(module, cst.Assign))


def _functions(node) -> list[cst.FunctionDef]:
    return find_all(node, cst.FunctionDef)


def _subscripts(node) -> list[cst.Subscript]:
    return find_all(node, cst.Subscript)


def _type_aliases(module: cst.Module, ctx) -> dict[str, cst.Attribute]:
    """Module-level names bound to one legacy tensor type, on the CPU or CUDA (``Tensor = torch.cuda.FloatTensor
    if cuda else torch.FloatTensor``) → the ``torch.XTensor`` expression of the CPU one (its calls become that
    constructor's; JAX places arrays itself). A CPU branch ``torch.Tensor`` beside ``torch.cuda.FloatTensor`` is
    ``torch.FloatTensor`` (both build and cast to float32) unless the file changes PyTorch's default dtype."""
    out: dict[str, cst.Attribute] = {}
    default_dtype = None  # (whether the file changes the default dtype: a walk of every call, asked only when it counts)
    for small in (x for st in module.body if isinstance(st, cst.SimpleStatementLine) for x in st.body):
        # (each statement of a line: `cuda = False; Tensor = torch.FloatTensor` too)
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            continue
        v = small.value
        branches = [v.body, v.orelse] if isinstance(v, cst.IfExp) else [v]
        kinds = set()
        cpu = None
        for b in branches:
            q = ctx.imports.resolve(b) if isinstance(b, cst.Attribute) else None
            if q == "torch.Tensor" and isinstance(v, cst.IfExp) and default_dtype is None:
                default_dtype = any(ctx.imports.resolve(c.func) in ("torch.set_default_dtype",
                                                                    "torch.set_default_tensor_type")
                                    for c in find_all(module, cst.Call))
            if q == "torch.Tensor" and isinstance(v, cst.IfExp) and not default_dtype:
                # the CPU branch of `torch.cuda.FloatTensor if cuda else torch.Tensor`: torch.Tensor builds and casts
                # to the default dtype, float32 where the file never changes it: torch.FloatTensor's
                b, q = b.with_changes(attr=cst.Name("FloatTensor")), "torch.FloatTensor"
            t = q.rsplit(".", 1)[-1] if q else None
            if q not in (f"torch.{t}", f"torch.cuda.{t}") or t not in LEGACY_TYPES:
                kinds.add(None)
                continue
            kinds.add(t)
            if q == f"torch.{t}":
                cpu = b
        if len(kinds) == 1 and None not in kinds and cpu is not None:
            out[small.targets[0].target.value] = cpu
    return out


def _model_containers(module: cst.Module, plans: dict) -> dict[str, str | None]:
    """Names outside the classes bound once to a list or tuple of the module's instances (``models = [Net(), Net()]``,
    ``[Net() for _ in range(3)]``) → their class (None when they differ)."""
    out: dict[str, str | None] = {}
    seen: dict[str, int] = {}
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef):
            continue
        for a in _walk_assigns(stmt):
            for t in a.targets:
                if isinstance(t.target, cst.Name):
                    seen[t.target.value] = seen.get(t.target.value, 0) + 1
            v = a.value
            calls = [e.value for e in v.elements] if isinstance(v, (cst.List, cst.Tuple)) else \
                [v.elt] if isinstance(v, cst.ListComp) else []
            classes = {c.func.value for c in calls if isinstance(c, cst.Call) and isinstance(c.func, cst.Name)}
            if calls and len(classes) >= 1 and all(isinstance(c, cst.Call) and isinstance(c.func, cst.Name)
                                                   and c.func.value in plans for c in calls):
                for t in a.targets:
                    if isinstance(t.target, cst.Name):
                        out[t.target.value] = next(iter(classes)) if len(classes) == 1 else None
    return {n: c for n, c in out.items() if seen.get(n) == 1}


def _container_loops(module: cst.Module, containers: dict[str, str | None]) -> dict[str, str | None]:
    """The loop and comprehension targets outside the classes that iterate over such a container → its class."""
    out: dict[str, str | None] = {}
    if not containers:
        return out

    class V(cst.CSTVisitor):
        def visit_ClassDef(self, n) -> bool:
            return False

        def _target(self, target, it) -> None:
            if isinstance(it, cst.Name) and it.value in containers and isinstance(target, cst.Name):
                out[target.value] = containers[it.value]

        def visit_For(self, n: cst.For) -> None:
            self._target(n.target, n.iter)

        def visit_CompFor(self, n: cst.CompFor) -> None:
            self._target(n.target, n.iter)

    scan(module, V())
    return out


def _given_classes(module: cst.Module, given: dict[str, set[str]], instances: dict[str, str]) \
        -> dict[str, dict[str, set[str] | None]]:
    """For each parameter of ``given`` (_given_models), the translated classes its callers give it (an instance
    name, or a parameter of the calling function found so), None where one caller's is not known."""
    funcs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value in given}
    sites: dict[str, list[tuple[cst.Call, str | None]]] = {}
    for s in module.body:
        for c in _calls(s):
            if isinstance(c.func, cst.Name) and c.func.value in funcs:
                sites.setdefault(c.func.value, []).append((c, s.name.value if isinstance(s, cst.FunctionDef) else None))
    out: dict[str, dict[str, set[str] | None]] = {}
    for _ in range(2):  # a function called from one found in the first round
        for name, calls in sites.items():
            params = [p.name.value for p in funcs[name].params.params]
            for p in given[name]:
                found: set[str] | None = set()
                for c, caller in calls:
                    b = _bound(c, params, p)
                    k = {instances[b.value]} if isinstance(b, cst.Name) and b.value in instances else \
                        out.get(caller, {}).get(b.value) if isinstance(b, cst.Name) and caller else None
                    found = None if found is None or k is None else found | k
                out.setdefault(name, {})[p] = found
    return out


OPT_MODELS = "torch2jax.optimizer_models"  # ctx.analyses: optimizer name → the model whose parameters it takes
VMAP_AXES = "torch2jax.vmap-axes"  # ctx.analyses: model name → "in_axes=..., out_axes=..." where not all 0
MERGED_OUT = "torch2jax.merged-out"  # ctx.analyses: model name → batch_merged's axes where an output is merged
MODELS = "torch2jax.models"  # ctx.analyses: the names that hold a model (.parameters() read, or a module's instance)
WHOLE = "torch2jax.whole"  # ctx.analyses: model names whose class takes a whole graph (no jax.vmap)


def _given_models(module: cst.Module, models: set[str]) -> dict[str, set[str]]:
    """Top-level functions → their parameters that every call of the function gives a model: a name of
    ``models``, or a parameter of the calling function found so (``def test(model, ...)`` called as
    ``test(gcn, ...)`` and from ``train_iter(model, ...)``). Their ``model.eval()`` is an ``inference_mode``
    too."""
    funcs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    calls: dict[str, list[tuple[cst.Call, str | None]]] = {}  # function → (its call, the calling top-level function)
    for s in module.body:
        for c in _calls(s):
            if isinstance(c.func, cst.Name) and c.func.value in funcs:
                calls.setdefault(c.func.value, []).append((c, s.name.value if isinstance(s, cst.FunctionDef) else None))
    out: dict[str, set[str]] = {}
    for _ in range(2):  # a function called from one found in the first round
        for name, sites in calls.items():
            params = [p.name.value for p in funcs[name].params.params]
            if any(a.star for c, _ in sites for a in c.args):
                continue
            found = {p for p in params if all(
                isinstance(b, cst.Name) and (b.value in models or b.value in out.get(caller, ()))
                for b, caller in ((_bound(c, params, p), caller) for c, caller in sites))}
            if found:
                out[name] = found
    return out


THREADED = "torch2jax.threaded"  # ctx.analyses: function → how its optimizer parameter's state is threaded
GLOBAL_TRAINED = "torch2jax.global-trained"  # ctx.analyses: function → the module-level optimizer and model it steps
KEYED = "torch2jax.keyed-steps"  # ctx.analyses: (function or "", optimizer) of the loops whose train_step takes a key
HOST_RANDOM = "torch2jax.host-random-steps"  # ctx.analyses: (function or "", optimizer or model) of the steps whose
# loss draws numpy's random numbers: written without @eqx.filter_jit (check_host_random)
GLOBALS = "torch2jax.globals"  # ctx.analyses: top-level function → the module-level names it rebinds (`global`)


def _jit_lines(ctx, fn, opt: str, spell) -> tuple[str, str]:
    """The decorator line of a written step, and the comment line its body starts with: ``@eqx.filter_jit``, or none
    and a comment saying why where its loss draws numpy's random numbers (HOST_RANDOM, check_host_random)."""
    if (fn.name.value if fn is not None else "", opt) not in ctx.analyses.get(HOST_RANDOM, ()):
        return f"@{spell('equinox.filter_jit')}\n", ""
    return "", ("    # not jitted: the loss draws numpy random numbers, which eqx.filter_jit would draw once, when it\n"
                "    # traces this function, and reuse at every step\n")


class _LocalNames(cst.CSTVisitor):
    """The names _local_names collects (a class of the module: creating a class per call costs several times its walk)."""

    def __init__(self, scope, names: set[str]) -> None:
        self.scope, self.names = scope, names

    def visit_FunctionDef(self, n) -> bool:
        if n is self.scope:
            return True
        self.names.add(n.name.value)
        return False

    def visit_ClassDef(self, n) -> bool:
        self.names.add(n.name.value)
        return False

    def visit_Lambda(self, n) -> bool:
        return False

    def visit_AssignTarget(self, n) -> None:
        self.names.update(target_names(n.target))

    def visit_AugAssign(self, n) -> None:
        self.names.update(target_names(n.target))

    def visit_AnnAssign(self, n) -> None:
        self.names.update(target_names(n.target))

    def visit_For(self, n) -> None:
        self.names.update(target_names(n.target))

    def visit_AsName(self, n) -> None:
        self.names.update(target_names(n.name))

    def visit_Global(self, n) -> None:
        self.names.difference_update(x.name.value for x in n.names)


def _local_names(scope) -> set[str]:
    """The names a function binds (its parameters, assignment and loop targets, with / import names), or
    those a module binds at its own level (functions and classes included)."""
    names: set[str] = set()
    if isinstance(scope, cst.FunctionDef):
        p = scope.params
        names.update(x.name.value for x in [*p.params, *p.kwonly_params, *p.posonly_params])
        for star in (p.star_arg, p.star_kwarg):
            if isinstance(star, cst.Param):
                names.add(star.name.value)

    scan(scope, _LocalNames(scope, names))
    if isinstance(scope, cst.Module):
        for s in scope.body:
            if isinstance(s, cst.SimpleStatementLine):
                for small in s.body:
                    if isinstance(small, cst.Import):
                        names.update((dotted_text(a.asname.name) if a.asname else dotted_text(a.name)).split(".")[0]
                                     for a in small.names)
    return names


SCHEDULES = "torch2jax.schedules"  # ctx.analyses: (function or "", optimizer) → its schedule (_schedules)

# the schedulers an epoch loop's scheduler.step() can become: the optax schedule over the update count,
# ({lr}, {steps}: the optimizer's learning rate, the updates between two scheduler.step() calls)
EPOCH_SCHEDULES = {
    "torch.optim.lr_scheduler.StepLR": ("optimizer, step_size, gamma=0.1, last_epoch=-1",
                                        "{decay}({lr}, transition_steps={step_size}{steps}, decay_rate={gamma}, "
                                        "staircase=True)"),
    "torch.optim.lr_scheduler.ExponentialLR": ("optimizer, gamma, last_epoch=-1",
                                               "{decay}({lr}, transition_steps={steps}, decay_rate={gamma}, "
                                               "staircase=True)"),
    # (the next three: their text is built by _epoch_schedule, from the arguments' values)
    "torch.optim.lr_scheduler.MultiStepLR": ("optimizer, milestones, gamma=0.1, last_epoch=-1", None),
    "torch.optim.lr_scheduler.CosineAnnealingLR": ("optimizer, T_max, eta_min=0.0, last_epoch=-1", None),
    "torch.optim.lr_scheduler.LambdaLR": ("optimizer, lr_lambda, last_epoch=-1", None),
}


def _epoch_schedule(q: str, call: cst.Call, args: dict, steps: str, loop: cst.For, ctx) -> tuple[str, str] | None:
    """The optax schedule (text over ``{lr}``) of a scheduler stepped once per epoch of ``steps`` updates, and a
    caveat for a warning ("" for none); None where it is not exact:

    - MultiStepLR(milestones=[m1, m2], gamma) → ``optax.piecewise_constant_schedule(lr, {m1 * steps: gamma, ...})``:
      PyTorch multiplies by gamma at each milestone epoch (distinct literal milestones: one listed twice multiplies
      twice in PyTorch, once in a dict);
    - CosineAnnealingLR(T_max) with eta_min 0 → ``lambda count: optax.cosine_decay_schedule(lr,
      decay_steps=T_max)(count // steps)``: PyTorch's rate is constant over an epoch; the same for the first T_max
      epochs (PyTorch then rises again, optax stays at 0: a warning unless the epoch loop is range(n), n <= T_max + 1);
    - LambdaLR(lambda e: <arithmetic of e>) → ``lambda count: lr * <that arithmetic of (count // steps)>``: traced
      inside the jitted step, which arithmetic allows (a Python if / max on the count would not)."""
    from fwport.core.engine import literal_value
    if q.endswith(".MultiStepLR"):
        ms = literal_value(expr(args["milestones"]), None)
        if not isinstance(ms, (list, tuple)) or not ms or not all(isinstance(m, int) and m > 0 for m in ms) \
                or len(set(ms)) != len(ms):
            return None
        gamma = args["gamma"]
        table = ", ".join(f"{m} * {steps}: {gamma}" for m in sorted(ms))
        return f"{ctx.spell_text('optax.piecewise_constant_schedule')}({{lr}}, {{{{{table}}}}})", ""
    if q.endswith(".CosineAnnealingLR"):
        if literal_value(expr(args["eta_min"]), None) not in (0, 0.0):
            return None
        t_max = args["T_max"]
        text = f"lambda count: {ctx.spell_text('optax.cosine_decay_schedule')}({{lr}}, decay_steps={t_max})(count // {steps})"
        it = loop.iter
        n = literal_value(it.args[0].value, None) if isinstance(it, cst.Call) and dotted_text(it.func) == "range" \
            and len(it.args) == 1 else None
        tm = literal_value(expr(t_max), None)
        caveat = "" if isinstance(n, int) and isinstance(tm, int) and n <= tm + 1 else (
            f"the same rates for the first {t_max} epochs; after them PyTorch's cosine rises again and optax's "
            "schedule stays at 0: keep the epochs within T_max + 1")
        return text, caveat
    if q.endswith(".LambdaLR"):
        lam = call.args[1].value if len(call.args) > 1 and call.args[1].keyword is None else next(
            (a.value for a in call.args if a.keyword is not None and a.keyword.value == "lr_lambda"), None)
        if not isinstance(lam, cst.Lambda) or len(lam.params.params) != 1 or lam.params.star_arg not in (
                None, cst.MaybeSentinel.DEFAULT) or lam.params.kwonly_params or lam.params.star_kwarg:
            return _epoch_table(lam, steps, loop, ctx)
        param = lam.params.params[0].name.value

        def arithmetic(n) -> bool:
            if isinstance(n, (cst.Integer, cst.Float)) or isinstance(n, cst.Name) and n.value == param:
                return True
            if isinstance(n, cst.BinaryOperation):
                return arithmetic(n.left) and arithmetic(n.right)
            if isinstance(n, cst.UnaryOperation):
                return arithmetic(n.expression)
            return False
        if not arithmetic(lam.body):
            return _epoch_table(lam, steps, loop, ctx)

        class Sub(cst.CSTTransformer):
            def leave_Name(self, o, u):
                return expr(f"(count // {steps})") if u.value == param else u
        body = code(lam.body.visit(Sub()))
        body = body if isinstance(lam.body, (cst.Name, cst.Integer, cst.Float)) else f"({body})"
        return f"lambda count: {{lr}} * {body.replace('{', '{{').replace('}', '}}')}", ""
    return None


def _epoch_table(lam, steps: str, loop: cst.For, ctx) -> tuple[str, str] | None:
    """LambdaLR whose ``lr_lambda`` is any other function of the epoch (a Python ``max`` or ``if``, a method of an
    object: PyTorch-GAN's ``LambdaLR(n_epochs, offset, decay_start).step``), stepped once per epoch of a loop over
    ``range(...)`` → ``lambda count: lr * jnp.asarray([lr_lambda(e) for e in range(<the epochs>)])[count // steps]``:
    the factors of every epoch, computed by Python when the schedule is traced (the function never sees a traced
    value), picked by the epoch of the update count. PyTorch's rate after k scheduler.step() calls is lr *
    lr_lambda(k); the loop runs len(range(...)) epochs, each ``steps`` updates. None where the loop is not over a
    range (the number of epochs is unknown: the rule's error stays)."""
    it = loop.iter
    if lam is None or not (isinstance(it, cst.Call) and dotted_text(it.func) == "range" and 1 <= len(it.args) <= 3
                           and all(a.keyword is None and not a.star for a in it.args)):
        return None
    names = {n.value for n in _names_in(lam)} | {n.value for n in _names_in(it)}
    if names & {"count", "_epoch"}:
        return None  # (they would be shadowed by the schedule's own names)
    epochs = f"len(range({', '.join(code(a.value) for a in it.args)}))"
    text = (f"lambda count: {{lr}} * {ctx.spell_text('jax.numpy.asarray')}([({code(lam)})(_epoch) for _epoch in "
            f"range({epochs})])[count // {steps}]")
    return text.replace("{", "{{").replace("}", "}}").replace("{{lr}}", "{lr}"), ""


def _names_in(node) -> list:
    out: list = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n) -> None:
            out.append(n)
    node.visit(V())
    return out


def _schedules(module: cst.Module, ctx, threaded: dict, global_trained: dict) -> dict:
    """``scheduler = StepLR(optimizer, step_size, gamma)`` stepped once per epoch (``scheduler.step()`` in the
    body of an epoch loop, after the epoch's training: a loop over ``train_loader`` stepping that optimizer,
    or a call of a function that runs one: _threaded / _global_trained) → the optimizer created with
    ``learning_rate=optax.exponential_decay(lr, transition_steps=step_size * len(train_loader),
    decay_rate=gamma, staircase=True)``: optax evaluates it at the update count, which gives each batch
    PyTorch's rate of its epoch (tests/test_torch2jax_training.py checks the rates against torch). The
    scheduler call is settled here (no rule refuses it) and the finishing step rewrites the optimizer and
    removes the scheduler's statements. Anything else (the loader created after the optimizer, a
    scheduler used otherwise, stepped per batch) is left to the rule, whose error gives the schedule."""
    funcs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    found: dict = {}
    for scope in [module, *funcs.values()]:
        body = scope.body if isinstance(scope, cst.Module) else scope.body.body
        optimizers = _optimizer_models(ctx, scope)
        for a in _scope_assigns(scope):
            q = ctx.imports.resolve(a.value.func) if isinstance(a.value, cst.Call) else None
            if q not in EPOCH_SCHEDULES or len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
                continue
            sched = a.targets[0].target.value
            args = _bind_text(a.value, EPOCH_SCHEDULES[q][0])
            if args is None or args.get("last_epoch", "-1") != "-1" or args.get("optimizer") not in optimizers \
                    or not optimizers[args["optimizer"]]:
                continue
            opt = args["optimizer"]
            epoch = _epoch_loop(module, scope, sched)
            if epoch is None:
                continue
            loop, at = epoch
            epoch = _epoch_loader(loop.body.body[:at], opt, scope, funcs, threaded, global_trained)
            # (LambdaLR's schedule is a `lambda count:` that reads len(loader) when the step is traced, in the loop:
            # the loader may be created after the optimizer, before the loop, as in PyTorch-GAN's scripts)
            if epoch is None or not _bound_before(body, epoch[0], opt) and not (
                    q.endswith(".LambdaLR") and _bound_before_loop(body, epoch[0], loop)):
                continue
            loader, batch_loop = epoch
            steps = f"len({loader})"
            size = args.get("step_size")
            caveat = ""
            if EPOCH_SCHEDULES[q][1] is None:
                built = _epoch_schedule(q, a.value, args, steps, loop, ctx)
                if built is None:
                    continue
                text, caveat = built
            else:
                text = EPOCH_SCHEDULES[q][1].format(
                    decay=ctx.spell_text("optax.exponential_decay"), lr="{lr}", gamma=args.get("gamma", "0.1"),
                    step_size="" if size in (None, "1") else f"{size} * ", steps=steps)
            name = q.rsplit(".", 1)[-1]
            found[(scope.name.value if isinstance(scope, cst.FunctionDef) else "", opt)] = {
                "sched": sched, "schedule": text}
            ctx.settle(a.value)
            ctx.report(Severity.INFO, "idiom-replaced", f"{name} stepped once per epoch → {opt}'s learning rate is "
                       f"the optax schedule {text.format(lr='lr')} of its update count ({steps} updates per epoch): "
                       "each batch gets PyTorch's rate of its epoch; scheduler.step() removed", a.value)
            if caveat:
                ctx.report(Severity.WARNING, "approximate", f"{name}: {caveat}", a.value)
            if _breaks(batch_loop):
                ctx.report(Severity.WARNING, "approximate", f"the training loop over {loader} can stop early (break): "
                           f"the schedule counts {steps} updates per epoch, PyTorch's scheduler one epoch per "
                           "scheduler.step(), so an epoch cut short shifts the rates after it", a.value)
    return found


def _bind_text(call: cst.Call, signature: str) -> dict[str, str] | None:
    """The arguments of ``call`` by parameter name (their source text), bound to a ``signature`` of plain
    parameters; None when it does not bind (a star argument, an unknown keyword, a missing one)."""
    params = [(p.split("=")[0].strip(), p.split("=")[1].strip() if "=" in p else None) for p in signature.split(",")]
    out: dict[str, str] = {}
    for i, a in enumerate(call.args):
        if a.star:
            return None
        if a.keyword is None:
            if i >= len(params):
                return None
            out[params[i][0]] = code(a.value)
        elif a.keyword.value in dict(params) and a.keyword.value not in out:
            out[a.keyword.value] = code(a.value)
        else:
            return None
    for name, default in params:
        if name not in out:
            if default is None:
                return None
            out[name] = default
    return out


def _epoch_loop(module, scope, sched: str) -> tuple[cst.For, int] | None:
    """The loop whose body holds the only ``sched.step()`` at its own level, when every other use of
    ``sched`` in the module is its assignment; with that statement's index."""
    found = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, n) -> bool:
            return n is scope

        def visit_For(self, n: cst.For) -> None:
            for i, st in enumerate(n.body.body):
                if _method_stmt(st, "step") == sched and not st.body[0].value.args:
                    found.append((n, i))

    class Count(cst.CSTVisitor):
        def __init__(self):
            self.names = 0

        def visit_Name(self, n) -> None:
            if n.value == sched:
                self.names += 1

    v = Count()
    scan(scope, V())
    scan(module, v)
    # the uses: the assignment's target and the step's receiver
    return found[0] if len(found) == 1 and v.names == 2 else None


def _loop_over(loop) -> str | None:
    """``for ... in X`` / ``for ... in enumerate(X)`` (X a name) → X."""
    it = loop.iter
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" and it.args \
            and it.args[0].keyword is None and all(a.keyword is not None for a in it.args[1:]):
        it = it.args[0].value
    return it.value if isinstance(it, cst.Name) else None


def _epoch_loader(stmts: list, opt: str, scope, funcs: dict, threaded: dict, global_trained: dict):
    """(the loader one epoch goes through, the training loop over it) when the statements before the
    scheduler's step run exactly one epoch of ``opt``'s training: a loop over a loader stepping ``opt`` at
    its own level, or a call of a function whose loop does (threaded: the loader is the argument given
    for the parameter it loops over; global-trained: the module's loader); else None."""
    epochs = []
    for st in stmts:
        if isinstance(st, cst.For):
            # (a GAN's loop steps each of its optimizers once per batch, one after another: _sequential_plans)
            plans = {p[1][0] for p in _sequential_plans(list(st.body.body))}
            if opt in plans and _loop_over(st):
                epochs.append((_loop_over(st), st))
            elif plans:
                return None
        elif isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr) \
                and isinstance(st.body[0].value, cst.Call) and isinstance(st.body[0].value.func, cst.Name) \
                and st.body[0].value.func.value in funcs:
            call = st.body[0].value
            name = call.func.value
            inner = [lp for lp in funcs[name].body.body if isinstance(lp, (cst.For, cst.While))
                     and _loop_plan(list(lp.body.body)) is not None]
            if len(inner) != 1 or not isinstance(inner[0], cst.For) or _loop_over(inner[0]) is None:
                continue
            over = _loop_over(inner[0])
            info = threaded.get(name)
            if info is not None:
                bound = _bound(call, info["params"], info["opt"])
                if isinstance(bound, cst.Name) and bound.value == opt and over in info["params"]:
                    arg = _bound(call, info["params"], over)
                    if isinstance(arg, cst.Name):
                        epochs.append((arg.value, inner[0]))
                        continue
                return None
            glob = global_trained.get(name)
            if glob is not None and glob["opt"] == opt and isinstance(scope, cst.Module) \
                    and over not in _local_names(funcs[name]):
                epochs.append((over, inner[0]))
    return epochs[0] if len(epochs) == 1 else None


def _bound_before(body: list, loader: str, opt: str) -> bool:
    """Whether ``loader`` is assigned at the scope's own level before the statement creating ``opt``."""
    first_loader = next((i for i, st in enumerate(body) if _assigns(st, loader)), None)
    first_opt = next((i for i, st in enumerate(body) if _assigns(st, opt)), None)
    return first_loader is not None and first_opt is not None and first_loader < first_opt


def _bound_before_loop(body: list, loader: str, loop: cst.For) -> bool:
    """Whether ``loader`` is assigned at the scope's own level before the statement holding ``loop``."""
    def holds(st) -> bool:
        hit = []

        class V(cst.CSTVisitor):
            def on_visit(self, n) -> bool:
                if n is loop:
                    hit.append(n)
                return not hit
        st.visit(V())
        return bool(hit)
    at = next((i for i, st in enumerate(body) if holds(st)), None)
    first_loader = next((i for i, st in enumerate(body) if _assigns(st, loader)), None)
    return at is not None and first_loader is not None and first_loader < at


def _breaks(loop) -> bool:
    hit = []

    class V(cst.CSTVisitor):
        def visit_Break(self, n) -> None:
            hit.append(n)

        def visit_For(self, n) -> bool:
            return n is loop

        def visit_While(self, n) -> bool:
            return False

        def visit_FunctionDef(self, n) -> bool:
            return False

    scan(loop, V())
    return bool(hit)


def _unkeyable(body: list, plan, model: str | None, whole: bool = False) -> str | None:
    """Why the loop's train_step cannot hand the model its key per example, or None: the model is called
    once in the loss, its first argument a name (the batch whose size the keys take; a whole-graph model,
    called without jax.vmap, takes the step's key as it is)."""
    if model is None:
        return "the trained model is not known"
    block, _ = _split_block(body, plan, model)
    calls = [c for st in block for c in _calls(st) if isinstance(c.func, cst.Name) and c.func.value == model]
    if len(calls) != 1:
        return f"{model} is called {len(calls)} times in the loss (one key each is not written)"
    if whole:
        return None
    if not calls[0].args or calls[0].args[0].keyword is not None or calls[0].args[0].star \
            or not isinstance(calls[0].args[0].value, cst.Name):
        return f"{model}'s first argument is not a name (the batch whose size gives the number of keys)"
    return None


class _Bindings(cst.CSTVisitor):
    """Every place a scope binds ``name`` at its own level (not in a nested function, class or lambda): the
    assigned value where an assignment binds it, ``range(...)`` for a loop over a range, else None (a parameter,
    a loop over anything else, ``with ... as``, a walrus, an import: a value of unknown kind)."""

    def __init__(self, scope, name: str) -> None:
        self.scope, self.name, self.values = scope, name, []

    def visit_FunctionDef(self, n) -> bool:
        if n is self.scope:
            p = n.params
            if any(x.name.value == self.name for x in [*p.params, *p.kwonly_params, *p.posonly_params]) or any(
                    isinstance(s, cst.Param) and s.name.value == self.name for s in (p.star_arg, p.star_kwarg)):
                self.values.append(None)
            return True
        if n.name.value == self.name:
            self.values.append(None)
        return False

    def visit_ClassDef(self, n) -> bool:
        if n.name.value == self.name:
            self.values.append(None)
        return False

    def visit_Lambda(self, n) -> bool:
        return False

    def _bound(self, target, value) -> None:
        if self.name in target_names(target):
            self.values.append(value if isinstance(target, cst.Name) else None)

    def visit_Assign(self, n) -> None:
        for t in n.targets:
            self._bound(t.target, n.value)

    def visit_AugAssign(self, n) -> None:
        self._bound(n.target, n.value)

    def visit_AnnAssign(self, n) -> None:
        self._bound(n.target, n.value)

    def visit_For(self, n) -> None:
        ranged = isinstance(n.iter, cst.Call) and isinstance(n.iter.func, cst.Name) and n.iter.func.value == "range"
        self._bound(n.target, n.iter if ranged else None)

    def visit_NamedExpr(self, n) -> None:
        self._bound(n.target, None)

    def visit_AsName(self, n) -> None:  # with ... as, except ... as, import ... as
        self._bound(n.name, None)

    def visit_CompFor(self, n) -> None:
        self._bound(n.target, None)

    def visit_ImportAlias(self, n) -> None:
        if n.asname is None and (dotted_text(n.name) or "").split(".")[0] == self.name:
            self.values.append(None)


#: calls whose result is a Python number whatever they are given
_NUMBER_CALLS = frozenset({"int", "float", "len", "round", "bool", "str", "range"})


def static_value(node: cst.BaseExpression, scopes: list) -> bool:
    """Whether an argument is a Python value that holds no batch (``future=1000``, ``mode="greedy"``, a name
    every binding of which in its scope is such a value, ``len(...)``, arithmetic of them, an attribute of
    argparse's namespace): called through jax.vmap it is given to every example as it is, never mapped.
    ``scopes``: the enclosing functions, innermost last, then the module first (where a name is looked up)."""
    seen: set[str] = set()

    def static(n, depth: int = 0) -> bool:
        if depth > 20:
            return False
        if literal_value(n) is not NOT_LITERAL:
            return True
        if isinstance(n, cst.UnaryOperation):
            return static(n.expression, depth + 1)
        if isinstance(n, cst.BinaryOperation):
            return not isinstance(n.operator, cst.MatrixMultiply) and static(n.left, depth + 1) \
                and static(n.right, depth + 1)
        if isinstance(n, cst.Call):
            f = dotted_text(n.func) or ""
            return f in _NUMBER_CALLS or f.startswith("math.")
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name):  # opt.steps, opt = parser.parse_args()
            values = bound_values(n.value.value)
            return bool(values) and all(isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute)
                                        and v.func.attr.value in ("parse_args", "parse_known_args") for v in values)
        if isinstance(n, cst.Name):
            if n.value in seen:
                return True  # (a rebinding from itself: future += 1)
            seen.add(n.value)
            values = bound_values(n.value)
            return bool(values) and all(v is not None and static(v, depth + 1) for v in values)
        return False

    def bound_values(name: str) -> list:
        for scope in [*scopes[1:][::-1], scopes[0]]:  # the innermost scope binding it
            v = _Bindings(scope, name)
            scan(scope, v)
            if v.values:
                return v.values
        return []

    return static(node)


def _binds_key(scope, ctx) -> bool:
    """Whether a scope (function or module) has a root key of its own: ``torch.manual_seed(...)`` (which
    becomes ``key = jax.random.key(...)``) or ``key`` bound, at its level or in its blocks (``if __name__ ==
    "__main__":``), not in a nested function or class."""
    if "key" in _local_names(scope):
        return True
    seeded = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, n) -> bool:
            return n is scope

        def visit_ClassDef(self, n) -> bool:
            return False

        def visit_Expr(self, n) -> None:
            if isinstance(n.value, cst.Call) and ctx.imports.resolve(n.value.func) == "torch.manual_seed":
                seeded.append(n)

    scan(scope, V())
    return bool(seeded)


def _global_trained(module: cst.Module, ctx) -> dict[str, dict]:
    """Top-level functions whose one training loop steps an optimizer the module creates over a model the
    module creates, neither bound in the function (``def train(epoch)`` of PyTorch's VAE example): the
    module keeps the optax state next to the optimizer (``opt_state = optimizer.init(...)``) and such a
    function declares ``global model, opt_state`` and rebinds both, as PyTorch's step changed the
    module's model and optimizer in place. Chosen over returning them: the function keeps its signature
    and its callers stay as written (docs/usage.md)."""
    optimizers = {o: m for o, m in _optimizer_models(ctx, module).items() if m and isinstance(parsed_expression(m), cst.Name)}
    if not optimizers:
        return {}
    found: dict[str, dict] = {}
    for f in module.body:
        if not isinstance(f, cst.FunctionDef) or f.asynchronous:
            continue
        local = _local_names(f)
        plans = [_loop_plan(list(s.body.body)) for s in f.body.body if isinstance(s, (cst.For, cst.While))]
        plans = [pl for pl in plans if pl is not None and pl[0] in optimizers]
        own = _loop_plan(list(f.body.body))  # the function itself is one step (`def train_one_batch(x, y)`)
        step = not plans and own is not None and own[0] in optimizers
        if step:
            plans = [own]
        if len(plans) != 1:
            continue
        opt = plans[0][0]
        model = optimizers[opt]
        if opt in local or model in local or "opt_state" in local:
            continue
        found[f.name.value] = {"opt": opt, "model": model, "step": step}
    return found


#: ctx.analyses: the names of the module classes' methods that return a torch.optim optimizer they create (nanoGPT's
#: ``configure_optimizers``): ``optimizer = model.configure_optimizers(...)`` is an optimizer over model's parameters
OPT_METHODS = "torch2jax.optimizer-methods"


def _optimizer_methods(module: cst.Module, ctx) -> set[str]:
    """The methods of the module's classes that return an optimizer they create (OPT_METHODS): ``return
    torch.optim.X(...)``, or ``return name`` of a name the method binds once, to such a call."""
    found = set()
    for cls in module.body:
        if not isinstance(cls, cst.ClassDef) or not isinstance(cls.body, cst.IndentedBlock):
            continue
        for f in cls.body.body:
            if not isinstance(f, cst.FunctionDef):
                continue
            made = {}
            for a in _scope_assigns(f):
                if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
                    made.setdefault(a.targets[0].target.value, []).append(a.value)
            returns = [r.value for r in find_all(f, cst.Return) if r.value is not None]
            if len(returns) != 1:
                continue
            value = returns[0]
            if isinstance(value, cst.Name) and len(made.get(value.value, [])) == 1:
                value = made[value.value][0]
            q = ctx.imports.resolve(value.func) if isinstance(value, cst.Call) else None
            if q and q.startswith("torch.optim.") and not q.startswith("torch.optim.lr_scheduler"):
                found.add(f.name.value)
    return found


def _method_optimizer(ctx, value) -> str | None:
    """``model.configure_optimizers(...)``, a method of OPT_METHODS called on a name → that name (the model)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Name) \
            and value.func.attr.value in ctx.analyses.get(OPT_METHODS, ()):
        return value.func.value.value
    return None


def _optimizer_models(ctx, scope) -> dict[str, str | None]:
    """The names a torch.optim optimizer is assigned to in one scope → the model whose parameters it
    takes (None when not ``model.parameters()``); a model's method creating one (_method_optimizer) → that model."""
    names = {}
    for a in _scope_assigns(scope):
        model = _method_optimizer(ctx, a.value)
        if model is not None:
            names.update((n, model) for t in a.targets for n in target_names(t.target))
            continue
        q = ctx.imports.resolve(a.value.func) if isinstance(a.value, cst.Call) else None
        if q and q.startswith("torch.optim.") and not q.startswith("torch.optim.lr_scheduler"):
            first = a.value.args[0].value if a.value.args else None
            model = code(first.func.value) if isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute) \
                and first.func.attr.value == "parameters" else None
            group = chained_models(first, ctx.imports.resolve) if model is None and first is not None else None
            if group is not None:  # itertools.chain(a.parameters(), b.parameters()): the tuple (a, b)
                model = f"({', '.join(group)})"
            names.update((n, model) for t in a.targets for n in target_names(t.target))
    return names


def _threaded(module: cst.Module, ctx) -> dict[str, dict]:
    """Top-level functions that train a model they receive with an optimizer they receive
    (``def train(args, model, device, loader, optimizer, epoch)``, PyTorch's examples): optax keeps the
    optimizer's state outside, so such a function gets an ``opt_state`` parameter after the optimizer's
    and returns ``model, opt_state``, and each call, a statement of its own in a scope that creates
    the optimizer over that model, becomes ``model, opt_state = train(..., optimizer, opt_state, ...)``.
    Only where every use of the function is such a call and it returns nothing."""
    funcs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    found: dict[str, dict] = {}
    for name, f in funcs.items():
        params = [p.name.value for p in f.params.params]
        if f.params.star_arg not in (cst.MaybeSentinel.DEFAULT, None) or f.params.kwonly_params or f.asynchronous:
            continue
        loops = [s for s in f.body.body if isinstance(s, (cst.For, cst.While))]
        plans = [(lp, _loop_plan(list(lp.body.body))) for lp in loops]
        plans = [(lp, pl) for lp, pl in plans if pl is not None and pl[0] in params]
        own = _loop_plan(list(f.body.body))  # the function itself is one step (called once per epoch)
        if not plans and own is not None and own[0] in params:
            plans = [(f, own)]
        if len(plans) != 1 or plans[0][1][0] in _optimizer_models(ctx, f):
            continue
        loop, plan = plans[0]
        body = list(loop.body.body)
        last = max(i for i in range(plan[2], plan[3]) if _assigns_loss(body[i], plan[1]))
        called = set()
        for st in body[plan[2]:last + 1]:
            for c in _calls(st):
                if isinstance(c.func, cst.Name) and c.func.value in params:
                    called.add(c.func.value)
        if not called or _returns_or_yields(f):
            continue
        for model in sorted(called):  # the one every caller trains with the optimizer (not a loss given as a parameter)
            info = {"opt": plan[0], "model": model, "params": params, "calls": [], "step": loop is f}
            if _uses_ok(module, name, info, ctx):
                found[name] = info
                break
    return found


def _calls(node) -> list[cst.Call]:
    return find_all(node, cst.Call)


def _returns_or_yields(f: cst.FunctionDef) -> bool:
    hit = []

    class V(cst.CSTVisitor):
        def visit_Return(self, n) -> None:
            hit.append(n)

        def visit_Yield(self, n) -> None:
            hit.append(n)

        def visit_FunctionDef(self, n) -> bool:
            return n is f

        def visit_Lambda(self, n) -> bool:
            return False

    scan(f, V())
    return bool(hit)


def _bound(call: cst.Call, params: list[str], name: str) -> cst.BaseExpression | None:
    for i, a in enumerate(call.args):
        if a.star:
            return None
        if a.keyword is None and i < len(params) and params[i] == name or a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def _uses_ok(module: cst.Module, name: str, info: dict, ctx) -> bool:
    """Every use of function ``name``: a call, a statement of its own, binding the optimizer and the
    model to names that its scope creates (the optimizer over that model's parameters)."""
    uses: list[tuple] = []

    class V(cst.CSTVisitor):
        def __init__(self):
            self.scopes = [module]

        def visit_FunctionDef(self, n) -> bool:
            self.scopes.append(n)
            # a function binding the name itself (`def __init__(self, root, train)`) reads its own, not this function
            return n.name.value == name or name not in _local_names(n)

        def leave_FunctionDef(self, n) -> None:
            self.scopes.pop()

        def visit_SimpleStatementLine(self, n) -> None:
            if len(n.body) == 1 and isinstance(n.body[0], cst.Expr) and isinstance(n.body[0].value, cst.Call) \
                    and isinstance(n.body[0].value.func, cst.Name) and n.body[0].value.func.value == name:
                uses.append((n.body[0].value, self.scopes[-1]))

        def visit_Name(self, n) -> None:
            if n.value == name:
                uses.append((n, None))

        def visit_Attribute(self, n) -> bool:
            scan(n.value, self)  # not the attribute's name (model.train())
            return False

        def visit_Arg(self, n) -> bool:
            scan(n.value, self)  # not the keyword
            return False

    scan(module, V())
    calls = [(c, sc) for c, sc in uses if isinstance(c, cst.Call)]
    names = [n for n, sc in uses if isinstance(n, cst.Name)]
    # each call's func Name is also counted once; the def's own name is a Name too
    if not calls or len(names) != len(calls) + 1:
        return False
    for c, scope in calls:
        opt, model = _bound(c, info["params"], info["opt"]), _bound(c, info["params"], info["model"])
        if not isinstance(opt, cst.Name) or not isinstance(model, cst.Name):
            return False
        if _optimizer_models(ctx, scope).get(opt.value) != model.value:
            return False
    info["callers"] = sorted({_bound(c, info["params"], info["model"]).value for c, _ in calls})
    info["caller_scopes"] = [sc for _, sc in calls]
    info["call_nodes"] = [c for c, _ in calls]
    return True


def _size_call(original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
    """``x.size()`` → ``x.shape``; ``x.size(i)`` (an int literal) → ``x.shape[i]`` (outside modules: a JAX
    array's ``size`` is its element count, not a method)."""
    receiver = updated.func.value
    if not original.args:
        return cst.Attribute(receiver, cst.Name("shape"))
    if len(original.args) == 1 and original.args[0].keyword in (None,) and isinstance(
            original.args[0].value, (cst.Integer, cst.UnaryOperation)):
        index = updated.args[0].value
        return cst.Subscript(cst.Attribute(receiver, cst.Name("shape")), [cst.SubscriptElement(cst.Index(index))])
    return None


def _backward(stmt) -> str | None:
    return _method_stmt(stmt, "backward")


def _backward_with_args(stmt) -> bool:
    """Whether a statement is ``X.backward(...)``, with or without arguments (``retain_graph=True``)."""
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) \
        and isinstance(stmt.body[0].value, cst.Call) and isinstance(stmt.body[0].value.func, cst.Attribute) \
        and stmt.body[0].value.func.attr.value == "backward"


def _loop_plan(body: list) -> tuple[str, str, int, int, int, list[int]] | None:
    """(optimizer, loss, first loss statement, backward, step, the statements between the loss's
    assignment and the step) of a loop body of the supported shape: optimizer.zero_grad() before
    loss.backward(), the loss computed by assignments just before (zero_grad may sit among them),
    optimizer.step() after."""
    back = next((i for i, s in enumerate(body) if _backward(s)), None)
    step = next((i for i, s in enumerate(body) if _method_stmt(s, "step")), None)
    if back is None or step is None or step < back:
        return None
    opt = _method_stmt(body[step], "step")
    span = _step_span(body, back, opt, step)
    return None if span is None else (opt, _backward(body[back]), span[0], back, step, span[1])


def _straight_segments(body: list, opt_models: dict) -> list[tuple[int, int]]:
    """The straight-line training steps of a block no loop of its scope encloses (the module's statements, a
    function's, an if's): ``(first, end)``, the statements ``body[first:end]`` from just after the previous
    ``X.step()`` at this level through the next one, where they hold a backward(); each starts after the last
    statement before its backward() that binds the optimizer stepped or its model (``opt = torch.optim.Adam(...)``,
    ``model = Net()``: not loss statements). _loop_plan reads each as a loop's body."""
    out = []
    prev = 0
    for i, st in enumerate(body):
        opt = _method_stmt(st, "step")
        if opt is None:
            continue
        backs = [k for k in range(prev, i) if _backward(body[k])]
        if backs:
            first = prev
            names = {opt, opt_models.get(opt)} - {None}
            for k in range(prev, backs[0]):
                if any(_assigns_anywhere(body[k], n) for n in names):
                    first = k + 1
            out.append((first, i + 1))
        prev = i + 1
    return out


def _step_parts(body: list, plan: tuple, model: str, resolve) -> tuple | None:
    """What an optimizer step and a hand-written SGD step both read off their loop: the statements computing the
    loss (moved into the step) and those without the model that stay before it (_split_block), the gradient
    clipping (_step_clip, or None), the statements between the loss and the update less that clipping, and the
    names the loss statements read with their first uses; None where no statement computes the loss."""
    block, before = _split_block(body, plan, model)
    if not block:
        return None
    between = plan[5]
    clip = _step_clip(body, plan, model, resolve)
    if clip is not None:
        between = [i for i in between if i != clip[0]]
    names = _Names()
    first: dict[str, str] = {}
    for s in block:
        scan(s, names)
        _first_uses(s, first)
    return block, before, clip, between, names, first


def _step_span(body: list, back: int, owner: str, end: int) -> tuple[int, list[int]] | None:
    """Where a step's statements start (the assignments computing the loss backward() reads, up through its one
    ``owner.zero_grad()`` before backward) and the statements between the loss and ``end`` (the update) that
    are neither backward nor that zero_grad; None where the shape is not that."""
    loss = _backward(body[back])
    zero = [i for i, s in enumerate(body) if _method_stmt(s, "zero_grad") == owner]
    if len(zero) != 1 or zero[0] > back:
        return None
    last = next((i for i in range(back - 1, -1, -1) if _assigns_loss(body[i], loss)), None)
    if last is None:
        return None
    start = last
    while start - 1 >= 0 and (start - 1 == zero[0] or _is_assign(body[start - 1]) and not _mode_switch(body[start - 1])):
        start -= 1
    return start, [i for i in range(last + 1, end) if i not in (back, zero[0])]


def _accumulation(body: list) -> tuple[str, str, str] | None:
    """(optimizer, condition, loss) of a loop body that accumulates gradients: ``loss.backward()`` at its level, no
    zero_grad before it, and ``optimizer.step()`` only inside ``if <condition with %>:`` at its level after it
    (``if (i + 1) % accum == 0``)."""
    back = next((i for i, st in enumerate(body) if _backward(st)), None)
    if back is None or any(_method_stmt(st, "step") for st in body):
        return None
    for st in body[back + 1:]:
        if isinstance(st, cst.If) and isinstance(st.body, cst.IndentedBlock) and st.orelse is None \
                and any(isinstance(b.operator, cst.Modulo) for b in find_all(st.test, cst.BinaryOperation)):
            opt = next((_method_stmt(x, "step") for x in st.body.body if _method_stmt(x, "step")), None)
            # (no zero_grad before the backward, at the loop's level or in a block: the gradients add up)
            if opt is not None and not any(_backward(x) for x in st.body.body) and not any(
                    isinstance(c.func, cst.Attribute) and c.func.attr.value == "zero_grad"
                    for x in body[:back] for c in find_all(x, cst.Call)):
                return opt, code(st.test), _backward(body[back])
    return None


#: ctx.analyses: (top-level function or "", optimizer) of the loops accumulating gradients that the finishing step
#: writes (_accumulated)
ACCUMULATED = "torch2jax.accumulated-steps"
#: the accumulated gradients' name in a rewritten loop (None where no microbatch has added to them yet)
GRADS_ACC = "grads_acc"


def _plain_condition(node) -> bool:
    """Whether an expression only reads: names, attributes, numbers, arithmetic, comparisons, ``len(...)`` of those
    (a condition evaluated again where the step's call is, with the same value)."""
    if isinstance(node, (cst.Name, cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.Attribute):
        return _plain_condition(node.value)
    if isinstance(node, cst.UnaryOperation):
        return _plain_condition(node.expression)
    if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
        return _plain_condition(node.left) and _plain_condition(node.right)
    if isinstance(node, cst.Comparison):
        return _plain_condition(node.left) and all(_plain_condition(c.comparator) for c in node.comparisons)
    if isinstance(node, cst.Call):
        return isinstance(node.func, cst.Name) and node.func.value == "len" and len(node.args) == 1 \
            and _plain_condition(node.args[0].value)
    return False


def _accumulated(body: list) -> dict | None:
    """A loop body accumulating gradients (_accumulation) whose ``if <condition>:`` block starts with
    ``optimizer.step()`` then ``optimizer.zero_grad()``, with a condition that only reads names the loop does not
    assign before it (other than the loop's target): {"opt", "cond", "if": the block's index, "body": the body as
    one step (zero_grad before the loss, step() right after backward(), the block without them; gone where
    nothing else is in it), "plan": that body's _loop_plan, "after": the statements that now follow the update
    where PyTorch runs them before it, "rest": the block's statements after the zero_grad()}; else None."""
    acc = _accumulation(body)
    if acc is None:
        return None
    opt = acc[0]
    back = next(i for i, st in enumerate(body) if _backward(st))
    k = next(i for i in range(back + 1, len(body)) if isinstance(body[i], cst.If)
             and any(_method_stmt(x, "step") == opt for x in body[i].body.body))
    block = list(body[k].body.body)
    if len(block) < 2 or _method_stmt(block[0], "step") != opt or _zero_grad(block[1]) != opt:
        return None
    rest = block[2:]
    if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in ("step", "zero_grad", "backward")
           and code(c.func.value) == opt for x in rest for c in find_all(x, cst.Call)):
        return None
    if not _plain_condition(body[k].test):
        return None
    read = _Names()
    scan(body[k].test, read)
    stored = set()
    for st in body[:k]:
        stored |= {n for n in read.loaded if _assigns_anywhere(st, n)}
    if stored:
        return None
    zero = parsed_statement(f"{opt}.zero_grad()\n")
    step = parsed_statement(f"{opt}.step()\n")
    kept = [body[k].with_changes(body=body[k].body.with_changes(body=rest))] if rest else []
    if not rest and body[k].leading_lines and k + 1 < len(body):
        kept_lines = [ln for ln in body[k].leading_lines if ln.comment is not None]
        if kept_lines:
            body = [*body[:k + 1], body[k + 1].with_changes(leading_lines=[*kept_lines, *body[k + 1].leading_lines]),
                    *body[k + 2:]]
    virtual = [zero, *body[:back + 1], step, *body[back + 1:k], *kept, *body[k + 1:]]
    plan = _loop_plan(virtual)
    if plan is None:
        return None
    return {"opt": opt, "cond": body[k].test, "if": k, "body": virtual, "plan": plan,
            "after": body[back + 1:k], "rest": rest}


def _previous_statement(scope, loop):
    """The statement just before ``loop`` in the block holding it (within ``scope``), or None."""
    blocks = [scope.body] if isinstance(scope, cst.Module) else []
    blocks += [b.body for b in find_all(scope, cst.IndentedBlock)]
    for b in blocks:
        for i, st in enumerate(b):
            if st is loop:
                return b[i - 1] if i else None
    return None


#: ctx.analyses: (top-level function or "", model, loss) of the loops stepping by hand that the finishing step writes
MANUAL = "torch2jax.manual-steps"


def _manual_update(stmt) -> tuple[str, str] | None:
    """(the model, the change of each parameter written with ``g`` for its gradient) of a hand-written SGD update
    of every parameter: ``for p in model.parameters():`` holding only ``p.data.add_(p.grad, alpha=-lr)``,
    ``p.data.add_(-lr * p.grad)``, ``p.data.sub_(lr * p.grad)`` (alpha= too) or ``p.data -= lr * p.grad`` (``p.grad.data``
    alike; ``p`` itself for ``p.data`` under torch.no_grad is not read). None for anything else (a change that reads
    the parameter, momentum kept by hand)."""
    if not (isinstance(stmt, cst.For) and isinstance(stmt.target, cst.Name) and stmt.orelse is None
            and isinstance(stmt.body, cst.IndentedBlock) and len(stmt.body.body) == 1):
        return None
    it = stmt.iter
    if not (isinstance(it, cst.Call) and not it.args and isinstance(it.func, cst.Attribute)
            and it.func.attr.value == "parameters" and isinstance(it.func.value, cst.Name)):
        return None
    p, model = stmt.target.value, it.func.value.value
    line = stmt.body.body[0]
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
        return None
    small = line.body[0]
    data = f"{p}.data"
    if isinstance(small, cst.AugAssign) and code(small.target) == data \
            and isinstance(small.operator, (cst.AddAssign, cst.SubtractAssign)):
        sign, value, alpha = ("" if isinstance(small.operator, cst.AddAssign) else "-"), small.value, None
    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) \
            and isinstance(small.value.func, cst.Attribute) and small.value.func.attr.value in ("add_", "sub_") \
            and code(small.value.func.value) == data:
        args = small.value.args
        if not args or args[0].keyword is not None or any(a.star for a in args) or len(args) > 2 \
                or len(args) == 2 and (args[1].keyword is None or args[1].keyword.value != "alpha"):
            return None
        sign = "" if small.value.func.attr.value == "add_" else "-"
        value, alpha = args[0].value, (args[1].value if len(args) == 2 else None)
    else:
        return None
    text = re.sub(rf"\b{p}\.grad(\.data)?\b", "g", code(value))
    if re.search(rf"\b{p}\b", text) or alpha is not None and re.search(rf"\b{p}\b", code(alpha)) \
            or not re.search(r"\bg\b", text):
        return None
    inner = parsed_expression(text)
    if alpha is not None:  # x.add_(v, alpha=a) is x + a * v
        factor = code(alpha) if isinstance(alpha, cst.UnaryOperation) and not sign else _paren(alpha)
        return model, f"{sign}{factor} * {_paren(inner)}"
    return model, f"{sign}{_paren(inner)}" if sign else text


class _UndetachedLoads(cst.CSTVisitor):
    """The names a statement reads other than through ``X.detach()`` / ``X.data`` (values whose graph it keeps)."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> bool:
        return not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "detach" and not node.args)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return node.attr.value != "data"

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return False  # (a name assigned is not read)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _stale_graph(body: list, kept: int, opt_models: dict) -> str | None:
    """softmax_gan: ``d_loss.backward(retain_graph=True)``, ``optimizer_D.step()``, then a later loss reading values the
    discriminator computed before that step (not detached): its backward() goes through a graph whose parameters the
    step changed in place, which PyTorch refuses. The error's end saying so, or None."""
    step = next((i for i in range(kept + 1, len(body)) if _method_stmt(body[i], "step")), None)
    later = next((i for i in range(step + 1, len(body)) if _backward(body[i])), None) if step is not None else None
    model = opt_models.get(_method_stmt(body[step], "step")) if step is not None else None
    if later is None or model is None:
        return None
    tainted = {model}
    for st in body[:step]:
        n = _Names()
        scan(st, n)
        if tainted & set(n.loaded):
            tainted |= n.stored
    read, stale = set(), tainted - {model}
    for st in body[step + 1:later]:
        v, n = _UndetachedLoads(), _Names()
        st.visit(v)
        scan(st, n)
        read |= v.names & stale
        stale -= n.stored  # computed again after the step
    if not read:
        return None
    opt, loss = _method_stmt(body[step], "step"), _backward(body[later])
    return (f": {loss}.backward() goes back through {', '.join(sorted(read))}, computed with {model} before {opt}.step() "
            f"changed {model}'s parameters in place: PyTorch itself raises there ('one of the variables needed for "
            f"gradient computation has been modified by an inplace operation') wherever that backward() needs those "
            f"parameters; compute {', '.join(sorted(read))} again after {opt}.step() (or detach them where {loss} should "
            "not differentiate them), then each step reads the gradients of its own loss")


def _unplanned(body: list, opt_models: dict | None = None) -> str:
    """Why a loop body holding loss.backward() has no step fwport reads (for the error's end), or ""."""
    stmt_calls = [(st, st.body[0].value) for st in body if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1
                  and isinstance(st.body[0], cst.Expr) and isinstance(st.body[0].value, cst.Call)
                  and isinstance(st.body[0].value.func, cst.Attribute)]
    calls = [c for c in find_all(cst.Module(body=list(body)), cst.Call) if isinstance(c.func, cst.Attribute)]
    kept = next((c for c in calls if c.func.attr.value == "backward"
                 and any(a.keyword is not None and a.keyword.value == "retain_graph" for a in c.args)), None)
    kept_at = next((i for i, st in enumerate(body) if isinstance(st, cst.SimpleStatementLine)
                    and any(c is kept for c in find_all(st, cst.Call))), None) if kept is not None else None
    stale = _stale_graph(body, kept_at, opt_models or {}) if kept_at is not None else None
    if stale is not None:
        return stale
    if kept is not None:
        return (f": {code(kept.func.value)}.{code(kept).split('.')[-1]} keeps the graph for a later backward(), "
                "whose gradients then add up with these in the parameters both losses reach (a later step reads the sum, "
                "computed with the models as they were before the steps between): write each optimizer's loss as that "
                "sum by hand (eqx.filter_value_and_grad of it), or detach what the later loss should not differentiate")
    steps = [c for c in calls if c.func.attr.value == "step" and len(c.args) <= 1]
    updates = [st for st in find_all(cst.Module(body=list(body)), cst.For) if _manual_update(st)]
    if not steps and not updates:
        return (": nothing in this loop steps an optimizer or updates the parameters, so the gradients backward() "
                "computes are not used here; in JAX compute them where they are read (eqx.filter_grad(loss_fn)(model))")
    if not any(_method_stmt(st, "step") for st in body) and not any(_manual_update(st) for st in body):
        where = code(steps[0].func.value) + ".step()" if steps else "the parameters' update"
        return f": {where} sits in a nested block (an if / else, a with), not at the loop's level"
    stepped = {_method_stmt(st, "step") for st in body} - {None}
    zeros = [code(c.func.value) for _, c in stmt_calls if c.func.attr.value == "zero_grad"]
    if stepped and not any(c.func.attr.value == "zero_grad" for c in calls):
        return (f": nothing in this loop clears the gradients ({sorted(stepped)[0]}.zero_grad()), so each backward() "
                "adds its gradients to those of all the earlier iterations and each step reads that running sum; "
                "where that is meant, carry the summed gradients by hand (jax.tree_util.tree_map(jnp.add, acc, grads))")
    if stepped and zeros and not stepped & set(zeros):
        return (f": the gradients are cleared by {', '.join(z + '.zero_grad()' for z in zeros)}, not by the optimizer "
                f"stepped ({sorted(stepped)[0]}.zero_grad()), which may train other parameters too")
    if any(isinstance(st, cst.With) and any(_backward(x) is None and isinstance(x, cst.SimpleStatementLine)
                                            for x in st.body.body) for st in body) \
            and not any(_assigns(st, _backward(next(x for x in body if _backward(x)))) for st in body):
        return ": the loss is computed inside a `with` block (autocast, a context), not by assignments at the loop's level"
    return ""


def _reads_grads(body: list, update: int):
    """The first statement of a loop body, other than its hand-written update ``body[update]``, that reads ``.grad``
    or the update's loop variable (a parameter, after the loop over them), or None."""
    p = body[update].target.value
    for i, st in enumerate(body):
        if i == update:
            continue
        n = _Names()
        scan(st, n)
        if "grad" in n.loaded or p in n.loaded:
            return st
    return None


def _plain(node) -> bool:
    """Whether an expression is only names and numbers under arithmetic (a learning rate passed as it is)."""
    if isinstance(node, cst.UnaryOperation):
        return _plain(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _plain(node.left) and _plain(node.right)
    return isinstance(node, (cst.Name, cst.Integer, cst.Float))


def _manual_plan(body: list) -> tuple[tuple, str] | None:
    """A loop body that steps by hand (pytorch/examples' regression and word_language_model): ``model.zero_grad()``
    before ``loss.backward()``, the loss computed by assignments just before, then a hand-written SGD update of
    the model's parameters (_manual_update) and no optimizer step: (a plan as _loop_plan's with the model in the
    optimizer's place and the update in the step's, the update of one parameter with ``g`` its gradient)."""
    if any(_method_stmt(st, "step") for st in body):
        return None
    backs = [i for i, st in enumerate(body) if _backward(st)]
    if len(backs) != 1:
        return None
    back = backs[0]
    found = next(((i, _manual_update(st)) for i, st in enumerate(body) if i > back and _manual_update(st)), None)
    if found is None:
        return None
    update, (model, delta) = found
    if any(_manual_update(st) for i, st in enumerate(body) if i != update):
        return None
    span = _step_span(body, back, model, update)
    if span is None:
        return None
    return (model, _backward(body[back]), span[0], back, update, span[1]), delta


def _sequential_plans(body: list, ctx=None) -> list[tuple[list, tuple]]:
    """The steps at a loop body's own level, one after another (a GAN's generator step, then its
    discriminator's): (the statements from the end of the previous step on, _loop_plan of them) each. A
    backward() after the last step found that starts no step of another optimizer: an error (with ``ctx``)."""
    out, seen, rest = [], set(), body
    while any(_backward(s) for s in rest):
        plan = _loop_plan(rest)
        if plan is None or plan[0] in seen:
            if ctx is not None:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{_backward(next(s for s in rest if _backward(s)))}"
                           ".backward() follows another step in this loop's body: a further step is rewritten when it "
                           "holds, after the previous optimizer.step() and at the loop's level, its own optimizer's "
                           "zero_grad(), the assignments computing its loss, backward() and step() in that order (each "
                           "optimizer once); write this optax step by hand (eqx.filter_value_and_grad, optim.update, "
                           "eqx.apply_updates)", next(s for s in rest if _backward(s)))
            break
        out.append((rest, plan))
        seen.add(plan[0])
        rest = rest[plan[4] + 1:]
    return out


JOINT = "torch2jax.joint-steps"  # ctx.analyses: (function or "", optimizer) → the optimizers stepped with it on its loss


def _shared_module(scope, models: list[str]) -> str | None:
    """Two of ``models`` built with the same module instance (PyTorch-GAN's unit: ``shared_E = ResidualBlock(...)``,
    ``E1 = Encoder(..., shared_block=shared_E)``, ``E2 = Encoder(..., shared_block=shared_E)``), or one a part of
    another (``head = model[2]``): why one train_step over them differs from PyTorch's; else None. PyTorch's models share the instance's parameters (one gradient, the
    sum of both uses; an optimizer over both models' parameters holds them twice), where each Equinox model holds its
    own copy of the arrays, trained apart."""
    def built(value) -> bool:  # an instance of a class (by its capital): a module
        return isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)) \
            and (value.func.value if isinstance(value.func, cst.Name) else value.func.attr.value)[:1].isupper()

    made: dict[str, cst.Call] = {}  # each name → the first instance assigned to it (`E1 = E1.cuda()` is not one)
    for a in _scope_assigns(scope):
        for t in a.targets:
            if isinstance(t.target, cst.Name) and t.target.value not in made and built(a.value):
                made[t.target.value] = a.value
            root = a.value
            while isinstance(root, (cst.Attribute, cst.Subscript)):
                root = root.value
            if isinstance(t.target, cst.Name) and t.target.value in models and isinstance(root, cst.Name) \
                    and root.value in models and root.value != t.target.value and root is not a.value:
                return (f"{t.target.value} is a part of {root.value} ({t.target.value} = {code(a.value)}): in "
                        f"PyTorch its parameters are {root.value}'s (one gradient, the sum of both uses), where each "
                        "Equinox model holds its own copy of them, trained apart")
    users: dict[str, str] = {}
    for m in models:
        value = made.get(m)
        if value is None:
            continue
        for arg in value.args:
            inner = made.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
            if inner is None:
                continue
            n = arg.value.value
            if n in users and users[n] != m:
                return (f"{users[n]} and {m} are built with the same module {n} ({code(inner.func)}(...)): PyTorch's "
                        f"models share its parameters (one gradient, the sum of both uses; an optimizer over both "
                        f"models' parameters holds them twice), where each Equinox model holds its own copy of {n}'s "
                        "arrays, trained apart")
            users[n] = m
    return None


def _joint_update(opt: str, models: list[str], state: str, spell) -> str:
    """A joint train_step's update by ``opt`` of its models (their gradients ``grads_<model>``): one model's, or the
    tuple of the models its parameters chained (``itertools.chain(a.parameters(), b.parameters())``)."""
    m = models[0] if len(models) == 1 else f"({', '.join(models)})"
    g = f"grads_{models[0]}" if len(models) == 1 else f"({', '.join(f'grads_{n}' for n in models)})"
    return (f"    updates, {state} = {opt}.update({g}, {state}, {spell('equinox.filter')}({m}, {spell('equinox.is_array')}))\n"
            f"    {', '.join(models)} = {spell('equinox.apply_updates')}({m}, updates)\n")


def _joint_steps(body: list, plan) -> list[str]:
    """The optimizers whose step() follows the planned step at once, on the gradients of the same loss (the seq2seq
    tutorials: ``encoder_optimizer.zero_grad(); decoder_optimizer.zero_grad(); <loss>; loss.backward();
    encoder_optimizer.step(); decoder_optimizer.step()``): one loss training several models, each stepped by its own
    optimizer. Each is cleared once before the backward() and stepped once, and no backward() follows; else []."""
    opt, loss, start, back, step, between = plan
    others = []
    for st in body[step + 1:]:
        other = _method_stmt(st, "step")
        if other is None:
            break
        others.append(other)
    if not others or len(set(others)) != len(others) or opt in others \
            or any(_backward(st) for st in body[step + 1:]):
        return []
    for other in others:
        zeros = [i for i, st in enumerate(body) if _zero_grad(st) == other]
        if len(zeros) != 1 or zeros[0] > back or sum(1 for st in body if _method_stmt(st, "step") == other) != 1:
            return []
    return others


def _without_steps(body: list, others) -> list:
    """A loop body less the zero_grad() and step() statements of the optimizers ``others`` (those a joint step takes
    over: _joint_steps)."""
    return [st for st in body if _zero_grad(st) not in others and _method_stmt(st, "step") not in others]


def _block_plan(body: list, i: int) -> tuple[list, int | None, tuple] | None:
    """The step inside the ``if`` / ``with`` block ``body[i]`` at a loop's level, where its own body holds
    loss.backward() and optimizer.step() (a GAN's generator step under ``if i % n_critic == 0:``): (the block's
    statements, with the optimizer's zero_grad() in front when it sits before the block at the loop's level;
    that zero_grad's index in ``body`` or None; _loop_plan of those statements). None where the block holds no
    such step, or the optimizer also steps at the loop's level, or its zero_grad is not found once (in the block,
    or before it with no backward() between them)."""
    block = body[i]
    if not isinstance(block, (cst.If, cst.With)) or not isinstance(block.body, cst.IndentedBlock):
        return None
    inner = list(block.body.body)
    if not any(_backward(s) for s in inner):
        return None
    step = next((s for s in inner if _method_stmt(s, "step")), None)
    if step is None:
        return None
    opt = _method_stmt(step, "step")
    if any(_method_stmt(s, "step") == opt or _method_stmt(s, "zero_grad") == opt for s in body[i + 1:]) \
            or any(_method_stmt(s, "step") == opt for s in body[:i]):
        return None
    outer_zero = None
    if not any(_method_stmt(s, "zero_grad") == opt for s in inner):
        zeros = [k for k in range(i) if _method_stmt(body[k], "zero_grad") == opt]
        if len(zeros) != 1 or any(_backward(body[k]) for k in range(zeros[0] + 1, i)):
            return None
        outer_zero = zeros[0]
        inner = [body[outer_zero], *inner]
    plan = _loop_plan(inner)
    if plan is None or plan[0] != opt:
        return None
    return inner, outer_zero, plan


LBFGS_SIGNATURE = ("params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-07, tolerance_change=1e-09, "
                   "history_size=100, line_search_fn=None")
LBFGS_DIFFERS = ("{opt}.step(closure) → {n} updates of optax.lbfgs(linesearch=None), one per iteration of PyTorch's "
                 "LBFGS: from its second iteration on they are PyTorch's, but PyTorch scales its first iteration ever "
                 "by min(1, 1/sum(|grad|)) (optax takes lr * grad), stops a step early once tolerance_grad or "
                 "tolerance_change is reached and skips curvature pairs with y.s <= 1e-10, which these updates do "
                 "not: the parameters agree where the first gradient's L1 norm is at most 1 and until PyTorch stops "
                 "early")


def _one_per_line(stmts: list) -> list:
    """Statements with each of a line's ``;``-separated small statements on a line of its own (a closure written
    ``opt.zero_grad(); loss = ...; loss.backward(); return loss``), the line's comments kept on its first."""
    out = []
    for st in stmts:
        if isinstance(st, cst.SimpleStatementLine) and len(st.body) > 1:
            last = len(st.body) - 1  # (the line's trailing comment stays on its last statement)
            out += [cst.SimpleStatementLine([small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)],
                                            leading_lines=st.leading_lines if j == 0 else (),
                                            trailing_whitespace=st.trailing_whitespace if j == last
                                            else cst.TrailingWhitespace())
                    for j, small in enumerate(st.body)]
        elif isinstance(st, cst.SimpleStatementSuite):  # def closure(): ...; return loss (on the def's line)
            out += [cst.SimpleStatementLine([small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]) for small in st.body]
        else:
            out.append(st)
    return out


def _closure_steps(body: list) -> list[tuple[int, int, str, list]]:
    """``def closure(): opt.zero_grad(); <loss>; loss.backward(); return loss`` and ``opt.step(closure)`` as a
    statement later in the same body (PyTorch's LBFGS): (the def's index, the step's index, the optimizer, the
    closure's statements with ``return loss`` replaced by ``opt.step()``, a loop body _loop_plan reads). Only
    where nothing else in the body names the closure."""
    out = []
    defs = {s.name.value: i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef)}
    for k, st in enumerate(body):
        if not (isinstance(st, cst.SimpleStatementLine) and isinstance(st.body[0], cst.Expr)):
            continue  # (the step first on its line; what follows it on the line is kept after the loop)
        call = st.body[0].value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "step"
                and len(call.args) == 1 and call.args[0].keyword is None and isinstance(call.args[0].value, cst.Name)):
            continue
        name, opt = call.args[0].value.value, dotted_text(call.func.value)
        i = defs.get(name)
        if i is None or i > k or opt is None:
            continue
        fn = body[i]
        stmts = _one_per_line(list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else [fn.body])
        if fn.params.params or fn.params.star_arg is not cst.MaybeSentinel.DEFAULT and fn.params.star_arg is not None \
                or fn.params.kwonly_params or fn.params.star_kwarg or fn.decorators or not stmts:
            continue
        ret = stmts[-1]
        loss = next((_backward(s) for s in stmts if _backward(s)), None)
        if not (isinstance(ret, cst.SimpleStatementLine) and len(ret.body) == 1 and isinstance(ret.body[0], cst.Return)
                and isinstance(ret.body[0].value, cst.Name) and ret.body[0].value.value == loss):
            continue
        n = _Names()
        for j, other in enumerate(body):
            if j not in (i, k) and not any(f.name.value == name for f in find_all(other, cst.FunctionDef)):
                scan(other, n)  # (a block defining a closure of its own calls that one: the training loop of the
                # script under `if __name__ == "__main__":` beside a module-level step)
        if name in n.loaded:
            continue
        out.append((i, k, opt, stmts[:-1] + [parsed_statement(f"{opt}.step()\n")]))
    return out


def _mode_switch(stmt) -> bool:
    """``model = eqx.nn.inference_mode(model, ...)``: what ``model.train()`` became (not a loss statement)."""
    v = stmt.body[0].value
    return isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "inference_mode"


def _split_block(body: list, plan, model: str) -> tuple[list, list]:
    """The loss statements of a planned loop: (those that depend on the model, which go into loss_fn;
    those that do not, which stay in the loop before the step)."""
    opt, loss, start, back, step, between = plan
    last = max(i for i in range(start, back) if _assigns_loss(body[i], loss))
    block, before = [], []
    tainted = set(model) if isinstance(model, tuple) else {model}  # (a joint step's models: _joint_steps)
    used: set[str] = set()  # the names the statements moved into loss_fn so far read or assign
    for i, s in enumerate(body[start:last + 1], start):
        if _method_stmt(s, "zero_grad") == opt:
            continue
        n = _Names()
        scan(s, n)
        # (one assigning a name an earlier loss statement reads, dcgan's `label.fill_(fake_label)` between its
        # two losses, stays after it: moved before the step, the earlier loss would read the new value)
        if tainted & set(n.loaded) or used & set(n.stored):
            block.append(s)
            tainted |= n.stored
            used |= set(n.loaded) | set(n.stored)
        else:
            before.append(s)
    return block, before


#: torch.nn.utils.clip_grad_norm_ (and its deprecated spelling without the underscore) as the import table resolves it
CLIP_NAMES = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm",
                        "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm"})


def _clip(stmt, model: str, resolve) -> tuple[cst.Call, cst.BaseExpression, cst.BaseExpression | None] | None:
    """(the call, max_norm, the condition or None) of ``torch.nn.utils.clip_grad_norm_(<model>.parameters(),
    max_norm)`` as a statement of its own, or alone under ``if <condition>:`` (no else): PyTorch's 2-norm over
    every gradient of the model, its result unused. Anything else: None."""
    cond = None
    if isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock) \
            and len(stmt.body.body) == 1:
        cond, stmt = stmt.test, stmt.body.body[0]
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    if not isinstance(call, cst.Call) or resolve(call.func) not in CLIP_NAMES or any(a.star for a in call.args):
        return None
    names = ["parameters", "max_norm", "norm_type", "error_if_nonfinite", "foreach"]
    bound: dict[str, cst.BaseExpression] = {}
    for i, a in enumerate(call.args):
        key = a.keyword.value if a.keyword is not None else (names[i] if i < len(names) else None)
        if key not in names or key in bound:
            return None
        bound[key] = a.value
    params = bound.get("parameters")
    if "max_norm" not in bound or not (isinstance(params, cst.Call) and not params.args and isinstance(params.func, cst.Attribute)
                                       and params.func.attr.value == "parameters" and code(params.func.value) == model):
        return None
    if "norm_type" in bound and code(bound["norm_type"]) not in ("2", "2.0") \
            or "error_if_nonfinite" in bound and code(bound["error_if_nonfinite"]) != "False":
        return None
    return call, bound["max_norm"], cond


def _loop_problem(body: list, plan, model: str | None, resolve=None) -> str | None:
    """Why the planned loop cannot become one train_step call, or None: statements between the loss
    and the step (moved after the call) that use the model, the optimizer or gradients; one gradient clipping of
    the model's parameters (_clip) goes into the step. (Values computed inside the step that the code around it
    reads are returned from it: _step_outputs.)"""
    opt, loss, start, back, step, between = plan
    if model is None:
        return None
    clip = _step_clip(body, plan, model, resolve)
    other = next((_backward(body[i]) for i in between if _backward(body[i])), None)
    if other is not None:  # dcgan: errD_real.backward(), then errD_fake.backward(), then one step
        return (f"{other}.backward() adds its gradients to {loss}'s before {opt}.step(); fwport rewrites one "
                f"backward() per step: compute both losses first and step on their sum ({loss}_total = {loss} + "
                f"{other}; {loss}_total.backward()), which gives the same gradients")
    zeroed = {_method_stmt(st, "zero_grad") for st in body} - {None}  # optimizers (a scheduler has no zero_grad)
    for st in body[step + 1:]:
        if _backward(st):
            break
        also = _method_stmt(st, "step")
        if also is not None and also != opt and also in zeroed:  # dualgan: D_loss = D_A_loss + D_B_loss
            return (f"{loss}.backward() gives its gradients to {opt}.step() and to {also}.step() after it (one loss "
                    f"training two models); fwport writes one train_step per optimizer, each with its own loss: give "
                    f"each optimizer its own loss and backward() (a sum's part that does not reach a model adds nothing "
                    "to its gradients), or write one step over both models by hand")
    if not _split_block(body, plan, model)[0]:  # dcgan's generator loss through an earlier `fake = netG(noise)`
        return (f"no statement computing {loss} calls {model}: {loss}.backward() reaches it through a value computed "
                f"earlier, which a JAX loss function does not differentiate; compute that value again after "
                f"{opt}.zero_grad() (fwport does so where {model} draws nothing and nothing "
                "it reads changed since)")
    for i in between:
        if clip is not None and i == clip[0]:
            continue
        n = _Names()
        scan(body[i], n)
        loaded = set(n.loaded)
        if model in loaded or opt in loaded or "grad" in loaded:
            what = "the model" if model in loaded else "the optimizer" if opt in loaded else "gradients"
            return (f"line {_first_line(body[i])}: a statement between the loss and {opt}.step() uses {what}; the "
                    "step is one call of the written train_step (write gradient clipping as an optax transformation: "
                    "optax.chain(optax.clip_by_global_norm(max_norm), <the optimizer>))")
    return None


def _paren(node: cst.BaseExpression) -> str:
    text = code(node)
    return text if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)) \
        else f"({text})"


def _step_clip(body: list, plan, model: str, resolve) -> tuple[int, tuple] | None:
    """(its index, _clip's answer) of the first gradient clipping between backward() and step(), whose names are
    neither the loss's nor assigned in the loss statements (it is evaluated before the train_step call)."""
    if resolve is None:
        return None
    opt, loss, start, back, step, between = plan
    for i in between:
        if not back < i < step:
            continue
        found = _clip(body[i], model, resolve)
        if found is None:
            continue
        n = _Names()
        scan(found[1], n)
        if found[2] is not None:
            scan(found[2], n)
        stored = set()
        for s in body[start:back]:
            m = _Names()
            scan(s, m)
            stored |= m.stored
        if set(n.loaded) & (stored | {loss, model, opt}):
            return None
        return i, found
    return None


def _step_outputs(body: list, plan, model: str) -> list[str]:
    """The values computed with the model inside the step that the code around it reads: read between the
    loss and step() (those statements follow the train_step call), first read after step() (not assigned
    again before), or read in the step before it assigns them (a value threaded through each step: BatchNorm's
    ``state``). loss_fn returns them beside the loss (eqx.filter_value_and_grad(..., has_aux=True)) and
    train_step after it."""
    opt, loss, start, back, step, between = plan
    block, _ = _split_block(body, plan, model)
    stored: set[str] = set()
    first: dict[str, str] = {}
    for s in block:
        n = _Names()
        scan(s, n)
        stored |= n.stored
        _first_uses(s, first)
    inner = stored - {loss, *(model if isinstance(model, tuple) else (model,))}
    out = {n for n in inner if first.get(n) == "load"}
    for i in between:
        n = _Names()
        scan(body[i], n)
        out |= set(n.loaded) & inner
    after: dict[str, str] = {}
    for s in body[step + 1:]:
        _first_uses(s, after)
    out |= {n for n in inner if after.get(n) == "load"}  # not those assigned again before any use
    return sorted(out)


def _return_loss(moved: list, loss: str, returned: str) -> None:
    """The loss function's end, in place: its last statement ``name = value`` (the loss) becomes ``return value``
    (plus ``returned``, the aux values), else ``return loss`` follows it."""
    last = moved[-1].body[0]
    if len(last.targets) == 1 and isinstance(last.targets[0].target, cst.Name):
        moved[-1] = parsed_statement(f"return {code(last.value)}{returned}\n")
    else:
        moved.append(parsed_statement(f"return {loss}{returned}\n"))


def _traced_items(stmts: list) -> tuple[list, list[str]]:
    """The loss statements with ``x = <value>.item()`` (dcgan's ``D_x = output.mean().item()`` between two losses)
    written ``x = <value>``: inside the jitted step the value is a traced array, which has no Python number; the
    call after the step takes ``.item()`` of those it returns. (the statements, the names so assigned)"""
    out, names = [], []
    for st in stmts:
        small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and isinstance(small.value, cst.Call) and not small.value.args \
                and isinstance(small.value.func, cst.Attribute) and small.value.func.attr.value == "item":
            st = st.with_changes(body=[small.with_changes(value=small.value.func.value)])
            names.append(small.targets[0].target.value)
        out.append(st)
    return out, names


def _first_uses(node, first: dict[str, str]) -> None:
    """Record, for each name, whether its first use in execution order is a load or a store (an
    assignment's value runs before its targets; a loop's iterable before its target)."""
    def store(target):
        for n in target_names(target):
            first.setdefault(n, "store")
        if not isinstance(target, (cst.Name, cst.Tuple, cst.List)):
            _first_uses(target, first)  # x[i] = ..., obj.attr = ...: loads

    if isinstance(node, cst.Name):
        first.setdefault(node.value, "load")
    elif isinstance(node, cst.Assign):
        _first_uses(node.value, first)
        for t in node.targets:
            store(t.target)
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        if node.value is not None:
            _first_uses(node.value, first)
        if isinstance(node, cst.AugAssign):
            _first_uses(node.target, first)
        store(node.target)
    elif isinstance(node, cst.For):
        _first_uses(node.iter, first)
        store(node.target)
        _first_uses(node.body, first)
        if node.orelse is not None:
            _first_uses(node.orelse, first)
    elif isinstance(node, cst.Attribute):
        _first_uses(node.value, first)
    elif isinstance(node, cst.Arg):
        _first_uses(node.value, first)
    elif isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return
    else:
        for child in children(node):
            _first_uses(child, first)


def _first_line(stmt) -> str:
    return code(stmt).strip().splitlines()[0][:60]


#: numpy array methods whose result is a numpy array again (_numpy_value)
_ARRAY_METHODS = frozenset({"astype", "reshape", "copy", "transpose", "ravel", "flatten", "squeeze", "clip", "round",
                            "cumsum", "sum", "mean", "swapaxes"})


def _numpy_value(node, resolve) -> bool:
    """Whether an expression is numpy data by its form: a call of a numpy function (``np.sin(...)``), or an array
    method of one (``np.sin(x).astype('float64')``): holding no tensor in PyTorch, no jax array in the translation."""
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in _ARRAY_METHODS \
            and isinstance(node.func.value, cst.Call) and _numpy_value(node.func.value, resolve):
        return True
    q = resolve(node.func)
    return bool(q) and q.startswith("numpy.")


def _assigns_anywhere(stmt, name: str) -> bool:
    """Whether a statement (or a block in it) binds ``name`` (an assignment, an augmented one, a for's target)."""
    for node in [*find_all(stmt, cst.AssignTarget), *find_all(stmt, cst.AugAssign), *find_all(stmt, cst.AnnAssign),
                 *find_all(stmt, cst.For)]:
        if name in target_names(node.target):
            return True
    return False


def _is_assign(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)


def _assigns(stmt, name: str) -> bool:
    return _is_assign(stmt) and any(isinstance(t.target, cst.Name) and t.target.value == name for t in stmt.body[0].targets)


# --- finish ------------------------------------------------------------------------------------------

def _assigns_loss(stmt, name: str) -> bool:
    """Whether a statement assigns the loss: ``loss = ...``, or a tuple unpacking a model's outputs with the loss
    among them (nanoGPT's ``logits, loss = model(X, Y)``)."""
    return _assigns(stmt, name) or _is_assign(stmt) and len(stmt.body[0].targets) == 1 \
        and isinstance(stmt.body[0].targets[0].target, cst.Tuple) and name in target_names(stmt.body[0].targets[0].target)


def _loss_of_vmapped_model(stmt, model: str) -> bool:
    """``logits, loss = model(X, Y)``: a tuple unpacking a call of the trained model (a loss its forward computes), as
    the training pass wrote it (``jax.vmap(model)(X, Y)``)."""
    if not (_is_assign(stmt) and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Tuple)
            and isinstance(stmt.body[0].value, cst.Call)):
        return False
    f = stmt.body[0].value.func
    if isinstance(f, cst.Call) and f.args and code(f.func).endswith("vmap"):
        f = f.args[0].value
    return isinstance(f, cst.Name) and f.value == model


def _str_key(node) -> str | None:
    """A plain string literal's value (a dict key, a subscript); None for anything else."""
    if isinstance(node, cst.SimpleString) and node.prefix.lower() in ("", "r"):
        return node.evaluated_value
    return None


class _ScopeStatements(cst.CSTVisitor):
    def __init__(self, scope) -> None:
        super().__init__()
        self.scope = scope
        self.found: list[cst.SimpleStatementLine] = []

    def visit_SimpleStatementLine(self, n) -> bool:
        self.found.append(n)
        return False

    def visit_FunctionDef(self, n) -> bool:
        return n is self.scope

    def visit_ClassDef(self, n) -> bool:
        return False


def _scope_statements(scope) -> list[cst.SimpleStatementLine]:
    """The simple statement lines of one scope (a function's body, or a module outside its functions and classes)."""
    v = _ScopeStatements(scope)
    scan(scope, v)
    return v.found


class _KeyReads(ValueVisitor):
    """The reads of ``name`` in a scope (nested functions and lambdas included): ``name['key']`` with a string key
    counted in ``keys``, any other read (or binding but its one assignment) in ``other``."""

    def __init__(self, name: str):
        self.name = name
        self.keys = self.other = 0

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        if isinstance(node.value, cst.Name) and node.value.value == self.name and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) and _str_key(node.slice[0].slice.value) is not None:
            self.keys += 1
            return False
        return True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return not (isinstance(node.target, cst.Name) and node.target.value == self.name)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.other += 1


def _reads(scope, name: str) -> int:
    """How many times a scope reads ``name`` (attribute and keyword names aside; its assignments' targets not)."""
    v = _KeyReads(name)
    scan(scope, v)
    return v.keys + v.other


def _drop_unread(module: cst.Module, dropped: set) -> cst.Module:
    """The assignments recorded in DROPPED whose name nothing reads any more, removed (a module-level one
    when the module reads it nowhere, a function's when that function does not)."""
    def reads(node, name: str) -> bool:
        n = _Names()
        scan(node, n)
        return name in n.loaded

    def keep(stmt, scope_names: set, scope) -> bool:
        if not _is_assign(stmt) or len(stmt.body[0].targets) != 1:
            return True
        target = stmt.body[0].targets[0].target
        if isinstance(target, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in target.elements):
            # `o, _ = D(x)`: a recorded name unpacked beside names nothing reads (`_`)
            names = [e.value.value for e in target.elements]
            if not any(n in scope_names for n in names) or not all(n in scope_names or n == "_" for n in names):
                return True
        elif isinstance(target, cst.Name) and target.value in scope_names:
            names = [target.value]
        else:
            return True
        others = [s for s in scope if s is not stmt]
        return any(reads(s, n) for n in names for s in others) or any(reads(stmt.body[0].value, n) for n in names)

    def kept(stmts: list, names: set) -> list:  # until none goes (`ones = torch.ones_like(o)` gone, then `o = D(x)`)
        while True:
            left = [s for s in stmts if keep(s, names, stmts)]
            if len(left) == len(stmts):
                return left
            stmts = left

    top = {n for fn, n in dropped if fn is None}
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            names = {n for fn, n in dropped if fn == stmt.name.value}
            if names:
                stmt = stmt.with_changes(body=stmt.body.with_changes(body=kept(list(stmt.body.body), names)))
        if top and not keep(stmt, top, module.body):
            continue
        body.append(stmt)
    return module.with_changes(body=body)


def finish(module: cst.Module, ctx) -> cst.Module:
    module = rewrite(module, _NoGrad(ctx))
    if ctx.analyses.get(DROPPED):
        module = _drop_unread(module, ctx.analyses[DROPPED])
    optimizers = ctx.analyses.get(OPTIMIZERS)
    globals_left = ctx.analyses.get(GLOBALS, {})
    if optimizers or ctx.analyses.get(MANUAL):
        f = _Finish(ctx, optimizers or {})
        module = rewrite(module, f)
        if f.threaded_done:
            module = rewrite(module, _ThreadCalls(f.threaded_done, ctx.spell_text("jax.random.split")))
        module = learning_rate.finish(module, ctx, f.suffix)
        globals_left = f.globals
    module = state.finish(module, ctx)
    if ctx.analyses.get(ZERO_HELPERS):
        module = _drop_zero_helpers(module, ctx.analyses[ZERO_HELPERS])
    if globals_left:  # functions without a training loop that rebind the module's model (model.eval())
        module = module.with_changes(body=[
            _declare_global(s, globals_left[s.name.value]) if isinstance(s, cst.FunctionDef) and s.name.value in globals_left
            else s for s in module.body])
    return module


def _drop_zero_helpers(module: cst.Module, helpers: set[str]) -> cst.Module:
    """The module without the zero_grad helpers a step was read through (ZERO_HELPERS) that nothing names any more
    (every call of them became part of a train_step); one still named stays, and the rules report its zero_grad."""
    n = _Names()
    for s in module.body:
        if not (isinstance(s, cst.FunctionDef) and s.name.value in helpers):
            scan(s, n)
    gone = helpers - set(n.loaded)
    if not gone:
        return module
    body, carried = [], []
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and s.name.value in gone:
            carried += [ln for ln in s.leading_lines if ln.comment is not None]
            continue
        if carried:
            s = s.with_changes(leading_lines=[*carried, *s.leading_lines])
            carried = []
        body.append(s)
    return module.with_changes(body=body)


def _with_schedule(stmt, schedule: str):
    """``opt = optax.X(learning_rate=lr, ...)`` → ``learning_rate=<schedule of lr>``; inside a wrapper too
    (``optax.chain(optax.add_decayed_weights(wd), optax.sgd(learning_rate=lr))``, ``optax.masked(..., unfrozen)``)."""
    def scheduled(call):
        args = list(call.args)
        at = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == "learning_rate"), None)
        if at is not None:
            args[at] = args[at].with_changes(value=parsed_expression(schedule.format(lr=code(args[at].value))))
            return call.with_changes(args=args)
        for i, a in enumerate(args):
            inner = scheduled(a.value) if isinstance(a.value, cst.Call) else None
            if inner is not None:
                args[i] = a.with_changes(value=inner)
                return call.with_changes(args=args)
        return None

    call = scheduled(stmt.body[0].value)
    if call is None:
        return stmt
    return stmt.with_changes(body=[stmt.body[0].with_changes(value=call)])


def _declare_global(f: cst.FunctionDef, names: set) -> cst.FunctionDef:
    """``global a, b`` as the function's first statement (after its docstring)."""
    body = list(f.body.body)
    at = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
        and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)) else 0
    order = sorted(names, key=lambda n: (n == "opt_state", n))
    decl = parsed_statement(f"global {', '.join(order)}\n")
    if at < len(body):
        decl = decl.with_changes(leading_lines=body[at].leading_lines)
        body[at] = body[at].with_changes(leading_lines=[])
    body.insert(at, decl)
    return f.with_changes(body=f.body.with_changes(body=body))


class _ThreadCalls(cst.CSTTransformer):
    """``train(..., optimizer, ...)`` of a function whose optimizer's state is now threaded →
    ``model, opt_state = train(..., optimizer, opt_state, ...)``."""

    def __init__(self, done: dict[str, dict], split: str = "jax.random.split"):
        super().__init__()
        self.done, self.split = done, split

    def leave_SimpleStatementLine(self, original, updated):
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.Expr):
            return updated
        call = updated.body[0].value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in self.done):
            return updated
        info = self.done[call.func.value]
        model = _bound(call, info["params"], info["model"])
        args = list(call.args)
        at = next(i for i, a in enumerate(args) if a.keyword is None and i < len(info["params"])
                  and info["params"][i] == info["opt"] or a.keyword is not None and a.keyword.value == info["opt"])
        new = cst.Arg(cst.Name("opt_state"), keyword=cst.Name("opt_state") if args[at].keyword is not None else None,
                      equal=args[at].equal if args[at].keyword is not None else cst.MaybeSentinel.DEFAULT,
                      comma=args[at].comma)
        args[at] = args[at].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.insert(at + 1, new)
        target = cst.Tuple([cst.Element(cst.Name(model.value)), cst.Element(cst.Name("opt_state"))], lpar=[], rpar=[])
        if info.get("keyed"):  # its own key for the call, split from the caller's
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(cst.Name("train_key"), keyword=cst.Name("key"),
                                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
            split = parsed_statement(f"key, train_key = {self.split}(key)\n").with_changes(
                leading_lines=updated.leading_lines)
            return cst.FlattenSentinel([split, updated.with_changes(
                body=[cst.Assign([cst.AssignTarget(target)], call.with_changes(args=args))], leading_lines=[])])
        return updated.with_changes(body=[cst.Assign([cst.AssignTarget(target)], call.with_changes(args=args))])


#: decorators that only tell TorchScript what to compile: no-ops in Python, so removed
SCRIPT_ONLY = frozenset({"torch.jit.ignore", "torch.jit.unused", "torch.jit.export"})


class _NoGrad(cst.CSTTransformer):
    """``with torch.no_grad():`` → its body; ``@torch.no_grad()`` → removed; ``@torch.jit.ignore`` (and unused,
    export, bare or called) → removed."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def _no_grad(self, node) -> bool:
        return isinstance(node, cst.Call) and (self.ctx.imports.resolve(node.func) in NO_GRAD
                                               or nograd.kind(node, self.ctx) == "on" or self.ctx.is_settled(node))

    def leave_With(self, original, updated):
        if not all(self._no_grad(i.item) and i.asname is None for i in original.items) \
                or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        body = list(updated.body.body)
        if body:
            body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *body[0].leading_lines])
        return cst.FlattenSentinel(body)

    def _script_only(self, node) -> bool:
        return self.ctx.imports.resolve(node.func if isinstance(node, cst.Call) else node) in SCRIPT_ONLY

    def leave_FunctionDef(self, original, updated):
        decorators = [d for d in updated.decorators if not self._no_grad(d.decorator) and not self._script_only(d.decorator)]
        if len(decorators) == len(updated.decorators):
            return updated
        return updated.with_changes(decorators=decorators)


class _Names(cst.CSTVisitor):
    def __init__(self):
        self.loaded: list[str] = []
        self.stored: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self.loaded:
            self.loaded.append(node.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        for n in target_names(node.target):
            self.stored.add(n)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        scan(node.value, self)
        if node.attr.value == "grad" and "grad" not in self.loaded:  # p.grad: the gradients PyTorch keeps
            self.loaded.append("grad")
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        scan(node.value, self)  # not the keyword
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        """A lambda's own parameters are not names of the scope (a loss written inline, ``(lambda logits, labels:
        ...)(out, y)``): its body's other names and its defaults are."""
        ps = node.params
        own = {p.name.value for p in [*ps.posonly_params, *ps.params, *ps.kwonly_params]}
        own |= {p.name.value for p in (ps.star_arg, ps.star_kwarg) if isinstance(p, cst.Param)}
        for p in [*ps.posonly_params, *ps.params, *ps.kwonly_params]:
            if p.default is not None:
                scan(p.default, self)
        inner = _Names()
        scan(node.body, inner)
        self.loaded += [n for n in inner.loaded if n not in own and n not in self.loaded]
        return False


HOISTED = "torch2jax.hoisted"  # ctx.analyses: the names hoist_stateful_calls assigned a model's call to


#: the methods whose calls, as one of several statements on a line (`l.backward(); opt.step()`), make the
#: line several (split_step_lines)
_STEP_METHODS = frozenset({"backward", "step", "zero_grad"})


def split_step_lines(module: cst.Module, ctx) -> cst.Module:
    """(A pass of its own before the training pass.) A line of several statements outside the classes (a notebook's
    ``l = crit(model(x), y); opt.zero_grad(); l.backward(); opt.step()``) that holds a training step's piece (a call
    of backward / step / zero_grad, or of a top-level function of the file that steps an optimizer) → one statement
    per line, the shape the training pass reads (the same statements, run in the same order)."""
    text = ctx.analyses["parsed"][1] if "parsed" in ctx.analyses else module.code
    if not re.search(r"\.(?:backward|step)\s*\(", text):
        return module
    steppers = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)
                and any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "step" for c in find_all(s, cst.Call))}
    return rewrite(module, _SplitStepLines(steppers))


class _SplitStepLines(cst.CSTTransformer):
    def __init__(self, steppers: set[str]):
        super().__init__()
        self.steppers = steppers

    def visit_ClassDef(self, node) -> bool:
        return False

    def piece(self, small) -> bool:
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return False
        f = small.value.func
        return isinstance(f, cst.Attribute) and f.attr.value in _STEP_METHODS \
            or isinstance(f, cst.Name) and f.value in self.steppers

    def split(self, body: list) -> list:
        return [x for st in body for x in (_one_per_line([st]) if isinstance(st, cst.SimpleStatementLine)
                                           and any(self.piece(y) for y in st.body) else [st])]

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self.split(list(updated.body)))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self.split(list(updated.body)))


def hoist_stateful_calls(module: cst.Module, ctx) -> cst.Module:
    """(A pass of its own before the training pass, whose input it makes: findings are located in it.) The names
    of the models that keep a layer state, each its state's name (state.STATE_NAMES), and their calls inside
    larger expressions moved to statements of their own (_HoistModelCalls)."""
    plans = ctx.analyses.get(PLANS, {})
    if not plans:
        return module
    ctors, _ = state.stateful_ctors(module, ctx, plans)
    stateful: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef):
            continue
        for a in _walk_assigns(stmt):  # (as the training pass finds them: `model = Net(...).to(device)`)
            value = a.value
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                    and value.func.attr.value in ("to", "cuda", "cpu"):
                value = value.func.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and (
                    value.func.value in plans and plans[value.func.value]["stateful"] or value.func.value in ctors):
                stateful.update(n for t in a.targets for n in target_names(t.target))
    if not stateful:
        return module
    used = {n.value for n in find_all(module, cst.Name)}
    shared: set[str] = set()  # models made in a scope that makes another one keeping a state
    for scope in [module, *(f for f in find_all(module, cst.FunctionDef))]:
        made = {n for a in _scope_assigns(scope) for t in a.targets for n in target_names(t.target)} & stateful
        if len(made) > 1:
            shared |= made
    ctx.analyses[state.STATE_NAMES] = state.state_names(stateful, shared, used)
    hoist = _HoistModelCalls(stateful, used)
    module = rewrite(module, hoist)
    ctx.analyses[HOISTED] = hoist.temps
    return module


class _HoistModelCalls(cst.CSTTransformer):
    """Outside the classes, a call of a model that keeps a layer state inside a larger expression
    (``real_loss = adversarial_loss(discriminator(real_imgs), valid)``) → its own statement above,
    ``discriminator_out = discriminator(real_imgs)`` (the pass then writes ``discriminator_out, state =
    jax.vmap(...)(real_imgs, state)``), the expression reading ``discriminator_out``. The calls move in the
    order Python evaluates them; not out of a lambda, a comprehension, a conditional expression or an
    and/or (evaluated maybe never, or more than once), nor from a statement that is not a simple one: those
    keep the error."""

    def __init__(self, stateful: set[str], used: set[str]):
        super().__init__()
        self.stateful, self.used = stateful, used
        self.hoisted: list[cst.BaseStatement] = []
        self.lazy = 0  # depth in lambdas, comprehensions, conditional expressions, and/or
        self.classes = 0
        self.whole: set[int] = set()  # calls that are a plain assignment's whole value (`y = model(x)`)
        self.stmt = 0  # depth in simple statements
        self.temps: set[str] = set()  # the names the hoisted calls are assigned to

    def _lazy_in(self, node) -> None:
        self.lazy += 1

    def _lazy_out(self, original, updated):
        self.lazy -= 1
        return updated

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_IfExp = _lazy_in
    visit_BooleanOperation = _lazy_in
    leave_Lambda = leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = leave_IfExp = _lazy_out
    leave_BooleanOperation = _lazy_out

    def visit_ClassDef(self, node) -> None:
        self.classes += 1

    def leave_ClassDef(self, original, updated):
        self.classes -= 1
        return updated

    def visit_SimpleStatementLine(self, node) -> None:
        self.stmt += 1
        small = node.body[0] if len(node.body) == 1 else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            self.whole.add(id(small.value))

    def _temp(self, model: str) -> str:
        name, i = f"{model}_out", 2
        while name in self.used:
            name, i = f"{model}_out{i}", i + 1
        self.used.add(name)
        return name

    def leave_Call(self, original, updated):
        if self.classes or self.lazy or not self.stmt or id(original) in self.whole \
                or not (isinstance(original.func, cst.Name) and original.func.value in self.stateful):
            return updated
        temp = self._temp(original.func.value)
        self.temps.add(temp)
        self.hoisted.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(temp))], updated)]))
        return cst.Name(temp)

    def leave_SimpleStatementLine(self, original, updated):
        self.stmt -= 1
        hoisted, self.hoisted = self.hoisted, []
        if not hoisted:
            return updated
        hoisted[0] = hoisted[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel([*hoisted, updated.with_changes(leading_lines=[])])


def _bare_layers(module: cst.Module, ctx) -> set[str]:
    """``model = nn.Linear(1, 1)`` outside the classes (and the builder functions modules.py keys): the name is a
    model, called per example (jax.vmap) like an instance of a module class, and its construction gets a key
    (modules.finish, BARE_LAYERS). Layers nested in a larger expression there (``nn.Sequential(nn.Linear(...),
    ...)``) would each need a key of their own, which fwport does not split: an error says what to write."""
    builders = ctx.analyses.get(OUTSIDE, {}).get("builders", set())
    found: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) or isinstance(stmt, cst.FunctionDef) and stmt.name.value in builders:
            continue
        for a in _walk_assigns(stmt):
            value = a.value
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                    and value.func.attr.value in ("to", "cuda", "cpu"):
                value = value.func.value
            q = ctx.imports.resolve(value.func) if isinstance(value, cst.Call) else None
            names = [t.target.value for t in a.targets if isinstance(t.target, cst.Name)]
            if q is None or not q.startswith("torch.nn.") or not (len(a.targets) == len(names) == 1):
                continue  # (`self.body = nn.Sequential(...)` in a class nested in a function: not a script's model)
            nested = [c for c in find_all(value, cst.Call) if c is not value
                      and keyed_layer(ctx.imports.resolve(c.func) or "", ctx)]
            if nested and _layer_sequence(value, q, ctx):  # D = nn.Sequential(nn.Linear(...), nn.LeakyReLU(0.2), ...)
                found.add(names[0])
                ctx.report(Severity.INFO, "key-added", f"{names[0]} = nn.Sequential(...) → eqx.nn.Sequential([...]): each "
                           "layer that draws its initial parameters takes a key, split from the scope's root key where "
                           "torch.manual_seed made one above it, else from jax.random.key(0); it is called per example "
                           f"(jax.vmap({names[0]})(x))", value)
                continue
            if nested:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{q.replace('torch.nn.', 'nn.')}(...) of layers "
                           "built outside a module class: each Equinox layer takes a key when it is made, and one "
                           "example per call: write it as an nn.Module class (fwport then splits a key per layer and "
                           "calls it with jax.vmap), or give each layer key= (split from one jax.random.key) and call "
                           "it as jax.vmap(model)(x)", value)
                continue
            if keyed_layer(q, ctx):
                found.add(names[0])
    if found:
        ctx.analyses[BARE_LAYERS] = found
    return found


def _layer_sequence(value: cst.Call, q: str, ctx) -> bool:
    """``nn.Sequential(<layer>, ...)`` whose members are each a torch.nn layer call with a rule (its arguments holding
    no further layer): modules.finish gives each member that draws a key split from one (_RootKey)."""
    if q != "torch.nn.Sequential" or not value.args or any(a.keyword is not None or a.star for a in value.args):
        return False
    for a in value.args:
        m = a.value
        mq = ctx.imports.resolve(m.func) if isinstance(m, cst.Call) else None
        if not mq or not mq.startswith("torch.nn.") or mq == "torch.nn.Sequential" or mq not in ctx.pack.by_name \
                or any(isinstance(c, cst.Call) and (ctx.imports.resolve(c.func) or "").startswith("torch.nn.")
                       for x in m.args for c in find_all(x.value, cst.Call)):
            return False
    return True


def _walk_assigns(node):
    return find_all(node, cst.Assign)


class _ScopeAssigns(cst.CSTVisitor):
    # (a class of the module, not of each call: creating a visitor class costs several times its walk)
    def __init__(self, scope) -> None:
        super().__init__()
        self.scope = scope
        self.found: list[cst.Assign] = []

    def visit_Assign(self, n: cst.Assign) -> None:
        self.found.append(n)

    def visit_FunctionDef(self, n) -> bool:
        return n is self.scope

    def visit_ClassDef(self, n) -> bool:
        return False

    # (no hook on an expression, a lambda's included, which holds no assignment: scan does not enter them)


def _scope_assigns(scope) -> list[cst.Assign]:
    """The assignments of one scope (a function's body, or a module outside its functions and classes).
    Asked of the same scope again and again: the answer is kept by its identity (the scope held with it;
    a node never changes), a new list returned."""
    hit = _SCOPE_ASSIGNS.get(id(scope))
    if hit is not None and hit[0] is scope:
        return list(hit[1])
    v = _ScopeAssigns(scope)
    scan(scope, v)
    if len(_SCOPE_ASSIGNS) >= 256:
        _SCOPE_ASSIGNS.clear()
    _SCOPE_ASSIGNS[id(scope)] = (scope, tuple(v.found))
    return v.found


_SCOPE_ASSIGNS: dict[int, tuple] = {}


class _VmapModel(cst.CSTTransformer):
    """``model(x, ...)`` → ``jax.vmap(model)(x, ...)``; with ``split`` (a model drawing random numbers):
    ``jax.vmap(model)(x, ..., key=jax.random.split(key, x.shape[0]))``, one key per example."""

    def __init__(self, model: str, vmap: str, split: str | None = None, axes: str | None = None):
        super().__init__()
        self.model, self.vmap, self.split, self.axes = model, vmap, split, axes  # axes: "in_axes=..., out_axes=..."

    def leave_Call(self, original, updated):
        f = original.func
        vmapped = isinstance(f, cst.Call) and dotted_text(f.func) == self.vmap and (len(f.args) == 1 or bool(
            self.axes) and ", ".join(code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in f.args[1:]) == self.axes) \
            and isinstance(f.args[0].value, cst.Name) and f.args[0].value.value == self.model  # (the pass's)
        if isinstance(f, cst.Name) and f.value == self.model or vmapped:
            axes = f", {self.axes}" if self.axes else ""
            out = updated.with_changes(func=parsed_expression(f"{self.vmap}({self.model}{axes})"))
            if self.split is not None and original.args:  # the step's key replaces the scope's (call_key)
                out = out.with_changes(args=[a for a in out.args if not (a.keyword and a.keyword.value == "key")])
                first = re.match(r"in_axes=\(?(\d+)", self.axes or "")  # the first input's batch axis
                keys = parsed_expression(f"{self.split}(key, {code(original.args[0].value)}.shape["
                                         f"{first.group(1) if first else 0}])")
                args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in out.args]
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                out = out.with_changes(args=[*args, cst.Arg(keys, keyword=cst.Name("key"), equal=cst.AssignEqual(
                    cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
            return out
        return updated


class _KeyModel(cst.CSTTransformer):
    """``model(...)`` → ``model(..., key=key)``: the step's key for the model's dropout."""

    def __init__(self, model: str):
        super().__init__()
        self.model = model

    def leave_Call(self, original, updated):
        if isinstance(original.func, cst.Name) and original.func.value == self.model:
            updated = updated.with_changes(args=[a for a in updated.args if not (a.keyword and a.keyword.value == "key")])
            return updated.with_changes(args=[*updated.args, cst.Arg(cst.Name("key"), keyword=cst.Name("key"),
                                                                     equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        return updated


class _Finish(cst.CSTTransformer):
    def __init__(self, ctx, optimizers: dict):
        super().__init__()
        self.ctx = ctx
        self.optimizers = dict(optimizers)
        self.module_names: set[str] = set()
        self.scopes: list[cst.FunctionDef] = []
        self.threaded: dict[str, dict] = ctx.analyses.get(THREADED, {})
        self.threaded_done: dict[str, dict] = {}  # those whose loop became a train_step call
        self.pending_fn: dict[str, list] = {}  # function → its train_step definition, placed by leave_FunctionDef
        self.before_fn: dict[str, list] = {}  # step function → its train_step definition, placed above it
        self.whole: set[str] = ctx.analyses.get(WHOLE, set())  # models called without jax.vmap
        self.global_trained: dict[str, dict] = ctx.analyses.get(GLOBAL_TRAINED, {})
        self.after_init: dict[str, list] = {}  # module-level optimizer → the train_step written after its opt_state
        self.globals: dict[str, set] = {k: set(v) for k, v in ctx.analyses.get(GLOBALS, {}).items()}
        self.acc_inits: set[int] = set()  # the `grads_acc = None` written before a loop accumulating gradients
        self.loop_depth: list[int] = [0]  # per scope (the module, each function): the loops enclosing the visit
        self.in_class = 0
        self.straight_calls: set[int] = set()  # ids of the train_step calls of straight-line steps (straight)

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node
        for a in _walk_assigns(node):  # `optimizer = model.configure_optimizers(...)`: an optimizer over model's parameters
            m = _method_optimizer(self.ctx, a.value)
            if m is not None:
                self.optimizers[code(a.value)] = m
        for s in node.body:
            if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
                self.module_names.add(s.name.value)
            elif isinstance(s, cst.SimpleStatementLine):
                for small in s.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        for a in small.names if not isinstance(small.names, cst.ImportStar) else ():
                            self.module_names.add((dotted_text(a.asname.name) if a.asname else dotted_text(a.name)).split(".")[0])
                    elif isinstance(small, cst.Assign):
                        for t in small.targets:
                            self.module_names.update(target_names(t.target))
        self.module_names |= {"jax", "jnp", "eqx", "optax", "math"}
        # the helpers written into the file after this pass (layers.use: batch_merged), module-level functions too
        from fwport.packs.torch2jax import layers
        self.module_names |= {written.name(self.ctx, h) for h in self.ctx.analyses.get(layers._KEY, ())}
        # module-level names a module-level loop binds again (x = x * 0.5, x, y = next_batch()): a train_step reads
        # them as arguments, never as globals, which eqx.filter_jit keeps as they were when it traced the step
        self.rebound: set[str] = set()
        for s in node.body:
            if isinstance(s, (cst.For, cst.While)):
                v = _LocalNames(s, self.rebound)
                scan(s, v)
        self.rebound &= self.module_names
        # module-level names bound by more than one top-level statement (a notebook's next batch, `x = ...` again):
        # a straight-line step's train_step reads them as arguments too (eqx.filter_jit keeps a global as traced)
        counts: dict[str, int] = {}
        for s in node.body:
            if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
                continue
            bound: set[str] = set()
            scan(s, _LocalNames(s, bound))
            for n in bound:
                counts[n] = counts.get(n, 0) + 1
        self.rebound_twice = {n for n, k in counts.items() if k > 1} & self.module_names

        # every optimizer the rules translated, by the name it is assigned to (loops are rewritten
        # bottom-up, before the block that assigns their optimizer is seen)
        self.trained: dict[str, str] = {}
        self.pending: dict[str, list] = {}  # optimizer → its train_step definitions, placed by rewrite()
        source = self.ctx.analyses.get(OPT_MODELS, {})
        for s in _walk_assigns(node):
            text = code(s.value)
            if text in self.optimizers and self.optimizers[text] and len(s.targets) == 1 \
                    and isinstance(s.targets[0].target, cst.Name):
                name = s.targets[0].target.value  # two optimizers written alike: the model each one's source names
                self.trained[name] = source.get(name) or self.optimizers[text]
        # several optimizers trained in one scope (a GAN's generator and critic): a state and a step each
        self.suffix: dict[str, str] = {}
        for scope in [node, *(f for f in _functions(node))]:
            names = [t for a in _scope_assigns(scope) if code(a.value) in self.optimizers
                     for t in (n.target.value for n in a.targets if isinstance(n.target, cst.Name)) if t in self.trained]
            if len(set(names)) > 1:
                for n in names:
                    self.suffix[n] = re.sub(r"_?optim(izer)?_?", "", n) or n

    def visit_FunctionDef(self, node) -> None:
        self.scopes.append(node)
        self.loop_depth.append(0)

    def visit_ClassDef(self, node) -> None:
        self.in_class += 1

    def leave_ClassDef(self, original, updated):
        self.in_class -= 1
        return updated

    def one_step(self, fn) -> bool:
        """Whether ``fn`` (being visited) is a top-level function that is one step (its body rewritten as a loop's)."""
        name = fn.name.value
        return len(self.scopes) == 1 and self.scopes[0] is fn and (
            self.threaded.get(name, {}).get("step") or self.global_trained.get(name, {}).get("step"))

    def leave_FunctionDef(self, original, updated):
        name = updated.name.value
        self.loop_depth.pop()
        if len(self.scopes) == 1 and (self.threaded.get(name, {}).get("step")
                                      or self.global_trained.get(name, {}).get("step")):
            updated = self.loop(updated)  # a function that is one step: its body is rewritten as a loop's
        self.scopes.pop()
        if name in self.globals and not self.scopes:
            updated = _declare_global(updated, self.globals.pop(name))
        if name not in self.pending_fn or self.scopes:
            return updated
        info = self.threaded_done[name]
        body = list(updated.body.body)
        if info["step"]:  # the train_step goes above the function (one jit for every call)
            self.before_fn[name] = self.pending_fn.pop(name)
        else:
            at = next(i for i, st in enumerate(body) if isinstance(st, (cst.For, cst.While)))
            if not body[at].leading_lines:
                body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
            body[at:at] = self.pending_fn.pop(name)
        body.append(parsed_statement(f"return {info['model']}, opt_state\n"))
        params = list(updated.params.params)
        i = next(k for k, p in enumerate(params) if p.name.value == info["opt"])
        params.insert(i + 1, cst.Param(cst.Name("opt_state"), comma=params[i].comma))
        params[i] = params[i].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        new_params = updated.params.with_changes(params=params)
        if info.get("keyed"):  # the key its train_step splits per step, given by each caller (key=...)
            if any(p.default is not None for p in params) or isinstance(new_params.star_arg, cst.Param):
                # after a parameter with a default (print_every=10): keyword-only
                star = new_params.star_arg if isinstance(new_params.star_arg, cst.Param) else cst.ParamStar()
                new_params = new_params.with_changes(star_arg=star, kwonly_params=[*new_params.kwonly_params,
                                                                                  cst.Param(cst.Name("key"))])
            else:
                params[-1] = params[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                new_params = new_params.with_changes(params=[*params, cst.Param(cst.Name("key"))])
        return updated.with_changes(body=updated.body.with_changes(body=body), params=new_params)

    def in_scope(self, opt: str) -> bool:
        """Whether the scope being visited assigns the optimizer ``opt`` itself (its opt_state is there)."""
        scope = self.scopes[-1] if self.scopes else self.module
        return any(code(a.value) in self.optimizers and any(opt in target_names(t.target) for t in a.targets)
                   for a in _scope_assigns(scope))

    def visit_For(self, node) -> None:
        self.loop_depth[-1] += 1

    def visit_While(self, node) -> None:
        self.loop_depth[-1] += 1

    def leave_For(self, original, updated):
        self.loop_depth[-1] -= 1
        return self.loop(updated)

    def leave_While(self, original, updated):
        self.loop_depth[-1] -= 1
        return self.loop(updated)

    def leave_IndentedBlock(self, original, updated):
        body = list(updated.body)
        if not self.in_class and not self.loop_depth[-1] and not (self.scopes and self.scopes[-1].body is original
                                                                  and self.one_step(self.scopes[-1])):
            body = self.straight(body)
        return updated.with_changes(body=self.rewrite(body))

    def straight(self, body: list) -> list:
        """A block's straight-line steps (_straight_segments; checked by the training pass's check_straight) of an
        optimizer this scope creates → one train_step call each, as a loop's (step); the train_step is defined
        above the first statement holding a call of it (rewrite), a root key made above the call where the step takes
        a key and the scope has none."""
        if not any(_backward(st) for st in body):
            return body
        out, at = [], 0
        for first, end in _straight_segments(body, self.trained):
            seg = body[first:end]
            plan = _loop_plan(seg)
            if plan is None or len([st for st in seg if _backward_with_args(st)]) != 1:
                continue
            done = self.step(seg, plan, nested=True, straight=True)
            if done is None:
                continue
            new, rooted = done
            calls = [st for st in new if st not in seg]
            self.straight_calls.update(id(st) for st in calls)
            if rooted and calls:
                k = next(i for i, st in enumerate(new) if st is calls[0])
                new = [*new[:k], parsed_statement(f"key = {self.spell('jax.random.key')}(0)\n"), *new[k:]]
            out += body[at:first] + new
            at = end
        return out + body[at:] if out else body

    def holds_step_call(self, s) -> bool:
        """Whether statement ``s`` is, or holds, the train_step call of a straight-line step (straight)."""
        if not self.straight_calls:
            return False
        if id(s) in self.straight_calls:
            return True
        return not isinstance(s, cst.SimpleStatementLine) and any(
            id(x) in self.straight_calls for x in find_all(s, cst.SimpleStatementLine))

    def leave_Module(self, original, updated):
        body = []
        for s in self.rewrite(self.straight(list(updated.body))):
            if isinstance(s, cst.FunctionDef) and s.name.value in self.before_fn:
                body += self.before_fn.pop(s.name.value)
                s = s.with_changes(leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)])
            body.append(s)
        return updated.with_changes(body=body)

    def rewrite(self, body: list) -> list:
        """After each optimizer: its state's initialisation; before the first loop that follows it:
        the train_step its loops call. An epoch scheduler's statements go (_schedules), its schedule
        becoming the optimizer's learning rate."""
        out = []
        waiting: list = []
        scope = self.scopes[-1].name.value if len(self.scopes) == 1 else "" if not self.scopes else None
        schedules = {opt: v for (sc, opt), v in self.ctx.analyses.get(SCHEDULES, {}).items() if sc == scope}
        scheds = {v["sched"] for v in schedules.values()}
        carried: list = []  # the leading lines (comments) of a removed statement, for the next one
        body = [x for s in body for x in (_one_per_line([s]) if isinstance(s, cst.SimpleStatementLine) and len(s.body) > 1
                                          and any(isinstance(small, cst.Assign) and code(small.value) in self.optimizers
                                                  for small in s.body) else [s])]  # (`crit = ...; opt = ...`: its state after it)
        for k, s in enumerate(body):
            if scheds and (_method_stmt(s, "step") in scheds or any(_assigns(s, n) for n in scheds)):
                carried += list(s.leading_lines)
                continue
            if _zero_grad(s) and k + 1 < len(body) and id(body[k + 1]) in self.acc_inits:
                carried += list(s.leading_lines)  # (grads_acc = None in its place)
                continue
            if carried:
                s = s.with_changes(leading_lines=[*carried, *s.leading_lines])
                carried = []
            written = s  # (the optimizer as the rules wrote it: self.optimizers)
            if _is_assign(s) and len(s.body[0].targets) == 1 and isinstance(s.body[0].targets[0].target, cst.Name) \
                    and s.body[0].targets[0].target.value in schedules and isinstance(s.body[0].value, cst.Call):
                s = _with_schedule(s, schedules[s.body[0].targets[0].target.value]["schedule"])
            if waiting and (isinstance(s, (cst.For, cst.While)) or self.holds_step_call(s)):
                out += waiting
                waiting = []
                if not s.leading_lines:
                    s = s.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
            out.append(s)
            if _is_assign(written) and code(written.body[0].value) in self.optimizers and len(s.body[0].targets) == 1 \
                    and isinstance(s.body[0].targets[0].target, cst.Name):
                opt = s.body[0].targets[0].target.value
                model = self.trained.get(opt)
                if model:
                    out.append(parsed_statement(
                        f"{self.state(opt)} = {opt}.init({self.spell('equinox.filter')}({model}, {self.spell('equinox.is_array')}))\n"))
                    out += self.after_init.pop(opt, [])
                    waiting += self.pending.pop(opt, [])
        return out + waiting

    def spell(self, name: str) -> str:
        return self.ctx.spell_text(name)

    def state(self, opt: str) -> str:
        """The optimizer state's name: opt_state, or opt_state_D beside another optimizer's in one scope."""
        return f"opt_state_{self.suffix[opt]}" if opt in self.suffix else "opt_state"

    def step_name(self, opt: str) -> str:
        return f"train_step_{self.suffix[opt]}" if opt in self.suffix else "train_step"

    def loop(self, loop):
        """The loop's own step (zero_grad, the loss, backward and step at its level) and the steps of the ``if`` /
        ``with`` blocks at its level (_block_plan), each one call of its train_step."""
        body = list(loop.body.body)
        manual = _manual_plan(body) if self.ctx.analyses.get(MANUAL) else None
        written = self.manual_step(body, *manual) if manual is not None else None
        if written is not None:
            new_body, step_fn = written
            new_loop = loop.with_changes(body=loop.body.with_changes(body=new_body),
                                         leading_lines=[cst.EmptyLine(indent=False)])
            return cst.FlattenSentinel([step_fn.with_changes(leading_lines=loop.leading_lines or [cst.EmptyLine(indent=False)]),
                                        new_loop])
        plans = _sequential_plans(body)
        acc = _accumulated(body) if not plans and self.ctx.analyses.get(ACCUMULATED) else None
        if acc is not None and (self.scopes[0].name.value if self.scopes else "", acc["opt"]) \
                in self.ctx.analyses[ACCUMULATED]:
            body = acc["body"]
            plans = [(body, acc["plan"])]
        else:
            acc = None
        done = self.step(body, plans[0][1], accumulate=acc["cond"] if acc else None) if plans else None
        rooted = False
        if done is not None:
            body, rooted = done
            for rest, plan in plans[1:]:  # the steps after it (a GAN's discriminator step after its generator's)
                at = next((i for i, st in enumerate(body) if st is rest[0]), None)
                later = self.step(body[at:], plan) if at is not None else None
                if later is None:
                    break
                body = body[:at] + later[0]
                rooted = rooted or later[1]
        body, nested_rooted, changed = self.block_steps(body)
        if done is None and not changed:
            return loop
        new_loop = loop.with_changes(body=loop.body.with_changes(body=body))
        first = []
        if acc is not None and done is not None:  # no gradients added up yet (PyTorch's zero_grad() before the loop)
            first.append(parsed_statement(f"{GRADS_ACC} = None\n"))
        if rooted or nested_rooted:  # a root key of its own, before the loop (the training pass reported it)
            first.append(parsed_statement(f"key = {self.spell('jax.random.key')}(0)\n"))
        if first:
            first[0] = first[0].with_changes(leading_lines=loop.leading_lines)
            if acc is not None and done is not None:
                self.acc_inits.add(id(first[0]))
            return cst.FlattenSentinel([*first, new_loop.with_changes(leading_lines=[])])
        return new_loop

    def manual_step(self, body: list, plan, delta: str) -> tuple[list, cst.CSTNode] | None:
        """A loop stepping by hand that the training pass checked (MANUAL): (its body with the step as one call of
        ``sgd_step``, that function's definition, placed before the loop). The step: the loss statements in loss_fn,
        eqx.filter_value_and_grad, the gradient clipping where asked, and ``eqx.apply_updates`` of the update mapped
        over the gradients (jax.tree_util.tree_map); the update's names (the learning rate) are arguments, read at
        each call as PyTorch reads them at each update."""
        model, loss, start, back, update, between = plan
        scope = self.scopes[-1].name.value if self.scopes else ""
        if (scope, model, loss) not in self.ctx.analyses.get(MANUAL, set()) \
                or _loop_problem(body, plan, model, self.ctx.imports.resolve) is not None:
            return None
        zero = next(i for i, s in enumerate(body) if _method_stmt(s, "zero_grad") == model)
        parts = _step_parts(body, plan, model, self.ctx.imports.resolve)
        if parts is None:
            return None
        block, before, clip, between, names, first = parts
        own = {n for a in _scope_assigns(self.scopes[-1] if self.scopes else self.module) for t in a.targets
               for n in target_names(t.target) if hasattr(builtins, n)}
        inputs = [n for n in names.loaded if first.get(n) != "store" and n != model
                  and (n not in self.module_names or n in names.stored or n in self.rebound)
                  and (not hasattr(builtins, n) or n in own)]
        rates = []
        for n in find_all(parsed_expression(delta), cst.Name):
            if n.value != "g" and n.value not in rates and n.value not in inputs:
                rates.append(n.value)
        aux = _step_outputs(body, plan, model)
        f = self.spell
        if model in self.whole:
            moved = list(block)
        else:
            moved = [rewrite(s, _VmapModel(model, f("jax.vmap"), None, self.ctx.analyses.get(VMAP_AXES, {}).get(model)),
                             fresh=True) for s in block]
        _return_loss(moved, loss, f", {aux[0] if len(aux) == 1 else '(' + ', '.join(aux) + ')'}" if aux else "")
        clipped = []
        clip_text = ""
        if clip is not None:
            _, max_norm, cond = clip[1]
            clipped = [("max_grad_norm", code(max_norm) if cond is None else f"{_paren(max_norm)} if {code(cond)} else None")]
            indent = "    " if cond is None else "        "
            clip_text = ("" if cond is None else "    if max_grad_norm is not None:\n") + (
                f"{indent}grad_norm = {f('optax.global_norm')}(grads)\n"
                f"{indent}grads = {f('jax.tree_util.tree_map')}(lambda g: g * {f('jax.numpy.minimum')}(1.0, max_grad_norm "
                f"/ (grad_norm + 1e-6)), grads)\n")
        taken = self.module_names | _local_names(self.scopes[-1] if self.scopes else self.module)
        name = "sgd_step" if "sgd_step" not in taken else f"sgd_step_{model}"
        params = ", ".join([model, *inputs, *rates, *(p for p, _ in clipped)])
        aux_text = (aux[0] if len(aux) == 1 else f"({', '.join(aux)})") if aux else ""
        jit, unjitted = _jit_lines(self.ctx, self.scopes[-1] if len(self.scopes) == 1 else None, model, f)
        text = (jit +
                f"def {name}({params}):\n" + unjitted +
                f"    def loss_fn({model}):\n"
                f"        pass\n\n"
                + (f"    ({loss}, {aux_text}), grads = {f('equinox.filter_value_and_grad')}(loss_fn, has_aux=True)({model})\n"
                   if aux else f"    {loss}, grads = {f('equinox.filter_value_and_grad')}(loss_fn)({model})\n")
                + clip_text +
                f"    {model} = {f('equinox.apply_updates')}({model}, {f('jax.tree_util.tree_map')}(lambda g: {delta}, grads))\n"
                f"    return {', '.join([model, loss, *aux])}\n")
        step_fn = parsed_statement(text)
        inner = step_fn.body.body[0]
        inner = inner.with_changes(body=inner.body.with_changes(body=moved))
        step_fn = step_fn.with_changes(body=step_fn.body.with_changes(body=[inner, *step_fn.body.body[1:]]))
        call = parsed_statement(f"{', '.join([model, loss, *aux])} = {name}"
                                f"({', '.join([model, *inputs, *rates, *(v for _, v in clipped)])})\n")
        return _step_body(body, zero, start, update, before + [call], between), step_fn

    def joint_step(self, body: list, plan, others: tuple) -> tuple[list, bool] | None:
        """A loss several optimizers step on (JOINT, checked by the training pass): its step as one call of a
        train_step whose loss_fn takes the models as one tuple, differentiated together (eqx.filter_value_and_grad),
        each model then updated by its own optimizer from its own gradients."""
        opts = [plan[0], *others]
        groups = [model_group(self.trained.get(o)) for o in opts]  # the models each optimizer updates
        models = [m for g in groups for m in g]
        if any(not g for g in groups) or not all(self.in_scope(o) for o in opts):
            return None
        body = _without_steps(body, others)
        plan = _loop_plan(body)
        if plan is None or plan[0] != opts[0] or _loop_problem(body, plan, models[0], self.ctx.imports.resolve):
            return None
        opt, loss, start, back, step, between = plan
        zero = next(i for i, s in enumerate(body) if _method_stmt(s, "zero_grad") == opt)
        block, before = _split_block(body, plan, tuple(models))
        names, first = _Names(), {}
        for s in block:
            scan(s, names)
            _first_uses(s, first)
        fn = self.scopes[-1] if len(self.scopes) == 1 else None
        scope = self.scopes[-1] if self.scopes else self.module
        own = {n for a in _scope_assigns(scope) for t in a.targets for n in target_names(t.target) if hasattr(builtins, n)}
        local = {p.name.value for p in fn.params.params} | _local_names(fn) if fn is not None else set()
        trained = {m for v in self.trained.values() for m in model_group(v)}
        inputs = [n for n in names.loaded if first.get(n) != "store" and n not in models
                  and (n not in self.module_names or n in trained or n in names.stored or n in self.rebound or n in local)
                  and (not hasattr(builtins, n) or n in own)]
        kept = self.ctx.analyses.get(STATE_KEPT, ())
        for m in models:  # a model's call repeated in the loss reads its layer state (BatchNorm's)
            if m in self.ctx.analyses.get(STATEFUL, ()) and any(s is k for s in block for k in kept) \
                    and _state_name(self.ctx, m) not in inputs:
                inputs.append(_state_name(self.ctx, m))
        aux = _step_outputs(body, plan, tuple(models))
        aux_text = (aux[0] if len(aux) == 1 else f"({', '.join(aux)})") if aux else ""
        # values the loss reads and assigns again (the layer state): loss_fn's parameters after the models, not
        # differentiated (eqx.filter_value_and_grad: the first argument only)
        carried = "".join(f", {n}" for n in aux if first.get(n) == "load")
        f = self.spell
        moved = list(block)
        for m in models:
            moved = [rewrite(s, _VmapModel(m, f("jax.vmap"), None, self.ctx.analyses.get(VMAP_AXES, {}).get(m)),
                             fresh=True) for s in moved]
        moved, items = _traced_items(moved)
        _return_loss(moved, loss, f", {aux_text}" if aux else "")
        taken = {*names.loaded, *names.stored}
        tup = next(n for n in ("models", "trained_models", "models_") if n not in taken)
        moved.insert(0, parsed_statement(f"{', '.join(models)} = {tup}\n"))
        states = [self.state(o) for o in opts]
        step_name = "train_step_" + "_".join(self.suffix.get(o, o) for o in opts)
        traced = _traced_counters(scope, block, inputs, loss)
        passed = [f"{f('jax.numpy.asarray')}({n})" if n in traced else n for n in inputs]
        grads = [f"grads_{m}" for m in models]
        jit, unjitted = _jit_lines(self.ctx, fn, opt, f)
        value = f"({loss}, {aux_text})" if aux else loss
        text = (jit + f"def {step_name}({', '.join([*models, *states, *inputs])}):\n" + unjitted +
                f"    def loss_fn({tup}{carried}):\n"
                f"        pass\n\n"
                f"    {value}, ({', '.join(grads)}) = {f('equinox.filter_value_and_grad')}(loss_fn"
                f"{', has_aux=True' if aux else ''})(({', '.join(models)}){carried})\n"
                + "".join(_joint_update(o, g, st, f) for o, g, st in zip(opts, groups, states))
                + f"    return {', '.join([*models, *states, loss, *aux])}\n")
        step_fn = parsed_statement(text)
        inner = step_fn.body.body[0]
        inner = inner.with_changes(body=inner.body.with_changes(body=moved))
        step_fn = step_fn.with_changes(body=step_fn.body.with_changes(body=[inner, *step_fn.body.body[1:]]),
                                       leading_lines=[cst.EmptyLine(indent=False)])
        call = [parsed_statement(f"{', '.join([*models, *states, loss, *aux])} = {step_name}"
                                 f"({', '.join([*models, *states, *passed])})\n")]
        call += [parsed_statement(f"{n} = {n}.item()\n") for n in items if n in aux]
        new_body = _step_body(body, zero, start, step, before + call, between)
        # written after the last of the optimizers the scope creates (the step reads them all)
        order = [t for a in _scope_assigns(scope) for t in a.targets for t in target_names(t.target)]
        last_made = max(opts, key=lambda o: max((i for i, n in enumerate(order) if n == o), default=-1))
        waiting = self.pending.setdefault(last_made, [])
        same = [s for s in waiting if isinstance(s, cst.FunctionDef) and s.name.value == step_name]
        if same and code(same[0]) != code(step_fn):
            return None  # the training pass reported why (check_joint)
        if not same:
            waiting.append(step_fn)
        return new_body, False

    def block_steps(self, body: list) -> tuple[list, bool, bool]:
        """A step inside an ``if`` / ``with`` block at the loop's level (a GAN's generator step under ``if i %
        n_critic == 0:``) → its own train_step, called in the block; the optimizer's zero_grad() may sit before the
        block at the loop's level (it is removed). Only for an optimizer created in the scope being visited."""
        rooted = changed = False
        drop: set[int] = set()
        for i, s in enumerate(body):
            found = _block_plan(body, i)
            if found is None:
                continue
            inner, outer_zero, plan = found
            if not (plan[0] in self.trained and self.in_scope(plan[0])):
                continue
            done = self.step(inner, plan, nested=True)
            if done is None:
                continue
            new_inner, r = done
            rooted, changed = rooted or r, True
            body[i] = s.with_changes(body=s.body.with_changes(body=new_inner))
            if outer_zero is not None:
                drop.add(outer_zero)
        if drop:
            out, carried = [], []
            for i, s in enumerate(body):
                if i in drop:
                    carried += [ln for ln in s.leading_lines if ln.comment is not None]
                    continue
                if carried:
                    s = s.with_changes(leading_lines=[*carried, *s.leading_lines])
                    carried = []
                out.append(s)
            body = out
        return body, rooted, changed

    def step(self, body: list, plan=None, nested: bool = False, accumulate=None,
             straight: bool = False) -> tuple[list, bool] | None:
        """The statements of ``body`` (a loop's, or an if / with block's with the zero_grad before it in front)
        with its step written as one train_step call, and whether a root key goes before the loop; None where
        it stays as written (the training pass reported why)."""
        plan = plan or _loop_plan(body)
        if plan is None:
            return None
        joint = self.ctx.analyses.get(JOINT, {}).get((self.scopes[-1].name.value if self.scopes else "", plan[0]))
        if joint is not None:
            return self.joint_step(body, plan, joint)
        fn = self.scopes[-1] if len(self.scopes) == 1 else None
        info = self.threaded.get(fn.name.value) if fn is not None and not nested else None
        glob = self.global_trained.get(fn.name.value) if fn is not None and not nested else None
        if info is not None and info["opt"] == plan[0] and fn.name.value not in self.pending_fn:
            model = info["model"]
            threaded = True
        elif glob is not None and glob["opt"] == plan[0] and plan[0] not in self.after_init:
            model = glob["model"]
            threaded = "global"
        elif plan[0] in self.trained and self.in_scope(plan[0]):
            model = self.trained[plan[0]]
            threaded = False
        else:
            return None
        opt, loss, start, back, step, between = plan
        zero = next(i for i, s in enumerate(body) if _method_stmt(s, "zero_grad") == opt)
        if not isinstance(parsed_expression(model), cst.Name) \
                or _loop_problem(body, plan, model, self.ctx.imports.resolve) is not None:
            return None  # the training pass reported why
        parts = _step_parts(body, plan, model, self.ctx.imports.resolve)  # the loss statements; those without
        if parts is None:  # the model stay
            return None
        block, before, clip, between, names, first = parts
        own = {p.name.value for p in fn.params.params} if threaded else set()  # parameters that shadow builtins (input)
        own |= {n for a in _scope_assigns(self.scopes[-1] if self.scopes else self.module) for t in a.targets
                for n in target_names(t.target) if hasattr(builtins, n)}  # and names the scope binds (input = ...)
        trained = {m for v in self.trained.values() for m in model_group(v)}  # another trained model (a GAN's critic in the generator's loss): an
        # argument, not a global the jit would keep as it was when traced
        # (a function's parameters and locals named like a module-level name are its own: arguments too)
        local = {p.name.value for p in fn.params.params} | _local_names(fn) if fn is not None else set()
        inputs = [n for n in names.loaded if first.get(n) != "store" and n != model
                  and (n not in self.module_names or n in trained or n in names.stored or n in self.rebound
                       or straight and n in self.rebound_twice or n in local)
                  and (not hasattr(builtins, n) or n in own)]
        kept = self.ctx.analyses.get(STATE_KEPT, ())
        if any(s is k for s in block for k in kept) and _state_name(self.ctx, model) not in inputs:
            inputs.append(_state_name(self.ctx, model))  # the model's call repeated in the loss reads its state
        aux = _step_outputs(body, plan, model)
        aux_text = (aux[0] if len(aux) == 1 else f"({', '.join(aux)})") if aux else ""
        # values the loss reads and assigns again (BatchNorm's state): loss_fn's parameters after the model (a name
        # it assigns is its own local), not differentiated (eqx.filter_value_and_grad: the first argument only)
        carried = "".join(f", {n}" for n in aux if first.get(n) == "load")
        step_fn_level = threaded is True and info.get("step")
        if step_fn_level:  # train_step is defined above the function: it takes the optimizer (static under jit)
            inputs = [opt, *[n for n in inputs if n != opt]]
        keyed = (fn.name.value if fn is not None else "", opt) in self.ctx.analyses.get(KEYED, ())
        split = self.spell("jax.random.split")
        if threaded is True and info.get("whole") or threaded is not True and model in self.whole:
            moved = [rewrite(s, _KeyModel(model), fresh=True) if keyed else s for s in block]  # a whole graph: no jax.vmap
        else:
            vmap = self.spell("jax.vmap")
            moved = [rewrite(s, _VmapModel(model, vmap, split if keyed else None,
                                           self.ctx.analyses.get(VMAP_AXES, {}).get(model)), fresh=True) for s in block]
        moved, items = _traced_items(moved)
        last = moved[-1].body[0]
        returned = f", {aux_text}" if aux else ""  # the values the code after the step reads (has_aux)
        if len(last.targets) == 1 and isinstance(last.targets[0].target, cst.Name):  # `return <loss>` at once
            moved[-1] = parsed_statement(f"return {code(last.value)}{returned}\n")
        elif _loss_of_vmapped_model(block[-1], model) and not (threaded is True and info.get("whole")
                                                                or threaded is not True and model in self.whole):
            # nanoGPT's `logits, loss = model(X, Y)`: the vmapped forward's loss is one per example (the mean over
            # its tokens, batch.py's warning): their mean is PyTorch's loss over the batch, the scalar differentiated
            moved.append(parsed_statement(f"return {self.spell('jax.numpy.mean')}({loss}){returned}\n"))
        else:
            moved.append(parsed_statement(f"return {loss}{returned}\n"))

        state, step_name = ("opt_state", "train_step") if threaded is True else (self.state(opt), self.step_name(opt))
        clipped = []  # (parameter, the value passed) of a gradient clipping: its max_norm, or None where not asked
        if clip is not None:
            _, max_norm, cond = clip[1]
            clipped = [("max_grad_norm", code(max_norm) if cond is None else
                        f"{_paren(max_norm)} if {code(cond)} else None")]
        acc_params = [GRADS_ACC, "apply"] if accumulate is not None else []
        acc_args = [GRADS_ACC, code(accumulate)] if accumulate is not None else []
        acc_out = [GRADS_ACC] if accumulate is not None else []
        params = ", ".join([model, "opt_state", *acc_params, *inputs, *(p for p, _ in clipped), *(["key"] if keyed else [])])
        traced = _traced_counters(self.scopes[-1] if self.scopes else self.module, block, inputs, loss)
        passed = [f"{self.spell('jax.numpy.asarray')}({n})" if n in traced else n for n in inputs]
        call_args = ", ".join([model, state, *acc_args, *passed, *(v for _, v in clipped), *(["step_key"] if keyed else [])])
        f = self.spell
        clip_text = ""
        if clipped:
            indent = "    " if clip[1][2] is None else "        "
            clip_text = ("" if clip[1][2] is None else "    if max_grad_norm is not None:\n") + (
                f"{indent}grad_norm = {f('optax.global_norm')}(grads)\n"
                f"{indent}grads = {f('jax.tree_util.tree_map')}(lambda g: g * {f('jax.numpy.minimum')}(1.0, max_grad_norm "
                f"/ (grad_norm + 1e-6)), grads)\n")
        jit, unjitted = _jit_lines(self.ctx, fn, opt, f)
        text = (jit +
                f"def {step_name}({params}):\n" + unjitted +
                f"    def loss_fn({model}{carried}):\n"
                f"        pass\n\n"
                + (f"    ({loss}, {aux_text}), grads = {f('equinox.filter_value_and_grad')}(loss_fn, has_aux=True)({model}{carried})\n"
                   if aux else f"    {loss}, grads = {f('equinox.filter_value_and_grad')}(loss_fn)({model})\n") +
                clip_text +
                (f"    if {GRADS_ACC} is not None:  # the gradients added up since the last update\n"
                 f"        grads = {f('jax.tree_util.tree_map')}({f('jax.numpy.add')}, {GRADS_ACC}, grads)\n"
                 f"    if not apply:\n"
                 f"        return {', '.join([model, 'opt_state', 'grads', loss, *aux])}\n"
                 if accumulate is not None else "") +
                f"    updates, opt_state = {opt}.update(grads, opt_state, {f('equinox.filter')}({model}, {f('equinox.is_array')}))\n"
                f"    {model} = {f('equinox.apply_updates')}({model}, updates)\n"
                f"    return {', '.join([model, 'opt_state', *(['None'] if accumulate is not None else []), loss, *aux])}\n")
        step_fn = parsed_statement(text)
        inner = step_fn.body.body[0]  # loss_fn: its body is the loss statements, as written (comments kept)
        inner = inner.with_changes(body=inner.body.with_changes(body=moved))
        step_fn = step_fn.with_changes(body=step_fn.body.with_changes(body=[inner, *step_fn.body.body[1:]]),
                                       leading_lines=[cst.EmptyLine(indent=False)])
        call = [parsed_statement(f"{', '.join([model, state, *acc_out, loss, *aux])} = {step_name}({call_args})\n")]
        call += [parsed_statement(f"{n} = {n}.item()\n") for n in items if n in aux]
        if keyed:  # a new key per step, split from the scope's (a threaded function's parameter, a global)
            call.insert(0, parsed_statement(f"key, step_key = {split}(key)\n"))
        new_body = _step_body(body, zero, start, step, before + call, between)
        if step_fn_level:
            step_fn = step_fn.with_changes(leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)])
        if keyed and threaded == "global":
            self.globals.setdefault(fn.name.value, set()).add("key")
        elif keyed and threaded:
            info = dict(info, keyed=True)
        rooted = keyed and not threaded and "key" not in _local_names(self.scopes[-1] if self.scopes else self.module)
        if threaded == "global":  # at module level, after the optimizer's state; the function rebinds both
            self.after_init[opt] = [step_fn.with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2)]
            self.globals.setdefault(fn.name.value, set()).update((model, state))
        elif threaded:
            self.pending_fn[fn.name.value] = [step_fn]
            self.threaded_done[fn.name.value] = info
        elif any(s.name.value == step_name for s in self.pending.get(opt, []) if isinstance(s, cst.FunctionDef)):
            # a second loop of the optimizer in this scope: the same step, called again
            if code(next(s for s in self.pending[opt] if isinstance(s, cst.FunctionDef)
                         and s.name.value == step_name)) != code(step_fn):
                return None  # the training pass reported why (check_plan)
        else:
            self.pending.setdefault(opt, []).append(step_fn)
        return new_body, rooted
