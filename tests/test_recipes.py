"""Training recipes by hand: optimizers and master weights, FP8, CPU offload and its host
traffic, LoRA/QLoRA storage, and the refusals.  Every expected value is counted here from the
GPT-2 / Llama shapes (``e``, ``f``, ``L``, ``V``, positions ``P``) and the sources' rules."""

import pytest
from sympy import Rational

from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.models.lora import LoRA
from symbolic_cost.models.optimizers import bytes_per_parameter
from symbolic_cost.timing.hardware import SYSTEMS
from symbolic_cost.timing.host import host_time

GPT2 = preset("gpt2")
L, E, F, V, P = 12, 768, 3072, 50257, 1024
PARAMS = (V + P) * E + L * (4 * E * E + 2 * E * F + 9 * E + F) + 2 * E     # 124,439,808
MATRICES = L * (4 * E * E + 2 * E * F)                                      # the layers' weight matrices


def _cost(**kw):
    return model_cost(GPT2, Training(b=1, l=1024, **kw))


def test_gpt2_parameters_by_hand():
    assert _cost().parameters == PARAMS == 124439808


@pytest.mark.parametrize("precision, optimizer, master, expected", [
    ("bf16", "adam", True, (2, 2, 12)),            # fp32 master 4 + two fp32 moments 8
    ("fp32", "adam", True, (4, 4, 8)),
    ("bf16", "sgd", True, (2, 2, 8)),              # master 4 + momentum 4
    ("bf16", "adam", False, (2, 2, 4)),            # pure bf16: two bf16 moments
    ("bf16", "adafactor", True, (2, 2, 4)),        # the master only; the factored moment apart
    ("bf16", "adam-8bit", True, (2, 2, 4 + 2 * (1 + Rational(4, 2048)))),
])
def test_bytes_per_parameter(precision, optimizer, master, expected):
    assert bytes_per_parameter(precision, optimizer=optimizer, master_weights=master) == expected


def test_optimizer_bytes_follow_the_rule():
    assert _cost(optimizer="sgd").optimizer_bytes == 8 * PARAMS
    assert _cost(optimizer="adam", master_weights=False).optimizer_bytes == 4 * PARAMS
    assert _cost(optimizer="adam-8bit").optimizer_bytes == (6 + Rational(1, 256)) * PARAMS


def test_adafactor_factored_second_moment_by_hand():
    """Rows plus columns of every matrix (the word and position tables, QKV e x 3e, the output
    e x e, fc1 e x f, fc2 f x e) and every vector (biases 3e, e, f, e; two norms of 2e; the
    final norm), fp32; plus the fp32 master."""
    layer = (E + 3 * E) + (E + E) + (E + F) + (F + E) + (3 * E + E + F + E) + 4 * E
    factored = (V + E) + (P + E) + L * layer + 2 * E
    assert _cost(optimizer="adafactor").optimizer_bytes == 4 * PARAMS + 4 * factored


def test_fp8_delayed_scaling_by_hand():
    """Transformer Engine's delayed scaling: a 1-byte copy of each layer matrix, 3 scaled
    tensors x (scale, inverse, 1024 amax values) x 4 bytes per product (4 per layer), and each
    product's kept input in 1 byte instead of 2 (QKV, output, fc1 read e, e, e, f wide rows)."""
    plain, fp8 = _cost(), _cost(fp8="delayed")
    assert fp8.weight_bytes - plain.weight_bytes == MATRICES + 4 * L * 3 * (2 + 1024) * 4
    assert plain.activation_bytes - fp8.activation_bytes == L * 1024 * (3 * E + F) * 1
    params = _cost(fp8="fp8-params")
    assert plain.weight_bytes - params.weight_bytes == MATRICES * (2 - 1) - 4 * L * 3 * 1026 * 4
    assert fp8.optimizer_bytes == plain.optimizer_bytes and fp8.gradient_bytes == plain.gradient_bytes


