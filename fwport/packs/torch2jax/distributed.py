"""Single-host data-parallel scripts (torch.distributed with one process per GPU, torch.multiprocessing.spawn,
DistributedDataParallel, DistributedSampler) as ONE JAX process that drives every local device: a read-only
planner; the rule pass applies its edits. Each change is a warning (``single-process``): the translation runs
the script's work once, as PyTorch's run with world_size 1 does, and writes no data parallelism over several
devices (jax.sharding with a Mesh, or jax.pmap, is the way to add it).

Statements removed (one call on a line of its own):

- ``init_process_group(...)`` (not with a literal world_size above 1), ``destroy_process_group()``: JAX has no
  process group;
- ``torch.cuda.set_device(d)``, ``torch.accelerator.set_device_index(d)``: JAX puts arrays on its default device;
- ``all_reduce(t)`` / ``all_reduce(t, op=...)`` (not ``async_op=True``): over one process every reduction (sum,
  average, max, min, product) of a value is the value itself;
- ``m = DistributedDataParallel(m, ...)`` / ``m = nn.DataParallel(m)``: the model itself trains (elsewhere the call is its rule's: the module);
  ``m.module`` (the wrapped model) of a name or attribute DistributedDataParallel(...) is assigned to → ``m``;
- ``s = DistributedSampler(ds, ...)`` where ``s`` is read only as a DataLoader's ``sampler=s`` and by
  ``s.set_epoch(e)`` statements (removed too), and ``loader.sampler.set_epoch(e)`` statements in a file whose
  samplers all went: the DataLoader gets ``shuffle=`` the sampler's shuffle (True unless given) in place of its
  ``sampler=`` (and of its own falsy ``shuffle=``, which PyTorch requires beside a sampler). With one replica a
  DistributedSampler yields every index once (no padding, nothing dropped); shuffled, its order is PyTorch's
  permutation seeded by seed + epoch, the loader's is a numpy one: the same distribution, not the same order.

A sampler given a literal replica count other than 1, or read anywhere else (``len(sampler)``, ``sampler is None``
tests, a list of samplers), stays: its no-rule error says what to write. So do barrier, all_gather, broadcast and
the rest of torch.distributed, RPC, FSDP and tensor parallelism: their meaning is several processes'. In a file
that imports torch.distributed.rpc nothing is removed and mp.spawn is refused: its processes take roles by rank.
A removed statement that was the only one of its block becomes ``pass``."""
from __future__ import annotations

import libcst as cst

from fwport.core.direction import Trigger
from fwport.core.finding import Severity
from fwport.core.names import scan
from fwport.packs.torch2jax.registry import call_transform

#: (searched only in a text holding one of its words: most files hold none, and a regex scan of every position costs
#: a millisecond on a large file)
TRIGGER = Trigger(r"\bdistributed\b|\bDistributedDataParallel\b|\bDataParallel\b|\bDistributedSampler\b|\bset_device(?:_index)?\b"
                  r"|\bprocess_group\b|\ball_reduce\b", "distributed", "DataParallel", "DistributedSampler", "set_device",
                  "process_group", "all_reduce")
CODE = "single-process"
GIVEN_UP = ("data parallelism over several devices is not written (shard the batch over a jax.sharding.Mesh, "
            "or use jax.pmap, for that)")
PROCESS_GROUP = frozenset({"torch.distributed.init_process_group", "torch.distributed.destroy_process_group"})
SET_DEVICE = frozenset({"torch.cuda.set_device", "torch.accelerator.set_device_index"})
ALL_REDUCE = "torch.distributed.all_reduce"
DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                 "torch.nn.parallel.distributed.DistributedDataParallel",
                 # DataParallel: one process, the batch split over its GPUs
                 "torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                 "torch.nn.parallel.data_parallel.DataParallel"})
SAMPLER = frozenset({"torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler"})
LOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
#: every name this planner translates (bench/coverage.py counts them)
HANDLED = frozenset({*PROCESS_GROUP, *SET_DEVICE, ALL_REDUCE, *DDP, *SAMPLER})
#: DistributedSampler's parameters, in order (torch 2.x)
SAMPLER_PARAMS = ("dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last")


def uses_rpc(ctx) -> bool:
    """Whether the file imports torch.distributed.rpc: its processes take different roles by rank (a master, workers,
    a parameter server), which one process cannot play: nothing is removed or run once there."""
    return any(q == "torch.distributed.rpc" or q.startswith("torch.distributed.rpc.")
               for q in ctx.imports.aliases.values())


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _bind(call: cst.Call, params: tuple[str, ...]) -> dict[str, cst.BaseExpression] | None:
    """The call's arguments by parameter name; None where it has ``*``/``**`` or unknown keywords."""
    out: dict[str, cst.BaseExpression] = {}
    for i, a in enumerate(call.args):
        if a.star:
            return None
        name = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else None)
        if name is None or name not in params or name in out:
            return None
        out[name] = a.value
    return out


