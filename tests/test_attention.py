"""Attention and transformer models: keras.layers.MultiHeadAttention → the KerasMultiHeadAttention helper
(Keras's call, variables and einsums), LayerNormalization of unknown size → the LazyLayerNorm helper, and
sequence models that keep Keras's channels-last layout (a global pooling or a Conv1D feed-forward called on
a permuted input). Each translation is checked numerically against Keras."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from fwport.packs.tf2torch.helpers import HELPERS
from fwport.verify import Options, verify
from helpers import error_texts as errors


def tx(src: str):
    return translate_source(src, "model.py")


def _verify(session, tmp_path, src: str, model: str, inputs: list[str], checks=("forward", "grad"), args=None):
    r = tx(src)
    assert not errors(r), errors(r)
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "m_torch.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model, inputs=inputs,
                          args=args or {}, checks=checks, device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    return r, cert


# --- the helpers against Keras, directly ------------------------------------------------------------------

def _helpers():
    import torch
    from torch import nn
    ns = {"torch": torch, "nn": nn}
    text = "".join(HELPERS[n].replace("{nn}", "nn.").replace("{torch}", "torch.")
                   for n in ("KerasMultiHeadAttention", "LazyLayerNorm"))
    exec(compile(text, "<helpers>", "exec"), ns)
    return ns


@pytest.mark.parametrize("kw,q_shape,v_shape,k_shape,call", [
    (dict(num_heads=2, key_dim=4), (2, 5, 6), (2, 7, 6), None, {}),
    # key_dim × num_heads ≠ the query's size, value_dim, output_shape, no biases, a key of its own size
    (dict(num_heads=3, key_dim=4, value_dim=5, output_shape=9, use_bias=False), (2, 5, 6), (2, 7, 8), (2, 7, 3), {}),
    (dict(num_heads=2, key_dim=3), (2, 5, 6), (2, 5, 6), None, {"use_causal_mask": True}),
    # a mask with a query that attends nothing (Keras 3: a row of zeros), as 0/1 integers
    (dict(num_heads=2, key_dim=4), (2, 5, 6), (2, 7, 6), None, {"mask": True}),
])
def test_keras_multi_head_attention_helper_equals_keras(kw, q_shape, v_shape, k_shape, call):
    keras = pytest.importorskip("keras")
    import torch
    ns = _helpers()
    rng = np.random.default_rng(0)
    q, v = rng.normal(size=q_shape).astype("float32"), rng.normal(size=v_shape).astype("float32")
    k = rng.normal(size=k_shape).astype("float32") if k_shape else None
    call = dict(call)
    mask = None
    if call.pop("mask", False):
        mask = (rng.random((q_shape[0], q_shape[1], v_shape[1])) > 0.3).astype("int32")
        mask[0, 1] = 0
    layer = keras.layers.MultiHeadAttention(**kw)
    out, scores = layer(q, v, key=k, attention_mask=mask, return_attention_scores=True, **call)
    mod = ns["KerasMultiHeadAttention"](**kw)
    t = lambda a: None if a is None else torch.tensor(a)  # noqa: E731
    mod(t(q), t(v), t(k))  # parameters created by the first call, as Keras builds the layer
    state = {}
    for name, sub in (("query", layer._query_dense), ("key", layer._key_dense), ("value", layer._value_dense),
                      ("output", layer._output_dense)):
        state[f"{name}_kernel"] = torch.tensor(np.array(sub.kernel))
        if kw.get("use_bias", True):
            state[f"{name}_bias"] = torch.tensor(np.array(sub.bias))
    assert set(state) == {n for n, _ in mod.named_parameters()}
    mod.load_state_dict(state)
    mod.eval()
    t_out, t_scores = mod(t(q), t(v), t(k), attention_mask=t(mask), return_attention_scores=True, **call)
    assert np.abs(t_out.detach().numpy() - np.array(out)).max() < 1e-5
    assert np.abs(t_scores.detach().numpy() - np.array(scores)).max() < 1e-6
    # without scores or dropout Keras 3 takes its fused attention, which treats a query attending nothing
    # differently (the mean of the values, not 0)
    fast = np.array(layer(q, v, key=k, attention_mask=mask, **call))
    assert np.abs(mod(t(q), t(v), t(k), attention_mask=t(mask), **call).detach().numpy() - fast).max() < 1e-5
    if mask is not None:  # the polarity: Keras attends where the mask is 1; inverting it is far off
        wrong = mod(t(q), t(v), attention_mask=t(1 - mask))
        assert np.abs(wrong.detach().numpy() - np.array(out)).max() > 1e-2


def test_lazy_layer_norm_sizes_itself_and_loads_before_its_first_call():
    keras = pytest.importorskip("keras")
    import torch
    ns = _helpers()
    x = np.random.default_rng(1).normal(size=(2, 3, 5)).astype("float32")
    ln = keras.layers.LayerNormalization(axis=[-2, -1], epsilon=1e-6)
    y = np.array(ln(x))
    mod = ns["LazyLayerNorm"](eps=1e-6, axes=2)
    opt = torch.optim.SGD(mod.parameters(), lr=0.1)  # created before the first call, as users write it
    mod.load_state_dict({"weight": torch.tensor(np.array(ln.gamma)), "bias": torch.tensor(np.array(ln.beta))})
    got = mod(torch.tensor(x))
    assert type(mod).__name__ == "LayerNorm" and mod.normalized_shape == (3, 5)
    assert np.abs(got.detach().numpy() - y).max() < 1e-5
    got.sum().backward()
    opt.step()  # the optimizer holds the materialised parameters


# --- translations ---------------------------------------------------------------------------------------

TEXT_CLASSIFIER = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs, training=False):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        positions = tf.range(start=0, limit=tf.shape(x)[-1], delta=1)
        return self.token_emb(x) + self.pos_emb(positions)


def build_model(maxlen=12, vocab_size=50, embed_dim=8):
    inputs = layers.Input(shape=(maxlen,))
    x = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)(inputs)
    x = TransformerBlock(embed_dim, 2, 16)(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs)
'''


def test_transformer_text_classifier_translates_keeps_its_layout_and_verifies(session, tmp_path):
    r, cert = _verify(session, tmp_path, TEXT_CLASSIFIER, "build_model", ["int64[2,12]:50"])
    out = r.output
    # key_dim × num_heads (16) is not the embedding size (8): Keras's projections, not nn.MultiheadAttention's
    assert "self.att = KerasMultiHeadAttention(num_heads, embed_dim)" in out
    assert "self.layernorm1 = LazyLayerNorm(eps=1e-6)" in out
    # no convolution: the model keeps (batch, steps, features); only the pooling sees a permuted input
    assert "x = self.gap(x.movedim(-1, 1))" in out
    assert "movedim(-1, 1)" not in out.split("x = self.gap")[0].split("class BuildModel")[-1]
    assert "attn_output = self.att(inputs, inputs)" in out
    assert "tensorflow" not in out and "import keras" not in out and "tf." not in out


ENCODER = '''
from tensorflow import keras
from tensorflow.keras import layers


def transformer_encoder(inputs, head_size, num_heads, ff_dim):
    x = layers.MultiHeadAttention(key_dim=head_size, num_heads=num_heads, dropout=0.1)(inputs, inputs)
    x = layers.Dropout(0.1)(x)
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    res = x + inputs
    x = layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
    x = layers.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x)
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    return x + res


def build_model(steps=9, features=4):
    inputs = keras.Input(shape=(steps, features))
    mask = keras.Input(shape=(steps, steps))
    x = transformer_encoder(inputs, 8, 2, 6)
    x = layers.MultiHeadAttention(num_heads=2, key_dim=2, value_dim=3, output_shape=5, use_bias=False)(
        x, x, attention_mask=mask, use_causal_mask=True, training=False)
    x = layers.GlobalAveragePooling1D(data_format="channels_last")(x)
    return keras.Model([inputs, mask], layers.Dense(3)(x))
'''


def test_encoder_block_with_conv1d_feed_forward_and_masks_verifies(session, tmp_path):
    """A Conv1D(kernel_size=1) feed-forward in a transformer: the model keeps Keras's layout (attention
    and LayerNorm act on the last axis) and the convolutions are called on permuted inputs."""
    r, cert = _verify(session, tmp_path, ENCODER, "build_model", ["float32[2,9,4]", "int64[2,9,9]:2"])
    out = r.output
    assert "self.conv1(res.movedim(-1, 1))" in out and ".movedim(1, -1)" in out
    assert "attention_mask=mask, use_causal_mask=True)" in out and "training" not in out
    assert "KerasMultiHeadAttention(2, 2, value_dim=3, use_bias=False, output_shape=5)" in out
    # the feature size of the helper's input is a parameter of its class, given by the builder
    assert "self.transformer_encoder = TransformerEncoder(features)" in out
    assert "self.conv2 = nn.Conv1d(6, features, 1)" in out


def test_model_without_convolutions_is_not_made_channels_first(session, tmp_path):
    src = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    inputs = keras.Input((10,))
    x = layers.Embedding(30, 6)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.GlobalMaxPooling1D()(x)
    return keras.Model(inputs, layers.Dense(2)(x))
'''
    r, _ = _verify(session, tmp_path, src, "build_model", ["int64[3,10]:30"], checks=("forward",))
    assert "x = self.embedding(inputs)\n" in r.output  # not moved to channels-first after the embedding
    assert "self.bn(x.movedim(-1, 1)).movedim(1, -1)" in r.output


def test_attention_refusals_name_the_argument():
    r = tx('''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    inputs = keras.Input((10, 4))
    both = layers.MultiHeadAttention(2, 4)(inputs, inputs, return_attention_scores=True)
    return keras.Model(inputs, both[0])
''')
    errs = errors(r)  # (unpacked where it is called, x, scores = ..., it is followed: test_functional_user_tuples)
    assert any("return_attention_scores=True" in e for e in errs), errs
    r = tx('''
from tensorflow.keras import layers

att = layers.MultiHeadAttention(2, 4, output_shape=(3, 5))
''')
    assert any("output_shape=(3, 5)" in e for e in errors(r)), errors(r)
    r = tx('''
from tensorflow.keras import layers

norm = layers.LayerNormalization(axis=1)
''')
    assert any("axis 1" in e for e in errors(r)), errors(r)


GPT_STYLE = '''
import tensorflow as tf
from tensorflow import keras

zeros_init = keras.initializers.Zeros()
ones_init = keras.initializers.Ones()


class LayerNorm(keras.layers.Layer):
    def __init__(self, n_state, e=1e-5):
        super().__init__()
        self.g = self.add_weight(shape=[n_state], initializer=ones_init)
        self.b = self.add_weight(shape=[n_state], initializer=zeros_init)
        self.e = e

    def call(self, x):
        u = tf.reduce_mean(x, -1, keepdims=True)
        s = tf.reduce_mean(tf.pow(x - u, 2), -1, keepdims=True)
        return self.g * (x - u) / tf.sqrt(s + self.e) + self.b


class Block(keras.layers.Layer):
    def __init__(self, n_ctx=6, n_embd=8):
        super().__init__()
        self.mask = self.add_weight(shape=[1, n_ctx, n_ctx], initializer=ones_init, trainable=False)
        self.mask.assign(tf.linalg.LinearOperatorLowerTriangular(self.mask).to_dense())
        self.embed = keras.layers.Embedding(50, n_embd)
        self.embed.build([1])
        self.ln = LayerNorm(n_embd)
        self.head = keras.layers.Dense(3, input_shape=[n_embd])
        self.head.build([n_embd])
        self.drop = keras.layers.Dropout(0.3, noise_shape=[1, n_ctx, 1])

    def call(self, x):
        h = self.ln(self.embed(x))
        w = tf.matmul(h, h, transpose_b=True) / tf.sqrt(tf.cast(h.shape[-1], tf.float32))
        w = w * self.mask + -1e9 * (1 - self.mask)
        h = tf.matmul(tf.nn.softmax(w, -1), h)
        return self.head(self.drop(h))
'''


def test_gpt_style_subclass_pieces_translate_and_verify(session, tmp_path):
    r, _ = _verify(session, tmp_path, GPT_STYLE, "Block", ["int64[2,6]:50"])
    out = r.output
    assert "zeros_init = nn.init.zeros_" in out and "nn.Parameter(torch.ones(1, n_ctx, n_ctx)" in out
    assert "self.mask.data.copy_(torch.tril(self.mask).to_dense())" in out
    assert "# self.embed.build([1])" in out and "self.head = nn.Linear(n_embd, 3)" in out
    assert "self.drop = SharedDropout(0.3, [1, n_ctx, 1])" in out
    assert "torch.tensor(h.shape[-1]).to(torch.float32)" in out


def test_shared_dropout_mask_is_shared_along_the_axes_of_size_one():
    import torch
    ns = {"torch": torch, "nn": torch.nn}
    exec(HELPERS["SharedDropout"].replace("{nn}", "nn.").replace("{torch}", "torch."), ns)
    drop = ns["SharedDropout"](0.5, (None, 1, 4))
    y = drop(torch.ones(3, 7, 4))
    assert set(torch.unique(y).tolist()) <= {0.0, 2.0}
    assert torch.equal(y, y[:, :1].expand(3, 7, 4))  # the same mask at every step
    drop.eval()
    assert torch.equal(drop(torch.ones(3, 7, 4)), torch.ones(3, 7, 4))


TS_TRANSFORMER = '''
from tensorflow import keras
from tensorflow.keras import layers

n_classes = 2


def transformer_encoder(inputs, head_size, num_heads, ff_dim, dropout=0):
    x = layers.MultiHeadAttention(key_dim=head_size, num_heads=num_heads, dropout=dropout)(inputs, inputs)
    x = layers.Dropout(dropout)(x)
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    res = x + inputs
    x = layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
    x = layers.Dropout(dropout)(x)
    x = layers.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x)
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    return x + res


def build_model(input_shape, head_size, num_heads, ff_dim, num_transformer_blocks, mlp_units, dropout=0,
                mlp_dropout=0):
    inputs = keras.Input(shape=input_shape)
    x = inputs
    for _ in range(num_transformer_blocks):
        x = transformer_encoder(x, head_size, num_heads, ff_dim, dropout)
    x = layers.GlobalAveragePooling1D(data_format="channels_first")(x)
    for dim in mlp_units:
        x = layers.Dense(dim, activation="relu")(x)
        x = layers.Dropout(mlp_dropout)(x)
    outputs = layers.Dense(n_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs)
'''


def test_loops_over_builder_parameters_become_module_lists_and_compute_like_keras():
    """The keras.io time-series transformer: ``for _ in range(num_transformer_blocks)`` and ``for dim in
    mlp_units`` over the builder's parameters. The layers' weights are moved by hand here, in creation order
    (fwport verify's own map of them, by the order of calls, is tests/test_functional_loops.py)."""
    keras = pytest.importorskip("keras")
    import torch
    r = tx(TS_TRANSFORMER)
    assert not errors(r), errors(r)
    out = r.output
    assert "for _ in range(num_transformer_blocks):\n            self.transformer_encoder.append(" in out
    assert "TransformerEncoder(head_size, num_heads, ff_dim, dropout, inputs_size2)" not in out
    assert "for fc1, dropout_ in zip(self.fc1, self.dropout):" in out and "self.fc1.append(nn.LazyLinear(dim))" in out
    assert "x = self.gap(x)" in out  # channels_first pooling: over the last axis, no permute
    ns_k, ns_t = {}, {}
    exec(compile(TS_TRANSFORMER, "ts.py", "exec"), ns_k)
    exec(compile(out, "ts_torch.py", "exec"), ns_t)
    args = dict(input_shape=(7, 3), head_size=4, num_heads=2, ff_dim=5, num_transformer_blocks=2, mlp_units=[6, 4],
                dropout=0.1, mlp_dropout=0.2)
    km, tm = ns_k["build_model"](**args), ns_t["build_model"](**args)
    x = np.random.default_rng(3).normal(size=(2, 7, 3)).astype("float32")
    tm.eval()
    tm(torch.tensor(x))  # the lazy layers take their sizes
    kw, tp = list(km.weights), list(tm.parameters())
    assert len(kw) == len(tp)
    with torch.no_grad():
        for k, p in zip(kw, tp):
            a = np.array(k)
            if a.shape != tuple(p.shape):
                a = a.transpose(2, 1, 0) if a.ndim == 3 else a.T  # Conv1D (1, in, out), Dense (in, out)
            p.copy_(torch.tensor(a))
    got = tm(torch.tensor(x)).detach().numpy()
    assert np.abs(got - np.array(km(x, training=False))).max() < 1e-5


KERAS3_DECODER = '''
import keras
from keras import layers


class TransformerDecoder(keras.Layer):
    def __init__(self, hidden_dim, intermediate_dim, num_heads):
        super().__init__()
        key_dim = hidden_dim // num_heads
        self.self_attention = layers.MultiHeadAttention(num_heads, key_dim)
        self.self_attention_layernorm = layers.LayerNormalization()
        self.cross_attention = layers.MultiHeadAttention(num_heads, key_dim)
        self.cross_attention_layernorm = layers.LayerNormalization()
        self.feed_forward_1 = layers.Dense(intermediate_dim, activation="relu")
        self.feed_forward_2 = layers.Dense(hidden_dim)
        self.feed_forward_layernorm = layers.LayerNormalization()

    def call(self, target, source, source_mask):
        residual = x = target
        x = self.self_attention(query=x, key=x, value=x, use_causal_mask=True)
        x = self.self_attention_layernorm(x + residual)
        residual = x
        mask = source_mask[:, None, :]
        x = self.cross_attention(query=x, key=source, value=source, attention_mask=mask)
        x = self.cross_attention_layernorm(x + residual)
        residual = x
        x = self.feed_forward_2(self.feed_forward_1(x))
        return self.feed_forward_layernorm(x + residual)
'''


def test_keras3_decoder_with_keyword_calls_causal_and_padding_masks_verifies(session, tmp_path):
    """Keras 3 code (keras.Layer, keyword query/key/value, a padding mask broadcast over the queries): the
    forward pass, the gradients and one optimizer step equal Keras's."""
    r, _ = _verify(session, tmp_path, KERAS3_DECODER, "TransformerDecoder",
                   ["float32[2,7,16]", "float32[2,5,16]", "int64[2,5]:2"], checks=("forward", "grad", "step"),
                   args={"hidden_dim": 16, "intermediate_dim": 24, "num_heads": 2})
    assert "x = self.cross_attention(query=x, key=source, value=source, attention_mask=mask)" in r.output


DOT_ATTENTION = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    query = keras.Input(shape=(5, 6))
    value = keras.Input(shape=(7, 6))
    value_mask = keras.Input(shape=(7,))
    x = layers.Attention(use_scale=True)([query, value], mask=[None, value_mask], use_causal_mask=True)
    y = layers.AdditiveAttention()([query, value, value], mask=[None, value_mask])
    return keras.Model([query, value, value_mask], layers.Dense(3)(x + y))
'''


def test_dot_product_attention_layer_verifies(session, tmp_path):
    """keras.layers.Attention: no 1/sqrt(d), a learned scale, a value mask and a causal mask; AdditiveAttention's
    scale vector sized by its first call."""
    r, _ = _verify(session, tmp_path, DOT_ATTENTION, "build_model",
                   ["float32[2,5,6]", "float32[2,7,6]", "int64[2,7]:2"], checks=("forward", "grad"))
    assert "([query, value], mask=[None, value_mask], use_causal_mask=True)" in r.output
    assert "KerasAttention(use_scale=True)" in r.output and "KerasAttention(use_scale=True, additive=True)" in r.output
