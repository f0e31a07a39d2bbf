# Two generators trained by one optimizer over their chained parameters (PyTorch-GAN's cyclegan / discogan:
# optimizer_G = Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()))), their loss read through a discriminator
# stepped by an optimizer of its own on the generated samples detached.
import itertools

import torch
import torch.nn as nn
from chain_prep import prepare, batches


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 3))

    def forward(self, x):
        return self.model(x)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x):
        return self.model(x)


G_AB = Generator()
G_BA = Generator()
D_B = Discriminator()
G_AB, G_BA, D_B = prepare(G_AB, G_BA, D_B)
mse = nn.MSELoss()
l1 = nn.L1Loss()
optimizer_G = torch.optim.Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()), lr=0.01, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(D_B.parameters(), lr=0.02)

losses = []
for i, (real_A, real_B) in enumerate(batches):
    optimizer_G.zero_grad()
    fake_B = G_AB(real_A)
    loss_GAN = mse(D_B(fake_B), torch.ones(real_A.shape[0], 1))
    loss_cycle = l1(G_BA(fake_B), real_A)
    loss_G = loss_GAN + 10.0 * loss_cycle
    loss_G.backward()
    optimizer_G.step()

    optimizer_D.zero_grad()
    loss_real = mse(D_B(real_B), torch.ones(real_B.shape[0], 1))
    loss_fake = mse(D_B(fake_B.detach()), torch.zeros(real_A.shape[0], 1))
    loss_D = (loss_real + loss_fake) / 2
    loss_D.backward()
    optimizer_D.step()
    losses.append([loss_G.item(), loss_D.item()])
