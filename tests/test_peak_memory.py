"""The peak of a training step (``models.peak``) against PyTorch's own step, measured.

Small ``transformers`` models (fp32, CPU, eager attention, train mode, ``use_cache=False``: with
the cache on, the model's output also holds every layer's K and V once backward has freed them)
run two steps of ``loss.backward(); AdamW(foreach=False).step(); zero_grad()``; the second is
measured op by op (``tests/peak_memory.py``: live storage bytes, each storage once).  The
prediction is ``step_timeline`` under the ``pytorch-eager`` preset.  The kept activations are
the library's plus the hand terms of ``tests/test_saved_tensors_hf.py`` (GPT-2, Llama), or
autograd's own saved tensors (``saved_tensors_hooks``) for the families that test does not
cover (Mixtral, T5).  What else is live, read from PyTorch's and the models' code:

================================ ============================================================
term                             bytes
================================ ============================================================
Adam's step counters             ``4`` per parameter tensor (``torch.optim.AdamW`` keeps
                                 ``state["step"]`` as a 0-d fp32 tensor)
buffers the forward reads        the rotary ``inv_freq``: ``q/2`` fp32 (Llama, Mixtral)
the batch                        token ids ``8 b l`` (the labels are the same tensor)
at the loss's backward           the loss and its seed gradient, ``4 + 4``; ``nll_loss``'s
                                 saved target and total weight are freed: ``8 b l + 4`` for a
                                 causal LM (it copies the shifted labels), ``4`` for T5 (a
                                 view of the labels, which the batch holds)
the optimizer's temporaries      ``torch.optim``'s single-tensor AdamW: ``sqrt`` and the
                                 division make two tensors the size of the parameter, and
                                 the previous parameter's ``denom`` is still referenced:
                                 ``max_i (2 s_i + s_{i-1})`` over the parameters in order
================================ ============================================================
"""

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from peak_memory import steady_step  # noqa: E402
from test_saved_tensors_hf import _hand_terms  # noqa: E402
from torch_reference import saved_storages  # noqa: E402

from symbolic_cost.models import model_cost  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402
from symbolic_cost.models.peak import (loss_transient, peak_bytes, peak_moment,  # noqa: E402
                                       step_timeline)
from symbolic_cost.tools import pytorch_eager as eager  # noqa: E402

FP32 = 4
GPT2 = dict(model_type="gpt2", n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=64, use_cache=False)
LLAMA = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=160, vocab_size=1000, max_position_embeddings=64, tie_word_embeddings=False,
             use_cache=False)
MIXTRAL = dict(LLAMA, model_type="mixtral", intermediate_size=96, num_local_experts=4, num_experts_per_tok=2,
               router_aux_loss_coef=0.0, output_router_logits=False)
T5 = dict(model_type="t5", num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, num_heads=4, d_ff=128,
          vocab_size=1000, use_cache=False, feed_forward_proj="relu", tie_word_embeddings=True,
          decoder_start_token_id=0, pad_token_id=0)
WIDE = {"gpt2": dict(GPT2, n_embd=256), "llama": dict(LLAMA, hidden_size=256, intermediate_size=512)}


def _step(config, b, l):
    """The measured second step, autograd's kept bytes of one forward, and the model."""
    conf = transformers.AutoConfig.for_model(**config)
    kind = transformers.AutoModelForSeq2SeqLM if config["model_type"] == "t5" else transformers.AutoModelForCausalLM
    torch.manual_seed(0)
    model = kind.from_config(conf, attn_implementation="eager")
    model.train()
    ids = torch.randint(0, config["vocab_size"], (b, l), generator=torch.Generator().manual_seed(0))
    batch = dict(input_ids=ids, labels=ids)
    with saved_storages(model.parameters()) as kept:
        model(**batch)
    return steady_step(model, batch), sum(kept.values()), model


