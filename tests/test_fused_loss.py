"""Liger-Kernel's fused linear cross-entropy (``Training.fused_loss``, ``ops.fused_linear_cross_entropy``)
against what its algorithm does, and the readers that switch it on.

The oracle is the algorithm of ``LigerFusedLinearCrossEntropyFunction`` (Liger-Kernel 0.8.5,
``ops/fused_linear_cross_entropy.py``) written here as a PyTorch autograd function: the tokens cut
into chunks of ``next_power_of_2(cdiv(T, cdiv(V, H)))``, each chunk's logits made, their softmax
minus the one-hot written over them, then ``dX = dZ W`` and ``dW += dZ^T X``, both gradients saved
for the backward, which only hands them on.  ``FlopCounterMode`` counts its products, autograd's
``saved_tensors_hooks`` what it keeps, and the largest chunk of logits is what it holds at once.
"""

import json
import pathlib

import pytest
from hypothesis import given, settings, strategies as st

from symbolic_cost import conventions as conv
from symbolic_cost.cli import main
from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset
from symbolic_cost.ops.embedding import flce_chunk, fused_linear_cross_entropy

HERE = pathlib.Path(__file__).resolve().parent
INPUTS = HERE / "framework_inputs"


def _liger_chunk(tokens: int, width: int, vocab: int) -> int:
    """Liger's chunk, as its code computes it (``triton.cdiv``, ``triton.next_power_of_2``)."""
    inc = -(-vocab // width)
    share = -(-tokens // inc)
    return min(1 << (share - 1).bit_length(), tokens)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 70000), st.integers(1, 8192), st.integers(2, 300000))
def test_the_chunk_is_liger_s(tokens, width, vocab):
    assert flce_chunk(tokens, width, vocab) == _liger_chunk(tokens, width, vocab)


def _flce(torch, largest: list):
    """The fused linear cross-entropy as Liger's autograd function runs it (see the module docstring);
    ``largest`` gets the bytes of each chunk's logits."""

    class Fused(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, target):
            tokens, width = x.shape
            chunk = _liger_chunk(tokens, width, weight.shape[0])
            grad_x, grad_w = torch.zeros_like(x), torch.zeros_like(weight)
            loss = x.new_zeros(())
            for start in range(0, tokens, chunk):
                logits = x[start:start + chunk] @ weight.t()
                largest.append(logits.numel() * logits.element_size())
                rows = torch.arange(logits.shape[0])
                lse = torch.logsumexp(logits, dim=-1)
                loss += (lse - logits[rows, target[start:start + chunk]]).sum() / tokens
                logits = torch.softmax(logits, dim=-1)       # the gradient, written over the logits
                logits[rows, target[start:start + chunk]] -= 1
                logits /= tokens
                grad_x[start:start + chunk] = logits @ weight
                grad_w += logits.t() @ x[start:start + chunk]
            ctx.save_for_backward(grad_x, grad_w)
            return loss

        @staticmethod
        def backward(ctx, grad_output):
            grad_x, grad_w = ctx.saved_tensors
            return grad_x * grad_output, grad_w * grad_output, None

    return Fused


