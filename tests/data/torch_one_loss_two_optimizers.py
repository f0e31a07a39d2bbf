# One loss training two models, each stepped by its own optimizer (the seq2seq tutorials' encoder_optimizer and
# decoder_optimizer): both cleared, one backward(), both stepped; the encoder's output is read after the steps.
import torch
import torch.nn as nn
from joint_prep import prepare, batches


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4))

    def forward(self, x):
        return self.model(x)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))

    def forward(self, h):
        return self.model(h)


encoder = Encoder()
decoder = Decoder()
encoder, decoder = prepare(encoder, decoder)
criterion = nn.MSELoss()
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=0.01)
decoder_optimizer = torch.optim.SGD(decoder.parameters(), lr=0.05, momentum=0.9)

losses = []
for i, (x, target) in enumerate(batches):
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    hidden = encoder(x)
    out = decoder(hidden)
    loss = criterion(out, target) + 0.1 * hidden.pow(2).mean()
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    losses.append(loss.item())
    last_hidden = hidden.mean().item()
