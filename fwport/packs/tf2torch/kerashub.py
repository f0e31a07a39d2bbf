"""KerasHub / KerasNLP layers (``keras_hub.layers.*``, ``keras_nlp.layers.*``) → torch modules written out in the
file: TokenAndPositionEmbedding, PositionEmbedding, SinePositionEncoding, TransformerEncoder, TransformerDecoder
and FNetEncoder, each computed as keras_hub 0.32 computes it (read from keras-team/keras-hub,
keras_hub/src/layers/modeling/), with Keras's sublayer names (the weight maps of their rules copy Keras's
variables by those names).

Keras's mask: TokenAndPositionEmbedding(mask_zero=True) attaches ``ids != 0`` to its output; the transformer layers
read the mask of their sequence as their padding mask (keras_hub's merge_padding_and_attention_mask) and pass it on.
In a functional model the pass (passes/functional.py) writes that mask as the ``padding_mask=`` (encoder) or
``decoder_padding_mask=`` / ``encoder_padding_mask=`` (decoder) of the call, through masks.flow.
"""
from __future__ import annotations

from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.datahelpers import DATA_DEPS

#: Keras activation names → the torch function the written modules call (Keras 3's gelu is the exact one)
ACTIVATIONS = {"relu": "{F}relu", "gelu": "{F}gelu", "tanh": "{torch}tanh", "sigmoid": "{torch}sigmoid",
               "silu": "{F}silu", "swish": "{F}silu", "elu": "{F}elu", "selu": "{F}selu",
               "softplus": "{F}softplus", "linear": "{nn}Identity()"}

_POSITION_EMBEDDING = '''

class KerasPositionEmbedding({nn}Module):
    """keras_hub.layers.PositionEmbedding: a learned (sequence_length, features) table whose first rows
    (from start_index) are broadcast to the input's shape (batch, steps, features)."""

    def __init__(self, sequence_length, features):
        super().__init__()
        self.position_embeddings = {nn}Parameter({torch}empty(sequence_length, features))
        {nn}init.xavier_uniform_(self.position_embeddings)  # Keras's glorot_uniform

    def forward(self, inputs, start_index=0):
        steps = inputs.shape[-2]
        if start_index + steps > self.position_embeddings.shape[0]:
            raise ValueError("KerasPositionEmbedding: more steps than its sequence_length")
        return self.position_embeddings[start_index:start_index + steps].expand(inputs.shape)
'''

_TOKEN_AND_POSITION_EMBEDDING = '''

class KerasTokenAndPositionEmbedding({nn}Module):
    """keras_hub.layers.TokenAndPositionEmbedding: token embedding (an nn.Embedding) + a learned
    position embedding of the steps (KerasPositionEmbedding). Keras's mask (mask_zero=True: ids != 0)
    is written by the translation where the layers after it read it."""

    def __init__(self, vocabulary_size, sequence_length, embedding_dim):
        super().__init__()
        self.token_embedding = {nn}Embedding(vocabulary_size, embedding_dim)
        {nn}init.uniform_(self.token_embedding.weight, -0.05, 0.05)  # Keras's "uniform"
        self.position_embedding = KerasPositionEmbedding(sequence_length, embedding_dim)
        {nn}init.uniform_(self.position_embedding.position_embeddings, -0.05, 0.05)

    def forward(self, inputs, start_index=0):
        tokens = self.token_embedding(inputs)
        return tokens + self.position_embedding(tokens, start_index)
'''

_SINE_POSITION_ENCODING = '''

class KerasSinePositionEncoding({nn}Module):
    """keras_hub.layers.SinePositionEncoding: the fixed encoding sin(p * w_j) at even features j and
    cos(p * w_j) at odd ones, w_j = max_wavelength ** -(2 * (j // 2) / features), p the step (+ start_index),
    broadcast to the input's shape (batch, steps, features)."""

    def __init__(self, max_wavelength=10000):
        super().__init__()
        self.max_wavelength = max_wavelength

    def forward(self, inputs, start_index=0):
        steps, features = inputs.shape[-2], inputs.shape[-1]
        positions = {torch}arange(steps, device=inputs.device).to(inputs.dtype) + start_index
        j = {torch}arange(features, device=inputs.device)
        min_freq = {torch}tensor(1 / self.max_wavelength, dtype=inputs.dtype, device=inputs.device)
        timescales = min_freq ** ((2 * (j // 2)).to(inputs.dtype) / features)
        angles = positions[:, None] * timescales[None, :]
        odd = (j % 2).to(inputs.dtype)
        encoding = {torch}sin(angles) * (1 - odd) + {torch}cos(angles) * odd
        return encoding.expand(inputs.shape)
'''

