"""DistributedSampler: torch's index arithmetic, and shuffles every rank agrees on."""
from __future__ import annotations

import pytest

import plugtorch.distributed as dist
from plugtorch.utils.data import DistributedSampler


@pytest.mark.parametrize("n, replicas", [(10, 3), (12, 4), (5, 4), (7, 1)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_shares_match_torch(torch, n, replicas, drop_last):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_shuffled_shares_are_disjoint_cover_and_follow_the_epoch():
    shares = [DistributedSampler(range(12), 3, r, seed=5) for r in range(3)]
    first = [list(s) for s in shares]
    assert sorted(sum(first, [])) == list(range(12))
    assert first == [list(s) for s in shares], "the same epoch must give the same order"
    for s in shares:
        s.set_epoch(1)
    second = [list(s) for s in shares]
    assert sorted(sum(second, [])) == list(range(12)) and second != first
    # one process with the global batch sees the union of the ranks' shares, in step order
    whole = list(DistributedSampler(range(12), 1, 0, seed=5))
    assert [whole[i] for i in range(12) if i % 3 == 1] == first[1]


def test_defaults_need_a_process_group_and_ranks_are_checked():
    dist.destroy_process_group()
    with pytest.raises(RuntimeError, match="init"):
        DistributedSampler(range(4))
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    dist.init()
    try:
        s = DistributedSampler(range(4))
        assert (s.num_replicas, s.rank, len(s)) == (1, 0, 4)
    finally:
        dist.destroy_process_group()
