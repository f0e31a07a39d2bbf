"""An optimizer kept on a plain trainer object (tensorflow/examples' dcgan and pix2pix):
``self.generator_optimizer = Adam(...)`` in ``__init__``, before ``self.generator = make_generator()``, and
``self.generator_optimizer.apply_gradients(zip(grads, self.generator.trainable_variables))`` in a method.
The torch optimizer is created over ``self.generator.parameters()``, after the line that binds the generator
(training._trainer_optimizer); where fwport cannot tell that this is safe, the optimizer's rule still refuses.
Checked numerically: three GAN steps in Keras and in the translation, losses and weights compared."""
from __future__ import annotations

import json

import numpy as np

from fwport.core.pipeline import translate_source
from helpers import error_messages, needs
from runners import python

GAN = '''import numpy as np
import tensorflow as tf


def make_generator():
    return tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(3)])


def make_discriminator():
    return tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])


class Gan(object):
    def __init__(self, batch_size):
        self.batch_size = batch_size
        self.loss_object = tf.keras.losses.BinaryCrossentropy(from_logits=True)
        self.generator_optimizer = tf.keras.optimizers.Adam(1e-2, beta_1=0.5)
        self.discriminator_optimizer = tf.keras.optimizers.SGD(0.1, momentum=0.9)
        self.generator = make_generator()
        self.discriminator = make_discriminator()
        self.checkpoint = tf.train.Checkpoint(
            generator_optimizer=self.generator_optimizer, generator=self.generator)

    def generator_loss(self, fake):
        return self.loss_object(tf.ones_like(fake), fake)

    def discriminator_loss(self, real, fake):
        return self.loss_object(tf.ones_like(real), real) + self.loss_object(tf.zeros_like(fake), fake)

    def train_step(self, noise, images):
        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            generated = self.generator(noise, training=True)
            real_output = self.discriminator(images, training=True)
            fake_output = self.discriminator(generated, training=True)
            gen_loss = self.generator_loss(fake_output)
            disc_loss = self.discriminator_loss(real_output, fake_output)
        g_grads = gen_tape.gradient(gen_loss, self.generator.trainable_variables)
        d_grads = disc_tape.gradient(disc_loss, self.discriminator.trainable_variables)
        self.generator_optimizer.apply_gradients(zip(g_grads, self.generator.trainable_variables))
        self.discriminator_optimizer.apply_gradients(zip(d_grads, self.discriminator.trainable_variables))
        return gen_loss, disc_loss
'''

#: the same weights on both sides (Keras kernels are (in, out), torch's Linear weight (out, in))
_G = np.linspace(-0.5, 0.5, 12, dtype="float32").reshape(4, 3)
_D = np.array([[0.3], [-0.2], [0.1]], dtype="float32")
DRIVE = {"keras": '''
gan = Gan(2)
gan.generator.set_weights([G, np.full(3, 0.1, "float32")])
gan.discriminator.set_weights([D, np.zeros(1, "float32")])
to = tf.constant
def weights(m):
    return [w.numpy().reshape(-1).tolist() for w in m.trainable_variables]
''', "torch": '''
gan = Gan(2)
with torch.no_grad():
    gan.generator[0].weight.copy_(torch.tensor(G.T)), gan.generator[0].bias.fill_(0.1)
    gan.discriminator[0].weight.copy_(torch.tensor(D.T)), gan.discriminator[0].bias.zero_()
to = torch.tensor
def weights(m):
    return [p.detach().numpy().T.reshape(-1).tolist() for p in m.parameters()]
'''}
REPORT = '''
noise = np.linspace(-1, 1, 8, dtype="float32").reshape(2, 4)
images = np.linspace(0, 1, 6, dtype="float32").reshape(2, 3)
losses = []
for _ in range(3):
    g, d = gan.train_step(to(noise), to(images))
    losses.append([float(g), float(d)])
import json
print("RESULT" + json.dumps({"losses": losses, "g": weights(gan.generator), "d": weights(gan.discriminator)}))
'''


