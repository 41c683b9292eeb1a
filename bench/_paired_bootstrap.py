"""How far a ratio of two tail quantiles measured side by side can be trusted: a paired block
bootstrap.

Two streams measured over the same windows share the machine's load, and a late wake tends to
come with its neighbours, so periods are neither independent nor comparable one by one. The
windows are cut into blocks of equal time; each replicate draws blocks with replacement and
takes both streams' periods from the blocks drawn, and the interval is the spread of the
ratio over the replicates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Replicates per interval: a 90 % interval's ends move by about 0.01x between seeds.
REPLICATES = 2000


def blocks(
    stamped: dict[str, list[tuple[int, float]]], block_s: float
) -> list[dict[str, list[float]]]:
    """One window's ``(ns, value)`` of each stream, cut into blocks of ``block_s`` from the
    window's first stamp: each block holds every stream's values in that span."""
    first = min(ns for values in stamped.values() for ns, _ in values[:1])
    spans = 1 + max(int((ns - first) * 1e-9 / block_s) for v in stamped.values() for ns, _ in v)
    cut: list[dict[str, list[float]]] = [{who: [] for who in stamped} for _ in range(spans)]
    for who, values in stamped.items():
        for ns, value in values:
            cut[int((ns - first) * 1e-9 / block_s)][who].append(value)
    return cut


def ratio_interval(
    cut: Sequence[dict[str, list[float]]],
    top: str,
    bottom: str,
    q: float,
    level: float = 0.90,
    seed: int = 0,
) -> tuple[float, float]:
    """The ``level`` interval of ``quantile(top, q) / quantile(bottom, q)`` over replicates
    of the blocks ``cut`` (``blocks``), each the same number of blocks drawn with
    replacement."""
    rng = np.random.default_rng(seed)
    arrays = {who: [np.asarray(b[who], dtype=np.float64) for b in cut] for who in (top, bottom)}
    ratios = np.empty(REPLICATES)
    for i in range(REPLICATES):
        drawn = rng.integers(0, len(cut), len(cut))
        top_q, bottom_q = (np.quantile(np.concatenate([arrays[w][d] for d in drawn]), q)
                           for w in (top, bottom))  # fmt: skip
        ratios[i] = top_q / bottom_q if bottom_q > 0 else np.inf
    low, high = np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)