def test_the_row_counts_what_the_algorithm_runs_and_keeps():
    """64 tokens of width 32 over 1,000 words: FlopCounterMode's products (``2mnk``) all in the
    forward, none in the backward; the bytes saved for backward (dX and dW, fp32 on the CPU); the
    largest chunk of logits alive; and the gradients equal autograd's of the plain head and loss."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    tokens, width, vocab = 64, 32, 1000
    x = torch.randn(tokens, width, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(vocab, width, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, vocab, (tokens,))
    saved, chunks = [], []
    with FlopCounterMode(display=False) as forward:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            loss = _flce(torch, chunks).apply(x, weight, target)
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    ours = fused_linear_cross_entropy(1, tokens, width, vocab, es=8, conventions=conv.DEFAULT.but(matmul_flops="2mnk"))
    products = ours.flops_fwd - _loss_arithmetic(tokens, vocab)
    assert (forward.get_total_flops(), backward.get_total_flops()) == (products, ours.flops_bwd) == (6 * 64 * 32 * 1000, 0)
    assert sum(t.numel() * t.element_size() for t in saved) == ours.act_buffer
    kept = model_cost(preset("llama-3-8b"), Training(b=1, l=64, fused_loss=True)).head["lm_head"]
    assert kept.act_buffer == (64 + 128256) * 4096 * 2          # dX and dW, bf16
    assert ours.act_out == max(chunks) and len(chunks) > 1
    plain_x, plain_w = x.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_()
    torch.nn.functional.cross_entropy(plain_x @ plain_w.t(), target).backward()
    assert torch.allclose(x.grad, plain_x.grad) and torch.allclose(weight.grad, plain_w.grad)


def _loss_arithmetic(tokens, vocab):
    """The cross-entropy's forward and backward arithmetic (``ops.cross_entropy``'s docstring: forward
    ``2n + 2r(v - 1) + 3r``, backward ``3n + r``, ``n = r v``), counted by hand."""
    n = tokens * vocab
    return 2 * n + 2 * tokens * (vocab - 1) + 3 * tokens + 3 * n + tokens


def test_the_kept_activations_drop_by_the_logits():
    """Llama-3-8B, b=2, l=8192, flash, bf16: the plain head keeps its input (T e, 16-bit) and the
    loss its fp32 logits (T v); the fused one keeps dX (T e) and dW (v e), 16-bit: the difference by
    hand, T = 16,384."""
    arch, tokens, e, v = preset("llama-3-8b"), 16384, 4096, 128256
    plain = model_cost(arch, Training(b=2, l=8192, flash=True))
    fused = model_cost(arch, Training(b=2, l=8192, flash=True, fused_loss=True))
    assert plain.activation_bytes - fused.activation_bytes == tokens * v * 4 + tokens * e * 2 - (tokens + v) * e * 2


@pytest.mark.parametrize("change, said", [
    (dict(loss_chunks=4), "loss_chunks=4 beside it"),
    (dict(m1=2), "a vocabulary split over m1 tensor ranks"),
])
def test_what_the_fused_loss_does_not_run_is_refused(change, said):
    with pytest.raises(InputError, match=said):
        model_cost(preset("llama-3-8b"), Training(b=1, l=1024, fused_loss=True, **change))


def _json(capsys, *words):
    assert main(["summary", *words, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_command_line_option_is_the_training_field(capsys):
    got = _json(capsys, "--preset", "llama-3-8b", "--set", "b=1", "l=2048", "--flash", "--fused-loss")
    plain = _json(capsys, "--preset", "llama-3-8b", "--set", "b=1", "l=2048", "--flash")
    assert got["layout"]["fused_loss"] and not plain["layout"]["fused_loss"]
    assert plain["activation_bytes"] - got["activation_bytes"] == 2048 * 128256 * 4 + 2048 * 4096 * 2 - \
        (2048 + 128256) * 4096 * 2


def _recipe(tmp_path, **fields):
    lines = ["per_device_train_batch_size: 1", "max_length: 1024", "attn_implementation: flash_attention_2"]
    lines += [f"{k}: {json.dumps(v)}" for k, v in fields.items()]
    (tmp_path / "recipe.yaml").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "recipe.yaml")


def test_use_liger_kernel_by_model_type_and_trainer(tmp_path, capsys):
    """transformers' Trainer patches Liger into the model types Liger lists: a Llama's SFT step runs
    the fused loss; GPT-2's is untouched (noted); ORPO reads the logits (no fused loss, noted); DPO's
    trainer swaps in Liger's DPO loss (refused); liger_kernel_config can turn the fused loss off."""
    recipe = _recipe(tmp_path, use_liger_kernel=True)
    llama = _json(capsys, "--preset", "llama-3-8b", "--hf-training-args", recipe)
    assert llama["layout"]["fused_loss"]
    gpt2 = _json(capsys, "--preset", "gpt2", "--hf-training-args", recipe)
    assert not gpt2["layout"]["fused_loss"] and any("model type gpt2" in n for n in gpt2["notes"])
    orpo = _json(capsys, "--preset", "llama-3-8b", "--hf-training-args", recipe, "--trl-trainer", "orpo")
    assert not orpo["layout"]["fused_loss"] and any("scores its pairs from the logits" in n for n in orpo["notes"])
    assert main(["summary", "--preset", "llama-3-8b", "--hf-training-args", recipe, "--trl-trainer", "dpo"]) == 2
    assert "LigerFusedLinearDPOLoss" in capsys.readouterr().err
    off = _recipe(tmp_path, use_liger_kernel=True, liger_kernel_config={"fused_linear_cross_entropy": False})
    assert not _json(capsys, "--preset", "llama-3-8b", "--hf-training-args", off)["layout"]["fused_loss"]
    older = _recipe(tmp_path, use_liger=True)                 # TRL's SFTConfig name before use_liger_kernel
    assert _json(capsys, "--preset", "llama-3-8b", "--hf-training-args", older)["layout"]["fused_loss"]


def test_the_handbook_s_smollm3_recipe_runs_the_fused_loss(capsys):
    """The alignment handbook's SmolLM3 SFT recipe (recipes/smollm3/sft/sft.yaml) turns Liger on for a
    SmolLM3 (model type smollm3, which Liger patches): the fused loss."""
    got = _json(capsys, "--hf-config", str(HERE / "hf_configs" / "SmolLM3-3B.json"), "--hf-training-args",
                str(INPUTS / "handbook_smollm3_sft.yaml"), "--devices", "8")
    assert got["layout"]["fused_loss"] and got["layout"]["l"] == 65536


def test_llamafactory_s_switch_follows_its_stage(capsys, tmp_path):
    """LLaMA-Factory's enable_liger_kernel: the fused loss at stage sft; at dpo its trainer needs the
    logits, so LLaMA-Factory asks for Liger's plain cross-entropy kernel instead (noted)."""
    text = (INPUTS / "llamafactory_qwen3_full_sft.yaml").read_text() + "enable_liger_kernel: true\n"
    model = ["--hf-config", str(HERE / "hf_configs" / "Qwen3-0.6B.json"), "--deepspeed",
             str(INPUTS / "llamafactory_ds_z3_config.json"), "--devices", "8"]
    for stage, fused in (("sft", True), ("dpo", False)):
        (tmp_path / "lf.yaml").write_text(text.replace("stage: sft", f"stage: {stage}"))
        got = _json(capsys, *model, "--hf-training-args", str(tmp_path / "lf.yaml"))
        assert got["layout"]["fused_loss"] is fused


def test_a_search_over_tensor_degrees_refuses_the_fused_loss(capsys):
    """The search varies m1; the fused loss runs the whole vocabulary on one device: refused by name,
    from the command line and from Python."""
    from symbolic_cost.numeric.search import search
    with pytest.raises(InputError, match="policy fused_loss"):
        search(preset("llama-3-8b"), 8, global_batch=64, seq=4096, policy={"fused_loss": True})
    assert main(["search", "--preset", "llama-3-8b", "--devices", "8", "--global-batch", "64", "--seq", "4096",
                 "--fused-loss"]) == 2
    assert "--fused-loss" in capsys.readouterr().err