def _moments(config, b, l):
    cost = model_cost(from_config(config), eager.training(b, l), "pytorch-eager")
    return cost, {m.name: m.bytes for m in step_timeline(cost, "pytorch-eager")}


def _rotary(config):
    """The ``inv_freq`` buffer the rotary embedding reads: ``q/2`` fp32 values."""
    if "hidden_size" not in config:
        return 0
    return config["hidden_size"] // config["num_attention_heads"] // 2 * FP32


def _tensors(model):
    return len(list(model.parameters()))


@pytest.mark.parametrize("config", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_peak_at_the_loss_backward_end_to_end(config):
    """b = 2, l = 32: the peak is the loss's backward (``log_softmax``'s), and equals the
    library's moment, kept activations included, plus the bookkeeping of the table above."""
    b, l = 2, 32
    measured, _, model = _step(config, b, l)
    cost, moments = _moments(config, b, l)
    assert measured.peak().op == "aten._log_softmax_backward_data.default"
    assert peak_moment(cost, "pytorch-eager").name == "loss backward"
    bookkeeping = FP32 * _tensors(model) + _rotary(config) + (4 + 4) - (8 * b * l + 4)
    assert measured.peak().live == moments["loss backward"] + _hand_terms(config, b, l) + bookkeeping


@pytest.mark.parametrize("config", [MIXTRAL, T5], ids=["mixtral", "t5"])
def test_peak_at_the_loss_backward_with_autograds_kept_bytes(config):
    """A gated-MLP MoE and an encoder-decoder: state plus autograd's kept bytes plus the
    library's loss transient (the logits the output holds and the two gradients, ``3 x 4 n``)."""
    b, l = 2, 32
    measured, kept, model = _step(config, b, l)
    cost, _ = _moments(config, b, l)
    n = b * l * config["vocab_size"]
    assert loss_transient(cost, eager.PRESET) == 3 * FP32 * n
    freed = 4 if config["model_type"] == "t5" else 8 * b * l + 4
    bookkeeping = FP32 * _tensors(model) + _rotary(config) + (4 + 4) - freed
    assert measured.peak().op == "aten._log_softmax_backward_data.default"
    assert measured.peak().live == (cost.weight_bytes + cost.optimizer_bytes + kept
                                    + loss_transient(cost, eager.PRESET) + bookkeeping)


def _adam_temporaries(model):
    """``max_i (2 s_i + s_{i-1})`` bytes over the parameters in ``torch.optim``'s order."""
    sizes = [p.numel() * FP32 for p in model.parameters()]
    return max(2 * s + (sizes[i - 1] if i else 0) for i, s in enumerate(sizes))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_peak_at_the_optimizer_step_for_a_small_batch(family):
    """b = 1, l = 8 and a wider model: the gradients and the optimizer's temporaries outgrow the
    activations, and the peak moves to the optimizer step; measured = state + every gradient +
    the temporaries of the algorithm (computed here from the parameter list) + bookkeeping.  The
    library takes the temporaries as twice the largest row's weights, leaving out the previous
    parameter's ``denom`` but counting a row's bias with its matrix and a fused row (Llama's
    gate and up projections, ``e x 2f``) as one tensor: above the measured peak, by 0.2 % at
    most here."""
    config, b, l = WIDE[family], 1, 8
    measured, _, model = _step(config, b, l)
    cost, moments = _moments(config, b, l)
    assert measured.peak().phase == "optimizer"
    assert peak_moment(cost, "pytorch-eager").name == "optimizer step"
    state = cost.weight_bytes + cost.gradient_bytes + cost.optimizer_bytes
    bookkeeping = FP32 * _tensors(model) + _rotary(config) + 8 * b * l
    assert measured.peak().live == state + _adam_temporaries(model) + bookkeeping
    assert 0 <= moments["optimizer step"] + bookkeeping - measured.peak().live < measured.peak().live * 2 / 1000


def test_a_tied_table_is_summed_out_of_place_at_the_end_of_backward():
    """GPT-2's word table gets two gradients (the head's, then the lookup's); ``AccumulateGrad``
    adds them out of place, so at that ``add`` the state, every gradient and two more tables are
    live, with the logits the model's output holds; bookkeeping: ids, Adam's counters, the loss
    and one 0-d gradient."""
    config, b, l = WIDE["gpt2"], 1, 8
    measured, _, model = _step(config, b, l)
    _, moments = _moments(config, b, l)
    backward = [s for s in measured.samples if s.phase == "backward"]
    last_lookup = max(i for i, s in enumerate(backward) if s.op == "aten.embedding_dense_backward.default")
    add = next(s for s in backward[last_lookup:] if s.op == "aten.add.Tensor")
    assert add.live == moments["embedding backward"] + 8 * b * l + FP32 * _tensors(model) + 4 + 4


def _recomputed_step(config, b, l, redone=None):
    """The measured second step of ``config`` with Hugging Face's gradient checkpointing (one
    checkpoint a decoder layer, ``torch.utils.checkpoint`` without re-entry or early stop, so
    that the whole layer runs again; ``redone``: only the first ``redone`` layers checkpointed,
    Megatron-LM's block method, by each layer's ``gradient_checkpointing`` switch), and the
    sample index just after the last checkpointed layer's recomputation: the backward-phase run
    of that layer's forward operators (detaches aside, they come with saving) as the forward
    ran them, plus one."""
    import torch.utils.checkpoint as checkpoint
    conf = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation="eager")
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    for layer in model.model.layers[redone:] if redone is not None else ():
        layer.gradient_checkpointing = False
    marks, tracker = [], []
    last = model.model.layers[(redone or len(model.model.layers)) - 1]
    last.register_forward_pre_hook(lambda *_: marks.append(len(tracker[-1].samples)))
    last.register_forward_hook(lambda *_: marks.append(len(tracker[-1].samples)))
    ids = torch.randint(0, config["vocab_size"], (b, l), generator=torch.Generator().manual_seed(0))
    with checkpoint.set_checkpoint_early_stop(False):
        measured = steady_step(model, dict(input_ids=ids, labels=ids), watch=tracker.append)
    skip = "aten.detach.default"
    layer = [s.op for s in measured.samples[marks[-2]:marks[-1]] if s.op != skip]
    ops = [(i, s.op) for i, s in enumerate(measured.samples) if s.phase == "backward" and s.op != skip]
    start = next(k for k in range(len(ops)) if [op for _, op in ops[k:k + len(layer)]] == layer)
    return measured, ops[start + len(layer) - 1][0] + 1, model


