"""The systems: one accelerator and its links, as datasheets state them (``System``), and the
presets by name (``SYSTEMS``, ``get_system``).  How long work takes on them is ``hardware``
(the peak-only roofline) and ``efficiency`` (the calibrated model).

Every constant is the vendor's figure for dense (not sparse) math, with its source beside it;
what no source states is marked as an assumption.
"""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path

from sympy import Expr, Integer, Rational

from symbolic_cost.checks import LARGEST_COUNT, InputError, InputTypeError, shown, within_double
from symbolic_cost.cost import exact
from symbolic_cost.models.optimizers import get_fp8

TERA, GIGA, MICRO = Integer(10) ** 12, Integer(10) ** 9, Rational(1, 10**6)


@dataclass(frozen=True)
class System:
    """One accelerator and its links.

    ``nvlink_size`` is the number of devices that share an NVLink domain;
    bandwidths are per device and direction (a ring step sends one way while it receives the
    other), so NVLink's is half the two-way total the datasheets quote (H100's 900 GB/s is 450
    each way; ``nvlink_bandwidth``); the seeds' own systems keep their tools' figures.  The
    memory-hierarchy fields (``l2_*``, ``shared_memory_capacity`` summed over
    the chip, ``memory_latency``, ``launch_overhead``) feed only the kernel-level
    model (``kernel_time="tiled"``, see ``kernels``).  A field that may be 0
    means "not stated" (capacities, latencies) or "no such link" (bandwidths of
    links, L2).  ``host_bandwidth`` is the device's link to its host's memory, which
    offloaded state crosses (``timing.host``): PCIe Gen4 x16 on A100 boards, 32 GB/s per
    direction (half the datasheet's 64 GB/s both ways), PCIe Gen5 x16 on H100/H200 SXM,
    64 GB/s (128 GB/s both ways); a Grace Hopper's NVLink-C2C is 450 GB/s per direction
    (900 GB/s both ways: the ``gh200`` preset).  ``host_memory_bandwidth`` is a
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
    fp4_flops: Expr = 0                # FLOP/s of dense FP4 (E2M1) products; 0: no FP4 tensor cores
    block_formats: tuple = ()          # the block-scaled formats its tensor cores run (BLOCK_FORMATS); (): none
    host_memory_bandwidth: Expr = 0    # bytes/s of a node's host memory (all sockets); 0: not stated
    board_power: Expr = 0              # W a device draws at its limit (the datasheet's TDP); 0: not stated
    efficiency: object = None          # a timing.efficiency.Efficiency: the calibrated model; None: peak only

    _REQUIRED = ("matrix_flops", "vector_flops", "hbm_bandwidth", "nvlink_size")
    _COUNTS = ("nvlink_size",)
    _SIZES = ("hbm_capacity", "l2_capacity", "shared_memory_capacity")

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise InputTypeError(f"a system's name must be text, got {shown(self.name)}", "name")
        # timing.efficiency reads this module's presets: its class is known here by the fields it has
        if self.efficiency is not None and not all(hasattr(self.efficiency, name) for name in EFFICIENCY_FIELDS):
            raise InputTypeError(f"efficiency must be a timing.efficiency.Efficiency (None: peak only), got "
                                 f"{shown(self.efficiency)}", "efficiency")
        object.__setattr__(self, "block_formats", _block_formats(self.name, self.block_formats))
        for item in fields(self)[1:]:
            if item.name in ("efficiency", "block_formats"):
                continue
            value = exact(getattr(self, item.name), item.name)
            # decided as far as SymPy can: -F of a positive F is negative, a number is either
            if value.is_negative or (item.name in self._REQUIRED and value.is_nonpositive):
                raise InputError(f"system {self.name}: {item.name} must be positive, got {value}", item.name)
            # every result divided or multiplied by a figure out of a double's range prints as inf
            within_double(value, item.name, f"system {self.name}: ")
            if item.name in self._COUNTS and value.is_number and not value.is_integer:
                raise InputError(f"system {self.name}: {item.name} counts devices, a whole number, got {value}",
                                 item.name)
            if item.name in self._COUNTS + self._SIZES and value.is_number and value > LARGEST_COUNT:
                raise InputError(f"system {self.name}: {item.name} must be at most 2**53 (a count a double holds "
                                 f"exactly), got {value.evalf(4)}", item.name)
            object.__setattr__(self, item.name, value)

    def but(self, **changes) -> "System":
        known = {item.name for item in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise InputError(f"unknown system field(s): {', '.join(sorted(unknown))}; "
                             f"fields: {', '.join(sorted(known - {'name'}))}", sorted(unknown)[0])
        return replace(self, **changes)

    def require(self, purpose: str, *names: str) -> None:
        """Raise a ``ValueError`` if a field ``purpose`` needs is stated as 0."""
        for name in names:
            if getattr(self, name) == 0:
                raise InputError(f"system {self.name}: {purpose} needs {name}, which is 0 (not stated); "
                                 f"state it in a --system-file (System.but({name}=...) in Python)", "system")


BLOCK_FORMATS = {"mxfp8": "MX", "mxfp4": "MX", "nvfp4": "NVFP4"}
"""The block-scaled product formats a system's tensor cores may run (``System.block_formats``), and
the kind each is: ``mxfp8`` (E4M3) and ``mxfp4`` (E2M1) with one E8M0 scale per 32 elements (OCP
Microscaling v1.0), ``nvfp4`` (E2M1) with one E4M3 scale per 16 elements and an fp32 one per tensor
(NVIDIA's).  Blackwell's tensor cores run all three; CDNA 4's (MI350X, MI355X) the MX ones, not
NVFP4; Hopper's, Ampere's, Ada's and CDNA 3's none.  Which formats use which: ``require_block_format``."""


def _block_formats(name, formats) -> tuple:
    """``formats`` as ``System.block_formats`` holds them: known names, each once, in
    ``BLOCK_FORMATS``'s order."""
    if isinstance(formats, str) or not isinstance(formats, (tuple, list)) \
            or not all(isinstance(f, str) and f in BLOCK_FORMATS for f in formats) \
            or len(set(formats)) != len(formats):
        raise InputError(f"system {name}: block_formats must be a list of distinct names among "
                         f"{', '.join(BLOCK_FORMATS)} (empty: none), got {formats!r}", "block_formats")
    return tuple(f for f in BLOCK_FORMATS if f in formats)


EFFICIENCY_FIELDS = ("matrix", "memory", "kernel", "step", "sms", "tile_m", "tile_n", "nvlink_bus", "ib_bus")
"""What the calibrated model reads of ``System.efficiency`` (``timing.efficiency.Efficiency``)."""

SYSTEM_FILES = Path(__file__).with_name("system_files")
"""One JSON file a system preset: its ``System`` fields with their sources, and under
``calibrated`` what the calibrated model needs (``timing.efficiency``).  Adding a GPU is adding a
file here; ``load_system_file`` (``--system-file``) reads one from anywhere."""

_TEXT = ("name", "source", "chip_source", "listed")
CAPACITIES = System._SIZES
"""Fields of a system file that count bytes: given, each is a positive whole number (0 is what a
file that leaves one out means, and a memory check skipped silently; 1.5 bytes is no memory)."""
_CALIBRATED = ("family", "sms", "tile_m", "tile_n", "nvlink_bus", "ib_bus", "arch", "nvls", "attention_kernel", "source")
_CALIBRATED_REQUIRED = ("family", "sms", "tile_m", "tile_n", "nvlink_bus", "ib_bus")


def read_system(data: dict, where: str) -> tuple[System, dict | None]:
    """The ``System`` a system file describes, and its ``calibrated`` section (``None`` without
    one: the peak-only model alone).  Numbers are integers, or text read exactly (``"989.4e12"``,
    ``"1/3"``); a JSON fraction is read as the decimal it prints (``0.5`` is 1/2)."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"].strip():
        raise InputError(f"{where}: a system file is a JSON object with a \"name\"", "system_file")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", data["name"]):     # shown in every table, and a --system name
        raise InputError(f"{where}: name must be ASCII letters, digits and . _ + - (as --system names are), got "
                         f"{data['name']!r}", "system_file")
    known = {item.name for item in fields(System)} - {"efficiency"}
    unknown = sorted(set(data) - known - set(_TEXT) - {"calibrated"})
    if unknown:
        raise InputError(f"{where}: unknown field(s) {', '.join(unknown)}; fields: {', '.join(sorted(known))}, "
                         f"calibrated", "system_file")
    values = {k: _exact(v, f"{where}: {k}") for k, v in data.items()
              if k in known and k not in ("name", "block_formats")}
    if "block_formats" in data:
        values["block_formats"] = _block_formats(f"{data['name']} ({where})", data["block_formats"])
    # the required figures, and the links' bandwidths, which have no default (0 given: no such link)
    missing = [item.name for item in fields(System) if item.name not in values and item.name != "name"
               and item.default is MISSING]
    if missing:
        raise InputError(f"{where}: {', '.join(missing)} must be given", "system_file")
    for name in CAPACITIES:
        if name in values and (values[name] <= 0 or not values[name].is_integer):
            raise InputError(f"{where}: {name} must be a positive whole number of bytes, got {values[name]} (leave it "
                             f"out where the device's datasheet does not state it)", "system_file")
    calibrated = data.get("calibrated")
    if calibrated is not None:
        if not isinstance(calibrated, dict) or sorted(set(calibrated) - set(_CALIBRATED)):
            raise InputError(f"{where}: calibrated holds {', '.join(_CALIBRATED)}", "system_file")
        missing = [k for k in _CALIBRATED_REQUIRED if k not in calibrated]
        if missing:
            raise InputError(f"{where}: calibrated needs {', '.join(missing)}", "system_file")
        calibrated = {k: _calibrated_value(k, v, f"{where}: calibrated.{k}") for k, v in calibrated.items()}
    return System(data["name"], **values), calibrated


def _calibrated_value(name: str, value, where: str):
    """A value of a system file's ``calibrated`` section: text for its names, ``true`` or
    ``false`` for ``nvls`` (a JSON string ``"no"`` is no boolean), else a number (``_exact``)."""
    if name == "nvls":
        if not isinstance(value, bool):
            raise InputError(f"{where} must be true or false, got {value!r}", "system_file")
        return value
    if name in _CALIBRATED_TEXT:
        if not isinstance(value, str):
            raise InputError(f"{where} must be text, got {value!r}", "system_file")
        return value
    return _exact(value, where)


_CALIBRATED_TEXT = ("family", "arch", "attention_kernel", "source")


def _exact(value, where: str):
    """A number of a system file, exact: an int, a float as the decimal it prints, or text."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{where} must be a number, got {value!r}", "system_file")
    try:
        return Rational(repr(value) if isinstance(value, float) else value)
    except (TypeError, ValueError, SyntaxError, ZeroDivisionError):
        raise InputError(f"{where} must be a number, got {value!r}", "system_file") from None


