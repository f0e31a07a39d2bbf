"""Call transforms of the torch2jax rules (``emit.transform``): calls that are not a plain
``target(**kwargs)``."""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import NOT_LITERAL, build_call, code, expr, literal_value
from fwport.core.names import scan
from fwport.packs.torch2jax import keys
from fwport.packs.torch2jax.registry import call_transform, value_transform


def _options(m) -> dict:
    return m.rule.emit.get("options", {})


def _warn(m, ctx) -> None:
    """``emit.options.warning``: a warning finding (code ``emit.options.warning_code``, else approximate) saying
    what the translation gives up (distributed.toml rules: a process group's rank → the one process's index)."""
    from fwport.core.finding import Severity
    opts = _options(m)
    if opts.get("warning"):
        ctx.report(Severity.WARNING, opts.get("warning_code", "approximate"), opts["warning"], m.node, m.rule)


@call_transform("lambda")
def as_lambda(m, ctx):
    """An activation module → ``eqx.nn.Lambda(fn)``: ``emit.options.fn`` names the function;
    ``emit.options.kwargs`` are its fixed keywords (then it is wrapped in a ``lambda``); ``emit.options.omitted``
    the keywords written where the source's argument is omitted, with the warning ``emit.options.omitted_warning``
    (nn.Softmax(): PyTorch's dim chosen from the input's rank)."""
    from fwport.core.finding import Severity
    opts = _options(m)
    fn = ctx.spell_text(opts["fn"])
    extra = dict(opts.get("kwargs", {}))
    for k, v in m.kwargs.items():  # the rule's renamed arguments
        extra[k] = code(v)
    omitted = {k: str(v) for k, v in opts.get("omitted", {}).items() if k not in extra}
    if omitted:
        extra.update(omitted)
        ctx.report(Severity.WARNING, "approximate", opts["omitted_warning"], m.node, m.rule)
    if extra:
        inner = ", ".join(f"{k}={v}" for k, v in extra.items())
        fn = f"lambda x: {fn}(x, {inner})"
    return expr(f"{ctx.spell_text('equinox.nn.Lambda')}({fn})")


@call_transform("sequential", starred=True)
def sequential(m, ctx):
    """``nn.Sequential(a, b)`` → ``eqx.nn.Sequential([a, b])``. Layers written one per line stay one per
    line: ``Sequential(\n    a,\n    b,\n)`` → ``Sequential([\n    a,\n    b,\n])``. ``nn.Sequential(*layers)``
    → ``eqx.nn.Sequential(layers)`` (it takes any iterable of layers); ``*x`` among others stays ``[a, *x]``."""
    args = m.call.args
    values = list(m.bound.varargs)
    if m.bound.starred:
        if len(values) == 1:
            return cst.Call(ctx.spell("equinox.nn.Sequential"), [cst.Arg(values[0])])
        items = [cst.StarredElement(v) if i in m.bound.starred else cst.Element(v) for i, v in enumerate(values)]
        return cst.Call(ctx.spell("equinox.nn.Sequential"), [cst.Arg(cst.List(items))])
    if len(args) != len(values) or not args or any(a.keyword is not None or a.star for a in args) \
            or not isinstance(m.call.whitespace_before_args, cst.ParenthesizedWhitespace):
        items = [cst.Element(v) for v in values]
        return cst.Call(ctx.spell("equinox.nn.Sequential"), [cst.Arg(cst.List(items))])
    items = [cst.Element(v, comma=a.comma) for v, a in zip(values, args)]
    last = args[-1]
    closing = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else last.whitespace_after_arg
    if isinstance(last.comma, cst.Comma):
        items[-1] = items[-1].with_changes(comma=last.comma.with_changes(whitespace_after=cst.SimpleWhitespace("")))
    listed = cst.List(items, lbracket=cst.LeftSquareBracket(whitespace_after=m.call.whitespace_before_args),
                      rbracket=cst.RightSquareBracket(whitespace_before=closing))
    return cst.Call(ctx.spell("equinox.nn.Sequential"), [cst.Arg(listed)])


def _one_example(text, node=None, ctx=None) -> tuple[str, str] | None:
    """An einops layer's pattern → (the batch axis's name, the pattern for one example): ``'b c h w -> b (c h w)'`` →
    ``('b', 'c h w -> (c h w)')``; a pattern whose both sides start with ``...`` (``'... () () -> ...'``, LeViT's
    and CvT's heads) is one example's as written, the batch axis among the leading axes ``...`` stands for; one moving
    the batch axis to another position (``'b (two d) -> two b 1 d'``) where batch.py follows the layer's result
    (``MOVING_LAYERS``: the last layer of a Sequential forward calls). None for any other."""
    from fwport.packs.torch2jax.batch import MOVING_LAYERS, _pattern_axes, per_example_einops, per_example_pattern
    if not isinstance(text, str):
        return None
    if text.count("->") == 1:
        sides = [_pattern_axes(side) for side in text.split("->")]
        if all(sides) and all(side[0] == "..." for side in sides):
            return "...", text
    one = per_example_pattern(text)
    if one is None and node is not None and code(node) in ctx.analyses.get(MOVING_LAYERS, ()):
        moving = per_example_einops(text, 0)  # the batch axis moved elsewhere: batch.py follows where to
        return moving[:2] if isinstance(moving, tuple) else None
    return one


@call_transform("rearrange-layer")
def rearrange_layer(m, ctx):
    """einops's ``Rearrange('b c (h p) (w q) -> b (h w) (p q c)', p=4, q=4)`` layer → ``eqx.nn.Lambda(lambda x:
    einops.rearrange(x, 'c (h p) (w q) -> (h w) (p q c)', p=4, q=4))``: the pattern for one example, whose first
    axis (the batch's, kept on both sides) is left out. Any other pattern is refused."""
    from fwport.packs.torch2jax.batch import _string
    pattern = m.kwargs.get("pattern")
    text = literal_value(pattern, None) if pattern is not None else None
    one = _one_example(text, m.node, ctx)
    if one is None:
        m.fail(ctx, "batch-axis", f"einops Rearrange({m.written('pattern')}): translated when the pattern is a string "
               "whose first axis is the batch's on both sides ('b ... -> b ...', or '...' leading both: '... () () -> "
               "...'); one example has no batch axis, so "
               "write the layer for one example (eqx.nn.Lambda of einops.rearrange)")
        return None
    sizes = "".join(f", {k}={code(v)}" for k, v in m.kwargs.items() if k != "pattern")
    fn = f"lambda x: {ctx.spell_text('einops.rearrange')}(x, {code(_string(one[1], pattern))}{sizes})"
    return expr(f"{ctx.spell_text('equinox.nn.Lambda')}({fn})")


@call_transform("reduce-layer")
def reduce_layer(m, ctx):
    """einops's ``Reduce('b c h w -> b c', 'mean')`` layer → ``eqx.nn.Lambda(lambda x: einops.reduce(x, 'c h w -> c',
    'mean'))``: the pattern for one example, as for Rearrange; the reduction a string literal einops names."""
    from fwport.packs.torch2jax.batch import _string
    pattern, reduction = m.kwargs.get("pattern"), m.kwargs.get("reduction")
    text = literal_value(pattern, None) if pattern is not None else None
    one = _one_example(text, m.node, ctx)
    if one is None:
        m.fail(ctx, "batch-axis", f"einops Reduce({m.written('pattern')}): translated when the pattern is a string "
               "whose first axis is the batch's on both sides ('b ... -> b ...', or '...' leading both); one example "
               "has no batch axis, so "
               "write the layer for one example (eqx.nn.Lambda of einops.reduce)")
        return None
    if literal_value(reduction, None) not in ("mean", "max", "min", "sum", "prod"):
        m.fail(ctx, "unsupported-argument", f"einops Reduce(..., {m.written('reduction')}): translated when the "
               "reduction is one of einops's names written out ('mean', 'max', 'min', 'sum', 'prod')")
        return None
    sizes = "".join(f", {k}={code(v)}" for k, v in m.kwargs.items() if k not in ("pattern", "reduction"))
    fn = f"lambda x: {ctx.spell_text('einops.reduce')}(x, {code(_string(one[1], pattern))}, {code(reduction)}{sizes})"
    return expr(f"{ctx.spell_text('equinox.nn.Lambda')}({fn})")


@call_transform("pool")
def pool(m, ctx):
    """Pooling modules: PyTorch's stride defaults to the window, Equinox's to 1, so the stride is
    always written out."""
    stride = m.kwargs.get("stride")
    if stride is None or code(stride) == "None":
        m.kwargs["stride"] = m.kwargs["kernel_size"]
    return build_call(m, ctx, target=m.rule.emit["target"])


@call_transform("loss")
def loss(m, ctx):
    """A loss function with PyTorch's ``reduction``: the per-element loss (``emit.options.elementwise``,
    a template over the mapped arguments), then ``.mean()`` / ``.sum()`` / nothing."""
    opts = _options(m)
    values = {k: code(v) for k, v in m.kwargs.items() if k not in ("reduction", "ignore_index", "label_smoothing")}
    text = _reduced_loss(m, ctx, opts, values)
    return None if text is None else expr(text)