def test_fp8_primary_weights_by_hand():
    """Megatron's --fp8-param-gather under current scaling and MXFP8 (Megatron-Bridge's FP8-CS and
    MXFP8 recipes): each layer matrix stored in FP8 in place of its 16-bit copy, 1 byte an element
    (current scaling: no other copy; 3 scaled tensors x 2 fp32 values a product), or under MXFP8
    the row-wise copy in place of it beside the column-wise one, 2 x (1 + 1/32) bytes an element
    (E8M0 scales inside); and the distributed optimizer's parameter all-gather moves those matrices
    at one byte an element (the rest of the 124,439,808 parameters at two)."""
    plain = _cost(distributed_optimizer=True, d=8)
    tensorwise = _cost(fp8="tensorwise-params", distributed_optimizer=True, d=8)
    mx = _cost(fp8="mxfp8-params", distributed_optimizer=True, d=8)
    assert plain.weight_bytes - tensorwise.weight_bytes == MATRICES * (2 - 1) - 4 * L * 3 * 2 * 4
    assert mx.weight_bytes - plain.weight_bytes == MATRICES * (2 * (1 + Rational(1, 32)) - 2)
    for cost in (tensorwise, mx):
        gathers = [c for dim, c in cost.collectives if dim == "data" and c.kind == "allgather"]
        assert [c.elements * c.element_bytes for c in gathers] == [2 * PARAMS - MATRICES]


def test_zero_offload_paper_counts():
    """Ren et al. 2021 (ZeRO-Offload), one device, M parameters: the GPU keeps the fp16
    parameters (2M); the host the fp32 master and two moments (12M) and the fp16 gradients
    (2M); per step 2M of gradients go down and 2M of parameters come up."""
    cost = _cost(zero=2, offload="optimizer")
    assert (cost.weight_bytes, cost.gradient_bytes, cost.optimizer_bytes) == (2 * PARAMS, 0, 0)
    assert cost.host_bytes == 14 * PARAMS
    assert (cost.device_to_host, cost.host_to_device) == (2 * PARAMS, 2 * PARAMS)


@pytest.mark.parametrize("zero, n", [(1, 4), (2, 4), (3, 4)])
def test_offload_shards_and_traffic_by_hand(zero, n):
    """d = 8 ranks, n micro-batches: each rank's optimizer shard (12M/8) lives on the host;
    ZeRO-2/3 send the gradient shard (2M/8) down every micro-batch and keep none, ZeRO-1 keeps
    the full gradient and sends its shard once; the updated weight shard comes up once."""
    d = 8
    cost = _cost(d=d, zero=zero, micro_batches=n, offload="optimizer")
    assert cost.optimizer_bytes == 0
    assert cost.gradient_bytes == (0 if zero >= 2 else 2 * PARAMS)
    assert cost.host_bytes == Rational(12 * PARAMS, d) + Rational(2 * PARAMS, d)
    assert cost.device_to_host == Rational(2 * PARAMS, d) * (n if zero >= 2 else 1)
    assert cost.host_to_device == Rational(2 * PARAMS, d)
    assert cost.weight_bytes == Rational(2 * PARAMS, d if zero == 3 else 1)


def test_parameter_offload_by_hand():
    """ZeRO-3 with the parameters offloaded too: nothing of the model state on the device;
    the weight shard is fetched for forward and backward of each micro-batch."""
    d, n = 4, 3
    cost = _cost(d=d, zero=3, micro_batches=n, offload="parameters")
    assert (cost.weight_bytes, cost.gradient_bytes, cost.optimizer_bytes) == (0, 0, 0)
    assert cost.host_bytes == Rational(16 * PARAMS, d)
    assert cost.host_to_device == 2 * n * Rational(2 * PARAMS, d)
    assert cost.device_to_host == n * Rational(2 * PARAMS, d)


