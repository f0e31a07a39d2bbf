"""tf.signal.fft / ifft / fft2d / ifft2d and tf.complex → torch.fft / torch.complex (keras-io
speaker_recognition_using_cnn's audio_to_fft), the translation run without TensorFlow and compared with TensorFlow's
values, in complex64 and complex128."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

SOURCE = '''
import tensorflow as tf


def audio_to_fft(audio):
    audio = tf.squeeze(audio, axis=-1)
    fft = tf.signal.fft(tf.cast(tf.complex(real=audio, imag=tf.zeros_like(audio)), tf.complex64))
    fft = tf.expand_dims(fft, axis=-1)
    return tf.math.abs(fft[:, : (audio.shape[1] // 2), :])


def round_trips(re, im):
    z = tf.complex(re, im)
    return tf.signal.fft(z), tf.signal.ifft(z), tf.signal.fft2d(z), tf.signal.ifft2d(z)
'''


def test_fft_ops_match_tensorflow():
    tf = pytest.importorskip("tensorflow")
    r = translate_source(SOURCE, "m.py")
    assert not [f for f in r.findings if f.severity.name == "ERROR"], r.findings
    assert "torch.fft.fft(" in r.output and "torch.complex(" in r.output and "tf." not in r.output
    ns_t: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns_t)
    ns_k: dict = {"tf": tf}
    exec(SOURCE, ns_k)
    rng = np.random.default_rng(0)
    audio = rng.normal(size=(3, 64, 1)).astype("float32")
    k = np.asarray(ns_k["audio_to_fft"](tf.constant(audio)))
    t = ns_t["audio_to_fft"](torch.from_numpy(audio)).numpy()
    assert t.shape == k.shape == (3, 32, 1) and t.dtype == k.dtype == np.float32
    np.testing.assert_allclose(t, k, rtol=1e-4, atol=1e-4)
    for dtype, tol in (("float32", 1e-4), ("float64", 1e-10)):
        re, im = (rng.normal(size=(2, 6, 8)).astype(dtype) for _ in range(2))
        ks = ns_k["round_trips"](tf.constant(re), tf.constant(im))
        ts = ns_t["round_trips"](torch.from_numpy(re), torch.from_numpy(im))
        for kv, tv in zip(ks, ts):
            kv = np.asarray(kv)
            assert tv.numpy().dtype == kv.dtype
            np.testing.assert_allclose(tv.numpy(), kv, rtol=tol, atol=tol)
