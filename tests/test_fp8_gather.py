"""FSDP all-gathers of FP8 weights (``fp8_gather``; torchtitan's ``enable_fsdp_float8_all_gather``).

By hand for GPT-2 (124,439,808 parameters; the weight matrices of its 12 layers' products, qkv
768 x 2304, o 768 x 768, fc1 768 x 3072, fc2 3072 x 768: 84,934,656 elements) under ZeRO-3 over 8
ranks: a 16-bit gather moves 2 bytes a parameter, 248,879,616 a rank's buffer; in FP8 the matrices
move one byte each, 248,879,616 - 84,934,656 = 163,944,960; the gradients' reduce-scatter is
unchanged.
"""

import pytest

from symbolic_cost.checks import InputError
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.config import preset

GPT2 = preset("gpt2")
FSDP = dict(b=4, l=1024, d=8, zero=3, precision="bf16", fp8="tensorwise")


def _data(**kw):
    cost = model_cost(GPT2, Training(**FSDP, **kw))
    return sorted((c.kind, c.pass_, c.elements * c.element_bytes) for dim, c in cost.collectives if dim == "data")


def test_the_matrices_are_gathered_at_one_byte():
    assert _data() == [("allgather", "bwd", 248_879_616), ("allgather", "fwd", 248_879_616),
                       ("reducescatter", "bwd", 248_879_616)]
    assert _data(fp8_gather=True) == [("allgather", "bwd", 163_944_960), ("allgather", "fwd", 163_944_960),
                                      ("reducescatter", "bwd", 248_879_616)]


@pytest.mark.parametrize("kw, words", [
    (dict(zero=1, fp8="tensorwise"), "zero=3"),
    (dict(zero=3, fp8="mxfp8"), "one scale a tensor"),
    (dict(zero=3, fp8=None), "one scale a tensor"),
])
def test_where_it_does_not_apply_it_is_refused(kw, words):
    with pytest.raises(InputError, match=words):
        Training(b=1, l=16, d=8, precision="bf16", fp8_gather=True, **kw)
