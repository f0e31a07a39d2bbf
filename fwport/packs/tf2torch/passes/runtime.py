"""Planner: TensorFlow's runtime configuration and run-time bookkeeping statements (read-only; its edits
are applied by the rule pass, its finish step removes the lines it marked).

- Settings with no PyTorch counterpart, as statements: ``tf.config.experimental.set_memory_growth``
  (torch's CUDA caching allocator takes memory as tensors need it: growth is its only mode),
  ``tf.debugging.set_log_device_placement``, ``tf.config.set_soft_device_placement``,
  ``tf.config.run_functions_eagerly``, ``tfds.disable_progress_bar`` (tfds.load itself stays refused) → removed,
  with an info finding;
  ``tf.experimental.numpy.experimental_enable_numpy_behavior()`` → removed with a warning (NumPy's dtype
  promotion, which torch's differs from).
- ``tf.config.optimizer.set_jit`` → removed, info; ``tf.config.set_visible_devices`` and a logical (virtual) device
  configuration → removed with an info finding where the file reads no count of TensorFlow's logical devices
  (``_device_setup``; one configuration, a memory cap, always), else left with their error.
- ``keras.utils.plot_model(model, ...)`` as a statement → ``print(model)`` with a warning (no image is
  drawn; the message names torch's drawing tools). Used as a value it is an error with guidance
  (guidance.py).
- ``strategy = tf.distribute.MirroredStrategy()`` whose every use is ``with strategy.scope():`` or
  ``strategy.num_replicas_in_sync``, in a file trained by the written fit alone (one loss and at most one accuracy or
  error metric per compile, no callbacks, no train_on_batch, no loop of its own): torch's DistributedDataParallel,
  written out. The assignment becomes ``init_distributed()``, which joins torchrun's process group where torchrun
  started the file (WORLD_SIZE set: nccl on GPUs, gloo on CPUs; the first process's random state shared; the group
  left at exit) and does nothing under ``python file.py``; ``num_replicas_in_sync`` becomes ``replicas_in_sync()``
  (the world size, else TensorFlow's count); the scope ``contextlib.nullcontext()``; the file's ``print(...)`` and
  ``X.save(...)`` / ``X.save_weights(...)`` statements run ``if is_main_process():``. The written fit (fitloop.py,
  ``distributed``) trains through ``data_parallel(model)`` (DistributedDataParallel on the process's device),
  each process on its share of every global batch, as MirroredStrategy splits it over its replicas (a
  DistributedSampler over arrays, set_epoch every epoch; a dataset's batches split by ``tensor_split``), and sums
  its history over the processes. An info finding at the strategy says how to launch it (torchrun).
  Also with Keras's callbacks (every process runs them on the global logs; ModelCheckpoint, CSVLogger and
  TensorBoard write from the first only) and compile's metric objects (their state summed: ``all_reduce_metric``).
  ``MultiWorkerMirroredStrategy()`` likewise (torchrun --nnodes). A strategy's uses are its binding's scope's.
- Such a strategy with a loop of the file's own (``strategy.run`` / ``reduce`` / ``experimental_distribute_dataset``;
  ``_replica_loop``, ``_replicated``): ``init_replicas()`` (every optimizer step sums the gradients over torchrun's
  processes first), ``distribute_dataset(ds)``, ``fn(...)``, ``reduce_replicas(op, v)``, ``replicas_result(m)``.
- ``OneDeviceStrategy(device)``: one replica, as ``get_strategy()`` below, with a warning.
- Such a strategy otherwise (given devices, in a file trained in another way), one whose uses include
  ``strategy.run(fn, args=...)``, ``strategy.reduce(op, value, axis=None)`` or
  ``strategy.experimental_distribute_dataset(ds)`` (a loop of the file's own), or ``tf.distribute.get_strategy()``: the program runs in one process over the whole global batch, which is the
  computation MirroredStrategy distributes (its replicas' gradients are summed into one update); see
  docs/usage.md. The assignment is removed, the scope becomes ``contextlib.nullcontext()``, the replica count
  ``max(torch.cuda.device_count(), 1)`` (MirroredStrategy: TensorFlow's replicas, one per GPU, one on a
  machine without) or ``1`` (get_strategy: the default strategy), ``run`` a plain call, ``reduce`` the
  value, ``experimental_distribute_dataset`` the dataset. A warning at the strategy says how to run
  it with torch's DistributedDataParallel under torchrun. Another use of the name leaves it all as
  written, with the no-rule error. A MirroredStrategy given a literal device list has as many replicas.
- A name bound to strategies several times in one scope (notebook cells, ``if gpus: ... else: ...``) → each binding
  one process as above, the uses planned once (``_strategy_group``); num_replicas_in_sync only where every binding
  counts the same. keras-io's ``try: tpu = TPUClusterResolver...; strategy = TPUStrategy(tpu) except: strategy = X``
  → the except branch's statements (what TensorFlow runs where it finds no TPU), a warning.
- ``class X(keras.losses.Loss)`` → ``class X(KerasLoss)``: an nn.Module written into the file whose forward
  calls the subclass's ``call(y_true, y_pred)`` and reduces as Keras's ``Loss.__call__`` does;
  ``class X(keras.metrics.Metric)`` → ``class X(KerasMetric)`` (add_weight's float32 state tensors, updated
  in place: ``v.assign_add(x)`` → ``v.data.add_(x)``; ``__call__``, ``reset_state``).
- ``tf.summary.scalar(name, data, step=s)`` inside ``with writer.as_default():`` (the writer a name, or an
  attribute of self, bound to ``tf.summary.create_file_writer(...)``, which its rule makes a SummaryWriter) →
  ``writer.add_scalar(name, data, s)``; the ``with`` item → ``contextlib.nullcontext()``. ``step`` may
  come from ``as_default(step=s)``; a scalar with no step, or outside such a ``with`` (TensorFlow's
  default writer set elsewhere), is left with the no-rule error.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, call_argument, literal_value
from fwport.core.context import FileContext
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, find_all, scan
from fwport.core.position import render
from fwport.core.rewrite import rewrite
from fwport.packs.tf2torch.passes import fitloop

#: settings statements removed (name → why nothing replaces them)
SETTINGS = {
    "tensorflow.config.experimental.set_memory_growth":
        "torch's CUDA caching allocator takes GPU memory as tensors need it (TensorFlow's memory growth is its only "
        "mode); to cap it, call torch.cuda.set_per_process_memory_fraction(fraction, device)",
    "tensorflow.debugging.set_log_device_placement":
        "torch does not log where operations run; a tensor's .device says where it is",
    "tensorflow.config.set_soft_device_placement":
        "torch places each operation on its tensors' device; it never moves them by itself",
    "tensorflow.config.run_functions_eagerly":
        "torch runs every operation eagerly, and the translation removes @tf.function (the code it traced runs "
        "as plain Python)",
    "tensorflow_datasets.disable_progress_bar":
        "TensorFlow Datasets' download and preparation progress bars have no counterpart in the translation (a "
        "torchvision or Hugging Face dataset shows its own; tfds.load itself is not translated)",
}
SETTINGS["tensorflow.config.experimental_run_functions_eagerly"] = SETTINGS["tensorflow.config.run_functions_eagerly"]
SETTINGS["tensorflow.config.optimizer.set_jit"] = (
    "TensorFlow's XLA compilation of its traced graphs; the translation runs torch eagerly (its results differ "
    "from XLA's by float rounding of fused operations at most); torch.compile(model) is torch's compiler")
#: device set-up statements removed where the file reads no count of TensorFlow's logical devices (what they change)
DEVICE_SETUP = {
    "tensorflow.config.set_visible_devices":
        "TensorFlow's choice of the devices it may use; torch computes where the code puts its tensors (the CPU "
        "unless the file moves them: model.to(device), x.to(device)); to hide GPUs from torch set "
        "CUDA_VISIBLE_DEVICES before the program starts",
    "tensorflow.config.set_logical_device_configuration":
        "TensorFlow's division of a physical device into logical devices, or its cap on a GPU's memory; torch has "
        "one device per GPU and takes GPU memory as tensors need it (to cap it, call "
        "torch.cuda.set_per_process_memory_fraction(fraction, device))",
}
DEVICE_SETUP["tensorflow.config.experimental.set_visible_devices"] = DEVICE_SETUP["tensorflow.config.set_visible_devices"]
DEVICE_SETUP["tensorflow.config.experimental.set_virtual_device_configuration"] = \
    DEVICE_SETUP["tensorflow.config.set_logical_device_configuration"]
#: calls that read how many logical devices TensorFlow has (what a device set-up statement changes)
DEVICE_READERS = {"tensorflow.config.list_logical_devices", "tensorflow.config.experimental.list_logical_devices",
                  "tensorflow.config.get_visible_devices", "tensorflow.config.experimental.get_visible_devices",
                  "tensorflow.config.get_logical_device_configuration",
                  "tensorflow.config.experimental.get_virtual_device_configuration"}
#: settings statements removed with a warning: what they changed is not what torch does in every case
WARNED = {
    "tensorflow.experimental.numpy.experimental_enable_numpy_behavior":
        "TensorFlow's switch to NumPy's dtype promotion (JAX's with dtype_conversion_mode='all' or 'safe') and "
        "ndarray methods on tensors has none in torch; torch tensors have most ndarray methods under their torch "
        "names (reshape, T, ravel; astype is .to(dtype)) and promote mixed dtypes by torch's rules: int32 + float32 "
        "(or + a Python float) is float32 where NumPy's promotion gives float64, so check the dtypes where tensors "
        "of different dtypes meet",
}
PLOT_MODEL = {"keras.utils.plot_model"}
#: Keras's global dtype policy: float32 is torch's default, a mixed one is what torch.autocast does per region
POLICY = "keras.mixed_precision.set_global_policy"
STRATEGIES = {"tensorflow.distribute.MirroredStrategy": "max", "tensorflow.distribute.get_strategy": "one",
              # the same program on every machine (TF_CONFIG names them): torchrun --nnodes, one process per GPU
              "tensorflow.distribute.MultiWorkerMirroredStrategy": "multi",
              "tensorflow.distribute.experimental.MultiWorkerMirroredStrategy": "multi",
              "tensorflow.distribute.OneDeviceStrategy": "device"}
#: a TPU's connection (keras-io's `try: ... TPUStrategy(tpu) except: strategy = ...`): torch has no TPU without
#: torch_xla, so the translation takes the except branch, as TensorFlow does where it finds no TPU
TPU = {"tensorflow.distribute.cluster_resolver.TPUClusterResolver",
       "tensorflow.distribute.cluster_resolver.TPUClusterResolver.connect",
       "tensorflow.distribute.TPUStrategy", "tensorflow.distribute.experimental.TPUStrategy",
       "tensorflow.config.experimental_connect_to_cluster", "tensorflow.tpu.experimental.initialize_tpu_system"}
SCALAR = "tensorflow.summary.scalar"
WRITER = "tensorflow.summary.create_file_writer"
#: every source name this planner translates (bench/coverage.py counts them)
NAMES = {*SETTINGS, *DEVICE_SETUP, *WARNED, *PLOT_MODEL, *STRATEGIES, SCALAR, POLICY, *TPU,
         "tensorflow.distribute.ReduceOp.SUM", "tensorflow.distribute.ReduceOp.MEAN"}  # (reduce's op: dropped)
MARK = "__fwport_drop_statement__"

_METHODS = {"scope", "num_replicas_in_sync", "run", "experimental_run_v2", "reduce", "experimental_distribute_dataset"}


def _call_of(stmt: cst.CSTNode) -> cst.Call | None:
    """The call a one-statement line consists of (``f(...)`` as a statement), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) \
            and isinstance(stmt.body[0].value, cst.Call):
        return stmt.body[0].value
    return None


