"""What a command builds from its options: the model (``--preset``, ``--hf-config``,
``--hf-model``) and its default training values, the block a block command builds (the plain
builder, the model's own layer part or a tensor grid's), and the conventions.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from sympy import sympify

from symbolic_cost import conventions as conv
from symbolic_cost import symbols as S
from symbolic_cost.blocks import BUILDERS, Experts, Feedforward, Heads, Projections, Residual, Run, Scores, Wiring
from symbolic_cost.checks import InputError
from symbolic_cost.cli.options import PLAIN, given
from symbolic_cost.cli.parse import assignments, resolve
from symbolic_cost.models import config as hf
from symbolic_cost.models import hub
from symbolic_cost.models.training import check_context, element_bytes
from symbolic_cost.parallel.grid import DEGREES, make_grid
from symbolic_cost.parallel.grid_blocks import GRID_BUILDERS

DEFAULT_SEQUENCE = 2048
"""Sequence length of a model that states no context length."""

TRAINING_SYMBOLS = (S.b, S.l, S.m1, S.s1, S.d, S.p, S.n_micro, S.ep, S.etp, S.l_dec, S.cp)
"""What ``--set`` may fix for a whole model (the model fixes the rest; ``l_dec``: an
encoder-decoder's decoder length, ``l`` unless set)."""



def check_bias_flags(args, arch) -> None:
    """Refuse ``--no-bias`` on a model without biases and ``--no-qkv-bias`` on one without the
    projections' (Llama's): each would drop nothing (it would be ignored)."""
    if getattr(args, "no_bias", False) and not (arch.bias or arch.mlp_bias or arch.qkv_bias):
        raise InputError(f"--no-bias: {arch.name} has no biases; it would be ignored", "--no-bias")
    if getattr(args, "no_qkv_bias", False) and not arch.qkv_bias:
        raise InputError(f"--no-qkv-bias: {arch.name}'s q, k and v projections have no biases; it would be ignored",
                         "--no-qkv-bias")

def architecture(args):
    """The model of ``--hf-config``, ``--hf-model`` or ``--preset`` (``None`` when none is given)."""
    if getattr(args, "revision", None) and not getattr(args, "hf_model", None):
        raise InputError("--revision applies to --hf-model only; it would be ignored", "--revision")
    if getattr(args, "hf_config", None) is not None:
        return hf.load(args.hf_config)
    if getattr(args, "hf_model", None):
        return hub.load(args.hf_model, revision=args.revision)
    return hf.preset(args.preset) if getattr(args, "preset", None) else None


def model_config(args) -> dict | None:
    """The ``config.json`` the model came from (``--hf-config``, ``--hf-model``, ``--preset``);
    ``None`` without one."""
    if getattr(args, "hf_config", None) is not None:
        return hf.read_json(hf.input_file(args.hf_config, "--hf-config"), str(args.hf_config), "--hf-config",
                            unique=hf.CONFIG_DUPLICATES)
    if getattr(args, "hf_model", None):
        return hub.fetch_config(args.hf_model, revision=args.revision)
    return hf.preset_config(args.preset) if getattr(args, "preset", None) else None


def model_type(args) -> str | None:
    """The ``model_type`` of the model's ``config.json`` (``model_config``): what Liger decides on
    (``models.liger``); ``None`` without one."""
    return hf.config_type(model_config(args))


def sequence_length(arch) -> int:
    """The default ``l``: the model's context length (``DEFAULT_SEQUENCE`` if it states none)."""
    return arch.context or DEFAULT_SEQUENCE


def training_values(arch) -> dict:
    """The default training configuration: one sequence of the model's context on one device."""
    return {S.b: 1, S.l: sequence_length(arch), S.m1: PLAIN.m1, S.s1: PLAIN.s1, S.d: PLAIN.d, S.p: PLAIN.p,
            S.n_micro: PLAIN.micro_batches, S.ep: PLAIN.ep, S.etp: S.m1, S.cp: PLAIN.cp}


def refuse_expert_tensor_degree(arch, given) -> None:
    """Refuse ``etp`` among the symbols ``given`` (``--set``, ``--grid``) for a model without
    experts, as ``models.training`` refuses ``ep``: ``etp`` defaults to ``m1`` there, so its value
    alone cannot tell whether it was given."""
    if arch.moe is None and S.etp in given:
        raise InputError(f"etp applies to a mixture of experts, and {arch.name} has none; it would be ignored",
                         "etp")


def refuse_expert_degrees(arch, given) -> None:
    """``refuse_expert_tensor_degree``, and ``ep`` other than 1 for a model without experts, before
    any rule that the degree would otherwise break names another reason."""
    refuse_expert_tensor_degree(arch, given)
    if arch.moe is None and given.get(S.ep, 1) != 1:
        raise InputError(f"ep applies to a mixture of experts, and {arch.name} has none; it would be ignored", "ep")


MODEL_FIXED = (S.e, S.f, S.h, S.n_layers)
"""The symbols a model (``--preset``, ``--hf-config``) gives a block command's values."""


def named_model(args) -> bool:
    """Whether the command line names its model (``--preset``, ``--hf-config``, ``--hf-model``),
    rather than taking the command's default."""
    return bool(given(args, "preset") or args.hf_config or args.hf_model)


def model_label(args, arch) -> str:
    """The model's name as a block command prints it: the default model's, with the dimensions
    ``--set`` changed named (``gpt3-175b with e, n_layers set``: another width is another model)."""
    changed = [str(s) for s in MODEL_FIXED if s in assignments(args.set)]
    return arch.name + (f" with {', '.join(changed)} set" if changed else "")


def block_values(args, arch, base: dict | None = None, free=()) -> dict:
    """Values of a block command: element sizes of ``--precision``; with a model, its
    dimensions and ``training_values`` too; then ``--set``.  Unset symbols stay symbols, and so
    do those of ``free`` (what the command solves for or differentiates by: ``--for l``,
    ``--diff l``) among ``b``, ``l``, ``m1``, ``s1``, which a model's defaults would fix.  A model
    named on the command line keeps its dimensions (``MODEL_FIXED``) and its context."""
    values = {S.es: element_bytes(args.precision), S.es_mask: PLAIN.mask_bytes, **(base or {})}
    precision = (S.es, S.es_mask)     # --precision's: a value may name them only when --set sets them
    if arch is None:
        return resolve(values, args.set, fixed=precision)
    values.update({S.e: arch.e, S.f: arch.f, S.h: arch.h, S.n_layers: arch.n_layers})
    values.update({k: v for k, v in training_values(arch).items() if k in (S.b, S.l, S.m1, S.s1) and k not in free})
    if arch.moe is not None:
        values[S.ep] = PLAIN.ep
    if not named_model(args):
        return resolve(values, args.set, fixed=precision)   # the default model: a shape --set may change
    # a model named is kept to: its dimensions are its own (another width is another model), and
    # so is its context, as summary keeps to it
    values = resolve(values, args.set, [s for s in S.BY_NAME.values() if s not in MODEL_FIXED], fixed=precision)
    check_context(arch, (("l", values.get(S.l, S.l)),), args.allow_long, "--allow-long")
    return values


def conventions(args) -> conv.Conventions:
    """``--conventions``, with ``--kernel-time`` applied when given."""
    chosen = conv.get(args.conventions)
    kernel_time = getattr(args, "kernel_time", None)
    return chosen.but(kernel_time=kernel_time) if kernel_time else chosen


def conventions_text(args) -> str:
    """``--conventions`` as printed: the preset's name and what ``--kernel-time`` changed."""
    kernel_time = getattr(args, "kernel_time", None)
    return args.conventions + (f" but kernel_time={kernel_time!r}" if kernel_time else "")


def build_block(args, values: dict, arch, name: str | None = None):
    """The block ``name`` (default ``--block``) from a value map; symbols without a value stay
    symbols.  With a model (and no ``--tensor`` grid) it is that part of the model's own layer,
    of the layer group ``--layer-group`` picks (``model_block``); without one, the plain
    builder with ``--no-bias`` and ``--no-qkv-bias``."""
    get = lambda s: values.get(s, s)  # noqa: E731
    name = name or args.block
    if arch is not None and getattr(args, "tensor", "1d") == "1d":
        return model_block(args, values, arch, name)[0]
    if getattr(args, "layer_group", None):
        raise InputError("--layer-group picks a group of a model's layers: it needs a model (--preset, --hf-config) "
                         "and the 1d layout; it would be ignored", "--layer-group")
    structure = {}
    bias = qkv_bias = True
    if arch is not None:
        structure = dict(kv_heads=arch.kv_heads, rotary_pos=arch.rotary, causal=arch.causal,
                         gated_act=arch.mlp != "gelu", dropouts=arch.dropouts, norm=arch.norm)
        bias, qkv_bias = arch.bias, arch.qkv_bias
        check_bias_flags(args, arch)
    bias, qkv_bias = bias and not args.no_bias, qkv_bias and not args.no_qkv_bias
    common = dict(b=get(S.b), l=get(S.l), e=get(S.e), m1=get(S.m1), s1=get(S.s1), es=get(S.es),
                  es_mask=get(S.es_mask), conventions=conventions(args), dropouts=structure.get("dropouts", True),
                  norm=structure.get("norm", "layer"))
    attention = {k: structure[k] for k in ("kv_heads", "rotary_pos", "causal") if k in structure}
    builders = BUILDERS
    if getattr(args, "tensor", "1d") != "1d":
        builders = tensor_grid_builders(args, values, common)
    if builders is BUILDERS:                 # no model here: the plain heads and scores
        return plain_block(name, common, get(S.f), get(S.h), Projections(qkv_bias=qkv_bias, out_bias=bias),
                           args.flash)
    run = Run(args.flash, es=common.pop("es"), es_mask=common.pop("es_mask"), conventions=common.pop("conventions"))
    placed = dict(norm=common.pop("norm"), dropouts=common.pop("dropouts"))
    gated = structure.get("gated_act", False)
    if name == "mlp":
        return builders["mlp"](f=get(S.f), bias=bias, gated_act=gated, residual=Residual(**placed), run=run, **common)
    heads = Heads(get(S.h), attention.get("kv_heads"), rotary=bool(attention.get("rotary_pos", False)))
    spec = dict(heads=heads, scores=Scores(causal=bool(attention.get("causal", False))),
                projections=Projections(qkv_bias=qkv_bias, out_bias=bias), run=run, **common)
    if name == "layer":
        return builders["layer"](f=get(S.f), ffn=Feedforward(gated=gated), wiring=Wiring(**placed), **spec)
    return builders["attention"](residual=Residual(**placed), **spec)


def plain_block(name: str, common: dict, f, h, projections: Projections, flash: bool):
    """The block ``name`` of ``blocks.BUILDERS`` with ``h`` plain heads and ``projections``
    (an MLP of width ``f`` biased as the output projection), its dimensions, element sizes,
    conventions, norm and dropouts from ``common``."""
    dims = {k: common[k] for k in ("b", "l", "e", "m1", "s1")}
    run = Run(flash, es=common["es"], es_mask=common["es_mask"], conventions=common["conventions"])
    placed = dict(norm=common["norm"], dropouts=common["dropouts"])
    if name == "mlp":
        return BUILDERS["mlp"](f=f, bias=projections.out_bias, residual=Residual(**placed), run=run, **dims)
    if name == "layer":
        return BUILDERS["layer"](f=f, heads=h, projections=projections, wiring=Wiring(**placed), run=run, **dims)
    return BUILDERS["attention"](heads=h, projections=projections, residual=Residual(**placed), run=run, **dims)


def model_block(args, values: dict, arch, name: str):
    """``(block, count, groups)``: the part ``name`` (``layer``, ``attention``, ``mlp``: the MLP
    or the mixture of experts) of the model's layer group ``--layer-group`` (1-based, in model
    order: ``models.stack.group_options``), the layers in that group and how many groups there
    are.  ``--set`` may change ``e``, ``f``, ``h``; ``--no-bias`` and ``--no-qkv-bias`` drop
    the model's biases; a mixture of experts takes ``ep`` and ``etp`` (default ``m1``)."""
    from symbolic_cost.models.stack import layer_groups     # the model layer, on demand
    get = lambda s: values.get(s, s)  # noqa: E731
    check_bias_flags(args, arch)
    no_bias = getattr(args, "no_bias", False)
    # the MLP does not read the heads: keep their size, so that h need not divide a new e
    heads = dict(head_dim=arch.head_size) if name == "mlp" and arch.head_dim is None else {}
    model = replace(arch, e=get(S.e), f=get(S.f), h=get(S.h), **heads, bias=arch.bias and not no_bias,
                    mlp_bias=False if no_bias else arch.mlp_bias,
                    qkv_bias=arch.qkv_bias and not getattr(args, "no_qkv_bias", False))
    t = SimpleNamespace(b=get(S.b), l=get(S.l), flash=getattr(args, "flash", False), l_dec=None)
    kw = dict(es=get(S.es), es_mask=get(S.es_mask), conventions=conventions(args))
    experts = Experts(ep=get(S.ep), etp=values.get(S.etp, get(S.m1))) if arch.moe is not None else None
    groups = layer_groups(model, t, get(S.m1), get(S.s1), kw, experts, part=name)
    chosen = getattr(args, "layer_group", None) or 1
    if chosen > len(groups):
        raise InputError(f"--layer-group {chosen}: {arch.name} has {len(groups)} layer group"
                         f"{'s' if len(groups) > 1 else ''} (profile lists them)", "--layer-group")
    block, count = groups[chosen - 1]
    return block, count, len(groups)


def tensor_grid_builders(args, values: dict, common: dict) -> dict:
    """The block builders on ``--tensor``'s grid (``parallel.grid_blocks``), its degrees from
    ``values`` (symbols when unset); takes ``m1`` and ``s1`` out of ``common``: a grid splits
    every activation already, so ``s1`` must be 1."""
    s1 = common.pop("s1")
    common.pop("m1")
    if sympify(s1).is_number and s1 != 1:
        raise InputError(f"--tensor {args.tensor}: s1 must be 1 (a grid splits every activation already), got s1={s1}",
                         "s1")
    grid = tensor_grid(args, values)
    return {name: (lambda build: lambda **kw: build(grid=grid, **kw))(build) for name, build in GRID_BUILDERS.items()}


def tensor_grid(args, values: dict):
    """``--tensor``'s grid (``parallel.grid.make_grid``): its degrees from ``values`` (symbols
    when unset), ``--grid-order`` and ``--panel``."""
    degrees = {name: values.get(S.BY_NAME[name], S.BY_NAME[name]) for name in DEGREES[args.tensor]}
    order = tuple(args.grid_order.split(",")) if getattr(args, "grid_order", None) else None
    return make_grid(args.tensor, order=order, panel=getattr(args, "panel", None), **degrees)