def test_weight_offload_alone_by_hand():
    """ZeRO-3 with DeepSpeed's ``offload_param`` and no ``offload_optimizer``: the 16-bit weight
    shard (2M/d) lives on the host and is fetched for forward and backward of each micro-batch; the
    gradient shard (2M/d) and the optimizer shard (12M/d) stay on the device, where the step runs,
    and the updated weight shard goes back to the host once."""
    from symbolic_cost.timing.step import step_time_breakdown
    d, n = 4, 3
    cost = _cost(d=d, zero=3, micro_batches=n, offload="weights")
    assert (cost.weight_bytes, cost.gradient_bytes, cost.optimizer_bytes) == (
        0, Rational(2 * PARAMS, d), Rational(12 * PARAMS, d))
    assert cost.host_bytes == Rational(2 * PARAMS, d)
    assert cost.host_to_device == 2 * n * Rational(2 * PARAMS, d)
    assert cost.device_to_host == Rational(2 * PARAMS, d)
    times = step_time_breakdown(cost, "h100")
    assert times["host_step"] == 0 and times["host_comm"] == Rational((2 * n + 1) * 2 * PARAMS, d * 64 * 10**9)
    with pytest.raises(InputError, match="needs ZeRO-3"):
        _cost(d=d, zero=2, offload="weights")


def test_host_time_on_the_pcie_link():
    """H100 SXM: PCIe Gen5 x16, 64 GB/s per direction; both directions in turn."""
    cost = _cost(zero=2, offload="optimizer")
    assert host_time(cost, SYSTEMS["h100"]) == Rational(4 * PARAMS, 64 * 10**9)
    assert host_time(_cost(), SYSTEMS["h100"]) == 0


def test_fp8_products_run_at_the_fp8_rate():
    """H100 SXM: 1978.9 TFLOP/s dense FP8 against 989.4 bf16 (NVIDIA's datasheet).  Under an FP8
    recipe the layer's linear products compute at the FP8 rate in both passes; nothing else moves
    (the cast kernels are rows of their own, ``test_low_precision``)."""
    from symbolic_cost.timing.hardware import times
    plain, fp8 = _cost(), _cost(fp8="delayed")
    assert [name for name in fp8.layer.names if not name.endswith("_cast")] == plain.layer.names
    for before in plain.layer:
        after = fp8.layer[before.name]
        got = times(after, SYSTEMS["h100"])
        if after.name in ("qkv_proj", "v_proj", "fc1", "fc2"):
            assert got["t_comp_fwd"] == after.flops_fwd / Rational("1978.9e12")
            assert got["t_comp_bwd"] == after.flops_bwd / Rational("1978.9e12")
        else:
            assert got == times(before, SYSTEMS["h100"])
    a100 = times(fp8.layer["fc1"], SYSTEMS["a100"])        # no FP8 units: the 16-bit rate
    assert a100["t_comp_fwd"] == fp8.layer["fc1"].flops_fwd / SYSTEMS["a100"].matrix_flops


def test_fp8_products_run_at_the_fp8_rate_in_the_tiled_kernel_model():
    """The kernel-level model times each product as one tiled GEMM kernel: a compute-bound
    product (16384 tokens through 4096 x 4096, about 1800 FLOPs per DRAM byte, far above the
    H100's 591 at FP8) takes its FLOPs at 1978.9 TFLOP/s plus one launch under an FP8 recipe,
    at 989.4 in 16 bits."""
    from dataclasses import replace
    from symbolic_cost import conventions as conv
    from symbolic_cost.ops import linear
    from symbolic_cost.timing.kernels import pass_times
    tiled, h100 = conv.DEFAULT.but(kernel_time="tiled", matmul_flops="2mnk"), SYSTEMS["h100"]
    plain = linear(1, 16384, 4096, 4096, bias=False, conventions=tiled)
    flops = 2 * 16384 * 4096 * 4096
    assert plain.flops_fwd == flops
    assert pass_times(replace(plain, fp8=True), "fwd", h100, tiled)[1] == flops / Rational("1978.9e12") \
        + h100.launch_overhead
    assert pass_times(plain, "fwd", h100, tiled)[1] == flops / Rational("989.4e12") + h100.launch_overhead


