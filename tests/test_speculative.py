"""Speculative decoding (``inference.speculative``) against oracles written apart from it:

* the tokens a step yields against a Monte-Carlo run of the acceptance rule (each of the ``k``
  proposals accepted with probability ``alpha`` until the first rejection, then one token of the
  served model's own), and the closed form's ends by hand (one token at ``alpha = 0``, ``k + 1`` at 1);
* the verification step's matrix FLOPs against PyTorch's ``FlopCounterMode`` around a
  ``transformers`` Llama's forward over ``q`` new tokens a sequence after a cache of ``l_ctx``
  (the same forward a speculative decoder's verification runs), in ``tests/test_inference_hf.py``'s
  eager configuration;
* the step's composition by hand: ``k`` draft steps and one verification, ``TPOT = step / E``.
"""

from __future__ import annotations

import random

import pytest
from sympy import Rational

from symbolic_cost.checks import InputError
from symbolic_cost.inference import Serving, decode
from symbolic_cost.inference.speculative import Speculation, expected_tokens, speculative_fields
from symbolic_cost.inference.throughput import phase_time
from symbolic_cost.models.config import from_config

LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=40, num_attention_heads=4,
             num_key_value_heads=2, head_dim=10, intermediate_size=48, num_hidden_layers=2, vocab_size=64,
             max_position_embeddings=64)
DRAFT = dict(LLAMA, num_hidden_layers=1, intermediate_size=24)


def simulated_tokens(k: int, alpha: float, steps: int, seed: int) -> float:
    """Mean tokens a step over ``steps`` simulated steps: proposals accepted in turn while a uniform draw
    falls under ``alpha``, plus the served model's own token (its correction or its bonus)."""
    rng, total = random.Random(seed), 0
    for _ in range(steps):
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        total += accepted + 1
    return total / steps


@pytest.mark.parametrize("k, alpha", [(1, Rational(1, 2)), (3, Rational(7, 10)), (5, Rational(9, 10)),
                                      (8, Rational(1, 4))])
def test_tokens_a_step_match_a_simulation_of_the_acceptance_rule(k, alpha):
    expected = float(expected_tokens(k, alpha))
    assert abs(simulated_tokens(k, float(alpha), 200_000, seed=k) - expected) < 0.02


def test_tokens_a_step_at_the_ends():
    assert expected_tokens(4, 0) == 1 and expected_tokens(4, 1) == 5
    assert expected_tokens(2, Rational(1, 2)) == 1 + Rational(1, 2) + Rational(1, 4)     # 1 + a + a^2


def test_step_is_k_drafts_and_one_verification():
    """b 2, 8 prompt tokens, 6 generated: the verification of k + 1 = 4 tokens at the mean context (the first
    step over 8 cached tokens, the last over 8 + 6 - 2 = 12, each at half weight); the draft's steps over
    8 and 8 + 6 + 3 - 3 = 14; TPOT = (3 draft + verify) / E."""
    target, draft = from_config(LLAMA, "target"), from_config(DRAFT, "draft")
    s = Serving(b=2, l_in=8, l_out=6)
    alpha = Rational(3, 5)
    got = speculative_fields(target, s, Speculation(draft, 3, alpha), "h100")
    at = lambda arch, ctx, q=1: phase_time(decode(arch, s, ctx, tokens=q), "h100")["total"]  # noqa: E731
    verify = (at(target, 8, 4) + at(target, 12, 4)) / 2
    drafting = (at(draft, 8) + at(draft, 14)) / 2
    tokens = (1 - alpha ** 4) / (1 - alpha)
    assert got["verify_s"] == verify and got["draft_step_s"] == drafting
    assert got["tpot_s"] == (3 * drafting + verify) / tokens
    assert got["tokens_per_s"] == 2 * tokens / (3 * drafting + verify)


