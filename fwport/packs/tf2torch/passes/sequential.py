"""Structural pass: ``keras.Sequential`` → ``nn.Sequential``, with shapes propagated through the chain.

Two forms, both on the lines they were written on:

- ``keras.Sequential([layer, ...])`` → ``nn.Sequential(module, ...)``; a layer that becomes several
  modules (a conv and its activation) puts them side by side on its line;
- ``model = keras.Sequential()`` followed by ``model.add(layer)`` statements in the same block →
  ``model = nn.Sequential()`` and ``model.append(module)`` (``model.extend([...])`` for several).

The input size (``keras.Input(shape=...)`` first, ``InputLayer``, or ``input_shape=`` / ``input_dim=``
on the first layer) is followed through the chain so that concrete modules (``nn.Linear(784, 64)``)
are emitted; lazy modules only where a size is unknowable. A chain holding channels-last
convolutions or pooling becomes channels-first (NCHW): every axis-dependent layer is remapped or
refused with an error finding, and ``ctx.models`` records the layout change for the verifier.
Each layer with variables gets a ``LayerRecord``: ``layers[i]`` (Keras's ``model.layers``, which
never includes the InputLayer) → the index of its weight-holding module in the ``nn.Sequential``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import libcst as cst

from fwport.core.hooks import default_leave_transform, default_visit
from fwport.core.rewrite import rewrite
from fwport.core.bind import call_argument, literal_value
from fwport.core.bindings import BindingWalker
from fwport.core.context import FileContext, LayerRecord, ModelInfo
from fwport.core.engine import NAMED_LAYER_RECORDS, LayerEmission, code, comment_error, expr, translate_layer
from fwport.core.finding import Severity
from fwport.core.names import ScopedResolver, bound_names, dotted_text, find_all, marked, scan, skip_unmarked
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.passes.runtime import MARK as DROP_MARK  # a statement runtime.finish removes
from fwport.packs.tf2torch.passes import regularizers
from fwport.packs.tf2torch.dims import Sizes, SizedContext, module_scope, plain, symbolic_shape

SEQUENTIAL = "keras.Sequential"
INPUTS = ("keras.Input", "keras.layers.InputLayer", "keras.InputLayer")  # names.canonical spells InputLayer both ways
_SEQUENTIAL_KWARGS = {"layers", "name", "trainable"}
# ctx.analyses keys this pass fills for the subclass pass: the ids of the nn.Sequential calls it
# emitted, and model key → (input rank, output rank), batch included, None where unknown
NODES = "tf2torch-sequential-nodes"
RANKS = "tf2torch-sequential-ranks"
# id(nn.Sequential call) → (that call, input rank, output rank, records' scope) of a channels-first Sequential bound to a
# local name in a method of a Keras subclass of the file: the subclass pass finds its calls through the list
# attribute it is appended to (self.blocks.append(block); self.blocks[i](x)) and permutes there, or reports it
LOCAL_NCHW = "tf2torch-sequential-local-nchw"


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    p = _SequentialPass(ctx)
    regularizers.note_functions(module, ctx)  # (a regularizer a function of the file returns)
    for stmt in module.body:  # (a module-level model's regularizers: only a name bound once, see _regularizer_home)
        for t in find_all(stmt, cst.AssignTarget) if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else ():
            if isinstance(t.target, cst.Name):
                p.module_bound[t.target.value] = p.module_bound.get(t.target.value, 0) + 1
    p.homes = regularizers.sequential_homes(module, ctx)  # (where a model's regularizer penalties can live)
    p.visit_Module(module)  # the module-level chains
    # only the top-level statements holding a call this pass rewrites are visited (a transformer
    # rebuilds every node it visits): the others stay the very same nodes
    relevant = [i for i, stmt in enumerate(module.body) if _Concerns.find(stmt, ctx)]
    if not relevant:
        return module
    body = list(module.body)
    settled = ctx.settled
    for i in relevant:
        p.hot = marked(body[i], lambda n: type(n) is cst.Call or settled.get(id(n)) is n)
        body[i] = rewrite(body[i], p)
    return module.with_changes(body=p._drop_input_adds(module.body, body))


class _Concerns:
    """Whether a statement holds a ``keras.Sequential(...)`` call (shadowing ignored) or an ``x.add(...)``."""

    @staticmethod
    def find(stmt: cst.CSTNode, ctx: FileContext) -> bool:
        resolve = ctx.imports.resolve
        return any((isinstance(c.func, cst.Attribute) and c.func.attr.value == "add") or resolve(c.func) == SEQUENTIAL
                   for c in find_all(stmt, cst.Call))


@dataclass
class _Chain:
    """One Sequential model: its elements in Keras order and what each became."""

    call: cst.Call  # the keras.Sequential(...) call (input tree)
    target: str  # "model", "self.features", "" (returned / passed directly)
    elements: list[cst.BaseExpression] = field(default_factory=list)  # list elements, then .add args
    # id(element) → modules to emit; [] for an input spec (removed); missing: left as written
    out: dict[int, list[cst.BaseExpression]] = field(default_factory=dict)
    input_note: str = ""  # the comment that takes the place of a removed keras.Input line
    bad_args: bool = False
    add_calls: list[cst.Call] = field(default_factory=list)  # the followed model.add(...) calls
    # (node, why) when an .add on this model cannot be followed: the whole model is left as written
    refused: tuple[cst.CSTNode, str] | None = None
    escaped: cst.CSTNode | None = None  # a call the model was passed to while layers were still added
    list_name: str = ""  # keras.Sequential(layers): the local list its layers were collected in
    from_list: bool = False  # that list was followed: the call becomes nn.Sequential(*layers)
    repeated: set[int] = field(default_factory=set)  # ids of the elements added in a loop (_unrolled_adds)
    local: tuple | None = None  # (in rank, out rank, scope): channels-first, bound to a local name of a method


class _SequentialPass(ScopedResolver, cst.CSTTransformer):
    def __init__(self, ctx: FileContext):
        super().__init__()
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.classes: list[str] = []
        self.functions: list[tuple[str, set[str]]] = []  # (name, names it returns)
        self.fn_nodes: list[cst.FunctionDef] = []
        self.module_sizes: tuple[dict, set] = ({}, set())  # module constants, stable module names
        self.chains: dict[int, _Chain] = {}  # id(Sequential call) → chain
        self.adds: dict[int, tuple[_Chain, cst.BaseExpression]] = {}  # id(add statement) → chain, element
        self.followed: set[int] = set()  # ids of the .add calls that belong to a chain
        self._statement: cst.SimpleStatementLine | None = None  # the current statement (its comments)
        self.hot: set[int] | None = None  # see on_visit
        self.module_bound: dict[str, int] = {}  # module-level name → how many assignments bind it
        self.homes: dict[int, tuple[str, str, cst.FunctionDef]] = {}  # regularizers.sequential_homes

    # --- where we are -----------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node.name.value)

    def leave_ClassDef(self, original_node, updated_node):
        self.classes.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        returned = _ReturnedNames()
        scan(node.body, returned)
        self.functions.append((node.name.value, returned.names))
        self.fn_nodes.append(node)

    def leave_FunctionDef(self, original_node, updated_node):
        self.functions.pop()
        self.fn_nodes.pop()
        return super().leave_FunctionDef(original_node, updated_node)

    def _is_sequential(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and self.qualname(node.func) == SEQUENTIAL

    # --- finding the chains (top-down, so that a model's .add statements are known first) ----------
    def _named_layer(self, el: cst.BaseExpression) -> cst.Call | None:
        """The call ``layers.X(...)`` (a layer rule with weights) that a module-level name used as a Sequential
        element is bound to, where the file binds that name nowhere else (no function parameter, loop, import or
        other assignment of it)."""
        module = getattr(self, "module_node", None)
        if not isinstance(el, cst.Name) or module is None:
            return None
        found = []
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and any(
                            isinstance(t.target, cst.Name) and t.target.value == el.value for t in small.targets):
                        found.append(small.value if len(small.targets) == 1 else None)
        if len(found) != 1 or not isinstance(found[0], cst.Call):
            return None
        others = [t.target for t in find_all(module, cst.AssignTarget)]
        others += [f.target for f in find_all(module, cst.For)]
        others += [k.target for kind in (cst.AugAssign, cst.AnnAssign, cst.NamedExpr) for k in find_all(module, kind)]
        others += [w.asname.name for w in find_all(module, cst.WithItem) if w.asname is not None]
        others += [a.asname.name if a.asname is not None else a.name for a in find_all(module, cst.ImportAlias)]
        others += [p.name for p in find_all(module, cst.Param)]
        count = sum(1 for t in others for n in ([t] if isinstance(t, cst.Name) else find_all(t, cst.Name))
                    if n.value == el.value)
        if count != 1:
            return None
        q = self.qualname(found[0].func)
        rule = self.ctx.pack.by_name.get(q) if q else None
        return found[0] if rule is not None and rule.kind == "layer" and rule.weights else None

    def visit_Module(self, node: cst.Module) -> None:
        self.module_sizes = module_scope(node, self.ctx)
        self.module_node = node
        # the file's Keras subclasses (translated to nn.Modules that keep Keras's layout at their
        # boundary): what a list of layers built in a loop may hold
        self.keras_classes: set[str] = set()
        for stmt in node.body:
            if isinstance(stmt, cst.ClassDef) and any(
                    self.qualname(b.value) in _KERAS_BASES or (isinstance(b.value, cst.Name)
                                                             and b.value.value in self.keras_classes)
                    for b in stmt.bases):
                self.keras_classes.add(stmt.name.value)
        self._plan_block(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._plan_block(node.body)

    def _plan_block(self, body) -> None:
        open_chains: dict[str, _Chain] = {}
        started: list[_Chain] = []
        for stmt in body:
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            if (isinstance(small, cst.Assign) and len(small.targets) == 1 and self._is_sequential(small.value)
                    and not self.ctx.is_settled(small.value)):  # settled: an earlier pass said why not
                target = dotted_text(small.targets[0].target) or ""
                _follow_uses(cst.SimpleStatementLine([cst.Expr(small.value)]), open_chains)
                chain = self._start(small.value, target)
                started.append(chain)
                if target:
                    open_chains[target] = chain
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                call = small.value
                chain = open_chains.get(_add_receiver(call) or "")
                if chain is not None and _is_plain_add(call):
                    if chain.escaped is not None:
                        chain.refused = (call, f"layers are added after the model was passed to "
                                         f"{code(chain.escaped)}, which may add layers fwport cannot see")
                    chain.elements.append(call.args[0].value)
                    chain.add_calls.append(call)
                    self.followed.add(id(call))
                    self.adds[id(stmt)] = (chain, call.args[0].value)
                    continue
            if isinstance(stmt, cst.For) and self._unrolled_adds(stmt, open_chains):
                continue
            _follow_uses(stmt, open_chains)
        for chain in started:
            self._translate(chain)

    def _unrolled_adds(self, loop: cst.For, open_chains: dict[str, _Chain]) -> bool:
        """``for _ in range(n): model.add(layer)`` with n known here (a literal, a module constant) and a body
        of plain ``.add`` lines of followed models that do not read the loop's variable: the layers are
        followed n times in order (the statements stay: ``model.append(...)`` in the same loop), and
        _translate checks that every pass of the loop translates each layer alike."""
        it = loop.iter
        if (loop.orelse is not None or loop.asynchronous is not None or not isinstance(loop.target, cst.Name)
                or not isinstance(it, cst.Call) or not isinstance(it.func, cst.Name) or it.func.value != "range"
                or "range" in self.module_sizes[1] or len(it.args) != 1
                or it.args[0].keyword is not None or it.args[0].star or not isinstance(loop.body, cst.IndentedBlock)):
            return False
        count = Sizes.at(*self.module_sizes, self.fn_nodes).constant(it.args[0].value)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            return False
        adds = []
        for stmt in loop.body.body:
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            call = small.value if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) else None
            chain = open_chains.get(_add_receiver(call) or "") if call is not None else None
            if chain is None or not _is_plain_add(call) or chain.escaped is not None:
                return False
            el = call.args[0].value
            q = self.qualname(el.func) if isinstance(el, cst.Call) else None
            rule = self.ctx.pack.by_name.get(q) if q else None
            if rule is None or rule.kind != "layer" or q in INPUTS:
                return False  # a block of the file, an input spec: not followed in a loop
            adds.append((stmt, chain, call))
        if not adds or any(isinstance(n, cst.Name) and n.value == loop.target.value
                           for n in find_all(loop.body, cst.Name)):
            return False
        for _ in range(count):
            for stmt, chain, call in adds:
                chain.elements.append(call.args[0].value)
        for stmt, chain, call in adds:
            chain.add_calls.append(call)
            chain.repeated.add(id(call.args[0].value))
            self.followed.add(id(call))
            self.adds[id(stmt)] = (chain, call.args[0].value)
        return True

    def _start(self, call: cst.Call, target: str) -> _Chain:
        chain = _Chain(call, target)
        self.chains[id(call)] = chain
        layers = None
        for i, arg in enumerate(call.args):
            kw = arg.keyword.value if arg.keyword else ("layers" if i == 0 else None)
            if arg.star or kw not in _SEQUENTIAL_KWARGS:
                chain.bad_args = True
            elif kw == "layers":
                layers = arg.value
            elif kw == "trainable" and literal_value(arg.value, None) is not True:
                chain.bad_args = True
        if isinstance(layers, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement)
                                                                 for e in layers.elements):
            chain.elements = [e.value for e in layers.elements]
        elif isinstance(layers, cst.Name) and not chain.bad_args:
            chain.list_name = layers.value  # followed (or refused with the reason) by _translate_list
        elif layers is not None:
            chain.bad_args = True
        return chain

    # --- translating a chain -------------------------------------------------------------------------
    def _scope(self, target: str) -> tuple[str, str, str]:
        """(scope, path prefix, model key) for a Sequential assigned to ``target``."""
        if target.startswith("self.") and self.classes:
            attr = target[len("self."):]
            return self.classes[-1], f"{attr}.", f"{self.classes[-1]}.{attr}"
        if self.functions:
            fn, returned = self.functions[-1]
            if not target or target in returned:
                return fn, "", fn
            return f"{fn}.{target}", "", f"{fn}.{target}"
        name = target or "Sequential"
        return name, "", name

    def _translate(self, chain: _Chain) -> None:
        ctx = self.ctx
        if chain.bad_args:
            ctx.report(Severity.ERROR, "unsupported-construct", "keras.Sequential with arguments other than a "
                       "literal list of layers (and name=) cannot be followed statically; list the layers",
                       chain.call)
            ctx.settle(chain.call)
            self._settle_adds(chain)
            return
        if chain.list_name:
            self._translate_list(chain)
            return
        if chain.refused is not None:
            node, why = chain.refused
            fix = ("build it from a list (keras.Sequential([...])), or translate it by hand: nn.Sequential "
                   "has .append but no .add")
            ctx.report(Severity.ERROR, "unsupported-construct", f"{why}; fwport left this Sequential model "
                       f"untranslated: {fix}", chain.call)
            if node is not chain.call:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{why}: this Sequential model was left "
                           "untranslated", node)
            ctx.settle(chain.call)
            self._settle_adds(chain)
            if isinstance(node, cst.Call):
                ctx.settle(node)
            return
        scope, prefix, key = self._scope(chain.target)
        sizes = Sizes.at(*self.module_sizes, self.fn_nodes)
        elements = list(chain.elements)
        in_shape: tuple | None = None
        input_text: tuple[str, ...] | None = None
        shape_name: str | None = None  # keras.Input(shape=<a parameter>): rank unknown
        layers: list[tuple[cst.BaseExpression, object]] = []  # (element, rule or None)
        for i, el in enumerate(elements):
            q = self.qualname(el.func) if isinstance(el, cst.Call) else None
            if q in INPUTS:
                if layers:
                    ctx.report(Severity.ERROR, "unsupported-construct", "an input specification must come first "
                               "in a Sequential model", el)
                    ctx.settle(el)
                    continue
                # only a declaration of the input: removed, its shape feeds the layers
                in_shape, input_text = _input_spec_shape(el, sizes)
                shape_name = _shape_name(el, sizes)
                chain.out[id(el)] = []
                chain.input_note = f"{code(el)}"
                continue
            rule = ctx.pack.by_name.get(q) if q else None
            layers.append((el, rule if rule is not None and rule.kind == "layer" else None))
        if in_shape is None and layers and layers[0][1] is not None:
            in_shape = _input_spec_shape(layers[0][0], sizes, None)[0]
            shape_name = shape_name or _shape_name(layers[0][0], sizes, None)
        parts = None
        if in_shape is None and shape_name is None:
            spec = next((el for el in elements if isinstance(el, cst.Call) and self.qualname(el.func) in INPUTS), None)
            parts = _shape_parts(spec, sizes) if spec is not None else None
        elif shape_name is not None:
            parts = (shape_name, (), ())
        if in_shape is None and parts is not None and layers and layers[0][1] is not None:
            rank = _implied_rank(layers[0][1])  # a Conv2D sees (h, w, c) whatever the caller passes
            if rank is not None:
                in_shape = symbolic_parts(parts, rank)

        nchw = converts_to_nchw(layers)
        deferred = (nchw and self.classes and chain.target.isidentifier() and self.fn_nodes
                    and self.classes[-1] in self.keras_classes)
        if nchw and self.classes and not chain.target.startswith("self.") and not deferred:
            # built in a method but not held as self.<attr> (appended to a list, bound to a local name): the
            # subclass pass finds no call of it to permute around, and a channels-last body would feed it NHWC
            ctx.report(Severity.ERROR, "unsupported-construct", "this Sequential model is translated channels-first "
                       "(NCHW) but is not held as self.<attribute> (it is appended to a list or bound to a local "
                       "name), so fwport cannot find its calls to permute their channels-last inputs: assign it to "
                       "an attribute (self.block = keras.Sequential([...])), or permute around its calls by hand "
                       "(x.permute(0, 3, 1, 2) in, .permute(0, 2, 3, 1) out)", chain.call)
        norms_kept = nchw and in_shape is None and shape_name is None and _last_axis_norms_only(layers)
        if norms_kept:
            # nothing gains from channels-first: each BatchNormalization takes the last axis whatever its
            # input's rank (LazyLastAxisBatchNorm, translated as for an unknown rank even where a Reshape
            # before it makes the rank known: torch's BatchNorm1d on (batch, steps, C) would take dim 1)
            nchw = False
        layout = "nchw" if nchw else "keep"
        in_layout = "nchw" if nchw and (in_shape is None or len(in_shape) > 1) else "same"
        if in_layout == "nchw":
            shown = f" (batch, {', '.join(map(str, in_shape))})" if in_shape else ""
            ctx.report(Severity.INFO, "layout-changed", f"this Sequential model takes channels-last inputs{shown}; "
                       "the translation is channels-first (NCHW): permute inputs with x.permute(0, 3, 1, 2)"
                       if in_shape is None or len(in_shape) == 3 else
                       f"this Sequential model takes channels-last inputs{shown}; the translation is "
                       "channels-first: move the channel axis to dim 1", chain.call)
        if chain.input_note:
            chain.input_note = _input_note(in_shape, nchw, input_text)

        home = self._regularizer_home(chain)
        shape = in_shape
        flatten_of = None
        producer: tuple[LayerRecord, tuple] | None = None  # the Dense that computed the current features
        index = 0  # position in the nn.Sequential
        masked = mask_live = False  # Keras's mask: packed for the next layer / left on an unpacked sequence
        # the nn.Sequential entries [start, end) of each Keras layer (SPANS); None once a layer is not translated
        spans: list[tuple[int, int]] | None = [] if not prefix and not chain.repeated else None
        for k, (el, rule) in enumerate(layers):
            if spans is not None and len(spans) != k:
                spans = None  # (the layer before took another path than a translation's)
            if id(el) in chain.repeated and ctx.is_settled(el):  # an earlier pass of its loop reported it
                shape, flatten_of, producer = None, None, None
                index += 1
                continue
            mask_in, mask_out = masked, _mask_out(el, rule, layers[k + 1][1] if k + 1 < len(layers) else None,
                                                  masked, ctx)
            if mask_live and rule is not None and rule.emit.get("shape") in _MASK_CONSUMERS and (
                    rule.emit.get("shape") != "global-pool" or rule.id.endswith("1d")):
                ctx.report(Severity.ERROR, "unsupported-construct", f"{code(el.func) if isinstance(el, cst.Call) else code(el)} "
                           "receives the mask Keras carries from an Embedding(mask_zero=True) or Masking through the "
                           "recurrent layer before it, and leaves the masked steps out: not translated; pool or "
                           "attend over the unmasked steps by hand", el)
                ctx.settle(el)
                shape, flatten_of, producer, mask_live = None, None, None, False
                index += 1
                continue
            if rule is None:
                producer = None
                named = self._named_layer(el) if layout != "nchw" and id(el) not in chain.repeated else None
                if named is not None:
                    # `d = layers.Dense(3)` at module level, `Sequential([..., d, ...])`: the rule pass translates d
                    # where it is built, and records its weights at this element (the verifier's weight map)
                    ctx.analyses.setdefault(NAMED_LAYER_RECORDS, {}).setdefault(id(named), []).append(
                        (scope, f"{prefix}layers[{k}]", f"{prefix}{index}"))
                if layout == "nchw" and (shape is None or len(shape) > 1):
                    ctx.report(Severity.ERROR, "unsupported-construct", f"{code(el.func) if isinstance(el, cst.Call) else code(el)} "
                               "inside a Sequential converted to channels-first would receive NCHW instead of "
                               "NHWC tensors; translate it by hand or make it layout-aware", el)
                    ctx.settle(el)
                elif spans is not None and isinstance(el, (cst.Name, cst.Attribute)):
                    # a model or layer of the file's own (`Sequential([base, Dense(3)])`): its one entry, as Keras's
                    # model.layers lists a nested model as one layer
                    spans.append((index, index + 1))
                shape, flatten_of = None, None
                index += 1
                continue
            if flatten_of is not None and rule.id not in _CARRIES_FLATTEN and rule.emit.get("shape") not in _READS_FLATTEN:
                # its features are in (c, h, w) order here and (h, w, c) in Keras: a layer that is not
                # elementwise would see (or weigh) them in another order, and the layers after it
                # would lose the order to undo
                ctx.report(Severity.ERROR, "unsupported-construct", f"{code(el.func) if isinstance(el, cst.Call) else code(el)} "
                           "after the Flatten of a feature map converted to channels-first sees the features in "
                           "(c, h, w) order instead of Keras's (h, w, c): only elementwise layers (Dropout, "
                           "activations), BatchNormalization and Dense can follow it exactly; keep this model "
                           "channels-last or permute before flattening", el)
                ctx.settle(el)
                shape, flatten_of, producer = None, None, None
                index += 1
                continue
            if layout == "nchw" and rule.emit.get("shape") == "reshape" and shape is not None:
                em = self._reshape_nchw(el, rule, shape, scope, producer, sizes)
            elif norms_kept and rule.id == "batch-normalization":
                em = translate_layer(el, rule, ctx, SizedContext(None, layout, scope, "", None, sizes), el)
                if not em.failed:
                    em.out_shape = shape
            else:
                call, record_penalty = el, None
                if home is not None and isinstance(el, cst.Call) and id(el) not in chain.repeated:
                    call, record_penalty = regularizers.strip(el, rule, lambda f: self._resolve_in(f, home[2]),
                                                              home[2], home[0], home[1], False, ctx)
                em = translate_layer(call, rule, ctx, SizedContext(shape, layout, scope, "", flatten_of, sizes,
                                                                   mask_in, mask_out), el)
                if record_penalty is not None and not em.failed and em.functional is None:
                    record_penalty(f"{home[1]}.{index + em.weight_module}", emitted=em.modules[em.weight_module])
                elif record_penalty is not None and not em.failed:
                    record_penalty.refuse()
            if em.flatten_of is not None and not em.failed and _features_leave(layers[k + 1:]):
                # nothing after it takes Keras's weights in torch's order (no Dense): flattened in Keras's order
                em = self._flatten_channels_last(el, rule, em)
            elif em.flatten_of is not None and not em.failed and _unknown_reads_flatten(layers[k + 1:]):
                # a layer fwport has no rule for reads the features before any Dense: it gets Keras's order
                em = self._flatten_channels_last(el, rule, em, unknown=_unknown_reads_flatten(layers[k + 1:]))
            masked = mask_out and not em.failed
            if mask_in and not mask_out and not em.failed and _returns_sequences(el):
                mask_live = True
            if em.failed or em.functional is not None:
                if em.functional is not None:
                    ctx.report(Severity.ERROR, "unsupported-construct", f"{rule.names[0]} merges several inputs "
                               "and cannot be a member of a Sequential model", el, rule)
                ctx.settle(el)
                shape, flatten_of, producer = _rank_kept(rule, shape) if em.functional is None else None, None, None
                index += 1
                continue
            if id(el) in chain.out and [code(m) for m in chain.out[id(el)]] != [code(m) for m in em.modules]:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{code(el.func)} added in a loop translates "
                           f"differently on its passes ({code(chain.out[id(el)][0])}, then {code(em.modules[0])}: "
                           "its input size changes), and the loop's one statement cannot be both: add the layers "
                           "one by one (or build the model from a list)", el)
                ctx.settle(el)
                chain.out.pop(id(el))
                shape, flatten_of, producer = None, None, None
                index += 1
                continue
            chain.out[id(el)] = em.modules
            if spans is not None:
                spans.append((index, index + len(em.modules)))
            if rule.weights and not prefix and id(el) not in chain.repeated:
                remember_layer(ctx, scope, k, str(index + em.weight_module), rule.id, em.variant, el)
            if rule.weights:
                record = LayerRecord(scope, f"{prefix}layers[{k}]", f"{prefix}{index + em.weight_module}",
                                     rule.id, em.variant, dict(em.symbols))
                ctx.layers.append(record)
                # a Dense whose output rows a Reshape to a feature map after it may reorder
                producer = (record, shape) if rule.id == "dense" and em.variant is None else None
            elif rule.id not in _ELEMENTWISE:
                producer = None
            index += len(em.modules)
            carried = flatten_of if rule.id in _CARRIES_FLATTEN else None  # a Dropout keeps the order
            shape, flatten_of = em.out_shape, em.flatten_of or carried
        if spans is not None and len(spans) != len(layers):
            spans = None
        if not prefix:  # (two Sequentials of one scope: neither is known by its name)
            known = ctx.analyses.setdefault(SPANS, {})
            known[scope] = (spans, nchw) if scope not in known and spans is not None else None
        out_layout = "nchw" if nchw and (shape is None or len(shape) > 1) else "same"
        if in_layout == "same" and out_layout == "nchw":
            ctx.report(Severity.INFO, "layout-changed", "this Sequential model's feature maps are channels-first "
                       "(NCHW) in the translation: its inputs are unchanged, its outputs have the channels at "
                       "dim 1 (y.movedim(1, -1) gives Keras's layout)", chain.call)
        declared = tuple(plain(d) for d in in_shape) if in_shape is not None else None  # ints only
        ctx.models[key] = ModelInfo(key, "sequential", declared, in_layout, out_layout)
        # the ranks of its input and output (batch included) where known, for the permutes of a
        # channels-last subclass body that calls it: a first Conv2D implies a 4-D input
        in_rank = len(in_shape) + 1 if in_shape is not None else None
        if in_rank is None and layers and layers[0][1] is not None and _implied_rank(layers[0][1]):
            in_rank = _implied_rank(layers[0][1]) + 1
        ctx.analyses.setdefault(RANKS, {})[key] = (in_rank, len(shape) + 1 if shape is not None else None)
        if deferred:  # a local name in a method: the subclass pass looks for its calls (LOCAL_NCHW)
            chain.local = (*ctx.analyses[RANKS][key], scope)

    def _regularizer_home(self, chain: _Chain) -> tuple[str, str, cst.FunctionDef] | None:
        """(class, attribute, __init__) of a Sequential built in a class's ``__init__`` and held as
        ``self.<attribute>`` (assigned there, or built in a local name that one ``self.<attribute> = name`` of
        __init__ keeps): its layers' kernel_regularizer / bias_regularizer go into the class's
        regularization_loss() (regularizers.py) as a subclass's own layers' do. A Sequential bound to a name at
        module level (``model = keras.Sequential([...])``) or in a top-level function (bound once to a local name,
        or returned): regularizers.sequential_homes, a function ``<name>_regularization_loss`` written beside it
        and set as the model's ``regularization_loss``, which the written fit adds. None elsewhere (an nn.Sequential has no method to hold them: the layer's rule reports them)."""
        fn = self.fn_nodes[-1] if self.fn_nodes else None
        if not self.classes and id(chain.call) in self.homes:
            # a model bound to a name at module level (rebound later too: the penalty function holds this one), or
            # in a top-level function (bound to a local name once, or returned): a penalty function written beside
            # it (regularizers.sequential_homes)
            return self.homes[id(chain.call)]
        if not self.classes or fn is None or fn.name.value != "__init__":
            return None
        if chain.target.startswith("self.") and chain.target[len("self."):].isidentifier():
            return self.classes[-1], chain.target[len("self."):], fn
        if not chain.target.isidentifier():
            return None
        kept = [t.target.attr.value for st in find_all(fn.body, cst.Assign) for t in st.targets
                if isinstance(st.value, cst.Name) and st.value.value == chain.target
                and isinstance(t.target, cst.Attribute) and dotted_text(t.target.value) == "self"]
        return (self.classes[-1], kept[0], fn) if len(kept) == 1 else None

    def _resolve_in(self, node: cst.BaseExpression, fn: cst.FunctionDef) -> str | None:
        parts = dotted_text(node)
        if not parts or parts.split(".")[0] in bound_names(fn):
            return None
        return self.qualname(node)

    def _translate_list(self, chain: _Chain) -> None:
        """``keras.Sequential(layers)`` with ``layers`` a list built in the same function
        (``layers = []`` then ``layers.append(block(...))``, in loops too) → ``nn.Sequential(*layers)``.

        Followed where every element is built by a class of this file that is translated to an
        nn.Module (a Keras subclass: it takes and returns Keras's layout, so the chain needs no
        permute), or by a callable passed in as a parameter of the function (the caller's class; a
        Keras layer class passed there would stay in the output as a residue error). Keras layers
        built by the rules are refused: their sizes and layout inside the list are not followed."""
        ctx = self.ctx
        name = chain.list_name

        def refuse(why: str, node: cst.CSTNode = chain.call) -> None:
            ctx.report(Severity.ERROR, "unsupported-construct", f"keras.Sequential({name}): {why}; list the "
                       "layers (keras.Sequential([...])) or translate it by hand as nn.Sequential(*layers) of "
                       "torch modules", node)
            ctx.settle(chain.call)

        fn = self.fn_nodes[-1] if self.fn_nodes else None
        if fn is None:
            return refuse(f"the list {name} is built at module level, which fwport does not follow")
        params = {p.name.value for p in (*fn.params.params, *fn.params.posonly_params, *fn.params.kwonly_params)}
        if name in params:
            return refuse(f"the list {name} is passed in, so its elements are not known here")
        found = _ListBuild(name, chain.call)
        scan(fn.body, found)
        if found.other is not None:
            return refuse(f"{name} is used otherwise than assigned once as a list and grown with "
                          f".append/.extend ({code(found.other)})", found.other)
        if found.assigns != 1:
            return refuse(f"{name} is not assigned exactly once as a list literal in {fn.name.value}()")
        passed_in = []
        for el in found.elements:
            func = el.func if isinstance(el, cst.Call) else None
            if isinstance(func, cst.Name) and func.value in self.keras_classes:
                continue
            if isinstance(func, cst.Name) and func.value in params:
                passed_in.append(func.value)
                continue
            q = self.qualname(func) if func is not None else None
            what = f"{code(el)} is a Keras layer built by a rule" if q and q.startswith("keras.") else \
                f"{code(el)} is not built by a Keras subclass of this file (or a class passed in)"
            return refuse(f"{what}: fwport follows lists of blocks whose classes it translates", el)
        if not found.elements:
            return refuse(f"nothing is appended to {name}")
        chain.from_list = True
        note = ""
        if passed_in:
            names = ", ".join(sorted(set(passed_in)))
            note = (f"; {names} is passed in to {fn.name.value}(): a class of this file translated to an "
                    "nn.Module is assumed (a Keras layer class passed there stays Keras in the output and is "
                    "reported where it is passed)")
        ctx.report(Severity.INFO, "layout-kept", f"keras.Sequential({name}) → "
                   f"nn.Sequential(*{name}): the blocks appended to {name} keep Keras's layout at their "
                   f"boundaries and are called in order with one argument{note}", chain.call)

    def _reshape_nchw(self, el: cst.Call, rule, shape: tuple, scope: str,
                      producer: tuple[LayerRecord, tuple] | None, sizes) -> LayerEmission:
        """Reshape in a chain converted to channels-first, where its input size is known.

        Keras reshapes in channels-last order. From features to a feature map (a generator's
        ``Dense → Reshape((7, 7, 64))``) the result is exact as ``nn.Unflatten(1, (64, 7, 7))`` once
        the Dense before it computes its outputs in (c, h, w) order: its record takes the weight
        variant ``before-unflatten``. From a feature map to features it is a Flatten (the next Dense
        reorders its rows). Anything else would permute the data silently and is refused."""
        ctx = self.ctx
        em = translate_layer(el, rule, ctx, SizedContext(shape, "keep", scope, "", sizes=sizes), el)
        if em.failed:
            return em
        out = em.out_shape
        name = code(el.func)

        def refuse(why: str) -> LayerEmission:
            ctx.report(Severity.ERROR, "unsupported-construct", f"{name}{why}; Keras reshapes in channels-last "
                       "order, so the result would be silently permuted: reshape explicitly with permutes, or "
                       "keep this model channels-last", el, rule)
            return LayerEmission([el], failed=True)

        if out is None:
            return refuse(" to a shape fwport cannot read, in a model converted to channels-first")
        if not all(isinstance(n, int) for n in (*shape, *out)):
            # sizes known only when the model is built (a ViT / CaiT patch embedding: Conv2D(d, p, p), then
            # Reshape((-1, d))): no weight order can absorb it, the helper reshapes in Keras's order, exactly
            return self._channels_last_reshape(el, out)
        if len(shape) == 1 and len(out) == 1:
            return em
        if len(out) == 1 and len(shape) in (2, 3):  # a flatten of the map
            *sp, c = shape
            h, w = (sp[0], 1) if len(sp) == 1 else sp
            return LayerEmission([expr(f"{ctx.spell_text('torch.nn.Flatten')}()")], out, flatten_of=(h, w, c))
        if len(shape) == 1 and len(out) in (2, 3):
            if producer is None:
                return self._channels_last_reshape(el, out)
            record, dense_in = producer
            *sp, c = out
            h, w = (sp[0], 1) if len(sp) == 1 else sp
            record.variant = "before-unflatten"
            record.symbols = {"I": dense_in[-1], "H": h, "W": w, "C": c}
            record.__post_init__()  # plain ints
            sizes = (c, *sp)
            return LayerEmission([expr(f"{ctx.spell_text('torch.nn.Unflatten')}(1, {sizes})")], out)
        return self._channels_last_reshape(el, out)

    def _flatten_channels_last(self, el: cst.Call, rule, em: LayerEmission, unknown: str = "") -> LayerEmission:
        """A Flatten (or a Reshape to features) of a channels-first map that the model's output leaves with,
        only layers that keep each feature apart after it (Dropout, activations, BatchNormalization): no Dense
        takes Keras's weights in torch's order, so the map is flattened in Keras's (h, w, c) order instead, by
        the ChannelsLastReshape helper (written out in the file), and the output is Keras's, exactly. Likewise
        where ``unknown`` (its text), a layer without a rule (a class of the file, an import fwport does not know),
        reads the features before any Dense: whatever it does with them, it sees them in Keras's order."""
        if rule.emit.get("shape") == "reshape":
            return self._channels_last_reshape(el, em.out_shape)
        name = helpers.use(self.ctx, "ChannelsLastReshape")
        where = (f"is read by {unknown}, a layer fwport has no rule for (it may weigh or mix the features)"
                 if unknown else "ends this Sequential model (no Dense after it)")
        self.ctx.report(Severity.INFO, "layout-kept", f"{code(el.func)} of a channels-first feature map {where}: "
                        f"{name}((-1,)) (written out in this file) moves the channels last before flattening, so its "
                        "features come out in Keras's (h, w, c) order", el, rule)
        return LayerEmission([expr(f"{name}((-1,))")], em.out_shape)

    def _channels_last_reshape(self, el: cst.Call, out: tuple) -> LayerEmission:
        """A Reshape no weight order can absorb (to a map after a layer that is not a Dense, or from one
        map to another): the ChannelsLastReshape helper, written out in the file, reshapes in Keras's
        channels-last order between permutes, exactly."""
        target = call_argument(el, "target_shape", 0)  # (bound: translate_layer refused *args / **kwargs)
        name = helpers.use(self.ctx, "ChannelsLastReshape")
        self.ctx.report(Severity.INFO, "layout-kept", f"{code(el.func)} in a model converted to channels-first: "
                        f"{name} (written out in this file) reshapes in Keras's channels-last order and gives "
                        "feature maps back channels-first", el)
        return LayerEmission([expr(f"{name}({code(target)})")], out)

    def _stray_add(self, call: cst.Call) -> None:
        """``x.add(keras layer)`` on a model no chain followed (built elsewhere, passed to a helper):
        the layer must not be translated out of context, leaving an ``.add`` nn.Sequential lacks."""
        if self.ctx.is_settled(call) or not call.args:
            return
        if isinstance(call.func, cst.Attribute) and self.qualname(call.func) is not None:
            return  # keras.ops.add(a, b) and the like: a function of an imported module, not a model's .add
        layer = call.args[0].value
        q = self.qualname(layer.func) if isinstance(layer, cst.Call) else None
        rule = self.ctx.pack.by_name.get(q) if q else None
        if q is None or not (q.startswith("keras.layers.") or (rule is not None and rule.kind == "layer")):
            return
        self.ctx.settle(call)
        if self._statement is not None and (said := comment_error(self._statement, q.rsplit(".", 1)[-1])):
            # a translation left it with its reason: the same error again (the comment is not repeated)
            self.ctx.report(Severity.ERROR, said[0], said[1], call)
            return
        self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(call.func)}(...) adds a Keras layer to a "
                        "model whose construction fwport cannot follow (built elsewhere, or passed in): the layer's "
                        "input size is unknown here and nn.Sequential has no .add; build the model in one place "
                        "(keras.Sequential([...]) or Sequential() + .add lines), or translate it by hand with "
                        ".append", call)

    def _settle_adds(self, chain: _Chain) -> None:
        for call in chain.add_calls:
            self.ctx.settle(call)

    # --- rewriting (bottom-up) -------------------------------------------------------------------------
    def on_visit(self, node: cst.CSTNode) -> bool:
        # only subtrees with a call or a settled node inside: every hook that changes anything is on one
        skip = skip_unmarked(self, node, self.hot)
        return default_visit(self, node) if skip is None else skip

    def on_leave(self, original_node, updated_node):
        # settled nodes keep their identity for the passes after this one
        out = default_leave_transform(self, original_node, updated_node)
        return original_node if self.ctx.is_settled(original_node) else out

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if _add_receiver(original_node) and id(original_node) not in self.followed:
            self._stray_add(original_node)
        chain = self.chains.get(id(original_node))
        if chain is None and self._is_sequential(original_node) and not self.ctx.is_settled(original_node):
            # not assigned in a statement of its own (returned, passed, nested): a chain of its own
            chain = self._start(original_node, "")
            self._translate(chain)
        if chain is None or chain.bad_args or chain.refused is not None:
            return updated_node
        out = self._rewrite_sequential(chain, original_node, updated_node)
        self.ctx.analyses.setdefault(NODES, set()).add(id(out))  # the subclass pass: a torch module
        if chain.local is not None:
            self.ctx.analyses.setdefault(LOCAL_NCHW, {})[id(out)] = (out, *chain.local)
        return out

    def _module_args(self, chain: _Chain, orig: cst.BaseExpression, new: cst.BaseExpression) -> list[cst.BaseExpression]:
        if self.ctx.is_settled(orig):
            return [orig]  # the very node that was reported, so that later passes leave it alone
        return chain.out.get(id(orig), [new])

    def _rewrite_sequential(self, chain: _Chain, original: cst.Call, updated: cst.Call) -> cst.Call:
        seq = self.ctx.spell("torch.nn.Sequential")
        if chain.from_list:
            return cst.Call(seq, [cst.Arg(cst.Name(chain.list_name), star="*")])
        orig_list = next((a.value for a in original.args if (a.keyword is None or a.keyword.value == "layers")
                          and isinstance(a.value, (cst.List, cst.Tuple))), None)
        if orig_list is None:
            return cst.Call(seq, [])
        i_list = next(i for i, a in enumerate(original.args) if a.value is orig_list)
        new_list = updated.args[i_list].value
        elements: list[cst.Element] = []
        lead = _bracket_ws(new_list, "after")  # whitespace before the next element
        for o, n in zip(orig_list.elements, new_list.elements):
            mods = self._module_args(chain, o.value, n.value)
            comma = n.comma
            if not mods:  # an input specification: its line becomes a comment
                after = comma.whitespace_after if isinstance(comma, cst.Comma) else cst.SimpleWhitespace("")
                lead = _fold_comment(lead if not elements else _ws_after(elements[-1]), after, chain.input_note)
                if elements:
                    elements[-1] = _with_ws_after(elements[-1], lead)
                continue
            parts = [cst.Element(m, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for m in mods[:-1]]
            parts.append(cst.Element(mods[-1], comma=comma))
            elements += parts
        # `Sequential(\n    [\n        a,\n    ]\n)` (Black's layout): the elements move out one level with
        # the brackets, whose lines are left marked and removed by finish (passes keep line numbers)
        outer = updated.whitespace_before_args
        delta = 0
        if isinstance(outer, cst.ParenthesizedWhitespace) and isinstance(lead, cst.ParenthesizedWhitespace):
            delta = max(0, len(lead.last_line.value) - len(outer.last_line.value))
            lead = _dedent(lead, delta)
            elements = [_with_ws_after(e, _dedent(_ws_after(e), delta))
                        if isinstance(_ws_after(e), cst.ParenthesizedWhitespace) else e for e in elements]
        args: list[cst.Arg] = [cst.Arg(e.value, comma=e.comma) for e in elements]
        if args:
            last = args[-1]
            tail = _bracket_ws(new_list, "before")
            # what stood before `)`: after the list, or after the arguments that follow it (name=...),
            # which torch's Sequential does not take
            end = updated.args[-1]
            closing = end.comma.whitespace_after if isinstance(end.comma, cst.Comma) else end.whitespace_after_arg
            args[-1] = last.with_changes(whitespace_after_arg=_join_ws(tail, closing, delta > 0))
        if delta:
            self.ctx.options["_sequential_lines"] = True
        return cst.Call(seq, args, whitespace_before_args=_join_ws(outer, lead, delta > 0))

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement = node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        item = self.adds.get(id(original_node))
        if item is None:
            return updated_node
        chain, el = item
        expr_stmt = updated_node.body[0]
        call = expr_stmt.value
        if chain.bad_args or chain.refused is not None or self.ctx.is_settled(el):
            return updated_node  # left as written; the chain or the layer reported why
        if id(el) not in chain.out:  # not a layer with a rule (a user's block): appended as it is
            return updated_node.with_changes(body=[expr_stmt.with_changes(
                value=call.with_changes(func=call.func.with_changes(attr=cst.Name("append"))))])
        mods = chain.out[id(el)]
        if not mods:
            return updated_node  # replaced by a comment in leave of the block
        if len(mods) == 1:
            new_call = call.with_changes(func=call.func.with_changes(attr=cst.Name("append")),
                                         args=[call.args[0].with_changes(value=mods[0])])
        else:
            lst = cst.List([cst.Element(m, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                            for m in mods[:-1]] + [cst.Element(mods[-1])])
            new_call = call.with_changes(func=call.func.with_changes(attr=cst.Name("extend")),
                                         args=[call.args[0].with_changes(value=lst)])
        return updated_node.with_changes(body=[expr_stmt.with_changes(value=new_call)])

    def _drop_input_adds(self, original_body, updated_body) -> list:
        out = list(updated_body)
        for i in range(len(original_body) - 1, -1, -1):
            item = self.adds.get(id(original_body[i]))
            if item is None or item[1] is None:
                continue
            chain, el = item
            if chain.out.get(id(el)) != []:
                continue
            stmt = out[i]
            note = cst.EmptyLine(comment=cst.Comment(f"# {chain.input_note}"))
            lines = [*stmt.leading_lines, note]
            if i + 1 < len(out):
                # marked, not deleted: the finishing steps before runtime.finish (which removes it, its lines
                # going to the next statement) find statements by their places in their blocks
                out[i] = cst.SimpleStatementLine([cst.Expr(cst.Name(DROP_MARK))], leading_lines=lines)
                self.ctx.options["_drop_statements"] = True
            else:
                out[i] = cst.SimpleStatementLine([cst.Pass()], leading_lines=stmt.leading_lines,
                                                 trailing_whitespace=cst.TrailingWhitespace(
                                                     cst.SimpleWhitespace("  "), cst.Comment(f"# {chain.input_note}")))
        return out

    def leave_IndentedBlock(self, original_node, updated_node):
        return updated_node.with_changes(body=self._drop_input_adds(original_node.body, updated_node.body))

    def leave_Module(self, original_node, updated_node):
        return updated_node.with_changes(body=self._drop_input_adds(original_node.body, updated_node.body))


#: layers that read Keras's mask (a masked average, attention over the unmasked steps)
_MASK_CONSUMERS = {"global-pool", "keras-attention", "multi-head-attention"}
_RECURRENT = ("rnn", "bidirectional")


def _returns_sequences(el) -> bool:
    """return_sequences=True written on a recurrent layer, or on the one a Bidirectional wraps."""
    if _literal_kw(el, "return_sequences") is True:
        return True
    inner = call_argument(el, "layer", 0) if isinstance(el, cst.Call) else None
    return _literal_kw(inner, "return_sequences") is True


def _mask_out(el, rule, following, masked: bool, ctx) -> bool:
    """Whether this layer of a Sequential hands Keras's mask, as a PackedSequence, to the recurrent layer
    after it: an Embedding(mask_zero=True) or a Masking, or a recurrent layer that received it and returns
    its sequences."""
    if rule is None or following is None or following.emit.get("shape") not in _RECURRENT:
        return False
    if rule.id == "masking" or (rule.id == "embedding" and _literal_kw(el, "mask_zero") is True):
        return True
    return masked and rule.emit.get("shape") in _RECURRENT


_KERAS_BASES = ("keras.Model", "keras.layers.Layer")


class _ListBuild(cst.CSTVisitor):
    """How a function builds the list ``name`` that it passes to ``keras.Sequential`` (``call``): its
    list-literal assignments, the elements appended (``.append(x)``, ``.extend([...])``, ``+= [...]``),
    and the first use of another kind (``other``)."""

    def __init__(self, name: str, call: cst.Call):
        self.name, self.call = name, call
        self.assigns = 0
        self.elements: list[cst.BaseExpression] = []
        self.other: cst.CSTNode | None = None
        self._seen: set[int] = set()  # the Name nodes accounted for

    def _is(self, node) -> bool:
        return isinstance(node, cst.Name) and node.value == self.name

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self._is(t.target) for t in node.targets):
            if len(node.targets) == 1 and isinstance(node.value, cst.List) and not any(
                    isinstance(e, cst.StarredElement) for e in node.value.elements):
                self.assigns += 1
                self.elements += [e.value for e in node.value.elements]
                self._seen.add(id(node.targets[0].target))
            else:
                self.other = self.other or node

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._is(node.target):
            if isinstance(node.operator, cst.AddAssign) and isinstance(node.value, cst.List):
                self.elements += [e.value for e in node.value.elements]
                self._seen.add(id(node.target))
            else:
                self.other = self.other or node

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if node is self.call:
            self._seen.add(id(node.args[0].value))
        elif isinstance(f, cst.Attribute) and self._is(f.value) and len(node.args) == 1 and not node.args[0].star:
            arg = node.args[0].value
            if f.attr.value == "append":
                self.elements.append(arg)
            elif f.attr.value == "extend" and isinstance(arg, (cst.List, cst.Tuple)):
                self.elements += [e.value for e in arg.elements]
            else:
                return
            self._seen.add(id(f.value))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self._seen:
            self.other = self.other or node

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self._seen.add(id(node.attr))  # tf.keras.layers: an attribute, not the list
        return True

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._seen.add(id(node.keyword))

    def visit_FunctionDef(self, node) -> bool:
        return False  # a nested function's names are its own

    def visit_Lambda(self, node) -> bool:
        return False


class _ReturnedNames(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        if isinstance(node.value, cst.Name):
            self.names.add(node.value.value)


def _add_receiver(call: cst.Call) -> str | None:
    """``model`` / ``self.features`` for a ``<dotted>.add(...)`` call, else None."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "add":
        return dotted_text(call.func.value)
    return None


def _is_plain_add(call: cst.Call) -> bool:
    return len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star


# Layers that act on each feature alone (or, as softmax, on all of them symmetrically): between a
# Dense and a Reshape to a feature map they commute with the reordering of the Dense's outputs.
_ELEMENTWISE = {"dropout", "activation", "relu", "leaky-relu", "elu"}

# Layers after a Flatten of a channels-first map that leave the feature order as it is (a Flatten
# of features is the identity): the next Dense still reorders its kernel rows.
_CARRIES_FLATTEN = _ELEMENTWISE | {"softmax", "flatten"}
# Shape functions that take the flattened order into account (a weight-map variant with H, W, C).
_READS_FLATTEN = {"dense", "batch-norm"}


def _features_leave(after: list) -> bool:
    """Whether the features of a Flatten followed by these layers leave the model in its order: each of
    them a layer with a rule that keeps the features apart (no Dense to reorder its kernel rows)."""
    return all(rule is not None and (rule.id in _CARRIES_FLATTEN or rule.emit.get("shape") == "batch-norm")
               for _, rule in after)

#: (ctx.analyses) (model scope, "layers[k]") → (torch path, rule id, weight-map variant) of a Keras layer with
#: weights, the path the torch module holding all of them (its LayerRecord's target): model_api translates the
#: get_layer(...) of a use that only concerns the weights (freezing, get / set_weights) by it
WHOLE_LAYERS = "layers.weights"
#: (ctx.analyses) (model scope, the Keras name given as name="...") → "layers[k]"
LAYER_NAMES = "layers.names"
#: (ctx.analyses) model scope of a Sequential translated from a list or .add calls → the nn.Sequential entries
#: [start, end) of each of Keras's ``model.layers`` in order, and whether it was made channels-first; None where a
#: layer was not translated (or two Sequentials share the scope): model_api writes ``model.layers`` by it
SPANS = "layers.spans"
#: (ctx.analyses) (model scope, "layers[k]") → the Keras layer's call (its use_bias / center / scale say which
#: weights get_weights() lists)
LAYER_CALLS = "layers.calls"
#: (ctx.analyses) scope of a functional model → how many layers Keras's ``model.layers`` lists (its InputLayers
#: too), where that is known before run time: a negative index counts from it
LAYER_COUNTS = "layers.counts"


def remember_layer(ctx: FileContext, scope: str, k: int, target: str, rule_id: str, variant, call) -> None:
    """Record that the weights of Keras's ``model.layers[k]`` of ``scope`` are those of the torch module at
    ``target``, and its name where the source gives one (WHOLE_LAYERS, LAYER_NAMES)."""
    ctx.analyses.setdefault(WHOLE_LAYERS, {})[(scope, f"layers[{k}]")] = (target, rule_id, variant)
    if isinstance(call, cst.Call):
        ctx.analyses.setdefault(LAYER_CALLS, {})[(scope, f"layers[{k}]")] = call
    name = call_argument(call, "name") if isinstance(call, cst.Call) else None
    value = literal_value(name, None) if name is not None else None
    if isinstance(value, str) and value:
        ctx.analyses.setdefault(LAYER_NAMES, {})[(scope, value)] = f"layers[{k}]"


def _unknown_reads_flatten(after: list) -> str:
    """The text of the first layer without a rule (a class of the file, a layer of a library fwport does not
    know) that the features of a Flatten reach before any layer reading them with a rule (a Dense reorders its
    kernel rows for torch's order; another layer is refused there); "" where there is none. Such a layer must
    see Keras's (h, w, c) order: fwport cannot tell what it does with the features."""
    for el, rule in after:
        if rule is None:
            return code(el.func) if isinstance(el, cst.Call) else code(el)
        if rule.id not in _CARRIES_FLATTEN:
            return ""
    return ""


# Calls that read a model without changing it: passing it to them does not end the chain.
_READERS = {"print", "len", "str", "repr", "isinstance", "id", "type"}
# Methods of a Sequential that change its layers.
_MUTATORS = {"add", "pop"}


class _Uses(BindingWalker):
    """How one statement uses the dotted name ``target`` (a model whose layers are being followed):
    rebinding it, changing its layers (``.add`` / ``.pop`` outside the followed form), or passing it
    to a call that might add layers. Names are compared as libcst nodes, never as text, and a
    nested function that binds the name's head (a parameter ``model``) is not the same model."""

    def __init__(self, target: str):
        super().__init__(lambdas=True)
        self.target = target
        self.head = target.split(".")[0]
        self.rebound = False
        self.mutation: cst.Call | None = None
        self.escape: cst.Call | None = None

    def _is_target(self, node: cst.CSTNode) -> bool:
        return isinstance(node, (cst.Name, cst.Attribute)) and dotted_text(node) == self.target

    def enter_scope(self, node: cst.FunctionDef | cst.ClassDef | cst.Lambda) -> bool:
        if isinstance(node, cst.ClassDef):
            return self.head != "self"
        return self.head not in bound_names(node)  # a closure may change the model

    def bound(self, target: cst.BaseExpression, how: str, value) -> None:
        if how in ("annotation", "global"):
            return
        if self._is_target(target) or (isinstance(target, cst.Name) and target.value == self.head):
            self.rebound = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MUTATORS and self._is_target(func.value):
            self.mutation = self.mutation or node
        elif any(self._is_target(a.value) for a in node.args):
            name = dotted_text(func)
            if name not in _READERS:
                self.escape = self.escape or node


def _follow_uses(stmt: cst.CSTNode, open_chains: dict[str, _Chain]) -> None:
    """A statement other than a plain ``model.add(layer)`` line: does it end, refuse or taint a chain?"""
    for name, chain in list(open_chains.items()):
        uses = _Uses(name)
        scan(stmt, uses)
        if uses.mutation is not None and chain.refused is None:
            where = ("inside a compound statement (if/for/while/with/try/def)" if not isinstance(
                stmt, cst.SimpleStatementLine) else "not written as `model.add(layer)` on a line of its own")
            what = uses.mutation.func.attr.value  # type: ignore[union-attr]
            chain.refused = (uses.mutation, f"{name}.{what}(...) {where}: the layers of the model, and so "
                             "the input size of each, depend on run time")
        if uses.escape is not None and chain.escaped is None:
            chain.escaped = uses.escape.func
        if uses.rebound:
            open_chains.pop(name)


def _rank_kept(rule, shape: tuple | None) -> tuple | None:
    """The shape after a member left as written (its error said why), where its rank is known all the
    same: a Dense keeps its input's rank (its last size unknown here), an elementwise layer its shape. The
    layers after it are then translated for that rank instead of refused for an unknown one (a Dense
    after a refused Dense of features sees features)."""
    if shape is None:
        return None
    if rule.id in _ELEMENTWISE:
        return shape
    if rule.emit.get("shape") == "dense":
        return (*shape[:-1], None)
    return None


def converts_to_nchw(layers: list[tuple[cst.BaseExpression, object]]) -> bool:
    """Whether a Sequential of these (member, rule or None) is translated channels-first (NCHW): one
    member's torch module takes channels-first maps where Keras's layer is channels-last."""
    return any(rule is not None and rule.emit.get("layout") == "channels-first"
               and _literal_kw(el, "data_format") != "channels_first" for el, rule in layers)


def _last_axis_norms_only(layers: list[tuple[cst.BaseExpression, object]]) -> bool:
    """The only members whose torch modules take channels-first maps are BatchNormalizations over the
    last axis (axis=-1, written or default): kept in Keras's layout, they need no rank."""
    return all(rule is None or rule.emit.get("layout") != "channels-first"
               or (rule.id == "batch-normalization" and _literal_kw(el, "axis") in (None, -1)
                   and not any(a.keyword is None for a in el.args))
               for el, rule in layers)


def _literal_kw(call: cst.BaseExpression, name: str):
    if not isinstance(call, cst.Call):
        return None
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return literal_value(a.value, None)
    return None


def _shape_text(node: cst.BaseExpression) -> tuple[str, ...] | None:
    if isinstance(node, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in node.elements):
        return tuple(code(e.value) for e in node.elements)
    return None


def _shape_arg(call: cst.Call, first: str | None) -> tuple[str, cst.BaseExpression] | None:
    """(keyword, value) of the argument that gives a shape, or None."""
    for i, a in enumerate(call.args):
        kw = a.keyword.value if a.keyword else (first if i == 0 else None)
        if kw in ("shape", "input_shape", "batch_shape", "batch_input_shape", "input_dim"):
            return kw, a.value
    return None


def _input_spec_shape(call: cst.Call, sizes: Sizes,
                      first: str | None = "shape") -> tuple[tuple | None, tuple[str, ...] | None]:
    """The shape (without batch) a keras.Input / InputLayer call gives (None: rank unknown), and the
    source text of each size. Each size is an int (a literal or a module constant), a symbolic size
    (a parameter, arithmetic on parameters) or None: ``(14, 12, channels)`` → ``(14, 12, "channels")``.
    ``input_dim=`` is always one size. ``first``: what a first positional argument is (a layer's is
    not a shape)."""
    found = _shape_arg(call, first)
    if found is None:
        return None, None
    kw, node = found
    shape, text = sizes.shape(node, kw == "input_dim"), _shape_text(node)
    if kw.startswith("batch_"):
        shape = shape[1:] if shape else None
        text = text[1:] if text else None
    return shape, text


def _shape_name(call: cst.Call, sizes: Sizes, first: str | None = "shape") -> str | None:
    """``shape=input_shape`` with ``input_shape`` a parameter: its name (the rank is unknown)."""
    found = _shape_arg(call, first)
    if found is None or found[0] not in ("shape", "input_shape"):
        return None
    return sizes.shape_name(found[1])


def _shape_parts(call: cst.Call, sizes: Sizes, first: str | None = "shape") -> tuple | None:
    """``shape=`` a parameter of unknown rank, alone or joined to literal sizes (``img_size + (3,)``,
    ``(1,) + spatial``): (name, sizes before it, sizes after it); None for anything else."""
    found = _shape_arg(call, first)
    if found is None or found[0] not in ("shape", "input_shape"):
        return None
    node = found[1]
    name = sizes.shape_name(node)
    if name is not None:
        return name, (), ()
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        left, right = node.left, node.right
        lname, rname = sizes.shape_name(left), sizes.shape_name(right)
        if lname is not None and isinstance(right, (cst.Tuple, cst.List)):
            tail = sizes.shape(right)
            return (lname, (), tail) if tail is not None else None
        if rname is not None and isinstance(left, (cst.Tuple, cst.List)):
            head = sizes.shape(left)
            return (rname, head, ()) if head is not None else None
    return None


def symbolic_parts(parts: tuple, rank: int) -> tuple | None:
    """The shape of ``rank`` sizes that ``_shape_parts`` describes; None if the rank cannot hold it."""
    name, head, tail = parts
    inner = rank - len(head) - len(tail)
    if inner < 1:
        return None
    return (*head, *symbolic_shape(name, inner), *tail)


# shape functions whose layers take an input of one rank (without the batch axis)
_RANKS = {"zero-padding": 3, "upsampling": 3, "multi-head-attention": 2}


def _implied_rank(rule) -> int | None:
    shape_fn = rule.emit.get("shape")
    if shape_fn in ("upsampling", "pad-crop") and rule.emit.get("options", {}).get("nd"):
        return rule.emit["options"]["nd"] + 1
    if shape_fn in ("conv", "pool", "global-pool"):
        return rule.emit.get("options", {}).get("nd", 0) + 1 or None
    return _RANKS.get(shape_fn)


def _input_note(shape: tuple | None, nchw: bool, text: tuple[str, ...] | None = None) -> str:
    if shape is None:
        return "input: shape unknown"
    shown = tuple(t if d is None else str(d) for d, t in zip(shape, text)) if text and len(text) == len(shape) \
        else tuple("N" if d is None else str(d) for d in shape)
    if nchw and len(shape) > 1:
        shape = (shape[-1], *shape[:-1])
        shown = (shown[-1], *shown[:-1])
    dims = ", ".join(shown)
    return f"input: (batch, {dims})" + (" channels-first" if nchw and len(shape) > 1 else "")


# --- whitespace: a pass keeps the line structure ----------------------------------------------------

def _bracket_ws(node: cst.List | cst.Tuple, which: str):
    if isinstance(node, cst.List):
        return node.lbracket.whitespace_after if which == "after" else node.rbracket.whitespace_before
    if which == "after":
        return node.lpar[0].whitespace_after if node.lpar else cst.SimpleWhitespace("")
    return node.rpar[0].whitespace_before if node.rpar else cst.SimpleWhitespace("")


def _ws_after(el: cst.Element):
    return el.comma.whitespace_after if isinstance(el.comma, cst.Comma) else cst.SimpleWhitespace("")


def _with_ws_after(el: cst.Element, ws) -> cst.Element:
    comma = el.comma if isinstance(el.comma, cst.Comma) else cst.Comma()
    return el.with_changes(comma=comma.with_changes(whitespace_after=ws))


def _fold_comment(before, after, note: str):
    """The whitespace around a removed element, with a comment where its line was."""
    if not isinstance(after, cst.ParenthesizedWhitespace):
        return before  # it shared a line with its neighbours: nothing to keep
    text = f"# {note}"
    if after.first_line.comment is not None:
        text += "  " + after.first_line.comment.value
    if isinstance(before, cst.ParenthesizedWhitespace):
        line = cst.EmptyLine(indent=before.indent, whitespace=before.last_line, comment=cst.Comment(text))
        return cst.ParenthesizedWhitespace(before.first_line, [*before.empty_lines, line, *after.empty_lines],
                                           after.indent, after.last_line)
    first = cst.TrailingWhitespace(cst.SimpleWhitespace("  "), cst.Comment(text))
    return cst.ParenthesizedWhitespace(first, list(after.empty_lines), after.indent, after.last_line)


LINE_MARK = "# __fwport_sequential_line__"  # a bracket's line, removed by finish


def _dedent(ws: cst.ParenthesizedWhitespace, n: int) -> cst.ParenthesizedWhitespace:
    """The line break ``ws`` with ``n`` fewer spaces before what follows it (and its comment lines)."""
    def cut(w: cst.SimpleWhitespace) -> cst.SimpleWhitespace:
        return w.with_changes(value=w.value[n:]) if w.value.startswith(" " * n) else w
    return ws.with_changes(last_line=cut(ws.last_line),
                           empty_lines=[ln.with_changes(whitespace=cut(ln.whitespace)) for ln in ws.empty_lines])


def _join_ws(a, b, drop: bool = False):
    """Two whitespaces that become adjacent when list brackets go away, with no line lost (``drop``:
    the bracket's line is marked, for :func:`finish` to remove)."""
    a_nl = isinstance(a, cst.ParenthesizedWhitespace)
    b_nl = isinstance(b, cst.ParenthesizedWhitespace)
    if a_nl and b_nl:
        # the line the bracket stood on: blank (no indentation left behind) unless it held a comment
        comment = b.first_line.comment
        if comment is None and drop:
            comment = cst.Comment(LINE_MARK)
        extra = cst.EmptyLine(indent=b.indent and comment is not None and comment.value != LINE_MARK,
                              whitespace=cst.SimpleWhitespace(""), comment=comment)
        return cst.ParenthesizedWhitespace(a.first_line, [*a.empty_lines, extra, *b.empty_lines], b.indent, b.last_line)
    if a_nl:
        return a
    if b_nl:
        return b
    return a if getattr(a, "value", "") else b


_FIELDS: dict[type, tuple[str, ...]] = {}  # node class → its fields
_IS_NODE: dict[type, bool] = {}  # a field value's class → whether it is a node (isinstance against the ABC once)


def _drop_marked(node: cst.CSTNode) -> cst.CSTNode:
    """``node`` with the marked lines (LINE_MARK) left out of every ParenthesizedWhitespace in it: what libcst's
    ``node.visit`` of a transformer doing that gives (every node a new object, trivia included; sequences as
    tuples), without its cost: libcst looks up the hooks and rebuilds and validates each node (a large
    ``Sequential`` statement took 0.3 s), where this copies the fields (valid as they are) and edits the
    whitespace alone."""
    cls = node.__class__
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    new = object.__new__(cls)
    for name in names:
        value = getattr(node, name)
        c = value.__class__
        if c is tuple or c is list:
            value = tuple(_drop_marked(v) if _node(v) else v for v in value)
        elif _node(value):
            value = _drop_marked(value)
        _set(new, name, value)
    if cls is cst.ParenthesizedWhitespace:
        lines = tuple(ln for ln in new.empty_lines if ln.comment is None or ln.comment.value != LINE_MARK)
        if len(lines) != len(new.empty_lines):
            _set(new, "empty_lines", lines)
    return new


def _node(value) -> bool:
    c = value.__class__
    is_node = _IS_NODE.get(c)
    if is_node is None:
        is_node = _IS_NODE[c] = isinstance(value, cst.CSTNode)
    return is_node


_set = object.__setattr__


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """The lines the brackets of ``Sequential([...])`` stood on, removed once every finding is located."""
    if not ctx.options.pop("_sequential_lines", False):
        return module
    layout = ctx.analyses["layout"]  # (only the statements whose text holds a mark are walked)
    return module.with_changes(body=[_drop_marked(s) if LINE_MARK in layout.statement_text(s, module) else s
                                     for s in module.body])