def test_offload_traffic_and_the_host_optimizer_step_are_step_time_parts():
    """The offloaded step is the same step plus its host-link seconds and the optimizer step on
    the host, not overlapped.  On 4 devices of a DGX H100 node (two Xeon 8480C: 2 x 8 channels
    of DDR5-4800, 614.4 GB/s), each holding per parameter of its quarter 12 bytes of fp32
    master and Adam moments and a 2-byte bf16 gradient: the step reads and writes them (28
    bytes), the gradient arriving is written (2) and the bf16 weight leaving read (2), all four
    devices' shards at once."""
    from symbolic_cost.timing.step import step_time_breakdown
    plain = step_time_breakdown(_cost(d=4, zero=2), "h100")
    offloaded = step_time_breakdown(_cost(d=4, zero=2, offload="optimizer"), "h100")
    assert "host_comm" not in plain and "host_step" not in plain
    assert offloaded["host_comm"] == Rational(4 * PARAMS, 4 * 64 * 10**9)     # gradients down, weights up
    assert offloaded["host_step"] == Rational(4 * (28 + 2 + 2) * PARAMS, 4 * 2 * 8 * 4800 * 10**6 * 8)
    assert offloaded["total"] - plain["total"] == offloaded["host_comm"] + offloaded["host_step"]


def test_lora_on_llama_by_hand():
    """Llama-2-7B, r = 8 on q and v: 32 layers x 2 adapters x 8 (4096 + 4096) trainable (the
    count peft prints); gradients and Adam state for those only; frozen weights in bf16."""
    arch = preset("llama-2-7b")
    base = model_cost(arch, Training(b=1, l=512))
    cost = model_cost(arch, Training(b=1, l=512, lora=LoRA(8, ("q", "v"))))
    trainable = 32 * 2 * 8 * (4096 + 4096)
    assert cost.trainable_parameters == trainable == 4194304
    assert cost.parameters == base.parameters + trainable
    assert (cost.gradient_bytes, cost.optimizer_bytes) == (2 * trainable, 12 * trainable)
    assert cost.weight_bytes == 2 * cost.parameters


def test_lora_flops_and_activations_by_hand():
    """One adapted q on GPT-2 (c_attn's q slice), r = 4, t = b l tokens, exact products
    m n (2k - 1): the adapter's forward and backward, and a frozen base with no dW, no dB."""
    b, l, r = 1, 64, 4
    t = b * l
    mm = lambda m, k, n: m * n * (2 * k - 1)  # noqa: E731
    base = model_cost(GPT2, Training(b=b, l=l))
    cost = model_cost(GPT2, Training(b=b, l=l, lora=LoRA(r, ("q",))))
    adapter = cost.layer["qkv_proj.lora"]
    assert adapter.flops_fwd == mm(t, E, r) + mm(t, r, E) + 2 * t * E
    assert adapter.flops_bwd == mm(r, t, E) + mm(t, E, r) + mm(E, t, r) + mm(t, r, E) + t * E + t * E
    assert adapter.act_buffer == (t * E + t * r) * 2          # X once, Z = X A
    for row in ("qkv_proj", "v_proj", "fc1", "fc2"):
        frozen, full = cost.layer[row], base.layer[row]
        k, n = full.gemms[0].k, full.gemms[0].n
        assert frozen.flops_bwd == mm(t, n, k)                   # dX only
        assert frozen.act_buffer == 0 and frozen.weight_grads == 0
    assert cost.embedding["word_embeddings"].flops_bwd == 0