def _one_call(stmt) -> tuple[cst.BaseExpression | None, cst.Call] | None:
    """(the assigned target or None, the call) where ``stmt`` is one line holding one call or one assignment of
    a call to one target."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return None, small.value
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call):
        return small.targets[0].target, small.value
    return None


class _Scan(cst.CSTVisitor):
    """Collects the statements to remove and the samplers with their uses."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.removals: list[tuple[cst.BaseStatement, tuple, str]] = []  # (statement, its block's body, why)
        self.scopes: list[cst.CSTNode] = []
        self.names: dict[int, dict[str, int]] = {}  # scope id → Name value → occurrences in it (nested included)
        self.samplers: list[tuple[cst.CSTNode, str, cst.BaseStatement, tuple, cst.Call]] = []  # named ones
        self.epochs: list[tuple[cst.CSTNode, str, cst.BaseStatement, tuple]] = []  # (scope, receiver, stmt, body)
        self.loader_args: list[tuple[cst.CSTNode, cst.Call, cst.Arg]] = []  # (scope, loader call, sampler= arg)
        self.sampler_calls = 0  # every DistributedSampler call in the file
        self.labels: set[int] = set()  # ids of the Names that are keywords and attributes
        self.modules: list[cst.Attribute] = []  # every `X.module`
        self.wrapped: set[str] = set()  # the targets DistributedDataParallel(...) is assigned to

    # scopes: the module and each function (a name's uses are counted in every scope around them)
    def visit_Module(self, node: cst.Module) -> None:
        self.scopes.append(node)
        self.block(node.body)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.block(node.body)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.labels.add(id(node.keyword))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.labels.add(id(node.attr))
        if node.attr.value == "module":
            self.modules.append(node)

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self.labels:  # a keyword or an attribute's name, not a read of the variable
            return
        for s in self.scopes:
            counts = self.names.setdefault(id(s), {})
            counts[node.value] = counts.get(node.value, 0) + 1

    def visit_Call(self, node: cst.Call) -> None:
        q = self.ctx.imports.resolve(node.func)
        if q in SAMPLER:
            self.sampler_calls += 1
        elif q in LOADER:
            arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == "sampler"), None)
            if arg is not None:
                self.loader_args.append((self.scopes[-1], node, arg))

    def block(self, body) -> None:
        for st in body:
            found = _one_call(st)
            if found is None:
                continue
            target, call = found
            q = self.ctx.imports.resolve(call.func)
            if target is not None and q in DDP:
                self.wrapped.add(code(target))
            if target is None and q in PROCESS_GROUP and not self.fixed_size(call):
                name = q.rsplit(".", 1)[1]
                why = ("JAX has no process group: the translation runs as one process driving every local device "
                       f"(as PyTorch's run with world_size 1); {GIVEN_UP}") if name == "init_process_group" else \
                    "the one-process translation has no process group to destroy"
                self.removals.append((st, body, f"{code(call)}: removed: {why}"))
            elif target is None and q in SET_DEVICE:
                self.removals.append((st, body, f"{code(call)}: removed: JAX puts arrays on its default device "
                                      "(jax.devices()[0]); the one-process translation has no per-process device"))
            elif target is None and q == ALL_REDUCE and self.all_reduce_ok(call):
                self.removals.append((st, body, f"{code(call)}: removed: over the one process of the translation the "
                                      "reduction of a value (sum, average, max alike) is the value itself; "
                                      + GIVEN_UP))
            elif target is not None and q in DDP and call.args and call.args[0].keyword is None \
                    and not call.args[0].star and code(call.args[0].value) == code(target):
                self.removals.append((st, body, f"{code(st.body[0])}: removed: the one-process translation trains "
                                      f"the model itself; {GIVEN_UP}"))
            elif isinstance(target, cst.Name) and q in SAMPLER:
                self.samplers.append((self.scopes[-1], target.value, st, body, call))
            elif target is None and isinstance(call.func, cst.Attribute) and call.func.attr.value == "set_epoch":
                self.epochs.append((self.scopes[-1], code(call.func.value), st, body))

    @staticmethod
    def fixed_size(call: cst.Call) -> bool:
        """init_process_group(..., world_size=2): a literal number of processes above 1, which the script needs."""
        size = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "world_size"), None)
        if size is None and len(call.args) > 3 and call.args[3].keyword is None:
            size = call.args[3].value
        return isinstance(size, cst.Integer) and size.value not in ("1", "-1")

    def all_reduce_ok(self, call: cst.Call) -> bool:
        args = _bind(call, ("tensor", "op", "group", "async_op"))
        if args is None or "tensor" not in args:
            return False
        group, async_op = args.get("group"), args.get("async_op")
        return (group is None or code(group) == "None") and (async_op is None or code(async_op) == "False")


