"""Every rule with a weight map, checked numerically: a tiny model per map (and per variant), all
translated from one file and verified in ONE Keras and ONE torch subprocess (a warm Session)."""
from __future__ import annotations

import pytest

from fwport.core.rule import load_pack
from fwport.core.pipeline import translate_source
from fwport.verify import Options, verify
from runners import Warm

CASES_SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers


def dense():
    return keras.Sequential([keras.Input(shape=(6,)), layers.Dense(5)])


def random_fourier_features():  # Keras 2 alone has it: the case is translated and verified as Keras 2
    return keras.Sequential([keras.Input(shape=(6,)),
                             layers.experimental.RandomFourierFeatures(8, scale=3.0, trainable=True), layers.Dense(2)])


def dense_on_a_sequence_map():  # a Dense on a channels-first map: a 1-wide convolution (lay19)
    return keras.Sequential([keras.Input(shape=(7, 3)), layers.Conv1D(4, 2), layers.Dense(5)])


def dense_on_an_image_map():
    return keras.Sequential([keras.Input(shape=(5, 4, 3)), layers.Conv2D(4, (2, 1)), layers.Dense(5)])


def dense_on_a_volume_map():
    return keras.Sequential([keras.Input(shape=(3, 4, 2, 3)), layers.Conv3D(4, 2), layers.Dense(5)])


def dense_after_flatten():
    return keras.Sequential([keras.Input(shape=(4, 3, 2)), layers.Conv2D(3, (2, 1)), layers.Flatten(), layers.Dense(5)])


def dense_before_unflatten():
    return keras.Sequential([keras.Input(shape=(6,)), layers.Dense(24), layers.Reshape((2, 4, 3)), layers.Conv2D(2, (1, 2))])


def conv1d():
    return keras.Sequential([keras.Input(shape=(9, 3)), layers.Conv1D(4, 3, strides=2, padding="same")])


def conv2d():
    return keras.Sequential([keras.Input(shape=(7, 6, 3)), layers.Conv2D(4, (3, 2), strides=2, padding="same")])


def batch_normalization():
    return keras.Sequential([keras.Input(shape=(5, 4, 3)), layers.BatchNormalization(momentum=0.9, epsilon=1e-4)])


def batch_normalization_after_flatten():
    return keras.Sequential([keras.Input(shape=(4, 3, 2)), layers.Conv2D(3, (2, 1)), layers.Flatten(),
                             layers.BatchNormalization(), layers.Dense(5)])


def conv1d_transpose():
    return keras.Sequential([keras.Input(shape=(7, 3)), layers.Conv1DTranspose(4, 4, strides=2, padding="same")])


def conv2d_transpose():
    return keras.Sequential([keras.Input(shape=(5, 4, 3)), layers.Conv2DTranspose(4, (3, 2), strides=2, padding="same")])


def conv3d_transpose():
    return keras.Sequential([keras.Input(shape=(3, 4, 2, 3)), layers.Conv3DTranspose(4, (3, 2, 2), strides=2, padding="same")])


def depthwise_conv2d():
    return keras.Sequential([keras.Input(shape=(7, 6, 3)), layers.DepthwiseConv2D((3, 2), depth_multiplier=2)])


def depthwise_conv2d_sized(k=(3, 2)):  # a kernel size known when the model is built: a map without sizes
    inputs = keras.Input(shape=(7, 6, 3))
    return keras.Model(inputs, layers.DepthwiseConv2D(k, padding="same")(inputs))


def separable_conv2d():
    return keras.Sequential([keras.Input(shape=(7, 6, 3)),
                             layers.SeparableConv2D(5, (3, 2), strides=2, padding="same", depth_multiplier=2)])


def separable_conv1d():
    return keras.Sequential([keras.Input(shape=(9, 3)), layers.SeparableConv1D(5, 3, strides=2, padding="same", depth_multiplier=2)])


def lstm():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.LSTM(5, return_sequences=True)])


def gru():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.GRU(5)])


def simple_rnn():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.SimpleRNN(4, return_sequences=True)])


def bidirectional_lstm():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.Bidirectional(layers.LSTM(4, return_sequences=True))])


def bidirectional_gru():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.Bidirectional(layers.GRU(4), merge_mode="mul")])


def bidirectional_rnn():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.Bidirectional(layers.SimpleRNN(4), merge_mode="sum")])


def conv3d():
    return keras.Sequential([keras.Input(shape=(5, 4, 6, 2)), layers.Conv3D(3, (3, 2, 2), strides=2, padding="same")])