def _assigned_call(stmt: cst.CSTNode) -> tuple[str, cst.Call] | None:
    """``name = f(...)`` as a one-statement line: (name, the call)."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        a = stmt.body[0]
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and isinstance(a.value, cst.Call):
            return a.targets[0].target.value, a.value
    return None


def _free(ctx: FileContext, *nodes: cst.CSTNode) -> bool:
    """Whether no other planner has an edit for any of ``nodes`` (this planner runs last and leaves them)."""
    return all(ctx.plans.get(n) is None for n in nodes)


def _drop(ctx: FileContext, call: cst.Call) -> None:
    """Mark the statement ``call`` is (``f(...)``, ``name = f(...)``) for removal: the call becomes the mark
    (the rule pass does not look inside it), :func:`finish` removes the line."""
    ctx.options["_drop_statements"] = True
    ctx.plans.add(call, lambda orig, upd: cst.Name(MARK), descend=False, by="runtime")


#: for other planners: a statement ``f(...)`` / ``name = f(...)`` / ``expression`` removed (the node its value)
drop_statement = _drop


class _Uses(cst.CSTVisitor):
    """Every statement line, with-item, attribute and name of the file (one walk)."""

    def __init__(self):
        self.lines: list[cst.SimpleStatementLine] = []
        self.withs: list[cst.With] = []
        self.tries: list[cst.Try] = []
        self.fors: list[cst.For] = []
        self.names: dict[str, list[cst.Name]] = {}
        self.attrs: dict[int, cst.Attribute] = {}  # id(value Name) → the attribute read on it
        self.calls: dict[int, cst.Call] = {}  # id(attribute) → the call whose func it is
        self.callbacks: list[cst.BaseExpression] = []  # the callbacks= arguments of the file's calls
        self.every_call: list[cst.Call] = []
        self.chain: dict[int, tuple] = {}  # id(name) → the functions around it, outermost first
        self.binds: dict[int | None, set[str]] = {None: set()}  # id(function), None the module → names it binds
        self._stack: list[cst.FunctionDef] = []

    def visit_SimpleStatementLine(self, node) -> None:
        self.lines.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind(node.name.value)
        self._stack.append(node)
        self.binds.setdefault(id(node), set())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._stack.pop()

    def _bind(self, name: str) -> None:
        self.binds[id(self._stack[-1]) if self._stack else None].add(name)

    def visit_Param(self, node: cst.Param) -> None:
        self._bind(node.name.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value)

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value)

    def owner(self, node: cst.Name) -> int | None:
        """The scope whose binding of the name ``node`` reads (its innermost function binding it, else the
        module): id of the function, None for the module."""
        for fn in reversed(self.chain.get(id(node), ())):
            if node.value in self.binds.get(id(fn), ()):
                return id(fn)
        return None

    def visit_With(self, node) -> None:
        self.withs.append(node)

    def visit_Try(self, node) -> None:
        self.tries.append(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.setdefault(node.value, []).append(node)
        if self._stack:
            self.chain[id(node)] = tuple(self._stack)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name):
            self.attrs[id(node.value)] = node

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute):
            self.calls[id(node.func)] = node
        self.every_call.append(node)
        for a in node.args:  # a fit's callbacks (fit(model, ...) by now, the training pass's rewrite)
            if a.keyword is not None and a.keyword.value == "callbacks":
                self.callbacks.append(a.value)


def _kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    eq = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    return cst.Arg(value, keyword=cst.Name(name), equal=eq)


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    uses = _Uses()
    scan(module, uses)
    resolve = ctx.imports.resolve
    canonical = ctx.imports.names.canonical

    def name_of(call: cst.Call) -> str | None:
        q = resolve(call.func)
        return canonical(q) if q else None

    for stmt in uses.lines:
        call = _call_of(stmt)
        q = name_of(call) if call is not None else None
        if q is not None and not _free(ctx, call):
            continue
        if q in SETTINGS:
            ctx.report(Severity.INFO, "idiom-replaced", f"{q}(...) removed: {SETTINGS[q]}", call)
            _drop(ctx, call)
        elif q in DEVICE_SETUP:
            why = _device_setup(q, call, uses, name_of)
            if why is None:
                ctx.report(Severity.INFO, "idiom-replaced", f"{q}(...) removed: {DEVICE_SETUP[q]}; the file reads "
                           "no count of TensorFlow's logical devices, so no number changes", call)
                _drop(ctx, call)
        elif q in WARNED:
            ctx.report(Severity.WARNING, "idiom-replaced", f"{q}(...) removed: {WARNED[q]}", call)
            _drop(ctx, call)
        elif q in PLOT_MODEL and call.args and call.args[0].keyword is None:
            _plot_model(ctx, stmt, call)
        elif q == POLICY:
            _policy(ctx, call)
    _strategies(ctx, uses, name_of)
    _summaries(ctx, uses, name_of)
    _plan_loss_bases(module, ctx)
    return module


def _device_setup(q: str, call: cst.Call, uses: _Uses, name_of) -> str | None:
    """Why removing a device set-up statement could change a number of the file, or None: where it makes several
    logical devices of one (or hides some), a read of the logical devices (list_logical_devices, ...), a
    MirroredStrategy on the default devices (all logical GPUs), DTensor's meshes or a strategy's per-replica results
    count them; a single LogicalDeviceConfiguration (a memory cap) changes no count."""
    if "configuration" in q:
        configs = call_argument(call, "logical_devices", 1)
        if isinstance(configs, cst.List) and len(configs.elements) == 1 and \
                not isinstance(configs.elements[0], cst.StarredElement):
            return None  # one logical device for the physical one: a memory cap at most
    for c in uses.every_call:
        n = name_of(c) or ""
        if n in DEVICE_READERS or n.startswith("tensorflow.experimental.dtensor."):
            return f"{render(c.func)} reads the logical devices"
        if n in ("tensorflow.distribute.MirroredStrategy", "tensorflow.distribute.MultiWorkerMirroredStrategy") and \
                not isinstance(call_argument(c, "devices", 0), (cst.List, cst.Tuple)):
            return "a MirroredStrategy replicates over the logical GPUs"
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "experimental_local_results":
            return "a strategy's per-replica results are read"
    return None


def _policy(ctx: FileContext, call: cst.Call) -> None:
    """``keras.mixed_precision.set_global_policy("float32" | "mixed_float16" | "mixed_bfloat16")`` as a statement:
    removed. float32 is what torch computes in; a mixed policy makes Keras compute each layer in half precision
    (variables kept in float32) and wrap compile's optimizer in a LossScaleOptimizer, which the translation does
    not: a warning says by how much its outputs differ and how torch gets the speed-up. Another policy (float64,
    float16, a Policy object) keeps the no-rule error."""
    arg = call.args[0].value if len(call.args) == 1 and call.args[0].keyword in (None,) else \
        call.args[0].value if len(call.args) == 1 and call.args[0].keyword.value == "policy" else None
    policy = literal_value(arg, NOT_LITERAL) if arg is not None else NOT_LITERAL
    if policy == "float32":
        ctx.report(Severity.INFO, "idiom-replaced", f"{POLICY}(\"float32\") removed: torch computes in float32 by "
                   "default", call)
    elif policy in ("mixed_float16", "mixed_bfloat16"):
        half = policy.removeprefix("mixed_")
        ctx.report(Severity.WARNING, "approximate",
                   f"{POLICY}(\"{policy}\") removed: Keras computes each layer in {half} (variables in float32)"
                   + (" and wraps compile's optimizer in a LossScaleOptimizer" if half == "float16" else "")
                   + f"; the translation computes in float32, so its outputs differ from Keras's by {half} rounding "
                   f"(about {'1e-3' if half == 'float16' else '1e-2'} relative). For torch's speed-up, run the forward "
                   f"and the loss under torch.autocast(device_type=\"cuda\", dtype=torch.{half})"
                   + (" and scale the loss with torch.amp.GradScaler()" if half == "float16" else ""), call)
    else:
        return
    _drop(ctx, call)


def _plot_model(ctx: FileContext, stmt: cst.SimpleStatementLine, call: cst.Call) -> None:
    target = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "to_file"),
                  call.args[1].value if len(call.args) > 1 and call.args[1].keyword is None else None)
    where = f" into {render(target)}" if target is not None else " into model.png"
    ctx.report(Severity.WARNING, "idiom-replaced", f"keras.utils.plot_model draws the model's graph{where}; torch "
               "has no drawing of its own: the translation prints the module's structure (print(model)) and writes "
               "no file. For a drawing, torchview.draw_graph(model, input_size=...) or "
               "torchviz.make_dot(model(x)) (third-party, need graphviz)", call)
    ctx.plans.add(call, lambda orig, upd: cst.Call(cst.Name("print"), [cst.Arg(upd.args[0].value)]), by="runtime")


# --- tf.distribute strategies -------------------------------------------------------------------------

def _strategies(ctx: FileContext, uses: _Uses, name_of) -> None:
    bindings: dict[tuple, list] = {}  # (name, scope) → its strategy bindings [(statement, call, kind)]
    for stmt in uses.lines:
        found = _assigned_call(stmt)
        if found is None:
            continue
        name, call = found
        kind = STRATEGIES.get(name_of(call) or "")
        if kind is not None:
            bindings.setdefault((name, uses.owner(stmt.body[0].targets[0].target)), []).append((stmt, call, kind))
    tpus = _tpu_fallbacks(ctx, uses, name_of)
    for (name, scope), group in bindings.items():
        tpu = [t for t in tpus if t[1] == name and uses.owner(t[2]) == scope]
        if len(group) == 1 and not tpu:
            _strategy(ctx, uses, name, *group[0])
        else:
            _strategy_group(ctx, uses, name, group, tpu)


def _tpu_fallbacks(ctx: FileContext, uses: _Uses, name_of) -> list:
    """keras-io's ``try:`` that connects to a TPU and binds ``strategy = tf.distribute.TPUStrategy(tpu)``, with one
    ``except:`` (bare, ValueError or Exception) that binds another strategy: [(the try, the strategy's name, the
    TPUStrategy binding's target)]. Its body is TPU set-up alone (the resolver, connect_to_cluster,
    initialize_tpu_system, print); the resolver's name is read nowhere else."""
    out = []
    for t in uses.tries:
        if t.orelse is not None or t.finalbody is not None or len(t.handlers) != 1 or t.handlers[0].name is not None:
            continue
        caught = t.handlers[0].type
        if caught is not None and not (isinstance(caught, cst.Name) and caught.value in ("ValueError", "Exception")):
            continue
        strategy, resolver, ok = None, None, True
        for st in t.body.body:
            one = _call_of(st)
            found = _assigned_call(st)
            call = one if one is not None else found[1] if found is not None else None
            q = name_of(call) if call is not None else None
            if q in ("tensorflow.distribute.TPUStrategy", "tensorflow.distribute.experimental.TPUStrategy") and found:
                strategy = st.body[0].targets[0].target
            elif q in TPU and found and q.startswith("tensorflow.distribute.cluster_resolver"):
                resolver = found[0]
            elif q in TPU and one is not None:
                pass
            elif one is not None and isinstance(one.func, cst.Name) and one.func.value == "print":
                pass
            else:
                ok = False
        if not ok or strategy is None or resolver is None:
            continue
        inside = {id(n) for n in find_all(t.body, cst.Name)}
        if any(id(n) not in inside for n in uses.names.get(resolver, [])):
            continue  # the resolver is read after the try
        out.append((t, strategy.value, strategy))
    return out


def _strategy(ctx: FileContext, uses: _Uses, name: str, stmt, call, kind) -> None:
    """One binding of a strategy name in its scope."""
    plan = _strategy_uses(name, stmt, uses)
    if plan is not None and not _free(ctx, call, *(node for node, _ in plan)):
        plan = None
    if plan is None:
        return  # a use fwport does not follow: the constructor keeps its no-rule error
    if kind == "multi" and call.args:
        return  # a cluster resolver or communication options: the constructor keeps its guidance error
    why = None
    if kind in ("max", "multi"):
        loop = sorted({f"strategy.{_SPELLED[what]}" for _, what in plan if what in _SPELLED})
        why = ("it is given devices" if call.args else
               f"the file trains in a loop of its own ({', '.join(loop)}), which the translation runs as written"
               if loop else _trained_by_fit(ctx, uses) if _free(ctx, stmt) else "another pass edits it")
    if kind in ("max", "multi") and why is None:
        _data_parallel(ctx, stmt, call, plan, uses, kind)
        return
    if kind in ("max", "multi") and not call.args and loop and _free(ctx, stmt):
        found = _replica_loop(ctx, uses, plan)
        if isinstance(found, list):
            _replicated(ctx, stmt, call, plan, uses, kind, found)
            return
        why = found
    replicas = _replicas(ctx, kind, call)
    if replicas is None and any(what == "replicas" for _, what in plan):
        return  # a MirroredStrategy given devices the translation cannot count: its error stays
    if replicas != "1" and replicas != _GPUS and _per_replica(uses, plan):
        return  # several replicas (or a count not known) whose per-replica results one process does not compute
    ctx.report(Severity.WARNING, "idiom-replaced", _one_process_message(kind, call, replicas, why), call)
    _drop(ctx, call)
    for node, what in plan:
        _plan_use(ctx, node, what, _count(ctx, replicas) if what == "replicas" else "")


def _strategy_group(ctx: FileContext, uses: _Uses, name: str, group: list, tpu: list) -> None:
    """A strategy name bound several times in one scope (a notebook's cells, ``if gpus: ... else: ...``, a TPU's
    ``try`` whose except binds another strategy): all of them one process, their uses planned once (each use may
    read any of the bindings). The replica count must be the same for every binding where it is read; a multi-worker
    strategy given a cluster resolver keeps its error."""
    skip = {id(stmt.body[0].targets[0].target) for stmt, _, _ in group} | {id(target) for _, _, target in tpu}
    plan = _strategy_uses(name, group[0][0], uses, skip)
    calls = [call for _, call, _ in group]
    if plan is None or not _free(ctx, *calls, *(node for node, _ in plan), *(t for t, _, _ in tpu)):
        return
    if any(kind == "multi" and call.args for _, call, kind in group):
        return
    counts = {_replicas(ctx, kind, call) for _, call, kind in group}
    if any(what == "replicas" for _, what in plan) and (len(counts) != 1 or None in counts):
        return  # which binding's count a read gets is decided where the program runs: the errors stay
    if counts - {"1", _GPUS} and _per_replica(uses, plan):
        return  # several replicas (or a count not known) whose per-replica results one process does not compute
    replicas = counts.pop() if len(counts) == 1 else None
    why = f"its name {name} is bound to a strategy {len(group) + len(tpu)} times in the same scope"
    for _, call, kind in group:
        ctx.report(Severity.WARNING, "idiom-replaced", _one_process_message(kind, call, _replicas(ctx, kind, call), why),
                   call)
        _drop(ctx, call)
    for node, what in plan:
        _plan_use(ctx, node, what, _count(ctx, replicas) if what == "replicas" else "")
    for t, _, _ in tpu:
        _tpu_plan(ctx, t)


def _tpu_plan(ctx: FileContext, t: cst.Try) -> None:
    """The TPU's ``try`` → its except branch's statements: torch has no TPU without torch_xla, and TensorFlow runs
    that branch wherever it finds none."""
    ctx.report(Severity.WARNING, "idiom-replaced", "a TPU connection (TPUClusterResolver, TPUStrategy) and its "
               "fallback → the fallback alone, which TensorFlow runs where it finds no TPU: PyTorch runs on TPUs "
               "through torch_xla only (torch_xla.runtime, xla device tensors); the translation runs on CPUs/GPUs",
               t)
    for st in t.body.body:  # the TPU's set-up: not translated, dropped with the try
        ctx.plans.add(st, lambda orig, upd: cst.SimpleStatementLine([cst.Pass()]), descend=False, by="runtime")

    def fallback(orig, upd):
        body = list(upd.handlers[0].body.body)
        body[0] = body[0].with_changes(leading_lines=[*upd.leading_lines, *body[0].leading_lines])
        return cst.FlattenSentinel(body)
    ctx.plans.add(t, fallback, by="runtime")


def _replicas(ctx: FileContext, kind: str, call: cst.Call) -> str | None:
    """TensorFlow's num_replicas_in_sync of the strategy ``call`` makes, as the translation's one process
    counts it: a MirroredStrategy's replicas are its devices (a literal list of them: its length), by default
    every GPU, one on a machine without; a default or one-device strategy has one. None: not known."""
    if kind in ("one", "device"):
        return "1"
    devices = call_argument(call, "devices", 0)
    if devices is None or literal_value(devices, NOT_LITERAL) is None:
        return _GPUS
    if isinstance(devices, (cst.List, cst.Tuple)) and devices.elements and \
            not any(isinstance(e, cst.StarredElement) for e in devices.elements):
        return str(len(devices.elements))
    return None


_GPUS = "gpus"  # _replicas: one replica per GPU, one without


def _count(ctx: FileContext, replicas: str) -> str:
    """The translation's expression of a replica count of _replicas."""
    return f"max({ctx.spell_text('torch.cuda.device_count')}(), 1)" if replicas == _GPUS else replicas


def _per_replica(uses: _Uses, plan: list) -> str | None:
    """Where a strategy has several replicas for certain (a list of devices), why its ``run`` calls are not the one
    process's call, or None. Each replica runs the function on its share of a distributed dataset's batch and
    ``reduce(SUM / MEAN)`` adds up their results: one call on the whole batch gives that sum only where every run's
    inputs are the elements of the strategy's distributed dataset (``for batch in
    strategy.experimental_distribute_dataset(ds)``) and its result goes to reduce alone. A run given anything
    else (no input: every replica computes the same function) gives per-replica values one process has not."""
    datasets = [node for node, what in plan if what == "dataset"]
    reduced = [call_argument(node, "value", 1) for node, what in plan if what == "reduce"]
    named = {v.value for v in reduced if isinstance(v, cst.Name)}
    bound = {found[0] for line in uses.lines if (found := _assigned_call(line)) and any(found[1] is d for d in datasets)}
    elements = {f.target.value for f in uses.fors if isinstance(f.target, cst.Name) and (
        any(f.iter is d for d in datasets) or isinstance(f.iter, cst.Name) and f.iter.value in bound)}
    results = {}  # id(run call) → the name it is assigned to
    for line in uses.lines:
        for small in line.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                results[id(small.value)] = small.targets[0].target
    targets = {id(t) for t in results.values()}
    for node, what in plan:
        if what != "run":
            continue
        given = node.args[1:]
        if len(given) != 1 or given[0].keyword.value != "args" or not isinstance(given[0].value, cst.Tuple) or \
                not given[0].value.elements or not all(isinstance(e.value, cst.Name) and e.value.value in elements
                                                       for e in given[0].value.elements):
            return (f"{render(node)} gives each replica other inputs than its share of the strategy's distributed "
                    "dataset: its result is a value per replica")
        if any(v is node for v in reduced):
            continue
        target = results.get(id(node))
        reads = [n for n in uses.names.get(target.value, []) if id(n) not in targets] if target is not None else []
        if target is None or target.value not in named or \
                not all(any(n is v for v in reduced) for n in reads):
            return f"the per-replica result of {render(node)} is used otherwise than by strategy.reduce"
    return None


def _one_process_message(kind: str, call: cst.Call, replicas: str | None, why: str | None) -> str:
    if kind in ("one", "device"):
        return _DEFAULT_MESSAGE if kind == "one" else _DEVICE_MESSAGE
    message = _STRATEGY_MESSAGE if kind == "max" else _MULTI_MESSAGE
    if replicas is None:
        message = message.replace("num_replicas_in_sync = max(torch.cuda.device_count(), 1) as TensorFlow counts its "
                                  "replicas", "num_replicas_in_sync the number of its devices", 1)
    elif replicas.isdigit():
        message = message.replace("num_replicas_in_sync = max(torch.cuda.device_count(), 1) as TensorFlow counts its "
                                  "replicas", f"num_replicas_in_sync = {replicas}, its devices' number", 1)
    return message + (f"; it stays one process because {why}" if why else "")


_STRATEGY_MESSAGE = (
    "tf.distribute.MirroredStrategy → one process over the whole global batch (what the strategy's replicas "
    "compute together: their gradients are summed into one update; BatchNormalization's statistics are the "
    "global batch's, not each replica's), num_replicas_in_sync = max(torch.cuda.device_count(), 1) as TensorFlow "
    "counts its replicas. To spread it over the GPUs with torch's DistributedDataParallel: launch "
    "`torchrun --nproc_per_node=NUM_GPUS file.py`, call torch.distributed.init_process_group('nccl') and "
    "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])), wrap the model "
    "(model = torch.nn.parallel.DistributedDataParallel(model.cuda(), device_ids=[local_rank])), give each "
    "DataLoader a torch.utils.data.DistributedSampler and a per-process batch of the global batch divided by "
    "torch.distributed.get_world_size() (docs/usage.md, Runtime and distribution)")
_DDP_MESSAGE = (
    "tf.distribute.MirroredStrategy() → torch's DistributedDataParallel: launch the translation with "
    "`torchrun --nproc_per_node=NUM_GPUS file.py` (one process per GPU, nccl; on CPUs gloo, "
    "`torchrun --nproc_per_node=2 file.py`); `python file.py` runs it in one process over the whole global batch. "
    "init_distributed() joins torchrun's process group; the written fit() trains the model in "
    "DistributedDataParallel, each process on its share of every global batch (batch_size / world size, as "
    "MirroredStrategy splits it over its replicas; a DistributedSampler for arrays), which averages the gradients "
    "into the global batch's update (exact where every batch divides by the number of processes); "
    "num_replicas_in_sync is the number of processes (TensorFlow's count in one process); print and save "
    "statements run in the first process only; a fit's callbacks run in every process on the global logs "
    "(EarlyStopping and ReduceLROnPlateau decide alike everywhere), ModelCheckpoint, CSVLogger and TensorBoard "
    "write from the first process only; compile's metric objects add up their state over the processes, so their "
    "results are the global batches'. BatchNormalization normalizes each process's share, as each "
    "replica's in TensorFlow (docs/usage.md, Runtime and distribution)")
_DDP_MULTI_MESSAGE = _DDP_MESSAGE.replace("tf.distribute.MirroredStrategy()", "tf.distribute.MultiWorkerMirroredStrategy()", 1) \
    .replace("`torchrun --nproc_per_node=NUM_GPUS file.py` (one process per GPU, nccl;",
             "`torchrun --nnodes=NUM_MACHINES --nproc_per_node=NUM_GPUS --rdzv_backend=c10d --rdzv_endpoint=HOST:PORT "
             "file.py` on every machine of TF_CONFIG's cluster (one process per GPU of each, nccl; on one machine "
             "`torchrun --nproc_per_node=NUM_GPUS file.py`;", 1)
_MULTI_MESSAGE = _STRATEGY_MESSAGE.replace("tf.distribute.MirroredStrategy", "tf.distribute.MultiWorkerMirroredStrategy", 1) \
    .replace("`torchrun --nproc_per_node=NUM_GPUS file.py`", "`torchrun --nnodes=NUM_MACHINES --nproc_per_node=NUM_GPUS "
             "--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT file.py` on every machine (TF_CONFIG's cluster)")
_DEVICE_MESSAGE = ("tf.distribute.OneDeviceStrategy(device) → one process, one replica (num_replicas_in_sync 1), its "
                   "scope a contextlib.nullcontext(): the translation computes where torch puts its tensors (the CPU "
                   "unless the file moves them); to compute on the strategy's GPU move the model and each batch there "
                   "(model.to(device), x.to(device), device = torch.device(\"cuda:0\"))")
_DEFAULT_MESSAGE = ("tf.distribute.get_strategy() outside a strategy scope is TensorFlow's default strategy: one "
                    "replica, no distribution; its scope does nothing and num_replicas_in_sync is 1")


#: ctx.options: the file's MirroredStrategy became DistributedDataParallel (training.py writes the distributed loops)
DISTRIBUTED = "_distributed"
_SAVES = {"save", "save_weights"}
_SPELLED = {"run": "run", "reduce": "reduce", "dataset": "experimental_distribute_dataset"}


#: the callbacks the written fit runs in every process under torchrun (those that write files, in the first only:
#: fitloop.FILE_CALLBACKS); their logs are the global batches' (the history's sums over the processes)
_DDP_CALLBACKS = {f"keras.callbacks.{n}" for n in ("EarlyStopping", "ModelCheckpoint", "ReduceLROnPlateau",
                                                   "LearningRateScheduler", "CSVLogger", "TensorBoard")}
#: compile's metric classes whose state is sums (Keras's metric variables, summed over the replicas)
_DDP_METRICS = {"Mean", "MeanMetricWrapper", "SparseCategoricalAccuracy", "BinaryAccuracy", "Accuracy",
                "CategoricalAccuracy", "MeanAbsoluteError", "MeanSquaredError", "MeanAbsolutePercentageError",
                "CosineSimilarity", "TopKCategoricalAccuracy", "SparseTopKCategoricalAccuracy", "RootMeanSquaredError", "Precision", "Recall",
                "TruePositives", "FalsePositives", "TrueNegatives", "FalseNegatives", "AUC", "Crossentropy",
                "BinaryCrossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "ShapeAccuracy"}
#: their state: what all_reduce_metric sums (tests/test_distributed.py checks each class's updates touch no other)
METRIC_STATE = ("total", "count", "true_positives", "false_positives", "true_negatives", "false_negatives")


def _trained_by_fit(ctx: FileContext, uses: _Uses) -> str | None:
    """Why the file does not train through the written fit loop alone, in a form the distributed loop takes (the
    training pass has planned its compiles and fits by now), or None where it does: fits of compiles of one loss
    (metric objects whose state is sums, not a loss per output), Keras's callbacks among those the loop runs
    (_DDP_CALLBACKS), no train_on_batch, no train_step module, no loop of the file's own (``backward()``, a
    GradientTape left)."""
    compiled = [c for c in ctx.analyses.get("compiled", []) if c.loss is not None]
    used = ctx.options.get("_fit_helpers", set())
    if not any(id(c) in used for c in compiled):
        return "no model is trained by a compile and fit the translation writes out"
    if ctx.options.get("_train_step_module"):
        return "a model trains through its own train_step"
    if any(c.outputs for c in compiled):
        return "a model is compiled with a loss per output"
    if any(c.train_batch for c in compiled):
        return "a model trains with train_on_batch"
    def metric_class(expr, cls):  # a string's class, or a keras.metrics constructor's (its rule writes that class)
        q = ctx.imports.resolve(expr.func) if not cls and isinstance(expr, cst.Call) else None
        q = ctx.imports.names.canonical(q) if q else ""
        return cls or (q.removeprefix("keras.metrics.") if q.startswith("keras.metrics.") else "")
    other = sorted({name for c in compiled for name, expr, cls in c.metrics if metric_class(expr, cls) not in _DDP_METRICS})
    if other:
        return f"compile's metrics {', '.join(other)} are not running sums the processes can add up"
    if any(c.callbacks for c in compiled) and (why := _callbacks_unfollowed(ctx, uses)):
        return why
    if any(call.func.attr.value in ("backward", "GradientTape", "train_on_batch", "apply_gradients")
           for call in uses.calls.values()) or "GradientTape" in uses.names:
        return "the file trains in a loop of its own (a GradientTape, apply_gradients)"
    return None


def _callbacks_unfollowed(ctx: FileContext, uses: _Uses) -> str | None:
    """Why a fit's callbacks are not all Keras's own of _DDP_CALLBACKS (the list written in the call, or a name
    bound once to it; each element a constructor call or a name bound once to one), or None."""
    resolve, canonical = ctx.imports.resolve, ctx.imports.names.canonical
    bound: dict[str, list] = {}
    for line in uses.lines:
        for small in line.body:
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    if isinstance(t.target, cst.Name):
                        bound.setdefault(t.target.value, []).append(small.value)

    def once(node):
        if isinstance(node, cst.Name):
            values = bound.get(node.value, [])
            return values[0] if len(values) == 1 else None
        return node

    def keras_callback(node) -> str | None:
        node = once(node)
        if not isinstance(node, cst.Call):
            return None
        q = resolve(node.func)
        return canonical(q) if q else None
    for given in uses.callbacks:
        listed = once(given)
        if not isinstance(listed, (cst.List, cst.Tuple)):
            return "a fit's callbacks are not a list the translation can read"
        for e in listed.elements:
            q = keras_callback(e.value) if not isinstance(e, cst.StarredElement) else None
            if q not in _DDP_CALLBACKS:
                return (f"a fit's callback {render(e.value)} is not one of Keras's EarlyStopping, ModelCheckpoint, "
                        "ReduceLROnPlateau, LearningRateScheduler, CSVLogger, TensorBoard (every process would run it)")
    return None


def _data_parallel(ctx: FileContext, stmt: cst.SimpleStatementLine, call: cst.Call, plan: list, uses: _Uses,
                   kind: str = "max") -> None:
    """``strategy = tf.distribute.MirroredStrategy()`` → ``init_distributed()`` (joins torchrun's process group
    where torchrun started the file), ``num_replicas_in_sync`` → ``replicas_in_sync()``, the scope a
    ``contextlib.nullcontext()``; the written fit trains through DistributedDataParallel (training.py, DISTRIBUTED);
    the file's print and save statements run in the first process only."""
    ctx.report(Severity.INFO, "idiom-replaced", _DDP_MESSAGE if kind == "max" else _DDP_MULTI_MESSAGE, call)
    ctx.options[DISTRIBUTED] = True
    if any(c.metrics for c in ctx.analyses.get("compiled", []) if c.loss is not None):
        _helpers.use(ctx, fitloop.ALL_REDUCE_METRIC)
    _init_plan(ctx, stmt, _helpers.use(ctx, "init_distributed"))
    replicas = _helpers.use(ctx, "replicas_in_sync")
    _helpers.use(ctx, fitloop.DATA_PARALLEL)
    main = _helpers.use(ctx, fitloop.MAIN_PROCESS)
    for node, what in plan:
        if what == "replicas":
            ctx.plans.add(node, lambda orig, upd: cst.Call(cst.Name(replicas), []), descend=False, by="runtime")
        else:
            _plan_use(ctx, node, what, "")
    _first_process(ctx, stmt, uses, main)


def _init_plan(ctx: FileContext, stmt: cst.SimpleStatementLine, init: str) -> None:
    """The strategy's statement ``strategy = tf.distribute.X(...)`` → ``init()``, the helper ``init`` that joins
    torchrun's process group (its comments above kept)."""
    ctx.plans.add(stmt, lambda orig, upd: cst.SimpleStatementLine([cst.Expr(cst.Call(cst.Name(init), []))],
                                                                  leading_lines=upd.leading_lines),
                  descend=False, by="runtime")


def _first_process(ctx: FileContext, stmt: cst.SimpleStatementLine, uses: _Uses, main: str,
                   collective: tuple = ()) -> None:
    """The file's print(...) and X.save(...) / X.save_weights(...) statements run ``if is_main_process():``;
    one that reads a value over the processes (``collective``: a metric's result, a reduce) runs in every process,
    as every process must join the all_reduce."""
    builtin_print = "print" not in _bound(uses)
    joined = {id(n) for n in collective}
    for line in uses.lines:  # print(...) and model.save(...) / save_weights(...) statements: the first process's
        one = _call_of(line)
        if line is stmt or one is None or not _free(ctx, line):
            continue
        if joined and any(id(c) in joined for c in find_all(line, cst.Call)):
            continue
        printed = builtin_print and isinstance(one.func, cst.Name) and one.func.value == "print"
        saved = isinstance(one.func, cst.Attribute) and one.func.attr.value in _SAVES
        if printed or saved:
            ctx.plans.add(line, lambda orig, upd: cst.If(
                cst.Call(cst.Name(main), []), cst.IndentedBlock([upd.with_changes(leading_lines=[])]),
                leading_lines=upd.leading_lines), by="runtime")


_REDUCE_OPS = {"tensorflow.distribute.ReduceOp.SUM": "sum", "tensorflow.distribute.ReduceOp.MEAN": "mean"}


def _replica_loop(ctx: FileContext, uses: _Uses, plan: list) -> list | str:
    """A strategy whose file trains in a loop of its own (strategy.run, reduce, experimental_distribute_dataset):
    the metric objects' ``result()`` calls to read over the processes, or why the loop is not distributed."""
    resolve, canonical = ctx.imports.resolve, ctx.imports.names.canonical

    def name_of(node):
        q = resolve(node)
        return canonical(q) if q else ""
    compiled = [c for c in ctx.analyses.get("compiled", []) if c.loss is not None]
    if any(id(c) in ctx.options.get("_fit_helpers", set()) for c in compiled):
        return "the file also trains with compile and fit"
    if any(call.func.attr.value.startswith(("BatchNorm", "SyncBatchNorm")) for call in uses.calls.values()):
        return ("its model has BatchNormalization, whose moving statistics TensorFlow averages over the replicas "
                "(each process would keep its own)")
    for node, what in plan:
        if what == "reduce":
            op = call_argument(node, "reduce_op", 0)
            if _REDUCE_OPS.get(name_of(op)) is None and str(literal_value(op, NOT_LITERAL)).lower() not in ("sum", "mean"):
                return f"strategy.reduce's operation {render(op)} is not ReduceOp.SUM or MEAN"
    # the metric objects: names bound once to keras.metrics constructors, read by result() over every process
    metrics: dict[str, cst.Call] = {}
    for line in uses.lines:
        found = _assigned_call(line)
        if found is not None and name_of(found[1].func).startswith("keras.metrics.") and \
                name_of(found[1].func).rsplit(".", 1)[-1][:1].isupper():
            if found[0] in metrics:
                return f"the metric name {found[0]} is bound twice"
            metrics[found[0]] = found[1]
    made = [c for c in uses.every_call if name_of(c.func).startswith("keras.metrics.")
            and name_of(c.func).rsplit(".", 1)[-1][:1].isupper()]  # (a metric class; its functions keep no state)
    if len(made) != len(metrics) or any(name_of(c.func) == "keras.metrics.Metric" for c in made):
        return "a metric object is made other than as `name = keras.metrics.X(...)`"
    results = []
    for name in metrics:
        for node in uses.names.get(name, []):
            attr = uses.attrs.get(id(node))
            if node in [t.target for line in uses.lines for small in line.body if isinstance(small, cst.Assign)
                        for t in small.targets]:
                continue
            call = uses.calls.get(id(attr)) if attr is not None else None
            if call is None or attr.attr.value not in ("update_state", "reset_state", "reset_states", "result"):
                return (f"the metric {name} is used otherwise than update_state / result / reset_state (its state is "
                        "each process's)")
            if attr.attr.value == "result":
                results.append(call)
    if "Metric" in uses.names or "KerasMetric" in uses.names:
        return "the file defines a metric class of its own"
    return results


def _replicated(ctx: FileContext, stmt: cst.SimpleStatementLine, call: cst.Call, plan: list, uses: _Uses, kind: str,
                results: list) -> None:
    """``strategy = MirroredStrategy()`` with a loop of the file's own → ``init_replicas()`` (torchrun's process
    group; every optimizer step sums the gradients over the processes first, as the strategy's apply_gradients
    sums its replicas'), ``experimental_distribute_dataset(ds)`` → ``distribute_dataset(ds)`` (this process's
    share of every global batch), ``run(fn, args=...)`` → ``fn(...)`` (each process is one replica),
    ``reduce(op, v, axis=None)`` → ``reduce_replicas(op, v)`` (all_reduce), a metric's ``m.result()`` →
    ``replicas_result(m)`` (its state summed over the processes), print and save statements in the first
    process only."""
    message = _LOOP_MESSAGE if kind != "multi" else _LOOP_MESSAGE.replace(
        "tf.distribute.MirroredStrategy()", "tf.distribute.MultiWorkerMirroredStrategy()", 1).replace(
        "`torchrun --nproc_per_node=NUM_GPUS file.py`", "`torchrun --nnodes=NUM_MACHINES --nproc_per_node=NUM_GPUS "
        "--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT file.py` on every machine", 1)
    ctx.report(Severity.INFO, "idiom-replaced", message, call)
    _init_plan(ctx, stmt, _helpers.use(ctx, "init_replicas"))
    _helpers.use(ctx, "init_distributed")
    main = _helpers.use(ctx, fitloop.MAIN_PROCESS)
    for node, what in plan:
        if what == "replicas":
            replicas = _helpers.use(ctx, "replicas_in_sync")
            ctx.plans.add(node, lambda orig, upd, r=replicas: cst.Call(cst.Name(r), []), descend=False, by="runtime")
        elif what == "dataset":
            shares = _helpers.use(ctx, "distribute_dataset")
            ctx.plans.add(node, lambda orig, upd, f=shares: cst.Call(cst.Name(f), [cst.Arg(upd.args[0].value)]),
                          by="runtime")
        elif what == "reduce":
            reduce = _helpers.use(ctx, "reduce_replicas")
            op = call_argument(node, "reduce_op", 0)
            q = ctx.imports.resolve(op)
            text = _REDUCE_OPS.get(ctx.imports.names.canonical(q) if q else "") or \
                str(literal_value(op, NOT_LITERAL)).lower()

            def reduce_call(orig, upd, f=reduce, text=text):
                value = call_argument(upd, "value", 1)
                return cst.Call(cst.Name(f), [cst.Arg(cst.SimpleString(f'"{text}"'),
                                                      comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                              cst.Arg(value)])
            ctx.plans.add(node, reduce_call, by="runtime")
        else:
            _plan_use(ctx, node, what, "")
    if results:
        read = _helpers.use(ctx, "replicas_result")
        _helpers.use(ctx, fitloop.ALL_REDUCE_METRIC)
        for r in results:
            ctx.plans.add(r, lambda orig, upd, f=read: cst.Call(cst.Name(f), [cst.Arg(upd.func.value)]), by="runtime")
    _first_process(ctx, stmt, uses, main, (*results, *(node for node, what in plan if what == "reduce")))


_LOOP_MESSAGE = (
    "tf.distribute.MirroredStrategy() with a loop of the file's own → torch.distributed under torchrun: launch the "
    "translation with `torchrun --nproc_per_node=NUM_GPUS file.py` (gloo on CPUs); `python file.py` runs it in one "
    "process over the whole global batch. init_replicas() joins torchrun's process group and makes every optimizer "
    "step first sum the gradients over the processes (all_reduce), as the strategy's apply_gradients sums its "
    "replicas'; experimental_distribute_dataset(ds) → distribute_dataset(ds), each process iterating over its share "
    "of every global batch (tensor_split, as the strategy splits it over its replicas); strategy.run(fn, args) → "
    "fn(*args), each process one replica; strategy.reduce(op, v, axis=None) → reduce_replicas(op, v) (all_reduce; "
    "MEAN divides by the number of processes); a metric's result() → replicas_result(metric), its state summed over "
    "the processes; num_replicas_in_sync the number of processes; print and save statements in the first process "
    "only (a print that reads a metric's result or a reduce, in every process: each joins the all_reduce). Exact where the losses are scaled by the global batch (tf.nn.compute_average_loss(..., "
    "global_batch_size=)) and every global batch divides by the number of processes (docs/usage.md, Runtime and "
    "distribution)")


def _bound(uses: _Uses) -> set[str]:
    """Names the file binds by assignment (``print`` rebound is not the builtin)."""
    out = set()
    for line in uses.lines:
        for small in line.body:
            for t in small.targets if isinstance(small, cst.Assign) else ():
                if isinstance(t.target, cst.Name):
                    out.add(t.target.value)
    return out


def _strategy_uses(name: str, assign: cst.SimpleStatementLine, uses: _Uses, skip: set = frozenset()) -> list | None:
    """Each use of the strategy's name as (node to edit, kind), or None if one is not followed (``skip``: the
    ids of the name's other strategy bindings, not uses)."""
    target = assign.body[0].targets[0].target
    scope = uses.owner(target)  # the uses of this binding: the names in its scope (a function's own, or the module's)
    plan = []
    for node in uses.names.get(name, []):
        if node is target or id(node) in skip or uses.owner(node) != scope:
            continue
        attr = uses.attrs.get(id(node))
        if attr is None or attr.attr.value not in _METHODS:
            return None
        method = attr.attr.value
        if method == "num_replicas_in_sync":
            if id(attr) in uses.calls:
                return None
            plan.append((attr, "replicas"))
            continue
        call = uses.calls.get(id(attr))
        if call is None:
            return None
        if method == "scope":
            if call.args or not any(item.item is call and item.asname is None for w in uses.withs for item in w.items):
                return None
            plan.append((call, "scope"))
        elif method in ("run", "experimental_run_v2"):  # (TensorFlow 2.0 / 2.1's name of run)
            if not call.args or call.args[0].keyword is not None or any(a.star for a in call.args):
                return None
            if any(a.keyword is not None and a.keyword.value not in ("args", "kwargs") for a in call.args[1:]) or \
                    any(a.keyword is None for a in call.args[1:]):
                return None
            plan.append((call, "run"))
        elif method == "reduce":
            if any(a.star for a in call.args):  # reduce(op, *v): which argument is the value is unknown
                return None
            args = {a.keyword.value if a.keyword else ("reduce_op", "value", "axis")[i]: a.value
                    for i, a in enumerate(call.args)}
            if set(args) - {"reduce_op", "value", "axis"} or "value" not in args or \
                    literal_value(args.get("axis", cst.Name("None")), NOT_LITERAL) is not None:
                return None
            plan.append((call, "reduce"))
        elif method == "experimental_distribute_dataset":
            if len(call.args) != 1 or call.args[0].keyword is not None:
                return None
            plan.append((call, "dataset"))
        else:
            return None
    return plan


def _plan_use(ctx: FileContext, node: cst.CSTNode, what: str, replicas: str) -> None:
    if what == "replicas":
        ctx.plans.add(node, lambda orig, upd: cst.parse_expression(replicas), descend=False, by="runtime")
    elif what == "scope":
        ctx.plans.add(node, lambda orig, upd: cst.Call(ctx.spell("contextlib.nullcontext"), []), descend=False,
                      by="runtime")
    elif what == "run":
        def run_call(orig, upd):
            fn, rest = upd.args[0].value, upd.args[1:]
            args = []
            for a in rest:
                if a.keyword.value == "args" and isinstance(a.value, cst.Tuple) and \
                        not any(isinstance(e, cst.StarredElement) for e in a.value.elements):
                    args += [cst.Arg(e.value) for e in a.value.elements]  # args=(x,) → fn(x)
                    continue
                star = "*" if a.keyword.value == "args" else "**"
                args.append(cst.Arg(a.value, star=star))
            return cst.Call(fn, [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args])
        ctx.plans.add(node, run_call, by="runtime")
    elif what == "reduce":
        def reduce_call(orig, upd):
            value = call_argument(upd, "value", 1)
            assert value is not None, "planned reduce has a value"
            return value
        ctx.plans.add(node, reduce_call, by="runtime")
    elif what == "dataset":
        ctx.plans.add(node, lambda orig, upd: upd.args[0].value, by="runtime")


# --- tf.summary ---------------------------------------------------------------------------------------

def _writers(uses: _Uses, name_of) -> set[str]:
    """The names (``writer``) and attributes of self (``self.writer``, every assignment to it in the file a
    writer's creation: a callback's ``__init__`` makes it, its methods write with it) bound to
    ``tf.summary.create_file_writer(...)``."""
    writers, others = set(), set()
    for stmt in uses.lines:
        found = _assigned_call(stmt)
        if found is not None and name_of(found[1]) == WRITER:
            writers.add(found[0])
        for small in stmt.body:
            for t in small.targets if isinstance(small, cst.Assign) else ():
                attr = dotted_text(t.target) or ""
                if attr.startswith("self.") and attr.count(".") == 1:
                    (writers if isinstance(small.value, cst.Call) and name_of(small.value) == WRITER
                     and len(small.targets) == 1 else others).add(attr)
    return writers - others


def _summaries(ctx: FileContext, uses: _Uses, name_of) -> None:
    writers = _writers(uses, name_of)
    if not writers:
        return
    for w in uses.withs:
        for item in w.items:
            call = item.item
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                    and call.func.attr.value == "as_default" and dotted_text(call.func.value) in writers
                    and item.asname is None):
                continue
            step = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "step"),
                        call.args[0].value if call.args and call.args[0].keyword is None else None)
            inner = _Scalars(name_of)
            scan(w.body, inner)
            if inner.other or not _free(ctx, call, *inner.scalars):
                continue  # another summary call in the body: the writer's context stays TensorFlow's
            writer = dotted_text(call.func.value)
            planned = [s for s in inner.scalars if _plan_scalar(ctx, s, writer, step)]
            if len(planned) != len(inner.scalars):
                continue
            ctx.report(Severity.INFO, "idiom-replaced", f"{writer}.as_default(): tf.summary calls in the block write "
                       f"to {writer} (a SummaryWriter) explicitly: {writer}.add_scalar(...)", call)
            ctx.plans.add(call, lambda orig, upd: cst.Call(ctx.spell("contextlib.nullcontext"), []), descend=False,
                          by="runtime")


