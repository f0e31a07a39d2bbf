"""dropout= of Keras's recurrent layers (issue 8): Keras multiplies the inputs by one mask of the features
per sequence, the same at every step, in training only; the translation puts the SequenceDropout helper
before torch's module. Inference verified against Keras; training: the mask's structure and scale."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as _errors
from runners import Warm

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_seq():
    return keras.Sequential([keras.Input(shape=(7, 5)), layers.LSTM(6, dropout=0.25, return_sequences=True),
                             layers.GRU(4, dropout=0.5), layers.Dense(2)])


def build_fn(rate=0.3):
    inp = keras.Input(shape=(7, 5))
    x = layers.GRU(6, dropout=rate, return_sequences=True)(inp)
    x = layers.SimpleRNN(4, dropout=0.2)(x)
    out = layers.Dense(2)(x)
    return keras.Model(inp, out)
'''


def test_input_dropout_becomes_sequence_dropout_and_verifies_at_inference(tmp_path):
    r = translate_source(SOURCE, "m.py")
    assert not _errors(r), r.findings
    assert "nn.Sequential(SequenceDropout(0.25), nn.LSTM(5, 6, batch_first=True)" in r.output
    assert "nn.Sequential(SequenceDropout(rate), nn.GRU(5, 6, batch_first=True)" in r.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SOURCE)
    (tmp_path / "m_torch.py").write_text(r.output)
    session = Warm.session()
    for model in ("build_seq", "build_fn"):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model,
                              inputs=["float32[3,7,5]"], checks=("forward", "grad"), device="cpu"), session)
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))


def test_sequence_dropout_draws_one_feature_mask_per_sequence():
    torch = pytest.importorskip("torch")
    r = translate_source(SOURCE, "m.py")
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    drop = ns["SequenceDropout"](0.25).train()
    torch.manual_seed(0)
    x = torch.ones(400, 7, 5)
    y = drop(x)
    assert torch.equal(y, y[:, :1, :].expand_as(y))  # the same mask at every step
    assert all(v == 0 or abs(v - 1 / 0.75) < 1e-6 for v in torch.unique(y).tolist())  # scaled as Keras
    assert abs(float((y == 0).float().mean()) - 0.25) < 0.03
    assert torch.equal(drop.eval()(x), x)
    for p in (0, 1, 1.5):  # Keras drops only for 0 < p < 1
        assert torch.equal(ns["SequenceDropout"](p).train()(x), x)


def test_dropout_keras_does_not_draw_like_that_stays_refused():
    # (LSTM(4, recurrent_dropout=0.2) alone is the RecurrentDropoutLSTM helper: tests/test_recurrent_dropout.py)
    for layer, said in (("layers.Bidirectional(layers.GRU(4, dropout=0.2, recurrent_dropout=0.1))", "write the cell by hand"),):
        src = f'''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(7, 5)), {layer}, layers.Dense(2)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y)
'''
        r = translate_source(src, "m.py")
        errs = _errors(r)
        assert errs and said in errs[0].message and errs[0].line == 5, (layer, r.findings)


# recurrent_dropout= in a file that trains no model: Keras applies it only in training, so the inference
# translation is exact (a warning says training would differ); verified against Keras
NO_TRAINING = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_seq():
    return keras.Sequential([keras.Input(shape=(7, 5)), layers.LSTM(6, dropout=0.25, recurrent_dropout=0.3,
                                                                     return_sequences=True),
                             layers.GRU(4, recurrent_dropout=0.5), layers.Dense(2)])


def build_fn():
    inp = keras.Input(shape=(7, 5))
    x = layers.Bidirectional(layers.SimpleRNN(3, dropout=0.2, recurrent_dropout=0.4, return_sequences=True))(inp)
    x = layers.LSTM(4, recurrent_dropout=0.1)(x)
    return keras.Model(inp, layers.Dense(2)(x))
'''


def test_recurrent_dropout_of_a_file_that_never_trains_is_a_warning_and_verifies_at_inference(tmp_path):
    r = translate_source(NO_TRAINING, "m.py")
    assert not _errors(r), r.findings
    warned = [f for f in r.findings if "recurrent_dropout" in f.message]
    assert [(f.severity.name, f.line) for f in warned] == [("WARNING", 7), ("WARNING", 9), ("WARNING", 14),
                                                         ("WARNING", 15)], warned
    assert all("training it would differ" in f.message for f in warned)
    assert "nn.Sequential(SequenceDropout(0.25), nn.LSTM(5, 6, batch_first=True)" in r.output
    assert not [ln for ln in r.output.splitlines() if "recurrent_dropout" in ln and not ln.lstrip().startswith("#")]
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(NO_TRAINING)
    (tmp_path / "m_torch.py").write_text(r.output)
    session = Warm.session()
    for model in ("build_seq", "build_fn"):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model,
                              inputs=["float32[3,7,5]"], checks=("forward",), device="cpu"), session)
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))


@pytest.mark.parametrize("training", ["model = build_seq()\nmodel.compile(optimizer='adam', loss='mse')\nmodel.fit(x, y)\n",
                                      "model = build_seq()\ny = model(x, training=True)\n"])
def test_recurrent_dropout_stays_an_error_under_bidirectional_where_the_file_trains_or_calls_in_training(training):
    r = translate_source(NO_TRAINING + training, "m.py")
    errs = [f for f in _errors(r) if "recurrent_dropout" in f.message]
    assert errs and all("write the cell by hand" in f.message for f in errs), r.findings
    assert [f.line for f in errs] == [14], errs  # the Bidirectional SimpleRNN; the others are the helper
    assert "RecurrentDropoutLSTM(5, 6, batch_first=True, input_dropout=0.25, recurrent_dropout=0.3)" in r.output
