"""tf.image.image_gradients and tf.image.ssim → the image_gradients / ssim helpers written into the file (issue 8;
keras-io depth_estimation's loss), run without TensorFlow and compared with TensorFlow's own values: the borders
(the zero last row / column of the gradients, SSIM's valid window positions), SSIM's defaults (filter 11, sigma 1.5,
k1 0.01, k2 0.03) and the arguments the keras-io file gives, integer images, the index map, leading axes, and the
gradient of an SSIM loss."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

SOURCE = '''
import tensorflow as tf


def grads(x):
    return tf.image.image_gradients(x)


def ssim_default(a, b):
    return tf.image.ssim(a, b, max_val=1.0)


def ssim_depth(a, b):
    return tf.reduce_mean(1 - tf.image.ssim(a, b, max_val=WIDTH, filter_size=7, k1=0.01**2, k2=0.03**2))


def ssim_map(a, b):
    return tf.image.ssim(a, b, 255, 5, 0.8, return_index_map=True)


WIDTH = 16
'''


@pytest.fixture(scope="module")
def torch_side():
    r = translate_source(SOURCE, "m.py")
    assert not [f for f in r.findings if f.severity.name == "ERROR"], r.findings
    assert "import tensorflow" not in r.output and "tf." not in r.output.replace("TensorFlow", "")
    assert "ssim(a, b, 255, 5, 0.8, return_index_map=True)" in r.output
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def tf_side():
    pytest.importorskip("tensorflow")
    ns: dict = {}
    exec(SOURCE, ns)
    return ns


def _rand(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).uniform(0, scale, shape)).astype("float32")


def test_image_gradients_match_tensorflow_with_borders(torch_side, tf_side):
    x = _rand((2, 5, 6, 3), 0)
    dy_k, dx_k = (np.asarray(v) for v in tf_side["grads"](tf_side["tf"].constant(x)))
    dy_t, dx_t = (v.numpy() for v in torch_side["grads"](torch.from_numpy(x)))
    assert dy_t.shape == dx_t.shape == x.shape
    np.testing.assert_array_equal(dy_t, dy_k)
    np.testing.assert_array_equal(dx_t, dx_k)
    assert not dy_t[:, -1].any() and not dx_t[:, :, -1].any() and dy_t[:, :-1].any()
    with pytest.raises(ValueError):
        torch_side["grads"](torch.zeros(5, 6, 3))


def test_ssim_matches_tensorflow(torch_side, tf_side):
    a = _rand((3, 20, 18, 2), 1)
    b = np.clip(a + _rand((3, 20, 18, 2), 2, 0.3) - 0.15, 0, 1)
    for name, args in (("ssim_default", (a, b)), ("ssim_depth", (a * 16, b * 16)), ("ssim_default", (a, a))):
        k = np.asarray(tf_side[name](*args))
        t = torch_side[name](*(torch.from_numpy(np.ascontiguousarray(v)) for v in args)).numpy()
        assert t.shape == k.shape, name
        np.testing.assert_allclose(t, k, rtol=1e-5, atol=2e-6, err_msg=name)
    # integer images: max_val and pixels scaled as convert_image_dtype does; the map over the valid positions
    ai = (a * 255).astype("uint8")
    bi = (b * 255).astype("uint8")
    k = np.asarray(tf_side["ssim_map"](ai, bi))
    t = torch_side["ssim_map"](torch.from_numpy(ai), torch.from_numpy(bi)).numpy()
    assert t.shape == k.shape == (3, 16, 14)
    np.testing.assert_allclose(t, k, rtol=1e-4, atol=1e-5)
    # leading axes beyond the batch, and a second operand that broadcasts over them
    a5 = _rand((2, 3, 12, 12, 1), 3)
    k = np.asarray(tf_side["ssim_default"](a5, a5[0] * 0.9))
    t = torch_side["ssim_default"](torch.from_numpy(a5), torch.from_numpy(a5[0] * 0.9)).numpy()
    assert t.shape == k.shape == (2, 3)
    np.testing.assert_allclose(t, k, rtol=1e-5, atol=2e-6)


def test_ssim_loss_gradient_matches_tensorflow(torch_side, tf_side):
    tf = pytest.importorskip("tensorflow")
    a = _rand((2, 12, 12, 1), 4, 16.0)
    b = _rand((2, 12, 12, 1), 5, 16.0)
    bk = tf.Variable(b)
    with tf.GradientTape() as tape:
        loss_k = tf_side["ssim_depth"](a, bk)
    g_k = tape.gradient(loss_k, bk).numpy()
    bt = torch.from_numpy(b).requires_grad_(True)
    loss_t = torch_side["ssim_depth"](torch.from_numpy(a), bt)
    loss_t.backward()
    np.testing.assert_allclose(float(loss_t.detach()), float(loss_k), rtol=1e-5)
    np.testing.assert_allclose(bt.grad.numpy(), g_k, rtol=1e-3, atol=1e-6)