def _reduced_loss(m, ctx, opts: dict, values: dict[str, str]) -> str | None:
    """The loss's text: ``opts["elementwise"]`` over ``values`` (argument texts), with PyTorch's ``label_smoothing``
    (``opts["smoothing"]`` names the logits), ``ignore_index`` (``opts["ignore"]`` names the labels) and
    ``reduction``."""
    names = {k: ctx.spell_text(v) for k, v in opts.get("names", {}).items()}
    ignore = m.kwargs.get("ignore_index")
    smoothing = m.kwargs.get("label_smoothing")
    keep = None
    if ignore is not None and literal_value(ignore, None) != -100:
        # PyTorch's ignore_index: those targets add nothing (0 under 'none') and the mean is over the kept ones;
        # the ignored labels are replaced by class 0 before the lookup (a label outside the classes is no index)
        label, node = values[opts["ignore"]], m.kwargs.get(opts["ignore"])
        atom = label.isidentifier() if node is None else \
            isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not node.lpar
        keep = f"{label if atom else f'({label})'} != {code(ignore)}"
        values = {**values, opts["ignore"]: f"{ctx.spell_text('jax.numpy.where')}({keep}, {label}, 0)"}
    text = opts["elementwise"].format(**names, **values)
    if smoothing is not None and literal_value(smoothing, None) not in (0, 0.0):
        if "smoothing" not in opts:
            m.fail(ctx, "unsupported-argument", f"label_smoothing={m.written('label_smoothing')} is not translated here")
            return None
        # PyTorch: (1 - ε) · the loss of the target + ε · the mean over the classes of -log p (uniform target)
        e = code(smoothing)
        e = e if isinstance(smoothing, (cst.Name, cst.Attribute, cst.Integer, cst.Float)) else f"({e})"
        uniform = (f"{ctx.spell_text('jax.numpy.mean')}({ctx.spell_text('jax.nn.log_softmax')}"
                   f"({values[opts['smoothing']]}, axis=-1), axis=-1)")
        text = f"((1 - {e}) * {text} - {e} * {uniform})"
    if keep is not None:
        text = f"{ctx.spell_text('jax.numpy.where')}({keep}, {text}, 0.0)"
    reduction = m.kwargs.get("reduction")
    how = "'mean'" if reduction is None else code(reduction).replace('"', "'")
    if how == "'mean'" and keep is not None:
        total = ctx.spell_text("jax.numpy.sum")
        return f"{total}({text}) / {total}({keep})"
    if how == "'mean'":
        return f"{ctx.spell_text('jax.numpy.mean')}({text})"
    if how == "'sum'":
        return f"{ctx.spell_text('jax.numpy.sum')}({text})"
    if how == "'none'":
        return text
    m.fail(ctx, "unsupported-argument", f"reduction={m.written('reduction')}: write 'mean', 'sum' or 'none'")
    return None


@call_transform("call")
def call(m, ctx):
    """A plain call plus fixed keywords from ``emit.options.kwargs`` (Python text): a default that
    differs is written out (``jax.nn.gelu(x, approximate=False)``)."""
    for k, v in _options(m).get("kwargs", {}).items():
        m.kwargs.setdefault(k, expr(v))
    return build_call(m, ctx, target=m.rule.emit["target"])


@call_transform("variance")
def variance(m, ctx):
    """``torch.var`` / ``torch.std`` → ``jnp.var`` / ``jnp.std`` with PyTorch's unbiased estimate written out:
    ``ddof=1`` unless ``unbiased=False`` (ddof=0) or ``correction=c`` (ddof=c); numpy's and JAX's default is the
    biased one (ddof=0)."""
    unbiased = m.kwargs.pop("unbiased", None)
    correction = m.kwargs.pop("correction", None)
    if unbiased is not None and correction is not None:
        m.fail(ctx, "unsupported-argument", "both unbiased= and correction=: keep one")
        return None
    if correction is not None:
        ddof = correction
    elif unbiased is None or code(unbiased) == "True":
        ddof = cst.Integer("1")
    elif code(unbiased) == "False":
        ddof = cst.Integer("0")
    else:
        ddof = expr(f"int({code(unbiased)})")
    m.kwargs["ddof"] = ddof
    return build_call(m, ctx, target=m.rule.emit["target"])


# --- optimizers ------------------------------------------------------------------------------------

OPTIMIZERS = "torch2jax.optimizers"  # ctx.analyses: the emitted optax expression's text → the model's source text


def _parameters_of(node) -> str | None:
    """``name.parameters()`` → the name; else None."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "parameters" \
            and not node.args and isinstance(node.func.value, cst.Name):
        return node.func.value.value
    return None


def chained_models(value, resolve) -> list[str] | None:
    """The models whose parameters one optimizer takes together: ``itertools.chain(a.parameters(), b.parameters())``
    or ``list(a.parameters()) + list(b.parameters())`` → ``["a", "b"]`` (two or more distinct names); else None.
    Every torch.optim rule translated here updates each array from its own gradient and state alone, so one optax
    optimizer over the tuple ``(a, b)`` steps both exactly as PyTorch's over the chained parameters."""
    if isinstance(value, cst.Call) and resolve(value.func) == "itertools.chain" \
            and all(a.keyword is None and not a.star for a in value.args):
        names = [_parameters_of(a.value) for a in value.args]
    else:
        parts, names = [value], []
        while parts:
            part = parts.pop()
            if isinstance(part, cst.BinaryOperation) and isinstance(part.operator, cst.Add) and not part.lpar:
                parts += [part.right, part.left]
            elif isinstance(part, cst.Call) and isinstance(part.func, cst.Name) and part.func.value == "list" \
                    and len(part.args) == 1 and part.args[0].keyword is None and not part.args[0].star:
                names.append(_parameters_of(part.args[0].value))
            else:
                return None
    if len(names) < 2 or None in names or len(set(names)) != len(names):
        return None
    return names


def model_group(model: str | None) -> list[str]:
    """The models one optimizer trains: ``"(a, b)"`` (chained_models) → ``["a", "b"]``, ``"model"`` → ``["model"]``."""
    if model is None:
        return []
    if model.startswith("(") and model.endswith(")"):
        return [n.strip() for n in model[1:-1].split(",") if n.strip()]
    return [model]


@value_transform("model-parameters")
def model_parameters(value, spec, m, ctx):
    """``model.parameters()``: optax transformations take no parameters; the optimizer state is
    initialised from the model's arrays (``opt_state = optim.init(eqx.filter(model, eqx.is_array))``,
    written by the training pass). Several models' parameters chained (chained_models): the optimizer
    trains the tuple of the models, ``"(a, b)"`` (its state initialised from the tuple's arrays)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "parameters" \
            and not value.args:
        m.extras["model"] = code(value.func.value)
        return
    group = chained_models(value, ctx.imports.resolve)
    if group is not None:
        m.extras["model"] = f"({', '.join(group)})"
        return
    m.fail(ctx, "unsupported-argument", f"{m.written(spec.name)}: only model.parameters() is translated (parameter "
           "groups and subsets become optax.multi_transform / masks by hand)")


@call_transform("optimizer")
def optimizer(m, ctx):
    """torch.optim.X(model.parameters(), ...) → the optax transformation with every hyperparameter
    mapped; PyTorch's coupled ``weight_decay`` (added to the gradient before the step) becomes
    ``optax.add_decayed_weights`` chained *before* it. ``emit.options.decoupled``: the transformation
    takes ``weight_decay`` itself (AdamW); ``emit.options.kwargs``: fixed keywords (Python text) where
    optax's parametrisation differs from PyTorch's (RMSprop's eps outside the root: eps_in_sqrt=False)."""
    opts = _options(m)
    kw = dict(m.kwargs)
    betas = kw.pop("betas", None)
    if betas is not None:
        if isinstance(betas, (cst.Tuple, cst.List)) and len(betas.elements) == 2:
            kw["b1"], kw["b2"] = (e.value for e in betas.elements)
        else:
            kw["b1"], kw["b2"] = expr(f"{code(betas)}[0]"), expr(f"{code(betas)}[1]")
    momentum = kw.get("momentum")
    if momentum is not None and code(momentum) in ("0", "0.0"):
        del kw["momentum"]  # optax: momentum=None is plain SGD
    dampening = kw.pop("dampening", None)
    if dampening is not None and code(dampening) in ("0", "0.0"):
        dampening = None
    if dampening is not None and "momentum" not in kw:
        dampening = None  # PyTorch dampens the momentum buffer only: without momentum it changes nothing
    wd = kw.pop("weight_decay", None) if not opts.get("decoupled") else None
    for k, v in opts.get("kwargs", {}).items():  # fixed keywords where optax's default differs (eps placement)
        kw[k] = expr(v)
    order = ("learning_rate", "b1", "b2", "rho", "decay", "initial_accumulator_value", "eps", "eps_in_sqrt",
             "centered", "momentum", "nesterov", "weight_decay")
    args = ", ".join(f"{k}={code(kw[k])}" for k in order if k in kw)
    text = f"{ctx.spell_text(m.rule.emit['target'])}({args})"
    if dampening is not None:  # optax.sgd has no dampening: the written helper's update is PyTorch's
        from fwport.packs.torch2jax import layers
        extra = f", nesterov={code(kw['nesterov'])}" if "nesterov" in kw else ""
        text = (f"{layers.use(ctx, 'sgd_dampened')}({code(kw['learning_rate'])}, {code(kw['momentum'])}, "
                f"{code(dampening)}{extra})")
    if wd is not None and code(wd) not in ("0", "0.0"):
        text = f"{ctx.spell_text('optax.chain')}({ctx.spell_text('optax.add_decayed_weights')}({code(wd)}), {text})"
    from fwport.packs.torch2jax.groups import FROZEN_TABLES  # (groups imports this module)
    if ctx.analyses.get(FROZEN_TABLES) and "model" in m.extras:
        from fwport.core.finding import Severity
        from fwport.packs.torch2jax import layers
        # PyTorch's optimizer skips a parameter without a gradient; optax would decay it (AdamW, add_decayed_weights)
        text = f"{ctx.spell_text('optax.masked')}({text}, {layers.use(ctx, 'unfrozen')})"
        ctx.report(Severity.INFO, "idiom-replaced", "the frozen nn.Embedding.from_pretrained tables get no gradient, "
                   "which PyTorch's optimizer skips (no step, no weight decay): optax.masked(..., unfrozen) leaves them "
                   "as they are", m.node)
    from fwport.packs.torch2jax import frozen
    text = frozen.optimizer(text, m.extras.get("model"), ctx, m.node)  # parts frozen before the loop: zero updates
    out = expr(text)
    ctx.analyses.setdefault(OPTIMIZERS, {})[text] = m.extras.get("model")
    return out


LBFGS_STEPS = "torch2jax.lbfgs-steps"  # ctx.analyses: source texts of the LBFGS optimizers the training pass steps


@call_transform("lbfgs")
def lbfgs(m, ctx):
    """torch.optim.LBFGS(model.parameters(), ...) whose ``step(closure)`` the training pass writes as max_iter
    updates (LBFGS_STEPS) → ``optax.lbfgs(learning_rate=lr, memory_size=history_size, linesearch=None)``
    (PyTorch's default takes no line search; optax's default would take a zoom line search); elsewhere refused."""
    if code(m.node) not in ctx.analyses.get(LBFGS_STEPS, ()):
        search = m.kwargs.get("line_search_fn")
        why = "" if search is None or code(search) == "None" else (
            f"line_search_fn={code(search)} is PyTorch's own strong-Wolfe line search (cubic interpolation, up to 25 "
            "evaluations per iteration, counted against max_eval); optax's zoom line search (optax.lbfgs()'s default) "
            "checks the same conditions (c1=1e-4, c2=0.9) but tries other step sizes, so the parameters after a step "
            "differ from PyTorch's. ")
        m.fail(ctx, "unsupported-construct", why + _options(m)["message"])
        return None
    lr = code(m.kwargs["lr"]) if "lr" in m.kwargs else "1.0"
    memory = code(m.kwargs["history_size"]) if "history_size" in m.kwargs else "100"
    text = f"{ctx.spell_text(m.rule.emit['target'])}(learning_rate={lr}, memory_size={memory}, linesearch=None)"
    ctx.analyses.setdefault(OPTIMIZERS, {})[text] = m.extras.get("model")
    return expr(text)


@call_transform("unwrap")
def unwrap(m, ctx):
    """A PyTorch wrapper with no JAX counterpart → what it wraps (nn.Parameter(data) → data,
    nn.ModuleList([...]) → [...]); an omitted value is an empty list / an error; ``emit.options.warning``: a
    warning (DistributedDataParallel(model) → model, trained in one process)."""
    values = list(m.kwargs.values())
    if values:
        _warn(m, ctx)
        return values[0]
    if m.rule.emit["target"] == "list":
        return cst.List([])
    m.fail(ctx, "unsupported-construct", f"{m.rule.names[0]}() without a value: give the array")
    return None


@call_transform("shape-args")
def shape_args(m, ctx):
    """``torch.zeros(2, 3)`` / ``torch.zeros((2, 3))`` → ``jnp.zeros((2, 3))``; the mapped keywords
    (``dtype=``) follow."""
    sizes = list(m.bound.varargs)
    if len(sizes) == 1:
        shape = sizes[0]
    else:
        shape = cst.Tuple([cst.Element(v) for v in sizes]) if sizes else cst.Tuple([])
    return _call(ctx.spell(m.rule.emit["target"]), [shape], m.kwargs)


def _call(func, positional, keywords=None) -> cst.Call:
    args = [cst.Arg(v) for v in positional]
    args += [cst.Arg(v, keyword=cst.Name(k), equal=_EQ) for k, v in (keywords or {}).items()]
    return cst.Call(func, args)


_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))

