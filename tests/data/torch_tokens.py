"""A small vision transformer in the style of vit-pytorch: an einops Rearrange layer makes (tokens, features)
examples, per-vector layers (Linear, LayerNorm) inside Sequentials and called directly, einops patterns that keep
the batch axis, a ModuleList of [Attention, FeedForward] pairs, and a module that unpacks `b, n, _ = x.shape`."""
import torch
from torch import nn
from einops import rearrange, repeat
from einops.layers.torch import Rearrange


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim, heads=2, dim_head=8):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(0.0)) if inner != dim else nn.Identity()

    def forward(self, x):
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), qkv)
        attn = (torch.matmul(q, k.transpose(-1, -2)) * self.scale).softmax(dim=-1)
        out = rearrange(torch.matmul(attn, v), 'b h n d -> b n (h d)')
        return self.to_out(out)


class Pool(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, _ = x.shape
        return self.proj(x).mean(dim=1) * n


class Tiny(nn.Module):
    def __init__(self, image_size=8, patch=4, channels=3, dim=16, depth=2, classes=5):
        super().__init__()
        self.patch_size = ph, pw = patch, patch
        patch_dim = channels * ph * pw
        self.to_patches = nn.Sequential(
            Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1=ph, p2=pw),
            nn.LayerNorm(patch_dim),
            nn.Linear(patch_dim, dim),
        )
        self.cls_token = nn.Parameter(torch.randn(1, dim))
        self.pos = nn.Parameter(torch.randn((image_size // patch) ** 2 + 1, dim))
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([Attention(dim), FeedForward(dim, 2 * dim)]))
        self.pool = Pool(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, img):
        batch = img.shape[0]
        x = self.to_patches(img)
        cls = repeat(self.cls_token, '... d -> b ... d', b=batch)
        x = torch.cat((cls, x), dim=1)
        x = x + self.pos[:x.shape[1]]
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.head(x[:, 0]) + self.head(self.pool(x))
