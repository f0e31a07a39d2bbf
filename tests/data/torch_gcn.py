"""A graph convolutional network as pytorch/examples gcn/main.py writes one (tests/test_torch2jax_sparse.py):
sparse adjacency, torch.spmm, one training step per call of train_iter."""
import torch
from torch import nn
import torch.nn.functional as F


class GraphConv(nn.Module):
    def __init__(self, input_dim, output_dim):
        super().__init__()
        self.kernel = nn.Parameter(torch.Tensor(input_dim, output_dim))
        nn.init.xavier_normal_(self.kernel)

    def forward(self, x, adj):
        support = torch.mm(x, self.kernel)
        return torch.spmm(adj, support)


class GCN(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, dropout_p=0.0):
        super().__init__()
        self.gc1 = GraphConv(input_dim, hidden_dim)
        self.gc2 = GraphConv(hidden_dim, output_dim)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = self.dropout(x)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def graph(edges, values, n):
    return torch.sparse_coo_tensor(edges.T, values, (n, n))


def train_iter(epoch, model, optimizer, criterion, input, target, mask):
    model.train()
    optimizer.zero_grad()
    output = model(*input)
    loss = criterion(output[mask], target[mask])
    loss.backward()
    optimizer.step()


def fit(features, adj, labels, mask, epochs):
    torch.manual_seed(0)
    gcn = GCN(5, 8, 3)
    optimizer = torch.optim.Adam(gcn.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    for epoch in range(epochs):
        train_iter(epoch, gcn, optimizer, criterion, (features.to_sparse(), adj), labels, mask)
    return gcn
