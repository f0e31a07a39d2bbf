"""Layers Equinox has no 1:1 counterpart for: recurrent layers (nn.LSTM / nn.GRU / nn.RNN over a
sequence, nn.RNNCell), nn.MultiheadAttention with PyTorch's masks and returned weights, nn.PixelShuffle.

Each is a small ``eqx.Module`` written into the output after its imports (the output never depends
on fwport), taking one example as every translated module does: a sequence (L, features), an image
(C, H, W). The call transforms below ask for the helper (:func:`use`) and emit its construction;
:func:`finish` writes the definitions the output still calls.

Parameters keep Equinox's layout: the recurrent cells are eqx.nn.LSTMCell / eqx.nn.GRUCell, whose one
bias is PyTorch's two added (GRU: ``bias`` = b_ih + (b_hr, b_hz, 0), ``bias_n`` = b_hn); attention has
separate query/key/value projections where PyTorch packs them (``in_proj_weight``). The verifier moves
a state_dict into them by ``fwport/verify/eqx_layouts.py``.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import build_call, code, expr, literal_value
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, scan
from fwport.core.rewrite import rewrite
from fwport.packs.torch2jax.registry import call_transform
from fwport.packs.torch2jax import init as inits

_KEY = "torch2jax-layers"
#: ctx.analyses: the sequence-layer constructions batch.py proved (every call gets the batch axis second)
SEQ_PROVEN = "torch2jax.seq-proven"

_RECURRENT = '''

class Stacked{kind}(eqx.Module):
    """PyTorch's nn.{kind} on one sequence x of shape (L, input_size): an {cell} per layer and
    direction, stepped by jax.lax.scan (the second direction runs over the steps in reverse). Returns the
    last layer's outputs (L, directions * hidden_size) and the final state {state} (num_layers * directions,
    hidden_size), what PyTorch returns for one example; hx, the initial state in that form, is zeros when
    omitted.
    dropout applies to the outputs of every layer but the last, in training (a key is needed then)."""

    cells: list
    dropout: eqx.nn.Dropout
    hidden_size: int = eqx.field(static=True)

    def __init__(self, input_size, hidden_size, num_layers=1, {params}bias=True, dropout=0.0, bidirectional=False, *, key):
        directions = 2 if bidirectional else 1
        keys = jax.random.split(key, num_layers * directions)
        sizes = [input_size] + [directions * hidden_size] * (num_layers - 1)
        self.cells = [[{cell}(size, hidden_size, use_bias=bias, {cell_args}key=keys[i * directions + d])
                       for d in range(directions)] for i, size in enumerate(sizes)]
        self.dropout = eqx.nn.Dropout(dropout)
        self.hidden_size = hidden_size

    def __call__(self, x, hx=None, *, key=None):
        shape = (len(self.cells) * len(self.cells[0]), self.hidden_size)
        if hx is None:
            hx = {zeros}
        keys = [None] * len(self.cells) if key is None else list(jax.random.split(key, len(self.cells)))
        final = []
        for i, cells in enumerate(self.cells):
            if i > 0:
                x = self.dropout(x, key=keys[i])
            outputs = []
            for d, cell in enumerate(cells):
                j = i * len(cells) + d

                def step(state, x_t, cell=cell):
                    state = cell(x_t, state)
                    return state, {output}

                state, ys = jax.lax.scan(step, {initial}, x, reverse=d == 1)
                final.append(state)
                outputs.append(ys)
            x = jnp.concatenate(outputs, axis=-1)
        return x, {result}
'''

_TUPLE_STATE = dict(state="(h_n, c_n), each", zeros="(jnp.zeros(shape, x.dtype), jnp.zeros(shape, x.dtype))",
                    output="state[0]", initial="(hx[0][j], hx[1][j])",
                    result="(jnp.stack([h for h, _ in final]), jnp.stack([c for _, c in final]))")
_ONE_STATE = dict(state="h_n", zeros="jnp.zeros(shape, x.dtype)", output="state", initial="hx[j]",
                  result="jnp.stack(final)")

_ELMAN_CELL = '''

class ElmanRNNCell(eqx.Module):
    """PyTorch's nn.RNNCell for one example: h' = tanh(weight_ih @ x + weight_hh @ h + bias) (relu with
    nonlinearity="relu"); bias is PyTorch's bias_ih + bias_hh."""

    weight_ih: jax.Array
    weight_hh: jax.Array
    bias: jax.Array | None
    hidden_size: int = eqx.field(static=True)
    nonlinearity: str = eqx.field(static=True)

    def __init__(self, input_size, hidden_size, use_bias=True, nonlinearity="tanh", *, key):
        bound = 1 / math.sqrt(hidden_size)
        ikey, hkey, bkey = jax.random.split(key, 3)
        self.weight_ih = jax.random.uniform(ikey, (hidden_size, input_size), minval=-bound, maxval=bound)
        self.weight_hh = jax.random.uniform(hkey, (hidden_size, hidden_size), minval=-bound, maxval=bound)
        self.bias = jax.random.uniform(bkey, (hidden_size,), minval=-bound, maxval=bound) if use_bias else None
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"unknown nonlinearity {nonlinearity!r}: 'tanh' or 'relu'")
        self.hidden_size = hidden_size
        self.nonlinearity = nonlinearity

    def __call__(self, x, hidden, *, key=None):
        h = self.weight_ih @ x + self.weight_hh @ hidden
        if self.bias is not None:
            h = h + self.bias
        return jax.nn.relu(h) if self.nonlinearity == "relu" else jnp.tanh(h)
