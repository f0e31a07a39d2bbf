"""Keras's mask in functional models (fwport/packs/tf2torch/masks.py): an Embedding(mask_zero=True)'s mask
(ids != 0) carried through the layers that pass it on to the recurrent layers that read it (Masked<kind>
helpers, called with mask=), each model checked against Keras (TensorFlow in one subprocess, torch in
another) on right-padded ids of several lengths, the weights moved by the rules' maps; what reads the mask
in a way not translated stays refused."""
from __future__ import annotations

import numpy as np
import pytest

from conv_numerics import assert_close
from test_layers_more import compare, errors, tx

MODELS = '''
from tensorflow import keras
from tensorflow.keras import layers, ops


class PositionalEmbedding(layers.Layer):  # its compute_mask attaches ids != 0 to its output
    def __init__(self, sequence_length, vocab_size, embed_dim):
        super().__init__()
        self.token_embeddings = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.position_embeddings = layers.Embedding(input_dim=sequence_length, output_dim=embed_dim)

    def call(self, inputs):
        positions = ops.arange(0, ops.shape(inputs)[-1], 1)
        return self.token_embeddings(inputs) + self.position_embeddings(positions)

    def compute_mask(self, inputs, mask=None):
        return ops.not_equal(inputs, 0)


class TransformerEncoder(layers.Layer):  # reads the mask Keras gives its call() and passes it on
    def __init__(self, embed_dim, dense_dim, num_heads):
        super().__init__()
        self.attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.dense_proj = keras.Sequential([layers.Dense(dense_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm_1 = layers.LayerNormalization()
        self.layernorm_2 = layers.LayerNormalization()
        self.supports_masking = True

    def call(self, inputs, mask=None):
        padding_mask = None
        if mask is not None:
            padding_mask = ops.cast(mask[:, None, :], dtype="int32")
        attention_output = self.attention(query=inputs, value=inputs, key=inputs, attention_mask=padding_mask)
        proj_input = self.layernorm_1(inputs + attention_output)
        return self.layernorm_2(proj_input + self.dense_proj(proj_input))


class Gate(layers.Layer):  # called on two tensors: Keras 3 gives its call() no mask, its output the first's
    def __init__(self):
        super().__init__()
        self.supports_masking = True

    def call(self, inputs, context, mask=None):
        if mask is not None:
            return inputs * ops.cast(mask, "float32")[:, :, None] + context
        return inputs + context


def gated():
    ids = keras.Input(shape=(None,), dtype="int32")
    x = PositionalEmbedding(7, 20, 4)(ids)
    x = Gate()(x, x)
    return keras.Model(ids, layers.GRU(3)(x))


class FramePositions(layers.Layer):  # its compute_mask: the frames with a nonzero feature
    def __init__(self, frames, dim):
        super().__init__()
        self.position_embeddings = layers.Embedding(input_dim=frames, output_dim=dim)

    def call(self, inputs):
        return inputs + self.position_embeddings(ops.arange(0, ops.shape(inputs)[1], 1))

    def compute_mask(self, inputs, mask=None):  # (tf.reduce_any(tf.cast(...)) in tf.keras code)
        mask = ops.any(ops.cast(inputs, "bool"), axis=-1)
        return mask


def frames():
    features = keras.Input(shape=(None, 8))
    x = FramePositions(7, 8)(features)
    x = TransformerEncoder(8, 16, 2)(x)
    return keras.Model(features, layers.GRU(3)(x))


def transformer():
    ids = keras.Input(shape=(None,), dtype="int32")
    x = PositionalEmbedding(7, 20, 8)(ids)
    x = TransformerEncoder(8, 16, 2)(x)
    x = layers.LSTM(3)(x)  # the mask carried through the encoder
    return keras.Model(ids, layers.Dense(2)(x))


def seq2seq():
    source = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(source)
    encoder_output = layers.Bidirectional(layers.GRU(5), merge_mode="sum")(x)
    target = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(target)
    x = layers.GRU(5, return_sequences=True)(x, initial_state=encoder_output)
    x = layers.Dropout(0.5)(x)
    return keras.Model([source, target], layers.Dense(3, activation="softmax")(x))


def stacked():
    ids = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(ids)
    x = layers.Dense(6, activation="relu")(x)
    x = layers.Bidirectional(layers.LSTM(5, return_sequences=True))(x)
    x = layers.SimpleRNN(3)(x)
    return keras.Model(ids, layers.Dense(2)(x))


def lstm_sequences():
    ids = keras.Input(shape=(7,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(ids)
    x = layers.LSTM(3, return_sequences=True)(x)
    h = layers.LSTM(2)(x)
    c = layers.Dense(2)(h)
    y = layers.LSTM(2, return_sequences=True)(x, initial_state=[h, c])
    return keras.Model(ids, layers.LayerNormalization()(y))


def rebound():  # the wrapped layer bound to the name the wrapper rebinds (deep-learning-with-python's seq2seq)
    ids = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(ids)
    rnn_layer = layers.GRU(5)
    rnn_layer = layers.Bidirectional(rnn_layer, merge_mode="sum")
    return keras.Model(ids, rnn_layer(x))


EMBED = 4  # rebound below: a size not known where the model is translated (the recurrent layer sizes itself)


def lazy_size():
    ids = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(20, EMBED, mask_zero=True)(ids)
    return keras.Model(ids, layers.Bidirectional(layers.LSTM(3))(x))


EMBED = 6


def bidirectional_sequences():
    ids = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(ids)
    return keras.Model(ids, layers.Bidirectional(layers.SimpleRNN(3, return_sequences=True), merge_mode="ave")(x))
'''

