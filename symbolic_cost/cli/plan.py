"""Plan a training run from a budget: the compute-optimal model under a published scaling law with exact FLOPs per token, then the fastest layout on a cluster, days, GPU-hours, energy and cost.

Three questions: ``--budget-flops C`` (which model and how many tokens; with ``--devices``, how
long and at what cost); ``--devices N --days D`` (the budget the cluster delivers in those days
at the predicted speed, then the same); a model (``--preset``, ``--hf-config``) with ``--devices``
and ``--days`` or ``--tokens`` (the tokens, days and cost of training it).
"""

from __future__ import annotations

import json

from sympy import Rational

from symbolic_cost.analysis.planning import SHAPES, per_token, plan, serving_aware
from symbolic_cost.numeric.training_run import plan_for_days, run_plan
from symbolic_cost.analysis.scaling_laws import LAWS, LossLaw, get_law
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.cli import options
from symbolic_cost.timing.systems import SYSTEMS

EXAMPLES = [
    "symbolic-cost plan --budget-flops 1e25",
    "symbolic-cost plan --budget-flops 1e25 --devices 4096 --system h100 --price 2.5",
    "symbolic-cost plan --devices 1024 --system h100 --days 30 --law besiroglu-2024",
    "symbolic-cost plan --preset llama-2-7b --seq 4096 --devices 256 --system h100 --days 14",
]

def exact_number(text: str) -> Rational:
    """An option's number read exactly (``1e25``, ``3.8e25``, ``2.5``), refused unless positive and
    finite as a double (``cli.parser.exact``)."""
    return Rational(options.exact()(text))


def add_arguments(parser) -> None:
    options.model(parser, default=None)
    options.option(parser, "--budget-flops", type=exact_number, metavar="C",
                   help="training FLOPs to spend (e.g. 1e25): the compute-optimal model for them")
    options.option(parser, "--law", choices=list(LAWS), default="hoffmann-2022",
                   help="the published scaling law (analysis.scaling_laws.LAWS, each with its source)")
    options.option(parser, "--shape", choices=list(SHAPES), default="llama-3", action=options.Given,
                   help="the family whose depths are tried (analysis.planning.SHAPES; deepseek-v3, a mixture of "
                        "experts, under a compute law: "
                        + ", ".join(name for name, law in LAWS.items() if not isinstance(law, LossLaw)) + ")")
    options.option(parser, "--seq", type=int, help=f"tokens a sequence (default {SEQ:,}; a given model's "
                   "context where it is shorter)")
    options.option(parser, "--served-tokens", type=exact_number, metavar="T",
                   help="tokens the model will serve over its life: the model of the compute-optimal loss that costs "
                        "the fewest training plus serving FLOPs (Sardana et al. 2023; a loss law only)")
    options.option(parser, "--plot", metavar="FILE.png",
                   help="write the isoFLOP curves (loss against parameters at the budget, a tenth and ten times it) "
                        "with the chosen model marked (needs matplotlib)")
    options.option(parser, "--recompute", choices=["none", "full"], default="none",
                   help="full: count full recomputation's forward as FLOPs spent (hardware FLOPs)")
    options.option(parser, "--devices", type=int, help="devices of the cluster: find the fastest layout that fits")
    options.option(parser, "--system", choices=list(SYSTEMS), default="h100", help="the devices (calibrated time model)")
    options.option(parser, "--days", type=exact_number, help="days the cluster trains (with --devices)")
    options.option(parser, "--tokens", type=exact_number, help="tokens to train a given model on (with --devices)")
    options.option(parser, "--global-batch", type=int,
                   help="sequences a step (default: 4M tokens a step, 2**22 // --seq)")
    options.option(parser, "--price", type=exact_number, metavar="USD", help="price of a GPU-hour, for the cost")
    output = parser.add_mutually_exclusive_group()
    options.option(output, "--json", action="store_true", help="JSON instead of the text")
    options.option(output, "--latex", action="store_true", help="the plan as a LaTeX table")