def _sampler_ok(call: cst.Call) -> tuple[cst.BaseExpression | None, str] | None:
    """(the sampler's shuffle argument or None for its default True, its dataset's text) where one process reading
    the whole dataset is what the sampler gives with one replica: no literal replica count other than 1."""
    args = _bind(call, SAMPLER_PARAMS)
    if args is None or "dataset" not in args:
        return None
    for p in ("num_replicas", "rank"):
        v = args.get(p)
        if isinstance(v, cst.Integer) and v.value not in (("1",) if p == "num_replicas" else ("0",)):
            return None
    return args.get("shuffle"), code(args["dataset"])


def _loader_ok(call: cst.Call, dataset: str) -> bool:
    """Whether the DataLoader reads the sampler's dataset and takes its shuffle by keyword."""
    if len(call.args) > 2 and call.args[2].keyword is None:  # shuffle (or more) given by position
        return False
    first = call.args[0] if call.args and call.args[0].keyword is None else \
        next((a for a in call.args if a.keyword is not None and a.keyword.value == "dataset"), None)
    return first is not None and code(first.value) == dataset


class _Planner:
    def __init__(self, ctx, s: _Scan):
        self.ctx = ctx
        self.s = s
        self.removals = list(s.removals)

    def run(self) -> None:
        translated = 0
        named = {}  # (scope id, name) → (shuffle, dataset text)
        for scope, name, st, body, call in self.s.samplers:
            ok = _sampler_ok(call)
            if ok is None:
                continue
            uses = self.s.names.get(id(scope), {}).get(name, 0)
            args = [a for sc, _, a in self.s.loader_args if sc is scope and isinstance(a.value, cst.Name)
                    and a.value.value == name]
            epochs = [e for e in self.s.epochs if e[0] is scope and e[1] == name]
            assigned = sum(1 for sc, n, *_ in self.s.samplers if sc is scope and n == name)
            if assigned != 1 or not args or uses != 1 + len(args) + len(epochs) \
                    or not all(_loader_ok(loader, ok[1]) for sc, loader, a in self.s.loader_args
                                if any(a is b for b in args)):
                continue
            named[(id(scope), name)] = ok
            self.removals.append((st, body, f"{name} = {code(call)}: removed: the DataLoader reads the whole dataset "
                                  "in the one process of the translation, as one replica of the sampler does"))
            for _, _, est, ebody in epochs:
                self.removals.append((est, ebody, f"{code(est.body[0])}: removed: the sampler's order is the "
                                      "DataLoader's own shuffle"))
            translated += 1
        for scope, loader, arg in self.s.loader_args:
            if isinstance(arg.value, cst.Name):
                ok = named.get((id(scope), arg.value.value))
            else:
                inner = arg.value
                ok = _sampler_ok(inner) if isinstance(inner, cst.Call) \
                    and self.ctx.imports.resolve(inner.func) in SAMPLER else None
                if ok is not None and not _loader_ok(loader, ok[1]):
                    ok = None
                if ok is not None:
                    translated += 1
            if ok is not None:
                self.loader(loader, arg, *ok)
        if translated and translated == self.s.sampler_calls:  # `self.train_data.sampler.set_epoch(epoch)`
            for _, receiver, st, body in self.s.epochs:
                if receiver.endswith(".sampler"):
                    self.removals.append((st, body, f"{code(st.body[0])}: removed: the loader's sampler became its "
                                          "own shuffle"))
        for node in self.s.modules:  # `model.module` of a DDP-wrapped model → the model (the wrapper is gone)
            if code(node.value) in self.s.wrapped and self.ctx.plans.get(node) is None:
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(node)} → {code(node.value)}: the model "
                                "DistributedDataParallel wrapped is the model itself in the translation", node)
                self.ctx.plans.add(node, lambda o, u: u.value, by="distributed")
        self.remove()

    def loader(self, call: cst.Call, arg: cst.Arg, shuffle, dataset: str) -> None:
        """The DataLoader's ``sampler=`` → ``shuffle=`` the sampler's; its own (falsy) shuffle= goes."""
        value = shuffle if shuffle is not None else cst.Name("True")
        exact = isinstance(value, cst.Name) and value.value == "False"
        self.ctx.report(Severity.WARNING, CODE, f"sampler={code(arg.value)} → shuffle={code(value)}: the one-process "
                        "translation reads every example once per epoch, as one replica of the DistributedSampler; "
                        + ("in order, as the sampler" if exact else "in the loader's numpy permutation, not the "
                           "sampler's (seed + epoch): the same distribution of orders, not the same order")
                        + f"; {GIVEN_UP}", arg)
        self.ctx.plans.add(arg, lambda o, u: u.with_changes(keyword=cst.Name("shuffle"), value=value),
                           descend=False, by="distributed")
        for a in call.args:
            if a is not arg and a.keyword is not None and a.keyword.value == "shuffle":
                self.ctx.plans.add(a, lambda o, u: cst.RemovalSentinel.REMOVE, descend=False, by="distributed")

    def remove(self) -> None:
        from fwport.packs.torch2jax import backends
        by_body: dict[int, list] = {}
        bodies = {}
        for st, body, why in self.removals:
            if self.ctx.plans.get(st) is not None:
                continue
            by_body.setdefault(id(body), []).append((st, why))
            bodies[id(body)] = body
        for key, items in by_body.items():
            body = bodies[key]
            gone = {id(st) for st, _ in items}
            # statements backends.py removes too (cudnn.benchmark, torch.compile): the block must keep one
            others = sum(1 for st in body if id(st) not in gone and (f := backends._flag(st, self.ctx)) is not None
                         and (f[0] in backends.REMOVED or f[0] in backends.DETERMINISTIC or f[0] == backends.COMPILE))
            last = items[-1][0] if len(gone) + others >= len(body) else None
            lines: list = []
            for st in body:
                if id(st) in gone:
                    if st is not last:
                        lines = [*lines, *st.leading_lines]
                    continue
                if lines and self.ctx.plans.get(st) is None and backends._flag(st, self.ctx) is None:
                    self.ctx.plans.add(st, lambda o, u, ls=lines: u.with_changes(
                        leading_lines=[*ls, *u.leading_lines]), by="distributed")
                lines = []
            for st, why in items:
                self.ctx.report(Severity.WARNING, CODE, why, st)
                self.ctx.plans.add(st, _removal(st is last), descend=False, by="distributed")