#: torch dtypes → their jnp names. 64-bit types are JAX's only under ``jax_enable_x64``; without it JAX
#: itself makes them 32-bit (with its own warning), as it does for every array.
DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64", "float16": "float16",
    "half": "float16", "bfloat16": "bfloat16", "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
    "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool_",
    "complex64": "complex64", "cfloat": "complex64", "complex128": "complex128", "cdouble": "complex128",
}


def jnp_dtype(node, ctx) -> str | None:
    """The jnp name (``float32``) of a torch dtype written out (``torch.float``), else None."""
    q = ctx.imports.resolve(node)
    name = q[len("torch."):] if q and q.startswith("torch.") else None
    return DTYPES.get(name)


def cast_dtype(original: cst.Call, ctx) -> str | None:
    """The jnp dtype name of a cast ``x.to(torch.float16)`` / ``x.to(dtype=torch.bool)`` / ``x.type(torch.long)``
    (one argument, a torch dtype written out), else None: ``x.astype(jnp.float16)`` computes the same."""
    f = original.func
    if not isinstance(f, cst.Attribute) or f.attr.value not in ("to", "type") or len(original.args) != 1:
        return None
    a = original.args[0]
    if a.star or (a.keyword is not None and (f.attr.value != "to" or a.keyword.value != "dtype")):
        return None
    return jnp_dtype(a.value, ctx)


@value_transform("torch-dtype")
def torch_dtype(value, spec, m, ctx):
    """``dtype=torch.float`` → ``dtype=jnp.float32`` (``DTYPES``); ``None`` is left out (each side's default);
    a variable (``dtype``, ``x.dtype``, ``DTYPES[name]``) is kept: the dtypes the translated program holds are jnp's
    (its torch dtypes are written as jnp's by the dtype-* rules, an array's .dtype is JAX's); anything else of
    torch's, and other expressions, are refused."""
    if isinstance(value, cst.Name) and value.value == "None":
        return
    if code(value) in {ctx.spell_text(f"jax.numpy.{d}") for d in DTYPES.values()}:
        m.kwargs[spec.to or spec.name] = value  # torch.float32 already written as jnp's by its constant rule (dtype-*)
        return
    q = ctx.imports.resolve(value)
    if q is None and isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
        m.kwargs[spec.to or spec.name] = value
        return
    name = q[len("torch."):] if q and q.startswith("torch.") else None
    if name not in DTYPES:
        m.fail(ctx, "unsupported-argument", f"{spec.name}={m.written(spec.name) or code(value)}: only a torch dtype "
               f"written out (torch.float32, torch.long, ...) or a name holding one is translated; write the jnp dtype by hand")
        return
    m.kwargs[spec.to or spec.name] = ctx.spell(f"jax.numpy.{DTYPES[name]}")


