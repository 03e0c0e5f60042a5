"""``loss.backward()`` on one scalar tensor (Tensor.backward's commonest call, checked without the
general path's loops): the same gradients, retain/create_graph defaults and errors as torch."""
import pytest

import plugtorch

torch = pytest.importorskip("torch", reason="PyTorch is the test oracle; pip install torch==2.13.0")


def test_scalar_backward_matches_torch_and_frees_the_graph():
    values = [[0.5, -1.0], [2.0, 0.25]]
    grads = []
    for lib in (plugtorch, torch):
        x = lib.tensor(values, requires_grad=True)
        loss = (x.tanh() * x).sum()
        loss.backward()
        grads.append(x.grad.flatten().tolist())
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            loss.backward()  # retain_graph defaults to create_graph, False
    assert grads[0] == pytest.approx(grads[1], rel=1e-6)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")  # torch's, on the cycle
def test_scalar_backward_with_create_graph_gives_second_derivatives():
    grads = []
    for lib in (plugtorch, torch):
        x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        (x.pow(3).sum()).backward(create_graph=True)
        first = x.grad
        x.grad = None
        first.sum().backward()  # the graph was kept: create_graph keeps it by default
        grads.append(x.grad.tolist())
    assert grads[0] == pytest.approx(grads[1], rel=1e-6)


@pytest.mark.parametrize("case", ["no_graph", "complex", "not_scalar"])
def test_scalar_backward_errors_match_torch(case):
    messages = []
    for lib in (plugtorch, torch):
        if case == "no_graph":
            t = lib.tensor(1.0)
        elif case == "complex":
            t = (lib.tensor([1.0, 2.0], requires_grad=True) * (1 + 2j)).sum()
        else:
            t = lib.ones(2, requires_grad=True) * 2
        with pytest.raises(RuntimeError) as info:
            t.backward()
        messages.append(str(info.value).split(" but got")[0])
    assert messages[0] == messages[1]
