"""pytorch/examples' gcn/main.py and gat/main.py (commit 77f55b9) written once against a ``torch``
argument and run on plugtorch and on PyTorch, from the same initial weights and on the same
Cora-shaped graph: every epoch's training and validation loss and accuracy agree.

The example code (GraphConv, GCN, GraphAttentionLayer, GAT, load_cora, train_iter, test) is
pytorch/examples', BSD 3-Clause License, Copyright (c) 2017, Pytorch contributors. Left out of
the scripts: the argument parser, the download of Cora and the parsing of its text files
(``np.genfromtxt``): a seeded synthetic graph of Cora's shape stands in (2708 nodes, 1433
binary features about 18 per node, 7 classes, 5429 citations), handed to load_cora as the
arrays it parses from the files. Dropout is 0 so that both libraries compute the same thing
(their random streams differ). The GCN runs on the full Cora shape; the GAT, whose attention
is dense (heads x nodes x nodes), on a fifth of it (541 nodes, 1085 citations) with 2 heads of
8 hidden units, to stay quick.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

import plugtorch

torch_ref = pytest.importorskip("torch", reason="PyTorch is the reference these runs are compared with")

N_NODES, N_FEATURES, N_CLASSES, N_EDGES = 2708, 1433, 7, 5429
# PyTorch's note that sparse_coo_tensor does not check its indices unless asked
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")


@pytest.fixture(scope="module")
def cora():
    return make_cora()


@pytest.fixture(scope="module")
def small_cora():
    return make_cora(N_NODES // 5, N_EDGES // 5)


def make_cora(n_nodes=N_NODES, n_edges=N_EDGES):
    """What load_cora reads from cora.content and cora.cites, seeded: paper ids, binary word
    features, class names, and citations between paper ids (some repeated, as a file may)."""
    rng = np.random.default_rng(30)
    ids = rng.choice(10 ** 6, n_nodes, replace=False).astype(np.int32)
    features = np.zeros((n_nodes, N_FEATURES), dtype=np.int32)
    for i in range(n_nodes):
        features[i, rng.choice(N_FEATURES, rng.integers(5, 32), replace=False)] = 1
    features[7] = 0  # a paper without words: the example's 1/0 -> inf -> 0 path
    names = np.array(["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods",
                      "Reinforcement_Learning", "Rule_Learning", "Theory"])
    classes = names[rng.integers(0, N_CLASSES, n_nodes)]
    src, dst = rng.integers(0, n_nodes, n_edges), rng.integers(0, n_nodes, n_edges)
    cites = np.stack([ids[src], ids[dst]], 1)
    return SimpleNamespace(ids=ids, features=features, classes=classes, cites=cites,
                           perm=rng.permutation(n_nodes))


def gcn_example(torch):
    """gcn/main.py with ``torch`` bound to the library it runs on."""
    nn, F = torch.nn, torch.nn.functional

    class GraphConv(nn.Module):
        def __init__(self, input_dim, output_dim, use_bias=False):
            super(GraphConv, self).__init__()  # noqa: UP008 (the example's spelling)
            self.kernel = nn.Parameter(torch.Tensor(input_dim, output_dim))
            nn.init.xavier_normal_(self.kernel)
            self.bias = None
            if use_bias:
                self.bias = nn.Parameter(torch.Tensor(output_dim))
                nn.init.zeros_(self.bias)

        def forward(self, input_tensor, adj_mat):
            support = torch.mm(input_tensor, self.kernel)
            output = torch.spmm(adj_mat, support)
            if self.bias is not None:
                output = output + self.bias
            return output

    class GCN(nn.Module):
        def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.1):
            super(GCN, self).__init__()  # noqa: UP008
            self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
            self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input_tensor, adj_mat):
            x = self.gc1(input_tensor, adj_mat)
            x = F.relu(x)
            x = self.dropout(x)
            x = self.gc2(x, adj_mat)
            return F.log_softmax(x, dim=1)

    def load_cora(cora, device='cpu'):
        # the files' contents, as load_cora parses them (content_tensor[:, 1:-1], [:, -1], [:, 0])
        features_np, classes_np, idx, cites_tensor = cora.features, cora.classes, cora.ids, cora.cites

        features = torch.FloatTensor(features_np)
        scale_vector = torch.sum(features, dim=1)
        scale_vector = 1 / scale_vector
        scale_vector[scale_vector == float('inf')] = 0
        scale_vector = torch.diag(scale_vector).to_sparse()
        features = scale_vector @ features

        classes, labels = np.unique(classes_np, return_inverse=True)
        labels = torch.LongTensor(labels)

        idx_map = {id: pos for pos, id in enumerate(idx)}
        edges = np.array(
            list(map(lambda edge: [idx_map[edge[0]], idx_map[edge[1]]],
                cites_tensor)), dtype=np.int32)

        V = len(idx)
        E = edges.shape[0]
        adj_mat = torch.sparse_coo_tensor(edges.T, torch.ones(E), (V, V), dtype=torch.int64)
        adj_mat = torch.eye(V) + adj_mat

        degree_mat = torch.sum(adj_mat, dim=1)
        degree_mat = torch.sqrt(1 / degree_mat)
        degree_mat[degree_mat == float('inf')] = 0
        degree_mat = torch.diag(degree_mat).to_sparse()

        adj_mat = degree_mat @ adj_mat @ degree_mat

        return features.to_sparse().to(device), labels.to(device), adj_mat.to_sparse().to(device)

    return SimpleNamespace(GCN=GCN, load_cora=load_cora, **_loop(torch))


def gat_example(torch):
    """gat/main.py with ``torch`` bound to the library it runs on."""
    nn, F = torch.nn, torch.nn.functional

    class GraphAttentionLayer(nn.Module):
        def __init__(self, in_features: int, out_features: int, n_heads: int, concat: bool = False,
                     dropout: float = 0.4, leaky_relu_slope: float = 0.2):
            super(GraphAttentionLayer, self).__init__()  # noqa: UP008
            self.n_heads = n_heads
            self.concat = concat
            self.dropout = dropout
            if concat:
                self.out_features = out_features
                assert out_features % n_heads == 0
                self.n_hidden = out_features // n_heads
            else:
                self.n_hidden = out_features
            self.W = nn.Parameter(torch.empty(size=(in_features, self.n_hidden * n_heads)))
            self.a = nn.Parameter(torch.empty(size=(n_heads, 2 * self.n_hidden, 1)))
            self.leakyrelu = nn.LeakyReLU(leaky_relu_slope)
            self.softmax = nn.Softmax(dim=1)
            self.reset_parameters()

        def reset_parameters(self):
            nn.init.xavier_normal_(self.W)
            nn.init.xavier_normal_(self.a)

        def _get_attention_scores(self, h_transformed):
            source_scores = torch.matmul(h_transformed, self.a[:, :self.n_hidden, :])
            target_scores = torch.matmul(h_transformed, self.a[:, self.n_hidden:, :])
            e = source_scores + target_scores.mT
            return self.leakyrelu(e)

        def forward(self, h, adj_mat):
            n_nodes = h.shape[0]
            h_transformed = torch.mm(h, self.W)
            h_transformed = F.dropout(h_transformed, self.dropout, training=self.training)
            h_transformed = h_transformed.view(n_nodes, self.n_heads, self.n_hidden).permute(1, 0, 2)
            e = self._get_attention_scores(h_transformed)
            connectivity_mask = -9e16 * torch.ones_like(e)
            e = torch.where(adj_mat > 0, e, connectivity_mask)
            attention = F.softmax(e, dim=-1)
            attention = F.dropout(attention, self.dropout, training=self.training)
            h_prime = torch.matmul(attention, h_transformed)
            if self.concat:
                h_prime = h_prime.permute(1, 0, 2).contiguous().view(n_nodes, self.out_features)
            else:
                h_prime = h_prime.mean(dim=0)
            return h_prime

    class GAT(nn.Module):
        def __init__(self, in_features, n_hidden, n_heads, num_classes, concat=False, dropout=0.4,
                     leaky_relu_slope=0.2):
            super(GAT, self).__init__()  # noqa: UP008
            self.gat1 = GraphAttentionLayer(
                in_features=in_features, out_features=n_hidden, n_heads=n_heads,
                concat=concat, dropout=dropout, leaky_relu_slope=leaky_relu_slope
                )
            self.gat2 = GraphAttentionLayer(
                in_features=n_hidden, out_features=num_classes, n_heads=1,
                concat=False, dropout=dropout, leaky_relu_slope=leaky_relu_slope
                )

        def forward(self, input_tensor, adj_mat):
            x = self.gat1(input_tensor, adj_mat)
            x = F.elu(x)
            x = self.gat2(x, adj_mat)
            return F.log_softmax(x, dim=1)

    def load_cora(cora, device='cpu'):
        features_np, classes_np, idx, cites_tensor = cora.features, cora.classes, cora.ids, cora.cites

        features = torch.FloatTensor(features_np)
        scale_vector = torch.sum(features, dim=1)
        scale_vector = 1 / scale_vector
        scale_vector[scale_vector == float('inf')] = 0
        scale_vector = torch.diag(scale_vector).to_sparse()
        features = scale_vector @ features

        classes, labels = np.unique(classes_np, return_inverse=True)
        labels = torch.LongTensor(labels)

        idx_map = {id: pos for pos, id in enumerate(idx)}
        edges = np.array(
            list(map(lambda edge: [idx_map[edge[0]], idx_map[edge[1]]],
                cites_tensor)), dtype=np.int32)

        V = len(idx)
        E = edges.shape[0]
        adj_mat = torch.sparse_coo_tensor(edges.T, torch.ones(E), (V, V), dtype=torch.int64)
        adj_mat = torch.eye(V) + adj_mat

        return features.to(device), labels.to(device), adj_mat.to(device)

    return SimpleNamespace(GAT=GAT, load_cora=load_cora, **_loop(torch))


def _loop(torch):
    """train_iter and test, the same in both scripts; train_iter returns its figures."""

    def train_iter(epoch, model, optimizer, criterion, input, target, mask_train, mask_val, print_every=10):
        start_t = time.time()
        model.train()
        optimizer.zero_grad()
        output = model(*input)
        loss = criterion(output[mask_train], target[mask_train])
        loss.backward()
        optimizer.step()
        loss_train, acc_train = test(model, criterion, input, target, mask_train)
        loss_val, acc_val = test(model, criterion, input, target, mask_val)
        if epoch % print_every == 0:
            print(f'Epoch: {epoch:04d} ({(time.time() - start_t):.4f}s) loss_train: {loss_train:.4f} '
                  f'acc_train: {acc_train:.4f} loss_val: {loss_val:.4f} acc_val: {acc_val:.4f}')
        return loss.item(), loss_train, acc_train, loss_val, acc_val

    def test(model, criterion, input, target, mask):
        model.eval()
        with torch.no_grad():
            output = model(*input)
            output, target = output[mask], target[mask]
            loss = criterion(output, target)
            acc = (output.argmax(dim=1) == target).float().sum() / len(target)
        return loss.item(), acc.item()

    return {"train_iter": train_iter, "test": test}


def _train(torch, ex, make_model, cora, state, epochs, lr, split):
    features, labels, adj_mat = ex.load_cora(cora, device=torch.device('cpu'))
    idx = torch.tensor(cora.perm)
    idx_test, idx_val, idx_train = idx[:split[0]], idx[split[0]:split[1]], idx[split[1]:]
    model = make_model(torch, features, labels)
    if state is not None:  # PyTorch's initial weights
        model.load_state_dict({k: plugtorch.tensor(v.numpy()) for k, v in state.items()})
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    criterion = torch.nn.NLLLoss()
    figures = [ex.train_iter(epoch + 1, model, optimizer, criterion, (features, adj_mat), labels,
                             idx_train, idx_val, print_every=2) for epoch in range(epochs)]
    figures.append(ex.test(model, criterion, (features, adj_mat), labels, idx_test))
    return figures, start, (features, adj_mat)


def _compare(make_example, make_model, cora, epochs, lr, split):
    ref, start, ref_inputs = _train(torch_ref, make_example(torch_ref), make_model, cora, None, epochs, lr, split)
    ours, _, our_inputs = _train(plugtorch, make_example(plugtorch), make_model, cora, start, epochs, lr, split)
    for (a, b) in zip(ref_inputs, our_inputs):  # the loaded graph: the features and the adjacency
        a = a.to_dense() if a.is_sparse else a
        b = b.to_dense() if b.is_sparse else b
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.array([f[:3] for f in ours[:-1]]), np.array([f[:3] for f in ref[:-1]]),
                               rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.array(ours[-1]), np.array(ref[-1]), rtol=2e-4, atol=2e-5)
    assert ours[-2][0] < ours[0][0]  # it learns: the last epoch's loss is below the first's
    return our_inputs


def test_gcn_trains_as_pytorch(cora):
    def make(torch, features, labels):
        return gcn_example(torch).GCN(features.shape[1], 16, labels.max().item() + 1, True, 0.0)

    features, adj_mat = _compare(gcn_example, make, cora, epochs=4, lr=0.01, split=(1000, 1500))
    # load_cora hands the model sparse COO tensors, which GraphConv multiplies with mm and spmm
    assert features.is_sparse and adj_mat.is_sparse and adj_mat.is_coalesced()
    assert isinstance(adj_mat, plugtorch.Tensor) and adj_mat.layout is plugtorch.sparse_coo
    assert tuple(features.shape) == (N_NODES, N_FEATURES)


def test_gat_trains_as_pytorch(small_cora):
    def make(torch, features, labels):
        return gat_example(torch).GAT(in_features=features.shape[1], n_hidden=8, n_heads=2,
                                      num_classes=labels.max().item() + 1, concat=False, dropout=0.0)

    _compare(gat_example, make, small_cora, epochs=4, lr=0.005, split=(240, 320))