'''

_ATTENTION = '''

class MultiheadAttentionWithWeights(eqx.Module):
    """PyTorch's nn.MultiheadAttention for one example: query (Lq, embed_dim), key (Lk, kdim), value
    (Lk, vdim). attn_mask (Lq, Lk) or (num_heads, Lq, Lk) and key_padding_mask (Lk,) follow PyTorch: a
    boolean True is a position NOT attended (the opposite of eqx.nn.MultiheadAttention's mask), a float
    mask is added to the scores. Returns the output (Lq, embed_dim) and the attention weights, averaged
    over the heads (Lq, Lk) or per head (num_heads, Lq, Lk) with average_attn_weights=False, or None with
    need_weights=False. dropout applies to the weights, in training (a key is needed then: dropout_key)."""

    query_proj: eqx.nn.Linear
    key_proj: eqx.nn.Linear
    value_proj: eqx.nn.Linear
    output_proj: eqx.nn.Linear
    dropout: eqx.nn.Dropout
    num_heads: int = eqx.field(static=True)

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None, *, key):
        qkey, kkey, vkey, okey = jax.random.split(key, 4)
        self.query_proj = eqx.nn.Linear(embed_dim, embed_dim, use_bias=bias, key=qkey)
        self.key_proj = eqx.nn.Linear(kdim or embed_dim, embed_dim, use_bias=bias, key=kkey)
        self.value_proj = eqx.nn.Linear(vdim or embed_dim, embed_dim, use_bias=bias, key=vkey)
        self.output_proj = eqx.nn.Linear(embed_dim, embed_dim, use_bias=bias, key=okey)
        self.dropout = eqx.nn.Dropout(dropout)
        self.num_heads = num_heads

    def __call__(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                 average_attn_weights=True, is_causal=False, *, dropout_key=None):
        q, k, v = jax.vmap(self.query_proj)(query), jax.vmap(self.key_proj)(key), jax.vmap(self.value_proj)(value)
        q, k, v = (t.reshape(t.shape[0], self.num_heads, -1).transpose(1, 0, 2) for t in (q, k, v))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        for mask in (attn_mask, None if key_padding_mask is None else key_padding_mask[None, :]):
            if mask is not None:
                scores = jnp.where(mask, -jnp.inf, scores) if mask.dtype == jnp.bool_ else scores + mask
        weights = self.dropout(jax.nn.softmax(scores, axis=-1), key=dropout_key)
        out = (weights @ v).transpose(1, 0, 2).reshape(query.shape[0], -1)
        out = jax.vmap(self.output_proj)(out)
        if not need_weights:
            return out, None
        return out, weights.mean(axis=0) if average_attn_weights else weights
'''

_PIXEL_SHUFFLE = '''

