"""keras.backend.ctc_batch_cost / keras.ops.ctc_loss → the ctc_batch_cost / ctc_loss helpers (F.ctc_loss), and
tf.signal.stft / inverse_stft / linear_to_mel_weight_matrix → the stft / inverse_stft / linear_to_mel_weight_matrix
helpers (issue 8; keras-io ctc_asr, captcha_ocr, transformer_asr, melgan): the translated code runs without
TensorFlow and gives TensorFlow's values, on random data with varied lengths, odd and even frame lengths."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

SOURCE = '''
import keras
import tensorflow as tf
from tensorflow import keras as tk


class CTCLayer(tk.layers.Layer):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.loss_fn = tk.backend.ctc_batch_cost

    def call(self, y_true, y_pred, input_length, label_length):
        return self.loss_fn(y_true, y_pred, input_length, label_length)


def batch_cost(y_true, y_pred, input_length, label_length):
    return tk.backend.ctc_batch_cost(y_true, y_pred, input_length, label_length)


def ops_loss(target, output, target_length, output_length, blank):
    return keras.ops.ctc_loss(target, output, target_length, output_length, mask_index=blank)


def spectrogram(audio, frame_length, frame_step, fft_length, pad_end):
    return tf.abs(tf.signal.stft(audio, frame_length=frame_length, frame_step=frame_step,
                                 fft_length=fft_length, pad_end=pad_end))


def complex_stft(audio, frame_length, frame_step):
    return tf.signal.stft(audio, frame_length, frame_step)


def inverse(stfts, frame_length, frame_step, fft_length):
    return tf.signal.inverse_stft(stfts, frame_length, frame_step, fft_length)


def mel(bins, spectrogram_bins, rate, low, high):
    return tf.signal.linear_to_mel_weight_matrix(
        num_mel_bins=bins, num_spectrogram_bins=spectrogram_bins, sample_rate=rate,
        lower_edge_hertz=low, upper_edge_hertz=high)


def mel64():
    return tf.signal.linear_to_mel_weight_matrix(40, 257, 16000, dtype=tf.float64)
'''


@pytest.fixture(scope="module")
def torch_side():
    r = translate_source(SOURCE, "m.py")
    assert not [f for f in r.findings if f.severity.name == "ERROR"], r.findings
    assert "import tensorflow" not in r.output and "import keras" not in r.output and "from tensorflow" not in r.output
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def tf_side():
    pytest.importorskip("tensorflow")
    tf_keras = pytest.importorskip("tf_keras")
    ns: dict = {}
    # Keras 2's backend functions (ctc_batch_cost) live in tf_keras
    exec(SOURCE.replace("from tensorflow import keras as tk", "import tf_keras as tk"), ns)
    assert ns["tk"] is tf_keras
    return ns


def _probs(rng, b, t, c):
    logits = rng.normal(size=(b, t, c)).astype("float32") * 3
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return logits, e / e.sum(-1, keepdims=True)


def test_ctc_batch_cost_matches_keras(torch_side, tf_side):
    rng = np.random.default_rng(0)
    _, probs = _probs(rng, 5, 14, 7)
    input_length = np.array([[14], [11], [7], [14], [9]])
    label_length = np.array([[3], [5], [1], [6], [2]])
    labels = rng.integers(0, 6, (5, 6)).astype("float32")  # class 6, the last, is the blank
    expected = tf_side["batch_cost"](labels, probs, input_length, label_length).numpy()
    got = torch_side["batch_cost"](labels, torch.tensor(probs), input_length, label_length)
    assert tuple(got.shape) == expected.shape == (5, 1)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    # unnormalised outputs: Keras renormalises log(y_pred + eps) (TensorFlow's ctc_loss takes logits)
    scaled = probs * rng.uniform(0.3, 3.0, (5, 14, 1)).astype("float32")
    np.testing.assert_allclose(torch_side["batch_cost"](labels, scaled, input_length, label_length).numpy(),
                               tf_side["batch_cost"](labels, scaled, input_length, label_length).numpy(),
                               rtol=1e-5, atol=1e-5)
    # the function kept as a value (captcha_ocr's self.loss_fn) is the helper
    layer = torch_side["CTCLayer"]()
    np.testing.assert_allclose(layer(labels, probs, input_length, label_length).numpy(), expected,
                               rtol=1e-5, atol=1e-5)
    # a wrong blank (the first class, torch's default) would give other values
    assert not np.allclose(torch.nn.functional.ctc_loss(
        torch.log(torch.tensor(probs) + 1e-7).transpose(0, 1), torch.tensor(labels).long(),
        torch.tensor(input_length).reshape(-1), torch.tensor(label_length).reshape(-1),
        reduction="none").numpy(), expected.ravel(), rtol=1e-3)


def test_ops_ctc_loss_matches_keras(torch_side, tf_side):
    rng = np.random.default_rng(1)
    logits, _ = _probs(rng, 4, 12, 6)
    target = rng.integers(1, 6, (4, 5)).astype("int32")
    target_length, output_length = np.array([3, 5, 1, 4]), np.array([12, 10, 7, 12])
    for blank in (0, 3):
        t = np.where(target == blank, (blank + 1) % 6, target)
        expected = np.asarray(tf_side["ops_loss"](t, logits, target_length, output_length, blank))
        got = torch_side["ops_loss"](t, torch.tensor(logits), target_length, output_length, blank)
        assert tuple(got.shape) == expected.shape == (4,)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("frame_length,frame_step,fft_length,pad_end", [
    (256, 160, 384, False), (200, 80, 256, True), (255, 128, None, True), (64, 64, None, False)])
def test_stft_matches_tensorflow(torch_side, tf_side, frame_length, frame_step, fft_length, pad_end):
    audio = np.random.default_rng(2).normal(size=(2, 3, 1001)).astype("float32")
    expected = tf_side["spectrogram"](audio, frame_length, frame_step, fft_length, pad_end).numpy()
    got = torch_side["spectrogram"](torch.tensor(audio), frame_length, frame_step, fft_length, pad_end)
    assert tuple(got.shape) == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=2e-5)


def test_complex_stft_and_inverse_match_tensorflow(torch_side, tf_side):
    audio = np.random.default_rng(3).normal(size=(2, 777)).astype("float32")
    for frame_length, frame_step in ((100, 25), (63, 21)):
        expected = tf_side["complex_stft"](audio, frame_length, frame_step).numpy()
        got = torch_side["complex_stft"](torch.tensor(audio), frame_length, frame_step)
        assert got.dtype == torch.complex64 and tuple(got.shape) == expected.shape
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=2e-5)
        for fft_length in (None, 128, 48):
            back = tf_side["inverse"](expected, frame_length, frame_step, fft_length).numpy()
            mine = torch_side["inverse"](torch.tensor(expected), frame_length, frame_step, fft_length)
            assert tuple(mine.shape) == back.shape
            np.testing.assert_allclose(mine.numpy(), back, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("args", [(80, 513, 22050, 0.0, 8000.0), (20, 129, 8000, 125.0, 3800.0),
                                  (40, 257, 16000, 55, 8000)])
def test_mel_matrix_matches_tensorflow(torch_side, tf_side, args):
    expected = tf_side["mel"](*args).numpy()
    got = torch_side["mel"](*args)
    assert got.dtype == torch.float32 and tuple(got.shape) == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=5e-5)
    got64 = torch_side["mel64"]()
    assert got64.dtype == torch.float64
    np.testing.assert_allclose(got64.numpy(), tf_side["mel64"]().numpy(), rtol=1e-10, atol=1e-12)


def test_a_helper_function_read_as_a_value_is_written_out():
    src = '''
import tensorflow as tf


def aggregate(kind, data, ids, n):
    func = {"sum": tf.math.unsorted_segment_sum}.get(kind)
    return func(data, ids, n)
'''
    r = translate_source(src, "m.py")
    assert not [f for f in r.findings if f.severity.name == "ERROR"], r.findings
    assert "def unsorted_segment_sum(" in r.output
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    out = ns["aggregate"]("sum", torch.tensor([[1.0], [2.0], [4.0]]), torch.tensor([1, 0, 1]), 3)
    np.testing.assert_allclose(out.numpy(), [[2.0], [5.0], [0.0]])