def test_an_adapter_reading_what_fused_attention_keeps_keeps_only_its_z():
    """A fused attention kernel keeps its output ``O`` for backward (FlashAttention's
    ``(b, l, h, q)`` output, which the output projection reads as ``(b, l, e)``: a view of the
    same storage), so an adapter on ``o`` adds only its ``Z = X A`` to what is kept: ``t r``
    values of 2 bytes a layer (Llama-2-7B, b = 1, l = 512, r = 8: 32 layers); without fused
    attention it keeps ``X`` too, ``t e`` more."""
    arch, t, r = preset("llama-2-7b"), 512, 8
    kept = lambda targets, flash: model_cost(arch, Training(b=1, l=t, flash=flash,  # noqa: E731
                                                            lora=LoRA(r, targets))).activation_bytes
    assert kept(("q", "v", "o"), True) - kept(("q", "v"), True) == 32 * t * r * 2
    assert kept(("q", "v", "o"), False) - kept(("q", "v"), False) == 32 * (t * r + t * 4096) * 2


def test_lora_under_tensor_parallelism_by_hand():
    """Llama-2-7B on 2 tensor ranks, r = 8 on q, v, o, down, as peft's Megatron-LM layer splits
    them: q and v (column-parallel) keep A (4096, 8) whole and B (8, 2048) split, and sum the
    gradient of Z = X A, 16 tokens x 8, over the ranks in backward; o and down (row-parallel)
    split A by its input, (2048, 8) and (5504, 8), sum Z in forward, and keep B (8, 4096) whole.
    The products per rank, exact m n (2k - 1): A, B, then the scale and the add."""
    arch, t, r = preset("llama-2-7b"), 16, 8
    mm = lambda m, k, n: m * n * (2 * k - 1)  # noqa: E731
    cost = model_cost(arch, Training(b=1, l=t, m1=2, lora=LoRA(r, ("q", "v", "o", "down"))))
    qv, o, down = (cost.layer[f"{row}.lora"] for row in ("qkv_proj", "v_proj", "fc2"))
    assert qv.weights == 2 * 2 * (4096 * r + r * 2048)                  # bf16, two adapters
    assert o.weights == 2 * (2048 * r + r * 4096) and down.weights == 2 * (5504 * r + r * 4096)
    ring = lambda elements: 2 * elements * 2 * (2 - 1) // 2  # noqa: E731  (bf16, allreduce over 2)
    assert [(c.kind, c.pass_, c.volume) for c in qv.collectives] == [("allreduce", "bwd", ring(2 * t * r))]
    assert [(c.kind, c.pass_, c.volume) for c in o.collectives] == [("allreduce", "fwd", ring(t * r))]
    # the allreduce of Z adds (m1 - 1)/m1 of its t r values on each rank (reduction_flops)
    assert o.flops_fwd == mm(t, 2048, r) + t * r // 2 + mm(t, r, 4096) + 2 * t * 4096
    assert qv.flops_fwd == 2 * (mm(t, 4096, r) + mm(t, r, 2048) + 2 * t * 2048)
    assert cost.trainable_parameters == 32 * r * (2 * (4096 + 4096) + (4096 + 4096) + (11008 + 4096))


