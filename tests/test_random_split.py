"""tf.random.split / tf.random.experimental.stateless_split → the stateless_split helper: new seeds of TensorFlow's
shape and dtype, the same ones for the same seed (as TensorFlow's), others for another seed, and usable as the seed
of the stateless ops translated alike (their values differ from TensorFlow's: another generator)."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''import tensorflow as tf


def run(seed, num, image):
    seeds = tf.random.split(seed, num=num)
    other = tf.random.experimental.stateless_split(seed, num, alg="philox")
    flipped = tf.image.stateless_random_flip_left_right(image, seed=seeds[0, :])
    return seeds, other, tf.random.split([7, 8], 3), flipped
'''


def test_split_seeds_have_tensorflows_shape_and_dtype_and_are_deterministic():
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    r = translate_source(SRC, "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "import tensorflow" not in r.output and "stateless_split(seed, num)" in r.output, r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    image = np.arange(2 * 3 * 4 * 1, dtype=np.float32).reshape(2, 3, 4, 1)
    for seed, num in ((np.array([1, 2], np.int64), 4), (np.array([5, -3], np.int32), 1), (torch.tensor([3, 4]), 2)):
        tf_seed = seed.numpy() if isinstance(seed, torch.Tensor) else seed
        want = [t.numpy() for t in (tf.random.split(tf_seed, num=num), tf.random.experimental.stateless_split(tf_seed, num),
                                    tf.random.split([7, 8], 3))]
        got = ns["run"](seed, num, torch.as_tensor(image))
        again = ns["run"](seed, num, torch.as_tensor(image))
        for w, g, a in zip(want, got[:3], again[:3]):
            g, a = g.numpy(), a.numpy()
            assert (g.shape, g.dtype) == (w.shape, w.dtype), (g.shape, g.dtype, w.shape, w.dtype)
            assert (g == a).all()  # one seed, the same new seeds
            assert len({tuple(row) for row in g.tolist()}) == g.shape[0]  # distinct new seeds
        assert torch.equal(got[3], again[3])  # a stateless op seeded by a new seed: the same draw each time
        assert got[3].shape == image.shape
    one = ns["run"](np.array([1, 2]), 2, torch.as_tensor(image))[0]
    other = ns["run"](np.array([1, 3]), 2, torch.as_tensor(image))[0]
    assert not torch.equal(one, other)  # another seed, other new seeds