def _run(src: str, tmp_path, name: str, side: str) -> dict:
    head = "import sys\nsys.modules['tensorflow'] = None\n" if side == "torch" else ""
    arrays = f"import numpy as np\nG = np.array({_G.tolist()}, 'float32')\nD = np.array({_D.tolist()}, 'float32')\n"
    if side == "torch":
        arrays += "import torch\n"
    path = tmp_path / name
    path.write_text(head + src + arrays + DRIVE[side] + REPORT)
    p = python(path, side=side, timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, p.stdout + p.stderr
    return json.loads(line[len("RESULT"):])


def test_the_optimizers_are_created_over_their_models_after_them():
    r = translate_source(GAN, "gan.py")
    assert not error_messages(r), r.findings
    lines = [ln.strip() for ln in r.output.splitlines()]
    g = lines.index("self.generator = make_generator()")
    assert lines[g + 1] == ("self.generator_optimizer = torch.optim.Adam(self.generator.parameters(), lr=1e-2, "
                            "betas=(0.5, 0.999), eps=1e-07)")
    d = lines.index("self.discriminator = make_discriminator()")
    assert lines[d + 1].startswith("self.discriminator_optimizer = torch.optim.SGD(self.discriminator.parameters(), "
                                   "lr=0.1, momentum=0.9")
    assert "tf.keras.optimizers" not in r.output


@needs("tensorflow", "torch")
def test_three_gan_steps_match_keras(tmp_path):
    r = translate_source(GAN, "gan.py")
    assert not error_messages(r), r.findings
    keras = _run(GAN, tmp_path, "k.py", "keras")
    torch = _run(r.output, tmp_path, "t.py", "torch")
    np.testing.assert_allclose(torch["losses"], keras["losses"], rtol=1e-4, atol=1e-6)
    for part in ("g", "d"):
        assert len(torch[part]) == len(keras[part])
        for a, b in zip(torch[part], keras[part]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # the weights moved: the steps ran
    assert not np.allclose(keras["g"][0], _G.reshape(-1))


SUM = '''import tensorflow as tf


class Train(object):
    def __init__(self, encoder, decoder):
        self.optimizer = tf.keras.optimizers.Adam()
        self.encoder = encoder
        self.decoder = decoder

    def train_step(self, x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(self.decoder(self.encoder(x)))
        variables = self.encoder.trainable_variables + self.decoder.trainable_variables
        grads = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(grads, self.encoder.trainable_variables + self.decoder.trainable_variables))
'''


def test_two_models_in_one_optimizer():
    r = translate_source(SUM, "t.py")
    assert "self.optimizer = torch.optim.Adam([*self.encoder.parameters(), *self.decoder.parameters()]" in r.output
    lines = [ln.strip() for ln in r.output.splitlines()]
    assert lines.index("self.decoder = decoder") + 1 == next(
        i for i, ln in enumerate(lines) if ln.startswith("self.optimizer = torch.optim.Adam("))


def _refused(src: str) -> bool:
    r = translate_source(src, "t.py")
    return any("a torch optimizer takes the parameters" in m for m in error_messages(r))


def test_an_optimizer_read_before_its_model_exists_is_refused():
    src = GAN.replace("        self.generator = make_generator()\n",
                      "        self.lr = self.generator_optimizer.learning_rate\n"
                      "        self.generator = make_generator()\n")
    assert _refused(src)


def test_an_optimizer_bound_twice_is_refused():
    src = GAN.replace("        return gen_loss, disc_loss\n",
                      "        return gen_loss, disc_loss\n\n    def reset(self):\n"
                      "        self.generator_optimizer = tf.keras.optimizers.Adam(1e-3)\n")
    assert _refused(src)


def test_a_model_bound_outside_init_is_refused():
    src = GAN.replace("        self.generator = make_generator()\n", "        self.build()\n").replace(
        "    def generator_loss(self, fake):", "    def build(self):\n        self.generator = make_generator()\n\n"
        "    def generator_loss(self, fake):")
    assert _refused(src)


def test_a_method_called_between_is_refused():
    src = GAN.replace("        self.generator = make_generator()\n",
                      "        self.setup()\n        self.generator = make_generator()\n").replace(
        "    def generator_loss(self, fake):", "    def setup(self):\n        pass\n\n"
        "    def generator_loss(self, fake):")
    assert _refused(src)
