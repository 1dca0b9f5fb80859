"""Step-by-step simulation of 2-D (SUMMA), 2.5-D and 3-D tensor parallelism on small matrices.

Written from the algorithms (Optimus / SUMMA, Tesseract, Bian et al.'s 3-D), nothing here
imports symbolic_cost; ``tests/test_grid.py`` holds the library's expressions against it.
Every device of the grid holds real blocks (numpy, integer-valued so products are exact), and
every message is sent by one device to another, one hop at a time:

* a broadcast is a chain from the root through the line of devices (the last one forwards
  nothing); a reduce is a chain ending at the root, each hop adding what it received;
* an allgather and a reduce-scatter run on a ring, ``n - 1`` steps; an allreduce is a
  reduce-scatter then an allgather.

Each device counts per pass the multiplies and adds it performs (a ``(m, k) x (k, n)``
product: ``m n k`` multiplies, ``m n (k - 1)`` adds; an accumulation or a received partial sum:
one add per element), the elements it sends and receives, and what it stores.  The results are
assembled again and compared with the same computation on the whole matrices.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

PASSES = ("fwd", "bwd")


class Device:
    """One device: its coordinates and counters by ``(row, pass)`` (the operation of the block
    being run, as the mesh's ``row`` says): FLOPs, elements sent and received; and the elements
    it stores by ``(row, what)``."""

    def __init__(self, coord: dict):
        self.coord = coord
        self.flops, self.sent, self.received, self.stored = Counter(), Counter(), Counter(), Counter()

    def total(self, counter: str, pass_: str, rows=None) -> int:
        """A counter summed over the rows (or over ``rows``) in one pass."""
        return sum(v for (row, p), v in getattr(self, counter).items() if p == pass_ and (rows is None or row in rows))


class Mesh:
    """The grid of devices: ``sizes`` maps each axis to its size."""

    def __init__(self, sizes: dict):
        self.sizes = dict(sizes)
        self.devices = [Device(dict(zip(self.sizes, point)))
                        for point in itertools.product(*(range(n) for n in self.sizes.values()))]
        self.pass_ = "fwd"
        self.row = "linear"

    def keep(self, dev: Device, what: str, array) -> None:
        dev.stored[self.row, what] += np.asarray(array).size

    def lines(self, axis: str) -> list[list[Device]]:
        """Every line of devices that differ only in ``axis``, each ordered by that axis."""
        out = {}
        for dev in self.devices:
            key = tuple(v for a, v in dev.coord.items() if a != axis)
            out.setdefault(key, []).append(dev)
        return [sorted(line, key=lambda d: d.coord[axis]) for line in out.values()]

    # --- arithmetic -------------------------------------------------------------------------
    def matmul(self, dev: Device, a, b):
        m, k = a.shape
        n = b.shape[1]
        dev.flops[self.row, self.pass_] += m * n * k + m * n * (k - 1)
        return a @ b

    def add(self, dev: Device, a, b):
        dev.flops[self.row, self.pass_] += np.asarray(a).size
        return a + b

    # --- messages ---------------------------------------------------------------------------
    def send(self, src: Device, dst: Device, array):
        array = np.array(array, copy=True)
        src.sent[self.row, self.pass_] += array.size
        dst.received[self.row, self.pass_] += array.size
        return array

    def broadcast(self, line: list[Device], root: int, array) -> list:
        """Chain broadcast from ``line[root]``: every member gets a copy."""
        n = len(line)
        got = {root: np.array(array, copy=True)}
        for t in range(n - 1):
            src, dst = (root + t) % n, (root + t + 1) % n
            got[dst] = self.send(line[src], line[dst], got[src])
        return [got[i] for i in range(n)]

    def reduce(self, line: list[Device], root: int, parts: list):
        """Chain reduce ending at ``line[root]``: the sum of ``parts`` (one per member)."""
        n = len(line)
        at = (root + 1) % n
        acc = parts[at]
        for _ in range(n - 1):
            nxt = (at + 1) % n
            acc = self.add(line[nxt], self.send(line[at], line[nxt], acc), parts[nxt])
            at = nxt
        return acc

    def allgather(self, line: list[Device], blocks: list) -> list[list]:
        """Ring allgather: every member ends with every block, in member order."""
        n = len(line)
        held = [{i: blocks[i]} for i in range(n)]
        for step in range(n - 1):
            for i in range(n):
                c = (i - step) % n
                held[(i + 1) % n][c] = self.send(line[i], line[(i + 1) % n], held[i][c])
        return [[held[i][c] for c in range(n)] for i in range(n)]

    def reducescatter(self, line: list[Device], parts: list[list]) -> list:
        """Ring reduce-scatter: ``parts[i][c]`` is member ``i``'s share of chunk ``c``; member
        ``i`` ends with chunk ``i`` summed over the line."""
        n = len(line)
        acc = [list(p) for p in parts]
        for step in range(n - 1):
            for i in range(n):
                c, dst = (i - step - 1) % n, (i + 1) % n
                acc[dst][c] = self.add(line[dst], self.send(line[i], line[dst], acc[i][c]), acc[dst][c])
        return [acc[i][i] for i in range(n)]

    def allreduce(self, line: list[Device], vectors: list) -> list:
        """Ring allreduce (reduce-scatter then allgather) of equally shaped arrays."""
        n = len(line)
        shape = np.asarray(vectors[0]).shape
        chunks = [np.split(np.asarray(v).reshape(-1), n) for v in vectors]
        mine = self.reducescatter(line, chunks)
        return [np.concatenate(g).reshape(shape) for g in self.allgather(line, mine)]


def blocks(matrix, rows: int, cols: int):
    """``matrix`` cut into ``rows x cols`` equal blocks: ``out[r][c]``."""
    return [np.split(band, cols, axis=1) for band in np.split(matrix, rows, axis=0)]


def _integers(rng, *shape):
    return rng.integers(-3, 4, size=shape).astype(float)


# ----------------------------------------------------------------------------- SUMMA, 2-D, 2.5-D

def _summa_positions(mesh: Mesh):
    """Per device: (row block of the activations, grid row, grid column); 2.5-D stacks the
    depth layers' row blocks (depth-major)."""
    q = mesh.sizes["rows"]
    return {id(d): (d.coord.get("depth", 0) * q + d.coord["rows"], d.coord["rows"], d.coord["cols"])
            for d in mesh.devices}


def summa_linear(mesh: Mesh, x, w, bias, panel: int, dy, stats):
    """``Y = X W + B`` and its backward with SUMMA in every depth layer; returns per device the
    output block and ``dX`` block.  ``x`` is a dict device -> block (or a global matrix)."""
    r, c = mesh.sizes["rows"], mesh.sizes["cols"]
    depth = mesh.sizes.get("depth", 1)
    pos = _summa_positions(mesh)
    k, n = w.shape
    xb = x if isinstance(x, dict) else {id(d): blocks(x, r * depth, c)[pos[id(d)][0]][pos[id(d)][2]]
                                        for d in mesh.devices}
    wb = {id(d): blocks(w, r, c)[pos[id(d)][1]][pos[id(d)][2]] for d in mesh.devices}
    bb = {id(d): np.split(bias, c)[pos[id(d)][2]] for d in mesh.devices}
    for d in mesh.devices:
        for what, array in (("x", xb), ("w", wb), ("w", bb), ("kept", xb)):
            mesh.keep(d, what, array[id(d)])
    kx, kw = k // c, k // r                       # block widths of X's columns and W's rows

    def panels(t):
        """Panel ``t``: each row line's copy of X's panel and each column line's of W's."""
        k0 = t * panel
        xp, wp = {}, {}
        for line in mesh.lines("cols"):            # a row of the grid
            owner = k0 // kx
            src = xb[id(line[owner])][:, k0 - owner * kx: k0 - owner * kx + panel]
            for dev, got in zip(line, mesh.broadcast(line, owner, src)):
                xp[id(dev)] = got
        for line in mesh.lines("rows"):            # a column of the grid
            owner = k0 // kw
            src = wb[id(line[owner])][k0 - owner * kw: k0 - owner * kw + panel, :]
            for dev, got in zip(line, mesh.broadcast(line, owner, src)):
                wp[id(dev)] = got
        return xp, wp

    mesh.pass_ = "fwd"
    y = {}
    for t in range(k // panel):
        xp, wp = panels(t)
        for d in mesh.devices:
            product = mesh.matmul(d, xp[id(d)], wp[id(d)])
            y[id(d)] = product if t == 0 else mesh.add(d, y[id(d)], product)
    for d in mesh.devices:
        y[id(d)] = mesh.add(d, y[id(d)], np.broadcast_to(bb[id(d)], y[id(d)].shape))
        mesh.keep(d, "y", y[id(d)])

    mesh.pass_ = "bwd"
    dyb = {id(d): blocks(dy, r * depth, c)[pos[id(d)][0]][pos[id(d)][2]] for d in mesh.devices}
    dx = {id(d): np.zeros_like(xb[id(d)]) for d in mesh.devices}
    dw = {id(d): np.zeros_like(wb[id(d)]) for d in mesh.devices}
    for t in range(k // panel):
        k0 = t * panel
        xp, wp = panels(t)
        for line in mesh.lines("cols"):
            owner = k0 // kx
            parts = [mesh.matmul(d, dyb[id(d)], wp[id(d)].T) for d in line]
            dx[id(line[owner])][:, k0 - owner * kx: k0 - owner * kx + panel] = mesh.reduce(line, owner, parts)
        for line in mesh.lines("rows"):
            owner = k0 // kw
            parts = [mesh.matmul(d, xp[id(d)].T, dyb[id(d)]) for d in line]
            dw[id(line[owner])][k0 - owner * kw: k0 - owner * kw + panel, :] = mesh.reduce(line, owner, parts)
    db = {}
    for d in mesh.devices:                         # every row added into a zeroed accumulator
        d.flops[mesh.row, "bwd"] += dyb[id(d)].size
        db[id(d)] = dyb[id(d)].sum(axis=0)
    for axis in ("rows", "depth"):
        if axis in mesh.sizes:
            for line in mesh.lines(axis):
                for dev, got in zip(line, mesh.allreduce(line, [db[id(d)] for d in line])):
                    db[id(dev)] = got
    if "depth" in mesh.sizes:
        for line in mesh.lines("depth"):
            for dev, got in zip(line, mesh.allreduce(line, [dw[id(d)] for d in line])):
                dw[id(dev)] = got
    stats.update(w_grad={id(d): dw[id(d)] for d in mesh.devices}, b_grad=db, w_blocks=wb)
    return y, dx


def assemble_summa(mesh: Mesh, parts: dict):
    """The global matrix from per-device blocks laid out as the activations."""
    r, c, depth = mesh.sizes["rows"], mesh.sizes["cols"], mesh.sizes.get("depth", 1)
    pos = _summa_positions(mesh)
    grid = [[None] * c for _ in range(r * depth)]
    for d in mesh.devices:
        grid[pos[id(d)][0]][pos[id(d)][2]] = parts[id(d)]
    return np.block(grid)


# ----------------------------------------------------------------------------- 3-D

def cube_layout(q: int, flip: bool):
    """(gather axis, scatter axis): a layer's input rows are split over ``(i, gather)``,
    its columns over ``scatter``; its output's rows over ``(i, scatter)``, columns ``gather``."""
    return ("k", "j") if flip else ("j", "k")


def cube_blocks(mesh: Mesh, matrix, flip: bool, output: bool = False) -> dict:
    """Per device its block of an activation laid out as a 3-D layer's input (or output)."""
    q = mesh.sizes["i"]
    gather, scatter = cube_layout(q, flip)
    row_axis, col_axis = (scatter, gather) if output else (gather, scatter)
    cut = blocks(matrix, q * q, q)
    return {id(d): cut[d.coord["i"] * q + d.coord[row_axis]][d.coord[col_axis]] for d in mesh.devices}


def assemble_cube(mesh: Mesh, parts: dict, flip: bool, output: bool = False):
    q = mesh.sizes["i"]
    gather, scatter = cube_layout(q, flip)
    row_axis, col_axis = (scatter, gather) if output else (gather, scatter)
    grid = [[None] * q for _ in range(q * q)]
    for d in mesh.devices:
        grid[d.coord["i"] * q + d.coord[row_axis]][d.coord[col_axis]] = parts[id(d)]
    return np.block(grid)


def cube_linear(mesh: Mesh, x, w, bias, dy, flip: bool, stats):
    """3-D ``Y = X W + B`` and backward; ``x``, ``dy``: dicts of blocks or global matrices."""
    q = mesh.sizes["i"]
    gather, scatter = cube_layout(q, flip)
    xb = x if isinstance(x, dict) else cube_blocks(mesh, x, flip)
    cut = blocks(w, q * q, q)
    wb = {id(d): cut[d.coord[scatter] * q + d.coord["i"]][d.coord[gather]] for d in mesh.devices}
    bb = {id(d): np.split(bias, q)[d.coord[gather]] for d in mesh.devices}
    mesh.pass_ = "fwd"
    xg, wg = {}, {}
    for line in mesh.lines(gather):
        for dev, got in zip(line, mesh.allgather(line, [xb[id(d)] for d in line])):
            xg[id(dev)] = np.vstack(got)
    for line in mesh.lines("i"):
        for dev, got in zip(line, mesh.allgather(line, [wb[id(d)] for d in line])):
            wg[id(dev)] = np.vstack(got)
    partial = {id(d): mesh.matmul(d, xg[id(d)], wg[id(d)]) for d in mesh.devices}
    y = {}
    for line in mesh.lines(scatter):
        for dev, got in zip(line, mesh.reducescatter(line, [np.split(partial[id(d)], q) for d in line])):
            y[id(dev)] = mesh.add(dev, got, np.broadcast_to(bb[id(dev)], got.shape))
    for d in mesh.devices:
        for what, array in (("x", xb), ("w", wb), ("w", bb), ("y", y), ("kept", xg), ("kept", wg)):
            mesh.keep(d, what, array[id(d)])
    mesh.pass_ = "bwd"
    dyb = dy if isinstance(dy, dict) else cube_blocks(mesh, dy, flip, output=True)
    dyg = {}
    for line in mesh.lines(scatter):
        for dev, got in zip(line, mesh.allgather(line, [dyb[id(d)] for d in line])):
            dyg[id(dev)] = np.vstack(got)
    dx, dw = {}, {}
    for line in mesh.lines(gather):
        parts = [np.split(mesh.matmul(d, dyg[id(d)], wg[id(d)].T), q) for d in line]
        for dev, got in zip(line, mesh.reducescatter(line, parts)):
            dx[id(dev)] = got
    for line in mesh.lines("i"):
        parts = [np.split(mesh.matmul(d, xg[id(d)].T, dyg[id(d)]), q) for d in line]
        for dev, got in zip(line, mesh.reducescatter(line, parts)):
            dw[id(dev)] = got
    db = {}
    for d in mesh.devices:
        d.flops[mesh.row, "bwd"] += dyb[id(d)].size
        db[id(d)] = dyb[id(d)].sum(axis=0)
    for axis in ("i", scatter):
        for line in mesh.lines(axis):
            for dev, got in zip(line, mesh.allreduce(line, [db[id(d)] for d in line])):
                db[id(dev)] = got
    stats.update(w_grad=dw, b_grad=db, w_blocks=wb)
    return y, dx


def make_mesh(kind: str, degrees: dict) -> Mesh:
    """The mesh of a ``"2d"`` (``rows, cols``), ``"2.5d"`` (``q, depth``) or ``"3d"`` (``q``) grid."""
    if kind == "2d":
        return Mesh({"rows": degrees["rows"], "cols": degrees["cols"]})
    if kind == "2.5d":
        return Mesh({"rows": degrees["q"], "cols": degrees["q"], "depth": degrees["depth"]})
    return Mesh({"i": degrees["q"], "j": degrees["q"], "k": degrees["q"]})


def run_linear(kind: str, degrees: dict, tokens: int, k: int, n: int, panel: int | None = None,
               flip: bool = False, seed: int = 0) -> Mesh:
    """Simulate one linear layer (forward and backward) and check its numbers; return the mesh."""
    rng = np.random.default_rng(seed)
    mesh = make_mesh(kind, degrees)
    x, w, bias, dy = _integers(rng, tokens, k), _integers(rng, k, n), _integers(rng, n), _integers(rng, tokens, n)
    stats: dict = {}
    if kind == "3d":
        y, dx = cube_linear(mesh, x, w, bias, dy, flip, stats)
        assert np.array_equal(assemble_cube(mesh, y, flip, output=True), x @ w + bias)
        assert np.array_equal(assemble_cube(mesh, dx, flip), dy @ w.T)
        q = mesh.sizes["i"]
        gather, scatter = cube_layout(q, flip)
        want = blocks(x.T @ dy, q * q, q)
        for d in mesh.devices:
            assert np.array_equal(stats["w_grad"][id(d)], want[d.coord[scatter] * q + d.coord["i"]][d.coord[gather]])
    else:
        y, dx = summa_linear(mesh, x, w, bias, panel, dy, stats)
        assert np.array_equal(assemble_summa(mesh, y), x @ w + bias)
        assert np.array_equal(assemble_summa(mesh, dx), dy @ w.T)
        r, c = mesh.sizes["rows"], mesh.sizes["cols"]
        want = blocks(x.T @ dy, r, c)
        pos = _summa_positions(mesh)
        for d in mesh.devices:
            assert np.array_equal(stats["w_grad"][id(d)], want[pos[id(d)][1]][pos[id(d)][2]])
    column = cube_layout(0, flip)[0] if kind == "3d" else "cols"     # the output's column blocks
    for d in mesh.devices:
        want = np.split(dy.sum(axis=0), mesh.sizes[column])[d.coord[column]]
        assert np.array_equal(stats["b_grad"][id(d)], want)
    return mesh


# ----------------------------------------------------------------------------- blocks

def act_blocks(mesh: Mesh, kind: str, matrix, layout: str = "A") -> dict:
    """Per device its block of an activation ``(tokens, width)``: SUMMA's row and column
    blocks; 3-D layout ``A`` (a layer's input: rows ``(i, j)``, columns ``k``) or ``B``."""
    if kind == "3d":
        return cube_blocks(mesh, matrix, False, output=layout == "B")
    r, c, depth = mesh.sizes["rows"], mesh.sizes["cols"], mesh.sizes.get("depth", 1)
    pos = _summa_positions(mesh)
    cut = blocks(matrix, r * depth, c)
    return {id(d): cut[pos[id(d)][0]][pos[id(d)][2]] for d in mesh.devices}


def assemble(mesh: Mesh, kind: str, parts: dict, layout: str = "A"):
    if kind == "3d":
        return assemble_cube(mesh, parts, False, output=layout == "B")
    return assemble_summa(mesh, parts)


def _column(mesh: Mesh, kind: str, dev: Device, layout: str = "A") -> int:
    """The column block a device holds (3-D: ``k`` in layout A, ``j`` in B)."""
    return dev.coord[("k" if layout == "A" else "j") if kind == "3d" else "cols"]


def norm(mesh: Mesh, kind: str, xb: dict, e: int, rng, name: str, rms: bool = False) -> dict:
    """A layer (or RMS) norm on the blocks of layout A: row statistics allreduced along the
    columns' axis, forward and backward; the gain's (and shift's) gradient along the others."""
    mesh.row, mesh.pass_ = name, "fwd"
    axis = "k" if kind == "3d" else "cols"
    cols = mesh.sizes[axis]
    gamma, beta = _integers(rng, e), (np.zeros(e) if rms else _integers(rng, e))
    g = {id(d): np.split(gamma, cols)[_column(mesh, kind, d)] for d in mesh.devices}
    bt = {id(d): np.split(beta, cols)[_column(mesh, kind, d)] for d in mesh.devices}
    sums = {id(d): (np.array([(xb[id(d)] ** 2).sum(1)]) if rms else
                    np.array([xb[id(d)].sum(1), (xb[id(d)] ** 2).sum(1)])) for d in mesh.devices}
    for line in mesh.lines(axis):
        for dev, got in zip(line, mesh.allreduce(line, [sums[id(d)] for d in line])):
            sums[id(dev)] = got
    out, xhat = {}, {}
    for d in mesh.devices:
        mean = 0 if rms else sums[id(d)][0] / e
        var = sums[id(d)][-1] / e - mean ** 2
        xhat[id(d)] = (xb[id(d)] - np.asarray(mean)[..., None]) / np.sqrt(var + 1e-5)[:, None]
        out[id(d)] = g[id(d)] * xhat[id(d)] + (0 if rms else bt[id(d)])
        mesh.keep(d, "w", g[id(d)])
        if not rms:
            mesh.keep(d, "w", bt[id(d)])
    mesh.pass_ = "bwd"
    dy = {id(d): _integers(rng, *xb[id(d)].shape) for d in mesh.devices}
    back = {id(d): np.array([(g[id(d)] * dy[id(d)] * xhat[id(d)]).sum(1)] if rms else
                            [(g[id(d)] * dy[id(d)]).sum(1), (g[id(d)] * dy[id(d)] * xhat[id(d)]).sum(1)])
            for d in mesh.devices}
    for line in mesh.lines(axis):
        mesh.allreduce(line, [back[id(d)] for d in line])
    grads = {id(d): np.concatenate([(dy[id(d)] * xhat[id(d)]).sum(0)] + ([] if rms else [dy[id(d)].sum(0)]))
             for d in mesh.devices}
    for other in [a for a in mesh.sizes if a != axis]:
        for line in mesh.lines(other):
            mesh.allreduce(line, [grads[id(d)] for d in line])
    reference = assemble(mesh, kind, xb)
    mean = 0 if rms else reference.mean(1, keepdims=True)
    want = gamma * (reference - mean) / np.sqrt(((reference - mean) ** 2).mean(1, keepdims=True) + 1e-5) + beta
    if rms:
        want = gamma * reference / np.sqrt((reference ** 2).mean(1, keepdims=True) + 1e-5)
    assert np.allclose(assemble(mesh, kind, out), want)
    return out


def linear(mesh: Mesh, kind: str, xb: dict, w, bias, rng, flip: bool, panel, name: str) -> dict:
    """One linear layer of a block (its backward on a random output gradient)."""
    mesh.row = name
    dy = _integers(rng, sum(v.shape[0] for v in xb.values()) // _copies(mesh, kind), w.shape[1])
    if kind == "3d":
        return cube_linear(mesh, xb, w, bias, dy, flip, {})[0]
    return summa_linear(mesh, xb, w, bias, panel, dy, {})[0]


def _copies(mesh: Mesh, kind: str) -> int:
    """How many devices hold each row block of an activation (its column blocks)."""
    return mesh.sizes["k" if kind == "3d" else "cols"]


def run_mlp(kind: str, degrees: dict, b: int, l: int, e: int, f: int, panel=None, seed: int = 0) -> Mesh:
    """Norm, ``fc1``, activation, ``fc2`` on the grid; checks the output against the whole."""
    rng = np.random.default_rng(seed)
    mesh = make_mesh(kind, degrees)
    x, w1, b1, w2, b2 = (_integers(rng, b * l, e), _integers(rng, e, f), _integers(rng, f),
                         _integers(rng, f, e), _integers(rng, e))
    hidden = norm(mesh, kind, act_blocks(mesh, kind, x), e, rng, "layer_norm_2")
    normed = assemble(mesh, kind, hidden)
    h1 = linear(mesh, kind, hidden, w1, b1, rng, False, panel, "fc1")
    a1 = {k: np.maximum(v, 0) for k, v in h1.items()}
    out = linear(mesh, kind, a1, w2, b2, rng, True, panel, "fc2")
    assert np.allclose(assemble(mesh, kind, out), np.maximum(normed @ w1 + b1, 0) @ w2 + b2)
    return mesh


def _softmax(s):
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return s / s.sum(axis=-1, keepdims=True)


def core(mesh: Mesh, dev: Device, z, l: int, q: int, heads: int, kv: int, rng):
    """Attention of each whole sequence in ``z`` (``(seqs l, (heads + 2 kv) q)``: this device's
    query, key and value heads); forward and the backward products, with the sums of the
    query heads' gradients into their key/value head."""
    out = []
    group = heads // kv
    for seq in np.split(z, z.shape[0] // l):
        qs, ks, vs = np.split(seq, [heads * q, (heads + kv) * q], axis=1)
        qh, kh, vh = np.split(qs, heads, 1), np.split(ks, kv, 1), np.split(vs, kv, 1)
        mesh.pass_ = "fwd"
        probs, outs = [], []
        for a in range(heads):
            mesh.row = "logits"
            scores = mesh.matmul(dev, qh[a], kh[a // group].T)
            probs.append(_softmax(scores / np.sqrt(q)))
            mesh.row = "attend"
            outs.append(mesh.matmul(dev, probs[a], vh[a // group]))
        out.append(np.hstack(outs))
        mesh.pass_ = "bwd"
        dk, dv = {}, {}
        for a in range(heads):
            d_out, d_scores = _integers(rng, l, q), _integers(rng, l, l)
            mesh.row = "attend"
            mesh.matmul(dev, d_out, vh[a // group].T)
            part = mesh.matmul(dev, probs[a].T, d_out)
            dv[a // group] = part if a % group == 0 else mesh.add(dev, dv[a // group], part)
            mesh.row = "logits"
            mesh.matmul(dev, d_scores, kh[a // group])
            part = mesh.matmul(dev, d_scores.T, qh[a])
            dk[a // group] = part if a % group == 0 else mesh.add(dev, dk[a // group], part)
    return np.vstack(out)


def run_attention(kind: str, degrees: dict, b: int, l: int, e: int, h: int, kv: int, panel=None,
                  seed: int = 0) -> Mesh:
    """Norm, ``qkv_proj``, the core on each device's sequences and heads, ``v_proj``; checks
    the output against attention on the whole matrices."""
    rng = np.random.default_rng(seed)
    mesh = make_mesh(kind, degrees)
    q, cols = e // h, _copies(mesh, kind)
    width = (h + 2 * kv) * q
    x, wqkv, bqkv, wo, bo = (_integers(rng, b * l, e), _integers(rng, e, width) / 4, _integers(rng, width),
                             _integers(rng, h * q, e), _integers(rng, e))
    hidden = norm(mesh, kind, act_blocks(mesh, kind, x), e, rng, "layer_norm_1")
    normed = assemble(mesh, kind, hidden)
    z = linear(mesh, kind, hidden, wqkv, bqkv, rng, False, panel, "qkv_proj")
    o = {id(d): core(mesh, d, z[id(d)], l, q, h // cols, kv // cols, rng) for d in mesh.devices}
    out = linear(mesh, kind, o, wo, bo, rng, True, panel, "v_proj")
    whole = normed @ wqkv + bqkv              # column block c: its heads' q, k, v
    heads = [core(Mesh({"one": 1}), Device({}), part, l, q, h // cols, kv // cols, rng)
             for part in np.split(whole, cols, axis=1)]
    assert np.allclose(assemble(mesh, kind, out), np.hstack(heads) @ wo + bo)
    return mesh