def normalization():
    return keras.Sequential([keras.Input(shape=(3, 4)), layers.Normalization(), layers.Dense(2)])


def embedding():
    return keras.Sequential([keras.Input(shape=(7,), dtype="int32"), layers.Embedding(20, 4)])


def layer_normalization():
    return keras.Sequential([keras.Input(shape=(5, 6)), layers.LayerNormalization()])


def group_norm():
    return keras.Sequential([keras.Input(shape=(6, 5, 4)), layers.GroupNormalization(groups=2, epsilon=1e-3)])


def prelu():
    return keras.Sequential([keras.Input(shape=(4, 5)), layers.PReLU(shared_axes=[1])])


def rnn_of_lstm_cell():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.RNN(layers.LSTMCell(5), return_sequences=True)])


def rnn_of_gru_cell():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.RNN(layers.GRUCell(5))])


def rnn_of_simple_rnn_cell():
    return keras.Sequential([layers.RNN(layers.SimpleRNNCell(4, activation="relu"))])  # built on the first call


class LSTMCellNet(keras.Model):  # a cell unrolled by hand, its input size known at the first call
    def __init__(self):
        super().__init__()
        self.cell = layers.LSTMCell(5)

    def call(self, x, h, c):
        state = [h, c]
        for t in range(x.shape[1]):
            out, state = self.cell(x[:, t], state)
        return out + state[1]


class GRUCellNet(keras.Model):
    def __init__(self):
        super().__init__()
        self.cell = layers.GRUCell(5)

    def call(self, x, h):
        for t in range(x.shape[1]):
            out, h = self.cell(x[:, t], h)
        return out


class SimpleRNNCellNet(keras.Model):
    def __init__(self):
        super().__init__()
        self.cell = layers.SimpleRNNCell(5)

    def call(self, x, h):
        state = [h]
        for t in range(x.shape[1]):
            out, state = self.cell(x[:, t], state)
        return out


def multi_head_attention():
    query = keras.Input(shape=(5, 6))
    context = keras.Input(shape=(4, 3))
    x = layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4)(query, context)
    return keras.Model([query, context], x)


def dot_attention():
    query = keras.Input(shape=(5, 6))
    value = keras.Input(shape=(4, 6))
    return keras.Model([query, value], layers.Attention(use_scale=True)([query, value]))


def additive_attention():
    query = keras.Input(shape=(5, 6))
    value = keras.Input(shape=(4, 6))
    return keras.Model([query, value], layers.AdditiveAttention()([query, value]))


def einsum_dense():
    return keras.Sequential([keras.Input(shape=(5, 6)),
                             layers.EinsumDense("abc,cde->abde", output_shape=(None, 2, 4), bias_axes="de")])


def rms_normalization():
    return keras.Sequential([keras.Input(shape=(5, 8)), layers.RMSNormalization(epsilon=1e-3)])


def td_dense():
    return keras.Sequential([keras.Input(shape=(4, 6)), layers.TimeDistributed(layers.Dense(3, activation="tanh"))])


def td_conv1d():
    return keras.Sequential([keras.Input(shape=(3, 7, 2)), layers.TimeDistributed(layers.Conv1D(4, 3))])


def td_conv2d():
    return keras.Sequential([keras.Input(shape=(3, 6, 5, 2)),
                             layers.TimeDistributed(layers.Conv2D(4, 3, strides=2, padding="same"))])


def td_layer_norm():
    return keras.Sequential([keras.Input(shape=(3, 5)), layers.TimeDistributed(layers.LayerNormalization())])


def td_embedding():
    return keras.Sequential([keras.Input(shape=(3, 7), dtype="int32"), layers.TimeDistributed(layers.Embedding(20, 4))])


class UntiedLM(keras.Model):  # both tables: the embeddings and the reverse projection
    def __init__(self):
        super().__init__()
        self.embed = layers.ReversibleEmbedding(30, 8, tie_weights=False, logit_soft_cap=5.0)

    def call(self, ids):
        return self.embed(self.embed(ids), reverse=True)


class Scale(keras.Model):
    def __init__(self, n=5):
        super().__init__()
        self.w = self.add_weight(shape=(n,), initializer="ones")

    def call(self, x):
        return x * self.w