def _presets() -> tuple[dict, dict]:
    """Every system file of ``SYSTEM_FILES``: ``SYSTEMS`` in their ``listed`` order, and their
    ``calibrated`` sections by name."""
    read = []
    for path in sorted(SYSTEM_FILES.glob("*.json")):
        data = json.loads(path.read_text())
        read.append((data.get("listed", 10**9), data.get("name", ""), *read_system(data, path.name)))
    read.sort(key=lambda item: (item[0], item[1]))
    return ({system.name: system for _, _, system, _ in read},
            {system.name: calibrated for _, _, system, calibrated in read if calibrated is not None})


SYSTEMS, CALIBRATED = _presets()
"""The system presets by name, and what the calibrated model reads of each (``timing.efficiency``)."""


def load_system_file(path) -> str:
    """Read a system file (as those of ``SYSTEM_FILES``) and make it a preset like the others;
    its name.  A file may not replace a preset of the package."""
    from symbolic_cost.files import input_file
    text = input_file(str(path), "--system-file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{Path(path).name}: not valid JSON ({error.msg}, line {error.lineno})", "--system-file") \
            from None
    except RecursionError:
        raise InputError(f"{Path(path).name}: nested too deeply to be a system file", "--system-file") from None
    except ValueError:      # Python reads no integer of more than 4,300 digits
        raise InputError(f"{Path(path).name}: holds a number of more than 4,300 digits, which no system's figure "
                         f"needs", "--system-file") from None
    system, calibrated = read_system(data, Path(path).name)
    if system.name in SYSTEMS and SYSTEMS[system.name] != system:
        raise InputError(f"{Path(path).name}: a system named {system.name!r} is a preset already; name yours "
                         f"otherwise", "--system-file")
    SYSTEMS[system.name] = system
    if calibrated is not None:
        CALIBRATED[system.name] = calibrated
    return system.name


