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
         "KerasSinePositionEncoding", "_keras_dense", "KerasTransformerEncoder", "KerasTransformerDecoder",
         "KerasFNetEncoder")


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
