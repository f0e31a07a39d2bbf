"""Module-level functional models that share a ``keras.Input`` (keras-io's ppo_cartpole: ``actor`` and
``critic`` on one observation input), with a helper given a TensorFlow function as an argument
(``mlp(x, sizes, tf.tanh, None)``): each model is a class whose forward takes that input. A statement below
the models that unpacks into a name of the graph (``logits, action = ...``) binds it anew, reading nothing of
the graph. What reads the shared input or a tensor of a model outside any model below stays an error."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import Warm

PPO = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

hidden_sizes = (8, 8)
num_actions = 3


def mlp(x, sizes, activation=tf.tanh, output_activation=None):
    for size in sizes[:-1]:
        x = layers.Dense(units=size, activation=activation)(x)
    return layers.Dense(units=sizes[-1], activation=output_activation)(x)


observation_input = keras.Input(shape=(4,), dtype=tf.float32)
logits = mlp(observation_input, list(hidden_sizes) + [num_actions], tf.tanh, None)
actor = keras.Model(inputs=observation_input, outputs=logits)
value = tf.squeeze(mlp(observation_input, list(hidden_sizes) + [1], tf.tanh, None), axis=1)
critic = keras.Model(inputs=observation_input, outputs=value)

for step in range(2):
    logits, action = actor(tf.zeros((1, 4))), 0
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 2})  # (tf.squeeze on a KerasTensor)


def test_two_models_sharing_an_input_are_two_classes_taking_it():
    r = _tx(PPO)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "class Actor(nn.Module):" in out and "class Critic(nn.Module):" in out
    assert out.count("def forward(self, observation_input):") == 2 and "keras.Input" not in out
    assert "value = torch.squeeze(self.mlp(observation_input), dim=1)" in out
    assert "x = torch.tanh(fc1(x))" in out and "keras" not in out and "tensorflow" not in out


@pytest.mark.parametrize("model", ["actor", "critic"])
def test_models_sharing_an_input_compute_what_keras_does(tmp_path, model):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf_keras")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(PPO)
    (tmp_path / "t.py").write_text(_tx(PPO).output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[5,4]"],
                          checks=("forward", "grad"), device="cpu", keras=2), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert len(cert["results"]["gradients"]) == 6  # three Dense layers of the model's own mlp


def test_the_shared_input_or_a_models_tensor_read_outside_a_model_below_stays_an_error():
    used = "a tensor or layer of the functional model used after keras.Model(...)"
    printed = _tx(PPO.replace("\nfor step", "\nprint(observation_input.shape)\nfor step"))
    assert any(m.startswith("observation_input: " + used) for m in _errors(printed)), _errors(printed)
    # the critic built on the actor's logits: a tensor of the model above, not an input it shares
    on_logits = _tx(PPO.replace("mlp(observation_input, list(hidden_sizes) + [1]",
                                "mlp(logits, list(hidden_sizes) + [1]"))
    assert any(m.startswith("logits: " + used) for m in _errors(on_logits)), _errors(on_logits)