@pytest.mark.parametrize("b, l, layers, redone", [(2, 256, 2, None), (1, 128, 2, None), (2, 256, 3, 2)])
def test_a_recomputed_layer_holds_what_it_saves_before_its_backward(b, l, layers, redone):
    """Full recomputation, one layer a checkpoint (``recompute="full"``), or the first ``redone``
    only (Megatron-LM's block method): once the last checkpointed layer's forward has run again in
    backward, the live bytes are the library's ``recomputed backward`` moment (state, the
    checkpoints, what the layer saves, the gradient of its output, the head's weight gradients
    and the logits the output holds; under the block method the layers past the checkpoints
    freed, their weight gradients made) plus, from the Hugging Face and PyTorch code: what
    autograd saves of a Llama layer beyond the library's rows (``_hand_terms``, one layer's
    share); what the checkpoint holds besides the hidden states, the layer's keyword arguments
    (the 4-D fp32 causal mask ``b l^2``, the rotary ``cos`` and ``sin`` ``l q`` each, the int64
    position ids ``l``); and the bookkeeping of the table above (the batch's ids, Adam's
    counters, ``inv_freq``, the loss and its seed).  With the attention scores rebuilt, this
    moment is above the forward's."""
    config = dict(LLAMA, num_hidden_layers=layers, max_position_embeddings=l)
    measured, after, model = _recomputed_step(config, b, l, redone)
    method = {} if redone is None else dict(recompute_method="block", recompute_layers=redone)
    cost = model_cost(from_config(config), replace(eager.training(b, l), recompute="full", **method), "pytorch-eager")
    moments = {m.name: m.bytes for m in step_timeline(cost, "pytorch-eager")}
    q = config["hidden_size"] // config["num_attention_heads"]
    layer_share = _hand_terms(config, b, l) - _hand_terms(dict(config, num_hidden_layers=layers - 1), b, l)
    arguments = b * l * l * FP32 + 2 * l * q * FP32 + 8 * l
    bookkeeping = 8 * b * l + FP32 * _tensors(model) + _rotary(config) + 4 + 4
    assert measured.samples[after].live == moments["recomputed backward"] + layer_share + arguments + bookkeeping
    if redone is None:
        assert moments["recomputed backward"] > moments["forward"]


