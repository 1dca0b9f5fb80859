"""The systems: one accelerator and its links, as datasheets state them (``System``), and the
presets by name (``SYSTEMS``, ``get_system``).  How long work takes on them is ``hardware``
(the peak-only roofline) and ``efficiency`` (the calibrated model).

Every constant is the vendor's figure for dense (not sparse) math, with its source beside it;
what no source states is marked as an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from sympy import Expr, Integer, Rational

from symbolic_cost.checks import InputError
from symbolic_cost.cost import exact
from symbolic_cost.models.optimizers import get_fp8

TERA, GIGA, MICRO = Integer(10) ** 12, Integer(10) ** 9, Rational(1, 10**6)


@dataclass(frozen=True)
class System:
    """One accelerator and its links.

    ``nvlink_size`` is the number of devices that share an NVLink domain;
    bandwidths are per device and direction as the vendors quote them.  The
    memory-hierarchy fields (``l2_*``, ``shared_memory_capacity`` summed over
    the chip, ``memory_latency``, ``launch_overhead``) feed only the kernel-level
    model (``kernel_time="tiled"``, see ``kernels``).  A field that may be 0
    means "not stated" (capacities, latencies) or "no such link" (bandwidths of
    links, L2).  ``host_bandwidth`` is the device's link to its host's memory, which
    offloaded state crosses (``timing.host``): PCIe Gen4 x16 on A100 boards, 32 GB/s per
    direction (half the datasheet's 64 GB/s both ways), PCIe Gen5 x16 on H100/H200 SXM,
    64 GB/s (128 GB/s both ways); a Grace Hopper's NVLink-C2C is 450 GB/s per direction
    (900 GB/s both ways): ``.but(host_bandwidth=450 * GIGA)``.  ``host_memory_bandwidth`` is a
    node's host memory (all its sockets), which an offloaded optimizer step streams
    (``timing.host.host_step_time``): 8 channels of DDR5-4800 per Xeon 8480C, two per DGX
    H100 / HGX H200 node (614.4 GB/s); 8 of DDR4-3200 per EPYC 7742, two per DGX A100
    (409.6 GB/s), one EPYC 7763 per Perlmutter GPU node (204.8 GB/s): channels x transfers/s x
    8 bytes, the vendors' peak.
    """

    name: str
    matrix_flops: Expr       # FLOP/s on matrix units (dense, 16-bit)
    vector_flops: Expr       # FLOP/s on vector units (16-bit)
    hbm_bandwidth: Expr      # bytes/s
    nvlink_bandwidth: Expr   # bytes/s per device
    ib_bandwidth: Expr       # bytes/s per device
    nvlink_size: Expr        # devices per NVLink domain
    nvlink_latency: Expr = 2 * MICRO   # s per ring step (assumed, order of NCCL's)
    ib_latency: Expr = 5 * MICRO       # s per ring step (assumed)
    hbm_capacity: Expr = 0             # bytes; 0 when not stated
    l2_bandwidth: Expr = 0             # bytes/s
    l2_capacity: Expr = 0              # bytes
    shared_memory_capacity: Expr = 0   # bytes, all SMs together
    memory_latency: Expr = 0           # s added to a memory-bound kernel
    launch_overhead: Expr = 0          # s per kernel launch
    host_bandwidth: Expr = 0           # bytes/s per device and direction to host memory (PCIe, NVLink-C2C)
    fp8_flops: Expr = 0                # FLOP/s of dense FP8 products on matrix units; 0: none (matrix_flops)
    fp4_flops: Expr = 0                # FLOP/s of dense FP4 (NVFP4) products; 0: no FP4 tensor cores
    host_memory_bandwidth: Expr = 0    # bytes/s of a node's host memory (all sockets); 0: not stated
    efficiency: object = None          # a timing.efficiency.Efficiency: the calibrated model; None: peak only

    _REQUIRED = ("matrix_flops", "vector_flops", "hbm_bandwidth", "nvlink_size")

    def __post_init__(self):
        for item in fields(self)[1:]:
            if item.name == "efficiency":
                continue
            value = exact(getattr(self, item.name), item.name)
            if value.is_number and (value < 0 or (value == 0 and item.name in self._REQUIRED)):
                raise InputError(f"system {self.name}: {item.name} must be positive, got {value}")
            object.__setattr__(self, item.name, value)

    def but(self, **changes) -> "System":
        known = {item.name for item in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise InputError(f"unknown system field(s): {', '.join(sorted(unknown))}; "
                             f"fields: {', '.join(sorted(known - {'name'}))}")
        return replace(self, **changes)

    def require(self, purpose: str, *names: str) -> None:
        """Raise a ``ValueError`` if a field ``purpose`` needs is stated as 0."""
        for name in names:
            if getattr(self, name) == 0:
                raise InputError(f"system {self.name}: {purpose} needs {name}, which is 0 (not stated); "
                                 f"set it with .but({name}=...)")


KIB, MIB = Integer(2) ** 10, Integer(2) ** 20

_AMPERE_CHIP = dict(
    l2_capacity=40 * MIB, shared_memory_capacity=108 * 164 * KIB,   # 108 SMs x 164 KiB
    l2_bandwidth=5120 * Rational(141, 100) * GIGA,   # 5120 B/clock at 1.41 GHz (whitepaper)
    memory_latency=Rational(1, 2) * MICRO,           # assumed, order of a DRAM round trip
    launch_overhead=4 * MICRO)                        # assumed, order of a CUDA launch
_HOPPER_CHIP = dict(
    l2_capacity=50 * MIB, shared_memory_capacity=132 * 228 * KIB,   # 132 SMs x 228 KiB
    l2_bandwidth=5120 * Rational(198, 100) * GIGA,   # 5120 B/clock at 1.98 GHz (assumed)
    memory_latency=Rational(1, 2) * MICRO, launch_overhead=4 * MICRO)

_BLACKWELL_CHIP = dict(
    l2_capacity=126 * MIB, shared_memory_capacity=148 * 228 * KIB,  # 148 SMs x 228 KiB (assumed Hopper's per SM)
    memory_latency=Rational(1, 2) * MICRO, launch_overhead=4 * MICRO)

_DDR4_3200, _DDR5_4800 = 8 * 3200 * 10**6 * 8, 8 * 4800 * 10**6 * 8
"""Peak bytes/s of one socket's 8 memory channels (channels x transfers/s x 8 bytes)."""

SYSTEMS = {
    # The numbers of seed 003 (LBNL, Perlmutter: 4 x A100-40GB per node).
    "a100-perlmutter": System("a100-perlmutter", 312 * TERA, 78 * TERA, 1555 * GIGA,
                              600 * GIGA, 100 * GIGA, 4, hbm_capacity=40 * GIGA, host_bandwidth=32 * GIGA,
                              host_memory_bandwidth=_DDR4_3200, **_AMPERE_CHIP),
    # DGX A100 80GB: 8 GPUs on NVSwitch, one 200 Gb/s HDR NIC per GPU.
    "a100": System("a100", 312 * TERA, 78 * TERA, 2039 * GIGA, 600 * GIGA, 25 * GIGA, 8,
                   hbm_capacity=80 * GIGA, host_bandwidth=32 * GIGA, host_memory_bandwidth=2 * _DDR4_3200,
                   **_AMPERE_CHIP),
    # DGX H100 (SXM): 989.4 TFLOP/s dense bf16 (1978.9 FP8), 8 GPUs, one 400 Gb/s NDR NIC per GPU.
    "h100": System("h100", Rational("989.4") * TERA, Rational("133.8") * TERA, 3350 * GIGA,
                   900 * GIGA, 50 * GIGA, 8, hbm_capacity=80 * GIGA, host_bandwidth=64 * GIGA,
                   fp8_flops=Rational("1978.9") * TERA, host_memory_bandwidth=2 * _DDR5_4800, **_HOPPER_CHIP),
    # H200 (SXM): H100 compute, 141 GB HBM3e at 4.8 TB/s.
    "h200": System("h200", Rational("989.4") * TERA, Rational("133.8") * TERA, 4800 * GIGA,
                   900 * GIGA, 50 * GIGA, 8, hbm_capacity=141 * GIGA, host_bandwidth=64 * GIGA,
                   fp8_flops=Rational("1978.9") * TERA, host_memory_bandwidth=2 * _DDR5_4800, **_HOPPER_CHIP),
    # H100 PCIe (NVIDIA H100 datasheet): 756 TFLOP/s dense bf16 (1,513 FP8; the datasheet's figures
    # with sparsity halved), 2.0 TB/s HBM2e, 80 GB, 114 SMs; NVLink bridges join pairs at 600 GB/s;
    # 16-bit vector rate twice the 51.2 TFLOP/s FP32; one 400 Gb/s NIC per GPU (assumed).
    "h100-pcie": System("h100-pcie", 756 * TERA, Rational("102.4") * TERA, 2000 * GIGA, 600 * GIGA, 50 * GIGA, 2,
                        hbm_capacity=80 * GIGA, host_bandwidth=64 * GIGA, fp8_flops=1513 * TERA,
                        host_memory_bandwidth=2 * _DDR5_4800,
                        **{**_HOPPER_CHIP, "shared_memory_capacity": 114 * 228 * KIB}),
    # DGX B200: 2,250 TFLOP/s dense bf16, 4,500 FP8, 9,000 NVFP4 (NVIDIA/dgxc-benchmarking README), 7.7 TB/s HBM3e and
    # 180 GB (ai-dynamo/aiconfigurator systems/b200_sxm.yaml; TensorRT-LLM's perf overview), NVLink 5 at
    # 1.8 TB/s, 8 GPUs, one 800 Gb/s CX8 NIC per GPU (aiconfigurator); the 16-bit vector rate is not in
    # the sources read: twice an FP32 rate of 80 TFLOP/s (assumed).
    "b200": System("b200", 2250 * TERA, 160 * TERA, 7700 * GIGA, 1800 * GIGA, 100 * GIGA, 8,
                   hbm_capacity=180 * GIGA, host_bandwidth=64 * GIGA, fp8_flops=4500 * TERA, fp4_flops=9000 * TERA,
                   host_memory_bandwidth=2 * _DDR5_4800, **_BLACKWELL_CHIP),
    # GB200 NVL72, one Blackwell GPU: 2,450 TFLOP/s dense bf16, 4,900 FP8, 9,800 NVFP4 (dgxc-benchmarking), 8 TB/s
    # HBM3e, 189,471 MiB as nvidia-smi reports it, 72 GPUs on one NVLink domain at 1.8 TB/s, 100 GB/s
    # between racks (aiconfigurator systems/gb200.yaml); NVLink-C2C to its Grace, 450 GB/s each way;
    # vector rate assumed as B200's.
    "gb200": System("gb200", 2450 * TERA, 160 * TERA, 8000 * GIGA, 1800 * GIGA, 100 * GIGA, 72,
                    hbm_capacity=189471 * MIB, host_bandwidth=450 * GIGA, fp8_flops=4900 * TERA, fp4_flops=9800 * TERA,
                    **_BLACKWELL_CHIP),
    # AMD Instinct MI300X (AMD's datasheet): 1,307.4 TFLOP/s dense bf16, 2,614.9 FP8, 163.4 TFLOP/s
    # vector (FP32, taken for 16-bit too), 5.3 TB/s HBM3, 192 GB, 8 GPUs fully connected by 7 Infinity
    # Fabric links (896 GB/s in all), PCIe Gen5 to the host; one 400 Gb/s NIC per GPU (assumed).
    "mi300x": System("mi300x", Rational("1307.4") * TERA, Rational("163.4") * TERA, 5300 * GIGA, 896 * GIGA,
                     50 * GIGA, 8, hbm_capacity=192 * GIGA, host_bandwidth=64 * GIGA,
                     fp8_flops=Rational("2614.9") * TERA, host_memory_bandwidth=2 * _DDR5_4800,
                     memory_latency=Rational(1, 2) * MICRO, launch_overhead=4 * MICRO),
}


def get_system(name: str | System) -> System:
    """Look up a system preset by name (a ``System`` passes through)."""
    if isinstance(name, System):
        return name
    try:
        return SYSTEMS[name]
    except KeyError:
        raise InputError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}") from None


