"""Whole-model totals for one configuration: parameters, FLOPs, memory by category, the
step time by part, and every collective, on the busiest device."""

from __future__ import annotations

import json
from dataclasses import replace

from sympy import sympify

from symbolic_cost import symbols as S
from symbolic_cost.checks import InputError
from symbolic_cost.cli import frameworks, options
from symbolic_cost.cli.bookkeeping import numbers_needed
from symbolic_cost.cli.values import (TRAINING_SYMBOLS, amount, architecture, assignments, conventions, honour_mtp,
                                      number, resolve, tensor_grid, training_values)
from symbolic_cost.cli.building import refuse_expert_tensor_degree
from symbolic_cost.models import Training, cluster_volume, model_cost, world_size
from symbolic_cost.models.experts import alltoall_bytes, expert_degrees
from symbolic_cost.models.grid_stack import on_grid
from symbolic_cost.models.overheads import get_overheads
from symbolic_cost.models.peak import largest_micro_batch, peak_bytes, peak_moment, peak_rank, step_timeline
from symbolic_cost.models.ranks import rank_activation_bytes, rank_parameters
from symbolic_cost.parallel.expert import expert_data_degree
from symbolic_cost.parallel.grid import DEGREES
from symbolic_cost.models.utilisation import hfu, mfu, seconds
from symbolic_cost.timing.hardware import comm_time, get_system
from symbolic_cost.timing.host import host_bytes_per_node, host_step_time, host_time
from symbolic_cost.timing.step import step_time_breakdown
from symbolic_cost.timing import error_bands
from symbolic_cost.timing.efficiency import CALIBRATION

FIELDS = ("parameters", "parameters_per_device", "flops_fwd", "flops_bwd", "flops_recompute", "model_flops_fwd",
          "model_flops_bwd", "weight_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes",
          "memory_bytes", "bubble")
"""The ``ModelCost`` totals reported (FLOPs, bytes; ``bubble`` is a fraction)."""

MEMORY = ("weight_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes", "memory_bytes")

EXAMPLES = [
    "symbolic-cost summary --preset gpt2 --set b=8 d=8 --zero 1",
    "symbolic-cost summary --preset llama-2-7b --set m1=8 s1=8 d=16 p=4 n_micro=32 --zero 1 --flash",
    "symbolic-cost summary --hf-config path/to/config.json --set b=2 d=8 --json",
    "symbolic-cost summary --preset llama-2-7b --set d=8 --zero 3 --offload optimizer --lora-rank 16 --lora-base nf4",
    "symbolic-cost summary --preset gpt3-175b --set m1=8 s1=8 p=16 d=8 n_micro=64 --step-time 12.5",
    "symbolic-cost summary --hf-config Mixtral-8x7B/config.json --set l=4096 m1=2 s1=2 d=32 ep=8 etp=1 --zero 1",
    "symbolic-cost summary --preset gpt3-175b --tensor 2.5d --set mq=4 md=2 b=8 p=8 d=4 n_micro=16 --flash",
    "symbolic-cost summary --megatron-args train_gpt3_175b_distributed.sh --devices 1024 --vocab-size 50257",
    "symbolic-cost summary --torchtitan llama3_70b.toml --devices 64",
    "symbolic-cost summary --nemo-recipe megatron_bridge_llama3_70b.yaml --devices 32",
    "symbolic-cost summary --hf-config config.json --accelerate fsdp.yaml --set b=4 l=2048",
    "symbolic-cost summary --hf-config config.json --hf-training-args training_args.json --devices 4 --set l=512",
]

SETTABLE = ("NAME=VALUE pairs for " + ", ".join(map(str, TRAINING_SYMBOLS))
            + " (defaults: b=1, l=the model's context (2048 if it states none), every degree 1 but etp=m1, "
            "l_dec=l)")