_DENSE_INIT = '''

def _keras_dense(n_in, n_out):
    """nn.Linear with Keras's Dense initial values (glorot_uniform kernel, zero bias)."""
    layer = {nn}Linear(n_in, n_out)
    {nn}init.xavier_uniform_(layer.weight)
    {nn}init.zeros_(layer.bias)
    return layer
'''

_ATTENTION = '''

def _keras_padding_and_attention_mask(padding_mask, attention_mask):
    """keras_hub's merge_padding_and_attention_mask: padding_mask (batch, keys) as (batch, 1, keys), combined
    with attention_mask (batch, queries, keys) by minimum; True/1 attends."""
    mask = None if padding_mask is None else padding_mask.bool()[:, None, :]
    if attention_mask is not None:
        mask = attention_mask.bool() if mask is None else mask & attention_mask.bool()
    return mask


def _keras_attention(num_heads, hidden_dim, dropout):
    """Keras's MultiHeadAttention as keras_hub builds it: key_dim = hidden_dim // num_heads, its variables made."""
    layer = KerasMultiHeadAttention(num_heads, hidden_dim // num_heads, dropout=dropout)
    example = {torch}zeros(1, 1, hidden_dim)
    layer.initialize_parameters(example, example)
    return layer
'''

_TRANSFORMER_ENCODER = '''

class KerasTransformerEncoder({nn}Module):
    """keras_hub.layers.TransformerEncoder: self-attention (Keras's MultiHeadAttention, key_dim =
    hidden_dim // num_heads) + dropout + residual, then Dense(intermediate_dim, activation) → Dense(hidden_dim)
    + dropout + residual, each block followed by a LayerNorm (before it with normalize_first=True). Called as
    keras_hub calls it: padding_mask (batch, steps) and attention_mask (batch, steps, steps), True attends;
    mask: the Keras mask its input carries in a functional model (from TokenAndPositionEmbedding(mask_zero=True)),
    which keras_hub takes as the padding mask where none is given and Keras's MultiHeadAttention also applies to
    the queries. Sublayers bear Keras's names."""

    def __init__(self, hidden_dim, intermediate_dim, num_heads, dropout=0.0, activation={F}relu,
                 layer_norm_epsilon=1e-05, normalize_first=False):
        super().__init__()
        self.activation, self.normalize_first = activation, normalize_first
        self._self_attention_layer = _keras_attention(num_heads, hidden_dim, dropout)
        self._self_attention_layer_norm = {nn}LayerNorm(hidden_dim, eps=layer_norm_epsilon)
        self._self_attention_dropout = {nn}Dropout(dropout)
        self._feedforward_layer_norm = {nn}LayerNorm(hidden_dim, eps=layer_norm_epsilon)
        self._feedforward_intermediate_dense = _keras_dense(hidden_dim, intermediate_dim)
        self._feedforward_output_dense = _keras_dense(intermediate_dim, hidden_dim)
        self._feedforward_dropout = {nn}Dropout(dropout)

    def forward(self, inputs, padding_mask=None, attention_mask=None, return_attention_scores=False, mask=None):
        if return_attention_scores:
            raise NotImplementedError("KerasTransformerEncoder returns its output only")
        merged = _keras_padding_and_attention_mask(mask if padding_mask is None else padding_mask, attention_mask)
        if mask is not None:
            steps = mask.bool()[:, :, None] & mask.bool()[:, None, :]
            merged = steps if merged is None else merged & steps
        x = self._self_attention_layer_norm(inputs) if self.normalize_first else inputs
        x = self._self_attention_dropout(self._self_attention_layer(x, x, attention_mask=merged)) + inputs
        if not self.normalize_first:
            x = self._self_attention_layer_norm(x)
        residual = x
        if self.normalize_first:
            x = self._feedforward_layer_norm(x)
        x = self._feedforward_output_dense(self.activation(self._feedforward_intermediate_dense(x)))
        x = self._feedforward_dropout(x) + residual
        return x if self.normalize_first else self._feedforward_layer_norm(x)
'''

