"""A module whose forward reads the batch size and uses it only to build per-batch copies of tensors that are the
same for every example (fwport/packs/torch2jax/batch.py, Forward.batch_size_argument): tests/test_torch2jax_ops.py
compares PyTorch on the batch with the translation under jax.vmap."""
import torch
from einops import repeat
from torch import nn


class BatchSize(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_token = nn.Parameter(torch.linspace(-1.0, 1.0, 6, dtype=torch.double).reshape(1, 1, 6))
        self.tok = nn.Parameter(torch.linspace(0.5, 2.0, 6, dtype=torch.double).reshape(1, 6))
        self.vec = nn.Parameter(torch.linspace(-2.0, 3.0, 6, dtype=torch.double))

    def forward(self, x):
        b, n, _ = x.shape
        same, batch = x, x.shape[0]
        c1 = repeat(self.cls_token, '1 1 d -> b 1 d', b=b)
        c2 = repeat(self.tok, '... d -> b ... d', b=batch)
        c3 = self.cls_token.expand(batch, -1, -1)
        c4 = self.tok.expand(x.size(0), 3, -1)
        h = torch.zeros(x.size(0), 6, dtype=torch.double) + x[:, 0]
        o = torch.ones((batch, 1, 6), dtype=torch.double)
        f = torch.full((b, 2), 3.0, dtype=torch.double)
        y = torch.cat((c1, same), dim=1) + c3
        z = x[:, 1:, ::2] * 2 + x[..., 0:1][:, 1:]
        c5 = repeat(self.cls_token, '() n d -> b n d', b=b)  # vit-pytorch's class token
        c6 = repeat(self.vec, 'd -> b 1 d', b=b)
        c7 = repeat(self.vec, 'd -> b n d', b=batch, n=n)  # MAE's mask tokens
        c8 = repeat(self.cls_token, '1 1 d -> b f 1 d', b=batch, f=2)
        c9 = repeat(self.vec, 'c -> b c 1', b=x.shape[0])
        return y, c2, c4, h, o, f, x.view(batch, -1), z, c5 + x[:, :1], c6, c7 * x, c8, c9