@call_transform("random")
def random(m, ctx):
    """``torch.randn(4, 8)`` → ``jax.random.normal(key, (4, 8))``: PyTorch's global generator becomes the
    key in scope (in ``__init__``: the module's, split per use by the modules pass)."""
    if not _key_added(m, ctx):
        return None
    shape = shape_args(m, ctx).args[0].value
    args = [cst.Arg(cst.Name("key")), cst.Arg(shape)]
    if m.kwargs.get("dtype") is not None:  # torch.rand(n, dtype=torch.float64) → jax.random.uniform(key, (n,), dtype=jnp.float64)
        args.append(cst.Arg(m.kwargs["dtype"], keyword=cst.Name("dtype"), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
    return cst.Call(ctx.spell(m.rule.emit["target"]), args)


@call_transform("loss-module")
def loss_module(m, ctx):
    """A loss module (``criterion = nn.CrossEntropyLoss()``) → a lambda of its two inputs computing the
    same loss and reduction (``emit.options.params`` names them; ignore_index and label_smoothing as the
    function's: _reduced_loss)."""
    opts = _options(m)
    params = [p.strip() for p in opts["params"].split(",")]
    text = _reduced_loss(m, ctx, opts, {p: p for p in params})
    return None if text is None else expr(f"lambda {opts['params']}: {text}")


@call_transform("batch-norm")
def batch_norm(m, ctx):
    """``nn.BatchNorm2d(C, eps, momentum)`` → ``eqx.nn.BatchNorm(C, axis_name="batch", eps, momentum=1 - m,
    mode="batch")``: PyTorch's momentum weighs the new batch (0.1), Equinox's the running value (0.9).
    mode="batch" normalises with the batch statistics in training, as PyTorch does (mode="ema" would
    normalise with the updated running average).
    The batch statistics of training come from ``jax.vmap(..., axis_name="batch")``."""
    kw = dict(m.kwargs)
    momentum = kw.pop("momentum", None)
    value = 0.1 if momentum is None else None
    if momentum is not None:
        from fwport.core.engine import literal_value
        value = literal_value(momentum, None)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            m.fail(ctx, "unsupported-argument", f"momentum={m.written('momentum')}: give a number (None, PyTorch's "
                   "cumulative average, is not translated)")
            return None
    args = [code(kw.pop("input_size")), 'axis_name="batch"']
    if "eps" in kw:
        args.append(f"eps={code(kw.pop('eps'))}")
    args.append(f"momentum={round(1 - value, 12)!r}")
    args += [f"{k}={code(v)}" for k, v in kw.items()]
    args.append('mode="batch"')
    from fwport.core.finding import Severity
    ctx.report(Severity.WARNING, "approximate", _batch_norm_stats(value), m.node, m.rule)
    return expr(f"{ctx.spell_text('equinox.nn.BatchNorm')}({', '.join(args)})")


def _batch_norm_stats(m: float) -> str:
    """The approximate warning of a BatchNorm with PyTorch's momentum ``m``: where its running statistics (what
    eval mode normalises with) leave PyTorch's, with the numbers for this momentum (checked against both in
    tests/test_torch2jax_batchnorm_stats.py)."""
    import math
    if not 0 < m < 1:
        return ("BatchNorm running statistics (what eval mode normalises with): Equinox's average is debiased "
                f"by 1 - momentum^n after n training steps and PyTorch's is not; with momentum={m!r} they differ")
    first = 1 - m
    steps = math.ceil(math.log(0.01) / math.log(first))
    return ("BatchNorm running statistics (what eval mode normalises with) are not PyTorch's: outputs in training "
            "mode agree (batch statistics), but both averages start from mean 0 and variance 1 and after n training "
            f"steps Equinox divides its own by 1 - {first:g}^n, PyTorch does not: PyTorch's running mean is (1 - "
            f"{first:g}^n) times Equinox's, {m:g} times after one step, within 1% only after {steps} steps; its "
            f"running variance is {first:g}^n + N/(N-1) * ((1 - {first:g}^n) * Equinox's - {first:g}^n), as PyTorch "
            "averages the unbiased batch variance where Equinox averages the biased one (N the values per channel "
            "in a batch: the factor N/(N-1) stays). A model evaluated after a short training run, or trained on "
            "small batches, gives other outputs in eval mode")


@call_transform("instance-norm")
def instance_norm(m, ctx):
    """``nn.InstanceNorm2d(C, eps, affine)`` → ``eqx.nn.GroupNorm(C, C, eps, channelwise_affine=affine)``: one
    group per channel. channelwise_affine is always written (PyTorch's default is False, Equinox's True); C is
    written twice, so it must be a name, an attribute, a literal or arithmetic of those (``dim * 2``: the same
    value both times, no call)."""
    kw = dict(m.kwargs)
    channels = kw.pop("channels")
    if not _arithmetic(channels):
        m.fail(ctx, "unsupported-construct", f"num_features={m.written('num_features')}: written twice in the "
               "translation (groups and channels of eqx.nn.GroupNorm); give it a name first")
        return None
    affine = kw.pop("channelwise_affine", cst.Name("False"))
    args = [code(channels), code(channels)] + [f"{k}={code(v)}" for k, v in kw.items()]
    args.append(f"channelwise_affine={code(affine)}")
    return expr(f"{ctx.spell_text(m.rule.emit['target'])}({', '.join(args)})")


@value_transform("example-dim")
def example_dim(value, spec, m, ctx):
    """A dim of a module's batched input → the axis of one example: 1 → 0, -1 stays; 0 (the batch axis
    itself) and non-literals are refused."""
    from fwport.core.engine import literal_value

    d = literal_value(value, None)
    if not isinstance(d, int) or isinstance(d, bool) or d == 0:
        m.fail(ctx, "batch-axis", f"{spec.name}={m.written(spec.name)}: a module of one example has no batch axis; "
               "write a literal dimension other than 0")
        return
    m.kwargs[spec.to or spec.name] = cst.Integer(str(d - 1)) if d > 0 else value


@call_transform("explicit-dim")
def explicit_dim(m, ctx):
    """``F.softmax(x, dim)`` → ``jax.nn.softmax(x, axis=dim)``. Without dim PyTorch picks one from the input's rank (0
    for a 1- or 3-D input, 1 otherwise; deprecated) where JAX takes the last axis, the same for a 1- or 2-D input
    only: refused (an error), since the rank is not known here."""
    if "axis" not in m.kwargs:
        m.fail(ctx, "unsupported-argument", f"{code(m.node.func) if isinstance(m.node, cst.Call) else 'softmax'} "
               "without dim: PyTorch picks the dim from the input's rank (0 for a 1- or 3-D input, 1 otherwise; "
               "deprecated), JAX takes the last axis, the same for a 1- or 2-D input only: write dim= as PyTorch "
               "picks it for this input")
        return None
    return build_call(m, ctx, target=m.rule.emit["target"])


@call_transform("adaptive-pool")
def adaptive_pool(m, ctx):
    """Adaptive pooling: exact for an output of 1 (a global pool); other sizes split the input into
    windows as PyTorch does only when they divide it (an approximate warning)."""
    from fwport.core.engine import literal_value
    from fwport.core.finding import Severity

    size = literal_value(m.kwargs["target_shape"], None)
    global_pool = size == 1 or isinstance(size, (tuple, list)) and size and all(n == 1 for n in size)
    if not global_pool:
        ctx.report(Severity.WARNING, "approximate", f"output_size={m.written('output_size')}: the same as PyTorch "
                   "only where it divides the input size (else the windows differ)", m.node, m.rule)
    if global_pool and size != 1:  # (1, 1) / (1, 1, 1): one output per channel
        m.kwargs["target_shape"] = cst.Integer("1")
    return build_call(m, ctx, target=m.rule.emit["target"])


@call_transform("arange")
def arange(m, ctx):
    """``torch.arange(end)`` / ``(start, end[, step])``, positional or by keyword → ``jnp.arange(start, stop,
    step)``. Integer arguments give JAX's default integer (int32 unless ``jax_enable_x64``; PyTorch: int64),
    the same values below 2**31."""
    pos = list(m.bound.varargs)
    kw = dict(m.kwargs)
    given = {k: kw.pop(k) for k in ("start", "end", "step") if k in kw}
    if len(pos) == 1 and not given:
        return _call(ctx.spell(m.rule.emit["target"]), pos, kw)
    if len(pos) > 3:
        m.fail(ctx, "unsupported-construct", "torch.arange takes at most start, end and step")
        return None
    values = dict(zip(("start", "end", "step"), pos))
    for k, v in given.items():
        if k in values:
            m.fail(ctx, "unsupported-construct", f"torch.arange: {k} given twice")
            return None
        values[k] = v
    if "end" not in values:
        m.fail(ctx, "unsupported-construct", "torch.arange without an end")
        return None
    if set(values) == {"end"}:
        return _call(ctx.spell(m.rule.emit["target"]), [values["end"]], kw)
    args = [values.get("start", cst.Integer("0")), values["end"]] + ([values["step"]] if "step" in values else [])
    return _call(ctx.spell(m.rule.emit["target"]), args, kw)


# --- calls that draw from PyTorch's global generator: an explicit key ------------------------------------

def _key_added(m, ctx) -> bool:
    """Report the key a draw now takes; False (``m`` failed) where no key reaches the draw (keys.py)."""
    from fwport.core.finding import Severity
    if keys.keyless(m, ctx):
        return False
    if keys.rooted(m, ctx):  # a key split from the root key of its scope (keys.py; its warning says so)
        ctx.report(Severity.INFO, "key-added", f"{m.rule.names[0]} draws from PyTorch's global generator: here from a "
                   "key split from the root key fwport makes in this function (or at module level)", m.node, m.rule)
        return True
    ctx.report(Severity.INFO, "key-added", f"{m.rule.names[0]} draws from PyTorch's global generator: here from "
               "`key`, which must be a jax.random key in scope (in __init__ it is the module's own)", m.node, m.rule)
    return True


def _arithmetic(node: cst.BaseExpression) -> bool:
    """A name, an attribute of one, an integer, or +, -, *, //, % and unary minus of those: no call, so written
    twice it is the same number twice."""
    if isinstance(node, (cst.Name, cst.Integer)):
        return True
    if isinstance(node, cst.Attribute):
        return _arithmetic(node.value) and not isinstance(node.value, cst.Integer)
    if isinstance(node, cst.UnaryOperation):
        return isinstance(node.operator, cst.Minus) and _arithmetic(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)) \
            and _arithmetic(node.left) and _arithmetic(node.right)
    return False


def _simple(node: cst.BaseExpression) -> bool:
    """A name, attribute or subscript with no call inside: written twice, it is computed twice to the same value."""
    class Calls(cst.CSTVisitor):
        found = False

        def visit_Call(self, n) -> bool:
            Calls.found = True
            return False
    if not isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
        return False
    scan(node, Calls())
    return not Calls.found


def _once(m, ctx, name: str, what: str) -> cst.BaseExpression | None:
    """The argument ``name``, which the translation writes more than once: refused unless it is _simple."""
    value = m.kwargs[name]
    if _simple(value):
        return value
    m.fail(ctx, "unsupported-construct", f"{m.rule.names[0]}: {what} {m.written(name) or code(value)} is used twice in "
           "the translation; assign it to a name first")
    return None


@call_transform("random-like")
def random_like(m, ctx):
    """``torch.randn_like(x)`` → ``jax.random.normal(key, x.shape, x.dtype)`` (the dtype given, else x's)."""
    x = _once(m, ctx, "input", "the input")
    if x is None:
        return None
    dtype = m.kwargs.get("dtype", cst.Attribute(x, cst.Name("dtype")))
    if not _key_added(m, ctx):
        return None
    return _call(ctx.spell(m.rule.emit["target"]), [cst.Name("key"), cst.Attribute(x, cst.Name("shape")), dtype])


@call_transform("keyed")
def keyed(m, ctx):
    """A sampling function whose JAX counterpart takes the key first: ``torch.randperm(n)`` →
    ``jax.random.permutation(key, n)``."""
    if not _key_added(m, ctx):
        return None
    args = [cst.Name("key")] + [m.kwargs.pop(p) for p in m.rule.emit.get("positional", []) if p in m.kwargs]
    return _call(ctx.spell(m.rule.emit["target"]), args, m.kwargs)


@call_transform("multinomial")
def multinomial(m, ctx):
    """``torch.multinomial(probs, 1)`` → ``jax.random.categorical(key, jnp.log(probs), axis=-1)[..., None]``: one
    index per row drawn with the rows' (unnormalised) weights, PyTorch's trailing sample axis kept. More samples
    are refused (PyTorch draws them without replacement by default)."""
    from fwport.core.engine import literal_value
    if literal_value(m.kwargs["num_samples"], None) != 1:
        m.fail(ctx, "unsupported-argument", f"num_samples={m.written('num_samples')}: only one sample per row is "
               "translated (jax.random.categorical with shape= draws more, with replacement; jax.random.choice "
               "without)")
        return None
    if not _key_added(m, ctx):
        return None
    logits = _call(ctx.spell("jax.numpy.log"), [m.kwargs["input"]])
    draw = _call(ctx.spell(m.rule.emit["target"]), [cst.Name("key"), logits], {"axis": expr("-1")})
    return expr(f"{code(draw)}[..., None]")


# --- functions with more than one result --------------------------------------------------------------

@call_transform("top-k")
def top_k(m, ctx):
    """``torch.topk(x, k, dim=-1)`` → ``jax.lax.top_k(x, k)``: (values, indices), largest first, both sides.
    A dim other than the last is passed as ``axis``; ``largest=False`` is refused."""
    from fwport.core.engine import literal_value
    largest = m.kwargs.pop("largest", None)
    if largest is not None and literal_value(largest, None) is not True:
        m.fail(ctx, "unsupported-argument", f"largest={m.written('largest')}: jax.lax.top_k gives the largest only; "
               "take the top k of -x and negate the values")
        return None
    m.kwargs.pop("sorted", None)  # JAX always sorts (an unsorted PyTorch result has no promised order)
    dim = m.kwargs.pop("axis", None)
    kw = {}
    if dim is not None and literal_value(dim, None) != -1 and code(dim) != "None":
        kw["axis"] = dim
    return _call(ctx.spell(m.rule.emit["target"]), [m.kwargs["operand"], m.kwargs["k"]], kw)


#: what jnp.argsort gives up against PyTorch's default (unstable) sort: the warning of every argsort translation
ARGSORT_TIES = ("argsort without stable=True: PyTorch's sort promises no order among equal values (its CPU sort of more "
                "than 16 elements does not keep them in index order), jnp.argsort is stable (equal values keep their "
                "index order, PyTorch's stable=True): the indices of equal values may come in another order, the sorted "
                "values are the same; write stable=True in the PyTorch code to compare indices exactly")


def argsort_unstable(stable: cst.BaseExpression | None) -> bool:
    """Whether an argsort's ``stable=`` (None where not given) leaves PyTorch's order among ties unspecified."""
    return stable is None or literal_value(stable, None) is not True


@call_transform("argsort")
def argsort(m, ctx):
    """``torch.argsort(x, dim=-1, descending=False, stable=False)`` → ``jnp.argsort(x, axis=dim, descending=...)``:
    jnp.argsort is stable (PyTorch's stable=True, ascending or descending); without stable=True PyTorch promises
    no order among equal values: a warning (ARGSORT_TIES)."""
    from fwport.core.finding import Severity
    stable = m.kwargs.pop("stable", None)
    if argsort_unstable(stable):
        ctx.report(Severity.WARNING, "approximate", ARGSORT_TIES, m.node, m.rule)
    x = m.kwargs.pop("a")
    kw = {k: v for k, v in m.kwargs.items()}
    return _call(ctx.spell(m.rule.emit["target"]), [x], kw)


@call_transform("max-min")
def max_min(m, ctx):
    """``torch.max(x)`` → ``jnp.max(x)``; ``torch.max(x, dim)`` → ``(jnp.max(x, axis=dim), jnp.argmax(x, axis=dim))``
    (PyTorch's (values, indices); the first index of the extreme in both); ``torch.max(x, other=y)`` →
    ``jnp.maximum(x, y)``. A second positional argument that is not an integer literal could be either: refused.
    ``x.data`` (PyTorch's detached view) → ``jax.lax.stop_gradient(x)``."""
    from fwport.core.engine import literal_value
    fn = m.rule.emit["options"]["fn"]  # max / min
    x = m.kwargs["input"]
    dim, other, keepdim = m.kwargs.get("dim"), m.kwargs.get("other"), m.kwargs.get("keepdim")
    if isinstance(x, cst.Attribute) and x.attr.value == "data":
        x = _call(ctx.spell("jax.lax.stop_gradient"), [x.value])
    if other is not None:
        if dim is not None or keepdim is not None:
            m.fail(ctx, "unsupported-construct", f"torch.{fn}: other= with a dim")
            return None
        return _call(ctx.spell(f"jax.numpy.{fn}imum"), [x, other])
    if dim is None:
        if keepdim is not None:
            m.fail(ctx, "unsupported-construct", f"torch.{fn}: keepdim without a dim")
            return None
        return _call(ctx.spell(f"jax.numpy.{fn}"), [x])
    d = literal_value(dim, None)
    by_keyword = any(a.keyword is not None and a.keyword.value == "dim" for a in m.call.args)
    if not by_keyword and not (isinstance(d, int) and not isinstance(d, bool)):
        m.fail(ctx, "unsupported-construct", f"torch.{fn}(x, {m.written('dim')}): a tensor (elementwise "
               f"{fn}imum) or a dimension? write dim= or torch.{fn}imum")
        return None
    if not _simple(m.kwargs["input"]):
        m.fail(ctx, "unsupported-construct", f"torch.{fn} with a dim gives (values, indices), computed here from the "
               f"input twice: assign {m.written('input')} to a name first")
        return None
    kw = {"axis": dim} if keepdim is None else {"axis": dim, "keepdims": keepdim}
    pair = [_call(ctx.spell(f"jax.numpy.{fn}"), [x], kw), _call(ctx.spell(f"jax.numpy.arg{fn}"), [x], kw)]
    return cst.Tuple([cst.Element(v) for v in pair])


# --- tensors from data ------------------------------------------------------------------------------------

def _is_size(node: cst.BaseExpression) -> bool:
    """An argument that is a size, not data: an int literal, len(...), x.size(i), x.shape[i]."""
    from fwport.core.engine import literal_value
    v = literal_value(node, None)
    if isinstance(v, int) and not isinstance(v, bool):
        return True
    if isinstance(node, cst.Call):
        f = node.func
        return (isinstance(f, cst.Name) and f.value == "len") or (isinstance(f, cst.Attribute) and f.attr.value in ("size", "numel"))
    return isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape"


@call_transform("legacy-tensor", starred=True)
def legacy_tensor(m, ctx):
    """``torch.FloatTensor(data)`` → ``jnp.asarray(data, dtype=jnp.float32)``; ``torch.FloatTensor(2, 3)`` (sizes:
    int literals, len(), .size(), .shape[i], or more than one argument) → ``jnp.empty((2, 3), dtype=...)``
    (zeros: PyTorch leaves the memory uninitialised); one name, ``torch.Tensor(n)``, either, decided when it
    runs as PyTorch decides (``jnp.ndim(n) == 0``: a size). ``emit.options.dtype`` names the jnp dtype.
    ``*shape`` among the arguments unpacks sizes (PyTorch reads unpacked arguments as sizes):
    ``Tensor(n, *out_shape)`` → ``jnp.empty((n, *out_shape), dtype=...)``."""
    args = list(m.bound.varargs)
    dtype = {"dtype": ctx.spell(f"jax.numpy.{m.rule.emit['options']['dtype']}")}
    if m.bound.starred:
        return _call(ctx.spell("jax.numpy.empty"), [cst.Tuple(
            [cst.StarredElement(a) if i in m.bound.starred else cst.Element(a) for i, a in enumerate(args)])], dtype)
    if not args:
        return _call(ctx.spell("jax.numpy.empty"), [cst.Tuple([])], dtype)
    if len(args) == 1 and isinstance(args[0], (cst.Name, cst.Attribute)) and not _is_size(args[0]):
        # a name: PyTorch reads an int as a size (torch.Tensor(output_dim)), a sequence as data; decided as it
        # does, when it runs (a 0-d value is a size: PyTorch refuses a float)
        x = code(args[0])
        empty = code(_call(ctx.spell("jax.numpy.empty"), [cst.Tuple([cst.Element(args[0])])], dtype))
        data = code(_call(ctx.spell("jax.numpy.asarray"), args, dtype))
        return expr(f"({empty} if {ctx.spell_text('jax.numpy.ndim')}({x}) == 0 else {data})")
    if len(args) == 1 and not _is_size(args[0]):
        return _call(ctx.spell("jax.numpy.asarray"), args, dtype)
    if len(args) > 1 and not all(_is_size(a) or isinstance(a, cst.Name) for a in args):
        m.fail(ctx, "unsupported-construct", f"{m.rule.names[0]} with several arguments that are not sizes")
        return None
    shape = cst.Tuple([cst.Element(a) for a in args])
    return _call(ctx.spell("jax.numpy.empty"), [shape], dtype)


# --- torch.nn.functional ------------------------------------------------------------------------------------

@call_transform("layer-norm-fn")
def layer_norm_fn(m, ctx):
    """``F.layer_norm(x, shape, w, b, eps)`` → ``jax.nn.standardize(x, axis=<the trailing len(shape) axes>,
    epsilon=eps, algorithm="stable") * w + b``: the biased variance of the two-pass formula, as PyTorch."""
    from fwport.core.engine import literal_value
    shape = m.kwargs["normalized_shape"]
    v = literal_value(shape, None)
    if isinstance(v, int) and not isinstance(v, bool):
        axis = expr("-1")
    elif isinstance(v, (tuple, list)) and v:
        axis = expr("-1") if len(v) == 1 else expr("(" + ", ".join(str(i) for i in range(-len(v), 0)) + ")")
    else:
        axis = expr(f"tuple(range(-len({code(shape)}), 0))")
    kw = {"axis": axis}
    if "eps" in m.kwargs:
        kw["epsilon"] = m.kwargs["eps"]
    kw["algorithm"] = cst.SimpleString('"stable"')
    text = code(_call(ctx.spell("jax.nn.standardize"), [m.kwargs["input"]], kw))
    from fwport.packs.torch2jax.passes.modules import OPTIONAL
    optional = ctx.analyses.get(OPTIONAL, set())
    for name, op, unit in (("weight", "*", "1"), ("bias", "+", "0")):
        w = m.kwargs.get(name)
        if w is not None and code(w) != "None":
            if code(w) in optional:  # a field __init__ may leave None (nanoGPT's LayerNorm(ndim, bias=False))
                text = f"{text} {op} ({code(w)} if {code(w)} is not None else {unit})"
            else:
                text = f"{text} {op} {code(w) if _simple(w) or isinstance(w, cst.Call) else '(' + code(w) + ')'}"
    return expr(text)


@call_transform("attention")
def attention(m, ctx):
    """``F.scaled_dot_product_attention(q, k, v, is_causal=..., scale=...)`` written out:
    ``softmax(q @ kᵀ * scale [causal: -inf above the diagonal]) @ v`` over the last two axes (any leading axes,
    as in PyTorch); scale defaults to 1/sqrt(q.shape[-1]). Dropout only in training
    (``dropout_p=p if self.training else 0``, nanoGPT) is an ``eqx.nn.Dropout(p)`` on the weights, drawn from
    ``key``, off where the module's own dropout is (inference_mode), else without a key; other dropout, masks and
    grouped-query heads are refused."""
    from fwport.core.engine import literal_value
    from fwport.core.finding import Severity
    p = m.kwargs.get("dropout_p")
    rate = None
    if p is not None and literal_value(p, None) not in (0, 0.0):
        rate = training_dropout(p)
        if rate is None:
            m.fail(ctx, "unsupported-argument", f"dropout_p={m.written('dropout_p')}: attention dropout draws from "
                   "PyTorch's global generator: apply an eqx.nn.Dropout with a key to the weights by hand (only "
                   "`p if self.training else 0` is translated)")
            return None
    q = _once(m, ctx, "query", "the query")
    k = _once(m, ctx, "key", "the key") if q is not None else None
    if k is None:
        return None
    causal = m.kwargs.get("is_causal")
    c = literal_value(causal, None) if causal is not None else False
    if c not in (True, False):
        m.fail(ctx, "unsupported-argument", f"is_causal={m.written('is_causal')}: write True or False")
        return None
    sp = ctx.spell_text
    scale = m.kwargs.get("scale")
    scale_text = f"{_paren(q)}.shape[-1] ** -0.5" if scale is None or code(scale) == "None" else _paren(scale)
    scores = f"{sp('jax.numpy.matmul')}({code(q)}, {sp('jax.numpy.swapaxes')}({code(k)}, -2, -1)) * {scale_text}"
    if c:
        mask = f"{sp('jax.numpy.tril')}({sp('jax.numpy.ones')}(({_paren(q)}.shape[-2], {_paren(k)}.shape[-2]), dtype=bool))"
        scores = f"{sp('jax.numpy.where')}({mask}, {scores}, -{sp('jax.numpy.inf')})"
    weights = f"{sp('jax.nn.softmax')}({scores}, axis=-1)"
    if rate is not None:
        inference = ctx.analyses.get(ATTENTION_INFERENCE, {}).get(code(m.node))
        ctx.report(Severity.INFO, "key-added", f"dropout_p={m.written('dropout_p')}: the attention weights go through "
                   f"eqx.nn.Dropout({code(rate)}) with `key`, the key of the module's __call__: dropout in training, "
                   + (f"off in inference as {inference[:-len('.inference')]} is (eqx.nn.inference_mode)" if inference
                      else "none without a key (PyTorch's eval mode)"), m.node, m.rule)
        weights = (f"{sp('equinox.nn.Dropout')}({code(rate)}, inference={inference})({weights}, key=key)" if inference
                   else f"{sp('equinox.nn.Dropout')}({code(rate)})({weights}, key=key, inference=key is None)")
    return expr(f"{sp('jax.numpy.matmul')}({weights}, {code(m.kwargs['value'])})")


#: ctx.analyses: source text of an attention call with dropout in training → the inference flag it follows, a
#: dropout submodule's of its module (batch.py), so that eqx.nn.inference_mode switches it off too
ATTENTION_INFERENCE = "torch2jax.attention-inference"


def training_dropout(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``p`` of a dropout rate written ``p if self.training else 0`` (dropout in training only), else None."""
    from fwport.core.engine import literal_value
    from fwport.core.names import dotted_text
    if isinstance(node, cst.IfExp) and dotted_text(node.test) == "self.training" \
            and literal_value(node.orelse, None) in (0, 0.0):
        return node.body
    return None


def _paren(node: cst.BaseExpression) -> str:
    return code(node) if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)) \
        else f"({code(node)})"


@call_transform("einsum")
def einsum(m, ctx):
    """``torch.einsum(eq, a, b)`` → ``jnp.einsum(eq, a, b)`` (the same subscript language); PyTorch's list form
    ``torch.einsum(eq, [a, b])`` has its operands spread."""
    ops = list(m.bound.varargs)
    if len(ops) == 1 and isinstance(ops[0], (cst.List, cst.Tuple)):
        ops = [e.value for e in ops[0].elements]
    return _call(ctx.spell(m.rule.emit["target"]), [m.kwargs["subscripts"], *ops])


@call_transform("randint")
def randint(m, ctx):
    """``torch.randint(high, size)`` / ``(low, high, size)`` (size also by keyword) → ``jax.random.randint(key, size,
    low, high)``: integers in [low, high) from the key in scope."""
    pos = list(m.bound.varargs)
    size = m.kwargs.pop("size", None)
    if size is None and pos:
        size = pos.pop()
    low, high = m.kwargs.pop("low", None), m.kwargs.pop("high", None)
    if len(pos) == 2 and low is None and high is None:
        low, high = pos
    elif len(pos) == 1 and high is None:
        high = pos[0]
    elif len(pos) == 1 and low is None:
        low = pos[0]
    elif pos:
        m.fail(ctx, "unsupported-construct", "torch.randint: arguments not understood (low, high, size)")
        return None
    if size is None or high is None:
        m.fail(ctx, "unsupported-construct", "torch.randint needs high and size")
        return None
    if not _key_added(m, ctx):
        return None
    return _call(ctx.spell(m.rule.emit["target"]), [cst.Name("key"), size, low or cst.Integer("0"), high], m.kwargs)
# --- scripts around the model: devices, data loading, checkpoints, eval -------------------------------
# (the training pass, passes/training.py, rewrites the statements these transforms cannot see whole:
# model.load_state_dict(torch.load(p)), .size()/.data on arrays outside modules)

HELPERS = "torch2jax.helpers"  # ctx.analyses: names of the helpers (data.py) the output calls
STATEFUL = "torch2jax.stateful"  # ctx.analyses: model names whose layers keep a state (set by the training pass)


@call_transform("expression")
def expression(m, ctx):
    """A call → a fixed expression (``emit.options.text``, with ``{name}`` placeholders spelled from
    ``emit.options.names``); ``emit.options.note``: an info finding saying what was replaced, ``warning`` a
    warning (what the translation gives up: _warn)."""
    from fwport.core.finding import Severity

    opts = _options(m)
    names = {k: ctx.spell_text(v) for k, v in opts.get("names", {}).items()}
    if opts.get("note"):
        ctx.report(Severity.INFO, "idiom-replaced", opts["note"], m.node, m.rule)
    _warn(m, ctx)
    return expr(opts["text"].format(**names))


@call_transform("square-subsequent-mask")
def square_subsequent_mask(m, ctx):
    """``nn.Transformer.generate_square_subsequent_mask(sz)`` → ``jnp.triu(jnp.full((sz, sz), -jnp.inf), k=1)``:
    PyTorch's float causal mask (0 on and below the diagonal, -inf above), in the dtype given (``dtype=``, mapped
    by torch-dtype) or the default float dtype, as PyTorch's torch.full of a float."""
    sz = code(m.kwargs["sz"])
    dtype = f", dtype={code(m.kwargs['dtype'])}" if "dtype" in m.kwargs else ""
    triu, full, inf = (ctx.spell_text(f"jax.numpy.{n}") for n in ("triu", "full", "inf"))
    return expr(f"{triu}({full}(({sz}, {sz}), -{inf}{dtype}), k=1)")


@call_transform("autocast")
def autocast(m, ctx):
    """``torch.autocast(...)`` / ``torch.amp.autocast(...)`` as a context manager → ``contextlib.nullcontext()``:
    JAX has no autocast, so the region computes in its arrays' own dtype. Exact where the call switches autocast
    off (``enabled=False``); else an approximate warning (float32 where PyTorch computes float16 / bfloat16).
    (As a decorator, backends.py removes it.)"""
    from fwport.core.engine import literal_value
    from fwport.core.finding import Severity
    enabled = m.kwargs.get("enabled")
    if enabled is None or literal_value(enabled, None) is not False:
        ctx.report(Severity.WARNING, "approximate", "JAX has no autocast: the region computes in its arrays' own "
                   "dtype (float32 here, where PyTorch computes eligible ops in float16 / bfloat16): more precise and "
                   "slower; for mixed precision cast the parameters and inputs (jnp.bfloat16) by hand", m.node, m.rule)
    # the file's own `from contextlib import nullcontext` where it has one (nanoGPT: `nullcontext() if ... else ...`)
    local = next((n for n, q in ctx.imports.aliases.items() if q == "contextlib.nullcontext"
                  and ctx.imports.rebindable is not None and n not in ctx.imports.rebindable), None)
    return expr(f"{local or ctx.spell_text('contextlib.nullcontext')}()")


@call_transform("template")
def template(m, ctx):
    """A call → ``emit.options.text``, its ``{arg}`` placeholders the rule's (renamed) arguments as written (the
    text places them where no operator binds them: a call's arguments), its ``{name}`` ones spelled from
    ``emit.options.names`` (``torch.is_tensor(x)`` → ``isinstance(x, jax.Array)``); ``emit.options.note``: an info
    finding saying what was replaced, ``emit.options.warning`` a warning (what the replacement does not do)."""
    from fwport.core.finding import Severity

    opts = _options(m)
    names = {k: ctx.spell_text(v) for k, v in opts.get("names", {}).items()}
    if opts.get("note"):
        ctx.report(Severity.INFO, "idiom-replaced", opts["note"], m.node, m.rule)
    if opts.get("warning"):
        ctx.report(Severity.WARNING, "unsupported-construct", opts["warning"], m.node, m.rule)
    return expr(opts["text"].format(**names, **{k: code(v) for k, v in m.kwargs.items()}))


@call_transform("data-helper")
def data_helper(m, ctx):
    """A call of a helper written into the output (``emit.target``, defined in data.py): the mapped
    arguments as keywords, the source's ``*args`` positionally; ``emit.options.note`` an info finding,
    ``emit.options.warning`` a warning (what the helper does not do, and what happens then)."""
    from fwport.core.finding import Severity

    from fwport.core import written

    ctx.analyses.setdefault(HELPERS, set()).add(m.rule.emit["target"])
    name = written.name(ctx, m.rule.emit["target"])  # (another name where the file binds the helper's)
    opts = _options(m)
    if opts.get("note"):
        ctx.report(Severity.INFO, "idiom-replaced", opts["note"], m.node, m.rule)
    if opts.get("warning"):
        ctx.report(Severity.WARNING, "unsupported-construct", opts["warning"], m.node, m.rule)
    args = [cst.Arg(v) for v in m.bound.varargs]
    positional = opts.get("positional", [])
    for p in positional:
        if p in m.kwargs:
            args.append(cst.Arg(m.kwargs[p]))
    args += [cst.Arg(v, keyword=cst.Name(k), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
             for k, v in m.kwargs.items() if k not in positional]
    return cst.Call(cst.Name(name), args)


def _state_dict_of(node) -> str | None:
    """``X.state_dict()`` → X's text."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "state_dict" \
            and not node.args:
        return code(node.func.value)
    return None


@call_transform("save")
def save(m, ctx):
    """``torch.save(model.state_dict(), f)`` and ``torch.save(model, f)`` (``model`` a name holding a model:
    MODELS) → ``eqx.tree_serialise_leaves(f, model)`` (with the layer
    state of a model that keeps one: ``(model, state)``, as the state_dict holds BatchNorm's running
    statistics). Any other object is refused: a checkpoint dict mixes arrays, optimizer state and
    Python values that each need their own format."""
    from fwport.core.finding import Severity

    from fwport.packs.torch2jax.passes.training import MODELS

    obj = m.kwargs.get("obj")
    model = _state_dict_of(obj)
    # torch.save(model, f) pickles the whole module: its arrays are what a JAX program saves of it
    whole = model is None and isinstance(obj, cst.Name) and obj.value in ctx.analyses.get(MODELS, ())
    if whole:
        model = obj.value
    if model is None:
        m.fail(ctx, "unsupported-construct", f"torch.save({m.written('obj')}, ...): only model.state_dict() is "
               "translated (eqx.tree_serialise_leaves(path, model)), and a dict display of model.state_dict() / the one "
               "trained optimizer's state_dict() and plain values (save_checkpoint); save other objects with numpy/pickle "
               "by hand (optimizer state: eqx.tree_serialise_leaves(path, opt_state))")
        return None
    if model in ctx.analyses.get(STATEFUL, ()):
        from fwport.packs.torch2jax.passes.state import state_name
        model = f"({model}, {state_name(ctx, model)})"
    ctx.report(Severity.INFO, "idiom-replaced", f"torch.save({'model' if whole else 'model.state_dict()'}, f) → "
               "eqx.tree_serialise_leaves: the file holds Equinox's leaves (the model's arrays), not a PyTorch "
               "checkpoint; read it back with eqx.tree_deserialise_leaves(f, <a model of the same structure>)",
               m.node, m.rule)
    return expr(f"{ctx.spell_text('equinox.tree_serialise_leaves')}({code(m.kwargs['f'])}, {model})")


@call_transform("load")
def load(m, ctx):
    """``torch.load`` outside ``model.load_state_dict(torch.load(f))`` (which the training pass
    rewrites): a pickle of torch objects, refused with what to write."""
    m.fail(ctx, "unsupported-construct", "torch.load(...) reads a pickle of PyTorch objects: a model saved by the "
           "translation is read with `model = eqx.tree_deserialise_leaves(f, model)` (written for "
           "model.load_state_dict(torch.load(f)), or sd = torch.load(f) read only by a later model.load_state_dict(sd) of a "
           "model made above it), a checkpoint dict saved by the translation with `ck = load_checkpoint(f, "
           "{'model': model, ...})` (written where ck is read only as ck['key'] and models / the optimizer are restored "
           "by X.load_state_dict(ck['key'])); other data: convert it once to .npy/.npz and load with numpy")
    return None


SCHEDULE_MARK = "learning_rate=lambda count: "  # the schedule in a scheduler's error message follows this


@call_transform("scheduler")
def scheduler(m, ctx):
    """A ``torch.optim.lr_scheduler`` scheduler: refused, with the exact optax schedule to write.

    PyTorch changes the optimizer's learning rate at each ``scheduler.step()`` (per epoch, usually);
    optax takes the schedule when the optimizer is created, as a function of its update count, so
    the translation depends on how many updates one ``scheduler.step()`` spans, which the code does
    not say statically. The message gives ``learning_rate=lambda count: <schedule>(count //
    steps_per_epoch)`` with the schedule in scheduler steps (``emit.options.schedule``, a template
    over the arguments, PyTorch's defaults filled in): exact for any steps_per_epoch (checked
    against torch in tests/test_torch2jax_training.py)."""
    from fwport.core.engine import literal_value

    opts = _options(m)
    values = {p.name: expr(p.default) for p in m.rule.params if p.default is not None and p.name != "last_epoch"}
    values.update(m.kwargs)
    if literal_value(values.get("last_epoch", expr("-1")), None) != -1:
        m.fail(ctx, "unsupported-argument", "last_epoch: a resumed schedule is not translated")
        return None
    if isinstance(values.get("lr_lambda"), (cst.List, cst.Tuple)):
        m.fail(ctx, "unsupported-argument", "lr_lambda: one function per parameter group is not translated; an "
               "optax optimizer over parameter groups is optax.multi_transform, each transformation with its schedule")
        return None
    names = dict(opts.get("names", {}))  # in a message: no import to add
    # LambdaLR's function, called in the schedule: parenthesised unless an atom ((lambda e: 0.9 ** e)(count // n))
    texts = {k: f"({code(v)})" if k == "lr_lambda" and not isinstance(v, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
             else code(v) for k, v in values.items()}
    schedule = opts["schedule"].format(**names, **texts)
    opt = code(values["optimizer"]) if "optimizer" in values else "the optimizer"
    m.fail(ctx, "unsupported-construct", f"{m.rule.names[0].rsplit('.', 1)[-1]} sets the learning rate at each "
           f"scheduler.step(); optax takes the schedule when the optimizer is created, as a function of its update "
           f"count: create {opt} with {SCHEDULE_MARK}{schedule}(count // steps_per_epoch) (lr: its learning rate; "
           "steps_per_epoch: the updates between two scheduler.step() calls, e.g. len(train_loader); without "
           f"`// steps_per_epoch` for a step per batch) and remove scheduler.step(){opts.get('caveat', '')}")
    return None


@call_transform("refuse")
def refuse(m, ctx):
    """An API with no one-call JAX counterpart: an error whose message (``emit.options.message``)
    says what to write instead."""
    m.fail(ctx, "unsupported-construct", _options(m)["message"])
    return None


# --- sparse matrices ----------------------------------------------------------------------------------------

@call_transform("sparse-matmul")
def sparse_matmul(m, ctx):
    """``torch.spmm(a, b)`` / ``torch.sparse.mm(a, b)`` → ``a @ b``: a ``jax.experimental.sparse.BCOO`` matrix
    times a dense one gives the dense product (the rule pass adds parentheses where the parent needs them)."""
    return cst.BinaryOperation(m.kwargs["a"], cst.MatrixMultiply(), m.kwargs["b"])


@call_transform("sparse-coo")
def sparse_coo(m, ctx):
    """``torch.sparse_coo_tensor(indices, values, size, dtype=d)`` → ``jsparse.BCOO((values, indices.T),
    shape=size)``: BCOO takes one row of coordinates per stored value (the transpose of PyTorch's ``(ndim,
    nnz)`` indices; ``x.T`` written as ``x``); a dtype casts the values. Duplicate coordinates are summed by
    both (BCOO when it is used, PyTorch when it coalesces). Without a size PyTorch infers it from the largest
    index: refused (BCOO needs the shape)."""
    if "shape" not in m.kwargs:
        m.fail(ctx, "unsupported-construct", "torch.sparse_coo_tensor without a size: BCOO needs the shape; "
               "pass size=(rows, cols)")
        return None
    indices, values = m.kwargs["indices"], m.kwargs["data"]
    if isinstance(indices, cst.Attribute) and indices.attr.value == "T":
        rows = indices.value
    else:
        rows = cst.Attribute(expr(_paren(indices)), cst.Name("T"))
    if "dtype" in m.kwargs:
        values = _call(ctx.spell("jax.numpy.asarray"), [values], {"dtype": m.kwargs["dtype"]})
    return _call(ctx.spell("jax.experimental.sparse.BCOO"), [cst.Tuple([cst.Element(values), cst.Element(rows)])],
                 {"shape": m.kwargs["shape"]})


@call_transform("global-pool")
def global_pool(m, ctx):
    """``F.adaptive_avg_pool2d(x, 1)`` (max, 1d) → ``jnp.mean(x, axis=(-2, -1), keepdims=True)``: a pool to one
    value per channel is the reduction over the last (spatial) axes, exact, for one example and a whole batch alike.
    Other output sizes are errors (PyTorch's windows [floor(i n / m), ceil((i + 1) n / m)) are not written out)."""
    size = m.kwargs.get("output_size")
    spatial = _options(m)["spatial"]
    value = literal_value(size, NOT_LITERAL) if size is not None else NOT_LITERAL
    ones = value == 1 or isinstance(value, (tuple, list)) and len(value) == spatial and all(v == 1 for v in value)
    if not ones:
        m.fail(ctx, "unsupported-argument", f"output_size={m.written('output_size')}: only a pool to size 1 is "
               "translated here (the mean over the spatial axes); use nn.AdaptiveAvgPool2d in __init__ for others")
        return None
    axes = "(-2, -1)" if spatial == 2 else "-1"
    return expr(f"{ctx.spell_text(_options(m)['fn'])}({code(m.kwargs['input'])}, axis={axes}, keepdims=True)")


@call_transform("meshgrid", starred=True)
def meshgrid(m, ctx):
    """``torch.meshgrid(a, b, indexing="ij")`` → ``jnp.meshgrid(a, b, indexing="ij")``, the operands of PyTorch's
    one-list form spread (``*grids`` stays spread). The indexing is always written: PyTorch's default is "ij"
    (matrix), jnp's "xy" (Cartesian, the first two outputs' axes swapped)."""
    ops = list(m.bound.varargs)
    indexing = m.kwargs.get("indexing")
    if indexing is None or code(indexing) == "None":
        indexing = cst.SimpleString('"ij"')
    if m.bound.starred:
        args = [*m.bound.vararg_args(), cst.Arg(indexing, keyword=cst.Name("indexing"),
                                                 equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]
        return cst.Call(ctx.spell(m.rule.emit["target"]), [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args])
    if len(ops) == 1 and isinstance(ops[0], (cst.List, cst.Tuple)):
        ops = [e.value for e in ops[0].elements]
    return _call(ctx.spell(m.rule.emit["target"]), ops, {"indexing": indexing})


@call_transform("normalize")
def normalize(m, ctx):
    """``F.normalize(x, p, dim, eps)`` → ``x / jnp.maximum(jnp.linalg.norm(x, axis=dim, keepdims=True), eps)``:
    PyTorch divides by the p-norm over ``dim`` (1 by default) clamped below at eps (1e-12)."""
    x = m.kwargs["input"]
    p, dim, eps = m.kwargs.get("ord"), m.kwargs.get("axis"), m.kwargs.get("eps")
    dim = dim if dim is not None else cst.Integer("1")
    eps = eps if eps is not None else cst.Float("1e-12")
    kw = {} if p is None or literal_value(p, None) == 2 else {"ord": p}
    norm = _call(ctx.spell("jax.numpy.linalg.norm"), [x], {**kw, "axis": dim, "keepdims": cst.Name("True")})
    text = code(x)
    if not isinstance(x, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        text = f"({text})"
    return expr(f"{text} / {ctx.spell_text('jax.numpy.maximum')}({code(norm)}, {code(eps)})")


@call_transform("finfo")
def finfo(m, ctx):
    """``torch.finfo(x.dtype)`` → ``jnp.finfo(x.dtype)`` (max, min, eps, tiny read the same); ``torch.finfo()``,
    the default dtype's, → ``jnp.finfo(jnp.float32)``."""
    dtype = m.kwargs.get("dtype")
    if dtype is None:
        dtype = ctx.spell("jax.numpy.float32")
    return _call(ctx.spell(m.rule.emit["target"]), [dtype])


# --- shapes, norms and the functional layers with explicit weights ------------------------------------------

@call_transform("flatten")
def flatten(m, ctx):
    """``torch.flatten(x)`` → ``jnp.ravel(x)``; ``torch.flatten(x, 1)`` → ``x.reshape(x.shape[0], -1)``; other
    literal ``start_dim`` / ``end_dim`` keep the axes before and after (``x.reshape(*x.shape[:s], -1,
    *x.shape[e + 1:])``). Dimensions that are not literals are refused (the reshape needs them)."""
    start, end = m.kwargs.get("start_dim"), m.kwargs.get("end_dim")
    s = literal_value(start, NOT_LITERAL) if start is not None else 0
    e = literal_value(end, NOT_LITERAL) if end is not None else -1
    if not isinstance(s, int) or not isinstance(e, int):
        m.fail(ctx, "unsupported-argument", "torch.flatten with dimensions that are not integer literals: write the "
               "reshape by hand (x.reshape(*x.shape[:start], -1, *x.shape[end + 1:]))")
        return None
    if s == 0 and e == -1:
        return _call(ctx.spell("jax.numpy.ravel"), [m.kwargs["input"]])
    x = _once(m, ctx, "input", "the input")
    if x is None:
        return None
    shape = f"{_paren(x)}.shape"
    before = [] if s == 0 else [f"{shape}[0]"] if s == 1 else [f"*{shape}[:{s}]"]
    after = [] if e == -1 else [f"*{shape}[{e + 1}:]"]
    return expr(f"{_paren(x)}.reshape({', '.join([*before, '-1', *after])})")


@call_transform("split")
def split(m, ctx):
    """``torch.split(x, n, dim)`` → ``jnp.split(x, list(range(n, x.shape[dim], n)), axis=dim)``: parts of n, the
    last one shorter, as PyTorch cuts them (jnp.split's integer is a number of equal parts, not their size);
    ``torch.split(x, [a, b, c], dim)`` → ``jnp.split(x, [a, a + b], axis=dim)``: the sizes become the points
    where the parts start."""
    sizes, dim = m.kwargs["split_size_or_sections"], m.kwargs.get("axis")
    if isinstance(sizes, (cst.List, cst.Tuple)):
        values = [e.value for e in sizes.elements]
        if any(isinstance(e, cst.StarredElement) for e in sizes.elements) or not values:
            m.fail(ctx, "unsupported-argument", f"torch.split with sizes {m.written('split_size_or_sections')}: write "
                   "jnp.split with the indices where the parts start")
            return None
        ints = [literal_value(v, NOT_LITERAL) for v in values]
        points, total = [], []
        for v, i in zip(values[:-1], ints[:-1]):
            total.append(v)
            if all(isinstance(literal_value(t, NOT_LITERAL), int) for t in total):
                points.append(cst.Integer(str(sum(literal_value(t, 0) for t in total))))
            else:
                points.append(expr(" + ".join(_paren(t) for t in total)))
        count = cst.List([cst.Element(p) for p in points])
        x = m.kwargs["tensor"]
    else:
        x = _once(m, ctx, "tensor", "the tensor")
        if x is None:
            return None
        n = _paren(sizes)
        count = expr(f"list(range({n}, {_paren(x)}.shape[{code(dim) if dim is not None else 0}], {n}))")
    return _call(ctx.spell("jax.numpy.split"), [x, count], {} if dim is None else {"axis": dim})


@call_transform("vector-norm")
def vector_norm(m, ctx):
    """``torch.norm(x, p, dim, keepdim)`` → ``jnp.linalg.vector_norm(x, ord=p, axis=dim, keepdims=keepdim)``: PyTorch
    computes a vector norm over ``dim`` (all elements when it is None) for a number p and for its default "fro"
    (the 2-norm: ord left out), never a matrix norm, whatever the rank; jnp.linalg.norm would give the spectral norm
    of a matrix for ord=2. p="nuc" is refused."""
    p = m.kwargs.pop("ord", None)
    value = literal_value(p, NOT_LITERAL) if p is not None else None
    if value == "nuc":
        m.fail(ctx, "unsupported-argument", "torch.norm(p=\"nuc\"), the nuclear norm: write "
               "jnp.linalg.matrix_norm(x, ord=\"nuc\") (over the last two axes)")
        return None
    if isinstance(value, str) and value != "fro":
        m.fail(ctx, "unsupported-argument", f"torch.norm(p={m.written('ord')}): PyTorch knows \"fro\" and \"nuc\"")
        return None
    keywords = {k: m.kwargs[k] for k in ("axis", "keepdims") if k in m.kwargs}
    if value not in (None, "fro"):
        keywords["ord"] = p
    return _call(ctx.spell("jax.numpy.linalg.vector_norm"), [m.kwargs["input"]], keywords)


@call_transform("linear-fn")
def linear_fn(m, ctx):
    """``F.linear(x, w, b)`` → ``x @ w.T + b`` (PyTorch's weight is (out, in)); the same for one example (x of
    shape (in,)) and for a batch."""
    text = f"{_paren(m.kwargs['input'])} @ {_paren(m.kwargs['weight'])}.T"
    bias = m.kwargs.get("bias")
    if bias is not None and code(bias) != "None":
        text += f" + {_paren(bias)}"
    return expr(text)


#: PyTorch's layouts of a convolution's input / weight / output with 1, 2 or 3 spatial axes
CONV_LAYOUTS = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}


def _per_axis(value, n: int) -> tuple | None:
    """An int or a tuple of ``n`` ints (a literal value) → a tuple of ``n`` ints, else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    if isinstance(value, (tuple, list)) and len(value) == n and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None


def conv_expr(ctx, x, w, bias, args: dict, spatial: int) -> tuple[cst.BaseExpression | None, str]:
    """``F.conv2d(x, w, bias, stride, padding, dilation, groups)`` (``args``: the values given by name) →
    ``jax.lax.conv_general_dilated`` in PyTorch's layouts (NCHW input, OIHW weight), the bias added over the channel
    axis. (expression, "") or (None, why it is refused)."""
    values = {k: literal_value(v, NOT_LITERAL) if v is not None else d
              for (k, d), v in zip((("stride", 1), ("padding", 0), ("dilation", 1)),
                                   (args.get("stride"), args.get("padding"), args.get("dilation")))}
    stride, dilation = _per_axis(values["stride"], spatial), _per_axis(values["dilation"], spatial)
    for name, v in (("stride", stride), ("dilation", dilation)):
        if v is None:
            return None, (f"{name}={code(args[name])}: translated when it is an integer literal or a tuple of "
                          f"{spatial}; write window_strides / rhs_dilation of jax.lax.conv_general_dilated by hand")
    pad = values["padding"]
    if pad in ("same", "valid"):
        padding = cst.SimpleString(f'"{pad.upper()}"')  # both put the odd one of an even total after (right)
    elif _per_axis(pad, spatial) is not None:
        padding = expr(repr(tuple((p, p) for p in _per_axis(pad, spatial))))
    else:
        return None, (f"padding={code(args['padding'])}: translated when it is an integer literal, a tuple of "
                      f"{spatial} or \"same\" / \"valid\"")
    keywords = {"window_strides": expr(repr(stride)), "padding": padding}
    if dilation != (1,) * spatial:
        keywords["rhs_dilation"] = expr(repr(dilation))
    keywords["dimension_numbers"] = expr(repr(CONV_LAYOUTS[spatial]).replace("'", '"'))
    groups = args.get("groups")
    if groups is not None and literal_value(groups, NOT_LITERAL) != 1:
        keywords["feature_group_count"] = groups
    text = code(_call(ctx.spell("jax.lax.conv_general_dilated"), [x, w], keywords))
    if bias is not None and code(bias) != "None":
        text += f" + {_paren(bias)}[:{', None' * spatial}]"
    return expr(text), ""


@call_transform("conv-fn")
def conv_fn(m, ctx):
    """``F.conv2d(x, w, b, stride, padding, dilation, groups)`` of a batch (N, C, H, W) → ``conv_general_dilated``
    (:func:`conv_expr`); inside a module's ``__call__`` batch.py gives one example (C, H, W) a batch axis of one
    (``F.conv2d(x[None], w)[0]``), which this then translates."""
    out, why = conv_expr(ctx, m.kwargs["input"], m.kwargs["weight"], m.kwargs.get("bias"), m.kwargs,
                         _options(m)["spatial"])
    if out is None:
        m.fail(ctx, "unsupported-argument", f"{m.rule.names[0].replace('torch.nn.functional.', 'F.')}: {why}")
    return out


POOLS = {"max_pool2d": "MaxPool2d", "avg_pool2d": "AvgPool2d", "max_pool1d": "MaxPool1d", "avg_pool1d": "AvgPool1d"}


def pool_module(ctx, kind: str, a: dict) -> tuple[cst.BaseExpression | None, str]:
    """``F.max_pool2d(x, kernel_size, stride, padding, ...)`` (``a``: the arguments by name; ``kind``: max_pool2d) →
    the Equinox pooling module for one example, ``eqx.nn.MaxPool2d(kernel_size, stride=...)``, with PyTorch's stride
    default (the window; Equinox's is 1) written out. (module, "") or (None, why it is refused)."""
    for name, fine in (("dilation", ("1",)), ("return_indices", ("False",)),
                       ("ceil_mode", ("False",)), ("count_include_pad", ("True",)), ("divisor_override", ("None",))):
        if name in a and code(a[name]) not in fine:
            return None, (f"F.{kind}: {name}={code(a[name])} is not translated; keep the default or use an eqx.nn "
                          "pooling module")
    stride = a.get("stride")
    if stride is None or code(stride) == "None":
        stride = a["kernel_size"]  # torch's default; Equinox's is 1
    padding = {"padding": a["padding"]} if "padding" in a and code(a["padding"]) != "0" else {}
    # (Equinox pads a max pool with -inf and divides an average by the whole window: PyTorch's count_include_pad)
    return _call(ctx.spell(f"equinox.nn.{POOLS[kind]}"), [a["kernel_size"]], {"stride": stride, **padding}), ""


@call_transform("functional-pool")
def functional_pool(m, ctx):
    """``F.max_pool2d(x, 2)`` of a batch (N, C, H, W) → ``jax.vmap(eqx.nn.MaxPool2d(2, stride=2))(x)``: the Equinox
    module pools one example (C, H, W); inside a module's ``__call__`` batch.py calls it on the example itself."""
    kind = m.rule.names[0].rsplit(".", 1)[-1]
    module, why = pool_module(ctx, kind, m.kwargs)
    if module is None:
        m.fail(ctx, "unsupported-argument", why)
        return None
    return cst.Call(_call(ctx.spell("jax.vmap"), [module]), [cst.Arg(m.kwargs["input"])])


@call_transform("pad-sequence")
def pad_sequence(m, ctx):
    """``pad_sequence(seqs, batch_first, padding_value, padding_side)`` → ``jnp.stack([jnp.pad(s, [(0, max(map(len,
    seqs)) - len(s))] + [(0, 0)] * (s.ndim - 1)) for s in seqs], axis=1)``: each sequence padded at its end (the
    start for padding_side="left") to the longest, stacked on a new axis 1 (0 with batch_first=True)."""
    seqs = _once(m, ctx, "sequences", "the sequences")
    if seqs is None:
        return None
    first, side = (literal_value(m.kwargs[k], NOT_LITERAL) if k in m.kwargs else d
                   for k, d in (("batch_first", False), ("padding_side", "right")))
    if first not in (True, False) or side not in ("right", "left"):
        m.fail(ctx, "unsupported-argument", "pad_sequence: batch_first (True / False) and padding_side (\"right\" / "
               "\"left\") are translated when written as literals")
        return None
    from fwport.packs.torch2jax.batch import names_in
    taken = names_in(seqs)
    s = next(n for n in ("s", "seq", "seq_", "seq__") if n not in taken)
    gap = f"max(map(len, {code(seqs)})) - len({s})"
    widths = f"[({gap}, 0)]" if side == "left" else f"[(0, {gap})]"
    value = m.kwargs.get("padding_value")
    fill = "" if value is None or literal_value(value, NOT_LITERAL) in (0, 0.0) else f", constant_values={code(value)}"
    pad = f"{ctx.spell_text('jax.numpy.pad')}({s}, {widths} + [(0, 0)] * ({s}.ndim - 1){fill})"
    return expr(f"{ctx.spell_text('jax.numpy.stack')}([{pad} for {s} in {code(seqs)}], axis={0 if first else 1})")

