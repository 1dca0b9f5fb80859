"""Context parallelism run step by step, from the algorithms (not from ``blocks.context``).

``ring``: Transformer Engine's ``AttnFuncWithCPAndKVP2P`` (``cp_comm_type="p2p"``) on ``cp`` ranks
with the sequence cut into ``2 cp`` chunks, rank ``i`` holding chunks ``i`` and ``2 cp - 1 - i``.
Forward step ``s`` works on the K, V of rank ``(i - s) mod cp``: step 0 (its own) the causal
"diagonal" tile of both query chunks against both key chunks; a source ``j < i`` both query
chunks against the source's first key chunk; ``j > i`` the second query chunk against both key
chunks.  The K, V buffer goes to the next rank at steps ``0 .. cp - 2``; backward sends K, V at
step 0, K, V and dK, dV at steps ``1 .. cp - 2`` and dK, dV at step ``cp - 1``.

``all-gather`` (Llama 3 section 3.3.2; TE's ``AttnFuncWithCPAndKVAllGather``): K, V gathered by a
ring allgather (``cp - 1`` steps, one shard sent each), each local query chunk ``j`` scored against
keys ``0 .. (j + 1) C``; backward gathers again and reduce-scatters dK, dV (ring: ``cp - 1``
shards sent).  ``ulysses``: all-to-all, each rank sending every other rank its heads.

Counts are pairs (query, key) a rank's kernel calls are handed (``tile``) and those the causal
mask keeps (``unmasked``), and elements each rank sends.
"""

from __future__ import annotations


def chunks_of(rank: int, cp: int) -> tuple[int, int]:
    """The two chunks (of ``2 cp``) rank ``rank`` holds under the causal balance."""
    return rank, 2 * cp - 1 - rank


def positions(chunk: int, size: int) -> range:
    return range(chunk * size, (chunk + 1) * size)


def _pairs(queries, keys) -> tuple[int, int]:
    """(tile, unmasked) of scoring ``queries`` against ``keys`` with a causal mask."""
    keys = list(keys)
    return len(queries) * len(keys), sum(1 for t in queries for s in keys if s <= t)


def ring(l: int, cp: int, kv_elements: int) -> list[dict]:
    """Per rank: tile and unmasked pairs, elements sent forward and backward (``kv_elements``:
    a rank's own K and V), and the set of (query, key) pairs it covered."""
    size = l // (2 * cp)
    out = []
    for i in range(cp):
        first, second = (list(positions(c, size)) for c in chunks_of(i, cp))
        tile = unmasked = 0
        covered = set()
        for s in range(cp):
            j = (i - s) % cp
            k_first, k_second = (list(positions(c, size)) for c in chunks_of(j, cp))
            if s == 0:
                q, k = first + second, k_first + k_second
            elif j < i:
                q, k = first + second, k_first
            else:
                q, k = second, k_first + k_second
            a, u = _pairs(q, k)
            tile, unmasked = tile + a, unmasked + u
            covered |= {(t, x) for t in q for x in k if x <= t}
        sent_fwd = sum(kv_elements for s in range(cp) if s < cp - 1)
        sent_bwd = sum(kv_elements if s in (0, cp - 1) else 2 * kv_elements for s in range(cp)) if cp > 1 else 0
        out.append(dict(tile=tile, unmasked=unmasked, fwd=sent_fwd, bwd=sent_bwd, covered=covered,
                        queries=len(first) + len(second)))
    return out


def all_gather(l: int, cp: int, kv_elements: int, window: int | None = None) -> list[dict]:
    """Per rank, as ``ring``, for Llama 3's all-gather CP (``kv_elements``: a rank's own K, V).
    With a sliding ``window`` of ``w`` keys (Transformer Engine's all-gather CP with SWA), query
    ``t`` keeps the keys ``t - w < s <= t``, and each chunk is handed the keys from ``w - 1`` before
    its first query to its last (the whole sequence is still gathered)."""
    size = l // (2 * cp)
    out = []
    for i in range(cp):
        tile = unmasked = 0
        covered = set()
        for chunk in chunks_of(i, cp):
            first = 0 if window is None else max(0, chunk * size - window + 1)
            q, k = list(positions(chunk, size)), range(first, (chunk + 1) * size)
            kept = [(t, x) for t in q for x in k if x <= t and (window is None or t - x < window)]
            tile, unmasked = tile + len(q) * len(k), unmasked + len(kept)
            covered |= set(kept)
        gather = sum(kv_elements for _ in range(cp - 1))      # a ring allgather: one shard a step
        out.append(dict(tile=tile, unmasked=unmasked, fwd=gather, bwd=2 * gather, covered=covered,
                        queries=2 * size))
    return out


def ulysses(l: int, cp: int, b: int, heads: int, kv: int, q: int, v: int) -> dict:
    """Elements one rank sends in the all-to-alls of one layer (forward; backward mirrors it):
    each of q, k, v (``heads``, ``kv``, ``kv`` heads of its ``l/cp`` tokens) and the output, of
    which it keeps ``1/cp`` (its own heads) and sends each other rank its share."""
    tokens = l // cp
    sent = 0
    for width in (heads * q, kv * q, kv * v, heads * v):
        per_rank = b * tokens * width // cp
        sent += sum(per_rank for other in range(cp) if other != 0)
    return dict(fwd=sent, bwd=sent)
