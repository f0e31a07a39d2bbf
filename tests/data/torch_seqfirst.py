"""PyTorch models that hold the batch axis second, as PyTorch's sequence layers take it by default (batch_first=False:
(L, N, features)); the subject of tests/test_torch2jax_seqfirst.py."""
import torch
import torch.nn.functional as F
from torch import nn


class Tagger(nn.Module):
    """A sequence-first LSTM tagger: tokens (L, N) → log-probabilities of the tags, (L * N, tags) as a language
    model's loss reads them (the view merges the steps and the examples)."""

    def __init__(self, vocab=30, dim=8, hidden=12, tags=5):
        super().__init__()
        self.tags = tags
        self.emb = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2)
        self.out = nn.Linear(hidden, tags)

    def forward(self, tokens):
        x = self.emb(tokens)
        h, _ = self.lstm(x)
        scores = self.out(h).view(-1, self.tags)
        return F.log_softmax(scores, dim=1)


class LanguageModel(nn.Module):
    """A GRU over tokens (L, N) with its hidden state (layers, N, hidden) given: both hold the batch axis second."""

    def __init__(self, vocab=20, dim=6, hidden=10, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, hidden, layers)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens, hidden):
        out, hidden = self.rnn(self.emb(tokens), hidden)
        return self.head(out), hidden


class AttentionBlock(nn.Module):
    """A post-norm self-attention block over (L, N, E), nn.MultiheadAttention sequence-first, with a key padding
    mask (N, L), which holds the batch axis first."""

    def __init__(self, dim=8, heads=2, hidden=16):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads)
        self.norm1 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, hidden)
        self.ff2 = nn.Linear(hidden, dim)
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x, padding):
        y, _ = self.attn(x, x, x, key_padding_mask=padding)
        x = self.norm1(x + y)
        return self.norm2(x + self.ff2(F.relu(self.ff1(x))))


class BatchFirstReader(nn.Module):
    """Batch-first inputs (N, L, F) moved to the sequence-first layer's layout and back: x.transpose(0, 1) is, for
    one example, the sequence as it is."""

    def __init__(self, features=5, hidden=7, classes=3):
        super().__init__()
        self.rnn = nn.RNN(features, hidden)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        out, h = self.rnn(x.transpose(0, 1))
        out = out.transpose(0, 1)
        return self.fc(out[:, -1]) + self.fc(h[-1])


class QueryDecoder(nn.Module):
    """DETR's pattern: features (N, C, L) moved to (L, N, C); a query embedding (Q, C), which every example shares,
    copied over the batch (unsqueeze(1).repeat(1, bs, 1)); cross-attention; the result moved back batch-first."""

    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(self, src, query_embed):
        bs, c, n = src.shape
        src = src.permute(2, 0, 1)
        query = query_embed.unsqueeze(1).repeat(1, bs, 1)
        out = self.attn(query, src, src)[0]
        return self.norm(query + out).transpose(0, 1)