_TRANSFORMER_DECODER = '''

class KerasTransformerDecoder({nn}Module):
    """keras_hub.layers.TransformerDecoder: causal self-attention (use_causal_mask=True, the default), then
    cross-attention over the encoder's sequence where the layer is built with one (with_cross_attention; None: both
    are built and the first call without an encoder_sequence drops the cross-attention block), then
    the feedforward block of KerasTransformerEncoder; each block with dropout + residual and a LayerNorm after it
    (before it with normalize_first=True). Masks as keras_hub takes them (True attends). Sublayers bear Keras's
    names."""

    def __init__(self, hidden_dim, intermediate_dim, num_heads, dropout=0.0, activation={F}relu,
                 layer_norm_epsilon=1e-05, normalize_first=False, with_cross_attention=None):
        super().__init__()
        self.activation, self.normalize_first = activation, normalize_first
        self._self_attention_layer = _keras_attention(num_heads, hidden_dim, dropout)
        self._self_attention_layer_norm = {nn}LayerNorm(hidden_dim, eps=layer_norm_epsilon)
        self._self_attention_dropout = {nn}Dropout(dropout)
        self._cross_attention_layer, self.with_cross_attention = None, with_cross_attention
        if with_cross_attention is not False:  # None: decided by the first call, as Keras builds the layer
            self._cross_attention_layer = _keras_attention(num_heads, hidden_dim, dropout)
            self._cross_attention_layer_norm = {nn}LayerNorm(hidden_dim, eps=layer_norm_epsilon)
            self._cross_attention_dropout = {nn}Dropout(dropout)
        self._feedforward_intermediate_dense = _keras_dense(hidden_dim, intermediate_dim)
        self._feedforward_output_dense = _keras_dense(intermediate_dim, hidden_dim)
        self._feedforward_layer_norm = {nn}LayerNorm(hidden_dim, eps=layer_norm_epsilon)
        self._feedforward_dropout = {nn}Dropout(dropout)

    def _block(self, x, norm, dropout, step):
        y = dropout(step(norm(x) if self.normalize_first else x)) + x
        return y if self.normalize_first else norm(y)

    def forward(self, decoder_sequence, encoder_sequence=None, decoder_padding_mask=None,
                decoder_attention_mask=None, encoder_padding_mask=None, encoder_attention_mask=None,
                use_causal_mask=True):
        if self.with_cross_attention is None:
            self.with_cross_attention = encoder_sequence is not None
            if not self.with_cross_attention:
                del self._cross_attention_layer_norm, self._cross_attention_dropout
                self._cross_attention_layer = None
        if (encoder_sequence is None) != (self._cross_attention_layer is None):
            raise ValueError("KerasTransformerDecoder: call it with an encoder_sequence exactly when it was built "
                             "with_cross_attention, as Keras requires")
        mask = _keras_padding_and_attention_mask(decoder_padding_mask, decoder_attention_mask)
        if use_causal_mask:
            steps = decoder_sequence.shape[1]
            causal = {torch}ones(steps, steps, dtype={torch}bool, device=decoder_sequence.device).tril()[None]
            mask = causal if mask is None else mask & causal
        x = self._block(decoder_sequence, self._self_attention_layer_norm, self._self_attention_dropout,
                        lambda h: self._self_attention_layer(h, h, attention_mask=mask))
        if self._cross_attention_layer is not None:
            cross = _keras_padding_and_attention_mask(encoder_padding_mask, encoder_attention_mask)
            x = self._block(x, self._cross_attention_layer_norm, self._cross_attention_dropout,
                            lambda h: self._cross_attention_layer(h, encoder_sequence, attention_mask=cross))
        return self._block(x, self._feedforward_layer_norm, self._feedforward_dropout,
                           lambda h: self._feedforward_output_dense(self.activation(
                               self._feedforward_intermediate_dense(h))))
'''

_FNET_ENCODER = '''

class KerasFNetEncoder({nn}Module):
    """keras_hub.layers.FNetEncoder: mixing = LayerNorm(x + Re(FFT2(x))) over (steps, features), then
    LayerNorm(mixing + dropout(Dense(hidden)(Dense(intermediate_dim, activation)(mixing)))). Sublayers bear
    Keras's names."""

    def __init__(self, hidden_dim, intermediate_dim, dropout=0.0, activation={F}relu, layer_norm_epsilon=1e-05):
        super().__init__()
        self.activation = activation
        self._mixing_layer_norm = {nn}LayerNorm(hidden_dim, eps=layer_norm_epsilon)
        self._output_layer_norm = {nn}LayerNorm(hidden_dim, eps=layer_norm_epsilon)
        self._intermediate_dense = _keras_dense(hidden_dim, intermediate_dim)
        self._output_dense = _keras_dense(intermediate_dim, hidden_dim)
        self._output_dropout = {nn}Dropout(dropout)

    def forward(self, inputs):
        mixing = {torch}fft.fft2(inputs.float()).real.to(inputs.dtype)
        mixing = self._mixing_layer_norm(inputs + mixing)
        x = self._output_dropout(self._output_dense(self.activation(self._intermediate_dense(mixing))))
        return self._output_layer_norm(mixing + x)
'''