def test_lora_under_sequence_parallelism_by_hand():
    """The same on 2 tensor ranks with sequence parallelism (s1 = m1 = 2, Megatron-LM's): a
    column-parallel A reads the rank's 8 of the 16 tokens and its Z (16 x 8 per adapter) is
    allgathered for B, its gradient reduce-scattered back; a row-parallel A's partial Z is
    reduce-scattered to the shard, where B runs on 8 tokens, its gradient allgathered."""
    arch, t, r = preset("llama-2-7b"), 16, 8
    mm = lambda m, k, n: m * n * (2 * k - 1)  # noqa: E731
    cost = model_cost(arch, Training(b=1, l=t, m1=2, s1=2, lora=LoRA(r, ("q", "v", "o"))))
    qv, o = cost.layer["qkv_proj.lora"], cost.layer["v_proj.lora"]
    volumes = lambda row: [(c.kind, c.pass_, c.volume) for c in row.collectives]  # noqa: E731
    half = lambda elements: elements * 2 // 2  # noqa: E731   (bf16; a ring over 2 sends half)
    assert volumes(qv) == [("allgather", "fwd", half(t * 2 * r)), ("reducescatter", "bwd", half(t * 2 * r))]
    assert volumes(o) == [("reducescatter", "fwd", half(t * r)), ("allgather", "bwd", half(t * r))]
    assert qv.flops_fwd == 2 * (mm(t // 2, 4096, r) + mm(t, r, 2048) + 2 * t * 2048)
    assert o.flops_fwd == mm(t, 2048, r) + t * r // 2 + mm(t // 2, r, 4096) + 2 * (t // 2) * 4096
    assert qv.act_buffer == 2 * (t // 2 * 4096 + 2 * t * r) and o.act_buffer == 2 * (t * 2048 + t // 2 * r)


def test_qlora_storage_by_hand():
    """QLoRA on Llama-2-7B: the layers' matrices in NF4 with double quantisation, 1/2 +
    1/64 + 4/(64 x 256) bytes each (0.127 bits of scales per parameter, as the paper prints);
    the embedding, head and norms in bf16; the adapters in bf16."""
    arch = preset("llama-2-7b")
    e, f, L_, V_ = 4096, 11008, 32, 32000
    matrices = L_ * (4 * e * e + 3 * e * f)
    cost = model_cost(arch, Training(b=1, l=512, lora=LoRA(16, ("q", "k", "v", "o", "gate", "up", "down"),
                                                             base="nf4")))
    scale_bits = 8 * (Rational(1, 64) + Rational(4, 64 * 256))
    assert round(float(scale_bits), 3) == 0.127
    others = 2 * V_ * e + (2 * L_ + 1) * e
    trainable = L_ * 16 * (4 * (e + e) + 2 * (e + f) + (f + e))
    assert cost.trainable_parameters == trainable
    assert cost.weight_bytes == matrices * (Rational(1, 2) + scale_bits / 8) + 2 * others + 2 * trainable
    nodq = model_cost(arch, Training(b=1, l=512, lora=LoRA(16, ("q",), base="nf4", double_quant=False)))
    int8 = model_cost(arch, Training(b=1, l=512, lora=LoRA(16, ("q",), base="int8")))
    adapters = L_ * 16 * (e + e)
    assert nodq.weight_bytes == matrices * (Rational(1, 2) + Rational(4, 64)) + 2 * others + 2 * adapters
    rows = L_ * (e * 3 * e + e * e + e * 2 * f + f * e)        # int8: one fp32 scale per output column
    outputs = L_ * (3 * e + e + 2 * f + e)
    assert int8.weight_bytes == rows + 4 * outputs + 2 * others + 2 * adapters


def test_lora_zero3_gathers_the_frozen_base_and_reduces_only_adapters():
    d, n = 8, 2
    cost = model_cost(GPT2, Training(b=1, l=64, d=d, zero=3, micro_batches=n, lora=LoRA(8, ("qkv",))))
    trainable = L * 8 * (E + 3 * E)
    data = [c for dim, c in cost.collectives if dim == "data"]
    reduce = [c for c in data if c.kind == "reducescatter"]
    assert [c.elements for c in reduce] == [trainable]
    frozen = [c for c in data if c.kind == "allgather" and c.element_bytes == 1]
    assert [c.elements for c in frozen] == [2 * PARAMS] * 2 and all(c.repeats == n for c in frozen)


@pytest.mark.parametrize("make, message", [
    (lambda: LoRA(0), "lora rank must be a positive integer"),
    (lambda: LoRA(8, ("query",)), "unknown: 'query'"),
    (lambda: LoRA(8, ("qkv", "q")), "must not adapt a slice twice"),
    (lambda: LoRA(8, base="nf8"), "lora base must be one of"),
    (lambda: Training(offload="optimizer"), "offload='optimizer' needs ZeRO"),
    (lambda: Training(zero=2, offload="parameters"), "needs ZeRO-3"),
    (lambda: Training(optimizer="lion"), "optimizer must be one of"),
    (lambda: Training(fp8="e4m3"), "fp8 must be one of"),
    (lambda: Training(precision="fp32", fp8="delayed"), "fp8 needs 16-bit training"),
    (lambda: Training(fp8="fp8-params", master_weights=False), "needs master_weights"),
    (lambda: model_cost(GPT2, Training(b=1, l=8, lora=LoRA(8, ("gate",)))), "needs a gated MLP"),
])
def test_bad_recipes_are_refused(make, message):
    with pytest.raises(ValueError) as error:
        make()
    assert message in str(error.value)


def test_summary_command_prints_the_recipe(capsys):
    """The JSON fields of a LoRA + ZeRO-3 + offload run and MFU/HFU at a given step time:
    MFU is the model FLOPs over (time x devices x the H100's 989.4 TFLOP/s)."""
    import json
    from symbolic_cost.cli import main
    args = ["summary", "--preset", "gpt2", "--set", "b=2", "l=128", "d=4", "--zero", "3", "--offload",
            "optimizer", "--lora-rank", "8", "--lora-targets", "qkv,down", "--step-time", "0.5", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trainable_parameters"] == L * 8 * ((E + 3 * E) + (F + E))
    assert out["host"]["bytes_per_node"] == pytest.approx(4 * out["host"]["bytes_per_device"])
    assert out["utilisation"]["mfu"] == pytest.approx(
        (out["model_flops_fwd"] + out["model_flops_bwd"]) / (0.5 * 4 * 989.4e12))
    assert main(["summary", "--preset", "gpt2", "--offload", "optimizer"]) == 2
    assert "needs ZeRO" in capsys.readouterr().err
    assert main(["summary", "--preset", "gpt2", "--lora-rank", "4", "--lora-targets", "query"]) == 2
    assert "unknown: 'query'" in capsys.readouterr().err
    assert main(["summary", "--preset", "gpt2", "--lora-rank", "0"]) == 2


def test_the_optimizer_step_updates_its_own_shard():
    """Adam under mixed precision reads and writes its state (fp32 master weights and two moments,
    12 bytes a parameter, read and written: 24), reads the gradients (bf16, 2) and writes the
    working weights (bf16, 2): 28 bytes a trained parameter.  A rank updates only its shard under
    ZeRO-1 and 2 (Llama-3-8B, 8,030,261,248 parameters, d = 8: an eighth), LoRA trains its adapters
    alone (rank 16 on q, 4,096 -> 4,096, and v, 4,096 -> 1,024 under GQA, in 32 layers), and
    offloading the optimizer leaves the step to the host."""
    from symbolic_cost.timing.hardware import calibrated
    from symbolic_cost.timing.step import optimizer_time
    arch, n = preset("llama-3-8b"), 8_030_261_248
    step = lambda **kw: model_cost(arch, Training(b=1, l=1024, **kw)).optimizer_step_bytes  # noqa: E731
    assert step() == 28 * n
    assert step(d=8, zero=1) == step(d=8, zero=2) == Rational(28 * n, 8)
    assert step(lora=LoRA(16, ("q", "v"))) == 28 * 32 * 16 * ((4096 + 4096) + (4096 + 1024))
    assert step(d=8, zero=1, offload="optimizer") == 0
    h100 = calibrated("h100")
    assert optimizer_time(model_cost(arch, Training(b=1, l=1024, d=8, zero=1)), h100) == \
        Rational(28 * n, 8) / (h100.hbm_bandwidth * h100.efficiency.memory)
