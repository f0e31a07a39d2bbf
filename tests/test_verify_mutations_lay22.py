"""Bidirectional(LSTM/GRU/SimpleRNN(dropout=p)) (task lay22, issue 8): Keras's Bidirectional holds two layers,
each drawing its own mask of the input features per sequence in training; the translation is a subclass of the
torch module (Bidirectional<kind>Dropout, or LazyBidirectional<kind>Dropout where the input size is unknown) that
runs once per direction on the inputs times that direction's mask. Checked with ``verify`` (forward, grad and a
step, the dropout rates set to 0 on both sides), by planted bugs (tests/test_verify_mutations.py's method), and
the masks' joint statistics in training against Keras's (independent per direction: both dropped with p²)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings

ORIGINAL = '''
import keras
from keras import layers


def known():
    inputs = keras.Input(shape=(7, 5))
    x = layers.Bidirectional(layers.LSTM(6, return_sequences=True, dropout=0.25))(inputs)
    x = layers.Bidirectional(layers.GRU(4, dropout=0.4), merge_mode="ave")(x)
    return keras.Model(inputs, layers.Dense(2)(x))


class Lazy(keras.Model):  # (a layer class's own layers: their input size unknown here, Lazy<kind> helpers)
    def __init__(self):
        super().__init__()
        self.rnn1 = layers.Bidirectional(layers.SimpleRNN(3, return_sequences=True, dropout=0.3), merge_mode="mul")
        self.rnn2 = layers.Bidirectional(layers.LSTM(4, dropout=0.2))
        self.head = layers.Dense(2)

    def call(self, x):
        return self.head(self.rnn2(self.rnn1(x)))
'''


@pytest.fixture(scope="module")
def translated():
    r = translate_source(textwrap.dedent(ORIGINAL), "m.py")
    assert not error_findings(r), r.findings
    return r.output


def test_translation_text(translated):
    out = translated
    assert "BidirectionalLSTMDropout(5, 6, batch_first=True, bidirectional=True, input_dropout=0.25)" in out
    assert "BidirectionalGRUDropout(12, 4, batch_first=True, bidirectional=True, input_dropout=0.4)" in out
    assert "class LazyBidirectionalRNNDropout(LazyRNN):" in out and "class LazyRNN(" in out
    assert ('LazyBidirectionalRNNDropout(3, return_sequences=True, merge_mode="mul", bidirectional=True, '
            'input_dropout=0.3)') in out
    assert "BidirectionalLSTMDropout(3, 4, batch_first=True, bidirectional=True, input_dropout=0.2)" in out


def _verify(tmp_path, session, text, model, checks=("forward", "grad", "step")):
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(ORIGINAL))
    (tmp_path / "m_torch.py").write_text(text)
    return verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model, inputs=["float32[3,7,5]"],
                          checks=checks, device="cpu"), session)


@pytest.fixture(scope="module")
def session():
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Session
    with Session() as s:
        yield s


@pytest.mark.parametrize("model", ["known", "Lazy"])
def test_correct_translations_pass(tmp_path, session, translated, model):
    cert = _verify(tmp_path, session, translated, model)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


# the helpers dropping in eval() too: forward (inference) differs from Keras's
INFERENCE_DROPS = ("        if not self.training or not 0 < p < 1:\n            return super().forward(x, hx)",
                   "        if not 0 < p < 1:\n            return super().forward(x, hx)")


@pytest.mark.parametrize("old, new", [
    INFERENCE_DROPS,
    ('BidirectionalOutput(merge_mode="ave")', 'BidirectionalOutput(merge_mode="sum")'),
])
def test_planted_bug_is_caught(tmp_path, session, translated, old, new):
    assert old in translated, f"the translation changed: {old!r}; update the mutation"
    cert = _verify(tmp_path, session, translated.replace(old, new), "known", checks=("forward",))
    assert cert["verdict"] == "mismatch"


# one feature of ones, zero biases: an LSTM's output is exactly 0 where its direction's masks dropped the feature
# at every step, else not; the frequencies of each direction dropped and of both dropped
DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import model as m
x = np.ones((4000, m.STEPS, 1), "float32")
if sys.argv[2] == "keras":
    m.keras.utils.set_random_seed(0)
    y = np.asarray(m.model(x, training=True))
else:
    import torch
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in m.model.named_parameters():
            if "bias" in name:
                p.zero_()
    y = m.model.train()(torch.as_tensor(x)).detach().numpy()
f, b = y[:, 0] == 0, y[:, -1] == 0
print("RESULT " + json.dumps({"f": float(f.mean()), "b": float(b.mean()), "both": float((f & b).mean())}))
'''

PROBE = '''
import keras
from keras import layers

STEPS = 6
inputs = keras.Input(shape=(STEPS, 1))
outputs = layers.Bidirectional(layers.LSTM(1, dropout=0.5, bias_initializer="zeros"))(inputs)
model = keras.Model(inputs, outputs)
'''
# Keras 2 (tf_keras): its fused LSTM multiplies the whole input by one mask of its shape, a mask per step: over two
# steps a direction is all dropped with 0.5² and both with 0.5⁴ (a mask per sequence: 0.5 and 0.25)
PROBE_KERAS2 = PROBE.replace("import keras\nfrom keras import layers", "from tensorflow import keras\n"
                             "from tensorflow.keras import layers").replace("STEPS = 6", "STEPS = 2")


@pytest.mark.parametrize("probe, version, one, both", [(PROBE, "3", 0.5, 0.25), (PROBE_KERAS2, "2", 0.25, 0.0625)],
                         ids=["keras3", "keras2"])
def test_each_direction_draws_its_own_mask_as_keras(tmp_path, probe, version, one, both):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from runners import keras_and_torch
    r = translate_source(probe.lstrip("\n"), "probe.py", options={"keras": int(version)})
    assert not error_findings(r) and "input_dropout=0.5" in r.output
    assert ("input_dropout=0.5, per_step=True)" in r.output) == (version == "2")
    env = {"TF_USE_LEGACY_KERAS": "1"} if version == "2" else {}
    keras_out, torch_out = keras_and_torch(tmp_path, probe, r.output, DRIVER, **env)
    for side in (keras_out, torch_out):
        assert abs(side["f"] - one) < 0.04 and abs(side["b"] - one) < 0.04, side
        assert abs(side["both"] - both) < 0.025, side  # one mask shared by the two directions: `one`
    # planted: one mask for both directions (the bidirectional module run once on the dropped inputs)
    shared = r.output.replace("keep[1] / (1 - p)", "keep[0] / (1 - p)")
    assert shared != r.output
    (tmp_path / "again").mkdir()
    _, bad = keras_and_torch(tmp_path / "again", probe, shared, DRIVER, **env)
    assert abs(bad["both"] - one) < 0.04


PLAIN = PROBE.replace("layers.Bidirectional(layers.LSTM(1, dropout=0.5, bias_initializer=\"zeros\"))",
                      "layers.GRU(1, dropout=0.5, bias_initializer=\"zeros\")").replace("STEPS = 6", "STEPS = 2")
PLAIN_KERAS2 = PLAIN.replace("import keras\nfrom keras import layers", "from tensorflow import keras\n"
                             "from tensorflow.keras import layers")


# use_bias=False: tf_keras's cell path, one mask per sequence (implementation=2)
PLAIN_KERAS2_CELL = PLAIN_KERAS2.replace('bias_initializer="zeros"', "use_bias=False")


@pytest.mark.parametrize("probe, version, one", [(PLAIN, "3", 0.5), (PLAIN_KERAS2, "2", 0.25),
                                                 (PLAIN_KERAS2_CELL, "2", 0.5)], ids=["keras3", "keras2", "keras2-cell"])
def test_a_plain_recurrent_layer_masks_as_keras(tmp_path, probe, version, one):
    """Outside Bidirectional too: SequenceDropout draws a mask per sequence for Keras 3 and per step for Keras 2's
    fused GRU / LSTM (before lay22 it drew per sequence for both: over two steps 0.5 where tf_keras gives 0.25)."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from runners import keras_and_torch
    assert "layers.GRU(1, dropout=0.5" in probe
    r = translate_source(probe.lstrip("\n"), "probe.py", options={"keras": int(version)})
    assert not error_findings(r)
    per_step = version == "2" and "use_bias=False" not in probe
    assert ("SequenceDropout(0.5, per_step=True)" if per_step else "SequenceDropout(0.5)") in r.output
    env = {"TF_USE_LEGACY_KERAS": "1"} if version == "2" else {}
    keras_out, torch_out = keras_and_torch(tmp_path, probe, r.output, DRIVER, **env)
    for side in (keras_out, torch_out):
        assert abs(side["f"] - one) < 0.04, side