def test_peak_is_the_largest_moment_as_a_formula():
    """``peak_bytes`` is one expression in the symbols; substituted, it is the largest moment."""
    from symbolic_cost.models import Training
    from symbolic_cost.models.config import preset
    from symbolic_cost.symbols import b
    cost = model_cost(preset("gpt2"), Training(b=b, l=1024))
    formula = peak_bytes(cost)
    for batch in (1, 8):
        numbers = model_cost(preset("gpt2"), Training(b=batch, l=1024))
        assert formula.subs(b, batch) == max(m.bytes for m in step_timeline(numbers))


def test_summary_reports_the_peak_and_the_largest_micro_batch_that_fits(capsys):
    """``summary --json``: the peak is the largest moment, and one more sequence than the largest
    micro-batch it reports does not fit H100's 81,559 MiB (nvidia-smi's) while that micro-batch does."""
    import json
    from symbolic_cost.cli import main
    from symbolic_cost.models import Training
    from symbolic_cost.models.config import preset
    assert main(["summary", "--preset", "gpt2", "--set", "b=4", "l=1024", "--json"]) == 0
    peak = json.loads(capsys.readouterr().out)["peak"]
    assert peak["bytes"] == max(peak["moments"].values()) and peak["moments"][peak["at"]] == peak["bytes"]
    n = peak["largest_micro_batch"]
    fits = lambda b: peak_bytes(model_cost(preset("gpt2"), Training(b=b, l=1024))) <= 81_559 * 2**20  # noqa: E731
    assert n > 4 and fits(n) and not fits(n + 1)


