"""Tree aggregation: noisy prefix sums of a stream of vectors (the binary mechanism).

Dwork, Naor, Pitassi & Rothblum (2010) and Chan, Shi & Song (2011), as used by private FTRL in
Kairouz, McMahan, Song, Thakkar, Thakurta & Xu (2021, "Practical and private (deep) learning
without sampling or shuffling", arXiv:2103.00039, §3 and Appendix D).

The stream ``v_1, v_2, ..., v_T`` (``T <= n_leaves``, public) is summed over the dyadic intervals
``((j - 1) 2**k, j 2**k]`` that end at or before the current leaf (the nodes of a binary tree
over the leaves, level ``k``). Each node's sum is released once, when its last leaf arrives, with
fresh Gaussian noise ``N(0, sigma**2 I)``; the prefix sum ``v_1 + ... + v_t`` is the sum of the
released nodes of the binary decomposition of ``t`` (one node per set bit of ``t``), so its noise
is the sum of ``popcount(t)`` independent draws: variance ``popcount(t) sigma**2`` per coordinate
(:func:`prefix_terms`), at most :func:`max_prefix_terms` ``(n_leaves) sigma**2`` over the stream,
against ``t sigma**2`` for one fresh draw per leaf.

Sensitivity (replace one row): a row enters one leaf ``v_s`` (one clipped gradient, norm at most
``C``, so ``v_s`` moves by at most ``2 C``), and leaf ``s`` lies in exactly one node per level whose
size is at most ``n_leaves``: :func:`tree_depth` ``= floor(log2 n_leaves) + 1`` nodes. Released in
order, each node is, given the nodes released before it, a Gaussian mechanism whose mean moves by
at most ``2 C`` if it holds leaf ``s`` (the other leaves' vectors are the same functions of the
released past under both neighbours) and not at all otherwise. By adaptive composition of
Gaussian mechanisms (Dong, Roth & Su 2022, GDP composition) the whole release, every prefix sum
and everything computed from them, is ``mu``-GDP with ``mu = 2 C sqrt(depth) / sigma``: the
event :func:`tree_event`, ``depth`` Gaussian releases of sensitivity ``2 C``. This is the RDP of
``dp_accounting.SingleEpochTreeAggregationDpEvent(sigma / (2 C), n_leaves)`` (``alpha depth / (2
z**2)`` with ``depth = ceil(log2(n_leaves + 1))``, the same number) under dp_accounting's
``REPLACE_SPECIAL`` relation, whose sensitivity ``C`` is replace-one's ``2 C``
(``tests/test_partial_fit.py`` checks the two against each other); the Gaussian form is also
converted exactly by the PLD accountant.
"""

from __future__ import annotations

import dp_accounting
import numpy as np

from ..accounting import gaussian_event
from .. import _noise

__all__ = ["TreeNoisePrefix", "max_prefix_terms", "prefix_terms", "tree_depth", "tree_event"]


def tree_depth(n_leaves: int) -> int:
    """Nodes of size at most ``n_leaves`` that hold a given leaf: ``floor(log2 n_leaves) + 1``."""
    if n_leaves < 1:
        raise ValueError(f"n_leaves must be >= 1; got {n_leaves!r}.")
    return int(n_leaves).bit_length()


def prefix_terms(t: int) -> int:
    """Released nodes summed into the prefix sum of ``t`` leaves: the set bits of ``t``."""
    return bin(int(t)).count("1")


def max_prefix_terms(n_leaves: int) -> int:
    """``max_{t <= n_leaves} popcount(t)``: ``floor(log2(n_leaves + 1))`` (``2**k - 1 <= n``)."""
    return (int(n_leaves) + 1).bit_length() - 1


def tree_event(noise_std: float, sensitivity: float, n_leaves: int) -> dp_accounting.DpEvent:
    """Event of the whole tree: :func:`tree_depth` Gaussian releases of ``sensitivity`` per row
    (module docstring), composed with :class:`dp_accounting.SelfComposedDpEvent`."""
    depth = tree_depth(n_leaves)
    event = gaussian_event(noise_std, sensitivity)
    return event if depth == 1 else dp_accounting.SelfComposedDpEvent(event, depth)


class TreeNoisePrefix:
    """Online noisy prefix sums of at most ``n_leaves`` vectors of ``shape`` (module docstring).

    :meth:`add` takes the next leaf and returns the released prefix sum: the exact sum plus the
    sum of the noises of the nodes of its binary decomposition. Each node's noise is drawn once,
    by :func:`skdpsco._noise.release_noise` on the node's exact sum (the released value),
    when its last leaf arrives, from ``rng``: the only source of randomness, which the owner may
    replace between leaves (a stream gives each call a generator of its own, so that two copies
    of a stream continued on different rows never draw the same noise).
    """

    def __init__(self, shape: tuple, noise_std: float, n_leaves: int, rng: np.random.Generator | None = None):
        self.noise_std = float(noise_std)
        self.n_leaves = int(n_leaves)
        self.rng = rng
        depth = tree_depth(self.n_leaves)
        self.total = np.zeros(shape)
        self.open_sums = np.zeros((depth, *shape))  # the exact sum of the node open at each level
        self.node_noise = np.zeros((depth, *shape))  # the noise of the last released node per level
        self.n_added = 0

    def add(self, leaf: np.ndarray) -> np.ndarray:
        """Append ``leaf`` and return the released prefix sum of the leaves so far."""
        if self.n_added >= self.n_leaves:
            raise ValueError(f"the tree holds {self.n_leaves} leaves; all are used.")
        self.n_added += 1
        t = self.n_added
        self.total += leaf
        self.open_sums += leaf
        level = 0
        while t % (1 << level) == 0 and level < self.open_sums.shape[0]:  # the nodes ending at t
            node = self.open_sums[level]
            self.node_noise[level] = _noise.release_noise(node, self.noise_std, self.rng)
            node[...] = 0.0
            level += 1
        return self.total + self.prefix_noise()

    def prefix_noise(self) -> np.ndarray:
        """The noise of the current prefix sum: the released nodes of the set bits of ``t``."""
        bits = [k for k in range(self.node_noise.shape[0]) if self.n_added >> k & 1]
        return self.node_noise[bits].sum(axis=0)
