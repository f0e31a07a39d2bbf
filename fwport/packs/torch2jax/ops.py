"""Call transforms of the torch2jax rules (``emit.transform``): calls that are not a plain
``target(**kwargs)``."""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import build_call, code, expr
from fwport.packs.torch2jax.registry import call_transform, value_transform


def _options(m) -> dict:
    return m.rule.emit.get("options", {})


@call_transform("lambda")
def as_lambda(m, ctx):
    """An activation module → ``eqx.nn.Lambda(fn)``: ``emit.options.fn`` names the function;
    ``emit.options.kwargs`` are its fixed keywords (then it is wrapped in a ``lambda``)."""
    opts = _options(m)
    fn = ctx.spell_text(opts["fn"])
    extra = dict(opts.get("kwargs", {}))
    for k, v in m.kwargs.items():  # the rule's renamed arguments
        extra[k] = code(v)
    if extra:
        inner = ", ".join(f"{k}={v}" for k, v in extra.items())
        fn = f"lambda x: {fn}(x, {inner})"
    return expr(f"{ctx.spell_text('equinox.nn.Lambda')}({fn})")


@call_transform("sequential")
def sequential(m, ctx):
    """``nn.Sequential(a, b)`` → ``eqx.nn.Sequential([a, b])``."""
    items = [cst.Element(v) for v in m.bound.varargs]
    return cst.Call(ctx.spell("equinox.nn.Sequential"), [cst.Arg(cst.List(items))])


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
    values = {k: code(v) for k, v in m.kwargs.items() if k != "reduction"}
    names = {k: ctx.spell_text(v) for k, v in opts.get("names", {}).items()}
    text = opts["elementwise"].format(**names, **values)
    reduction = m.kwargs.get("reduction")
    how = "'mean'" if reduction is None else code(reduction).replace('"', "'")
    if how == "'mean'":
        return expr(f"{ctx.spell_text('jax.numpy.mean')}({text})")
    if how == "'sum'":
        return expr(f"{ctx.spell_text('jax.numpy.sum')}({text})")
    if how == "'none'":
        return expr(text)
    m.fail(ctx, "unsupported-argument", f"reduction={m.written('reduction')}: write 'mean', 'sum' or 'none'")
    return None


@call_transform("call")
def call(m, ctx):
    """A plain call plus fixed keywords from ``emit.options.kwargs`` (Python text): a default that
    differs is written out (``jax.nn.gelu(x, approximate=False)``)."""
    for k, v in _options(m).get("kwargs", {}).items():
        m.kwargs.setdefault(k, expr(v))
    return build_call(m, ctx, target=m.rule.emit["target"])


# --- optimizers ------------------------------------------------------------------------------------

OPTIMIZERS = "torch2jax.optimizers"  # ctx.analyses: the emitted optax expression's text → the model's source text


