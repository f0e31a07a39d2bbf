"""A list of a functional model's tensors bound to a name and given as a recurrent layer's ``initial_state``
(keras-io's lstm_seq2seq: ``encoder_states = [state_h, state_c]``, then
``decoder_lstm(decoder_inputs, initial_state=encoder_states)``) is the list written in place in forward, as
for merges and keras.Model(...); a list used as any other value is refused, saying it is a list."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import Warm

SEQ2SEQ = '''
from tensorflow import keras

latent_dim = 8


def build(num_encoder_tokens=5, num_decoder_tokens=6):
    encoder_inputs = keras.Input(shape=(None, num_encoder_tokens))
    encoder = keras.layers.LSTM(latent_dim, return_state=True)
    encoder_outputs, state_h, state_c = encoder(encoder_inputs)
    encoder_states = [state_h, state_c]
    decoder_inputs = keras.Input(shape=(None, num_decoder_tokens))
    decoder_lstm = keras.layers.LSTM(latent_dim, return_sequences=True, return_state=True)
    decoder_outputs, _, _ = decoder_lstm(decoder_inputs, initial_state=encoder_states)
    decoder_dense = keras.layers.Dense(num_decoder_tokens, activation="softmax")
    decoder_outputs = decoder_dense(decoder_outputs)
    return keras.Model([encoder_inputs, decoder_inputs], decoder_outputs)
'''

# the same at module level, as keras-io writes it
MODULE = '''
from tensorflow import keras

encoder_inputs = keras.Input(shape=(None, 5))
encoder_outputs, state_h, state_c = keras.layers.LSTM(8, return_state=True)(encoder_inputs)
encoder_states = [state_h, state_c]
decoder_inputs = keras.Input(shape=(None, 6))
decoder_outputs, _, _ = keras.layers.LSTM(8, return_sequences=True, return_state=True)(
    decoder_inputs, initial_state=encoder_states)
model = keras.Model([encoder_inputs, decoder_inputs], keras.layers.Dense(6)(decoder_outputs))
'''


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def test_a_named_list_of_states_is_the_initial_state_and_computes_what_keras_does(tmp_path):
    r = _tx(SEQ2SEQ)
    assert not _errors(r), _errors(r)
    assert "decoder_outputs, _, _ = self.decoder_lstm(decoder_inputs, initial_state=[state_h, state_c])" in r.output
    assert "encoder_states" not in r.output
    module = _tx(MODULE)
    assert not _errors(module), _errors(module)
    assert "initial_state=[state_h, state_c])" in module.output and "tensorflow" not in module.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SEQ2SEQ)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()",
                          inputs=["float32[2,4,5]", "float32[2,3,6]"], checks=("forward", "grad"), device="cpu",
                          keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert len(cert["results"]["gradients"]) == 8  # two LSTMs (four tensors each in torch), the Dense


def test_a_list_of_tensors_used_as_another_value_is_refused_as_a_list():
    r = _tx(SEQ2SEQ.replace("decoder_outputs = decoder_dense(decoder_outputs)",
                            "decoder_outputs = decoder_dense(encoder_states)"))
    errors = _errors(r)
    assert any("encoder_states, a list of tensors, used as a value" in m for m in errors), errors
    assert any("left as written" in m for m in errors), errors