def add_arguments(parser) -> None:
    options.model(parser, megatron=True)
    options.settings(parser, help=SETTABLE + "; with --tensor, its grid's m2 (2d), mq and md (2.5d) or mq (3d) too, "
                                                  "which have no default")
    options.training(parser)
    options.recipe(parser)
    options.experts(parser)
    options.counting(parser)
    options.tensor(parser)
    options.units(parser)
    options.overheads(parser)
    options.time_model(parser)
    frameworks.add_arguments(parser)
    options.option(parser, "--step-time", metavar="SECONDS",
                   help="a measured step time: print MFU and HFU (decimal seconds, read exactly)")
    options.option(parser, "--json", action="store_true",
                   help="JSON in FLOPs, bytes and seconds (names say which) instead of text")


def whole_model(args):
    """The model, its training, its ``model_cost`` and the conventions, from the options; with
    ``--tensor`` on a grid the layers run on it (``models.grid_stack``), its degrees from ``--set``."""
    framework = frameworks.setup(args)      # a framework file: its model and values; its policy in args
    arch = framework.arch if framework else architecture(args)
    honour_mtp(args, arch)
    layout = getattr(args, "tensor", "1d")
    allowed = TRAINING_SYMBOLS + tuple(S.BY_NAME[n] for n in DEGREES.get(layout, ()) if n != "m1")
    refuse_expert_tensor_degree(arch, assignments(args.set, allowed=allowed))
    values = resolve({**training_values(arch), **(framework.values if framework else {})}, args.set, allowed=allowed)
    training = Training(b=values[S.b], l=values[S.l], m1=values[S.m1], s1=values[S.s1], d=values[S.d],
                        p=values[S.p], micro_batches=values[S.n_micro], ep=values[S.ep], etp=values[S.etp],
                        l_dec=values.get(S.l_dec), cp=values[S.cp], **options.training_policy(args),
                        **options.recipe_policy(args))
    options.refuse_idle_schedule(args, [values.get(S.p)], framework)
    if layout != "1d":
        if values[S.s1] != 1:
            raise InputError(f"--tensor {layout}: s1 is the grid's devices (a grid splits every activation "
                             f"already); leave it unset, got s1={values[S.s1]}", "s1")
        # a grid degree left a symbol would make every total a formula, which the printing
        # simplifies until the time budget runs out: one configuration needs them all
        numbers_needed(values, {S.BY_NAME[name] for name in DEGREES[layout]}, f"summary --tensor {layout}")
        training = on_grid(training, tensor_grid(args, values))
    chosen = conventions(args)
    return arch, training, model_cost(arch, training, chosen), chosen


LAYOUT = ("b", "l", "m1", "s1", "d", "p", "micro_batches", "cp", "cp_variant", "ep", "etp", "dispatcher", "precision",
          "fp8", "fp8_gather",
          "zero", "shard", "reshard_after_forward", "distributed_optimizer", "offload", "optimizer", "recompute",
          "recompute_modules", "recompute_method", "recompute_layers", "schedule", "virtual_stages", "first_stage_layers",
          "last_stage_layers", "pipeline_layout", "overlap", "flash", "attention_kernel", "loss_chunks",
          "fused_loss", "tp_ends", "cuda_graphs")
"""The training fields ``summary --json`` reports as decoded (``layout``): what a framework file or
the options set, so that a script reading a file sees what the reader made of it."""


def decoded_layout(training: Training) -> dict:
    """``LAYOUT``'s fields of ``training``: numbers as numbers, the overlap as the names of what it
    hides (``--overlap``'s words), the recomputed modules and the CUDA graphs' scopes as lists, the
    rest as they are named."""
    def shown(name, value):
        if name == "overlap":
            return value.words()
        if name in ("recompute_modules", "cuda_graphs"):
            return list(value)
        return number(value) if not isinstance(value, (str, bool, type(None))) else value
    return {name: shown(name, getattr(training, name)) for name in LAYOUT}