# right-padded ids of several lengths (one full row, one of a single step)
IDS = np.array([[3, 5, 2, 7, 0, 0, 0], [4, 1, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6, 7], [9, 0, 0, 0, 0, 0, 0]], "int32")
# frames of 8 features, the ones after each sequence's length all zeros (IDS's lengths)
FRAMES = (np.random.default_rng(0).standard_normal((4, 7, 8)) * (IDS != 0)[..., None]).astype("float32")
TARGET = np.array([[2, 2, 0, 0, 0], [4, 1, 3, 8, 0], [1, 0, 0, 0, 0], [6, 5, 4, 3, 2]], "int32")


@pytest.fixture(scope="module")
def models():
    return tx(MODELS)


def _records(r, scope: str):
    return [rec for rec in r.layers if rec.scope == scope]


def test_masked_functional_models_translate_with_the_mask_passed(models):
    _, r = models
    assert errors(r) == [], errors(r)
    out = r.output
    assert "MaskedGRU(5, 4, merge_mode=\"sum\", bidirectional=True)" in out
    # Keras 3 gives a layer called with initial_state= no mask: the decoder's GRU runs over every step
    assert "self.gru(x, initial_state=encoder_output)" in out and "LazyGRU(5, 4, return_sequences=True)" in out
    assert "x = self.simple_rnn(x, mask=ids != 0)" in out  # carried through Dense and the sequences
    assert "class MaskedLSTM(LazyLSTM):" in out and "def _packed_steps(x, keep):" in out
    assert out.count("def _packed_steps(") == 1
    assert "MaskedLSTM(3, bidirectional=True)" in out  # its input size taken at the first call
    assert "x = self.transformer_encoder(x, mask=ids != 0)" in out and "def forward(self, inputs, mask=None):" in out
    kept = [f.message for f in r.findings if "call()'s mask is kept" in f.message]
    assert "x = self.transformer_encoder(x, mask=(features != 0).any(dim=-1))" in out
    assert "x = self.gate(x, x)" in out  # Keras 3: no mask for a call on two tensors
    assert len(kept) == 2 and "every call of this layer is in a functional model" in kept[0], kept
    assert "self.rnn_layer = MaskedGRU(5, 4, merge_mode=\"sum\", bidirectional=True)" in out
    warned = [f.message for f in r.findings if f.code == "loss-mask"]
    # seq2seq, lstm_sequences and bidirectional_sequences return sequences that carry the mask; stacked does not
    assert len(warned) == 3 and "(target != 0)" in warned[0], warned


@pytest.mark.parametrize("model", ["seq2seq", "stacked", "lstm_sequences", "rebound", "lazy_size",
                                   "bidirectional_sequences", "transformer", "gated", "frames"])
