"""A sub-layer called in a fixed mode in a Model subclass (``self.drop(h, training=True)``: Monte Carlo dropout;
``self.bn(h, training=False)``: a frozen BatchNormalization; ``self.drop(h, True)``): Keras runs that layer in that
mode whatever the model's, torch's module takes no training argument and follows the model's .train() / .eval().
The subclass pass dropped ``training=True`` with no finding (dropout off at inference: other numbers) and kept a
positional ``True`` (a TypeError at run time); each is now an error naming its line (subclass.py _fixed_training).
A train_step's fixed modes stay the training pass's (``self.critic.eval()`` before the call), and
``training=training`` is dropped as before."""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source


def _errors(src: str):
    r = translate_source(textwrap.dedent(src).lstrip(), "prog.py")
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


def test_a_sub_layer_called_in_a_fixed_mode_is_an_error():
    r, errors = _errors('''
        from tensorflow import keras
        from tensorflow.keras import layers


        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.dense = layers.Dense(4)
                self.drop = layers.Dropout(0.5)
                self.bn = layers.BatchNormalization()

            def call(self, x, training=False):
                h = self.dense(x, training=training)
                h = self.drop(h, True)
                h = self.bn(h, training=False)
                return self.drop(h, training=True)
    ''')
    assert [f.line for f in errors] == [14, 15, 16], [(f.line, f.message) for f in r.findings]
    assert "training=True) runs the layer in training mode" in errors[0].message
    assert "self.bn(..., training=False) runs the layer in inference mode" in errors[1].message
    assert "h = self.dense(h)" not in r.output and "h = self.dense(x)" in r.output  # (the model's mode: dropped)


def test_a_train_step_in_training_mode_translates():
    r, errors = _errors('''
        import tensorflow as tf
        from tensorflow import keras
        from tensorflow.keras import layers


        class GAN(keras.Model):
            def __init__(self):
                super().__init__()
                self.generator = layers.Dense(4)
                self.critic = layers.Dense(1)

            def call(self, z):
                return self.generator(z)

            def train_step(self, z):
                with tf.GradientTape() as tape:
                    fake = self.generator(z, training=True)
                    score = self.critic(fake, training=False)
                    loss = tf.reduce_mean(score)
                grads = tape.gradient(loss, self.generator.trainable_variables)
                self.optimizer.apply_gradients(zip(grads, self.generator.trainable_variables))
                return {"loss": loss}
    ''')
    # (the training pass's: the mode set before each call, as the step's loop runs it)
    assert not errors, [(f.line, f.message) for f in errors]
    assert "self.critic.eval()\n        score = self.critic(fake)" in r.output