def product_rate(cost, system: System) -> Expr:
    """FLOP/s of a matrix row's products on ``system``: its FP4 rate for a row whose products read
    4-bit inputs (``Cost.fp4``; refused on a system without FP4 tensor cores), its FP8 rate for an
    FP8 row where it has one, else the 16-bit matrix rate."""
    if getattr(cost, "fp4", False):
        if not system.fp4_flops:
            raise InputError(f"system {system.name} has no FP4 tensor cores (fp4_flops is 0): 4-bit products "
                             f"need a Blackwell part (b200, gb200) or .but(fp4_flops=...)", "system")
        return system.fp4_flops
    if cost.fp8 and system.fp8_flops:
        return system.fp8_flops
    return system.matrix_flops


def check_block_scaling(recipe: str | None, system: System) -> None:
    """Refuse a training recipe whose FP8 products apply block scales (``mxfp8``: one E8M0 scale
    per 32 elements, ``models.optimizers.FP8_RECIPES``) on a system whose tensor cores cannot.
    Blackwell's fifth-generation tensor cores brought the block-scaled (MX) products together with
    FP4 (Transformer Engine: MXFP8 and NVFP4 need SM 10.0 or later); among the systems those are
    exactly the ones with ``fp4_flops`` (b200, gb200), so that field stands for the support.  An
    FP8 recipe of any kind is refused on a system without FP8 tensor cores (``fp8_flops`` 0: A100,
    whose Ampere cores Transformer Engine does not run FP8 on), rather than timed at the 16-bit
    rate.  An FP4 recipe (``nvfp4``) meets ``product_rate``'s refusal instead."""
    fp8 = get_fp8(recipe)
    if fp8 is not None and fp8.products == "fp8" and not system.fp8_flops:
        raise InputError(f"fp8={recipe!r} runs FP8 products, and system {system.name} has no FP8 tensor cores "
                         f"(fp8_flops is 0; Transformer Engine's FP8 needs compute capability 8.9 or later: Ada, "
                         f"Hopper, Blackwell, or .but(fp8_flops=...))", "fp8")
    if fp8 is not None and fp8.block_scaled and fp8.products == "fp8" and not system.fp4_flops:
        raise InputError(f"fp8={recipe!r} needs block-scaled (MX) tensor cores, and system {system.name} has none: "
                         f"Blackwell parts (b200, gb200) have them (or .but(fp4_flops=...))", "fp8")