helpers.HELPERS["KerasPositionEmbedding"] = _POSITION_EMBEDDING
helpers.HELPERS["KerasTokenAndPositionEmbedding"] = _TOKEN_AND_POSITION_EMBEDDING
helpers.HELPERS["KerasSinePositionEncoding"] = _SINE_POSITION_ENCODING
helpers.HELPERS["_keras_dense"] = _DENSE_INIT
helpers.HELPERS["_keras_attention"] = _ATTENTION
helpers.HELPERS["KerasTransformerEncoder"] = _TRANSFORMER_ENCODER
helpers.HELPERS["KerasTransformerDecoder"] = _TRANSFORMER_DECODER
helpers.HELPERS["KerasFNetEncoder"] = _FNET_ENCODER
DATA_DEPS["KerasTokenAndPositionEmbedding"] = ("KerasPositionEmbedding",)
DATA_DEPS["_keras_attention"] = ("KerasMultiHeadAttention",)
# finish() follows one level of DATA_DEPS: the attention helper's own dependency is listed too
DATA_DEPS["KerasTransformerEncoder"] = ("_keras_dense", "_keras_attention", "KerasMultiHeadAttention")
DATA_DEPS["KerasTransformerDecoder"] = ("_keras_dense", "_keras_attention", "KerasMultiHeadAttention")
DATA_DEPS["KerasFNetEncoder"] = ("_keras_dense",)


# --- shape functions ----------------------------------------------------------------------------------

import libcst as cst  # noqa: E402

from fwport.core.bind import NOT_LITERAL, literal_value  # noqa: E402
from fwport.core.engine import LayerContext, LayerEmission, MappedCall, code, expr  # noqa: E402
from fwport.packs.tf2torch.dims import known, sizes_of  # noqa: E402
from fwport.packs.tf2torch.layer import _failed, activation_name  # noqa: E402
from fwport.packs.tf2torch.registry import shape  # noqa: E402

#: ctx.analyses: set by the functional pass while it builds a TransformerDecoder for a call: whether that call
#: gives it an encoder_sequence (Keras builds the cross-attention block then)
CROSS = "tf2torch-kerashub-cross"


def _hidden(m: MappedCall, ctx, lctx: LayerContext, what: str):
    """The input's feature size (Keras builds the layer from it), or the failed emission."""
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-construct", f"{what} in a model converted to channels-first would see "
                       "(batch, features, steps): keep this model channels-last")
    in_shape = lctx.in_shape
    if in_shape is None or len(in_shape) != 2 or not known(in_shape[-1]):
        return _failed(m, ctx, "shape-unknown", f"{what} on an input of shape {_shape_text(in_shape)}: the written "
                       "module needs (batch, steps, features) with the feature size known where it is built (a "
                       "functional model whose Input gives it, or an embedding before it)")
    return in_shape[-1]


def _shape_text(in_shape) -> str:
    return "unknown" if in_shape is None else f"(batch, {', '.join(map(str, in_shape))})"


def _activation(m: MappedCall, ctx):
    """The torch function for the ``activation=`` argument (a Keras name); None when refused."""
    node = m.extras.get("activation")
    if node is None:
        return None, ""
    name = activation_name(node, ctx)
    if name not in ACTIVATIONS:
        return False, f"activation={code(node)}: fwport writes the feedforward activations {', '.join(ACTIVATIONS)}"
    text = helpers._spelled(ACTIVATIONS[name], ctx)
    return text, ""


def _args(m: MappedCall, keys: tuple[str, ...]) -> list[str]:
    return [f"{k}={code(m.extras[k])}" for k in keys if k in m.extras]


def _required(m: MappedCall, ctx, keys: tuple[str, ...]):
    missing = [k for k in keys if k not in m.extras]
    if missing:
        return _failed(m, ctx, "unsupported-argument", f"{', '.join(missing)} not given")
    return None