def run(args) -> int:
    given_model = args.preset or args.hf_config or args.hf_model
    _check(args, given_model)
    if given_model:
        result = _given_model(args)
    else:
        result = _optimal(args)
    if args.json:
        print(json.dumps(result, indent=1))
    elif args.latex:
        print(_latex(result))
    else:
        print("\n".join(_text(result)))
    return 0


SEQ = 8192
"""Tokens a sequence unless ``--seq`` says (Llama 3's pre-training length); a given model whose
context is shorter plans at its context."""

PLOT_FORMATS = (".png", ".pdf", ".svg")
"""What ``--plot`` writes: matplotlib's raster and vector formats a page or a paper takes."""


def _check(args, given_model) -> None:
    if args.plot and not given_model:       # before the plan is worked out, not after
        from symbolic_cost.files import output_file
        output_file(args.plot, "--plot", overwrite=True, suffixes=PLOT_FORMATS)
    if args.served_tokens is not None and args.budget_flops is None:
        raise InputError("--served-tokens holds the loss a --budget-flops buys: give --budget-flops", "--served-tokens")
    if given_model:
        if options.given(args, "shape"):
            raise InputError("--shape is the family a budget's model is chosen from; a given model (--preset, "
                             "--hf-config) has its own (it would be ignored)", "--shape")
        if args.plot:
            raise InputError("--plot draws the isoFLOP curves of a chosen model; a given model has none",
                             "--plot")
        if args.budget_flops is not None:
            raise InputError("--budget-flops chooses a model; a given model (--preset, --hf-config) is trained for "
                             "--days or --tokens instead", "--budget-flops")
        if args.days is not None and args.tokens is not None:
            raise InputError("--days and --tokens each say how long a given model trains: give one of them", "--days")
        if args.devices is None or (args.days is None) == (args.tokens is None):
            raise InputError("a given model needs --devices and one of --days or --tokens", "--devices")
        return
    if args.tokens is not None:
        raise InputError("--tokens applies to a given model (--preset, --hf-config)", "--tokens")
    if args.budget_flops is None and (args.devices is None or args.days is None):
        raise InputError("give --budget-flops, or --devices with --days (the budget the cluster delivers)",
                         "--budget-flops")
    if args.budget_flops is not None and args.days is not None:
        raise InputError("--budget-flops and --days each set the budget: give one of them", "--days")
    if args.devices is None and (args.price is not None or args.global_batch is not None):
        raise InputError("--price and --global-batch apply to a run on a cluster: add --devices", "--devices")


def _optimal(args) -> dict:
    args.seq = args.seq or SEQ
    if args.budget_flops is not None:
        chosen = plan(args.budget_flops, args.law, args.shape, args.seq, args.recompute == "full")
        if args.served_tokens is not None:
            chosen = serving_aware(chosen, args.served_tokens)
        ran = None if args.devices is None else _run(args, chosen.architecture, chosen.flops_per_token, chosen.tokens)
    else:
        chosen, ran = plan_for_days(args.devices, args.days, args.system, args.law, args.shape, args.seq,
                                    args.recompute == "full", args.global_batch, args.price)
    if args.plot:
        from symbolic_cost.report.planning import isoflop_plot
        isoflop_plot(chosen, args.plot)
    return {"question": "budget" if args.budget_flops is not None else "days", **_plan_fields(chosen),
            **({"run": _run_fields(ran)} if ran else {})}


