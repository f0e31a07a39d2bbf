# A WGAN-style loop (eriklindernoren PyTorch-GAN): the critic steps at every batch, the generator inside
# `if i % n_critic == 0:` with its zero_grad() before the if; the generator keeps BatchNorm's state.
import torch
import torch.nn as nn
from gan_prep import prepare, batches

n_critic = 2


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def forward(self, x):
        return self.model(x)


generator = Generator()
discriminator = Discriminator()
generator, discriminator = prepare(generator, discriminator)
optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.01)
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=0.01)

g_losses = []
for i, (real, z) in enumerate(batches):
    optimizer_D.zero_grad()
    fake = generator(z)
    d_loss = -torch.mean(discriminator(real)) + torch.mean(discriminator(fake))
    d_loss.backward()
    optimizer_D.step()

    optimizer_G.zero_grad()
    # the generator every n_critic steps
    if i % n_critic == 0:
        fake = generator(z)
        g_loss = -torch.mean(discriminator(fake))
        g_loss.backward()
        optimizer_G.step()
        g_losses.append(g_loss.item())
        last_fake = fake.mean().item()
