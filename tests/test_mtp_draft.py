"""The served model's own multi-token-prediction module as the draft of speculative decoding
(``inference.drafts.MtpDraft``; issue 63), and speculative verification of a latent-attention model.

Hand counts on DeepSeek-V3's published config.json (``tests/hf_configs/DeepSeek-V3.json``: width
7,168, 128 heads, query latent 1,536, key/value latent 512, 128 + 64 query/key dims and 128 value dims
a head, 256 routed experts and one shared of 2,048, one MTP module).
"""

from __future__ import annotations

import json
import pathlib

import pytest
from sympy import Rational

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.inference.drafts import MtpDraft, draft_decode, draft_weights
from symbolic_cost.inference.phases import decode
from symbolic_cost.inference.serving import Serving
from symbolic_cost.inference.speculative import Speculation, speculative_fields
from symbolic_cost.models import config

V3_PATH = pathlib.Path(__file__).parent / "hf_configs" / "DeepSeek-V3.json"
V3 = config.load(str(V3_PATH))
E = 7168


def test_the_module_weights_by_hand():
    """The module's own parameters: its layer (a layer like the last, an MoE one), ``eh_proj`` (2e x e)
    and its three norms; the word table and the head's matrix are the served model's.  The router's
    score-correction bias is a buffer, not a parameter, in DeepSeek-V3's model code (as in the served
    model's count).  DeepSeek's own figure is "11.5B unique parameters" (README_WEIGHTS.md)."""
    attention = 2 * E + E * 1536 + 1536 + 1536 * 128 * 192 + E * 576 + 512 + 512 * 128 * 256 + 128 * 128 * E
    experts = 256 * E + 256 * 3 * E * 2048 + 3 * E * 2048
    module = 3 * E + 2 * E * E
    assert draft_weights(MtpDraft(V3), Serving(b=1, l_in=8, l_out=2)) == 2 * (attention + experts + module)
    assert attention + experts + module == 11_610_067_968


def test_a_draft_step_is_the_module_at_one_token():
    """Four sequences, TP 8: the served model's last layer at one token over the same cache, after the
    two norms and ``eh_proj`` (4 rows of (1, 2e) x (2e, e/8): 4 x 896 x (2 x 14,336 - 1) FLOPs), then the
    served model's head."""
    s = Serving(b=4, l_in=64, l_out=8, m1=8, flash=True)
    step, served = draft_decode(MtpDraft(V3), s, 64), decode(V3, s, 64)
    layer = step.stack[1][0]
    assert layer.names[:3] == ["mtp_enorm", "mtp_hnorm", "mtp_eh_proj"]
    project = layer["mtp_eh_proj"]
    assert project.flops_fwd == 4 * (E // 8) * (2 * 2 * E - 1) and project.weights == 2 * E * (E // 8) * 2
    last = served.stack[-2][0]
    assert [(r.name, r.flops_fwd, r.weights) for r in layer.rows[3:]] == [(r.name, r.flops_fwd, r.weights)
                                                                          for r in last.rows]
    assert step.stack[-1][0].total("flops_fwd") == served.stack[-1][0].total("flops_fwd")


def test_latent_attention_verifies_several_tokens():
    """A verification of 3 tokens a sequence in the absorbed form: 4 sequences x 16 heads (TP 8) x 3
    tokens through each absorbed product, ``q_absorb`` (1, 128) x (128, 512): 192 x 512 x 255 FLOPs."""
    s = Serving(b=4, l_in=64, l_out=8, m1=8, flash=True)
    three = decode(V3, s, 64, tokens=3)
    assert three.layer["q_absorb"].flops_fwd == 4 * 16 * 3 * 512 * (2 * 128 - 1)
    assert three.layer["o_absorb"].flops_fwd == 4 * 16 * 3 * 128 * (2 * 512 - 1)


def test_speculation_with_the_module():
    s = Serving(b=4, l_in=64, l_out=8, m1=8, flash=True)
    got = speculative_fields(V3, s, Speculation(MtpDraft(V3), 2, Rational(1, 2)), "h200")
    assert got["tokens_per_step"] == Rational(7, 4)                      # 1 + 1/2 + 1/4
    assert got["step_s"] == 2 * got["draft_step_s"] + got["verify_s"]


def test_a_model_without_the_module_is_refused(capsys):
    with pytest.raises(InputError, match="no multi-token-prediction module"):
        MtpDraft(config.preset("llama-2-7b"))
    assert main(["inference", "--preset", "llama-2-7b", "--speculative", "2", "--acceptance", "0.5",
                 "--draft-mtp"]) == 2
    assert "no multi-token-prediction module" in capsys.readouterr().err


def test_the_command_line(capsys):
    assert main(["inference", "--hf-config", str(V3_PATH), "--set", "m1=8", "b=4", "l_in=64", "l_out=8",
                 "--system", "h200", "--speculative", "2", "--acceptance", "0.5", "--draft-mtp", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["speculative"]
    assert got["draft"] == "DeepSeek-V3's MTP module" and got["tokens_per_step"] == 1.75


def test_a_symbolic_depth_does_not_name_the_last_layer():
    from dataclasses import replace
    from sympy import Symbol
    with pytest.raises(InputError, match="symbolic depth"):
        MtpDraft(replace(V3, n_layers=Symbol("n", positive=True, integer=True)))
