"""Machine code that computes ``width()`` configurations at once: symengine's common-subexpression
elimination of a set, written as LLVM IR over vectors of doubles (``vector_ir``) and compiled by
llvmlite (numba's LLVM binding) into one loop over the rows (``VectorKernel``).

symengine's own LLVM kernel computes one configuration at a time, from inputs packed row by
row, and its ``Piecewise`` are branches.  Here every operation takes ``width()`` rows (8 doubles
with AVX-512, else 4), every input and output is a contiguous column, and a choice is a
``select`` of both arms (``Max(a, b)`` is ``a > b ? a : b``, as ``llvm_form.branch_free``
writes it): no branch, nothing for LLVM's optimiser to find, so the IR goes straight to code
generation.  The arithmetic is IEEE double, operation for operation, as in symengine's kernel:
a product or sum of several factors is taken left to right, ``x**-1`` is ``1/x``, ``x**k`` for
small integers ``k`` repeated products, other powers, ``log``, ``floor`` and ``ceiling`` LLVM's
intrinsics.

>>> import numpy as np
>>> import symengine
>>> b, l = symengine.symbols("b l")
>>> made = compile_vector([b * l, symengine.Max(b, l) / 2], [b, l], 0)
>>> made is None or made(np.array([[2.0, 3.0], [5.0, 4.0]])).tolist() == [[6.0, 1.5], [20.0, 2.5]]
True
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from symbolic_cost.checks import InputError
from symbolic_cost.numeric.vector_ir import ir_text, program

STREAM_ROWS = 1 << 18
"""Rows from which a call writes its outputs past the caches (``vector_ir.ir_text``'s non-temporal
stores), where every output column starts on a 64-byte boundary (``aligned_empty``).  Ten
columns of 2**18 rows are 20 MiB, more than a CPU's caches hold: written the usual way, each
line is first read from memory, which costs about as much as writing it."""
ALIGNMENT = 64
"""Bytes the start of a streamed output column is a multiple of (a cache line; ``vmovntpd`` on a
512-bit vector faults elsewhere)."""
THREAD_ROWS = 1 << 16
"""Rows from which a call is split between the cores (ctypes releases the interpreter lock
while the machine code runs), each thread its share of whole vectors."""
CODEGEN = {0: 0, 3: 1}
"""LLVM's code-generation level for symengine's ``opt_level`` 0 (fast instruction selection and
register allocation) and 3."""
_STATE: dict = {}
"""llvmlite's binding, the host, the execution engine and what it has loaded."""
_KINDS: dict = {}
_POOL: list = []
_LOCK = threading.Lock()
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
"""The cores this process may run on (its CPU affinity, where the system says; else the
machine's): what a call splits its rows between, and ``grid_tasks.top_rows`` its tasks."""


def llvmlite():
    """llvmlite's binding, initialised for this machine, or ``None`` where it is not installed."""
    if "llvm" not in _STATE:
        try:
            import llvmlite.binding as llvm
        except ImportError:
            _STATE["llvm"] = None
            return None
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _STATE["llvm"] = llvm
    return _STATE["llvm"]


TARGET_CPU = "SYMBOLIC_COST_LLVM_CPU"
"""The environment variable that names the instruction set the machine code is for, one of
``LEVELS`` (``x86-64-v3``: what a machine without AVX-512 runs), in place of this machine's own
CPU and features (``host``): code to run on older machines, or to measure theirs on this one."""
LEVELS = {"x86-64": (), "x86-64-v2": ("sse4.2", "popcnt"), "x86-64-v3": ("sse4.2", "popcnt", "avx2", "fma", "bmi2"),
          "x86-64-v4": ("sse4.2", "popcnt", "avx2", "fma", "bmi2", "avx512f", "avx512bw", "avx512dq", "avx512vl")}
"""The x86-64 micro-architecture levels ``TARGET_CPU`` takes (LLVM's CPU names for them) and the
features of each that this machine must have to run its code (a level's defining ones)."""


def host() -> str:
    """The machine code's target: CPU name and features (a kernel filed on one machine is
    compiled again on another; ``TARGET_CPU`` names a level instead), or ``""`` without llvmlite."""
    if "host" not in _STATE:
        llvm = llvmlite()
        _STATE["host"] = "" if llvm is None else _level(llvm, os.environ.get(TARGET_CPU, "").strip()) or \
            f"{llvm.get_host_cpu_name()}|{llvm.get_host_cpu_features().flatten()}"
    return _STATE["host"]


