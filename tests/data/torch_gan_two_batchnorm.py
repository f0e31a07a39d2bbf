# A DCGAN-style loop (eriklindernoren PyTorch-GAN dcgan.py / acgan.py): the generator's step, then the
# discriminator's, one after the other at the loop's level; both models keep BatchNorm's state, and the
# discriminator is called inside the loss expressions (adversarial_loss(discriminator(x), valid)).
import torch
import torch.nn as nn
from gan_prep import prepare, batches


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Sigmoid())

    def forward(self, x):
        return self.model(x)


adversarial_loss = torch.nn.BCELoss()
generator = Generator()
discriminator = Discriminator()
generator, discriminator = prepare(generator, discriminator)
optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.01)
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=0.01)

g_losses, d_losses = [], []
for i, (real, z) in enumerate(batches):
    valid = torch.ones(real.shape[0], 1)
    fake = torch.zeros(real.shape[0], 1)

    optimizer_G.zero_grad()
    gen_imgs = generator(z)
    g_loss = adversarial_loss(discriminator(gen_imgs), valid)
    g_loss.backward()
    optimizer_G.step()

    optimizer_D.zero_grad()
    real_loss = adversarial_loss(discriminator(real), valid)
    fake_loss = adversarial_loss(discriminator(gen_imgs.detach()), fake)
    d_loss = (real_loss + fake_loss) / 2
    d_loss.backward()
    optimizer_D.step()

    g_losses.append(g_loss.item())
    d_losses.append(d_loss.item())