class PixelShuffle(eqx.Module):
    """PyTorch's nn.PixelShuffle for one example: (C * r * r, H, W) → (C, H * r, W * r), channel
    c * r * r + i * r + j going to pixel (h * r + i, w * r + j) of channel c."""

    upscale_factor: int = eqx.field(static=True)

    def __call__(self, x, *, key=None):
        r = self.upscale_factor
        c, h, w = x.shape
        x = x.reshape(c // (r * r), r, r, h, w)
        return x.transpose(0, 3, 1, 4, 2).reshape(c // (r * r), h * r, w * r)
'''

_UPSAMPLE = '''

class Upsample(eqx.Module):
    """PyTorch's nn.Upsample for one example (C, *spatial): the output size is size, or floor(n *
    scale_factor) per axis; mode "nearest" takes pixel floor(i * step), the linear modes ("linear",
    "bilinear", "trilinear") interpolate axis by axis between the two pixels around PyTorch's source
    position, (i + 0.5) * step - 0.5 (i * (n - 1) / (out - 1) with align_corners), where step is
    1 / scale_factor, or n / out when size is given, as PyTorch computes it (nearest in float32, the linear
    weights in the input's precision)."""

    size: object = eqx.field(static=True)
    scale_factor: object = eqx.field(static=True)
    mode: str = eqx.field(static=True)
    align_corners: bool = eqx.field(static=True)

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None):
        if mode not in ("nearest", "linear", "bilinear", "trilinear"):
            raise ValueError(f"mode {mode!r} is not translated: 'nearest' or a linear mode")
        self.size, self.scale_factor, self.mode, self.align_corners = size, scale_factor, mode, bool(align_corners)

    def __call__(self, x, *, key=None):
        spatial = x.ndim - 1
        sizes = None if self.size is None else tuple(self.size) if isinstance(self.size, (tuple, list)) else (self.size,) * spatial
        scales = None if self.scale_factor is None else tuple(self.scale_factor) \\
            if isinstance(self.scale_factor, (tuple, list)) else (self.scale_factor,) * spatial
        for axis in range(1, x.ndim):
            n = x.shape[axis]
            out = sizes[axis - 1] if sizes else math.floor(n * scales[axis - 1])
            step = n / out if sizes else 1 / scales[axis - 1]
            i = jnp.arange(out, dtype=jnp.float32)
            if self.mode == "nearest":
                x = jnp.take(x, jnp.minimum(jnp.floor(i * step).astype(jnp.int32), n - 1), axis=axis)
                continue
            i = i.astype(jnp.promote_types(x.dtype, jnp.float32))  # the linear weights in PyTorch's precision
            if self.align_corners:
                src = i * ((n - 1) / (out - 1) if out > 1 else 0.0)
            else:
                src = jnp.maximum((i + 0.5) * step - 0.5, 0.0)
            lo = jnp.floor(src).astype(jnp.int32)
            hi = jnp.minimum(lo + 1, n - 1)
            w = (src - lo).reshape((out,) + (1,) * (x.ndim - axis - 1)).astype(x.dtype)
            x = jnp.take(x, lo, axis=axis) * (1 - w) + jnp.take(x, hi, axis=axis) * w
        return x
'''

_PRETRAINED_EMBEDDING = '''

class PretrainedEmbedding(eqx.Module):
    """PyTorch's nn.Embedding.from_pretrained: the table given, (num_embeddings, embedding_dim), looked up at
    indices of any shape (the table's rows for each); frozen (PyTorch's default) it is read through
    jax.lax.stop_gradient, so no gradient reaches it."""

    weight: jax.Array
    freeze: bool = eqx.field(static=True)

    def __init__(self, embeddings, freeze=True):
        self.weight = jnp.asarray(embeddings)
        self.freeze = freeze

    def __call__(self, x, *, key=None):
        weight = jax.lax.stop_gradient(self.weight) if self.freeze else self.weight
        return weight[x]
'''

_UNFROZEN = '''

def unfrozen(params):
    """True for each array the optimizer updates, False for the tables of PretrainedEmbedding(freeze=True): PyTorch's
    optimizer leaves a parameter that gets no gradient alone (no step, no weight decay), and optax.masked(optimizer,
    unfrozen) passes their zero gradient through as their update."""
    def mark(m):
        frozen = isinstance(m, PretrainedEmbedding) and m.freeze
        return jax.tree_util.tree_map(lambda _: not frozen, m)
    return jax.tree_util.tree_map(mark, params, is_leaf=lambda m: isinstance(m, PretrainedEmbedding))
'''

_TORCH_PAD = '''

def torch_pad(x, pad, mode="constant", value=None):
    """PyTorch's F.pad: pad holds (before, after) pairs for the last axes, the last axis first; modes constant
    (value, 0 by default), reflect, replicate and circular are jnp.pad's constant, reflect, edge and wrap.
    Negative pads (PyTorch crops) and more pairs than the array has axes raise."""
    pad = list(pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim or min(pad, default=0) < 0:
        raise ValueError(f"pad {pad} of an array of shape {x.shape}: an even number of non-negative sizes, at most "
                         "two per axis, is translated")
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        return jnp.pad(x, widths, constant_values=0 if value is None else value)
    modes = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
    if mode not in modes:
        raise ValueError(f"padding mode {mode!r} is not translated")
    return jnp.pad(x, widths, mode=modes[mode])


class Pad(eqx.Module):
    """PyTorch's padding layers (ReflectionPad2d, ReplicationPad2d, ZeroPad2d, ConstantPad2d and their 1d / 3d
    forms): padding, an int for every side of the last `dims` axes or (left, right, top, bottom, ...), applied
    by torch_pad to one example."""

    padding: tuple = eqx.field(static=True)
    mode: str = eqx.field(static=True)
    value: float = eqx.field(static=True)

    def __init__(self, padding, dims, mode="constant", value=0.0):
        self.padding = (padding,) * (2 * dims) if isinstance(padding, int) else tuple(padding)
        self.mode, self.value = mode, value

    def __call__(self, x, *, key=None):
        return torch_pad(x, self.padding, self.mode, self.value)
'''

_CHANNEL_DROPOUT = '''

class ChannelDropout(eqx.Module):
    """PyTorch's nn.Dropout1d / Dropout2d / Dropout3d for one example: in training, whole channels (the first
    axis) zeroed with probability p and the others scaled by 1 / (1 - p), one draw per channel; the identity in
    inference mode (model.eval()). An example with one axis (PyTorch's (N, C) batch, which dropout2d reads as N
    channels) is zeroed or kept whole."""

    p: float = eqx.field(static=True)
    inference: bool = False

    def __init__(self, p=0.5, inference=False):
        self.p, self.inference = p, inference

    def __call__(self, x, *, key=None, inference=None):
        if inference is None:
            inference = self.inference
        if inference or self.p == 0:
            return x
        if self.p == 1:
            return jnp.zeros_like(x)
        if key is None:
            raise RuntimeError("ChannelDropout draws in training: give it key=, or switch to eqx.nn.inference_mode")
        shape = x.shape[:1] + (1,) * (x.ndim - 1) if x.ndim > 1 else ()
        keep = jax.random.bernoulli(key, 1 - self.p, shape)
        return jnp.where(keep, x / (1 - self.p), 0).astype(x.dtype)
'''

_PER_VECTOR = '''

class PerVector(eqx.Module):
    """A layer that takes one vector in Equinox (Linear, LayerNorm) applied to every vector along the last axis
    of a larger example, as PyTorch's layer is: mapped with jax.vmap over each leading axis."""

    layer: eqx.Module

    def __call__(self, x, *, key=None):
        f = self.layer
        for _ in range(x.ndim - 1):
            f = jax.vmap(f)
        return f(x)
'''

HELPERS: dict[str, str] = {
    "StackedLSTM": _RECURRENT.format(kind="LSTM", cell="eqx.nn.LSTMCell", params="", cell_args="", **_TUPLE_STATE),
    "StackedGRU": _RECURRENT.format(kind="GRU", cell="eqx.nn.GRUCell", params="", cell_args="", **_ONE_STATE),
    "StackedRNN": _RECURRENT.format(kind="RNN", cell="ElmanRNNCell", params='nonlinearity="tanh", ',
                                    cell_args="nonlinearity=nonlinearity, ", **_ONE_STATE).replace(
        "an ElmanRNNCell", "an ElmanRNNCell (below)"),
    "ElmanRNNCell": _ELMAN_CELL,
    "MultiheadAttentionWithWeights": _ATTENTION,
    "PixelShuffle": _PIXEL_SHUFFLE,
    "Upsample": _UPSAMPLE,
    "PretrainedEmbedding": _PRETRAINED_EMBEDDING,
    "unfrozen": _UNFROZEN,
    "ChannelDropout": _CHANNEL_DROPOUT,
    "torch_pad": _TORCH_PAD.split("\n\nclass Pad(")[0],
    "Pad": "\n\nclass Pad(" + _TORCH_PAD.split("\n\nclass Pad(")[1],
    "PerVector": _PER_VECTOR,
    **inits.HELPERS,  # re-initialising parameters a loop or module.apply selects (init.py)
}
#: helpers another helper uses (written before it)
DEPS = {"StackedRNN": ("ElmanRNNCell",), "Pad": ("torch_pad",), "unfrozen": ("PretrainedEmbedding",), **inits.DEPS}
#: helpers whose constructor draws initial values (the modules pass gives them ``key=``)
KEYED = frozenset({"StackedLSTM", "StackedGRU", "StackedRNN", "ElmanRNNCell", "MultiheadAttentionWithWeights"}) \
    | inits.KEYED
#: the prefixes the helpers' text uses → a name of that module (spelled once to record its import)
#: per-example ranks of what these layers return (batch.py): a sequence layer gives (outputs (L, D*H),
#: final state (layers * D, H)); attention gives (output, weights); PixelShuffle keeps (C, H, W)
OUTPUT_RANKS = {"torch.nn.LSTM": (2, (2, 2)), "torch.nn.GRU": (2, 2), "torch.nn.RNN": (2, 2),
                "torch.nn.MultiheadAttention": (2, 2)}
#: PyTorch's padding layers (the Pad helper): its mode, the axes it pads and the constant it fills with
PAD_LAYERS = {f"torch.nn.{kind}Pad{d}d": (mode, d) for kind, mode in (("Reflection", "reflect"), ("Replication", "replicate"),
                                                                    ("Zero", "constant"), ("Constant", "constant"),
                                                                    ("Circular", "circular")) for d in (1, 2, 3)}
SAME_RANK = frozenset({"torch.nn.PixelShuffle", "torch.nn.Upsample", "torch.nn.Dropout1d", "torch.nn.Dropout2d",
                       "torch.nn.Dropout3d", *PAD_LAYERS})
_IMPORTS = {"eqx.": "equinox.Module", "jax.": "jax.Array", "jnp.": "jax.numpy.zeros", "math.": "math.sqrt"}


def use(ctx, name: str) -> str:
    """Ask for helper ``name`` in this file; returns the name to call."""
    ctx.analyses.setdefault(_KEY, set()).add(name)
    return name


class _Refs(cst.CSTVisitor):
    def __init__(self, names: set[str]):
        self.names, self.called, self.defined = names, set(), set()

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.called.add(node.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.name.value in self.names:
            self.defined.add(node.name.value)

    visit_FunctionDef = visit_ClassDef


def finish(module: cst.Module, ctx) -> cst.Module:
    """Write the helpers the output still uses after the file's imports (one the file already defines
    is not written again: translating the output changes nothing)."""
    wanted = ctx.analyses.get(_KEY)
    if not wanted:
        return module
    from fwport.core.names import scan
    from fwport.core.imports import insert_after_imports

    names = set(wanted) | {d for n in wanted for d in DEPS.get(n, ())}
    refs = _Refs(names)
    scan(module, refs)
    todo = [n for n in HELPERS if n in refs.called and n not in refs.defined]
    todo = list(dict.fromkeys([*todo, *(d for n in todo for d in DEPS.get(n, ()) if d not in refs.defined)]))
    if not todo:
        return module
    todo.sort(key=lambda n: (n not in {d for v in DEPS.values() for d in v}, list(HELPERS).index(n)))
    text = "".join(HELPERS[n] for n in todo)
    for prefix, name in _IMPORTS.items():
        if prefix in text:
            ctx.spell_text(name)  # records the import
    return insert_after_imports(module, [HELPERS[n] for n in todo], ctx)


# --- call transforms -------------------------------------------------------------------------------

def _helper_call(m, ctx, name: str, positional: tuple[str, ...], order: tuple[str, ...]) -> cst.Call:
    """``name(positional..., keyword=...)`` from the mapped arguments, keywords in ``order``."""
    kw = dict(m.kwargs)
    args = []
    for p in positional:
        if p not in kw:
            break
        args.append(cst.Arg(kw.pop(p)))
    for k in (*order, *sorted(set(kw) - set(order))):
        if k in kw:
            args.append(cst.Arg(kw.pop(k), keyword=cst.Name(k), equal=_EQ))
    return cst.Call(cst.Name(use(ctx, name)), _commas(args))


def _batch_first(m, ctx, what: str) -> None:
    """``batch_first=True``: the per-example input (L, features) is PyTorch's without its first axis.
    Otherwise PyTorch feeds this layer (L, N, features), its batch axis second, while the code around it
    is translated with the batch axis first: an error saying so (the layer itself is translated)."""
    value = m.kwargs.pop("batch_first", None)
    if value is not None and literal_value(value, None) is True:
        return
    if id(m.node) in ctx.analyses.get(SEQ_PROVEN, ()):  # every call gets the batch axis second (batch.py)
        return
    written = m.written("batch_first") if value is not None else "False (the default)"
    ctx.report(Severity.ERROR, "batch-axis", f"{what} with batch_first={written} takes (L, N, features), the batch "
               "axis second; the translation takes one example (L, features) and vmaps over the first axis, so the "
               "code around this layer is translated as if the batch axis came first: make the source batch-first "
               "(batch_first=True, inputs (N, L, ...)) or check every dimension of the code that feeds it by hand",
               m.node, m.rule)


@call_transform("recurrent")
def recurrent(m, ctx):
    """nn.LSTM / nn.GRU / nn.RNN → ``StackedLSTM`` / ``StackedGRU`` / ``StackedRNN`` (written into the
    output): the eqx cells per layer and direction over jax.lax.scan, on one sequence (L, features)."""
    name = m.rule.emit["options"]["helper"]
    _batch_first(m, ctx, m.rule.names[0].rsplit(".", 1)[-1])
    nl = m.kwargs.get("nonlinearity")  # a name is checked by the helper when it is built, as PyTorch does
    if isinstance(nl, (cst.SimpleString, cst.ConcatenatedString)) and literal_value(nl, None) not in ("tanh", "relu"):
        m.fail(ctx, "unsupported-argument", f"nonlinearity={m.written('nonlinearity')}: write 'tanh' or 'relu'")
        return None
    if name == "StackedRNN":
        use(ctx, "ElmanRNNCell")
    _folded_biases(m, ctx, "bias")
    return _helper_call(m, ctx, name, ("input_size", "hidden_size", "num_layers"),
                        ("nonlinearity", "bias", "dropout", "bidirectional"))


def _folded_biases(m, ctx, arg: str) -> None:
    """PyTorch's two biases are one sum in Equinox's cells: the same outputs and gradients, another
    optimizer step (each of PyTorch's moves by one step, their sum here by one step too)."""
    value = m.kwargs.get(arg)
    if value is not None and literal_value(value, None) is False:
        return
    ctx.report(Severity.WARNING, "approximate", "PyTorch's two biases (bias_ih + bias_hh) are one sum here: outputs "
               "and gradients agree, but an optimizer step moves the sum by one step where PyTorch moves each of "
               "the two (training with a weight decay or another step size on the biases differs)", m.node, m.rule)


@call_transform("folded-cell")
def folded_cell(m, ctx):
    """nn.LSTMCell / nn.GRUCell → the Equinox cell, nn.RNNCell → ``ElmanRNNCell`` (written into the output);
    their one bias is PyTorch's two added (a warning says what that changes)."""
    _folded_biases(m, ctx, "use_bias")
    helper_name = m.rule.emit.get("options", {}).get("helper")
    if helper_name is None:
        return build_call(m, ctx, target=m.rule.emit["target"])
    return _helper_call(m, ctx, helper_name, tuple(m.rule.emit.get("positional", ())), ("use_bias", "nonlinearity"))


@call_transform("helper")
def helper(m, ctx):
    """A layer written into the output as a small eqx.Module (``emit.options.helper``), constructed with the
    mapped arguments (``emit.positional`` first, then keywords in the rule's order)."""
    positional = tuple(m.rule.emit.get("positional", ()))
    return _helper_call(m, ctx, m.rule.emit["options"]["helper"], positional, tuple(m.rule.args))


@call_transform("multihead-attention")
def multihead_attention(m, ctx):
    """nn.MultiheadAttention → ``MultiheadAttentionWithWeights`` (written into the output): PyTorch's call
    (query, key, value, key_padding_mask, need_weights, attn_mask, ...) with its mask polarity, returning
    (output, weights), on one example (L, embed_dim)."""
    _batch_first(m, ctx, "MultiheadAttention")
    return _helper_call(m, ctx, "MultiheadAttentionWithWeights", ("embed_dim", "num_heads"),
                        ("dropout", "bias", "kdim", "vdim"))


@call_transform("module-dict")
def module_dict(m, ctx):
    """nn.ModuleDict({...}) / nn.ModuleDict(dict(a=...)) → the dict (an eqx.Module field holds it as a
    pytree); reads written as attributes (``self.d.a``) become ``self.d["a"]`` (:func:`module_dict_reads`)."""
    value = m.kwargs.get("modules")
    if value is None:
        return cst.Dict([])
    return value


#: cells PyTorch calls without a state (it starts from zeros): how many arrays their state is
CELL_STATES = {"torch.nn.LSTMCell": 2, "torch.nn.GRUCell": 1, "torch.nn.RNNCell": 1}


def initial_state(source_class: str | None, call: cst.Call, ctx) -> cst.Call:
    """``self.cell(x)`` of a PyTorch cell (zeros as the state) → ``self.cell(x, (jnp.zeros(self.cell.hidden_size,
    x.dtype), ...))``: Equinox's cells take the state (batch.py calls this at each submodule call)."""
    n = CELL_STATES.get(source_class)
    if n is None or len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return call
    x = call.args[0].value
    dtype = f", {code(x)}.dtype" if isinstance(x, cst.Name) else ""
    zeros = f"{ctx.spell_text('jax.numpy.zeros')}({code(call.func)}.hidden_size{dtype})"
    state = expr(zeros if n == 1 else f"({zeros}, {zeros})")
    return call.with_changes(args=_commas([call.args[0], cst.Arg(state)]))


# --- the planner: nn.ModuleDict attributes read as a dict -------------------------------------------

#: what a ModuleDict and a dict both have: ``self.d.items()`` stays
_DICT_METHODS = frozenset({"items", "keys", "values", "get", "update", "pop", "clear", "copy", "setdefault"})


class _ModuleDicts(cst.CSTVisitor):
    """module_dict_reads: the attributes ``self.<name> = nn.ModuleDict(...)`` assigns."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.names: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        t = dotted_text(node.targets[0].target) if len(node.targets) == 1 else None
        if t and t.startswith("self.") and t.count(".") == 1 and isinstance(node.value, cst.Call) \
                and self.ctx.imports.resolve(node.value.func) == "torch.nn.ModuleDict":
            self.names.add(t[5:])


class _ModuleDictReads(cst.CSTTransformer):
    """module_dict_reads: ``self.d.name`` → ``self.d["name"]`` for the ModuleDicts ``names`` (their dict methods
    stay)."""

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        inner = original.value
        if isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Name) and inner.value.value == "self" \
                and inner.attr.value in self.names and original.attr.value not in _DICT_METHODS:
            key = cst.SimpleString(f'"{original.attr.value}"')
            return cst.Subscript(updated.value, [cst.SubscriptElement(cst.Index(key))])
        return updated


def module_dict_reads(module: cst.Module, ctx) -> cst.Module:
    """In a module class whose ``__init__`` sets ``self.d = nn.ModuleDict(...)``, every ``self.d.name`` →
    ``self.d["name"]`` (the dict it becomes has no attributes). Runs before the modules pass."""
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef):
            found = _ModuleDicts(ctx)
            scan(stmt, found)
            if found.names:
                stmt = rewrite(stmt, _ModuleDictReads(found.names))
        body.append(stmt)
    return module.with_changes(body=body)


# --- the planner: a layer class looked up by name among literal choices -----------------------------

class _LayerChoices(cst.CSTTransformer):
    """named_layers: ``getattr(nn, name)(...)`` under ``if name in [...]`` → one call per class the test allows."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.tests: list[tuple[str, list[str]]] = []

    def visit_If(self, node: cst.If) -> None:
        t = node.test
        names = None
        if isinstance(t, cst.Comparison) and len(t.comparisons) == 1 and isinstance(t.comparisons[0].operator, cst.In) \
                and isinstance(t.left, cst.Name) and isinstance(t.comparisons[0].comparator, (cst.List, cst.Tuple)):
            values = [literal_value(e.value, None) for e in t.comparisons[0].comparator.elements]
            if values and all(isinstance(v, str) and v.isidentifier() for v in values):
                names = (t.left.value, values)
        self.tests.append(names)

    def leave_If(self, original, updated):
        self.tests.pop()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        f = original.func
        if not (isinstance(f, cst.Call) and dotted_text(f.func) == "getattr" and len(f.args) == 2
                and isinstance(f.args[1].value, cst.Name) and self.ctx.imports.resolve(f.args[0].value) == "torch.nn"):
            return updated
        var = f.args[1].value.value
        test = next((t for t in reversed(self.tests) if t is not None and t[0] == var), None)
        if test is None:
            return updated
        base = code(f.args[0].value)
        calls = [updated.with_changes(func=expr(f"{base}.{c}")) for c in test[1]]
        out = calls[-1]
        for c, call in zip(reversed(test[1][:-1]), reversed(calls[:-1])):
            out = cst.IfExp(test=expr(f"{var} == {c!r}"), body=call, orelse=out)
        self.ctx.report(Severity.INFO, "idiom-replaced", f"getattr({base}, {var})(...) under `if {var} in "
                        f"{test[1]}`: one call per class the test allows, chosen by {var}", original)
        return out


def named_layers(module: cst.Module, ctx) -> cst.Module:
    """``getattr(nn, rnn_type)(ninp, nhid, ...)`` inside ``if rnn_type in ['LSTM', 'GRU']:`` (word_language_model) →
    ``nn.LSTM(ninp, nhid, ...) if rnn_type == 'LSTM' else nn.GRU(ninp, nhid, ...)``: one call per class the test
    allows, which the rules translate as any (and the modules pass gives keys). Runs before the modules pass; a
    ``getattr`` outside such a test stays PyTorch (a residue error)."""
    return rewrite(module, _LayerChoices(ctx))


_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [a.with_changes(comma=comma if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT) for i, a in enumerate(args)]


__all__ = ["HELPERS", "KEYED", "finish", "use", "code", "expr"]


@call_transform("interpolate")
def interpolate(m, ctx):
    """``F.interpolate(x, ...)`` of a whole array (N, C, *spatial) → ``jax.vmap(Upsample(...))(x)``: the helper
    takes one example; batch.py writes ``Upsample(...)(x)`` itself for a per-example tensor in a module."""
    kw = dict(m.kwargs)
    x = kw.pop("input", None)
    if x is None:
        m.fail(ctx, "unsupported-construct", "F.interpolate without its input")
        return None
    for name in ("recompute_scale_factor", "antialias"):
        kw.pop(name, None)
    args = [cst.Arg(kw.pop(k), keyword=cst.Name(k), equal=_EQ) for k in ("size", "scale_factor", "mode", "align_corners")
            if k in kw]
    helper_call = cst.Call(cst.Name(use(ctx, "Upsample")), _commas(args))
    return cst.Call(cst.Call(ctx.spell("jax.vmap"), [cst.Arg(helper_call)]), [cst.Arg(x)])


@call_transform("pad-layer")
def pad_layer(m, ctx):
    """A PyTorch padding layer → ``Pad(padding, dims, mode=..., value=...)`` (written into the output): the
    layer's mode and number of padded axes are fixed by its class (PAD_LAYERS)."""
    mode, dims = PAD_LAYERS.get(ctx.imports.resolve(m.call.func) or "", PAD_LAYERS[m.rule.names[0]])
    args = [cst.Arg(m.kwargs["padding"]), cst.Arg(cst.Integer(str(dims)))]
    if mode != "constant":
        args.append(cst.Arg(cst.SimpleString(f'"{mode}"'), keyword=cst.Name("mode"), equal=_EQ))
    if "value" in m.kwargs:
        args.append(cst.Arg(m.kwargs["value"], keyword=cst.Name("value"), equal=_EQ))
    return cst.Call(cst.Name(use(ctx, "Pad")), _commas(args))


@call_transform("torch-pad")
def torch_pad(m, ctx):
    """``F.pad(x, pad, mode, value)`` → ``torch_pad(x, pad, mode=..., value=...)`` (written into the output): it
    pads the last axes only, so one example and a whole batch are padded alike."""
    kw = dict(m.kwargs)
    args = [cst.Arg(kw.pop("input")), cst.Arg(kw.pop("pad"))]
    args += [cst.Arg(kw.pop(k), keyword=cst.Name(k), equal=_EQ) for k in ("mode", "value") if k in kw]
    return cst.Call(cst.Name(use(ctx, "torch_pad")), _commas(args))