def _given_model(args) -> dict:
    from symbolic_cost.cli.values import architecture, sequence_length
    from symbolic_cost.models.training import check_context
    arch = architecture(args)
    args.seq = args.seq or min(SEQ, sequence_length(arch))
    check_context(arch, [("--seq", args.seq)], False,
                  remedy="give a --seq within it (plan keeps to the model's context)")
    if args.tokens is not None and args.tokens < args.seq:
        raise InputError(f"--tokens {float(args.tokens):g} is fewer than one sequence of {args.seq:,} tokens "
                         f"(--seq {args.seq:,})",
                         "--tokens")
    n, f, _ = per_token(arch, args.seq, args.recompute == "full")
    ran = _run(args, arch, f, args.tokens, days=args.days)
    law = get_law(args.law)
    flops = float(f) * ran.tokens
    # a loss law's N is a dense model's: a mixture of experts runs fewer parameters a token than it
    # holds, and the law does not say which it means (the budget mode refuses it so)
    experts = arch.moe is not None
    loss = law.at(n, ran.tokens) if isinstance(law, LossLaw) and not experts else None
    runs = int(model_cost(arch, Training(b=1, l=args.seq)).active_parameters) if experts else int(n)
    return {"question": "model", "law": law.name, "model": arch.name, "seq": args.seq, "parameters": int(n),
            **({"active_parameters": runs} if experts else {}),
            **({"note": f"no predicted loss: {law.name} is a loss in the parameters of dense models, and a mixture "
                        f"of experts holds more than a token runs through"} if experts and isinstance(law, LossLaw)
               else {}),
            "flops_per_token": float(f), "six_n_ratio": float(f) / (6 * runs), "tokens": ran.tokens,
            "budget_flops": flops, "loss": loss, "run": _run_fields(ran)}


def _run(args, arch, flops_per_token, tokens, days=None):
    return run_plan(arch, flops_per_token, args.devices, args.system, args.seq, tokens=tokens, days=days,
                    global_batch=args.global_batch, price=args.price, recompute=args.recompute == "full")


def _plan_fields(chosen) -> dict:
    """The plan's numbers; a mixture of experts adds its experts and the parameters a token runs
    through (``active_parameters``), over which its ``six_n_ratio`` is taken."""
    c = chosen.shape.config(chosen.depth)
    runs = chosen.active_parameters or chosen.parameters
    experts = {"active_parameters": chosen.active_parameters, "experts": c["n_routed_experts"],
               "experts_per_token": c["num_experts_per_tok"], "shared_experts": c["n_shared_experts"],
               "expert_intermediate_size": c["moe_intermediate_size"],
               "dense_layers_first": c["first_k_dense_replace"]} if chosen.active_parameters else {}
    return {"law": chosen.law.name, "law_source": chosen.law.source, "shape": chosen.shape.name, "seq": chosen.seq,
            "budget_flops": float(chosen.budget), "model": chosen.architecture.name,
            "layers": chosen.depth, "hidden_size": c["hidden_size"], "heads": c["num_attention_heads"],
            "kv_heads": c["num_key_value_heads"], "intermediate_size": c["intermediate_size"],
            "parameters": chosen.parameters, **experts, "tokens": float(chosen.tokens),
            "flops_per_token": float(chosen.flops_per_token),
            "six_n_ratio": float(chosen.flops_per_token / (6 * runs)), "loss": chosen.loss,
            "six_nd_optimum": chosen.six_nd, **({"serving": chosen.serving} if chosen.serving else {})}


def _run_fields(ran) -> dict:
    layout = {k: (v.item() if hasattr(v, "item") else v) for k, v in ran.layout.items()}
    return {"devices": ran.devices, "system": ran.system, "global_batch": ran.global_batch, "layout": layout,
            "step_time_s": ran.step_time, "mfu": ran.mfu, "tokens_per_s": ran.tokens_per_second, "tokens": ran.tokens,
            "days": ran.days, "gpu_hours": ran.gpu_hours, "energy_kwh": ran.energy_kwh, "cost_usd": ran.cost}


def _si(x: float, unit: str = "") -> str:
    """``x`` with an SI prefix (``1.50 T``), in scientific notation from 10^18 on (no prefix reads
    better than ``1,000,000.00 T``, and a double's noise shows in fixed notation)."""
    if abs(x) >= 1e18:
        return f"{x:.3g} {unit}".rstrip()
    for scale, prefix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:,.2f} {prefix}{unit}"
    return f"{x:,.2f} {unit}".rstrip()


