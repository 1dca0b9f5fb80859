"""The MoE all-to-all overlap of Megatron-Bridge's measured rows, as the workloads that ran them set
it: Megatron-Bridge v0.4.2's ``scripts/performance/configs`` (the release whose performance summary
prints the 26.04.01 container's rows), each value below read by hand at that tag
(c810129341a84e58f4cbed3093f70668a088c028), with the lines that set it."""

import pytest

from symbolic_cost.reproduce import measured

ROWS = {
    # deepseek_workload_base_configs.py:72-84 (GB200_V1: moe_a2a_overlap=False), 161-170 (V2: batch only)
    "mbridge-26.04.01-pre-training-DeepSeekV3-DGX-GB200-MXFP8-256-gbs4096-primary": False,
    # deepseek_workload_base_configs.py:203-214 (B200_FP8_MX_V2: deepep, PP 8, VP 2, EP 32, moe_a2a_overlap=True)
    "mbridge-26.04.01-pre-training-DeepSeekV3-DGX-B200-MXFP8-256-gbs4096-primary": True,
    # qwen3_workload_base_configs.py:396-409 (B200_FP8_MX_V1 is B200_BF16_V1, which never sets it) and
    # utils/utils.py:62 (moe_a2a_overlap: Optional[bool] = False)
    "mbridge-26.04.01-pre-training-Qwen3_30B_a3B-DGX-B200-MXFP8-8-gbs512-primary": False,
    # gpt_oss_workload_base_configs.py:102-106 (GB200_BF16_V2: global batch 1280, moe_a2a_overlap=True)
    "mbridge-26.04.01-pre-training-GPTOSS120B-DGX-GB200-BF16-64-gbs1280-primary": True,
}


@pytest.mark.parametrize("row_id, overlapped", ROWS.items(), ids=[r.split("training-")[1][:30] for r in ROWS])
def test_a_rows_moe_overlap_is_its_workloads(row_id, overlapped):
    case = next(c for c in measured.cases() if c.id == row_id)
    assert case.training.overlap.expert is overlapped
    assert any("v0.4.2" in note and "moe_a2a_overlap" in note for note in case.assumptions)


def test_every_moe_row_in_scope_finds_the_workload_that_ran_it():
    moe = [r for r in measured.rows() if r["id"].startswith("mbridge") and r.get("in_scope")
           and r["model"]["name"] in measured.BRIDGE_WORKLOAD_MODELS]
    assert len(moe) == 19
    assert [r["id"] for r in moe if measured.bridge_workload(r) is None] == []


RECOMPUTED = {
    # deepseek_workload_base_configs.py:203-214 (B200_FP8_MX_V2: recompute_modules=["mla_up_proj", "mlp"])
    "mbridge-26.04.01-pre-training-DeepSeekV3-DGX-B200-MXFP8-256-gbs4096-primary": ("mla_up_proj", "mlp"),
    # gpt_oss_workload_base_configs.py:79-83 (H100_BF16_V1: ["layernorm", "moe_act"]) and 124 (V2 replaces it)
    "mbridge-26.04.01-pre-training-GPTOSS120B-DGX-H100-BF16-64-gbs1280-primary": ("layernorm", "moe_act"),
    # gpt_oss_workload_base_configs.py:45-51 (GB300_BF16_V1: CUDA graphs, no recompute_modules) and 96-99
    "mbridge-26.04.01-pre-training-GPTOSS120B-DGX-GB300-BF16-64-gbs1280-primary": (),
}


@pytest.mark.parametrize("row_id, modules", RECOMPUTED.items(), ids=[r.split("training-")[1][:30] for r in RECOMPUTED])
def test_a_rows_recomputed_modules_are_its_workloads(row_id, modules):
    """``utils/overrides.py:148-150`` (``_set_recompute_overrides``): a workload's modules make the
    granularity selective."""
    case = next(c for c in measured.cases() if c.id == row_id)
    assert case.training.recompute_modules == modules
    assert case.training.recompute == ("selective" if modules else "none")
