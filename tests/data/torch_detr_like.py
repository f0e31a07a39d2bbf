"""A small encoder-decoder in DETR's style (issue 10), for tests/test_torch2jax_detr.py: sequence-first attention
((L, N, E)), layers whose forward hands over to a method chosen by a flag (post_norm / pre_norm) and a helper adding
positions, layers cloned from one instance by a module-level function (copy.deepcopy), a LayerNorm given to the
encoder and decoder (or None), an activation chosen by name, a query embedding shared by the batch, and the decoder's
intermediate outputs stacked."""
import copy
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn, Tensor


def clone_layers(layer, count):
    return nn.ModuleList([copy.deepcopy(layer) for _ in range(count)])


def pick_activation(name):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise ValueError(name)


class EncoderBlock(nn.Module):
    def __init__(self, dim, heads, hidden, dropout=0.1, activation="relu", pre_norm=False):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.norm_a = nn.LayerNorm(dim)
        self.norm_b = nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout)
        self.drop_a = nn.Dropout(dropout)
        self.act = pick_activation(activation)
        self.pre_norm = pre_norm

    def add_pos(self, x, pos: Optional[Tensor]):
        return x if pos is None else x + pos

    def post_norm_path(self, x, padding: Optional[Tensor] = None, pos: Optional[Tensor] = None):
        q = k = self.add_pos(x, pos)
        y = self.attn(q, k, value=x, key_padding_mask=padding)[0]
        x = self.norm_a(x + self.drop_a(y))
        y = self.down(self.drop(self.act(self.up(x))))
        return self.norm_b(x + y)

    def pre_norm_path(self, x, padding: Optional[Tensor] = None, pos: Optional[Tensor] = None):
        h = self.norm_a(x)
        q = k = self.add_pos(h, pos)
        x = x + self.drop_a(self.attn(q, k, value=h, key_padding_mask=padding)[0])
        h = self.norm_b(x)
        return x + self.down(self.drop(self.act(self.up(h))))

    def forward(self, x, padding: Optional[Tensor] = None, pos: Optional[Tensor] = None):
        if self.pre_norm:
            return self.pre_norm_path(x, padding, pos)
        return self.post_norm_path(x, padding, pos)


class DecoderBlock(nn.Module):
    def __init__(self, dim, heads, hidden, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, heads, dropout=dropout)
        self.cross_attn = nn.MultiheadAttention(dim, heads, dropout=dropout)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.norm_a = nn.LayerNorm(dim)
        self.norm_b = nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout)

    def add_pos(self, x, pos: Optional[Tensor]):
        return x if pos is None else x + pos

    def forward(self, tgt, memory, memory_padding: Optional[Tensor] = None, pos: Optional[Tensor] = None,
                query_pos: Optional[Tensor] = None):
        q = k = self.add_pos(tgt, query_pos)
        tgt = self.norm_a(tgt + self.self_attn(q, k, value=tgt)[0])
        y = self.cross_attn(query=self.add_pos(tgt, query_pos), key=self.add_pos(memory, pos), value=memory,
                            key_padding_mask=memory_padding)[0]
        tgt = tgt + self.drop(y)
        return self.norm_b(tgt + self.down(F.relu(self.up(tgt))))


class Encoder(nn.Module):
    def __init__(self, block, count, norm=None):
        super().__init__()
        self.blocks = clone_layers(block, count)
        self.norm = norm

    def forward(self, x, padding: Optional[Tensor] = None, pos: Optional[Tensor] = None):
        for block in self.blocks:
            x = block(x, padding=padding, pos=pos)
        if self.norm is not None:
            x = self.norm(x)
        return x


class Decoder(nn.Module):
    def __init__(self, block, count, norm):
        super().__init__()
        self.blocks = clone_layers(block, count)
        self.norm = norm

    def forward(self, tgt, memory, memory_padding: Optional[Tensor] = None, pos: Optional[Tensor] = None,
                query_pos: Optional[Tensor] = None):
        steps = []
        for block in self.blocks:
            tgt = block(tgt, memory, memory_padding=memory_padding, pos=pos, query_pos=query_pos)
            steps.append(self.norm(tgt))
        return torch.stack(steps)


class EncoderDecoder(nn.Module):
    def __init__(self, dim=16, heads=2, hidden=32, blocks=2, dropout=0.1, activation="relu", pre_norm=False):
        super().__init__()
        enc_norm = nn.LayerNorm(dim) if pre_norm else None
        self.encoder = Encoder(EncoderBlock(dim, heads, hidden, dropout, activation, pre_norm), blocks, enc_norm)
        self.decoder = Decoder(DecoderBlock(dim, heads, hidden, dropout), blocks, nn.LayerNorm(dim))

    def forward(self, features, padding, queries, pos):
        n, c, h, w = features.shape
        x = features.flatten(2).permute(2, 0, 1)
        pos = pos.flatten(2).permute(2, 0, 1)
        queries = queries.unsqueeze(1).repeat(1, n, 1)
        padding = padding.flatten(1)
        memory = self.encoder(x, padding=padding, pos=pos)
        out = self.decoder(torch.zeros_like(queries), memory, memory_padding=padding, pos=pos, query_pos=queries)
        return out.transpose(1, 2), memory.permute(1, 2, 0).view(n, c, h, w)
