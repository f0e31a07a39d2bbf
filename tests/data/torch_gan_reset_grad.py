# A GAN loop as yunjey's pytorch-tutorial writes it: a reset_grad() helper clears both optimizers before each
# backward(); the discriminator's loss reads the generator's output (not detached), the generator's step draws again.
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
        return self.model(x)


generator = Generator()
discriminator = Discriminator()
generator, discriminator = prepare(generator, discriminator)
criterion = nn.BCELoss()
d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=0.01)
g_optimizer = torch.optim.SGD(generator.parameters(), lr=0.05, momentum=0.9)


def reset_grad():
    d_optimizer.zero_grad()
    g_optimizer.zero_grad()


g_losses = []
for i, (real, z) in enumerate(batches):
    real_labels = torch.ones(real.shape[0], 1)
    fake_labels = torch.zeros(real.shape[0], 1)

    # Train the discriminator
    outputs = discriminator(real)
    d_loss_real = criterion(outputs, real_labels)
    fake = generator(z)
    outputs = discriminator(fake)
    d_loss_fake = criterion(outputs, fake_labels)
    d_loss = d_loss_real + d_loss_fake
    reset_grad()
    d_loss.backward()
    d_optimizer.step()

    # Train the generator
    fake = generator(z)
    outputs = discriminator(fake)
    g_loss = criterion(outputs, real_labels)
    reset_grad()
    g_loss.backward()
    g_optimizer.step()
    g_losses.append(g_loss.item())
    last_fake = fake.mean().item()
