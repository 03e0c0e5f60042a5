"""The convolution gradient ops refuse shapes that disagree before any kernel runs, naming the op,
every shape and what they must satisfy (a kernel would fail deep inside on a reshape)."""
from __future__ import annotations

import pytest

import plugtorch as pt
from plugtorch.core.ops import conv


@pytest.mark.parametrize("nd", [2, 3])
def test_an_input_gradient_with_channels_that_disagree_is_refused(nd):
    name = f"conv{nd}d_input_grad"
    grad_output, weight = pt.randn(1, 2, *(3,) * nd), pt.randn(2, 1, *(2,) * nd)
    one = (1,) * nd
    with pytest.raises(RuntimeError, match=rf"{name}: expected grad_output \(N, O, {nd} spatial dims\), weight "
                                           rf"\(O, C/groups, {nd} kernel dims\) and an input shape .* that agree; "
                                           rf"got grad_output \[1, 2(, 3){{{nd}}}\], weight \[2, 1(, 2){{{nd}}}\], "
                                           rf"input shape \[1, 3(, 4){{{nd}}}\], groups 1"):
        getattr(conv, name)(grad_output, weight, (1, 3) + (4,) * nd, stride=one, padding=(0,) * nd, dilation=one,
                            groups=1)