def _energy(kwh: float) -> str:
    """Energy in the largest of GWh, MWh and kWh that reads at least 1 (8 GPUs for a day drew
    0.13 MWh, printed as 0.00 GWh).

    >>> _energy(5.05e6), _energy(130.0), _energy(2500.0)
    ('5.05 GWh', '130.00 kWh', '2.50 MWh')
    """
    scale, unit = next(((s, u) for s, u in ((1e6, "GWh"), (1e3, "MWh")) if kwh >= s), (1, "kWh"))
    return f"{kwh / scale:,.2f} {unit}"


def _text(r: dict) -> list[str]:
    lines = []
    if r["question"] == "model":
        active = f" ({_si(r['active_parameters'])} a token)" if r.get("active_parameters") else ""
        lines.append(f"{r['model']}: {_si(r['parameters'])} parameters{active}, {r['flops_per_token']:.4g} FLOPs a "
                     f"token at {r['seq']:,} tokens ({r['six_n_ratio']:.3f} x 6N{' of those' if active else ''})")
        lines.append(f"trains on {_si(r['tokens'])} tokens ({r['budget_flops']:.3g} FLOPs)" +
                     (f"; predicted loss {r['loss']:.4f} ({r['law']})" if r["loss"] is not None else "") +
                     (f"; {r['note']}" if "note" in r else ""))
    else:
        six = r["six_nd_optimum"]
        size_key = "parameters" if "parameters" in six else "flops_per_token"
        lines.append(f"plan for {r['budget_flops']:.3g} FLOPs under {r['law']}, {r['shape']} shapes, "
                     f"{r['seq']:,}-token sequences")
        built = "serving-aware, buildable" if "serving" in r else "exact FLOPs, buildable"
        by_size = size_key == "parameters"          # else the law's size is M, FLOPs a token (C = M D)
        lines.append(f"  {'':22}{'the law (C = 6ND)' if by_size else 'the law (C = M D)':>20}{built:>26}")
        lines.append(f"  {'parameters':22}{_si(six[size_key]) if by_size else '':>20}{_si(r['parameters']):>26}")
        if r.get("active_parameters"):
            lines.append(f"  {'parameters a token':22}{'':>20}{_si(r['active_parameters']):>26}")
        lines.append(f"  {'tokens':22}{_si(six['tokens']):>20}{_si(r['tokens']):>26}")
        ratio = f"{r['six_n_ratio']:.3f} x 6N" + (" (N a token's)" if r.get("active_parameters") else "")
        law_flops = "6 N" if by_size else f"M = {six[size_key]:.4g}"
        lines.append(f"  {'FLOPs per token':22}{law_flops:>20}{ratio:>26}")
        if r["loss"] is not None:
            lines.append(f"  {'predicted loss':22}{six['loss']:>20.4f}{r['loss']:>26.4f}")
        if r.get("active_parameters"):
            lines.append(f"  model: {r['layers']} layers, hidden {r['hidden_size']:,}, {r['heads']} heads, "
                         f"{r['experts']} experts of {r['expert_intermediate_size']:,} ({r['experts_per_token']} a "
                         f"token, {r['shared_experts']} shared), the first {r['dense_layers_first']} dense "
                         f"(MLP {r['intermediate_size']:,})")
        else:
            lines.append(f"  model: {r['layers']} layers, hidden {r['hidden_size']:,}, {r['heads']} heads "
                         f"({r['kv_heads']} key/value), MLP {r['intermediate_size']:,}")
        if "serving" in r:
            sv = r["serving"]
            lines.append(f"  serving {_si(sv['served_tokens'])} tokens, at the compute-optimal model's loss "
                         f"(Sardana et al. 2023): trained on {sv['training_flops']:.3g} FLOPs, "
                         f"{sv['lifetime_flops']:.3g} over its life, "
                         f"{100 * sv['lifetime_flops'] / sv['compute_optimal_lifetime_flops']:.1f} % of the compute-optimal "
                         f"{_si(sv['compute_optimal_parameters'])}'s")
        lines.append(f"  law: {r['law_source']}")
    if "run" in r:
        lines += _run_text(r["run"])
    return lines