def report(args) -> tuple[dict, Training]:
    """Every number the command prints (FLOPs, bytes and seconds), and the training."""
    arch, training, cost, chosen = whole_model(args)
    options.refuse_idle_allow_long(args, arch, training)
    options.refuse_idle_overlap(args, cost)
    system = options.timed_system(args)
    out = {"model": arch.name, **{name: number(getattr(cost, name)) for name in FIELDS}}
    steps = step_time_breakdown(cost, system, chosen)
    out["step_time_s"] = {part: number(value) for part, value in steps.items()}
    out["time_model"] = "ideal" if args.ideal else "calibrated"
    out["predicted"] = {"mfu": number(mfu(cost, steps["total"], system)),
                        "tokens_per_s_per_device": number(training.micro_batches * training.b * training.d
                                                          * training.decoder_tokens / steps["total"]
                                                          / world_size(training))}
    if not args.ideal:       # how far the calibrated model was off on published runs of this family
        out["predicted"]["expected_error"] = error_bands.band(arch, training, system, CALIBRATION.get("bands"),
                                                              cost.parameters)
    out["world_size"] = number(world_size(training))
    out["layout"] = decoded_layout(training)
    if training.reference is not None:     # DPO's reference model (only where there is one: no new keys otherwise)
        out["layout"]["reference"] = training.reference
        out["flops_reference"] = number(cost.flops_reference)
    out["peak"] = peak_report(arch, training, cost, chosen, system, args.overheads)
    notes = list(arch.notes)
    out["trainable_parameters"] = number(cost.trainable_parameters)
    if arch.mtp_layers:
        other = model_cost(arch, replace(training, mtp=not training.mtp), chosen).parameters
        mtp = number(abs(cost.parameters - other))
        notes.append(mtp_note(mtp, training.mtp))
        if training.mtp:
            out["mtp_parameters"] = mtp
    if getattr(args, "framework", None) is not None:
        notes += args.framework.notes
    if notes or getattr(args, "framework", None) is not None:
        out["notes"] = notes
    if arch.moe is not None:
        out["experts"] = experts_report(cost, system, chosen)
    if training.offload != "none":
        out["host"] = {"bytes_per_device": number(cost.host_bytes),
                       "bytes_per_node": number(host_bytes_per_node(cost, system)),
                       "device_to_host_bytes": number(cost.device_to_host),
                       "host_to_device_bytes": number(cost.host_to_device),
                       "time_s": number(host_time(cost, system)),
                       "step_s": number(host_step_time(cost, system))}
    if getattr(args, "step_time", None) is not None:
        fastest(args.step_time, cost, args.system, chosen)
        out["utilisation"] = {name: number(f(cost, args.step_time, system, only=only))
                              for name, f, only in (("mfu", mfu, "all"), ("hfu", hfu, "all"),
                                                    ("mfu_matrix", mfu, "matrix"), ("hfu_matrix", hfu, "matrix"))}
    if isinstance(out["activation_bytes"], (int, float)) and number(training.p) != 1:
        out["activation_bytes_per_rank"] = [number(rank_activation_bytes(cost, r)) for r in range(int(training.p))]
        out["parameters_per_rank"] = [number(rank_parameters(cost, r)) for r in range(int(training.p))]
    out["collectives"] = [
        {"dimension": dim, "kind": c.kind, "group": number(c.group), "pass": c.pass_,
         "count": number(c.repeats), "volume_bytes": number(c.volume),
         "cluster_volume_bytes": number(cluster_volume(cost, dim, c)),
         "time_s": number(comm_time(c, system, chosen))} for dim, c in cost.collectives]
    return out, training


