"""KerasHub / KerasNLP layers (keras_hub.layers.*, keras_nlp.layers.*) → the modules written out in the file
(kerashub.py): TokenAndPositionEmbedding, PositionEmbedding, SinePositionEncoding, TransformerEncoder,
TransformerDecoder, FNetEncoder, alone and inside functional models with Keras's mask (mask_zero=True).

keras_hub is not installed here: the reference everywhere is a hand-written version of keras_hub 0.32's
computation (keras_hub/src/layers/modeling/*.py, read from keras-team/keras-hub) built from Keras's own
MultiHeadAttention / LayerNormalization / Dense with the same weights, and NumPy for the position encodings.
Where keras_hub imports, the tests also compare with keras_hub itself (with keras_hub 0.32.0 unpacked on
PYTHONPATH the written modules matched it to 1e-6, masks included)."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from fwport.packs.tf2torch.helpers import HELPERS
from helpers import error_texts as errors

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

NAMES = ("KerasMultiHeadAttention", "KerasPositionEmbedding", "KerasTokenAndPositionEmbedding",
         "KerasSinePositionEncoding", "_keras_dense", "_keras_attention", "KerasTransformerEncoder",
         "KerasTransformerDecoder", "KerasFNetEncoder")


def _ns():
    text = "".join(HELPERS[n] for n in NAMES).replace("{nn}", "nn.").replace("{torch}", "torch.").replace("{F}", "F.")
    ns = {"torch": torch, "nn": nn, "F": F}
    exec(compile(text, "<helpers>", "exec"), ns)
    return ns


def _np(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _t(a):
    return torch.tensor(np.asarray(a))


# --- the Keras-core reference of keras_hub's blocks ------------------------------------------------------

class RefBlock:
    """keras_hub's TransformerEncoder / TransformerDecoder / FNetEncoder computation from Keras's own layers
    (built, random weights); ``copy_to`` gives a written module the same weights by Keras's names."""

    def __init__(self, hidden, intermediate, heads=2, activation="relu", eps=1e-5, cross=False, attention=True):
        self.hidden = hidden
        self.names = {}
        if attention:
            self.names["_self_attention_layer"] = keras.layers.MultiHeadAttention(heads, hidden // heads)
            self.names["_self_attention_layer_norm"] = keras.layers.LayerNormalization(epsilon=eps)
        if cross:
            self.names["_cross_attention_layer"] = keras.layers.MultiHeadAttention(heads, hidden // heads)
            self.names["_cross_attention_layer_norm"] = keras.layers.LayerNormalization(epsilon=eps)
        pre = "_feedforward" if attention else ""
        self.ln_names = (f"{pre}_layer_norm" if attention else "_output_layer_norm",)
        self.names[f"{pre}_intermediate_dense"] = keras.layers.Dense(intermediate, activation=activation)
        self.names[f"{pre}_output_dense"] = keras.layers.Dense(hidden)
        self.names[self.ln_names[0]] = keras.layers.LayerNormalization(epsilon=eps)
        if not attention:
            self.names["_mixing_layer_norm"] = keras.layers.LayerNormalization(epsilon=eps)
        rng = np.random.default_rng(1)
        x = np.zeros((1, 3, hidden), "float32")
        for name, layer in self.names.items():
            if isinstance(layer, keras.layers.MultiHeadAttention):
                layer(x, x)
            elif name.endswith("output_dense"):
                layer.build((None, intermediate))
            else:
                layer.build((None, hidden))
            for w in layer.weights:  # non-trivial norms and biases too
                w.assign(rng.normal(scale=0.3, size=w.shape).astype("float32") + (1.0 if "gamma" in w.path else 0.0))

    def __getattr__(self, name):
        return self.names[name]

    def ff(self, x, prefix="_feedforward"):
        return self.names[f"{prefix}_output_dense"](self.names[f"{prefix}_intermediate_dense"](x))

    def copy_to(self, module):
        with torch.no_grad():
            for name, layer in self.names.items():
                target = getattr(module, name)
                if isinstance(layer, keras.layers.MultiHeadAttention):
                    for part in ("query", "key", "value", "output"):
                        dense = getattr(layer, f"_{part}_dense")
                        getattr(target, part + "_kernel").copy_(_t(_np(dense.kernel)))
                        getattr(target, part + "_bias").copy_(_t(_np(dense.bias)))
                elif isinstance(layer, keras.layers.LayerNormalization):
                    target.weight.copy_(_t(_np(layer.gamma)))
                    target.bias.copy_(_t(_np(layer.beta)))
                else:
                    target.weight.copy_(_t(_np(layer.kernel).T))
                    target.bias.copy_(_t(_np(layer.bias)))


def ref_encoder(b: RefBlock, x, mask=None, normalize_first=False):
    """keras_hub TransformerEncoder.call; ``mask`` (batch, queries, keys) as its attention gets it."""
    h = b._self_attention_layer_norm(x) if normalize_first else x
    h = b._self_attention_layer(h, h, attention_mask=mask) + x
    if not normalize_first:
        h = b._self_attention_layer_norm(h)
    r = h
    h = b.ff(b._feedforward_layer_norm(h) if normalize_first else h) + r
    return h if normalize_first else b._feedforward_layer_norm(h)


def ref_decoder(b: RefBlock, x, enc=None, self_mask=None, cross_mask=None, normalize_first=False):
    def block(h, norm, step):
        y = step(norm(h) if normalize_first else h) + h
        return y if normalize_first else norm(y)
    h = block(x, b._self_attention_layer_norm, lambda y: b._self_attention_layer(y, y, attention_mask=self_mask))
    if enc is not None:
        h = block(h, b._cross_attention_layer_norm, lambda y: b._cross_attention_layer(y, enc, attention_mask=cross_mask))
    return block(h, b._feedforward_layer_norm, b.ff)


def ref_fnet(b: RefBlock, x):
    mixing = np.fft.fft2(np.asarray(x, "float64"), axes=(-2, -1)).real.astype("float32")
    mixing = b._mixing_layer_norm(x + mixing)
    return b._output_layer_norm(mixing + b.ff(mixing, prefix=""))


def ref_sine(steps, features, start=0, max_wavelength=10000):
    p = np.arange(steps)[:, None] + start
    j = np.arange(features)
    w = (1 / max_wavelength) ** (2 * (j // 2) / features)
    return np.where(j % 2 == 0, np.sin(p * w), np.cos(p * w)).astype("float32")


def _close(a, b, tol=2e-5):
    a, b = _np(a), b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_allclose(a, b, atol=tol, rtol=tol)


@pytest.fixture(scope="module")
def ns():
    return _ns()


def _padded_ids(rng, vocab=40, steps=9):
    ids = rng.integers(1, vocab, size=(3, steps))
    ids[0, 6:] = 0
    ids[1, 3:] = 0
    ids[2, :] = 0  # a sequence of padding only: every query attends nothing
    return ids


# --- the written modules against the reference ------------------------------------------------------------

@pytest.mark.parametrize("normalize_first,activation,eps", [(False, "relu", 1e-5), (True, "gelu", 1e-3)])
def test_encoder_module_equals_keras_hub_computation(ns, normalize_first, activation, eps):
    rng = np.random.default_rng(0)
    b = RefBlock(12, 20, heads=3, activation=activation, eps=eps)
    act = {"relu": F.relu, "gelu": F.gelu}[activation]
    enc = ns["KerasTransformerEncoder"](12, 20, 3, activation=act, layer_norm_epsilon=eps,
                                        normalize_first=normalize_first).eval()
    b.copy_to(enc)
    x = rng.normal(size=(3, 9, 12)).astype("float32")
    ids = _padded_ids(rng)
    keep = ids != 0
    _close(ref_encoder(b, x, normalize_first=normalize_first), enc(_t(x)))
    # padding_mask: keras_hub masks the keys
    _close(ref_encoder(b, x, keep[:, None, :], normalize_first), enc(_t(x), padding_mask=_t(keep)))
    # the Keras mask of a functional model: the keys and, through Keras's MultiHeadAttention, the queries
    both = keep[:, :, None] & keep[:, None, :]
    _close(ref_encoder(b, x, both, normalize_first), enc(_t(x), mask=_t(keep)))
    # a padding mask given with the Keras mask, and an attention mask
    att = np.tril(np.ones((9, 9), bool))[None].repeat(3, 0)
    _close(ref_encoder(b, x, both & att, normalize_first), enc(_t(x), attention_mask=_t(att), mask=_t(keep)))


def test_decoder_module_equals_keras_hub_computation(ns):
    rng = np.random.default_rng(0)
    b = RefBlock(8, 16, cross=True)
    dec = ns["KerasTransformerDecoder"](8, 16, 2, with_cross_attention=True).eval()
    b.copy_to(dec)
    x, e = rng.normal(size=(3, 9, 8)).astype("float32"), rng.normal(size=(3, 7, 8)).astype("float32")
    keep_x, keep_e = _padded_ids(rng) != 0, _padded_ids(rng, steps=7) != 0
    causal = np.tril(np.ones((9, 9), bool))[None]
    _close(ref_decoder(b, x, e, causal), dec(_t(x), _t(e)))
    _close(ref_decoder(b, x, e, causal & keep_x[:, None, :], keep_e[:, None, :]),
           dec(_t(x), _t(e), decoder_padding_mask=_t(keep_x), encoder_padding_mask=_t(keep_e)))
    _close(ref_decoder(b, x, e, None, None), dec(_t(x), _t(e), use_causal_mask=False))
    b1 = RefBlock(8, 16)
    alone = ns["KerasTransformerDecoder"](8, 16, 2, normalize_first=True).eval()  # decided by its first call
    b1.copy_to(alone)
    _close(ref_decoder(b1, x, None, causal, normalize_first=True), alone(_t(x)))
    assert alone._cross_attention_layer is None and not hasattr(alone, "_cross_attention_layer_norm")
    with pytest.raises(ValueError):
        alone(_t(x), _t(e))


def test_fnet_sine_and_position_embeddings_equal_keras_hub_computation(ns):
    rng = np.random.default_rng(0)
    b = RefBlock(8, 16, attention=False)
    fnet = ns["KerasFNetEncoder"](8, 16).eval()
    b.copy_to(fnet)
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    _close(ref_fnet(b, x), fnet(_t(x)), tol=1e-4)
    sine = ns["KerasSinePositionEncoding"]()
    _close(np.broadcast_to(ref_sine(5, 8), x.shape), sine(_t(x)))
    _close(np.broadcast_to(ref_sine(5, 8, start=3, max_wavelength=100), x.shape),
           ns["KerasSinePositionEncoding"](100)(_t(x), 3))
    tpe = ns["KerasTokenAndPositionEmbedding"](30, 7, 8)
    ids = rng.integers(0, 30, size=(2, 5))
    table, pos = tpe.token_embedding.weight.detach().numpy(), tpe.position_embedding.position_embeddings.detach().numpy()
    _close(table[ids] + pos[None, :5], tpe(_t(ids)))
    _close(table[ids] + pos[None, 2:7], tpe(_t(ids), start_index=2))
    with pytest.raises(ValueError):
        tpe(_t(rng.integers(0, 30, size=(2, 8))))  # more steps than sequence_length, as Keras's slice


def test_encoder_training_step_gradients_equal_keras(ns):
    """One training step's gradients (dropout 0) of every weight equal Keras's, through the Keras mask."""
    import tensorflow as tf
    rng = np.random.default_rng(3)
    b = RefBlock(8, 16)
    enc = ns["KerasTransformerEncoder"](8, 16, 2)
    b.copy_to(enc)
    x = rng.normal(size=(3, 9, 8)).astype("float32")
    keep = _padded_ids(rng)[:2] != 0
    x = x[:2]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(ref_encoder(b, x, keep[:, :, None] & keep[:, None, :]) ** 2)
    layers = {name: layer for name, layer in b.names.items()}
    variables = [w for layer in layers.values() for w in layer.trainable_weights]
    grads = dict(zip([id(v) for v in variables], tape.gradient(loss, variables)))
    (enc(_t(x), mask=_t(keep)) ** 2).sum().backward()
    for name, layer in layers.items():
        target = getattr(enc, name)
        if isinstance(layer, keras.layers.Dense):
            _close(_np(grads[id(layer.kernel)]).T, target.weight.grad, 1e-4)
        elif isinstance(layer, keras.layers.LayerNormalization):
            _close(grads[id(layer.gamma)], target.weight.grad, 1e-4)
        else:
            _close(grads[id(layer._value_dense.kernel)], target.value_kernel.grad, 1e-4)
            _close(grads[id(layer._query_dense.kernel)], target.query_kernel.grad, 1e-4)


# --- translation: functional models ------------------------------------------------------------------------

ENCODER_MODEL = '''
import keras
import keras_hub

inputs = keras.Input(shape=(None,), dtype="int64")
x = keras_hub.layers.TokenAndPositionEmbedding(vocabulary_size=40, sequence_length=9, embedding_dim=8, mask_zero=True)(inputs)
x = keras_hub.layers.TransformerEncoder(intermediate_dim=16, num_heads=2)(inputs=x)
x = keras_hub.layers.TransformerEncoder(16, 2, normalize_first=True)(x)
outputs = keras.layers.Dense(3)(x)
model = keras.Model(inputs, outputs)
'''


def _model(src):
    r = translate_source(src, "model.py")
    assert not errors(r), errors(r)
    ns = {}
    exec(compile(r.output, "model_torch.py", "exec"), ns)
    return r, ns["model"].eval()


def test_functional_encoder_model_with_mask_zero_translates_and_computes_keras_hub(ns):
    r, model = _model(ENCODER_MODEL)
    assert "mask=inputs != 0" in r.output and "import keras" not in r.output
    assert any(f.code == "loss-mask" for f in r.findings)  # the Dense output still carries the mask
    rng = np.random.default_rng(0)
    ids = _padded_ids(rng)
    keep = ids != 0
    both = keep[:, :, None] & keep[:, None, :]
    b1, b2 = RefBlock(8, 16), RefBlock(8, 16)
    b1.copy_to(model.transformer_encoder1)
    b2.copy_to(model.transformer_encoder2)
    tpe = model.token_and_position_embedding
    x = tpe.token_embedding.weight.detach().numpy()[ids] + tpe.position_embedding.position_embeddings.detach().numpy()
    y = ref_encoder(b2, ref_encoder(b1, x, both), both, normalize_first=True)
    y = _np(y) @ model.fc.weight.detach().numpy().T + model.fc.bias.detach().numpy()
    _close(y, model(_t(ids)), 1e-4)


DECODER_MODEL = '''
import keras
import keras_nlp

enc_in = keras.Input(shape=(None,), dtype="int64")
dec_in = keras.Input(shape=(None,), dtype="int64")
e = keras_nlp.layers.TokenAndPositionEmbedding(40, 9, 8, mask_zero=True)(enc_in)
e = keras_nlp.layers.TransformerEncoder(intermediate_dim=16, num_heads=2)(inputs=e)
d = keras_nlp.layers.TokenAndPositionEmbedding(40, 9, 8, mask_zero=True)(dec_in)
d = keras_nlp.layers.TransformerDecoder(intermediate_dim=16, num_heads=2)(decoder_sequence=d, encoder_sequence=e)
d = keras_nlp.layers.FNetEncoder(16)(d)
outputs = keras.layers.Dense(5, activation="softmax")(d)
model = keras.Model([enc_in, dec_in], outputs)
'''


def test_functional_encoder_decoder_model_passes_the_masks_as_keras_hub_reads_them(ns):
    r, model = _model(DECODER_MODEL)
    assert "encoder_padding_mask=enc_in != 0" in r.output and "decoder_padding_mask=dec_in != 0" in r.output
    assert "with_cross_attention=True" in r.output
    assert not any(f.code == "loss-mask" for f in r.findings)  # FNetEncoder drops the mask, as Keras does
    rng = np.random.default_rng(0)
    src, tgt = _padded_ids(rng), _padded_ids(rng)
    ks, kt = src != 0, tgt != 0
    mods = dict(model.named_children())
    enc, dec, fnet = (next(m for m in mods.values() if type(m).__name__ == k)
                      for k in ("KerasTransformerEncoder", "KerasTransformerDecoder", "KerasFNetEncoder"))
    be, bd, bf = RefBlock(8, 16), RefBlock(8, 16, cross=True), RefBlock(8, 16, attention=False)
    be.copy_to(enc), bd.copy_to(dec), bf.copy_to(fnet)
    tpes = [m for m in mods.values() if type(m).__name__ == "KerasTokenAndPositionEmbedding"]

    def embed(tpe, ids):
        return (tpe.token_embedding.weight.detach().numpy()[ids]
                + tpe.position_embedding.position_embeddings.detach().numpy()[None, :ids.shape[1]])
    e = ref_encoder(be, embed(tpes[0], src), ks[:, :, None] & ks[:, None, :])
    causal = np.tril(np.ones((9, 9), bool))[None]
    d = ref_fnet(bf, _np(ref_decoder(bd, embed(tpes[1], tgt), e, causal & kt[:, None, :], ks[:, None, :])))
    dense = [m for m in mods.values() if isinstance(m, nn.Linear)][0]
    logits = _np(d) @ dense.weight.detach().numpy().T + dense.bias.detach().numpy()
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    _close(expected / expected.sum(-1, keepdims=True), model(_t(src), _t(tgt)), 1e-4)


def test_masked_tensor_shared_by_an_encoder_and_another_layer_is_refused():
    """Keras's MultiHeadAttention deletes the mask from the encoder's input tensor itself: the Dense given the
    same tensor sees a mask or none by the order Keras runs the two, so the model is refused."""
    src = """
import keras
import keras_hub

inputs = keras.Input(shape=(None,), dtype="int64")
x = keras_hub.layers.TokenAndPositionEmbedding(40, 9, 8, mask_zero=True)(inputs)
y = keras_hub.layers.TransformerEncoder(16, 2)(x)
z = keras.layers.Dense(8)(x)
model = keras.Model(inputs, [y, z])
"""
    r = translate_source(src, "model.py")
    assert any("deletes the mask from the tensor" in e for e in errors(r)), errors(r)
    r = translate_source(src.replace("TransformerEncoder(16, 2)", "TransformerEncoder(16, 2, normalize_first=True)"),
                         "model.py")
    assert not errors(r), errors(r)  # its attention is given a LayerNorm's output: the input keeps its mask


def test_unknown_feature_size_and_mask_outside_a_functional_model_are_refused():
    r = translate_source("import keras\nimport keras_hub\nenc = keras_hub.layers.TransformerEncoder(16, 2)\n"
                         "emb = keras_hub.layers.TokenAndPositionEmbedding(10, 4, 8, mask_zero=True)\n", "m.py")
    texts = errors(r)
    assert any("feature size known" in e for e in texts) and any("mask_zero=True" in e for e in texts), texts
    assert "# fwport:" in r.output


# --- keras_hub itself, where it imports -----------------------------------------------------------------

def test_written_modules_equal_keras_hub_itself(ns):
    hub = pytest.importorskip("keras_hub")
    rng = np.random.default_rng(0)
    ids = _padded_ids(rng)
    inp = keras.Input((9,), dtype="int32")
    tpe = hub.layers.TokenAndPositionEmbedding(40, 9, 8, mask_zero=True)
    enc = hub.layers.TransformerEncoder(16, 2)
    x = tpe(inp)
    e = enc(inputs=x)
    ky, ke = (_np(a) for a in keras.Model(inp, [x, e])(ids))
    t_enc = ns["KerasTransformerEncoder"](8, 16, 2).eval()
    b = RefBlock.__new__(RefBlock)
    b.names = {n: getattr(enc, n) for n in ("_self_attention_layer", "_self_attention_layer_norm",
                                             "_feedforward_layer_norm", "_feedforward_intermediate_dense",
                                             "_feedforward_output_dense")}
    b.copy_to(t_enc)
    _close(ke, t_enc(_t(ky), mask=_t(ids != 0)), 1e-5)


# --- fwport verify with the weight maps: a stand-in keras_hub on the Keras side ---------------------------

# keras_hub 0.32's layers (keras_hub/src/layers/modeling/*.py) written again from Keras's own layers, with keras_hub's
# attribute names, masks and call signatures: the Keras side of `fwport verify` imports it as keras_hub (and
# keras_nlp). Checked against keras_hub 0.32.0 itself by test_stand_in_equals_keras_hub where that imports.
KERAS_HUB_STAND_IN = '''
import keras
from keras import ops
from keras.src.backend import get_keras_mask


def _merge(inputs, padding_mask, attention_mask):
    mask = get_keras_mask(inputs) if padding_mask is None else padding_mask
    if mask is not None:
        mask = ops.cast(ops.expand_dims(mask, axis=1), "int32")
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "int32")
        return attention_mask if mask is None else ops.minimum(mask, attention_mask)
    return mask


class CachedMultiHeadAttention(keras.layers.MultiHeadAttention):
    """keras_hub's CachedMultiHeadAttention without a cache: reads no Keras mask."""

    def call(self, query, value, key=None, attention_mask=None, training=None):
        key = value if key is None else key
        q, k, v = self._query_dense(query), self._key_dense(key), self._value_dense(value)
        out, _ = self._compute_attention(q, k, v, attention_mask=attention_mask, training=training)
        return self._output_dense(out)


class PositionEmbedding(keras.layers.Layer):
    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.sequence_length, self.initializer = int(sequence_length), initializer

    def build(self, shape):
        self.position_embeddings = self.add_weight(name="embeddings", shape=[self.sequence_length, shape[-1]],
                                                   initializer=self.initializer)

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        table = ops.slice(ops.convert_to_tensor(self.position_embeddings), (start_index, 0), (shape[-2], shape[-1]))
        return ops.broadcast_to(table, shape)


class SinePositionEncoding(keras.layers.Layer):
    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        steps, hidden = shape[-2], shape[-1]
        positions = ops.expand_dims(ops.cast(ops.arange(steps) + start_index, self.compute_dtype), 0)
        timescales = ops.power(ops.cast(1 / self.max_wavelength, self.compute_dtype),
                               ops.cast(2 * (ops.arange(hidden) // 2), self.compute_dtype) / ops.cast(hidden, self.compute_dtype))
        angles = ops.einsum("bi,j->bij", positions, timescales)
        cos_mask = ops.cast(ops.arange(hidden) % 2, self.compute_dtype)
        encoding = ops.sin(angles) * (1 - cos_mask) + ops.cos(angles) * cos_mask
        return ops.broadcast_to(encoding, shape)


class TokenAndPositionEmbedding(keras.layers.Layer):
    def __init__(self, vocabulary_size, sequence_length, embedding_dim, tie_weights=True,
                 embeddings_initializer="uniform", mask_zero=False, **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = keras.layers.Embedding(vocabulary_size, embedding_dim, mask_zero=mask_zero,
                                                      embeddings_initializer=embeddings_initializer)
        self.position_embedding = PositionEmbedding(sequence_length, initializer=embeddings_initializer)
        self.mask_zero = self.supports_masking = mask_zero

    def build(self, shape):
        self.token_embedding.build(shape)
        self.position_embedding.build(tuple(shape) + (self.token_embedding.output_dim,))

    def call(self, inputs, start_index=0):
        tokens = self.token_embedding(inputs)
        return tokens + self.position_embedding(tokens, start_index=start_index)

    def compute_mask(self, inputs, mask=None):
        return ops.not_equal(inputs, 0) if self.mask_zero else None


class _Block(keras.layers.Layer):
    def __init__(self, intermediate_dim, num_heads=None, dropout=0, activation="relu", layer_norm_epsilon=1e-05,
                 normalize_first=False, **kwargs):
        super().__init__(**kwargs)
        self.intermediate_dim, self.num_heads, self.dropout = intermediate_dim, num_heads, dropout
        self.activation, self.eps, self.normalize_first = activation, layer_norm_epsilon, normalize_first

    def _norm(self, name, shape):
        layer = keras.layers.LayerNormalization(epsilon=self.eps)
        layer.build(shape)
        setattr(self, name, layer)

    def _feedforward(self, prefix, shape):
        dense = keras.layers.Dense(self.intermediate_dim, activation=self.activation)
        dense.build(shape)
        setattr(self, prefix + "_intermediate_dense", dense)
        out = keras.layers.Dense(shape[-1])
        out.build(tuple(shape[:-1]) + (self.intermediate_dim,))
        setattr(self, prefix + "_output_dense", out)

    def _attention(self, name, shape, cls=keras.layers.MultiHeadAttention):
        layer = cls(self.num_heads, int(shape[-1] // self.num_heads), dropout=self.dropout)
        layer.build(shape, shape)
        setattr(self, name, layer)
        self._norm(name + "_norm", shape)
        setattr(self, name.replace("_layer", "_dropout"), keras.layers.Dropout(self.dropout))

    def _residual(self, x, norm, step):
        y = step(norm(x) if self.normalize_first else x) + x
        return y if self.normalize_first else norm(y)


class TransformerEncoder(_Block):
    def __init__(self, intermediate_dim, num_heads, **kwargs):
        super().__init__(intermediate_dim, num_heads, **kwargs)
        self.supports_masking = True

    def build(self, shape):
        self._attention("_self_attention_layer", shape)
        self._norm("_feedforward_layer_norm", shape)
        self._feedforward("_feedforward", shape)
        self._feedforward_dropout = keras.layers.Dropout(self.dropout)

    def call(self, inputs, padding_mask=None, attention_mask=None, training=None):
        mask = _merge(inputs, padding_mask, attention_mask)
        x = self._residual(inputs, self._self_attention_layer_norm, lambda h: self._self_attention_dropout(
            self._self_attention_layer(query=h, value=h, attention_mask=mask, training=training), training=training))
        return self._residual(x, self._feedforward_layer_norm, lambda h: self._feedforward_dropout(
            self._feedforward_output_dense(self._feedforward_intermediate_dense(h)), training=training))


class TransformerDecoder(_Block):
    def __init__(self, intermediate_dim, num_heads, **kwargs):
        super().__init__(intermediate_dim, num_heads, **kwargs)
        self.supports_masking = True

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        shape = decoder_sequence_shape
        self._attention("_self_attention_layer", shape, CachedMultiHeadAttention)
        self._cross_attention_layer = None
        if encoder_sequence_shape:
            self._attention("_cross_attention_layer", shape, CachedMultiHeadAttention)
        self._feedforward("_feedforward", shape)
        self._norm("_feedforward_layer_norm", shape)
        self._feedforward_dropout = keras.layers.Dropout(self.dropout)

    def call(self, decoder_sequence, encoder_sequence=None, decoder_padding_mask=None, decoder_attention_mask=None,
             encoder_padding_mask=None, encoder_attention_mask=None, use_causal_mask=True, training=None):
        mask = _merge(decoder_sequence, decoder_padding_mask, decoder_attention_mask)
        if use_causal_mask:
            n = ops.shape(decoder_sequence)[1]
            causal = ops.cast(ops.expand_dims(ops.arange(n)[:, None] >= ops.arange(n)[None, :], 0), "int32")
            mask = causal if mask is None else ops.minimum(mask, causal)
        x = self._residual(decoder_sequence, self._self_attention_layer_norm, lambda h: self._self_attention_dropout(
            self._self_attention_layer(h, h, attention_mask=mask, training=training), training=training))
        if self._cross_attention_layer is not None:
            cross = _merge(encoder_sequence, encoder_padding_mask, encoder_attention_mask)
            x = self._residual(x, self._cross_attention_layer_norm, lambda h: self._cross_attention_dropout(
                self._cross_attention_layer(h, encoder_sequence, attention_mask=cross, training=training),
                training=training))
        return self._residual(x, self._feedforward_layer_norm, lambda h: self._feedforward_dropout(
            self._feedforward_output_dense(self._feedforward_intermediate_dense(h)), training=training))


class FNetEncoder(_Block):
    def __init__(self, intermediate_dim, dropout=0, activation="relu", layer_norm_epsilon=1e-05, **kwargs):
        super().__init__(intermediate_dim, None, dropout, activation, layer_norm_epsilon, **kwargs)

    def build(self, shape):
        self._norm("_mixing_layer_norm", shape)
        self._norm("_output_layer_norm", shape)
        self._feedforward("", shape)
        self._output_dropout = keras.layers.Dropout(self.dropout)

    def call(self, inputs, training=None):
        real = ops.cast(inputs, "float32")
        real, _ = ops.fft2((real, ops.zeros_like(real)))
        mixing = self._mixing_layer_norm(inputs + ops.cast(real, inputs.dtype))
        x = self._output_dropout(self._output_dense(self._intermediate_dense(mixing)), training=training)
        return self._output_layer_norm(mixing + x)
'''


@pytest.fixture(scope="module")
def hub_session(tmp_path_factory):
    """A verify Session whose Keras worker imports the stand-in keras_hub (and keras_nlp)."""
    import os
    from fwport.verify.run import Session

    stub = tmp_path_factory.mktemp("keras-hub-stand-in")
    for pkg, text in (("keras_hub", "from . import layers\n"), ("keras_nlp", "from keras_hub import layers\n")):
        (stub / pkg).mkdir()
        (stub / pkg / "__init__.py").write_text(text)
    (stub / "keras_hub" / "layers.py").write_text(KERAS_HUB_STAND_IN)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(stub) + (os.pathsep + old if old else "")
    try:
        with Session() as s:
            yield s, stub
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


POSITION_MODEL = '''
import keras
import keras_hub

inputs = keras.Input(shape=(7, 8))
x = keras.layers.Add()([inputs, keras_hub.layers.PositionEmbedding(sequence_length=9)(inputs)])
x = keras.layers.Add()([x, keras_hub.layers.SinePositionEncoding(max_wavelength=100)(x)])
model = keras.Model(inputs, keras.layers.Dense(3)(x))
'''


FNET_MODEL = '''
import keras
import keras_nlp

inputs = keras.Input(shape=(6, 8))
x = keras_nlp.layers.FNetEncoder(intermediate_dim=16, activation="gelu")(inputs=inputs)
model = keras.Model(inputs, keras.layers.Dense(3)(x))
'''


@pytest.mark.parametrize("src,inputs,dtype", [
    (ENCODER_MODEL, ["int64[3,9]:4"], "float64"),
    (DECODER_MODEL.replace("d = keras_nlp.layers.FNetEncoder(16)(d)\n", ""), ["int64[3,9]:4", "int64[3,7]:4"], "float64"),
    # SinePositionEncoding computes in the layer's compute dtype (Keras's float32 policy even where verify gives
    # float64 inputs), the written module in its input's: the same in float32 models
    (POSITION_MODEL, ["float32[2,7,8]"], "float32"),
    # FNet's FFT runs in float32 on both sides (keras_hub casts to float32), so float64 cannot tighten it
    (FNET_MODEL, ["float32[2,6,8]"], "float32"),
], ids=["encoder", "encoder-decoder", "positions", "fnet"])
def test_translations_verify_against_the_stand_in(hub_session, tmp_path, src, inputs, dtype):
    """`fwport verify` with the rules' weight maps: forward, gradients and a training step equal Keras's (ids
    0..3, so many padded steps and some sequences of padding only)."""
    from fwport.verify import Options, verify
    session, _ = hub_session
    r = translate_source(src, "m.py")
    assert not errors(r), errors(r)
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "m_torch.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), "model", inputs=inputs,
                          checks=("forward", "grad", "step"), device="cpu", dtype=dtype), session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_stand_in_equals_keras_hub(hub_session):
    """The stand-in computes what keras_hub computes (where keras_hub imports), masks included."""
    import importlib.util
    import sys
    hub = pytest.importorskip("keras_hub")
    _, stub = hub_session
    spec = importlib.util.spec_from_file_location("stand_in_layers", stub / "keras_hub" / "layers.py")
    stand = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stand)
    sys.modules.pop("stand_in_layers", None)
    rng = np.random.default_rng(0)
    ids, ids2 = _padded_ids(rng), _padded_ids(rng)

    def model(lib):
        a, b = keras.Input((9,), dtype="int32"), keras.Input((9,), dtype="int32")
        x = lib.TokenAndPositionEmbedding(40, 9, 8, mask_zero=True)(a)
        e = lib.TransformerEncoder(16, 2)(inputs=x)
        d = lib.TokenAndPositionEmbedding(40, 9, 8, mask_zero=True)(b)
        d = lib.TransformerDecoder(16, 2)(d, e)
        d = lib.FNetEncoder(16)(lib.TransformerEncoder(16, 2, normalize_first=True)(d))
        return keras.Model([a, b], d + lib.SinePositionEncoding()(d))
    ours, theirs = model(stand), model(hub.layers)
    for w, v in zip(ours.weights, theirs.weights):
        assert tuple(w.shape) == tuple(v.shape), (w.path, v.path)
        w.assign(v)
    _close(theirs([ids, ids2]), ours([ids, ids2]), 1e-5)