def test_masked_functional_models_match_keras_on_right_padded_ids(models, model):
    src, r = models
    xs = [IDS, TARGET] if model == "seq2seq" else [FRAMES] if model == "frames" else [IDS]
    k, t = compare(src, r.output, _records(r, model), f"{model}()", xs)
    assert_close(k, t, rtol=1e-5)
    if model == "seq2seq":  # Keras 3 does not mask the decoder's GRU (called with initial_state=)
        assert np.abs(k[2, 1:] - k[2, 0]).max() > 1e-3
    if model == "bidirectional_sequences":  # and zeros under Bidirectional
        assert np.abs(k[1, 2:]).max() == 0 and np.abs(k[1, :2]).max() > 1e-3


def test_a_left_padded_mask_is_an_error_at_run_time(models):
    src, r = models
    with pytest.raises(AssertionError, match="a mask with gaps or left padding"):
        compare(src, r.output, _records(r, "stacked"), "stacked()", [np.array([[0, 3, 4, 0, 0, 0]], "int32")])


@pytest.mark.parametrize("body, said", [
    # a layer that may read the mask (a masked average) after the embedding or after the recurrent sequence
    ("x = layers.GlobalAveragePooling1D()(x)", "receives the Keras mask (ids != 0)"),
    ("x = layers.GRU(3, return_sequences=True)(x)\n        x = layers.GlobalAveragePooling1D()(x)",
     "receives the Keras mask (ids != 0)"),
    # (the wrapped layer still bound to a name after the wrapper is the wrapper's copy of it: translated as the
    # inline form, test_functional_left_causes)
    # a merge combines the masks of its inputs
    ("x = layers.Add()([x, x])", "receives the Keras mask"),
    # the final states of a masked run
    ("x, h = layers.GRU(3, return_state=True)(x)", "return_state=True on a sequence that carries Keras's mask"),
])
def test_what_reads_the_mask_otherwise_stays_refused(body, said):
    _, r = tx(f'''
        from tensorflow import keras
        from tensorflow.keras import layers

        ids = keras.Input(shape=(6,), dtype="int32")
        x = layers.Embedding(20, 4, mask_zero=True)(ids)
        {body}
        model = keras.Model(ids, x)
    ''')
    assert any(said in e for e in errors(r)), errors(r)


KERAS2 = '''
# fwport: keras=2
from tensorflow import keras
from tensorflow.keras import layers


def decoder():
    source = keras.Input(shape=(None,), dtype="int32")
    state = layers.GRU(5)(layers.Embedding(20, 4, mask_zero=True)(source))
    target = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(20, 4, mask_zero=True)(target)
    return keras.Model([source, target], layers.GRU(5, return_sequences=True)(x, initial_state=state))
'''


def test_keras2_masks_a_recurrent_layer_called_with_initial_state(monkeypatch):
    """Keras 2 gives the layer its input's mask whatever else the call passes (Keras 3 does not, above)."""
    src, r = tx(KERAS2)
    assert errors(r) == [], errors(r)
    assert "self.gru2(x, mask=target != 0, initial_state=state)" in r.output, r.output
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")  # tensorflow.keras is tf_keras (Keras 2)
    k, t = compare(src, r.output, _records(r, "decoder"), "decoder()", [IDS, TARGET])
    assert_close(k, t, rtol=1e-5)
    assert np.abs(k[2, 1:] - k[2, 0]).max() < 1e-6  # the output held over the masked steps


def test_a_layer_class_reading_the_mask_used_outside_functional_models_stays_refused():
    src = MODELS + "\n\nclass Stack(keras.Model):\n    def __init__(self):\n        super().__init__()\n" \
                   "        self.encoder = TransformerEncoder(8, 16, 2)\n\n    def call(self, x):\n" \
                   "        return self.encoder(x)\n"
    _, r = tx(src)
    assert any("call() uses a Keras mask" in e for e in errors(r)), errors(r)


def test_a_tf_keras_compute_mask_of_nonzero_frames_is_read():
    """tf.keras code (video_transformers) writes the frames' mask with tf ops, as ops.any above."""
    src = MODELS.replace('ops.any(ops.cast(inputs, "bool"), axis=-1)', 'tf.reduce_any(tf.cast(inputs, "bool"), axis=-1)')
    _, r = tx("import tensorflow as tf\n" + src)
    assert errors(r) == [], errors(r)
    assert "x = self.transformer_encoder(x, mask=(features != 0).any(dim=-1))" in r.output
