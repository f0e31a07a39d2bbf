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

from fwport.core import written
from fwport.core.bind import bind_call
from fwport.core.engine import build_call, code, expr, literal_value, statement
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, find_all, scan
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
    need_weights=False (a query whose every key is masked then gets zeros, as PyTorch's fused path; NaN with the
    weights, as PyTorch's). dropout applies to the weights, in training (a key is needed then: dropout_key)."""

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
        if not need_weights:  # PyTorch's fused path: a query with every key masked attends to nothing (zeros)
            empty = jnp.all(jnp.isneginf(scores), axis=-1, keepdims=True)
            scores = jnp.where(empty, 0.0, scores)
        weights = jax.nn.softmax(scores, axis=-1)
        if not need_weights:
            weights = jnp.where(empty, 0.0, weights)
        weights = self.dropout(weights, key=dropout_key)
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

_PRELU = '''

class PReLU(eqx.Module):
    """PyTorch's nn.PReLU with one slope: x where x >= 0, weight * x elsewhere, the trained weight of shape (1,) as
    PyTorch's (init 0.25)."""

    weight: jax.Array

    def __init__(self, init=0.25):
        self.weight = jnp.full((1,), init)

    def __call__(self, x, *, key=None):
        return jnp.where(x >= 0, x, self.weight[0] * x)
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

_FROZEN_LABELS = '''

def frozen_labels(frozen):
    """optax.multi_transform's labels for a model PyTorch froze parts of (requires_grad False): "frozen" for every
    array under the parts frozen(model) picks (eqx.tree_at's where), "trained" for the others. The frozen ones take
    optax.set_to_zero(): they keep their values (no step, no weight decay), as PyTorch's optimizer skips them."""
    def labels(params):
        trained = jax.tree_util.tree_map(lambda _: "trained", params)
        return eqx.tree_at(frozen, trained, replace_fn=lambda part: jax.tree_util.tree_map(lambda _: "frozen", part))
    return labels
'''

_SGD_DAMPENED = '''

def sgd_dampened(learning_rate, momentum, dampening, nesterov=False):
    """PyTorch's SGD with dampened momentum, which optax.sgd does not have: the momentum buffer starts as the first
    gradient, then b = momentum * b + (1 - dampening) * g; the update is -learning_rate * b (Nesterov: -learning_rate
    * (g + momentum * b)). learning_rate may be a schedule of the update count, as optax's."""
    def init(params):
        return jnp.zeros([], jnp.int32), jax.tree_util.tree_map(jnp.zeros_like, params)

    def update(grads, state, params=None):
        count, buf = state
        buf = jax.tree_util.tree_map(
            lambda b, g: jnp.where(count == 0, g, momentum * b + (1 - dampening) * g), buf, grads)
        step = jax.tree_util.tree_map(lambda b, g: g + momentum * b, buf, grads) if nesterov else buf
        lr = learning_rate(count) if callable(learning_rate) else learning_rate
        return jax.tree_util.tree_map(lambda u: -lr * u, step), (count + 1, buf)

    return optax.GradientTransformation(init, update)
'''

_TORCH_PAD = '''

def torch_pad(x, pad, mode="constant", value=None):
    """PyTorch's F.pad: pad holds (before, after) pairs for the last axes, the last axis first; modes constant
    (value, 0 by default), reflect, replicate and circular are jnp.pad's constant, reflect, edge and wrap.
    A negative size crops that side, as PyTorch does (reflect reflects about the uncropped edge: padded, then
    cropped; the others crop first); more pairs than the array has axes, or a crop leaving no element, raise."""
    pad = list(pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad {pad} of an array of shape {x.shape}: an even number of sizes, at most two per axis, "
                         "is translated")
    widths, cuts = [(0, 0)] * x.ndim, [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        axis, before, after = x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        if x.shape[axis] + min(before, 0) + min(after, 0) <= 0:
            raise ValueError(f"pad {pad} crops axis {axis} of an array of shape {x.shape} to nothing")
        widths[axis], cuts[axis] = (max(before, 0), max(after, 0)), (-min(before, 0), -min(after, 0))
    crop = lambda y: y[tuple(slice(b, n - a) for (b, a), n in zip(cuts, y.shape))]
    if mode == "constant":
        return jnp.pad(crop(x), widths, constant_values=0 if value is None else value)
    modes = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
    if mode not in modes:
        raise ValueError(f"padding mode {mode!r} is not translated")
    if mode == "reflect":
        return crop(jnp.pad(x, widths, mode="reflect"))
    return jnp.pad(crop(x), widths, mode=modes[mode])


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

_TRANSFORMER_LAYERS = '''

class TransformerEncoderLayer(eqx.Module):
    \"\"\"PyTorch's nn.TransformerEncoderLayer for one sequence src (L, d_model): self-attention, then the feed-forward
    block linear2(dropout(activation(linear1(x)))), each added to its input and layer-normalised after it
    (norm_first=False, PyTorch's default) or normalised before it (norm_first=True). src_mask (L, L) and
    src_key_padding_mask (L,) follow PyTorch: a boolean True is a position NOT attended, a float mask is added to the
    scores; is_causal is PyTorch's hint that src_mask is the causal mask (the mask is used; PyTorch needs it too).
    activation is "relu", "gelu" (exact, with erf) or a function. dropout applies in training (a key is needed then).\"\"\"

    self_attn: MultiheadAttentionWithWeights
    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear
    norm1: eqx.nn.LayerNorm
    norm2: eqx.nn.LayerNorm
    dropout: eqx.nn.Dropout
    dropout1: eqx.nn.Dropout
    dropout2: eqx.nn.Dropout
    activation: object = eqx.field(static=True)
    norm_first: bool = eqx.field(static=True)

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 norm_first=False, bias=True, *, key):
        akey, key1, key2 = jax.random.split(key, 3)
        self.self_attn = MultiheadAttentionWithWeights(d_model, nhead, dropout=dropout, bias=bias, key=akey)
        self.linear1 = eqx.nn.Linear(d_model, dim_feedforward, use_bias=bias, key=key1)
        self.linear2 = eqx.nn.Linear(dim_feedforward, d_model, use_bias=bias, key=key2)
        self.norm1 = eqx.nn.LayerNorm(d_model, eps=layer_norm_eps, use_bias=bias)
        self.norm2 = eqx.nn.LayerNorm(d_model, eps=layer_norm_eps, use_bias=bias)
        self.dropout, self.dropout1, self.dropout2 = (eqx.nn.Dropout(dropout) for _ in range(3))
        self.activation = activation
        self.norm_first = norm_first

    def __call__(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False, *, key=None):
        keys = [None] * 4 if key is None else list(jax.random.split(key, 4))

        def self_attention(x):
            x = self.self_attn(x, x, x, key_padding_mask=src_key_padding_mask, need_weights=False, attn_mask=src_mask,
                               dropout_key=keys[0])[0]
            return self.dropout1(x, key=keys[1])

        def feed_forward(x):
            x = self.dropout(feed_forward_activation(self.activation, jax.vmap(self.linear1)(x)), key=keys[2])
            return self.dropout2(jax.vmap(self.linear2)(x), key=keys[3])

        x = src
        if self.norm_first:
            x = x + self_attention(jax.vmap(self.norm1)(x))
            return x + feed_forward(jax.vmap(self.norm2)(x))
        x = jax.vmap(self.norm1)(x + self_attention(x))
        return jax.vmap(self.norm2)(x + feed_forward(x))


class TransformerDecoderLayer(eqx.Module):
    \"\"\"PyTorch's nn.TransformerDecoderLayer for one target sequence tgt (T, d_model) and the encoder's output memory
    (S, d_model): self-attention over tgt, attention from tgt to memory (multihead_attn), then the feed-forward block,
    each added to its input and layer-normalised after it (norm_first=False, PyTorch's default) or before it. The masks
    (tgt_mask (T, T), memory_mask (T, S), the padding masks (T,) and (S,)) follow PyTorch as TransformerEncoderLayer's
    do; tgt_is_causal / memory_is_causal are PyTorch's hints (the masks are used). dropout applies in training (a key
    is needed then).\"\"\"

    self_attn: MultiheadAttentionWithWeights
    multihead_attn: MultiheadAttentionWithWeights
    linear1: eqx.nn.Linear
    linear2: eqx.nn.Linear
    norm1: eqx.nn.LayerNorm
    norm2: eqx.nn.LayerNorm
    norm3: eqx.nn.LayerNorm
    dropout: eqx.nn.Dropout
    dropout1: eqx.nn.Dropout
    dropout2: eqx.nn.Dropout
    dropout3: eqx.nn.Dropout
    activation: object = eqx.field(static=True)
    norm_first: bool = eqx.field(static=True)

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 norm_first=False, bias=True, *, key):
        skey, mkey, key1, key2 = jax.random.split(key, 4)
        self.self_attn = MultiheadAttentionWithWeights(d_model, nhead, dropout=dropout, bias=bias, key=skey)
        self.multihead_attn = MultiheadAttentionWithWeights(d_model, nhead, dropout=dropout, bias=bias, key=mkey)
        self.linear1 = eqx.nn.Linear(d_model, dim_feedforward, use_bias=bias, key=key1)
        self.linear2 = eqx.nn.Linear(dim_feedforward, d_model, use_bias=bias, key=key2)
        self.norm1, self.norm2, self.norm3 = (eqx.nn.LayerNorm(d_model, eps=layer_norm_eps, use_bias=bias)
                                              for _ in range(3))
        self.dropout, self.dropout1, self.dropout2, self.dropout3 = (eqx.nn.Dropout(dropout) for _ in range(4))
        self.activation = activation
        self.norm_first = norm_first

    def __call__(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                 memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False, *, key=None):
        keys = [None] * 6 if key is None else list(jax.random.split(key, 6))

        def self_attention(x):
            x = self.self_attn(x, x, x, key_padding_mask=tgt_key_padding_mask, need_weights=False, attn_mask=tgt_mask,
                               dropout_key=keys[0])[0]
            return self.dropout1(x, key=keys[1])

        def memory_attention(x):
            x = self.multihead_attn(x, memory, memory, key_padding_mask=memory_key_padding_mask, need_weights=False,
                                    attn_mask=memory_mask, dropout_key=keys[2])[0]
            return self.dropout2(x, key=keys[3])

        def feed_forward(x):
            x = self.dropout(feed_forward_activation(self.activation, jax.vmap(self.linear1)(x)), key=keys[4])
            return self.dropout3(jax.vmap(self.linear2)(x), key=keys[5])

        x = tgt
        if self.norm_first:
            x = x + self_attention(jax.vmap(self.norm1)(x))
            x = x + memory_attention(jax.vmap(self.norm2)(x))
            return x + feed_forward(jax.vmap(self.norm3)(x))
        x = jax.vmap(self.norm1)(x + self_attention(x))
        x = jax.vmap(self.norm2)(x + memory_attention(x))
        return jax.vmap(self.norm3)(x + feed_forward(x))
'''

_FEED_FORWARD_ACTIVATION = '''

def feed_forward_activation(activation, x):
    \"\"\"The activation of PyTorch's transformer layers: "relu", "gelu" (PyTorch's exact GELU, with erf; jax.nn.gelu's
    default is the tanh approximation) or a function.\"\"\"
    if activation == "relu":
        return jax.nn.relu(x)
    if activation == "gelu":
        return jax.nn.gelu(x, approximate=False)
    if callable(activation):
        return activation(x)
    raise ValueError(f"activation should be relu/gelu, not {activation}")
'''

_TRANSFORMER_STACKS = '''

class TransformerEncoder(eqx.Module):
    \"\"\"PyTorch's nn.TransformerEncoder for one sequence src (L, d_model): num_layers copies of encoder_layer applied in
    turn (PyTorch deep-copies it: the copies start equal and are trained apart, as the entries of this list are), then
    norm at each position when given. mask, src_key_padding_mask and is_causal are passed to every layer.\"\"\"

    layers: list
    norm: eqx.Module | None

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        self.layers = [encoder_layer] * num_layers
        self.norm = norm

    def __call__(self, src, mask=None, src_key_padding_mask=None, is_causal=None, *, key=None):
        keys = [None] * len(self.layers) if key is None else list(jax.random.split(key, len(self.layers)))
        for layer, layer_key in zip(self.layers, keys):
            src = layer(src, mask, src_key_padding_mask, bool(is_causal), key=layer_key)
        return src if self.norm is None else jax.vmap(self.norm)(src)


class TransformerDecoder(eqx.Module):
    \"\"\"PyTorch's nn.TransformerDecoder for one target sequence tgt (T, d_model) and memory (S, d_model): num_layers
    copies of decoder_layer (equal at first, trained apart, as PyTorch's deep copies) applied in turn, then norm at
    each position when given; the masks are passed to every layer.\"\"\"

    layers: list
    norm: eqx.Module | None

    def __init__(self, decoder_layer, num_layers, norm=None):
        self.layers = [decoder_layer] * num_layers
        self.norm = norm

    def __call__(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                 memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False, *, key=None):
        keys = [None] * len(self.layers) if key is None else list(jax.random.split(key, len(self.layers)))
        for layer, layer_key in zip(self.layers, keys):
            tgt = layer(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                        bool(tgt_is_causal), memory_is_causal, key=layer_key)
        return tgt if self.norm is None else jax.vmap(self.norm)(tgt)
'''

_TRANSFORMER = '''

class Transformer(eqx.Module):
    \"\"\"PyTorch's nn.Transformer for one example: src (S, d_model) through the encoder (num_encoder_layers
    TransformerEncoderLayers and a LayerNorm), then tgt (T, d_model) through the decoder (num_decoder_layers
    TransformerDecoderLayers and a LayerNorm) attending to the encoder's output; returns (T, d_model). The masks follow
    PyTorch (TransformerEncoderLayer says how). custom_encoder / custom_decoder replace the stacks.\"\"\"

    encoder: eqx.Module
    decoder: eqx.Module
    d_model: int = eqx.field(static=True)
    nhead: int = eqx.field(static=True)

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 norm_first=False, bias=True, *, key):
        ekey, dkey = jax.random.split(key)
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, norm_first, bias)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*layer_args, key=ekey), num_encoder_layers,
            eqx.nn.LayerNorm(d_model, eps=layer_norm_eps, use_bias=bias))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*layer_args, key=dkey), num_decoder_layers,
            eqx.nn.LayerNorm(d_model, eps=layer_norm_eps, use_bias=bias))
        self.d_model = d_model
        self.nhead = nhead

    def __call__(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                 tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                 memory_is_causal=False, *, key=None):
        ekey, dkey = (None, None) if key is None else jax.random.split(key)
        memory = self.encoder(src, src_mask, src_key_padding_mask, src_is_causal, key=ekey)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                            tgt_is_causal, memory_is_causal, key=dkey)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        \"\"\"PyTorch's causal float mask (sz, sz): 0 on and below the diagonal, -inf above (device: unused).\"\"\"
        return jnp.triu(jnp.full((sz, sz), -jnp.inf, dtype=dtype), k=1)
'''

_BATCH_MERGED = '''

def batch_merged(out, axes):
    """PyTorch's layout of a model's vmapped output where its forward's view merged the batch axis into axis a
    ((L, N, V).view(-1, V) is (L * N, V)): jax.vmap put the examples next to axis a, and axes a and a + 1 are
    reshaped into one here. axes: one per output (a tuple for a tuple), None where an output is kept as it is."""
    if isinstance(axes, tuple):
        return tuple(batch_merged(o, a) for o, a in zip(out, axes))
    if axes is None:
        return out
    return out.reshape(*out.shape[:axes], out.shape[axes] * out.shape[axes + 1], *out.shape[axes + 2:])
'''

HELPERS: dict[str, str] = {
    "batch_merged": _BATCH_MERGED,
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
    "PReLU": _PRELU,
    "unfrozen": _UNFROZEN,
    "frozen_labels": _FROZEN_LABELS,
    "sgd_dampened": _SGD_DAMPENED,
    "ChannelDropout": _CHANNEL_DROPOUT,
    "torch_pad": _TORCH_PAD.split("\n\nclass Pad(")[0],
    "Pad": "\n\nclass Pad(" + _TORCH_PAD.split("\n\nclass Pad(")[1],
    "PerVector": _PER_VECTOR,
    "feed_forward_activation": _FEED_FORWARD_ACTIVATION,
    "TransformerEncoderLayer": _TRANSFORMER_LAYERS.split("\n\nclass TransformerDecoderLayer(")[0],
    "TransformerDecoderLayer": "\n\nclass TransformerDecoderLayer(" + _TRANSFORMER_LAYERS.split("\n\nclass TransformerDecoderLayer(")[1],
    "TransformerEncoder": _TRANSFORMER_STACKS.split("\n\nclass TransformerDecoder(")[0],
    "TransformerDecoder": "\n\nclass TransformerDecoder(" + _TRANSFORMER_STACKS.split("\n\nclass TransformerDecoder(")[1],
    "Transformer": _TRANSFORMER,
    **inits.HELPERS,  # re-initialising parameters a loop or module.apply selects (init.py)
}
#: helpers another helper uses (written before it)
DEPS = {"StackedRNN": ("ElmanRNNCell",), "Pad": ("torch_pad",), "unfrozen": ("PretrainedEmbedding",),
        "TransformerEncoderLayer": ("MultiheadAttentionWithWeights", "feed_forward_activation"),
        "TransformerDecoderLayer": ("MultiheadAttentionWithWeights", "feed_forward_activation"),
        "Transformer": ("TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer",
                        "MultiheadAttentionWithWeights", "feed_forward_activation"), **inits.DEPS}
#: helpers whose constructor draws initial values (the modules pass gives them ``key=``)
KEYED = frozenset({"StackedLSTM", "StackedGRU", "StackedRNN", "ElmanRNNCell", "MultiheadAttentionWithWeights",
                   "TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer"}) \
    | inits.KEYED
#: the prefixes the helpers' text uses → a name of that module (spelled once to record its import)
#: per-example ranks of what these layers return (batch.py): a sequence layer gives (outputs (L, D*H),
#: final state (layers * D, H)); attention gives (output, weights); PixelShuffle keeps (C, H, W)
OUTPUT_RANKS = {"torch.nn.LSTM": (2, (2, 2)), "torch.nn.GRU": (2, 2), "torch.nn.RNN": (2, 2),
                "torch.nn.MultiheadAttention": (2, 2)}
#: PyTorch's transformer layers as sequence layers (batch.py): their call's parameters in order, those taking a sequence
#: (the batch axis where batch_first puts it) and the padding masks (N, L) (the batch axis first); the other masks have
#: none. Each returns one sequence.
_ENCODER_CALL = ("src", "mask", "src_key_padding_mask", "is_causal")
_DECODER_CALL = ("tgt", "memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
                 "tgt_is_causal", "memory_is_causal")
TRANSFORMER_CALLS = {
    "torch.nn.TransformerEncoderLayer": (("src", "src_mask", *_ENCODER_CALL[2:]), ("src",), ("src_key_padding_mask",)),
    "torch.nn.TransformerEncoder": (_ENCODER_CALL, ("src",), ("src_key_padding_mask",)),
    "torch.nn.TransformerDecoderLayer": (_DECODER_CALL, ("tgt", "memory"), _DECODER_CALL[4:6]),
    "torch.nn.TransformerDecoder": (_DECODER_CALL, ("tgt", "memory"), _DECODER_CALL[4:6]),
    "torch.nn.Transformer": (("src", "tgt", "src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask",
                              "tgt_key_padding_mask", "memory_key_padding_mask", "src_is_causal", "tgt_is_causal",
                              "memory_is_causal"), ("src", "tgt"),
                             ("src_key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask")),
}
#: a stack's batch_first is its layer's (its first argument)
STACKS = frozenset({"torch.nn.TransformerEncoder", "torch.nn.TransformerDecoder"})
#: PyTorch's padding layers (the Pad helper): its mode, the axes it pads and the constant it fills with
PAD_LAYERS = {f"torch.nn.{kind}Pad{d}d": (mode, d) for kind, mode in (("Reflection", "reflect"), ("Replication", "replicate"),
                                                                    ("Zero", "constant"), ("Constant", "constant"),
                                                                    ("Circular", "circular")) for d in (1, 2, 3)}
SAME_RANK = frozenset({"torch.nn.PixelShuffle", "torch.nn.Upsample", "torch.nn.Dropout1d", "torch.nn.Dropout2d",
                       "torch.nn.Dropout3d", *PAD_LAYERS, *TRANSFORMER_CALLS})
_IMPORTS = {"eqx.": "equinox.Module", "jax.": "jax.Array", "jnp.": "jax.numpy.zeros", "math.": "math.sqrt",
            "optax.": "optax.GradientTransformation"}


def use(ctx, name: str) -> str:
    """Ask for helper ``name`` in this file; returns the name to call (its own, or another where the file binds
    that name: fwport/core/written.py)."""
    ctx.analyses.setdefault(_KEY, set()).add(name)
    return written.name(ctx, name)


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
    as_written = {n: written.name(ctx, n) for n in names}  # (a helper the file's names leave free: its own)
    refs = _Refs(set(as_written.values()))
    scan(module, refs)
    called = {n for n, w in as_written.items() if w in refs.called}
    defined = {n for n, w in as_written.items() if w in refs.defined}
    todo = [n for n in HELPERS if n in called and n not in defined]
    todo = list(dict.fromkeys([*todo, *(d for n in todo for d in DEPS.get(n, ()) if d not in defined)]))
    if not todo:
        return module
    needed = {d for n in todo for d in DEPS.get(n, ())}  # written before the helpers using them
    todo.sort(key=lambda n: (n not in needed, list(HELPERS).index(n)))
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


#: PyTorch's transformer layers: their helper's positional parameters, then its keywords in order
_TRANSFORMER_ARGS = {
    "TransformerEncoderLayer": (("d_model", "nhead"), ("dim_feedforward", "dropout", "activation", "layer_norm_eps",
                                                        "norm_first", "bias")),
    "TransformerEncoder": (("encoder_layer", "num_layers", "norm"), ()),
    "TransformerDecoder": (("decoder_layer", "num_layers", "norm"), ()),
    "Transformer": ((), ("d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout",
                         "activation", "custom_encoder", "custom_decoder", "layer_norm_eps", "norm_first", "bias")),
}
_TRANSFORMER_ARGS["TransformerDecoderLayer"] = _TRANSFORMER_ARGS["TransformerEncoderLayer"]
#: the activations PyTorch's transformer layers take by name, and the functions that are the same
_ACTIVATIONS = {"torch.nn.functional.relu": "relu", "torch.relu": "relu", "torch.nn.functional.gelu": "gelu"}


@call_transform("transformer")
def transformer(m, ctx):
    """nn.TransformerEncoderLayer / TransformerDecoderLayer / TransformerEncoder / TransformerDecoder / Transformer →
    the helper of that name (written into the output), on one example (L, d_model). batch_first=False is checked as
    nn.MultiheadAttention's (batch.py proves every call gets the batch axis second); activation=F.relu / F.gelu (a
    function PyTorch takes by name too) is written as the name, which the helper reads as PyTorch does."""
    name = m.rule.emit["options"]["helper"]
    if "batch_first" in m.rule.args:
        _batch_first(m, ctx, name)
    act = m.kwargs.get("activation")
    if act is not None:
        original = (bind_call(m.node, m.rule) if isinstance(m.node, cst.Call) else m.bound).values.get("activation")
        q = ctx.imports.resolve(original) if original is not None else None
        if q in _ACTIVATIONS:
            m.kwargs["activation"] = cst.SimpleString(f'"{_ACTIVATIONS[q]}"')
        elif isinstance(act, (cst.SimpleString, cst.ConcatenatedString)) and literal_value(act, None) not in ("relu", "gelu"):
            m.fail(ctx, "unsupported-argument", f"activation={m.written('activation')}: PyTorch takes 'relu' or 'gelu' by name")
            return None
    positional, order = _TRANSFORMER_ARGS[name]
    return _helper_call(m, ctx, name, positional, order)


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


# --- the planner: a subclass of nn.Transformer that replaces its forward -----------------------------

#: nn.Transformer's constructor: its parameters in order, and its defaults where the rewrite needs them
_TRANSFORMER_PARAMS = ("d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout",
                       "activation", "custom_encoder", "custom_decoder", "layer_norm_eps", "batch_first", "norm_first",
                       "bias", "device", "dtype")
_TRANSFORMER_DEFAULTS = {"d_model": "512", "nhead": "8", "num_encoder_layers": "6", "num_decoder_layers": "6"}
#: the arguments nn.Transformer hands its layers (by keyword, after d_model and nhead)
_LAYER_KEYWORDS = ("dim_feedforward", "dropout", "activation", "layer_norm_eps", "batch_first", "norm_first", "bias")


def _super_init(init: cst.FunctionDef) -> tuple[int, cst.Call] | None:
    """The statement ``super().__init__(...)`` / ``super(C, self).__init__(...)`` of ``__init__``: (index, call)."""
    for i, st in enumerate(init.body.body):
        if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr):
            call = st.body[0].value
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__" \
                    and isinstance(call.func.value, cst.Call) and dotted_text(call.func.value.func) == "super":
                return i, call
    return None


def _assigned_in(init: cst.FunctionDef) -> set[str]:
    """The attributes ``self.NAME = ...`` statements of ``__init__``'s body set (at its top level)."""
    out = set()
    for st in init.body.body:
        if isinstance(st, cst.SimpleStatementLine):
            for s in st.body:
                if isinstance(s, cst.Assign):
                    for t in s.targets:
                        text = dotted_text(t.target) or ""
                        if text.startswith("self.") and text.count(".") == 1:
                            out.add(text[5:])
    return out


def _transformer_subclass(cls: cst.ClassDef, base: cst.Arg, ctx) -> cst.ClassDef | None:
    """``class M(nn.Transformer)`` whose ``__init__`` calls ``super().__init__(d_model=..., ...)`` and which defines its own
    forward → ``class M(nn.Module)`` whose ``__init__`` builds what nn.Transformer's does (self.encoder: a
    TransformerEncoder of TransformerEncoderLayers and a LayerNorm; self.decoder likewise, unless __init__ sets
    self.decoder itself; self.d_model / self.nhead / self.batch_first where the class reads them), PyTorch code of the
    same parameters (the same state_dict names) that the modules pass translates. None where that does not hold."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    init = methods.get("__init__")
    found = _super_init(init) if init is not None and isinstance(init.body, cst.IndentedBlock) else None
    if "forward" not in methods or found is None:
        return None
    index, call = found
    args: dict[str, cst.BaseExpression] = {}
    for i, a in enumerate(call.args):
        if a.star or (a.keyword is None and i >= len(_TRANSFORMER_PARAMS)):
            return None
        name = a.keyword.value if a.keyword is not None else _TRANSFORMER_PARAMS[i]
        if name not in _TRANSFORMER_PARAMS or not isinstance(a.value, (cst.Name, cst.Attribute, cst.Integer, cst.Float,
                                                                       cst.SimpleString)):
            return None  # an expression evaluated once by PyTorch: not written twice
        args[name] = a.value
    args.pop("device", None)
    nn = code(base.value).rsplit(".", 1)[0]  # `nn` of `nn.Transformer`
    text = {k: code(v) for k, v in args.items()}
    d_model, nhead = (text.get(k, _TRANSFORMER_DEFAULTS[k]) for k in ("d_model", "nhead"))
    layer_kw = "".join(f", {k}={text[k]}" for k in (*_LAYER_KEYWORDS, "dtype") if k in text)
    norm_kw = "".join(f", {k}={text[p]}" for k, p in (("eps", "layer_norm_eps"), ("bias", "bias"), ("dtype", "dtype"))
                      if p in text)
    assigned = _assigned_in(init)
    lines = []
    for part, kind in (("encoder", "Encoder"), ("decoder", "Decoder")):
        if part in assigned:
            continue  # set again by __init__ (word_language_model's self.decoder = nn.Linear(...)): PyTorch's is replaced
        if f"custom_{part}" in text:
            lines.append(f"self.{part} = {text[f'custom_{part}']}")
            continue
        n = text.get(f"num_{part}_layers", _TRANSFORMER_DEFAULTS[f"num_{part}_layers"])
        lines.append(f"self.{part} = {nn}.Transformer{kind}({nn}.Transformer{kind}Layer({d_model}, {nhead}{layer_kw}), "
                     f"{n}, {nn}.LayerNorm({d_model}{norm_kw}))")
    read = {n.attr.value for n in find_all(cls, cst.Attribute) if dotted_text(n.value) == "self"}
    for attr, value in (("d_model", d_model), ("nhead", nhead), ("batch_first", text.get("batch_first", "False"))):
        if attr in read and attr not in assigned:
            lines.append(f"self.{attr} = {value}")
    stmt = init.body.body[index]
    new_init = [*init.body.body[:index], stmt.with_changes(body=[cst.Expr(call.with_changes(args=[]))]),
                *(statement(t) for t in lines), *init.body.body[index + 1:]]
    init2 = init.with_changes(body=init.body.with_changes(body=new_init))
    body = [init2 if s is init else s for s in cls.body.body]
    module_base = base.with_changes(value=expr(f"{nn}.Module"))
    ctx.report(Severity.INFO, "idiom-replaced", f"class {cls.name.value}({code(base.value)}): written as an nn.Module "
               f"that builds what nn.Transformer's __init__ builds ({', '.join(t.split(' = ')[0] for t in lines)}) "
               f"and keeps its own forward: the same parameters under the same names", cls)
    ctx.report(Severity.WARNING, "approximate", f"class {cls.name.value}({code(base.value)}): nn.Transformer's __init__ "
               "re-initialises every matrix of its layers with xavier_uniform_, which is not written: the layers start "
               "from their own initialisation (load the weights, or re-initialise them as PyTorch does)", cls)
    return cls.with_changes(bases=[module_base if b is base else b for b in cls.bases],
                            body=cls.body.with_changes(body=body))


def transformer_subclasses(module: cst.Module, ctx) -> cst.Module:
    """``class TransformerModel(nn.Transformer)`` (word_language_model) → an nn.Module building nn.Transformer's
    encoder (and decoder) in ``__init__`` (:func:`_transformer_subclass`). Runs before the modules pass, which leaves
    any other subclass of a PyTorch layer as PyTorch with an error."""
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef):
            base = next((b for b in stmt.bases if ctx.imports.resolve(b.value) == "torch.nn.Transformer"), None)
            new = _transformer_subclass(stmt, base, ctx) if base is not None else None
            stmt = _cached_attributes(new, ctx) if new is not None else stmt
        body.append(stmt)
    return module.with_changes(body=body)


class _CacheReads(cst.CSTVisitor):
    """_cached_attributes: where forward reads and writes ``self.NAME``, and the ``if`` tests that check it."""

    def __init__(self) -> None:
        self.written: set[str] = set()
        self.read: list[tuple[str, cst.CSTNode]] = []
        self.checks: set[int] = set()  # ids of the `self.NAME` nodes in `if self.NAME is None or ...: self.NAME = ...`
        self.targets: set[int] = set()
        self.ifs: dict[int, str] = {}  # the checks' `if` statements (no else) → the attribute
        self.mentioned: set[str] = set()  # attributes read or written so far, in the order of the source
        self.loops = 0

    def visit_For(self, node) -> None:
        self.loops += 1

    def leave_For(self, node) -> None:
        self.loops -= 1

    visit_While, leave_While = visit_For, leave_For

    def visit_If(self, node: cst.If) -> None:
        test = node.test
        first = test.left if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or) else test
        if isinstance(first, cst.Comparison) and len(first.comparisons) == 1 \
                and isinstance(first.comparisons[0].operator, cst.Is) and code(first.comparisons[0].comparator) == "None":
            name = dotted_text(first.left) or ""
            body = _CacheReads()
            scan(node.body, body)
            if name.startswith("self.") and name[5:] in body.written:
                if node.orelse is None and not self.loops and name[5:] not in self.mentioned:
                    self.ifs[id(node)] = name[5:]  # the first mention, outside a loop: the local is None there
                self.checks.add(id(first.left))
                self.checks.update(id(a) for a in find_all(test, cst.Attribute) if dotted_text(a) == name)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        t = dotted_text(node.target) or ""
        if t.startswith("self.") and t.count(".") == 1:
            self.written.add(t[5:])
            self.mentioned.add(t[5:])
            self.targets.add(id(node.target))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        t = dotted_text(node) or ""
        if t.startswith("self.") and t.count(".") == 1 and id(node) not in self.targets:
            self.read.append((t[5:], node))
            self.mentioned.add(t[5:])


class _Localise(cst.CSTTransformer):
    """``self.NAME`` → ``NAME``; a check ``if self.NAME is None or ...:`` (no else) → its body, as the local is None
    there (nothing before it in forward writes it)."""

    def __init__(self, names: set[str], ifs: dict[int, str]) -> None:
        super().__init__()
        self.names, self.ifs = names, ifs

    def leave_If(self, original: cst.If, updated: cst.If):
        if self.ifs.get(id(original)) in self.names and isinstance(updated.body, cst.IndentedBlock):
            return cst.FlattenSentinel(updated.body.body)
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        t = dotted_text(original) or ""
        if t.startswith("self.") and t[5:] in self.names:
            return cst.Name(t[5:])
        return updated


def _cached_attributes(cls: cst.ClassDef, ctx) -> cst.ClassDef:
    """``self.src_mask = None`` in ``__init__`` and, in forward, ``if self.src_mask is None or <stale>: self.src_mask =
    <value>`` (word_language_model's causal mask, kept between calls): an Equinox module cannot change its fields, so
    forward computes the value in a local ``src_mask`` (None at its start) on every call; PyTorch's cached value is the
    one computed again whenever what the test checks is unchanged (an info finding says so). Only an attribute forward
    reads nowhere else before writing it is taken."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    init, forward = methods.get("__init__"), methods.get("forward")
    if init is None or forward is None or not isinstance(forward.body, cst.IndentedBlock):
        return cls
    none_in_init = {t for st in init.body.body if isinstance(st, cst.SimpleStatementLine) for s in st.body
                    if isinstance(s, cst.Assign) and code(s.value) == "None" for t in
                    [(dotted_text(s.targets[0].target) or "")[5:]] if len(s.targets) == 1}
    seen = _CacheReads()
    scan(forward, seen)
    others = {n for m, f in methods.items() if m not in ("__init__", "forward") for n, _ in _reads(f)}
    names = set()
    for name in seen.written & none_in_init - others:
        reads = [node for n, node in seen.read if n == name]
        checked = [node for node in reads if id(node) in seen.checks]
        if checked:  # a cache check first; any later read follows a write of this call or of the check's branch
            names.add(name)
    if not names:
        return cls
    fwd = rewrite(forward, _Localise(names, seen.ifs))
    start = [statement(f"{n} = None") for n in sorted(names)]
    doc = fwd.body.body[:1] if fwd.body.body and isinstance(fwd.body.body[0], cst.SimpleStatementLine) and isinstance(
        fwd.body.body[0].body[0], cst.Expr) and isinstance(fwd.body.body[0].body[0].value, cst.SimpleString) else []
    fwd = fwd.with_changes(body=fwd.body.with_changes(body=[*doc, *start, *fwd.body.body[len(doc):]]))
    for n in sorted(names):
        ctx.report(Severity.INFO, "idiom-replaced", f"self.{n}, which forward keeps between calls (`if self.{n} is None "
                   f"or ...:` computes it again): an Equinox module cannot change its fields, so forward computes it on "
                   f"every call in a local {n}; PyTorch's kept value is the one computed again when what the test checks "
                   "is unchanged, so the result is the same where the value depends only on that", forward)
    return cls.with_changes(body=cls.body.with_changes(body=[fwd if s is forward else s for s in cls.body.body]))


def _reads(fn: cst.FunctionDef):
    seen = _CacheReads()
    scan(fn, seen)
    return seen.read + [(n, None) for n in seen.written]
