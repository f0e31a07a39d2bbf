# pytorch/examples' regression/main.py: a bare nn.Linear stepped by hand, `param.data.add_(-0.1 * param.grad)`, the
# loss's value read between the loss and backward(), a break on it.
import torch
import torch.nn.functional as F
from sgd_prep import prepare, batches

fc = torch.nn.Linear(3, 1)
fc = prepare(fc)
losses = []
for batch_x, batch_y in batches:
    # Reset gradients
    fc.zero_grad()

    # Forward pass
    output = F.mse_loss(fc(batch_x), batch_y)
    loss = output.item()

    # Backward pass
    output.backward()

    # Apply gradients
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad.data)
    losses.append(loss)

    # Stop criterion
    if loss < 1e-3:
        break
