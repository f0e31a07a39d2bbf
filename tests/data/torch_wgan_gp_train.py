# The training loop of eriklindernoren PyTorch-GAN's wgan_gp.py, small: the critic's loss adds the gradient penalty
# (torch.autograd.grad of the critic's output with respect to interpolated images, create_graph=True), whose
# interpolation weights come from numpy's random generator at every step; the generator every n_critic steps.
import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
from torch.autograd import Variable
from gan_prep import prepare, batches

img_shape = (1, 2, 2)
n_critic = 2
lambda_gp = 10
cuda = True if torch.cuda.is_available() else False
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.model = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2, inplace=True), nn.Linear(8, int(np.prod(img_shape))),
                                   nn.Tanh())

    def forward(self, z):
        img = self.model(z)
        img = img.view(img.shape[0], *img_shape)
        return img


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.model = nn.Sequential(nn.Linear(int(np.prod(img_shape)), 8), nn.LeakyReLU(0.2, inplace=True), nn.Linear(8, 1))

    def forward(self, img):
        img_flat = img.view(img.shape[0], -1)
        validity = self.model(img_flat)
        return validity


generator = Generator()
discriminator = Discriminator()
generator, discriminator = prepare(generator, discriminator)
optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.01, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=0.01, betas=(0.5, 0.999))


def compute_gradient_penalty(D, real_samples, fake_samples):
    """Calculates the gradient penalty loss for WGAN GP"""
    alpha = Tensor(np.random.random((real_samples.size(0), 1, 1, 1)))
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = Variable(Tensor(real_samples.shape[0], 1).fill_(1.0), requires_grad=False)
    gradients = autograd.grad(
        outputs=d_interpolates,
        inputs=interpolates,
        grad_outputs=fake,
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]
    gradients = gradients.view(gradients.size(0), -1)
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
    return gradient_penalty


d_losses = []
g_losses = []
np.random.seed(0)
for i, (imgs, z) in enumerate(batches):
    real_imgs = Variable(imgs.type(Tensor))
    optimizer_D.zero_grad()
    fake_imgs = generator(z)
    real_validity = discriminator(real_imgs)
    fake_validity = discriminator(fake_imgs)
    gradient_penalty = compute_gradient_penalty(discriminator, real_imgs.data, fake_imgs.data)
    d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + lambda_gp * gradient_penalty
    d_loss.backward()
    optimizer_D.step()
    d_losses.append(d_loss.item())

    optimizer_G.zero_grad()
    if i % n_critic == 0:
        fake_imgs = generator(z)
        fake_validity = discriminator(fake_imgs)
        g_loss = -torch.mean(fake_validity)
        g_loss.backward()
        optimizer_G.step()
        g_losses.append(g_loss.item())
