"""Re-creates pytorch/examples fx/replace_op.py (commit 77f55b9): the demo's source, copied below (trailing
spaces dropped), runs as a script with `import torch` resolving to plugtorch and again on torch;
the graph after replacing every addition with bitwise_and is torch's, and computes as it."""
from __future__ import annotations

from fx_demo_harness import assert_same_graph, code_as_torch, run_demo

import plugtorch

SOURCE = r'''
import torch
from torch.fx import symbolic_trace
import operator

"""
How to Replace One Op With Another

1. Iterate through all Nodes in your GraphModule's Graph.
2. Determine if the current Node should be replaced. (Suggested: match
on the Node's ``target`` attribute).
3. Create a replacement Node and add it to the Graph.
4. Use the FX built-in ``replace_all_uses_with`` to replace all uses of
the current Node with the replacement.
5. Delete the old Node from the graph.
6. Call ``recompile`` on the GraphModule. This updates the generated
Python code to reflect the new Graph state.

Currently, FX does not provide any way to guarantee that replaced
operators are syntactically valid. It's up to the user to confirm that
any new operators will work with the existing operands.

The following code demonstrates an example of replacing any instance of
addition with a bitwise AND.

To examine how the Graph evolves during op replacement, add the
statement `print(traced.graph)` after the line you want to inspect.
Alternatively, call `traced.graph.print_tabular()` to see the IR in a
tabular format.
"""

# Sample module
class M(torch.nn.Module):
    def forward(self, x, y):
        return x + y, torch.add(x, y), x.add(y)

# Symbolically trace an instance of the module
traced = symbolic_trace(M())

# As demonstrated in the above example, there are several different ways
# to denote addition. The possible cases are:
#     1. `x + y` - A `call_function` Node with target `operator.add`.
#         We can match for equality on that `operator.add` directly.
#     2. `torch.add(x, y)` - A `call_function` Node with target
#         `torch.add`. Similarly, we can match this function directly.
#     3. `x.add(y)` - The Tensor method call, whose target we can match
#         as a string.

patterns = set([operator.add, torch.add, "add"])

# Go through all the nodes in the Graph
for n in traced.graph.nodes:
    # If the target matches one of the patterns
    if any(n.target == pattern for pattern in patterns):
        # Set the insert point, add the new node, and replace all uses
        # of `n` with the new node
        with traced.graph.inserting_after(n):
            new_node = traced.graph.call_function(torch.bitwise_and, n.args, n.kwargs)
            n.replace_all_uses_with(new_node)
        # Remove the old node from the graph
        traced.graph.erase_node(n)

# Don't forget to recompile!
traced.recompile()
'''


def test_replace_op_matches_torch(torch):
    ours, _ = run_demo(SOURCE, "plugtorch")
    theirs, _ = run_demo(SOURCE, "torch")
    assert code_as_torch(ours["traced"].code) == theirs["traced"].code
    assert_same_graph(ours["traced"].graph, theirs["traced"].graph)
    targets = [n.target for n in ours["traced"].graph.nodes if n.op == "call_function"]
    assert targets == [plugtorch.bitwise_and] * 3
    x, y = torch.tensor([6, 5, 12]), torch.tensor([3, 4, 10])
    got = ours["traced"](plugtorch.tensor([6, 5, 12]), plugtorch.tensor([3, 4, 10]))
    want = theirs["traced"](x, y)
    assert [g.tolist() for g in got] == [w.tolist() for w in want] == [[2, 4, 8]] * 3
