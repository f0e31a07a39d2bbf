"""tf.audio.decode_wav → the decode_wav helper and keras.backend.ctc_decode (greedy) → the ctc_decode helper (issue 9;
keras-io ctc_asr, speaker_recognition, captcha_ocr, handwriting_recognition), run without TensorFlow and compared with
TensorFlow's values; the Keras calls fwport does not translate (keras.Input left outside a translated model,
beam-search ctc_decode) are errors (keras.activations.get and keras.regularizers.get translate: test_activations_get,
test_reg23_custom_regularizers) that say what to write."""
from __future__ import annotations

import io
import wave

import pytest

from fwport.core.pipeline import translate_source

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

SOURCE = '''
import tensorflow as tf
from tensorflow import keras


def read(contents):
    return tf.audio.decode_wav(contents)


def read_mono(contents):
    audio, rate = tf.audio.decode_wav(contents, desired_channels=1)
    return tf.squeeze(audio, axis=-1), rate


def read_fixed(contents):
    return tf.audio.decode_wav(contents, 3, desired_samples=60)


def decode(pred, lengths):
    return keras.backend.ctc_decode(pred, input_length=lengths, greedy=True)
'''


@pytest.fixture(scope="module")
def torch_side():
    r = translate_source(SOURCE, "m.py")
    assert not [f for f in r.findings if f.severity.name == "ERROR"], r.findings
    assert "import tensorflow" not in r.output and "from tensorflow" not in r.output
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def tf_side():
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf_keras")
    ns: dict = {}
    exec(SOURCE.replace("from tensorflow import keras", "import tf_keras as keras"), ns)
    return ns


def _wav(samples, rate=8000, width=2):
    b = io.BytesIO()
    with wave.open(b, "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2" if width == 2 else "u1").tobytes())
    return b.getvalue()


def test_decode_wav_matches_tensorflow(torch_side, tf_side):
    rng = np.random.default_rng(0)
    stereo = _wav(rng.integers(-32768, 32768, (50, 2)), rate=16000)
    mono = _wav(np.concatenate([[[-32768], [32767], [0]], rng.integers(-32768, 32768, (47, 1))]))
    for name in ("read", "read_mono", "read_fixed"):
        for contents in (stereo, mono):
            ka, kr = (np.asarray(v) for v in tf_side[name](contents))
            ta, tr = torch_side[name](contents)
            assert ta.dtype == torch.float32 and tr.dtype == torch.int32
            assert tuple(ta.shape) == ka.shape, name
            np.testing.assert_array_equal(ta.numpy(), ka)
            assert int(tr) == int(kr)
    with pytest.raises(ValueError):  # 8-bit files: TensorFlow's decoder refuses them too
        torch_side["read"](_wav(np.zeros((4, 1)), width=1))


def _probs(rng, n, steps, classes):
    logits = rng.normal(0, 2, (n, steps, classes)).astype("float32")
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype("float32")


def test_greedy_ctc_decode_matches_tensorflow(torch_side, tf_side):
    rng = np.random.default_rng(1)
    pred = _probs(rng, 4, 12, 5)
    # sequence 0: repeats, blanks (the last class) between repeats, and a length shorter than the steps
    pred[0] = np.eye(5, dtype="float32")[[1, 1, 4, 1, 2, 2, 4, 4, 3, 0, 0, 1]] * 0.9 + 0.02
    lengths = np.array([12, 7, 12, 1], dtype="float64")
    for args in ((pred, np.ones(4) * 12), (pred, lengths)):
        (kd,), kp = tf_side["decode"](*args)
        (td,), tp = torch_side["decode"](*args)
        assert td.dtype == torch.int64 and tuple(td.shape) == tuple(kd.shape) == (4, 12)
        np.testing.assert_array_equal(td.numpy(), np.asarray(kd))
        np.testing.assert_allclose(tp.numpy(), np.asarray(kp), rtol=1e-5)
    assert list(td[0].numpy()[:7]) == [1, 1, 2, 3, 0, 1, -1]


def test_untranslated_keras_calls_are_errors_that_say_what_to_write():
    r = translate_source('''
from tensorflow import keras


class Holder:
    def __init__(self, shape, reg=None, act="relu"):
        self.inp = keras.Input(shape)
        self.reg = keras.regularizers.get(reg)
        self.act = keras.activations.get(act)


def decode(pred, lengths):
    return keras.backend.ctc_decode(pred, lengths, greedy=False, beam_width=10)
''', "m.py")
    errors = {f.line: f.message for f in r.findings if f.severity.name == "ERROR"}
    assert sorted(errors) == [7, 13], r.findings
    assert "self.act = keras_activation(act)" in r.output  # a rule (test_activations_get)
    assert "self.reg = KerasRegularizer(reg)" in r.output  # a rule (test_reg23_custom_regularizers)
    assert "torch.zeros(batch, *shape)" in errors[7]
    assert "greedy=False" in errors[13] and "torchaudio.models.decoder.ctc_decoder" in errors[13]