def _run_text(run: dict) -> list[str]:
    lay = run["layout"]
    shown = " ".join(f"{k}={lay[k]}" for k in ("m1", "s1", "d", "p", "ep", "b", "n_micro", "recompute", "zero",
                                                 "schedule") if k in lay)
    attention = " (flash attention)" if lay.get("flash") else ""
    lines = [f"run on {run['devices']:,} {run['system']}{attention}: {shown}",
             f"  step {run['step_time_s']:.3f} s for {run['global_batch']:,} sequences; MFU {100 * run['mfu']:.1f} %; "
             f"{_si(run['tokens_per_s'])} tokens/s",
             f"  {run['days']:,.1f} days; {_si(run['gpu_hours'])} GPU-hours"
             + (f"; {_energy(run['energy_kwh'])} at board power" if run["energy_kwh"] is not None else "")
             + (f"; ${_si(run['cost_usd'])}" if run["cost_usd"] is not None else "")]
    return lines


def _latex(r: dict) -> str:
    """The plan as a LaTeX table: the model (its shape when chosen), what it trains on (with
    serving, what its life costs), and the run with its energy and cost where known."""
    rows = [("model", r["model"])]
    if "layers" in r:
        rows.append(("shape", f"{r['layers']} layers, hidden {r['hidden_size']:,}, {r['heads']} heads"))
    rows += [("parameters", _tex(r["parameters"]))]
    if r.get("active_parameters"):
        rows.append(("parameters a token", _tex(r["active_parameters"])))
    rows += [("tokens", _tex(r["tokens"])), ("FLOPs per token", _tex(r["flops_per_token"]))]
    serving = r.get("serving")
    if serving:     # the serving-aware model trains past the budget, which its compute-optimal one spends
        rows += [("training FLOPs", _tex(serving["training_flops"])), ("budget (FLOPs)", _tex(r["budget_flops"])),
                 ("tokens served", _tex(serving["served_tokens"])), ("lifetime FLOPs", _tex(serving["lifetime_flops"])),
                 ("compute-optimal lifetime FLOPs", _tex(serving["compute_optimal_lifetime_flops"]))]
    else:
        rows.append(("budget (FLOPs)", _tex(r["budget_flops"])))
    if r.get("loss") is not None:
        rows.append(("predicted loss", f"{r['loss']:.4f}"))
    if "run" in r:
        run = r["run"]
        rows += [("devices", f"{run['devices']:,} {run['system']}"), ("step time (s)", f"{run['step_time_s']:.3f}"),
                 ("MFU", f"{100 * run['mfu']:.1f}\\%"), ("days", f"{run['days']:.1f}"),
                 ("GPU-hours", _tex(run["gpu_hours"]))]
        if run.get("energy_kwh") is not None:
            rows.append(("energy (MWh)", f"{run['energy_kwh'] / 1000:,.1f}"))
        if run.get("cost_usd") is not None:
            rows.append(("cost (USD)", _tex(run["cost_usd"])))
    body = "\n".join(f"{name} & {value} \\\\" for name, value in rows)
    return f"\\begin{{tabular}}{{lr}}\n\\hline\n{body}\n\\hline\n\\end{{tabular}}"


def _tex(value) -> str:
    """A number for a LaTeX cell, four significant digits, in powers of ten past 10^4.

    >>> print(_tex(1.6766e24), _tex(37240419328), _tex(512))
    $1.677 \\times 10^{24}$ $3.724 \\times 10^{10}$ 512
    """
    mantissa, _, exponent = f"{float(value):.4g}".partition("e")
    return f"${mantissa} \\times 10^{{{int(exponent)}}}$" if exponent else mantissa


__all__ = ["add_arguments", "run"]
