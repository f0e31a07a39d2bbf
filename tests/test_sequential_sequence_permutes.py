"""An Embedding and recurrent layers in a Sequential converted to channels-first: the Embedding's
(batch, T, D) output gets a Permute that moves D to dim 1, where the Conv1D after it takes its channels; an LSTM /
GRU gets a Permute before it (Keras's (batch, steps, features)) and, when it returns sequences, one after it
(features back at dim 1). Checked against Keras with fwport verify (forward and gradients, TensorFlow unimportable
on the translation's side); an Embedding whose ids' rank is unknown stays an error."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import Warm

SOURCE = '''
import keras
from keras import layers

model = keras.Sequential([
    keras.Input(shape=(12,), dtype="int32"),
    layers.Embedding(30, 8),
    layers.Conv1D(6, 3, activation="relu"),
    layers.MaxPooling1D(2),
    layers.LSTM(5, return_sequences=True),
    layers.Conv1D(4, 2),
    layers.GRU(3),
    layers.Dense(2),
])
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def test_embedding_conv_and_rnns_in_a_channels_first_sequential_match_keras(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    r = _tx(SOURCE)
    assert _errors(r) == []
    assert "nn.Embedding(30, 8), Permute((2, 1))," in r.output
    assert "Permute((2, 1)), nn.LSTM(6, 5, batch_first=True), RNNOutput(return_sequences=True), Permute((2, 1))," in r.output
    (tmp_path / "m.py").write_text(SOURCE)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "model", inputs=["int32[2,12]:30"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_an_embedding_of_ids_of_unknown_rank_stays_an_error():
    src = SOURCE.replace('    keras.Input(shape=(12,), dtype="int32"),\n', "")
    assert any("rank of its ids is unknown" in m for m in _errors(_tx(src)))
