# A GAN loop as pytorch/examples' dcgan writes it: the discriminator's gradients of its real and fake losses add up
# (two backward() calls, one step), a label filled in place between them, D(x) read with .item() between them, and
# the generator's loss reaching it only through the `fake` computed for the discriminator's step.
import torch
import torch.nn as nn
from gan_prep import prepare, batches


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Identity(), nn.Linear(8, 3))

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Sigmoid())

    def forward(self, x):
        return self.model(x)[:, 0]


generator = Generator()
discriminator = Discriminator()
generator, discriminator = prepare(generator, discriminator)
criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(discriminator.parameters(), lr=0.01)
optimizerG = torch.optim.SGD(generator.parameters(), lr=0.05, momentum=0.9)
real_label = 1
fake_label = 0

g_losses, d_losses, d_xs = [], [], []
for i, (real, z) in enumerate(batches):
    # train with real
    discriminator.zero_grad()
    label = torch.full((real.size(0),), real_label, dtype=real.dtype)
    output = discriminator(real)
    errD_real = criterion(output, label)
    errD_real.backward()
    D_x = output.mean().item()

    # train with fake
    fake = generator(z)
    label.fill_(fake_label)
    output = discriminator(fake.detach())
    errD_fake = criterion(output, label)
    errD_fake.backward()
    D_G_z1 = output.mean().item()
    errD = errD_real + errD_fake
    optimizerD.step()

    generator.zero_grad()
    label.fill_(real_label)
    output = discriminator(fake)
    errG = criterion(output, label)
    errG.backward()
    D_G_z2 = output.mean().item()
    optimizerG.step()
    g_losses.append(errG.item())
    d_losses.append(errD.item())
    d_xs.append([D_x, D_G_z1, D_G_z2])
    last_fake = fake.mean().item()
