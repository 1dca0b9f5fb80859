"""The peak of serving (``inference.peak``) against ``transformers``' own ``generate``, measured.

Small GPT-2 and Llama models (fp32, CPU, eager attention, evaluation mode) generate greedily
(``do_sample=False``, no end token, so every step runs) under the op-by-op live-storage tracker of
``tests/peak_memory.py``, which knows the parameters, buffers and prompt beforehand.

* With a large vocabulary and a short prompt the peak is the last decode step's fp32 copy of
  its logits (``_to_copy``): the weights, the cache of ``P + l_out - 1`` tokens, the step's
  logits, their new copy and the previous step's scores, which is ``decode sampling``.  What
  else is live is ``generate``'s own bookkeeping, int64 tensors of a few values per token and
  sequence (the ids, the attention mask, the positions, ``unfinished_sequences``): under
  ``16 b (P + l_out) + 512`` bytes, less than one sequence's logits or one layer's cache here,
  so a wrong term of either would show.
* With a long prompt and a small vocabulary the peak moves into the prefill's attention; the
  library's working set (hidden states plus the largest operation's input and output) leaves out
  eager's causal mask, rotary tables and ``repeat_kv`` copies, so its ``prefill`` moment is a
  lower bound there, checked as one.
"""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from peak_memory import LiveBytes  # noqa: E402

from symbolic_cost.inference import Serving  # noqa: E402
from symbolic_cost.inference.peak import peak_moment, serving_timeline  # noqa: E402
from symbolic_cost.models.config import from_config  # noqa: E402

QUIET = dict(bos_token_id=None, eos_token_id=None, pad_token_id=0)
GPT2 = dict(model_type="gpt2", n_layer=2, n_embd=64, n_head=4, vocab_size=32000, n_positions=256, **QUIET)
LLAMA = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=160, vocab_size=32000, max_position_embeddings=256, tie_word_embeddings=False,
             **QUIET)


def _generate(config, b, l_in, l_out):
    """The tracker after a greedy generation of ``l_out`` tokens, and the model."""
    conf = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation="eager").eval()
    ids = torch.randint(0, 1000, (b, l_in), generator=torch.Generator().manual_seed(0))
    mode = LiveBytes()
    mode.register(*model.parameters(), *model.buffers(), ids)
    with torch.no_grad(), mode:
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=l_out, do_sample=False)
    assert out.shape == (b, l_in + l_out)
    return mode, model


def _buffers(model) -> int:
    """Bytes of the buffers the model reads (the rotary ``inv_freq``), not weights."""
    return sum(x.numel() * x.element_size() for x in model.buffers())


def _moments(config, b, l_in, l_out):
    s = Serving(b=b, l_in=l_in, l_out=l_out, precision="fp32")
    return {m.name: m.bytes for m in serving_timeline(from_config(config), s, "pytorch-eager")}, s


@pytest.mark.parametrize("config", [GPT2, LLAMA], ids=["gpt2", "llama"])
@pytest.mark.parametrize("b, l_out", [(2, 3), (1, 4)])
def test_the_peak_is_the_last_steps_copy_of_its_logits(config, b, l_out):
    l_in = 8
    measured, model = _generate(config, b, l_in, l_out)
    moments, s = _moments(config, b, l_in, l_out)
    copies = [i for i, sample in enumerate(measured.samples) if sample.op == "aten._to_copy.default"
              and sample.live - measured.samples[i - 1].live == 4 * b * config["vocab_size"]]
    peak = measured.peak()
    assert len(copies) == l_out and measured.samples.index(peak) == copies[-1]
    assert peak_moment(from_config(config), s, "pytorch-eager").name == "decode sampling"
    bookkeeping = peak.live - _buffers(model) - moments["decode sampling"]
    assert 0 <= bookkeeping <= 16 * b * (l_in + l_out) + 512


@pytest.mark.parametrize("config", [GPT2, LLAMA], ids=["gpt2", "llama"])
def test_a_long_prompts_peak_is_in_the_prefill_and_the_library_a_lower_bound(config):
    b, l_in, l_out = 2, 128, 2
    config = dict(config, vocab_size=1000)
    measured, model = _generate(config, b, l_in, l_out)
    moments, _ = _moments(config, b, l_in, l_out)
    prefill_end = next(i for i, sample in enumerate(measured.samples) if sample.op == "aten._to_copy.default"
                       and sample.live - measured.samples[i - 1].live == 4 * b * 1000)
    assert measured.samples.index(measured.peak()) < prefill_end
    assert max(moments, key=moments.get) == "prefill"
    assert moments["prefill"] + _buffers(model) <= measured.peak().live



def test_inference_reports_the_peak_and_where_it_falls(capsys):
    """``inference --json``: ``peak_bytes`` is the largest of the moments it lists, with the
    weights and the final cache below it; the text names the moment."""
    import json
    from symbolic_cost.cli import main
    args = ["inference", "--preset", "llama-2-7b", "--set", "b=8", "l_in=2048", "l_out=256"]
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    moments = out["peak_moments"]
    assert list(moments) == ["prefill", "prefill sampling", "decode", "decode sampling"]
    assert out["peak_bytes"] == max(moments.values()) == moments[out["peak_at"]]
    assert out["weight_bytes"] + out["kv_cache_bytes"] < out["peak_bytes"]
    assert main(args) == 0
    assert f"at the {out['peak_at']} (prefill " in capsys.readouterr().out
