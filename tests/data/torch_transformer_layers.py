import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self, norm_first=False, activation="relu"):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=24, activation=activation, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16))

    def forward(self, x, mask, padding):
        return self.encoder(x, mask=mask, src_key_padding_mask=padding)


class Decoder(nn.Module):
    def __init__(self, norm_first=False):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(16, 4, 24, activation=F.gelu, batch_first=True, norm_first=norm_first)
        self.stack = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, 24, batch_first=True), 2)

    def forward(self, tgt, memory, tgt_mask, padding, memory_padding):
        y = self.layer(tgt, memory, tgt_mask=tgt_mask, tgt_key_padding_mask=padding,
                       memory_key_padding_mask=memory_padding)
        return self.stack(y, memory, tgt_mask=tgt_mask)


class SequenceFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=1,
                                          dim_feedforward=24)

    def forward(self, src, tgt, src_padding):
        return self.transformer(src, tgt, src_key_padding_mask=src_padding)


class TransformerModel(nn.Transformer):
    """word_language_model's subclass, batch-first: nn.Transformer's encoder, its own decoder, a causal mask kept."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers):
        super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers, batch_first=True)
        self.src_mask = None
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.decoder = nn.Linear(ninp, ntoken)

    def _causal_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != src.size(1):
                self.src_mask = self._causal_mask(src.size(1))
        else:
            self.src_mask = None
        output = self.encoder(self.input_emb(src) * self.d_model ** 0.5, mask=self.src_mask)
        return F.log_softmax(self.decoder(output), dim=-1)
