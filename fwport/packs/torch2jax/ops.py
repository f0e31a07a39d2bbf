"""Call transforms of the torch2jax rules (``emit.transform``): calls that are not a plain
``target(**kwargs)``."""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import build_call, code, expr
from fwport.packs.torch2jax.registry import call_transform


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
    text = opts["elementwise"].format(**{k: ctx.spell_text(v) if "." in v and k.startswith("fn_") else v
                                         for k, v in {**opts.get("names", {}), **values}.items()})
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
