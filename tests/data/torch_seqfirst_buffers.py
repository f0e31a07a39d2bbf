import math

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    """word_language_model's: a (max_len, 1, E) buffer added to a sequence-first (L, N, E) input."""

    def __init__(self, d_model, max_len=50):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer('pe', pe)

    def forward(self, x):
        return x + self.pe[:x.size(0), :]


class Unsqueezed(nn.Module):
    """language_translation's: the buffer built .unsqueeze(-2), read with one index."""

    def __init__(self, emb_size, maxlen=50):
        super().__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.register_buffer('pos_embedding', pos_embedding)

    def forward(self, token_embedding):
        return token_embedding + self.pos_embedding[:token_embedding.size(0)]


class BatchFirst(nn.Module):
    """A batch-first (1, max_len, E) buffer added to (N, L, E)."""

    def __init__(self, d_model, max_len=50):
        super().__init__()
        pe = torch.randn(max_len, d_model)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return x + self.pe[:, :x.size(1)]


class SeqFirstModel(nn.Module):
    """Tokens (L, N) through an Embedding and the encodings into a sequence-first encoder with a causal mask given."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.pos = PositionalEncoding(8)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0), 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, src, src_mask):
        return self.fc(self.encoder(self.pos(self.emb(src) * math.sqrt(8)), src_mask))


class SeqFirstUnsqueezed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.pos = Unsqueezed(8)
        self.layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)

    def forward(self, src, src_mask):
        return self.layer(self.pos(self.emb(src)), src_mask)


class BatchFirstModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.pos = BatchFirst(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(self.pos(self.emb(x)))


class AttentionMask(nn.Module):
    """A sequence-first attention given its (L, L) mask as an input of the forward."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2)

    def forward(self, x, attn_mask):
        return self.attn(x, x, x, attn_mask=attn_mask)[0]