def peak_report(arch, training, cost, chosen, system, overheads="none") -> dict:
    """The step's peak memory (``models.peak``): its bytes, the moment it falls at, every
    moment, the ``overheads`` counted (``models.overheads``; with some, the device's bytes at the
    peak) and the largest micro-batch whose peak, with them, fits the system's memory."""
    moments, extra = step_timeline(cost, chosen), get_overheads(overheads)
    out = {"bytes": number(peak_bytes(cost, chosen)), "moments": {m.name: number(m.bytes) for m in moments},
           "overheads": overheads}
    if extra.counted:
        out["device_bytes"] = number(extra.device_bytes(peak_bytes(cost, chosen)))
    if all(sympify(m.bytes).is_number for m in moments):
        out["at"] = peak_moment(cost, chosen).name
        rank = peak_rank(cost, chosen)
        if rank is not None:
            out["rank"] = rank
        if system.hbm_capacity and training.tensor is None:     # a tensor grid has its own builder
            out["capacity_bytes"] = number(system.hbm_capacity)
            try:
                out["largest_micro_batch"] = largest_micro_batch(arch, training, system.hbm_capacity, chosen,
                                                                  overheads=extra)
            except InputError:      # a rule needs the micro-batch as a number (left out, not guessed)
                pass
    return out


def mtp_note(parameters, counted: bool) -> str:
    """The note saying whether the multi-token-prediction modules are counted (``transformers`` and the
    published totals leave them out; ``--no-mtp`` does too)."""
    shown = f"{parameters:,}" if isinstance(parameters, int) else str(parameters)
    if counted:
        return (f"multi-token-prediction modules counted: {shown} parameters (transformers' model and the "
                f"published totals leave them out); --no-mtp leaves them out")
    return (f"multi-token-prediction modules left out (--no-mtp): {shown} parameters, as in transformers' model "
            f"and the published totals; without --no-mtp they are counted and trained")


def fastest(step_time, cost, system: str, chosen) -> None:
    """Refuse a measured step time below the physical bound: the busiest device's compute at peak
    FLOP/s and bandwidth (``--ideal``'s compute part); MFU would pass 100 %."""
    measured = seconds(step_time)
    bound = step_time_breakdown(cost, get_system(system), chosen)["compute"]
    if measured.is_number and bound.is_number and measured < bound:
        raise InputError(f"--step-time {step_time} s is below the fastest this step can run on {system}: "
                         f"{float(bound):.4g} s of compute at peak FLOP/s and bandwidth (--ideal); check the "
                         f"measurement and the configuration", "--step-time")


def experts_report(cost, system, chosen) -> dict:
    """The numbers of a mixture of experts: its layout, total and active parameters, the model
    FLOPs per token, the routed experts on the busiest device and its all-to-alls per step."""
    t, moe = cost.training, cost.architecture.moe
    ep, etp = expert_degrees(t, t.m1)
    tokens = t.micro_batches * t.d * t.b * t.l
    alltoalls = [c for dim, c in cost.collectives if dim == "expert" and c.kind == "alltoall"]
    return {"routed": number(moe.experts), "per_token": number(moe.top_k), "shared_width": number(moe.shared_f),
            "ep": number(ep), "etp": number(etp), "edp": number(expert_data_degree(t.m1, t.d, ep, etp, t.cp)),
            "dispatcher": t.dispatcher,
            "active_parameters": number(cost.active_parameters),
            "expert_parameters_per_device": number(cost.expert_parameters_per_device),
            "flops_per_token": number((cost.model_flops_fwd + cost.model_flops_bwd) / tokens),
            "alltoall_bytes": number(alltoall_bytes(cost)), "alltoall_count": number(sum(c.repeats for c in alltoalls)),
            "alltoall_time_s": number(sum(comm_time(c, system, chosen) for c in alltoalls))}


def whole(value) -> str:
    """A count as printed: ``6,738,415,616``; a formula (a degree left a symbol) as it stands."""
    return f"{value:,}" if isinstance(value, int) else str(value)


