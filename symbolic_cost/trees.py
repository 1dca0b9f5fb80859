"""Facts about expression trees that a build asks for again and again, each part's remembered.

* ``remembered``: a pure function's answers, kept in a table;
* ``remembered_call``: the same by a call's arguments;
* ``remembered_on``: the same for a function of an object too costly to hash (a model's stack);
* ``node_count``: the nodes of a tree, as SymPy's ``ordered`` counts them;
* ``digest``: a number that names a tree, the same in every process;
* ``argument_order``: the order ``extrema.unevaluated`` gives the arguments of a ``Max``/``Min``.

>>> from symbolic_cost.symbols import b, l
>>> node_count(b * l + 1), argument_order({l, b * l + 1})
(5, [l, b*l + 1])
"""

from __future__ import annotations

import zlib

from sympy import default_sort_key

_KEPT = 2**17
"""Answers a table of ``remembered`` holds before it starts again."""


def remembered(table: dict, key, compute, kept: int = _KEPT):
    """``compute(key)``, kept in ``table`` (emptied once it holds ``kept`` answers): for pure
    functions of an expression that a build asks again and again.

    >>> table = {}
    >>> remembered(table, 3, lambda x: x * x), table
    (9, {3: 9})
    """
    found = table.get(key, _MISSING)          # one lookup, not ``in`` then ``[]``: a build asks ~10,000 times
    if found is _MISSING:
        if len(table) >= kept:
            table.clear()
        found = table[key] = compute(key)
    return found


def remembered_call(table: dict, function, *args, kept: int = _KEPT, **keywords):
    """``function(*args, **keywords)``, remembered in ``table`` by the function, its arguments
    and their types (``1`` and ``1.0`` are one key to a dictionary, not one argument); computed
    each time where an argument does not hash.

    >>> table = {}
    >>> remembered_call(table, max, 2, 3), remembered_call(table, max, 2, 3.0), len(table)
    (3, 3.0, 2)
    >>> remembered_call(table, len, [1, 2]), len(table)
    (2, 2)
    """
    key = (function, args, tuple(map(type, args)), tuple(sorted(keywords.items())))
    try:
        hash(key)
    except TypeError:
        return function(*args, **keywords)
    return remembered(table, key, lambda _: function(*args, **keywords), kept=kept)


def remembered_on(table: dict, anchor, key, compute, kept: int = 256):
    """``compute()``, a pure function of ``anchor`` and the hashable ``key``, kept in ``table``
    under ``anchor``'s ``id`` (for an ``anchor`` that is not hashable, or costly to hash: a
    model's stack of blocks, which ``models.stack.model_stack`` hands out again for every ZeRO
    stage, offload and schedule of a layout).  The table holds ``anchor`` beside the answer, so
    its ``id`` names it while the answer is kept.

    >>> table, stack = {}, [1, 2]
    >>> remembered_on(table, stack, "sum", lambda: sum(stack)), len(table)
    (3, 1)
    >>> remembered_on(table, stack, "sum", lambda: -1), remembered_on(table, [1, 2], "sum", lambda: -1)
    (3, -1)
    """
    found = table.get((id(anchor), key), _MISSING)
    if found is _MISSING or found[0] is not anchor:
        if len(table) >= kept:
            table.clear()
        found = table[id(anchor), key] = (anchor, compute())
    return found[1]


_MISSING = object()
"""What ``remembered`` finds for a key it has no answer for (``None`` is an answer: an undecided sign)."""


def argument_order(args) -> list:
    """``args`` fewest nodes first, as SymPy's ``ordered`` (from remembered node counts:
    ``ordered`` counts a part's nodes once per path to it, a third of a search's builds).
    Large arguments with as many nodes (an NCCL protocol's time against another's, one kernel
    tile's waves against another's) follow their ``digest``, not SymPy's ``default_sort_key``,
    which walks both whole trees and was a tenth of a calibrated step time (smaller ones, and any
    whose digests agree, take ``default_sort_key``).  The same arguments get the same order in
    every process.

    >>> from symbolic_cost.symbols import b, l
    >>> argument_order([b + 2, l + 1]) == argument_order([l + 1, b + 2])
    True
    """
    by_count: dict = {}
    for arg in args:
        by_count.setdefault(node_count(arg), []).append(arg)
    return [a for count in sorted(by_count) for a in _tied(by_count[count], count)]


DIGESTED = 16
"""The fewest nodes of tied arguments ordered by ``digest``: smaller ones take SymPy's own
order, so a ``Max`` of a few symbols is SymPy's ``Max``.  SymPy's sort key of a tree of 20 to
30 nodes (an NCCL protocol's time against another's) is costly, and a calibrated step time asks
for dozens of them, so from this size the cheaper ``digest`` orders them."""


def _tied(args: list, count) -> list:
    if len(args) == 1:
        return args
    if count < DIGESTED or len({digest(a) for a in args}) < len(args):
        return sorted(args, key=_sort_key)
    return sorted(args, key=digest)


def digest(expr) -> int:
    """A number that names ``expr``'s tree, the same in every process (unlike ``hash``, which
    Python salts): a CRC-32 of its class and its arguments' digests (an atom's: its text).

    >>> from symbolic_cost.symbols import b, l
    >>> digest(b + l) == digest(l + b), digest(b + l) == digest(b * l)
    (True, False)
    """
    return remembered(_DIGESTS, expr, _digest)


_DIGESTS: dict = {}
"""Digests remembered (the parts of tied arguments are shared with those of the next extremum)."""


def _digest(expr) -> int:
    inner = ",".join(str(digest(a)) for a in expr.args) if expr.args else str(expr)
    return zlib.crc32(f"{type(expr).__name__}({inner})".encode())


def node_count(expr) -> int:
    """The nodes of ``expr``'s tree, counted as SymPy's ``ordered`` does (a ``Float`` is half a node).
    ``remembered``, written out: it runs once a node of every extremum's arguments (4 % of a build)."""
    found = _COUNTS.get(expr)
    if found is None:
        if len(_COUNTS) >= _KEPT:
            _COUNTS.clear()
        found = _COUNTS[expr] = 0.5 if expr.is_Float else 1 + sum(map(node_count, expr.args))
    return found


_COUNTS: dict = {}
"""Node counts remembered (the same parts meet in extremum after extremum)."""
_SORT_KEYS: dict = {}
"""SymPy's ``default_sort_key`` of the tied arguments whose digests agree."""


def _sort_key(expr):
    return remembered(_SORT_KEYS, expr, default_sort_key)