@value_transform("model-parameters")
def model_parameters(value, spec, m, ctx):
    """``model.parameters()``: optax transformations take no parameters; the optimizer state is
    initialised from the model's arrays (``opt_state = optim.init(eqx.filter(model, eqx.is_array))``,
    written by the training pass)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "parameters" \
            and not value.args:
        m.extras["model"] = code(value.func.value)
        return
    m.fail(ctx, "unsupported-argument", f"{m.written(spec.name)}: only model.parameters() is translated (parameter "
           "groups and subsets become optax.multi_transform / masks by hand)")


@call_transform("optimizer")
def optimizer(m, ctx):
    """torch.optim.X(model.parameters(), ...) → the optax transformation with every hyperparameter
    mapped; PyTorch's coupled ``weight_decay`` (added to the gradient before the step) becomes
    ``optax.add_decayed_weights`` chained *before* it. ``emit.options.decoupled``: the transformation
    takes ``weight_decay`` itself (AdamW)."""
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
    wd = kw.pop("weight_decay", None) if not opts.get("decoupled") else None
    order = ("learning_rate", "b1", "b2", "eps", "momentum", "nesterov", "weight_decay")
    args = ", ".join(f"{k}={code(kw[k])}" for k in order if k in kw)
    text = f"{ctx.spell_text(m.rule.emit['target'])}({args})"
    if wd is not None and code(wd) not in ("0", "0.0"):
        text = f"{ctx.spell_text('optax.chain')}({ctx.spell_text('optax.add_decayed_weights')}({code(wd)}), {text})"
    out = expr(text)
    ctx.analyses.setdefault(OPTIMIZERS, {})[text] = m.extras.get("model")
    return out


@call_transform("unwrap")
def unwrap(m, ctx):
    """A PyTorch wrapper with no JAX counterpart → what it wraps (nn.Parameter(data) → data,
    nn.ModuleList([...]) → [...]); an omitted value is an empty list / an error."""
    values = list(m.kwargs.values())
    if values:
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


@value_transform("torch-dtype")
def torch_dtype(value, spec, m, ctx):
    """``dtype=torch.float`` → ``dtype=jnp.float32`` (``DTYPES``); ``None`` is left out (each side's default);
    any other value (a variable) is refused."""
    if isinstance(value, cst.Name) and value.value == "None":
        return
    q = ctx.imports.resolve(value)
    name = q[len("torch."):] if q and q.startswith("torch.") else None
    if name not in DTYPES:
        m.fail(ctx, "unsupported-argument", f"{spec.name}={m.written(spec.name) or code(value)}: only a torch dtype "
               f"written out (torch.float32, torch.long, ...) is translated; write the jnp dtype by hand")
        return
    m.kwargs[spec.to or spec.name] = ctx.spell(f"jax.numpy.{DTYPES[name]}")


@call_transform("random")
def random(m, ctx):
    """``torch.randn(4, 8)`` → ``jax.random.normal(key, (4, 8))``: PyTorch's global generator becomes the
    key in scope (in ``__init__``: the module's, split per use by the modules pass)."""
    from fwport.core.finding import Severity

    shape = shape_args(m, ctx).args[0].value
    ctx.report(Severity.INFO, "key-added", f"{m.rule.names[0]} draws from PyTorch's global generator: here from "
               "`key`, which must be a jax.random key in scope (in __init__ it is the module's own)", m.node, m.rule)
    return cst.Call(ctx.spell(m.rule.emit["target"]), [cst.Arg(cst.Name("key")), cst.Arg(shape)])


@call_transform("loss-module")
def loss_module(m, ctx):
    """A loss module (``criterion = nn.CrossEntropyLoss()``) → a lambda of its two inputs computing the
    same reduction (``emit.options.params`` names them)."""
    opts = _options(m)
    names = {k: ctx.spell_text(v) for k, v in opts.get("names", {}).items()}
    text = opts["elementwise"].format(**names)
    reduction = m.kwargs.get("reduction")
    how = "'mean'" if reduction is None else code(reduction).replace('"', "'")
    reduce = {"'mean'": "jax.numpy.mean", "'sum'": "jax.numpy.sum"}.get(how)
    if reduce is None and how != "'none'":
        m.fail(ctx, "unsupported-argument", f"reduction={m.written('reduction')}: write 'mean', 'sum' or 'none'")
        return None
    body = f"{ctx.spell_text(reduce)}({text})" if reduce else text
    return expr(f"lambda {opts['params']}: {body}")


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
    ctx.report(Severity.WARNING, "approximate", "BatchNorm running statistics: Equinox averages the biased batch "
               "variance and debiases the average, PyTorch averages the unbiased one from (0, 1): normalisation in "
               "training and inference with the same statistics agree, the statistics a training run accumulates "
               "differ slightly", m.node, m.rule)
    return expr(f"{ctx.spell_text('equinox.nn.BatchNorm')}({', '.join(args)})")


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


@call_transform("adaptive-pool")
def adaptive_pool(m, ctx):
    """Adaptive pooling: exact for an output of 1 (a global pool); other sizes split the input into
    windows as PyTorch does only when they divide it (an approximate warning)."""
    from fwport.core.engine import literal_value
    from fwport.core.finding import Severity

    size = literal_value(m.kwargs["target_shape"], None)
    if size not in (1, (1, 1), [1, 1]):
        ctx.report(Severity.WARNING, "approximate", f"output_size={m.written('output_size')}: the same as PyTorch "
                   "only where it divides the input size (else the windows differ)", m.node, m.rule)
    if size in ((1, 1), [1, 1]):
        m.kwargs["target_shape"] = cst.Integer("1")
    return build_call(m, ctx, target=m.rule.emit["target"])