def print_experts(x: dict, args, size, seconds) -> None:
    """The lines ``summary`` prints for a mixture of experts."""
    print(f"experts: {x['routed']} routed, {x['per_token']} per token, shared width {x['shared_width']}; "
          f"ep={x['ep']} etp={x['etp']} edp={x['edp']}"
          f"{'' if x['dispatcher'] == 'alltoall' else ' dispatcher ' + x['dispatcher']}; "
          f"active parameters per token {whole(x['active_parameters'])}; "
          f"routed-expert parameters per device {whole(x['expert_parameters_per_device'])}")
    print(f"model FLOPs per token (forward + backward): {amount(x['flops_per_token'], 'flops', args.units)}")
    print(f"all-to-all per iteration, busiest device: {size(x['alltoall_bytes'])} moved (received in dispatch, "
          f"sent in combine) in {x['alltoall_count']} "
          f"all-to-alls, {seconds(x['alltoall_time_s'])} on {args.system}")


def run(args) -> int:
    options.honour_json_units(args)
    out, t = report(args)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    flops = lambda name: amount(out[name], "flops", args.units)  # noqa: E731
    size = lambda value: amount(value, "bytes", args.units)  # noqa: E731
    seconds = lambda value: amount(value, "seconds", args.units)  # noqa: E731
    tensor = f"m1={t.m1} s1={t.s1}" if t.tensor is None else f"tensor={t.tensor.kind} grid of {t.tensor.devices}"
    tensor += f" cp={t.cp} ({t.cp_variant})" if t.cp != 1 else ""
    decoder = "" if t.l_dec is None else f" l_dec={t.l_dec}"
    sharding = (f" shard={t.shard}" if t.shard is not None else "") + \
        ("" if t.reshard_after_forward else " reshard_after_forward=False")
    print(f"{out['model']}: b={t.b} l={t.l}{decoder} {tensor} d={t.d} p={t.p} micro-batches="
          f"{t.micro_batches} {t.precision} zero={t.zero}{sharding} recompute={t.recompute}"
          f"{'(' + ','.join(t.recompute_modules) + ')' if t.recompute_modules else ''} schedule={t.schedule} "
          f"flash={t.flash}")
    mtp = (f" ({out['mtp_parameters']:,} of them in the multi-token-prediction modules; --no-mtp leaves them "
           f"out)" if "mtp_parameters" in out else "")
    print(f"parameters: {whole(out['parameters'])}{mtp}")
    print(f"parameters per device: {whole(out['parameters_per_device'])}")
    if "experts" in out:
        print_experts(out["experts"], args, size, seconds)
    if t.lora is not None or t.optimizer != "adam" or t.fp8 or t.offload != "none" or not t.master_weights \
            or t.reference is not None:
        kept = (f" (16-bit layers: first {t.first_layers_16bit}, last {t.last_layers_16bit})"
                if t.first_layers_16bit or t.last_layers_16bit else "") + (", gathered in FP8" if t.fp8_gather else "")
        print(f"recipe: optimizer={t.optimizer} master_weights={t.master_weights} fp8={t.fp8}{kept} offload={t.offload}"
              + (f" lora rank {t.lora.rank} on {','.join(t.lora.targets)}, base {t.lora.base}; trainable "
                 f"parameters {out['trainable_parameters']:,}" if t.lora is not None else "")
              + (f" reference {t.reference}" if t.reference is not None else ""))
    print(f"FLOPs per iteration, busiest device: forward {flops('flops_fwd')}, backward {flops('flops_bwd')}, "
          f"recompute {flops('flops_recompute')}"
          + (f", reference forward {flops('flops_reference')}" if t.reference is not None else ""))
    print(f"model FLOPs per iteration (all devices): forward {flops('model_flops_fwd')}, "
          f"backward {flops('model_flops_bwd')}")
    print("memory per device: weights {}, gradients {}, optimizer {}, activations {}; total {}".format(
        *(size(out[name]) for name in MEMORY)))
    if "host" in out:
        host = out["host"]
        print(f"host memory (offload): {size(host['bytes_per_device'])} per device, {size(host['bytes_per_node'])} "
              f"per node; per step {size(host['device_to_host_bytes'])} down, {size(host['host_to_device_bytes'])} "
              f"up, {seconds(host['time_s'])} on the host link; optimizer step on the host "
              f"{seconds(host['step_s'])}")
    if "activation_bytes_per_rank" in out:
        print("activations per pipeline rank: " + ", ".join(
            f"{rank}: {size(value)}" for rank, value in enumerate(out["activation_bytes_per_rank"])))
        print("parameters per device of each pipeline rank: " + ", ".join(
            f"{rank}: {value:,}" for rank, value in enumerate(out["parameters_per_rank"])))
    peak = out["peak"]
    where = (f" at the {peak['at']}" if "at" in peak else "") + (f" of pipeline rank {peak['rank']}" if "rank" in peak
                                                                  else "")
    kept = "each category's busiest rank" if "rank" in peak else "kept total"
    fit = (f"; the largest micro-batch that fits {args.system}'s {size(peak['capacity_bytes'])}: "
           f"{peak['largest_micro_batch']}" if "largest_micro_batch" in peak else "")
    device = (f"; with the {peak['overheads']} GPU overheads {size(peak['device_bytes'])}" if "device_bytes" in peak
              else "; GPU overheads not counted (--overheads hopper)")
    print(f"peak memory per device: {size(peak['bytes'])}{where} ({kept} {size(out['memory_bytes'])}){device}{fit}")
    if "capacity_bytes" in peak and peak.get("device_bytes", peak["bytes"]) > peak["capacity_bytes"]:
        print(f"does not fit: the peak of {size(peak.get('device_bytes', peak['bytes']))} is past {args.system}'s "
              f"{size(peak['capacity_bytes'])}; the times below are what the step would take with the memory")
    steps = out["step_time_s"]
    print(f"step time per iteration on {args.system}: "
          + ", ".join(f"{part} {seconds(value)}" for part, value in steps.items() if part != "total")
          + f"; total {seconds(steps['total'])}")
    predicted = {k: f"{100 * v:.1f}%" if k == "mfu" and isinstance(v, float) else
                 (f"{v:,.0f}" if isinstance(v, float) else str(v)) for k, v in out["predicted"].items()}
    band = "; " + error_bands.describe(out["predicted"]["expected_error"]) if "expected_error" in out["predicted"] else ""
    # MFU divides by the 16-bit matrix peak, as it is reported for low-precision runs too: say so,
    # since an FP8 or FP4 run may then pass 100 %
    basis = f" (of the 16-bit peak; {out['layout']['fp8']} products run faster)" if out["layout"].get("fp8") else ""
    mfu = out["predicted"]["mfu"]
    past = isinstance(mfu, float) and mfu > 1 and not basis
    # the model FLOPs count the whole causal square, as reported MFU does, while the time runs the
    # kernel's unmasked tiles: an ideal long-sequence step passes 100 %
    past = " (model FLOPs count every score of the causal l x l square, as reported MFU does; the fused " \
           "kernel runs only the unmasked tiles)" if past else ""
    print(f"predicted ({out['time_model']} time model): MFU {predicted['mfu']}{basis}{past}, "
          f"{predicted['tokens_per_s_per_device']} tokens/s per device{band}")
    print(f"pipeline bubble (fraction of the schedule, its passes taken as equally long; the seconds above time "
          f"each pass): {out['bubble']:.4g}")
    if "utilisation" in out:
        u = {k: f"{100 * v:.1f}%" if isinstance(v, float) else str(v) for k, v in out["utilisation"].items()}
        print(f"utilisation at {args.step_time} s per step on {args.system}{basis}: MFU {u['mfu']}, HFU {u['hfu']} "
              f"(matrix products only: MFU {u['mfu_matrix']}, HFU {u['hfu_matrix']})")
    for note in out.get("notes", []):
        print(f"note: {note}")
    print(f"collectives per iteration: busiest device (time on {args.system}); "
          f"whole job of {out['world_size']} devices")
    for c in out["collectives"]:
        print(f"  {c['dimension']:8} {c['kind']:13} group {c['group']} {c['pass']} x{c['count']}: "
              f"{size(c['volume_bytes'])}, {seconds(c['time_s'])}; job {size(c['cluster_volume_bytes'])}")
    return 0