def _level(llvm, name: str) -> str:
    """The target of the level ``name`` (``""`` for none), once this machine is known to run it."""
    if not name:
        return ""
    if name not in LEVELS:
        raise InputError(f"{TARGET_CPU} must be one of {', '.join(LEVELS)}, got {name!r}", TARGET_CPU)
    features = llvm.get_host_cpu_features()
    missing = [f for f in LEVELS[name] if not features.get(f)]
    if missing:
        raise InputError(f"{TARGET_CPU}={name} needs {', '.join(missing)}, which this CPU "
                         f"({llvm.get_host_cpu_name()}) lacks: its code would stop the process", TARGET_CPU)
    return f"{name}|{','.join('+' + f for f in LEVELS[name])}"


def width() -> int:
    """Rows per operation: 8 doubles where the CPU has AVX-512, else 4 (AVX2; NEON pairs)."""
    return 8 if "+avx512f" in host() else 4


def _machine(level: int):
    """A target machine for this CPU at code-generation ``level`` (a new one each time: an
    execution engine takes ownership of the one it is given)."""
    cpu, features = host().split("|", 1)
    return llvmlite().Target.from_default_triple().create_target_machine(cpu=cpu, features=features, opt=level)


def _address(name: str, code: bytes) -> int:
    """Where the function ``name`` of the object ``code`` sits, loaded once into the process's one
    execution engine (an engine of its own for each kernel would cost more than loading the
    kernel, and a search from disk loads hundreds)."""
    with _LOCK:                         # one engine, however many threads load kernels
        loaded = _STATE.setdefault("loaded", {})
        if name not in loaded:
            llvm = llvmlite()
            if "engine" not in _STATE:
                _STATE["engine"] = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _machine(0))
            engine = _STATE["engine"]
            engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            engine.finalize_object()
            loaded[name] = engine.get_function_address(name)
        return loaded[name]


UNSCHEDULED_LANES = 8
"""Lanes from which the optimised code is generated without LLVM's machine instruction scheduler
(``_emitted``): with AVX-512's 32 vector registers, GPT-3 175B's calibrated step time ran a tenth
faster without the scheduler's order and DeepSeek-V3's as fast, and their code generation took a
sixth less (2026-12-02); with AVX2's 16, DeepSeek-V3's scheduled code ran a tenth faster, so
AVX2's code keeps the scheduler.  The order of the instructions changes no result (each is
IEEE's, and every output was the same to the bit)."""
_OPTIONS = threading.Lock()


def _emitted(module, level: int) -> bytes:
    """The object code of ``module`` at code-generation ``level``; at a level above 0 for
    ``UNSCHEDULED_LANES`` lanes, without the machine instruction scheduler (an LLVM option of the
    whole process: set for this code generation only, under a lock, and set back)."""
    if level == 0 or width() < UNSCHEDULED_LANES:
        return _machine(level).emit_object(module)
    llvm = llvmlite()
    with _OPTIONS:
        llvm.set_option("", "-enable-misched=false")
        try:
            return _machine(level).emit_object(module)
        finally:
            llvm.set_option("", "-enable-misched=true")         # LLVM's default, for any other code (numba's)


def compile_vector(converted, arguments, opt_level: int):
    """The ``VectorKernel`` of the symengine expressions ``converted`` over ``arguments``;
    ``None`` without llvmlite or for a set with a node ``vector_ir.program`` does not write."""
    if llvmlite() is None:
        return None
    try:
        text = ir_text(program(converted, arguments), width(), pooled=CODEGEN[opt_level] > 0)
    except NotImplementedError:
        return None
    name = f"kernel_{hashlib.sha256(text.encode()).hexdigest()[:24]}_{CODEGEN[opt_level]}"
    source = zlib.compress(text.replace("@kernel(", f"@{name}(", 1).encode(), 1)
    return VectorKernel(source, name, len(arguments), len(converted), width(), CODEGEN[opt_level])


class ColumnKernel:
    """A kernel that computes on columns (``columns(flat, size, ...)``, ``inputs`` of them),
    called with a matrix of rows as symengine's kernels are."""

    inputs: int

    def __call__(self, inputs, out=None):
        """symengine's calling convention: ``inputs`` one row per configuration, ``out`` the same."""
        inputs = np.atleast_2d(np.asarray(inputs, dtype=np.float64))
        columns = self.columns([inputs[:, j] for j in range(self.inputs)], len(inputs))
        result = np.stack(columns, axis=1) if columns else np.empty((len(inputs), 0))
        if out is None:
            return result
        out[...] = result
        return out


def aligned_empty(size: int) -> np.ndarray:
    """An empty float64 column of ``size`` rows whose first row starts on an ``ALIGNMENT``-byte
    boundary (numpy's own start on 16).

    >>> aligned_empty(5).ctypes.data % ALIGNMENT, aligned_empty(5).shape
    (0, (5,))
    """
    spare = ALIGNMENT // 8
    block = np.empty(size + spare)
    start = (-block.ctypes.data % ALIGNMENT) // 8
    return block[start:start + size]


