# LBFGS as pytorch/examples time_sequence_prediction trains: a closure re-evaluating the loss, optimizer.step(closure)
# once per outer step (max_iter=20 iterations each by default, no line search).
import torch
import torch.nn as nn
from lbfgs_prep import prepare, x, y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.fc(x)))


net = Net()
net = prepare(net)
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(net.parameters(), lr=0.8)
losses = []
for i in range(2):
    def closure():
        optimizer.zero_grad()
        out = net(x)
        loss = criterion(out, y)
        losses.append(loss.item())
        loss.backward()
        return loss
    optimizer.step(closure)
