"""SGLang's scheduler under load (``inference.estimated``), on cases worked by hand from its rules.

Every step here lasts one second whatever it runs (a constant step model), so each expected time
is a count of rounds.  The rules (``sgl-project/sglang``, ``python/sglang/srt/managers``): a waiting
request is admitted while its prompt plus its whole output stays below the free KV slots less 0.7
(the starting ratio, falling by (0.7 - 0.098)/600 a decode step) of what each decoding request
may still write; a round prefills whatever it admits before any decode; a decode short of slots
retracts the request with the fewest generated tokens, which prefills its prompt and its tokens
again later.
"""

from __future__ import annotations

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.inference import engines, estimated
from symbolic_cost.inference.load import Runtime

RUNTIME = Runtime(max_batch=100, max_tokens=100, block_tokens=1, chunked=True, allocation="estimate",
                  step_overhead=0, request_overhead=0, kernel_overhead=0)


class OneSecond:
    """A step model whose every step lasts one second, over prompts of ``prompt`` tokens."""

    def __init__(self, prompt: int):
        self.prompt = prompt

    def __call__(self, prompts, decoding, context):
        return 1.0


def _run(prompt, output, arrivals, slots, runtime=RUNTIME):
    n = len(arrivals)
    first, finished, gaps, last = estimated.steps(OneSecond(prompt), [output] * n, arrivals, runtime, 0.0, slots, None,
                                                  [prompt] * n)
    return first, finished, sorted((g for g in gaps if g[1]), reverse=True), last


def test_two_fit_the_third_waits():
    """20 slots, requests of 4 + 4 tokens: the first two fit (8 < 20, 8 < 12); the third does not
    (8 >= 4), nor while the two decode (12 - 0.7 x 6, 10 - 0.699 x 4, 8 - 0.698 x 2 are all
    below 8); both finish after 3 decodes (t = 4) and free 7 slots each; the third then runs alone."""
    first, finished, _, last = _run(4, 4, [0.0, 0.0, 0.0], 20)
    assert (first, finished, last) == ([1.0, 1.0, 5.0], [4.0, 4.0, 8.0], 8.0)


def test_prefill_before_decode_stalls_the_decoding():
    """A request arriving while another decodes is prefilled in a round of its own: the decoding
    one waits for it, a gap of two seconds (t = 2 to 4)."""
    first, finished, gaps, _ = _run(4, 4, [0.0, 1.5], 1000)
    assert (first, finished) == ([1.0, 3.0], [5.0, 6.0])
    assert gaps[0] == (2.0, 1) and sum(count for _, count in gaps) == 2 * 3


def test_the_estimate_admits_more_and_retracts_when_short():
    """30 slots, requests of 2 + 10 tokens (a reservation would hold two).  Round 1 admits two
    (12 < 30, 12 < 18); round 2 the third, as 26 - 0.7 x (9 + 9) = 13.4 exceeds 12.  After eight
    decodes of three (t = 10) no slot is left: the third (started last, fewest tokens: all have 9,
    the latest admitted goes) is retracted, freeing its 2 + 9 - 1 = 10 slots.  The two finish at
    t = 11; the third prefills its 11 tokens again at t = 12, which yields its tenth and last token,
    two seconds after its ninth."""
    first, finished, gaps, last = _run(2, 10, [0.0, 0.0, 0.0], 30)
    assert (first, finished, last) == ([1.0, 1.0, 2.0], [11.0, 11.0, 12.0], 12.0)
    assert (2.0, 1) in gaps and (2.0, 2) in gaps
    assert sum(count for _, count in gaps) == 3 * 9


def test_the_ratio_after_a_retraction():
    """The ratio the retraction leaves: (tokens generated + 20 x requests) / tokens asked, at most 1
    (here 2 requests of 9 tokens, 10 asked each: (18 + 40) / 20, so 1); a decode without one
    decays it by (0.7 - 0.098) / 600 to at least 0.098."""
    engine = estimated.Scheduler([0.0, 0.0, 0.0], RUNTIME, 30, [10] * 3, [2] * 3)
    engine.ratio = 0.2
    for request in range(3):
        engine.running.add(request, -8)            # nine tokens each, at decode step 0
    engine.free = 2
    assert engine.retract() and engine.ratio == 1.0 and len(engine.running) == 2
    assert engine.waiting[0] == (2, 9)
    engine.ratio = 0.0981
    assert not engine.retract() and engine.ratio == pytest.approx(0.7 * 0.14)


def test_a_request_that_never_fits_is_refused():
    with pytest.raises(InputError, match="never fits"):
        _run(20, 10, [0.0], 30)


def test_sglang_profile_admits_by_the_estimate():
    assert engines.runtime("sglang", None, "h100", 1, 8192).allocation == "estimate"


@pytest.mark.parametrize("output, expected", [(10, 10_000 - 9 * 0.7), (5000, 10_000 - 4096 * 0.7)])
def test_what_a_running_request_is_charged(output, expected):
    """One request with one token of ``output``: charged 0.7 of the tokens it may still write,
    at most SGLang's 4,096 (``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``)."""
    engine = estimated.Scheduler([0.0], RUNTIME, 10_000, [output], [2])
    engine.running.add(0, 0)
    assert engine.remaining_estimate() == pytest.approx(expected)