def get_system(name: str | System) -> System:
    """Look up a system preset by name (a ``System`` passes through)."""
    if isinstance(name, System):
        return name
    if not isinstance(name, str):
        raise InputTypeError(f"system must be a preset's name ({', '.join(SYSTEMS)}) or a System, got {shown(name)}",
                             "system")
    try:
        return SYSTEMS[name]
    except KeyError:
        raise InputError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}", "system") from None


def product_rate(cost, system: System) -> Expr:
    """FLOP/s of a matrix row's products on ``system``: its FP4 rate for a row whose products read
    4-bit inputs (``Cost.fp4``: NVFP4, the library's only FP4 products; refused on a system without
    FP4 tensor cores, or whose tensor cores do not run NVFP4), its FP8 rate for an FP8 row where it
    has one, else the 16-bit matrix rate."""
    if getattr(cost, "fp4", False):
        if not system.fp4_flops:
            raise InputError(f"system {system.name} has no FP4 tensor cores (fp4_flops is 0): 4-bit products "
                             f"need a Blackwell part (b200, b300, gb200, gb300), or fp4_flops in a --system-file "
                             f"(System.but(fp4_flops=...) in Python)", "system")
        require_block_format(system, "nvfp4", "4-bit products (NVFP4)", "system")
        return system.fp4_flops
    if cost.fp8 and system.fp8_flops:
        return system.fp8_flops
    return system.matrix_flops


