"""A sequence-parallel scheme on one device: tensor shapes, FLOPs, memory and collectives.

Dimensions are symbols unless ``--set`` fixes them; ``m1`` (tensor parallelism)
is 1 unless set.  Formulas are in FLOPs, bytes and seconds.
"""

from __future__ import annotations

from sympy import simplify

from symbolic_cost import symbols as S
from symbolic_cost.latex import latex
from symbolic_cost.cli import options
from symbolic_cost.checks import InputError
from symbolic_cost.cli.values import block_values, conventions, honour, symbols_of
from symbolic_cost.parallel.sequence import megatron_sp, ring_attention, ulysses
from symbolic_cost.timing.hardware import comm_time, get_system

SCHEMES = ("megatron-sp", "ulysses", "ring-attention")

EXAMPLES = [
    "symbolic-cost scheme --scheme ulysses --set s1=8 --flash",
    "symbolic-cost scheme --scheme ring-attention --set b=1 l=131072 e=8192 h=64 c=8",
]


def add_arguments(parser) -> None:
    options.option(parser, "--scheme", choices=SCHEMES, default="ulysses", help="which scheme")
    options.settings(parser, help="fix symbols: NAME=VALUE pairs, several after one --set or repeated; "
                                  "m1 defaults to 1 (no tensor parallelism)")
    options.precision(parser)
    options.flash(parser)
    options.option(parser, "--no-causal", action="store_true", help="ring attention without a causal mask")
    options.option(parser, "--contiguous", action="store_true", help="ring attention without zig-zag balancing")
    options.counting(parser, kernel_time=False)
    options.latex(parser)


def build(args, values: dict | None = None):
    """The scheme of ``--scheme`` with the values of ``--set`` (or of ``values``)."""
    values = block_values(args, None, base={S.m1: 1}) if values is None else values
    get = lambda sym: values.get(sym, sym)  # noqa: E731
    dims = dict(b=get(S.b), l=get(S.l), e=get(S.e), h=get(S.h), es=get(S.es), conventions=conventions(args))
    if args.scheme == "ulysses":
        return ulysses(s1=get(S.s1), m1=get(S.m1), flash=args.flash, es_mask=get(S.es_mask), **dims)
    if args.scheme == "ring-attention":
        return ring_attention(c=get(S.c), m1=get(S.m1), causal=not args.no_causal,
                              balanced=not args.contiguous, **dims)
    return megatron_sp(m1=get(S.m1), flash=args.flash, es_mask=get(S.es_mask), **dims)


def refuse_ignored(args) -> None:
    """Options one scheme cannot honour: ``--no-causal`` and ``--contiguous`` are ring attention's,
    ``--flash`` the others' (ring attention counts its own blockwise kernel); a ``--set`` of a
    symbol the scheme does not depend on."""
    ring = args.scheme == "ring-attention"
    for flag, on in (("--no-causal", args.no_causal and not ring), ("--contiguous", args.contiguous and not ring),
                     ("--flash", args.flash and ring)):
        if on:
            raise InputError(f"{flag} does not apply to --scheme {args.scheme}; it would be ignored", flag)
    if args.contiguous and args.no_causal:     # zig-zag evens a causal mask's work; without one every chunk is even
        raise InputError("--contiguous does not apply with --no-causal (without a causal mask every chunk of keys is "
                         "the same work, balanced or not); it would be ignored", "--contiguous")
    symbolic = build(args, {})
    honour(args, symbols_of(symbolic.block) | {t for x in symbolic.tensors for t in x.bytes.free_symbols},
           f"--scheme {args.scheme}")


def run(args) -> int:
    refuse_ignored(args)
    scheme = build(args)
    system, chosen = get_system(args.system), conventions(args)
    show = lambda x: latex(x) if args.latex else str(simplify(x))  # noqa: E731
    print(f"{scheme.name} over {scheme.degree} devices; per device unless noted")
    print("tensors (shape; bytes):")
    for t in scheme.tensors:
        print(f"  {t.name}: ({', '.join(map(str, t.shape))}); {show(t.bytes)}")
    for pass_ in ("fwd", "bwd"):
        print(f"flops_{pass_} (FLOP): {show(scheme.flops(pass_))}; summed over devices: "
              f"{show(scheme.degree * scheme.flops(pass_))}")
    print(f"activations kept (bytes): {show(scheme.block.total('act_buffer'))}")
    print(f"weights (bytes): {show(scheme.block.total('weights'))}")
    print(f"collectives (kind, group, pass, row: volume in bytes; time in s on {args.system}):")
    for row in scheme.block:
        for c in row.collectives:
            repeat = f" x{c.repeats}" if c.repeats != 1 else ""
            print(f"  {c.kind}{repeat}, {c.group}, {c.pass_}, {row.name}: {show(c.volume)}; "
                  f"{show(comm_time(c, system, chosen))}")
    return 0