class _Scalars(cst.CSTVisitor):
    def __init__(self, name_of):
        self.name_of = name_of
        self.scalars: list[cst.Call] = []
        self.other = False

    def visit_Call(self, node: cst.Call) -> None:
        q = self.name_of(node)
        if q == SCALAR:
            self.scalars.append(node)
        elif q and q.startswith("tensorflow.summary."):
            self.other = True

    def visit_FunctionDef(self, node) -> bool:
        return False  # a function defined in the block runs wherever it is called


def _plan_scalar(ctx: FileContext, call: cst.Call, writer: str, default_step) -> bool:
    names = ("name", "data", "step", "description")
    args = {}
    for i, a in enumerate(call.args):
        if a.star:
            return False
        args[a.keyword.value if a.keyword else names[i]] = a.value
    step = args.get("step", default_step)
    if step is None or "name" not in args or "data" not in args or set(args) - set(names):
        return False
    if isinstance(step, cst.Name) and step.value == "None":
        return False

    def scalar(orig, upd):
        new = {a.keyword.value if a.keyword else names[i]: a.value for i, a in enumerate(upd.args)}
        new_step = new.get("step", step)
        return cst.Call(cst.Attribute(cst.parse_expression(writer), cst.Name("add_scalar")),
                        [cst.Arg(new["name"], comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                         cst.Arg(new["data"], comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                         cst.Arg(new_step)])
    ctx.plans.add(call, scalar, by="runtime")
    return True


# --- finish: the marked statements removed ---------------------------------------------------------------

class _DropMarked(cst.CSTTransformer):
    """Removes the statement lines marked ``__fwport_drop_statement__``; a block left empty gets ``pass``;
    their leading lines (blank lines, comments) go to the next statement."""

    @staticmethod
    def _marked(st) -> bool:
        if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1
                and isinstance(st.body[0], (cst.Expr, cst.Assign))):
            return False
        value = st.body[0].value
        return isinstance(value, cst.Name) and value.value == MARK

    def _body(self, body):
        out, carry = [], []
        for st in body:
            if self._marked(st):
                carry += list(st.leading_lines)
                continue
            if carry and hasattr(st, "leading_lines"):
                st = st.with_changes(leading_lines=[*carry, *st.leading_lines])
                carry = []
            out.append(st)
        return out, carry

    def leave_IndentedBlock(self, original_node, updated_node):
        if not any(self._marked(st) for st in updated_node.body):
            return updated_node
        out, carry = self._body(updated_node.body)
        if not out:
            out = [cst.SimpleStatementLine([cst.Pass()], leading_lines=carry)]
        return updated_node.with_changes(body=out)

    def leave_Module(self, original_node, updated_node):
        if not any(self._marked(st) for st in updated_node.body):
            return updated_node
        out, carry = self._body(updated_node.body)
        return updated_node.with_changes(body=out, footer=[*carry, *updated_node.footer])


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Remove the statements :func:`run` marked, once every finding is located."""
    if not ctx.options.pop("_drop_statements", False):
        return module
    return rewrite(module, _DropMarked())


# --- keras.losses.Loss subclasses ---------------------------------------------------------------------------

LOSS_BASE = "keras.losses.Loss"
HELPER = "KerasLoss"

_KERAS_LOSS = '''

class KerasLoss({nn}Module):
    """keras.losses.Loss as an nn.Module: a subclass's call(y_true, y_pred) gives the per-sample losses;
    calling the object (forward) converts both to float32 tensors and reduces the losses as Keras does:
    the mean of all their elements (reduction "sum_over_batch_size", the default, or "auto"), their sum
    ("sum"), or none (None, "none"); a sample_weight multiplies them first (trailing axes added to match).
    The arguments keep Keras's order: y_true first."""

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        super().__init__()
        self.name, self.reduction, self.dtype = name, reduction, dtype

    def forward(self, y_true, y_pred, sample_weight=None):
        dtype = self.dtype or {torch}float32
        losses = self.call({torch}as_tensor(y_true).to(dtype), {torch}as_tensor(y_pred).to(dtype))
        if sample_weight is not None:
            weight = {torch}as_tensor(sample_weight).to(losses.dtype)
            while weight.dim() < losses.dim():
                weight = weight.unsqueeze(-1)
            losses = losses * weight
        if self.reduction in (None, "none") or losses.dim() == 0:
            return losses
        if self.reduction == "sum":
            return losses.sum()
        if self.reduction in ("sum_over_batch_size", "auto", "mean"):
            return losses.sum() / losses.numel() if losses.numel() else losses.sum()
        raise ValueError(f"reduction {self.reduction!r}: Keras's are 'sum_over_batch_size', 'sum' and None")
'''


METRIC_BASE = "keras.metrics.Metric"
METRIC_HELPER = "KerasMetric"

_KERAS_METRIC = '''

class KerasMetric:
    """keras.metrics.Metric: a subclass's state is the float32 tensors add_weight makes (listed by
    .variables, updated in place by update_state: v.data.add_(x) for assign_add); calling the metric
    updates it and returns result(); reset_state() sets every state tensor to zero, as Keras does."""

    def __init__(self, dtype=None, name=None):
        self.name, self.dtype, self.variables = name, dtype or {torch}float32, []

    def add_weight(self, shape=(), initializer=None, dtype=None, name=None):
        return self.add_variable(shape, initializer, dtype=dtype, name=name)

    def add_variable(self, shape, initializer, dtype=None, aggregation="sum", name=None):
        if initializer not in (None, "zeros", "ones"):
            raise ValueError(f"initializer {initializer!r}: the written-out metric makes 'zeros' and 'ones'")
        value = ({torch}ones if initializer == "ones" else {torch}zeros)(shape, dtype=dtype or self.dtype)
        self.variables.append(value)
        return value

    def reset_state(self):
        for v in self.variables:
            v.data.zero_()

    def __call__(self, *args, **kwargs):
        self.update_state(*args, **kwargs)
        return self.result()
'''
#: a Keras base class → (the class written into the file, its text, what the finding says)
HELPER_BASES = {
    LOSS_BASE: (HELPER, "an nn.Module written into the file: calling it reduces call()'s per-sample losses as Keras "
                        "does (the mean by default); it keeps Keras's argument order, loss(y_true, y_pred)"),
    METRIC_BASE: (METRIC_HELPER, "a class written into the file: add_weight makes float32 state tensors, updated in "
                                 "place (assign → .data.copy_, assign_add → .data.add_, assign_sub → .data.sub_), "
                                 "calling the metric updates it and returns result(), reset_state() zeroes them"),
}
_ASSIGNS = {"assign": ".data.copy_", "assign_add": ".data.add_", "assign_sub": ".data.sub_"}


def _plan_loss_bases(module: cst.Module, ctx: FileContext) -> None:
    """``class X(keras.losses.Loss)`` → ``class X(KerasLoss)``, ``class X(keras.metrics.Metric)`` →
    ``class X(KerasMetric)`` (the helpers written into the file); in a metric subclass, its state's
    ``v.assign / assign_add / assign_sub(x)`` → ``v.data.copy_ / add_ / sub_(x)``."""
    from fwport.packs.tf2torch import helpers
    taken = {st.name.value for st in module.body if isinstance(st, (cst.ClassDef, cst.FunctionDef))}
    for st in module.body:
        if not isinstance(st, cst.ClassDef):
            continue
        for a in st.bases:
            base = ctx.imports.resolve(a.value) if a.keyword is None else None
            if base not in HELPER_BASES or not _free(ctx, a):
                continue
            helper, what = HELPER_BASES[base]
            if helper in taken:
                ctx.report(Severity.ERROR, "unsupported-construct", f"the file defines its own {helper}, the name of "
                           f"the class fwport writes for {base}: rename it and translate again", a)
                return
            if base == METRIC_BASE and not _plan_assigns(st, ctx):
                continue  # an assign it does not translate: the base's residue error stays
            ctx.report(Severity.INFO, "idiom-replaced", f"{st.name.value}({base}) → {st.name.value}({helper}), {what}", a)
            name = helpers.use(ctx, helper)
            ctx.plans.add(a, lambda orig, upd, name=name: upd.with_changes(value=cst.Name(name)), descend=False,
                          by="runtime")


class _Assigns(cst.CSTVisitor):
    def __init__(self):
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _ASSIGNS:
            self.calls.append(node)


def _plan_assigns(cls: cst.ClassDef, ctx: FileContext) -> bool:
    """The assign calls of a metric class's state, planned; False (nothing planned) if one has other arguments
    than one value or another planner's edit."""
    found = _Assigns()
    scan(cls.body, found)
    if any(len(c.args) != 1 or c.args[0].keyword is not None or c.args[0].star for c in found.calls) or \
            not _free(ctx, *found.calls):
        return False
    for c in found.calls:
        chain = _ASSIGNS[c.func.attr.value]

        def apply(orig, upd, chain=chain):
            value = upd.args[0].value
            if chain == ".data.copy_":
                value = cst.parse_expression(f"{ctx.spell_text('torch.as_tensor')}({render(value)})")
            return cst.Call(cst.parse_expression(f"{render(upd.func.value)}{chain}"), [cst.Arg(value)])
        ctx.plans.add(c, apply, by="runtime")
    return True


from fwport.packs.tf2torch import helpers as _helpers  # noqa: E402

_helpers.HELPERS[HELPER] = _KERAS_LOSS
_helpers.HELPERS[METRIC_HELPER] = _KERAS_METRIC
NAMES.update({LOSS_BASE, METRIC_BASE})

# --- MirroredStrategy → DistributedDataParallel: the helpers written into the file ------------------------------

_INIT_DISTRIBUTED = '''

def init_distributed(backend=None):
    """tf.distribute.MirroredStrategy() as torch's DistributedDataParallel. Launched by torchrun (torchrun
    --nproc_per_node=NUM_GPUS file.py sets WORLD_SIZE, RANK and LOCAL_RANK), this process joins the group of one
    process per device (nccl on GPUs, gloo on CPUs), left when the program ends, and takes the first process's
    random state; run as python file.py, it stays one process over the whole global batch."""
    if "WORLD_SIZE" in {os}environ and not {torch}distributed.is_initialized():
        if {torch}cuda.is_available():
            {torch}cuda.set_device(int({os}environ["LOCAL_RANK"]))
        {torch}distributed.init_process_group(backend or ("nccl" if {torch}cuda.is_available() else "gloo"))
        def leave():  # at the program's end: once every process is done (the first may be saving), leave the group
            {torch}distributed.barrier()
            {torch}distributed.destroy_process_group()
        {atexit}register(leave)
        # every process draws the first one's random numbers from here on (shuffles, augmentations), as one would
        states = [{torch}get_rng_state(), {np}random.get_state(), {random}getstate()]
        {torch}distributed.broadcast_object_list(states, 0)
        {torch}set_rng_state(states[0])
        {np}random.set_state(states[1])
        {random}setstate(states[2])
'''
_REPLICAS_IN_SYNC = '''

def replicas_in_sync():
    """strategy.num_replicas_in_sync: the number of processes torchrun started, else TensorFlow's count (one
    replica per GPU, one without)."""
    if {torch}distributed.is_initialized():
        return {torch}distributed.get_world_size()
    return max({torch}cuda.device_count(), 1)
'''
_DATA_PARALLEL = '''

def data_parallel(model):
    """(the module fit() calls, this process's rank, the number of processes, its device): under torchrun the
    model on this process's device in DistributedDataParallel, whose backward averages the gradients of every
    process's share of a batch into the whole batch's; else the model itself, one process."""
    if not {torch}distributed.is_initialized():
        return model, 0, 1, next(model.parameters()).device
    device = {torch}device("cuda", {torch}cuda.current_device()) if {torch}cuda.is_available() else {torch}device("cpu")
    net = {torch}nn.parallel.DistributedDataParallel(model.to(device),
                                                    device_ids=[device] if device.type == "cuda" else None)
    return net, {torch}distributed.get_rank(), {torch}distributed.get_world_size(), device
'''
_IS_MAIN_PROCESS = '''

def is_main_process():
    """Whether this process prints and saves: the first of torchrun's (RANK 0), or the only one."""
    return int({os}environ.get("RANK", "0")) == 0
'''
_ALL_REDUCE_METRIC = '''

def all_reduce_metric(metric, device):
    """Under torchrun, at an epoch's end: a compile metric's state (its running sums and counts, its confusion
    counts) summed over the processes, as Keras sums its replicas' metric variables, so that result() is the
    global batches' in every process."""
    names = [k for k in {state!r} if k in vars(metric)]
    values = [{torch}as_tensor(getattr(metric, k), dtype={torch}float64) for k in names]
    flat = {torch}cat([v.reshape(-1) for v in values]).to(device)
    {torch}distributed.all_reduce(flat)
    for k, v, summed in zip(names, values, flat.cpu().split([v.numel() for v in values])):
        old = getattr(metric, k)
        setattr(metric, k, summed.reshape(v.shape).to(old.dtype) if {torch}is_tensor(old) else float(summed))
'''
_ALL_REDUCE_METRIC = _ALL_REDUCE_METRIC.replace("{state!r}", repr(METRIC_STATE))
_INIT_REPLICAS = '''

def init_replicas():
    """tf.distribute.MirroredStrategy() for a training loop of the file's own: init_distributed(); under torchrun
    every optimizer step then first sums the gradients over the processes, as the strategy's apply_gradients sums
    its replicas' (their losses divided by the global batch size: tf.nn.compute_average_loss). The file's own
    loop computes where it puts its tensors (the CPU unless it moves them): gloo carries CPU tensors, nccl CUDA
    ones."""
    init_distributed("cpu:gloo,cuda:nccl" if {torch}cuda.is_available() else "gloo")
    if {torch}distributed.is_initialized() and {torch}distributed.get_world_size() > 1:
        def sum_gradients(optimizer, args, kwargs):
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        {torch}distributed.all_reduce(p.grad)
        from torch.optim.optimizer import register_optimizer_step_pre_hook  # (every optimizer's)

        register_optimizer_step_pre_hook(sum_gradients)
'''
_DISTRIBUTE_DATASET = '''

class distribute_dataset:
    """strategy.experimental_distribute_dataset(dataset): under torchrun each process iterates over its share of
    every global batch (each tensor split along its first axis into as many parts as processes, as the strategy
    splits a batch over its replicas); in one process the batches themselves."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __iter__(self):
        if not {torch}distributed.is_initialized():
            yield from self.dataset
            return
        rank, world = {torch}distributed.get_rank(), {torch}distributed.get_world_size()

        def share(value):
            if isinstance(value, (tuple, list)):
                return type(value)(share(v) for v in value)
            if isinstance(value, dict):
                return {k: share(v) for k, v in value.items()}
            return {torch}as_tensor(value).tensor_split(world)[rank]
        for batch in self.dataset:
            yield share(batch)
'''
_REDUCE_REPLICAS = '''

def reduce_replicas(op, value):
    """strategy.reduce(ReduceOp.SUM / MEAN, value, axis=None): the processes' values summed (all_reduce), or
    their mean; in one process the value itself."""
    if not {torch}distributed.is_initialized():
        return value
    total = {torch}as_tensor(value).detach().clone()
    {torch}distributed.all_reduce(total)
    return total / {torch}distributed.get_world_size() if op == "mean" else total
'''
_REPLICAS_RESULT = '''

def replicas_result(metric):
    """metric.result() under a strategy: the result of its state summed over the processes (as the strategy sums
    its replicas' metric variables), the metric itself unchanged; in one process its result()."""
    if not {torch}distributed.is_initialized():
        return metric.result()
    summed = {copy}deepcopy(metric)
    all_reduce_metric(summed, {torch}device("cuda", {torch}cuda.current_device()) if {torch}cuda.is_available()
                      else {torch}device("cpu"))
    return summed.result()
'''
_helpers.HELPERS.update({"init_replicas": _INIT_REPLICAS, "distribute_dataset": _DISTRIBUTE_DATASET,
                         "reduce_replicas": _REDUCE_REPLICAS, "replicas_result": _REPLICAS_RESULT})
_helpers.DATA_DEPS.update({"init_replicas": ("init_distributed",), "replicas_result": (fitloop.ALL_REDUCE_METRIC,)})
_helpers.HELPERS.update({"init_distributed": _INIT_DISTRIBUTED, "replicas_in_sync": _REPLICAS_IN_SYNC,
                         fitloop.DATA_PARALLEL: _DATA_PARALLEL, fitloop.MAIN_PROCESS: _IS_MAIN_PROCESS,
                         fitloop.ALL_REDUCE_METRIC: _ALL_REDUCE_METRIC})
_helpers._MODULES.setdefault("atexit", ("atexit.", "import atexit"))
_helpers._MODULES.setdefault("random", ("random.", "import random"))
