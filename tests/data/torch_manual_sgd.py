# A loop stepping by hand as pytorch/examples' word_language_model does without an optimizer: model.zero_grad(),
# the loss, backward(), clip_grad_norm_ and `p.data.add_(p.grad, alpha=-lr)` over the parameters; the learning
# rate changes between steps.
import torch
import torch.nn as nn
import torch.nn.functional as F
from sgd_prep import prepare, batches


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 8)
        self.fc2 = nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


model = prepare(Net())
lr = 0.5
clip = 0.05
losses = []
for x, y in batches:
    model.zero_grad()
    output = model(x)
    loss = F.mse_loss(output, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    losses.append(loss.item())
    lr = lr * 0.8
