"""A sub-layer called in a fixed mode in a Model subclass (``self.drop(h, training=True)``: Monte Carlo dropout;
``self.bn(h, training=False)``: a frozen BatchNormalization; ``self.drop(h, True)``): Keras runs that layer in that
mode whatever the model's, torch's module takes no training argument and follows the model's .train() / .eval().
Where every use of the sub-layer in the class is a call with the same literal flag, the flag is dropped and the class
gets a written ``train()`` that puts it back in that mode (numbers: test_fit_fixed_mode_submodule.py); a sub-layer
called in two modes, or through a loop or a subscript, or a class with its own train(), stays an error naming its
line (subclass.py _fixed_training, _plan_fixed_modes).
A train_step's fixed modes stay the training pass's (``self.critic.eval()`` before the call), and
``training=training`` is dropped as before."""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source


def _errors(src: str):
    r = translate_source(textwrap.dedent(src).lstrip(), "prog.py")
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


def test_a_sub_layer_always_called_in_one_fixed_mode_gets_a_written_train():
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
    assert not errors, [(f.line, f.message) for f in errors]
    assert "h = self.dense(x)" in r.output  # (the model's mode: dropped)
    assert ("        h = self.drop(h)\n        h = self.bn(h.reshape(-1, h.shape[-1])).reshape(h.shape)\n"
            "        return self.drop(h)\n") in r.output
    assert ("    def train(self, mode=True):\n        super().train(mode)\n"
            "        # called with training=False: inference mode whatever the model's, as Keras runs it\n"
            "        self.bn.eval()\n"
            "        # called with training=True: training mode whatever the model's, as Keras runs it\n"
            "        self.drop.train()\n        return self\n") in r.output
    assert [f.line for f in r.findings if "in Net.train(), written" in f.message] == [14, 15, 16]


def test_a_sub_layer_called_in_two_modes_is_an_error():
    r, errors = _errors('''
        from tensorflow import keras
        from tensorflow.keras import layers


        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.drop = layers.Dropout(0.5)
                self.bn = layers.BatchNormalization()
                self.blocks = [layers.Dropout(0.2), layers.Dropout(0.3)]

            def call(self, x, training=False):
                h = self.drop(x, training=True)
                h = self.drop(h)
                h = self.bn(h, training=False)
                h = self.bn(h, training=True)
                for b in self.blocks:
                    h = b(h, training=True)
                return self.blocks[0](h, training=False)
    ''')
    assert [f.line for f in errors] == [13, 15, 16, 18, 19], [(f.line, f.message) for f in r.findings]
    assert "self.drop(..., training=True) runs the layer in training mode" in errors[0].message
    assert "self.bn(..., training=False) runs the layer in inference mode" in errors[1].message
    assert "def train(" not in r.output


def test_a_class_with_its_own_train_or_a_sub_layer_passed_on_stays_an_error():
    r, errors = _errors('''
        from tensorflow import keras
        from tensorflow.keras import layers


        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.drop = layers.Dropout(0.5)

            def call(self, x):
                return self.drop(x, training=True)

            def train(self):
                return self


        class Passed(keras.Model):
            def __init__(self):
                super().__init__()
                self.bn = layers.BatchNormalization()

            def call(self, x):
                return self.bn(x, training=False) + self.apply_to(self.bn, x)

            def apply_to(self, layer, x):
                return layer(x)
    ''')
    assert [f.line for f in errors if "whatever the model's" in f.message] == [11, 23]
    assert "def train(self, mode=True)" not in r.output


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