def check_block_scaling(recipe: str | None, system: System) -> None:
    """Refuse a training recipe whose products apply block scales (``mxfp8``: one E8M0 scale per 32
    elements; ``nvfp4``: one E4M3 scale per 16, ``models.optimizers.FP8_RECIPES``) on a system
    whose tensor cores do not run its format (``require_block_format``).  An FP8 recipe of any kind
    is refused on a system without FP8 tensor cores (``fp8_flops`` 0: A100, whose Ampere cores
    Transformer Engine does not run FP8 on), rather than timed at the 16-bit rate."""
    fp8 = get_fp8(recipe)
    if fp8 is not None and fp8.products == "fp8" and not system.fp8_flops:
        raise InputError(f"fp8={recipe!r} runs FP8 products, and system {system.name} has no FP8 tensor cores "
                         f"(fp8_flops is 0; Transformer Engine's FP8 needs compute capability 8.9 or later: Ada, "
                         f"Hopper, Blackwell; or fp8_flops in a --system-file, System.but(fp8_flops=...) in "
                         f"Python)", "fp8")
    if fp8 is not None and fp8.block_format is not None:
        require_block_format(system, fp8.block_format, f"fp8={recipe!r}", "fp8")


def require_block_format(system: System, fmt: str, what: str, argument: str) -> None:
    """Refuse ``what``, products in the block-scaled format ``fmt`` (``BLOCK_FORMATS``), on a
    system whose tensor cores do not run it (``System.block_formats``): the one rule training's
    recipes (``check_block_scaling``), served weights (``inference.weight_formats.check_weights``)
    and 4-bit rows (``product_rate``) meet.  Transformer Engine runs MXFP8 and NVFP4 from SM 10.0
    (Blackwell) on; AMD's CDNA 4 ISA and MI355X datasheet list MXFP8, MXFP6 and MXFP4, not NVFP4.

    >>> require_block_format(get_system("mi355x"), "mxfp8", "fp8='mxfp8'", "fp8")
    >>> require_block_format(get_system("mi355x"), "nvfp4", "fp8='nvfp4'", "fp8")
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: fp8='nvfp4' needs block-scaled (NVFP4) tensor cores, and system mi355x runs ...
    """
    if fmt not in system.block_formats:
        runs = f"runs {', '.join(system.block_formats)} only" if system.block_formats else "has none"
        raise InputError(f"{what} needs block-scaled ({BLOCK_FORMATS[fmt]}) tensor cores, and system {system.name} "
                         f"{runs} (System.block_formats): Blackwell parts (b200, b300, gb200, gb300) run mxfp8, "
                         f"mxfp4 and nvfp4, CDNA 4 (mi350x, mi355x) mxfp8 and mxfp4 (or block_formats in a "
                         f"--system-file, System.but(block_formats=(...)) in Python)", argument)