class VectorKernel(ColumnKernel):
    """Machine code of the function ``name(n, stream, inputs..., outputs...)``: ``n`` rows, a
    multiple of ``lanes``, from contiguous columns into contiguous columns (streamed past the
    caches where ``stream`` is not 0: ``STREAM_ROWS``).  It pickles as its object code
    and its IR (``source``, compressed): the object code loads on a machine of the same
    ``target``, another compiles the IR again."""

    def __init__(self, source: bytes, name: str, inputs: int, outputs: int, lanes: int, level: int):
        self.source, self.name, self.inputs, self.outputs = source, name, inputs, outputs
        self.lanes, self.level, self.target, self.code = lanes, level, host(), None
        self._load()

    def _load(self):
        if self.code is None or self.target != host():
            module = llvmlite().parse_assembly(zlib.decompress(self.source).decode())
            self.code, self.target = _emitted(module, self.level), host()
        kind = _KINDS.get(self.inputs + self.outputs) or _KINDS.setdefault(
            self.inputs + self.outputs,
            ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, *[ctypes.c_void_p] * (self.inputs + self.outputs)))
        self._function = kind(_address(self.name, self.code))

    def __getstate__(self):
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __setstate__(self, state):
        vars(self).update(state)
        self._load()

    def columns(self, flat, size: int, at=None, out=None, threads: int = 2) -> list[np.ndarray]:
        """Every output at the ``size`` rows of the input columns ``flat`` (those at positions
        ``at``), into ``out``'s contiguous float64 columns where given; split between ``threads``
        (at most 2) from ``THREAD_ROWS`` rows."""
        out = [aligned_empty(size) for _ in range(self.outputs)] if out is None else out
        whole = size - size % self.lanes
        if at is None and whole:
            inputs = [np.ascontiguousarray(c, dtype=np.float64) for c in flat]
            self._split(whole, inputs, out, threads)
        elif whole:
            for start in range(0, whole, THREAD_ROWS):
                stop = min(start + THREAD_ROWS, whole)
                inputs = [np.take(c, at[start:stop]).astype(np.float64, copy=False) for c in flat]
                self.run(stop - start, inputs, [o[start:stop] for o in out])
        if whole < size:                # the last rows, padded to one vector
            tail = at[whole:] if at is not None else slice(whole, size)
            padded = [np.resize(np.asarray(c[tail], dtype=np.float64), self.lanes) for c in flat]
            rest = [np.empty(self.lanes) for _ in out]
            self.run(self.lanes, padded, rest)
            for o, r in zip(out, rest):
                o[whole:] = r[:size - whole]
        return out

    def _split(self, rows: int, inputs, out, threads: int):
        """The rows in one call, or between two threads from ``THREAD_ROWS``."""
        if rows < THREAD_ROWS or CORES < 2 or threads < 2:
            return self.run(rows, inputs, out)
        half = rows // 2 - rows // 2 % (ALIGNMENT // 8)    # whole vectors, and the second half aligned
        pool = _POOL[0] if _POOL else _POOL.append(ThreadPoolExecutor(2)) or _POOL[0]
        jobs = [pool.submit(self.run, n, [c[a:a + n] for c in inputs], [o[a:a + n] for o in out])
                for a, n in ((0, half), (half, rows - half))]
        for job in jobs:
            job.result()

    def addresses(self, inputs, out) -> tuple[int, ...]:
        """The addresses of the contiguous float64 columns ``inputs`` and ``out``, for ``run_at``."""
        for column in (*inputs, *out):
            if column.dtype != np.float64 or not column.flags.c_contiguous:
                raise InputError("the vector kernel reads and writes contiguous float64 columns", "columns")
        return tuple(c.ctypes.data for c in (*inputs, *out))

    def run_at(self, rows: int, addresses) -> None:
        """The machine code on ``rows`` (a multiple of ``lanes``) of the columns at ``addresses``
        (``addresses``: the inputs' then the outputs', each at least ``rows`` long); the outputs
        streamed past the caches from ``STREAM_ROWS`` rows where each starts on an
        ``ALIGNMENT``-byte boundary."""
        stream = rows >= STREAM_ROWS and all(a % ALIGNMENT == 0 for a in addresses[self.inputs:])
        self._function(rows, 1 if stream else 0, *addresses)

    def run(self, rows: int, inputs, out):
        """The machine code on ``rows`` (a multiple of ``lanes``) of the contiguous float64 columns
        ``inputs``, into the contiguous float64 columns ``out``."""
        self.run_at(rows, [c.ctypes.data for c in (*inputs, *out)])