def test_sweep_gives_the_peak_of_each_configuration(capsys):
    """``sweep --field peak_bytes`` over b: each row is the peak of the model built with those numbers."""
    from symbolic_cost.cli import main
    from symbolic_cost.models import Training
    from symbolic_cost.models.config import preset
    assert main(["sweep", "--preset", "gpt2", "--set", "l=1024", "--grid", "b=1,8", "--field", "peak_bytes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "b,peak_bytes"
    for line in lines[1:]:
        b, value = line.split(",")
        assert float(value) == float(peak_bytes(model_cost(preset("gpt2"), Training(b=int(float(b)), l=1024))))


def test_ddp_buckets_are_a_second_copy_of_the_gradients(tmp_path):
    """``DistributedDataParallel`` (gloo, one process: the reducer builds its buckets whatever the
    world size) raises the measured peak of the same step by every gradient's bytes, as
    ``bucket_bytes`` says of PyTorch's DDP at ``d > 1``; the library's other terms do not depend
    on ``d`` at ZeRO-0, so its two peaks differ by exactly that, and Megatron-LM's (buckets are
    views of its buffer) by nothing."""
    import torch.distributed as dist
    from dataclasses import replace
    from peak_memory import steady_step
    config, b, l = GPT2, 2, 32
    plain, _, model = _step(config, b, l)
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
        ids = torch.randint(0, config["vocab_size"], (b, l), generator=torch.Generator().manual_seed(0))
        measured = steady_step(wrapped, dict(input_ids=ids, labels=ids))
    finally:
        dist.destroy_process_group()
    gradients = FP32 * sum(p.numel() for p in model.parameters())
    assert measured.peak().live - plain.peak().live == gradients
    one = model_cost(from_config(config), eager.training(b, l), "pytorch-eager")
    two = model_cost(from_config(config), replace(eager.training(b, l), d=2), "pytorch-eager")
    assert peak_bytes(two, "pytorch-eager") - peak_bytes(one, "pytorch-eager") == gradients == one.gradient_bytes
    assert peak_bytes(two) - peak_bytes(one) == 0


LARGEST_CASES = [
    ("gpt2", dict(l=1024), 80 * 10**9),
    ("gpt2", dict(l=1024), 2 * 10**9),                  # one sequence does not fit: 0
    ("gpt2", dict(l=1024), 10**15),                     # millions of sequences: no cap at 2**16 any more
    ("gpt3-175b", dict(l=2048, m1=8, p=16, d=8, micro_batches=192), 80 * 10**9),
    ("gpt3-175b", dict(l=2048, m1=8, p=16, d=8, micro_batches=192, recompute="full"), 80 * 10**9),
    ("llama-2-7b", dict(l=4096, m1=2, s1=2, zero=3, d=8), 141 * 10**9),
]


@pytest.mark.parametrize("name, fields, capacity", LARGEST_CASES)
def test_the_largest_micro_batch_fits_and_one_more_does_not(name, fields, capacity):
    """The definition, checked with models built with the numbers: ``n`` fits and ``n + 1`` does
    not (0: one sequence does not fit)."""
    from symbolic_cost.models import Training
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.peak import largest_micro_batch
    fits = lambda n: peak_bytes(model_cost(preset(name), Training(b=n, **fields))) <= capacity  # noqa: E731
    n = largest_micro_batch(preset(name), Training(**fields), capacity)
    assert (n == 0 and not fits(1)) or (fits(n) and not fits(n + 1))


def test_a_peak_not_affine_in_the_micro_batch_is_bisected(monkeypatch):
    """A peak that grows as b² (patched in) defeats the guess from b = 1 and 2, which is then
    refused by the builds at the guess: the bisection finds the same ``n`` the definition gives."""
    from symbolic_cost.models import Training
    from symbolic_cost.models import peak
    from symbolic_cost.models.config import preset
    plain = peak.peak_bytes
    monkeypatch.setattr(peak, "peak_bytes", lambda cost, *rest: plain(cost, *rest) + 10**9 * cost.training.b ** 2)
    fits = lambda n: peak.peak_bytes(model_cost(preset("gpt2"), Training(b=n, l=1024))) <= 80 * 10**9  # noqa: E731
    n = peak.largest_micro_batch(preset("gpt2"), Training(l=1024), 80 * 10**9)
    assert n > 1 and fits(n) and not fits(n + 1)


def test_the_largest_micro_batch_is_not_capped():
    """One-token sequences of GPT-2 fit H100's 74.5 GiB by the hundred thousand: the answer is the
    micro-batch whose peak fits while one more does not (it used to stop at 65,536 and print that
    as the largest)."""
    from symbolic_cost.models import Training, model_cost
    from symbolic_cost.models.config import preset
    from symbolic_cost.models.peak import largest_micro_batch, peak_bytes
    capacity = 80_000_000_000
    n = largest_micro_batch(preset("gpt2"), Training(l=1), capacity)
    peak = lambda b: peak_bytes(model_cost(preset("gpt2"), Training(b=b, l=1)))     # noqa: E731
    assert n > 1 << 16 and peak(n) <= capacity < peak(n + 1)
    assert largest_micro_batch(preset("gpt2"), Training(l=1), capacity, limit=1000) == 1000
