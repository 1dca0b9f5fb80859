"""Device memory that is not the model's tensors: the GPU's overheads, as named parameters.

The peaks of ``models.peak`` (training) and ``inference.peak`` (serving) count tensors: what a
CPU run of PyTorch allocates, checked to the byte there.  A GPU holds more, and how much depends
on the driver, the architecture, the libraries' settings and the allocator's history, none of
which a CPU oracle can check.  **The default is no overhead** (``OVERHEADS["none"]``), so that
every printed peak is the checked count of tensors; ``summary`` and ``inference`` say so, and
``--overheads hopper`` adds a Hopper GPU's, with these sources:

=================== ==================== ======================================================
part                ``hopper``           source
=================== ==================== ======================================================
``context``         723 MiB              the CUDA context and PyTorch's kernels, loaded by the
                                         first CUDA call: 723 MiB measured on the PyTorch forum
                                         ("What is the reason for pytorch's GPU memory floor?");
                                         CUDA's lazy module loading (default since 12.2) lowers
                                         it; never allocated through PyTorch's allocator
``workspace``       32 MiB               cuBLAS's workspace per handle and stream, the size the
                                         cuBLAS reference recommends for Hopper
                                         (``cublasSetWorkspace``; 4 MiB before Hopper), PyTorch's
                                         cuBLASLt default on sm90 (pytorch/pytorch#120925)
``nccl``            ``nccl_buffers(1,    NCCL's buffers: ``NCCL_BUFFSIZE`` (4 MiB, NCCL's
                    2)``: 16 MiB         environment-variable documentation) for each
                                         connection of each channel; one communicator's ring
                                         over NCCL's minimum of 2 channels, a lower bound (its
                                         tuner opens more channels, and each communicator of a
                                         layout its own)
``fragmentation``   1                    the caching allocator's reserved over allocated bytes:
                                         no general figure (it depends on the order of
                                         allocations); a caller sets it from its own
                                         ``torch.cuda.memory_reserved()/memory_allocated()``
=================== ==================== ======================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr, Integer, sympify

from symbolic_cost.checks import InputError, counts, exact

MIB = 2**20

NCCL_BUFFSIZE = 4 * MIB
"""NCCL's ``NCCL_BUFFSIZE`` default, 4,194,304 bytes: the Simple protocol's buffer of one
connection of one channel (NCCL's environment-variable documentation)."""


def nccl_buffers(communicators, channels, peers=2) -> Expr:
    """Bytes of NCCL's Simple-protocol buffers: ``NCCL_BUFFSIZE`` for each of ``peers``
    connections (a ring: the previous and the next rank) of each channel of each communicator.

    >>> nccl_buffers(1, 2) == 16 * 2**20
    True
    """
    sizes = counts(communicators=communicators, channels=channels, peers=peers)
    return sizes["communicators"] * sizes["channels"] * sizes["peers"] * NCCL_BUFFSIZE


@dataclass(frozen=True)
class Overheads:
    """Device memory that is not the model's tensors, in bytes (see the module docstring):
    ``workspace`` (cuBLAS's), ``context`` (CUDA's), ``nccl`` (NCCL's buffers) and the
    allocator's ``fragmentation`` factor, reserved over allocated bytes (1: none)."""

    workspace: Expr = Integer(0)
    context: Expr = Integer(0)
    nccl: Expr = Integer(0)
    fragmentation: Expr = Integer(1)

    def __post_init__(self):
        # bytes: whole and at least 0 (a negative workspace gave memory back, "1GB" was kept as text)
        for name, value in counts(workspace=self.workspace, context=self.context, nccl=self.nccl).items():
            object.__setattr__(self, name, value)
        fragmentation = exact(self.fragmentation, "fragmentation")      # NaN: a TypeError from the comparison
        if fragmentation.is_number and fragmentation < 1:
            raise InputError(f"fragmentation is reserved over allocated bytes, at least 1; got "
                             f"{self.fragmentation}", "fragmentation")
        object.__setattr__(self, "fragmentation", fragmentation)

    def device_bytes(self, allocated: Expr) -> Expr:
        """What the device holds for ``allocated`` bytes of tensors.

        >>> OVERHEADS["none"].device_bytes(1000)
        1000
        """
        return sympify(self.fragmentation) * (allocated + self.workspace) + self.context + self.nccl

    def room(self, capacity: Expr) -> Expr:
        """The bytes of tensors that fit ``capacity`` bytes of device memory: the inverse of
        ``device_bytes``.

        >>> hopper = OVERHEADS["hopper"]
        >>> hopper.device_bytes(hopper.room(80 * 10**9)) == 80 * 10**9
        True
        """
        return (sympify(capacity) - self.context - self.nccl) / sympify(self.fragmentation) - self.workspace

    @property
    def counted(self) -> bool:
        """Whether any overhead is counted."""
        return self != Overheads()


OVERHEADS = {
    "none": Overheads(),
    "hopper": Overheads(workspace=32 * MIB, context=723 * MIB, nccl=nccl_buffers(1, 2)),
}
"""The named choices of overheads (the module docstring gives each part's source)."""


MEASURED_ON = {"hopper": "hopper"}
"""The GPU generation each named set of overheads was measured on (``Efficiency.arch``): a CUDA
context, cuBLAS's workspace and NCCL's buffers differ from one generation and driver to the next."""


def check_overheads(name, arch: str | None, system: str) -> None:
    """Refuse a named set of overheads on a system of another generation (``arch``, from the
    system's file; ``None`` where it states none) than the one it was measured on."""
    measured = MEASURED_ON.get(name) if isinstance(name, str) else None
    if measured is not None and arch != measured:
        raise InputError(f"overheads {name!r} were measured on {measured.title()} GPUs, and system {system} is not "
                         f"one ({arch or 'no generation stated'}): --overheads none, or pass your own Overheads",
                         "overheads")


def get_overheads(name) -> Overheads:
    """An ``Overheads`` value or the name of one of ``OVERHEADS``."""
    if isinstance(name, Overheads):
        return name
    if name not in OVERHEADS:
        raise InputError(f"overheads must be one of {', '.join(OVERHEADS)}, got {name!r}", "overheads")
    return OVERHEADS[name]