'''

# (rule id, weight-map variant) → (model name, input specs or None for the declared ones, checks)
CASES = {
    ("dense", None): ("dense", None, ("forward", "grad", "step")),
    ("dense", "after-flatten"): ("dense_after_flatten", None, ("forward", "grad", "step")),
    ("dense", "channels-first-1d"): ("dense_on_a_sequence_map", None, ("forward", "grad", "step")),
    ("dense", "channels-first-2d"): ("dense_on_an_image_map", None, ("forward", "grad", "step")),
    ("dense", "channels-first-3d"): ("dense_on_a_volume_map", None, ("forward", "grad", "step")),
    ("dense", "before-unflatten"): ("dense_before_unflatten", None, ("forward", "grad", "step")),
    ("conv1d", None): ("conv1d", None, ("forward", "grad", "step")),
    ("conv2d", None): ("conv2d", None, ("forward", "grad", "step")),
    ("conv3d", None): ("conv3d", None, ("forward", "grad", "step")),
    ("normalization", None): ("normalization", None, ("forward", "grad", "step")),
    ("batch-normalization", None): ("batch_normalization", None, ("forward", "grad", "step")),
    ("batch-normalization", "after-flatten"): ("batch_normalization_after_flatten", None, ("forward", "grad", "step")),
    ("embedding", None): ("embedding", ["int32[3,7]:20"], ("forward", "grad", "step")),
    ("layer-normalization", None): ("layer_normalization", None, ("forward", "grad", "step")),
    ("prelu", None): ("prelu", None, ("forward", "grad", "step")),
    ("conv1d-transpose", None): ("conv1d_transpose", None, ("forward", "grad", "step")),
    ("conv2d-transpose", None): ("conv2d_transpose", None, ("forward", "grad", "step")),
    ("depthwise-conv2d", None): ("depthwise_conv2d", None, ("forward", "grad", "step")),
    ("depthwise-conv2d", "keras2"): ("depthwise_conv2d", None, ("forward", "grad"), 2),  # translated as Keras 2
    ("depthwise-conv2d", "dm1"): ("depthwise_conv2d_sized", None, ("forward", "grad", "step")),
    ("depthwise-conv2d", "keras2-dm1"): ("depthwise_conv2d_sized", None, ("forward", "grad"), 2),
    ("separable-conv2d", None): ("separable_conv2d", None, ("forward", "grad", "step")),
    ("conv3d-transpose", None): ("conv3d_transpose", None, ("forward", "grad", "step")),
    ("separable-conv1d", None): ("separable_conv1d", None, ("forward", "grad", "step")),
    ("random-fourier-features", None): ("random_fourier_features", None, ("forward", "grad", "step"), 2),
    # the second torch bias is held at zero: no step check (an optimizer moves it, Keras has none)
    ("lstm", None): ("lstm", None, ("forward", "grad")),
    ("gru", None): ("gru", None, ("forward", "grad", "step")),
    ("simple-rnn", None): ("simple_rnn", None, ("forward", "grad")),
    ("bidirectional", "lstm"): ("bidirectional_lstm", None, ("forward", "grad")),
    ("bidirectional", "gru"): ("bidirectional_gru", None, ("forward", "grad", "step")),
    ("bidirectional", "rnn"): ("bidirectional_rnn", None, ("forward", "grad")),
    ("einsum-dense", None): ("einsum_dense", None, ("forward", "grad", "step")),
    ("rms-normalization", None): ("rms_normalization", None, ("forward", "grad", "step")),
    ("time-distributed", "dense"): ("td_dense", None, ("forward", "grad", "step")),
    ("time-distributed", "conv1d"): ("td_conv1d", None, ("forward", "grad", "step")),
    ("time-distributed", "conv2d"): ("td_conv2d", None, ("forward", "grad", "step")),
    ("time-distributed", "layer-normalization"): ("td_layer_norm", None, ("forward", "grad", "step")),
    ("time-distributed", "embedding"): ("td_embedding", ["int32[2,3,7]:20"], ("forward", "grad", "step")),
    ("reversible-embedding", None): ("UntiedLM", ["int32[2,5]:30"], ("forward", "grad", "step")),
    ("add-weight", None): ("Scale", ["float32[3,4,5]"], ("forward", "grad", "step")),
    ("group-normalization", None): ("group_norm", None, ("forward", "grad", "step")),
    ("rnn-layer", "lstm"): ("rnn_of_lstm_cell", None, ("forward", "grad")),
    ("rnn-layer", "gru"): ("rnn_of_gru_cell", None, ("forward", "grad", "step")),
    ("rnn-layer", "rnn"): ("rnn_of_simple_rnn_cell", ["float32[3,6,3]"], ("forward", "grad")),
    ("lstm-cell", None): ("LSTMCellNet", ["float32[3,4,2]", "float32[3,5]", "float32[3,5]"], ("forward", "grad")),
    ("gru-cell", None): ("GRUCellNet", ["float32[3,4,2]", "float32[3,5]"], ("forward", "grad", "step")),
    ("simple-rnn-cell", None): ("SimpleRNNCellNet", ["float32[3,4,2]", "float32[3,5]"], ("forward", "grad")),
    ("multi-head-attention", None): ("multi_head_attention", ["float32[2,5,6]", "float32[2,4,3]"],
                                     ("forward", "grad", "step")),
    ("attention", None): ("dot_attention", ["float32[2,5,6]", "float32[2,4,6]"], ("forward", "grad", "step")),
    ("additive-attention", None): ("additive_attention", ["float32[2,5,6]", "float32[2,4,6]"],
                                   ("forward", "grad", "step")),
}


def _maps():
    out = set()
    for r in load_pack("tf2torch").rules.values():
        for w in r.weights:
            out.add((r.id, w.when))
    return out


# weight maps verified numerically in another test file, with why (file, test function)
ELSEWHERE = {
    # TensorFlow Addons does not install beside TensorFlow 2.16+: the Keras side imports a stand-in written from
    # tfa's algorithm, itself checked against Keras 3's GroupNormalization there
    ("tfa-group-normalization", None): ("test_verify_mutations_lay20.py", "test_correct_translations_pass"),
    ("tfa-instance-normalization", None): ("test_verify_mutations_lay20.py", "test_correct_translations_pass"),
    # keras_hub is not installed here: the Keras side imports a stand-in written from keras_hub 0.32's layers
    **{(r, None): ("test_kerashub.py", "test_translations_verify_against_the_stand_in") for r in (
        "kerashub-token-and-position-embedding", "kerashub-transformer-encoder", "kerashub-transformer-decoder",
        "kerashub-fnet-encoder", "kerashub-position-embedding")},
    # a layer class's own tf.Variable (cait's LayerScale.gamma): verified forward, gradients and one SGD step
    # there, under Keras 3 (which does not train it: requires_grad=False) and Keras 2 (which does)
    ("variable", None): ("test_functional_user_tuples.py", "test_keras_3_does_not_train_a_layer_s_own_tf_variable",
                         'checks=("forward", "grad", "step")'),
}


def test_every_weight_map_has_a_numerical_case():
    missing = sorted(_maps() - set(CASES) - set(ELSEWHERE), key=str)
    assert not missing, f"rules with weight maps but no case in tests/test_rule_weights.py: {missing}"
    from pathlib import Path

    for key, (name, test, *checks) in ELSEWHERE.items():
        text = (Path(__file__).parent / name).read_text()
        assert key in _maps() and f"def {test}(" in text, (key, name, test)
        assert (checks[0] if checks else 'checks=("forward", "grad", "step")') in text, name


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    d = tmp_path_factory.mktemp("rule-weights")
    (d / "cases.py").write_text(CASES_SOURCE)
    results = {}
    for keras in (3, 2):  # a variant of Keras 2's variable names: the same source translated as Keras 2
        results[keras] = translate_source(CASES_SOURCE, "cases.py", None, {"keras": keras})
        (d / f"cases_torch{keras}.py").write_text(results[keras].output)
    certs = {}
    session = Warm.session()  # one subprocess per framework for every case
    for key, (model, inputs, checks, *keras) in CASES.items():
        keras = keras[0] if keras else 3
        certs[key] = (verify(Options(str(d / "cases.py"), str(d / f"cases_torch{keras}.py"), model,
                                     inputs=inputs or [], checks=checks, device="cpu",
                                     keras=keras if keras == 2 else None), session), results[keras])
    return certs


@pytest.mark.parametrize("key", sorted(CASES, key=str), ids=lambda k: f"{k[0]}-{k[1] or 'plain'}")
def test_weight_map_is_numerically_exact(certificates, key):
    cert, result = certificates[key]
    rule, variant = key
    model = CASES[key][0]
    used = {(r.rule, r.variant) for r in result.layers if r.scope == model}
    assert (rule, variant) in used, f"the case {model} no longer exercises {rule} ({variant}): {used}"
    assert cert["verdict"] == "pass", (cert.get("problems"), cert.get("first_diverging"))
    moved = {e["source"].rsplit(".", 1)[-1] for e in cert["results"]["gradients"]}
    assert moved, "no parameter was compared"