@shape("kerashub-token-and-position-embedding")
def token_and_position_embedding(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """TokenAndPositionEmbedding → ``KerasTokenAndPositionEmbedding(vocabulary_size, sequence_length,
    embedding_dim)`` (written out in the file). mask_zero=True only where the functional pass carries the mask
    (``ids != 0``) to the layers after it."""
    failed = _required(m, ctx, ("vocabulary_size", "sequence_length", "embedding_dim"))
    if failed is not None:
        return failed
    mask = m.extras.get("mask_zero")
    if mask is not None and literal_value(mask, NOT_LITERAL) is not False and not (
            literal_value(mask, NOT_LITERAL) is True and getattr(lctx, "mask_tracked", False)):
        return _failed(m, ctx, "unsupported-argument", f"mask_zero={code(mask)}: Keras attaches the mask ids != 0 to "
                       "the output and the layers after it read it; fwport carries it only inside a functional model: "
                       "pass padding_mask=(ids != 0) to the transformer layers by hand")
    args = [code(m.extras[k]) for k in ("vocabulary_size", "sequence_length", "embedding_dim")]
    ctx.spell_text("torch.nn.Module")
    name = helpers.use(ctx, "KerasTokenAndPositionEmbedding")
    dim = sizes_of(lctx).dim(m.extras["embedding_dim"])
    out = (*lctx.in_shape, dim if known(dim) else None) if lctx.in_shape is not None else None
    return LayerEmission([expr(f"{name}({', '.join(args)})")], out)


@shape("kerashub-position-embedding")
def position_embedding(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """PositionEmbedding(sequence_length) → ``KerasPositionEmbedding(sequence_length, features)``: its table's
    feature size is the input's (Keras's build)."""
    failed = _required(m, ctx, ("sequence_length",))
    if failed is not None:
        return failed
    hidden = _hidden(m, ctx, lctx, "PositionEmbedding")
    if isinstance(hidden, LayerEmission):
        return hidden
    name = helpers.use(ctx, "KerasPositionEmbedding")
    return LayerEmission([expr(f"{name}({code(m.extras['sequence_length'])}, {hidden})")], lctx.in_shape)


@shape("kerashub-sine-position-encoding")
def sine_position_encoding(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """SinePositionEncoding(max_wavelength) → ``KerasSinePositionEncoding(max_wavelength)`` (no weights)."""
    name = helpers.use(ctx, "KerasSinePositionEncoding")
    return LayerEmission([expr(f"{name}({', '.join(_args(m, ('max_wavelength',)))})")], lctx.in_shape)


def _transformer(m: MappedCall, ctx, lctx: LayerContext, what: str, helper: str, keys: tuple[str, ...],
                 extra: list[str] = ()) -> LayerEmission:
    failed = _required(m, ctx, ("intermediate_dim",) + (("num_heads",) if "num_heads" in keys else ()))
    if failed is not None:
        return failed
    hidden = _hidden(m, ctx, lctx, what)
    if isinstance(hidden, LayerEmission):
        return hidden
    act, why = _activation(m, ctx)
    if act is False:
        return _failed(m, ctx, "unsupported-argument", why)
    ctx.spell_text("torch.nn.Module")
    helpers._spelled("{F}{torch}", ctx)  # the helpers' torch / torch.nn.functional spellings
    args = [str(hidden)] + [code(m.extras[k]) for k in keys]
    args += _args(m, ("dropout",)) + ([f"activation={act}"] if act else [])
    args += _args(m, ("layer_norm_epsilon", "normalize_first")) + list(extra)
    name = helpers.use(ctx, helper)
    return LayerEmission([expr(f"{name}({', '.join(args)})")], lctx.in_shape)


@shape("kerashub-transformer-encoder")
def transformer_encoder(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """TransformerEncoder → ``KerasTransformerEncoder(hidden_dim, intermediate_dim, num_heads, ...)``."""
    return _transformer(m, ctx, lctx, "TransformerEncoder", "KerasTransformerEncoder", ("intermediate_dim", "num_heads"))


@shape("kerashub-transformer-decoder")
def transformer_decoder(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """TransformerDecoder → ``KerasTransformerDecoder(hidden_dim, intermediate_dim, num_heads, ...,
    with_cross_attention=...)``: the cross-attention block exists where the (first) call gives an
    encoder_sequence, as Keras builds it; where no pass tells (a layer class's attribute) the module builds both
    and drops the cross-attention block at its first call without one."""
    cross = ctx.analyses.get(CROSS)
    extra = [] if cross is None else [f"with_cross_attention={cross}"]
    return _transformer(m, ctx, lctx, "TransformerDecoder", "KerasTransformerDecoder",
                        ("intermediate_dim", "num_heads"), extra)


@shape("kerashub-fnet-encoder")
def fnet_encoder(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """FNetEncoder → ``KerasFNetEncoder(hidden_dim, intermediate_dim, ...)``."""
    return _transformer(m, ctx, lctx, "FNetEncoder", "KerasFNetEncoder", ("intermediate_dim",))


# --- the functional pass's calls: which arguments are tensors, and Keras's mask -------------------------------

#: shape function → the call's parameters in Keras's order (attention.MULTI_INPUT takes them)
CALLS = {"kerashub-token-and-position-embedding": ("inputs", "start_index"),
         "kerashub-position-embedding": ("inputs", "start_index"),
         "kerashub-sine-position-encoding": ("inputs", "start_index"),
         "kerashub-transformer-encoder": ("inputs", "padding_mask", "attention_mask", "training",
                                          "return_attention_scores"),
         "kerashub-transformer-decoder": ("decoder_sequence", "encoder_sequence", "decoder_padding_mask",
                                          "decoder_attention_mask", "encoder_padding_mask", "encoder_attention_mask",
                                          "use_causal_mask", "training"),
         "kerashub-fnet-encoder": ("inputs", "training")}
TENSORS = {"inputs", "padding_mask", "attention_mask", "decoder_sequence", "encoder_sequence", "decoder_padding_mask",
           "decoder_attention_mask", "encoder_padding_mask", "encoder_attention_mask"}


def mask_flow(shape_fn: str, call_rule_call, bound: dict, masks_of: dict, ids_code: str | None):
    """Keras's mask at a call of a KerasHub layer in a functional model: (the keyword arguments to add, as
    code; the mask the output carries, as code, or None; whether the layer's MultiHeadAttention takes the
    mask off its input tensor). ``masks_of``: Keras parameter → the code of the mask its tensor carries (or
    None). Raises ValueError where Keras reads the mask in a way not translated."""
    if shape_fn == "kerashub-token-and-position-embedding":
        node = _keyword(call_rule_call, "mask_zero")
        return [], (f"{ids_code} != 0" if node is not None and literal_value(node, NOT_LITERAL) is True else None), False
    if shape_fn in ("kerashub-position-embedding", "kerashub-sine-position-encoding", "kerashub-fnet-encoder"):
        return [], None, False  # masking not supported: Keras drops the mask (its warning says so)
    if shape_fn == "kerashub-transformer-encoder":
        m = masks_of.get("inputs")
        if m is None:
            return [], None, False
        # keras_hub takes the input's mask as the padding mask (where none is given), and Keras's
        # MultiHeadAttention also masks the padded queries with it, then deletes it from its input tensor
        normalize_first = _keyword(call_rule_call, "normalize_first")
        strips = normalize_first is None or literal_value(normalize_first, NOT_LITERAL) is not True
        return [f"mask={m}"], m, strips
    # decoder: its (cached) attention reads no Keras mask; keras_hub takes the sequences' masks as the padding
    # masks where none is given
    out = []
    m, e = masks_of.get("decoder_sequence"), masks_of.get("encoder_sequence")
    if m is not None and "decoder_padding_mask" not in bound:
        out.append(f"decoder_padding_mask={m}")
    if e is not None and "encoder_padding_mask" not in bound:
        out.append(f"encoder_padding_mask={e}")
    return out, m, False


def _keyword(call: cst.Call, name: str):
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _register_calls() -> None:
    from fwport.packs.tf2torch.attention import MULTI_INPUT, TENSOR_PARAMS
    MULTI_INPUT.update(CALLS)
    TENSOR_PARAMS.update(TENSORS)


_register_calls()

#: ctx.analyses: id of a functional pass node → id of the call whose Keras mask a TransformerEncoder's MultiHeadAttention
#: deleted (Keras 3's MultiHeadAttention.call sets its query's and value's mask to None)
STRIPPED = "tf2torch-kerashub-stripped"
STRIPPED_WHY = ("this tensor carries Keras's mask and feeds a keras_hub TransformerEncoder (normalize_first=False) "
                "and another layer: Keras's MultiHeadAttention inside the encoder deletes the mask from the tensor "
                "itself, so what the other layer sees depends on the order Keras runs them: give the other layer "
                "its own mask (padding_mask=) or a copy of the tensor, by hand")