def test_refusals():
    target = from_config(LLAMA, "target")
    with pytest.raises(InputError, match="vocabulary"):
        speculative_fields(target, Serving(b=1, l_in=8, l_out=4),
                           Speculation(from_config(dict(DRAFT, vocab_size=32), "d"), 2, Rational(1, 2)))
    for k, alpha, name in ((0, Rational(1, 2), "k"), (2, Rational(3, 2), "acceptance"), (2, 0.5, "acceptance")):
        with pytest.raises(InputError, match=name):
            Speculation(target, k, alpha)
    with pytest.raises(InputError, match="one pipeline stage"):
        speculative_fields(target, Serving(b=1, l_in=8, l_out=4, p=2), Speculation(target, 2, Rational(1, 2)))


def test_verification_matrix_flops_equal_flop_counter():
    """transformers' Llama after a cache of 7 tokens, fed q = 4 more a sequence in one forward (logits at every
    position), under FlopCounterMode: the library's verification step of 4 tokens over l_ctx = 7."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    from tests.test_inference_hf import EAGER, hf_model, products
    model, b, cached, q = hf_model(LLAMA), 2, 7, 4
    ids = torch.randint(3, 60, (b, cached + q))
    with torch.no_grad():
        past = model(ids[:, :cached], use_cache=True).past_key_values
        with FlopCounterMode(display=False) as counter:
            model(ids[:, cached:], past_key_values=past, use_cache=True)
    arch = from_config(LLAMA, "llama")
    assert products(decode(arch, Serving(b=b, l_in=cached, l_out=q, precision="fp32"), cached, EAGER, tokens=q)) \
        == counter.get_total_flops()


def test_inference_command_reports_it(tmp_path, capsys):
    """``inference --speculative K --acceptance A --draft-hf-config``: the JSON's speculative fields are the
    library's (the same configuration through ``speculative_fields``); refused in part and beside a load test."""
    import json
    from symbolic_cost.cli import main
    from symbolic_cost.timing.hardware import calibrated
    target, draft = tmp_path / "target.json", tmp_path / "draft.json"
    target.write_text(json.dumps(LLAMA))
    draft.write_text(json.dumps(DRAFT))
    words = ["inference", "--hf-config", str(target), "--set", "b=2", "l_in=8", "l_out=6", "--speculative", "3",
             "--acceptance", "0.6", "--draft-hf-config", str(draft)]
    assert main([*words, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["speculative"]
    expected = speculative_fields(from_config(LLAMA, "t"), Serving(b=2, l_in=8, l_out=6),
                                  Speculation(from_config(DRAFT, "d"), 3, Rational(3, 5)), calibrated("h100"))
    assert got["k"] == 3 and got["tokens_per_step"] == pytest.approx(float(expected["tokens_per_step"]))
    assert got["tpot_s"] == pytest.approx(float(expected["tpot_s"]), rel=1e-12)
    assert main(words) == 0 and "speculative decoding: 3 tokens a step" in capsys.readouterr().out
    assert main(words[:-2]) == 2 and "a draft (--draft-preset" in capsys.readouterr().err
    assert main([*words, "--grid", "b=1,2"]) == 2 and "--grid does not model it" in capsys.readouterr().err
    assert main([*words, "--rate", "2", "--requests", "20", "--json"]) == 0
    load = json.loads(capsys.readouterr().out)["load"]
    assert load["speculative"]["tokens_per_step"] == pytest.approx(float(expected_tokens(3, Rational(3, 5))))
    assert main([*words, "--rate", "2", "--engine", "vllm"]) == 2 and "--kv-allocation reserve" in \
        capsys.readouterr().err
    assert main([*words, "--rate", "2", "--disaggregate", "1:1"]) == 2 and "in disaggregated pools is not modelled" \
        in capsys.readouterr().err


def test_a_request_under_load_takes_its_first_token_and_o_minus_one_over_e_steps():
    """1 s a step, E = 5/2 tokens a decode step: 11 tokens take the prefill's step and ceil(10 / 2.5) = 4
    decode steps (first token at 1 s, the last at 5 s), each step a gap of 1 / 2.5 s a token; 12 tokens
    take ceil(11 / 2.5) = 5 (done at 6 s).  The 11 output tokens over the 5 s are the throughput."""
    from serving_steps import NO_OVERHEAD, Constant
    from symbolic_cost.inference.load import serve
    step = Constant(1.0)
    step.tokens_per_step = Rational(5, 2)
    load = serve(step, 11, None, 1, NO_OVERHEAD)
    assert (load.mean_ttft, load.mean_e2e, load.mean_itl, load.output_token_throughput) == (1.0, 5.0, 0.4, 2.2)
    assert serve(step, 12, None, 1, NO_OVERHEAD).mean_e2e == 6.0


def test_a_speculative_engine_step_is_k_drafts_and_one_verification():
    """The load test's decode step under speculation, by hand from the phases: ``k = 3`` draft steps, over
    the context and the step's proposals so far (0, 1 and 2 more tokens: the mean of the first and the
    last, the draft's cost being linear in its context), and the served model's
    verification of 4 tokens; the step's context is ``P`` plus E tokens for each step run (E = 15/8 at
    alpha = 1/2: 8 steps are 15 tokens); the prefill adds the draft's prefill."""
    from symbolic_cost import conventions as conv
    from symbolic_cost.inference import prefill
    from symbolic_cost.inference.load import StepModel
    from symbolic_cost.inference.throughput import calibrated_run
    from symbolic_cost.timing.hardware import calibrated
    target, draft = from_config(LLAMA, "t"), from_config(DRAFT, "d")
    serving = Serving(b=1, l_in=8, l_out=6)
    step = StepModel(target, serving, "h100", speculation=Speculation(draft, 3, Rational(1, 2)))
    system = calibrated("h100")

    def run(phase):
        return float(calibrated_run(phase, system, conv.DEFAULT)[2])
    b4 = Serving(b=4, l_in=8, l_out=2)
    drafts = 3 * (run(decode(draft, b4, 8 + 15)) + run(decode(draft, b4, 8 + 15 + 2))) / 2
    by_hand = drafts + run(decode(target, b4, 8 + 15, tokens=4))
    assert step(0, 4, 8 + 8) == pytest.approx(by_hand, rel=1e-12)
    two = Serving(b=2, l_in=8, l_out=2)
    assert step(2, 0, 0.0) == pytest.approx(run(prefill(target, two)) + run(prefill(draft, two)), rel=1e-12)
    assert step.tokens_per_step == Rational(15, 8) and step.extra_tokens == 3


def test_a_draft_that_does_not_fit_beside_the_model_is_refused(capsys):
    """A fuzz of the command line: Llama-3-70B drafting for Llama-3-8B on one H100 reported the
    8B's peak (15 GiB) and a largest batch of 554, while its own line said the draft took 131.6 GiB
    a device: 70.55e9 parameters x 2 bytes alone are 141 GB, past the 80 GB of memory."""
    from symbolic_cost.cli import main
    assert main(["inference", "--preset", "llama-3-8b", "--speculative", "4", "--acceptance", "0.7",
                 "--draft-preset", "llama-3-70b"]) == 2
    err = capsys.readouterr().err
    assert "the draft llama-3-70b holds 131.6 GiB a device" in err and "a smaller draft" in err


def _inference_json(capsys, *words):
    import json
    from symbolic_cost.cli import main
    assert main(["inference", "--preset", "llama-3-70b", "--system", "h100", "--json", *words]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_largest_batch_holds_the_drafts_weights_and_cache_beside_the_model(capsys):
    """Llama-3-70B on 4 tensor ranks with Llama-3-8B drafting 4 tokens: the largest batch is the
    last for which every moment of the served model (the report's own ``peak_moments`` at that
    batch) plus the draft's bytes then fits, where the draft's bytes are counted by hand from its
    published shape (Llama 3 8B: 32 layers, e 4096, 8 of 32 heads of 128 for K and V, MLP 14,336,
    vocabulary 128,256; bf16): its tensor-parallel quarter of every matrix and both tables, whole
    norms, and a cache of ``2 x 32 x 2 x 128`` values a token on a rank, for the prompt's 2,000
    tokens while the prompt is read, ``l_in + l_out - 1 + k`` a sequence while decoding."""
    e, f, v, layers, q, kv, m1, k = 4096, 14336, 128256, 32, 128, 8, 4, 4
    layer = (2 * e * e + 2 * e * kv * q + 3 * e * f) // m1 + 2 * e
    weights = 2 * (2 * v * e // m1 + layers * layer + e)
    a_token = 2 * (2 * layers * (kv // m1) * q)
    reading, decoding = 2000, 2000 + 500 - 1 + k
    tokens = {"prefill": reading, "prefill sampling": reading, "decode": decoding, "decode sampling": decoding}
    shape = ["--set", "m1=4", "l_in=2000", "l_out=500"]
    spec = ["--speculative", str(k), "--acceptance", "0.7", "--draft-preset", "llama-3-8b"]
    got = _inference_json(capsys, *shape, "b=8", *spec)
    assert got["speculative"]["draft_bytes"] == weights + 8 * a_token * tokens["decode"]
    n, capacity = got["max_batch"], got["capacity_bytes"]
    alone = _inference_json(capsys, *shape, "b=8")["max_batch"]

    def held(b):
        moments = _inference_json(capsys, *shape, f"b={b}")["peak_moments"]
        return max(bytes_ + weights + b * a_token * tokens[name] for name, bytes_ in moments.items())
    assert held(n) <= capacity < held(n + 1)
    assert n < alone


def test_a_prefill_runs_no_draft_decodes():
    """On 2 tensor ranks, a step that only prefills is the served model's prefill (its products
    and its tensor collectives, for the prompt's tokens) plus the draft's prefill, whatever ``k``:
    the ``k`` draft decodes and the ``k + 1`` tokens a sequence verifies belong to the steps that
    decode.  Under load the draft's kernel launches follow the same rule, so a lone request's
    time to first token does not grow with ``k``."""
    from symbolic_cost import conventions as conv
    from symbolic_cost.inference import prefill
    from symbolic_cost.inference.load import StepModel, serve
    from symbolic_cost.inference.throughput import calibrated_run
    from symbolic_cost.timing.hardware import calibrated
    target, draft = from_config(LLAMA, "t"), from_config(DRAFT, "d")
    serving = Serving(b=1, l_in=8, l_out=6, m1=2)
    plain = StepModel(target, serving, "h100")
    reading = float(calibrated_run(prefill(draft, serving), calibrated("h100"), conv.DEFAULT)[2])
    firsts = set()
    for k in (1, 8):
        step = StepModel(target, serving, "h100", speculation=Speculation(draft, k, Rational(1, 2)))
        assert step(1, 0, 0.0) == pytest.approx(plain(1, 0, 0.0) + reading, rel=1e-12)
        firsts.add(serve(step, 6, 0.01, requests=3).mean_ttft)
    assert len(firsts) == 1


def test_a_dense_draft_runs_beside_an_expert_parallel_target(capsys):
    """Engines run a dense draft beside a target whose experts are split over ``ep`` ranks: the
    draft takes the tensor ranks only (it was refused, "Qwen3-0.6B has none"), so its weights on a
    device are those of the same draft beside a target without expert parallelism."""
    import json
    from pathlib import Path
    from symbolic_cost.cli import main
    from symbolic_cost.inference.drafts import draft_weights
    configs = Path(__file__).parent / "hf_configs"
    draft = from_config(json.loads((configs / "Qwen3-0.6B.json").read_text()))
    assert draft_weights(draft, Serving(m1=4, ep=4)) == draft_weights(draft, Serving(m1=4))
    assert main(["inference", "--hf-config", str(configs / "Qwen3-30B-A3B.json"), "--set", "m1=4", "ep=4",
                 "--speculative", "2", "--acceptance", "0.8", "--draft-hf-config", str(configs / "Qwen3-0.6B.json"),
                 "--system", "h100"]) == 0
    assert "speculative decoding: 2 tokens a step from Qwen3-0.6B" in capsys.readouterr().out