def _removal(last: bool):
    def edit(original, updated):
        if last:
            return updated.with_changes(body=[cst.Pass()])
        return cst.RemovalSentinel.REMOVE
    return edit


def plan(module: cst.Module, ctx) -> cst.Module:
    """Record the edits of a one-process translation of distributed code (see the module docstring)."""
    if uses_rpc(ctx):
        return module
    s = _Scan(ctx)
    scan(module, s)
    _Planner(ctx, s).run()
    return module


@call_transform("spawn")
def spawn(m, ctx):
    """``mp.spawn(fn, args=(a, b), nprocs=n)`` → ``fn(0, a, b)`` (a tuple display's elements; else ``fn(0,
    *args)``): the function runs once, as process 0, in the one process of the translation; a warning."""
    fn = m.kwargs.get("fn")
    if uses_rpc(ctx):
        m.fail(ctx, "unsupported-construct", f"torch.multiprocessing.spawn({m.written('fn')}, ...) in a file using "
               "torch.distributed.rpc: the processes take different roles by rank (a master, workers), which one JAX "
               "process cannot play; restructure the work as one program over every device (jax.sharding) by hand")
        return None
    if fn is None:
        m.fail(ctx, "unsupported-construct", "torch.multiprocessing.spawn without a function")
        return None
    args = m.kwargs.get("args")
    call_args = [cst.Arg(cst.Integer("0"))]
    if isinstance(args, cst.Tuple):
        call_args += [cst.Arg(e.value, star="*" if isinstance(e, cst.StarredElement) else "") for e in args.elements]
    elif args is not None:
        call_args.append(cst.Arg(args, star="*"))
    n = m.kwargs.get("nprocs")
    ctx.report(Severity.WARNING, CODE, f"{m.written('fn')} runs once, as process 0"
               + (f" (of nprocs={code(n)})" if n is not None else "")
               + ": the translation is one process that drives every local device; arguments keep their values "
               f"(a world size too); {GIVEN_UP}", m.node, m.rule)
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return cst.Call(fn, [a.with_changes(comma=comma) for a in call_args[:-1]] + call_args[-1:])
