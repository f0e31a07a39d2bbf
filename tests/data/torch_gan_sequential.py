# A GAN as yunjey's pytorch-tutorial writes it (03-advanced/generative_adversarial_network): the discriminator and
# the generator are nn.Sequential models built at module level, trained by a reset_grad() loop.
import torch
import torch.nn as nn
from gan_prep import prepare, batches

torch.manual_seed(0)
latent_size = 4
hidden_size = 8
image_size = 6

# Discriminator
D = nn.Sequential(
    nn.Linear(image_size, hidden_size),
    nn.LeakyReLU(0.2),
    nn.Linear(hidden_size, 1),
    nn.Sigmoid())

# Generator
G = nn.Sequential(
    nn.Linear(latent_size, hidden_size),
    nn.ReLU(),
    nn.Linear(hidden_size, image_size),
    nn.Tanh())

D, G = prepare(D, G)
criterion = nn.BCELoss()
d_optimizer = torch.optim.Adam(D.parameters(), lr=0.01)
g_optimizer = torch.optim.Adam(G.parameters(), lr=0.01)


def reset_grad():
    d_optimizer.zero_grad()
    g_optimizer.zero_grad()


d_losses, g_losses = [], []
for i, (images, z) in enumerate(batches):
    real_labels = torch.ones(images.shape[0], 1)
    fake_labels = torch.zeros(images.shape[0], 1)

    outputs = D(images)
    d_loss_real = criterion(outputs, real_labels)
    fake_images = G(z)
    outputs = D(fake_images)
    d_loss_fake = criterion(outputs, fake_labels)
    d_loss = d_loss_real + d_loss_fake
    reset_grad()
    d_loss.backward()
    d_optimizer.step()

    fake_images = G(z)
    outputs = D(fake_images)
    g_loss = criterion(outputs, real_labels)
    reset_grad()
    g_loss.backward()
    g_optimizer.step()
    d_losses.append(d_loss.item())
    g_losses.append(g_loss.item())
