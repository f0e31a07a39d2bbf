"""BatchNormalization whose input rank is unknown where it is built, in code that keeps Keras's layout
(a Sequential without convolutions, a layer called where it stands): the LazyLastAxisBatchNorm helper,
BatchNorm1d over the rows x.reshape(-1, C), which is Keras's computation over the last axis at any
rank. Checked against Keras in inference (moving statistics moved by the rule's weight map) on inputs
of rank 2, 3 and 4."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from conv_numerics import assert_close
from test_layers_more import compare, errors, tx
from runners import Warm

HEAD = '''
from tensorflow import keras
from tensorflow.keras import layers


class Head(keras.Model):
    def __init__(self, units=6):
        super().__init__()
        self.projector = keras.Sequential(
            [
                layers.Dropout(0.1),
                layers.Dense(units),
                layers.BatchNormalization(momentum=0.9, epsilon=0.6),  # (the harness draws variances in ±0.5)
                layers.ReLU(),
            ]
        )

    def call(self, x):
        return self.projector(x)
'''


def test_a_sequential_without_convolutions_keeps_keras_layout_for_its_batchnorm():
    _, r = tx(HEAD)
    assert errors(r) == []
    assert "LazyLastAxisBatchNorm(momentum=0.1, eps=0.6)" in r.output
    assert "class LazyLastAxisBatchNorm(nn.LazyBatchNorm1d):" in r.output
    assert "permute" not in r.output  # nothing converted to channels-first, nothing to move


@pytest.mark.parametrize("shape", [(5, 3), (4, 5, 3), (2, 4, 3, 3)])
def test_last_axis_batchnorm_matches_keras_at_any_rank(shape):
    src, r = tx(HEAD)
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype("float32")
    k, t = compare(src, r.output, r.layers, "Head()", [x])
    assert_close(k, t, 1e-5)


def test_batchnorm_of_unknown_rank_in_a_channels_first_sequential_normalises_dim_1(tmp_path):
    # the Sequential takes channels-first inputs (its Conv2D): Keras's last axis is dim 1 at any rank, where
    # torch's batch norm computes (LazyChannelsFirstBatchNorm); it was refused before
    src = textwrap.dedent('''
        from tensorflow import keras
        from tensorflow.keras import layers

        model = keras.Sequential([layers.BatchNormalization(), layers.Conv2D(4, 3)])
        ''').lstrip("\n")
    _, r = tx(src)
    assert errors(r) == []
    assert "nn.Sequential(LazyChannelsFirstBatchNorm(momentum=0.01, eps=0.001), nn.LazyConv2d(4, 3))" in r.output
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "model", inputs=["float32[2,6,6,3]"],
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert {"0.weight", "0.bias"} <= {e["name"] for e in cert["results"]["gradients"]}


RESHAPED = '''
from tensorflow import keras
from tensorflow.keras import layers


def build():
    return keras.Sequential(
        [layers.Dense(32), layers.Reshape((4, 8)), layers.BatchNormalization(epsilon=0.6), layers.ReLU()]
    )
'''


def test_a_batchnorm_after_a_reshape_in_a_kept_sequential_takes_the_last_axis():
    # the Reshape makes the rank known (batch, 4, 8): torch's BatchNorm1d(8) would normalise dim 1 (the 4 steps)
    src, r = tx(RESHAPED)
    assert errors(r) == []
    assert "LazyLastAxisBatchNorm(eps=0.6, momentum=0.01)" in r.output and "BatchNorm1d(8" not in r.output
    k, t = compare(src, r.output, r.layers, "build()", [np.random.default_rng(7).standard_normal((6, 5)).astype("float32")])
    assert_close(k, t, 1e-5)
