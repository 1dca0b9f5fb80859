"""Pipeline splits as Megatron-LM makes them (issue 28, item 4): which layers each model chunk of
each pipeline rank builds, against a re-implementation of Megatron-Core's own rule, hand counts,
parameters per stage, and the refusals Megatron asserts.

The oracle (``megatron_build``, ``megatron_offset``) follows the branches of Megatron-Core's
``megatron/core/transformer/transformer_block.py::get_num_layers_to_build`` and
``megatron/core/transformer/transformer_layer.py::get_transformer_layer_offset`` (uneven first/last
stages; ``account_for_embedding/loss_in_pipeline_split``; virtual pipeline size ``vp``, ``None``
without interleaving), written here from that algorithm, not from the library's round-robin."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from symbolic_cost.checks import InputError
from symbolic_cost.cli import main
from symbolic_cost.models import Training, model_cost
from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.config import from_config, preset
from symbolic_cost.models.peak import largest_micro_batch, peak_bytes, peak_rank
from symbolic_cost.models.ranks import rank_activation_bytes, rank_parameters
from symbolic_cost.parallel.pipeline import chunk_in_flight
from symbolic_cost.parallel.splits import chunk_layers


def megatron_build(N, p, vp, first, last, emb, loss, rank, vp_stage):
    """Layers (pipeline rank ``rank``, virtual stage ``vp_stage``) builds; AssertionError where
    Megatron-Core asserts."""
    if first is not None or last is not None:
        assert not (emb or loss), "no standalone embedding or loss stage with uneven pp"
        todo, left = N, p
        if first is not None:
            todo, left = todo - first, left - 1
        if last is not None:
            todo, left = todo - last, left - 1
        if left > 0:
            assert todo % left == 0
            per_rank = todo // left
        else:
            per_rank = 0
        if rank == 0 and first is not None:
            per_rank = first
        if rank == p - 1 and last is not None:
            per_rank = last
    else:
        n = N + emb + loss
        assert n % p == 0
        per_rank = n // p
    if vp is not None and p > 1:
        assert per_rank % vp == 0
        build = per_rank // vp
    else:
        build = per_rank
    if rank == 0 and (vp is None or vp_stage == 0) and emb:
        build -= 1
        assert build >= 0
    if rank == p - 1 and (vp is None or vp_stage == vp - 1) and loss:
        build -= 1
        assert build >= 0
    return build


def megatron_offset(N, p, vp, first, last, emb, loss, rank, vp_stage):
    """Global index of the first layer (pipeline rank ``rank``, virtual stage ``vp_stage``) builds."""
    if p == 1:
        return 0
    if first is not None or last is not None:
        middle_stages = p - (first is not None) - (last is not None)
        middle = N - (first or 0) - (last or 0)
        middle_rank = rank if first is None else rank - 1
        if vp is not None:
            fc = 0 if first is None else first // vp
            lc = 0 if last is None else last // vp
            mc = middle // vp
            total = fc + mc + lc
            if rank == 0:
                return vp_stage * total
            return vp_stage * total + fc + middle_rank * (mc // middle_stages if middle_stages else 0)
        per = middle // middle_stages if middle_stages > 0 else 0
        return 0 if rank == 0 else middle_rank * per + (first or 0)
    n = N + emb + loss
    per = n // p
    offset = vp_stage * (n // vp) + rank * (per // vp) if vp is not None else rank * per
    if emb and not (rank == 0 and (vp is None or vp_stage == 0)):
        offset -= 1
    return offset


def megatron_layers(N, p, v, first=None, last=None, emb=False, loss=False):
    """``[rank][chunk] -> list of layer indices`` by the oracle; raises AssertionError where Megatron does."""
    vp = v if v > 1 else None
    return [[list(range(megatron_offset(N, p, vp, first, last, emb, loss, r, c),
                        megatron_offset(N, p, vp, first, last, emb, loss, r, c)
                        + megatron_build(N, p, vp, first, last, emb, loss, r, c))) for c in range(v)]
            for r in range(p)]


def ours(N, p, v, first=None, last=None, emb=False, loss=False):
    return [[list(c) for c in rank] for rank in chunk_layers(N, p, v, first, last, emb, loss)]


def compare(N, p, v, first=None, last=None, emb=False, loss=False):
    """Both agree, or both refuse (the library refuses also what would build a layer twice or never,
    or leave an uneven split's rank without a layer)."""
    try:
        expected = megatron_layers(N, p, v, first, last, emb, loss)
    except AssertionError:
        with pytest.raises(InputError):
            ours(N, p, v, first, last, emb, loss)
        return "refused"
    sizes = [sum(map(len, rank)) for rank in expected]
    whole = sorted(i for rank in expected for c in rank for i in c) == list(range(N))
    if not whole or ((first is not None or last is not None) and min(sizes) < 1):
        # layers built twice or never (first + last over n_layers with no middle rank, which these two
        # functions do not check), or an uneven split leaving a rank empty: the library refuses both
        with pytest.raises(InputError):
            ours(N, p, v, first, last, emb, loss)
        return "library refuses"
    assert ours(N, p, v, first, last, emb, loss) == expected
    return "same"


GRID = [(N, p, v, first, last, emb, loss)
        for N in (4, 6, 8, 12, 16, 30, 32, 61, 62, 126)
        for p in (2, 3, 4, 8, 16)
        for v in (1, 2, 3, 4)
        for first, last, emb, loss in ((None, None, False, False), (None, None, True, False), (None, None, False, True),
                                       (None, None, True, True), (2, None, False, False), (None, 2, False, False),
                                       (4, 4, False, False), (1, 3, False, False))]


def test_every_grid_layout_is_placed_as_megatron_places_it():
    results = {case: compare(*case) for case in GRID}
    same = [case for case, result in results.items() if result == "same"]
    assert len(same) > 200 and list(results.values()).count("refused") > 200     # both kinds well covered
    assert sum(1 for N, p, v, first, last, *_ in same if v > 1 and (first, last) != (None, None)) > 20
    assert sum(1 for N, p, v, first, last, emb, loss in same if v > 1 and emb and loss) > 20


@settings(max_examples=300, deadline=None)
@given(N=st.integers(1, 80), p=st.integers(2, 12), v=st.integers(1, 5), first=st.none() | st.integers(1, 12),
       last=st.none() | st.integers(1, 12), emb=st.booleans(), loss=st.booleans())
def test_drawn_layouts_are_placed_as_megatron_places_them(N, p, v, first, last, emb, loss):
    if (emb or loss) and (first is not None or last is not None):
        with pytest.raises(InputError, match="Megatron-Core asserts"):
            chunk_layers(N, p, v, first, last, emb, loss)
        return
    compare(N, p, v, first, last, emb, loss)


def test_llama3_405b_by_hand():
    """Llama 3 (Section 3.3.2): 126 layers on 16 stages, the first and the last one layer fewer:
    128 slots, 8 a rank; rank 0 holds the embedding and 7 layers, rank 15 seven and the head."""
    for v in (1, 2, 4, 8):
        ranks = chunk_layers(126, 16, v, embedding=True, loss=True)
        sizes = [sum(map(len, r)) for r in ranks]
        assert sizes == [7] + [8] * 14 + [7]
        assert [len(c) for c in ranks[0]] == [8 // v - 1] + [8 // v] * (v - 1)
        assert [len(c) for c in ranks[15]] == [8 // v] * (v - 1) + [8 // v - 1]
    ranks = chunk_layers(126, 16, 4, embedding=True, loss=True)       # 2 slots a chunk, rounds of 32 slots
    assert list(ranks[0][0]) == [0] and list(ranks[1][0]) == [1, 2] and list(ranks[0][1]) == [31, 32]
    assert list(ranks[15][3]) == [125]
    for v in (3, 5, 16):
        with pytest.raises(InputError, match="virtual_stages"):
            chunk_layers(126, 16, v, embedding=True, loss=True)
    with pytest.raises(InputError, match="p=16 must divide"):
        chunk_layers(126, 16, 1, embedding=True)


def test_uneven_stages_with_interleaving():
    """30 layers, p=4, first 6 and last 6 (9 on each middle rank: refused with v=2); with v=3 every
    rank's chunks are a third of its layers, rounds of 2 + 3 + 3 + 2 = 10."""
    ranks = chunk_layers(30, 4, 3, first=6, last=6)
    assert [[list(c) for c in r] for r in ranks][0] == [[0, 1], [10, 11], [20, 21]]
    assert [list(c) for c in ranks[1]] == [[2, 3, 4], [12, 13, 14], [22, 23, 24]]
    assert [list(c) for c in ranks[3]] == [[8, 9], [18, 19], [28, 29]]
    with pytest.raises(InputError, match="virtual_stages=2 must divide the 9 layers of pipeline rank 1"):
        chunk_layers(30, 4, 2, first=6, last=6)


def small():
    return Architecture("small", 6, 64, 4, 256, 1000, tied=False, positions=128)


def test_parameters_per_stage_by_hand():
    """6 layers over p=4 with the embedding and the loss counted: 8 slots, 2 a rank: layers 1, 2, 2, 1.
    A GPT layer holds 12 e^2 + 13 e parameters (QKV 3e^2 + 3e, projection e^2 + e, MLP 8e^2 + 5e,
    two LayerNorms 4e); the embedding V e + 128 e (positions), the head its norm 2e and V e."""
    e, V = 64, 1000
    layer, embedding, head = 12 * e * e + 13 * e, V * e + 128 * e, 2 * e + V * e
    cost = model_cost(small(), Training(b=1, l=128, p=4, micro_batches=4, embedding_in_split=True,
                                        loss_in_split=True))
    assert [rank_parameters(cost, r) for r in range(4)] == [embedding + layer, 2 * layer, 2 * layer, head + layer]
    assert cost.parameters_per_device == embedding + layer


def test_interleaved_activations_count_each_chunk_by_its_own_layers():
    """p=4, v=2, 6 layers with both ends counted: one slot a chunk; rank 0's first chunk is the
    embedding's alone and rank 3's last the loss's.  Of rank 0's 11 forwards in flight 7 are of
    chunk 0 (no layer) and 4 of chunk 1 (one layer); rank 1 holds 5 and 4, one layer each; rank 3
    4 of chunk 0 (one layer) and 1 of its layerless last chunk."""
    assert chunk_in_flight(4, 8, 2, 0) == [7, 4] and chunk_in_flight(4, 8, 2, 1) == [5, 4]
    t = Training(b=1, l=128, p=4, micro_batches=8, schedule="interleaved", virtual_stages=2,
                 embedding_in_split=True, loss_in_split=True)
    cost = model_cost(small(), t)
    kept = rank_activation_bytes(cost, 1) / 9       # one layer's kept bytes for one micro-batch
    held = {0: t.pipeline_schedule().in_flight(4, 8, 0), 3: t.pipeline_schedule().in_flight(4, 8, 3)}
    assert rank_activation_bytes(cost, 0) == 4 * kept + held[0] * cost.embedding.total("act_buffer")
    assert rank_activation_bytes(cost, 3) == 4 * kept + held[3] * cost.head.total("act_buffer")


def test_refusals_by_name():
    with pytest.raises(InputError, match="embedding_in_split cannot go with first_stage_layers"):
        Training(p=4, embedding_in_split=True, first_stage_layers=2)
    with pytest.raises(InputError, match="loss_in_split sizes a pipeline stage, and p=1"):
        Training(loss_in_split=True)
    with pytest.raises(InputError, match="embedding_in_split needs a numeric p"):
        model_cost(small(), Training(b=1, l=128, embedding_in_split=True, p=Symbol_p()))


def Symbol_p():
    from symbolic_cost.symbols import p
    return p


def test_megatron_arguments_read_the_split(tmp_path):
    from symbolic_cost.models.launch_script import read_launch
    from symbolic_cost.models.megatron_args import megatron_setup
    base = ("pretrain_gpt.py --num-layers 6 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
            "--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 --vocab-size 1000 "
            "--tokenizer-type NullTokenizer --pipeline-model-parallel-size 4 ")
    setup = megatron_setup(read_launch(base + "--account-for-embedding-in-pipeline-split "
                                       "--account-for-loss-in-pipeline-split --num-layers-per-virtual-pipeline-stage 1",
                                       "x"), "x", world=4)
    assert setup.policy["embedding_in_split"] and setup.policy["loss_in_split"]
    assert (setup.policy["schedule"], setup.policy["virtual_stages"]) == ("interleaved", 2)    # 8 slots / 4 / 1
    with pytest.raises(InputError, match="--num-virtual-stages-per-pipeline-rank"):
        megatron_setup(read_launch(base + "--decoder-first-pipeline-num-layers 2 "
                                   "--num-layers-per-virtual-pipeline-stage 1", "x"), "x", world=4)
    uneven = megatron_setup(read_launch(base.replace("--num-layers 6", "--num-layers 10")
                                        + "--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 2 "
                                        "--num-virtual-stages-per-pipeline-rank 2", "x"), "x", world=4)
    assert uneven.policy["first_stage_layers"] == 2 and uneven.policy["virtual_stages"] == 2


def layout_of(expected, p, emb, loss):
    """The ``--pipeline-model-parallel-layout`` string of a placement (stage ``c p + r`` is chunk ``c``
    of rank ``r``), the embedding first and the loss last (a layout holds both, Megatron-Core asserts;
    ``emb`` and ``loss`` only move the transformer layers, which the ``t``s follow)."""
    v = len(expected[0])
    stages = ["t" * len(expected[s % p][s // p]) for s in range(p * v)]
    stages[0], stages[-1] = "E" + stages[0], stages[-1] + "L"
    return "|".join(stages)


@settings(max_examples=150, deadline=None)
@given(N=st.integers(1, 60), p=st.integers(2, 8), v=st.integers(1, 4), emb=st.booleans(), loss=st.booleans())
def test_a_layout_written_from_megatrons_placement_places_the_same_layers(N, p, v, emb, loss):
    try:
        expected = megatron_layers(N, p, v, emb=emb, loss=loss)
    except AssertionError:
        return
    assert ours_layout(layout_of(expected, p, emb, loss), N, p) == expected


def ours_layout(layout, N, p):
    from symbolic_cost.parallel.splits import layout_layers
    return [[list(c) for c in rank] for rank in layout_layers(layout, N, p)]


def test_layout_by_hand_and_its_refusals():
    """Megatron's own example, "Et*3|(tt|)*29,m|L": 32 stages, E and three layers, 29 stages of two,
    an MTP stage and the loss's (an MTP stage before the last is refused: not modelled; on the last
    stage, as Megatron-Bridge's DeepSeek-V3 layouts end, it is where the library keeps it)."""
    from symbolic_cost.parallel.splits import layout_stages
    stages = layout_stages("Et*3|(tt|)*29,m|L")
    assert stages == ["Ettt"] + ["tt"] * 29 + ["m", "L"]
    assert ours_layout("Et|tt|tt|t,L", 6, 2) == [[[0], [3, 4]], [[1, 2], [5]]]      # chunk_layers' doctest case
    assert ours_layout("Et|tt|tt|tmL", 6, 2) == ours_layout("Et|tt|tt|t,L", 6, 2)
    for layout, N, p, match in (("Et*3|(tt|)*29,m|L", 61, 16, "multi-token-prediction"), ("Et|tt|L", 3, 2, "multiple of p"),
                                ("Et|tEt|t|L", 4, 2, "embedding"), ("Et|tt|t|tL", 6, 2, "n_layers=6"),
                                ("Ex|t", 1, 2, "'x' is not a layer")):
        with pytest.raises(InputError, match=match):
            ours_layout(layout, N, p)
    with pytest.raises(InputError, match="virtual_stages"):
        Training(p=2, pipeline_layout="Et|tt|tt|t,L")                  # 4 stages on 2 ranks: v = 2
    with pytest.raises(InputError, match="embedding_in_split cannot go with it"):
        Training(p=2, virtual_stages=2, schedule="interleaved", pipeline_layout="Et|tt|tt|t,L", embedding_in_split=True)
    cost = model_cost(small(), Training(b=1, l=128, p=2, micro_batches=4, schedule="interleaved", virtual_stages=2,
                                        pipeline_layout="Et|tt|tt|t,L"))
    e, V = 64, 1000
    layer, embedding, head = 12 * e * e + 13 * e, V * e + 128 * e, 2 * e + V * e
    assert [rank_parameters(cost, r) for r in range(2)] == [embedding + 3 * layer, head + 3 * layer]


def test_megatron_arguments_read_a_layout():
    from symbolic_cost.models.launch_script import read_launch
    from symbolic_cost.models.megatron_args import megatron_setup
    base = ("pretrain_gpt.py --num-layers 6 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
            "--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 --vocab-size 1000 "
            "--tokenizer-type NullTokenizer --pipeline-model-parallel-size 2 ")
    setup = megatron_setup(read_launch(base + "--pipeline-model-parallel-layout 'Et|tt|tt|t,L'", "x"), "x", world=2)
    assert setup.policy["pipeline_layout"] == "Et|tt|tt|t,L" and setup.policy["virtual_stages"] == 2


def test_the_peak_is_one_ranks_not_each_categorys_busiest():
    """Llama-3-8B on 4 stages of 2, 8, 8 and 14 layers, 8 micro-batches of one 4,096-token
    sequence: rank 1 keeps the most activations (three micro-batches of 8 layers) and rank 3
    holds the most weights (14 layers and the head); no device holds both.  The peak is rank 3's
    forward: its 16 bytes a parameter (bf16 weights and gradients, fp32 master weights and Adam's
    two moments: Megatron-LM's mixed precision), its kept activations, and the logits the loss
    reads, ``4,096 x 128,256`` bf16 values; and 2 sequences fit an 80 GB H100 (74.5 GiB), 3 not."""
    layout = dict(l=4096, p=4, micro_batches=8, flash=True, first_stage_layers=2, last_stage_layers=14)
    cost = model_cost(preset("llama-3-8b"), Training(b=1, **layout))
    rank3 = 16 * rank_parameters(cost, 3) + rank_activation_bytes(cost, 3) + 4096 * 128256 * 2
    assert peak_rank(cost) == 3 and peak_bytes(cost) == rank3
    assert rank_activation_bytes(cost, 1) == cost.activation_bytes > rank_activation_bytes(cost, 3)
    assert largest_micro_batch(preset("llama-3-8b"), Training(**layout), 80 * 10**9) == 2


def test_a_search_of_uneven_stages_holds_each_rank_to_its_own_peak(capsys):
    """``search`` builds uneven stages with the micro-batch a symbol: its memory column is the
    largest of the ranks' own peaks, the number ``summary`` gives that layout (DeepSeek-V2-Lite's
    27 layers on 32 H100s: stages of 1 and 2 layers at the ends), not each category's busiest."""
    config = Path(__file__).parent / "hf_configs" / "DeepSeek-V2-Lite.json"
    assert main(["search", "--hf-config", str(config), "--devices", "32", "--global-batch", "256", "--seq", "4096",
                 "--flash", "--top", "3", "--json"]) == 0
    rows = [row for row in json.loads(capsys.readouterr().out)["best"] if row["first_stage_layers"]]
    assert rows
    arch = from_config(json.loads(config.read_text()))
    for row in rows:
        t = Training(b=row["b"], l=4096, d=row["d"], p=row["p"], micro_batches=row["n_micro"], ep=row["ep"],
                     flash=True, zero=row["zero"], first_stage_layers=row["first_stage_layers"],
                     last_stage_layers=row["last_stage_layers"])
        assert row["memory"] == pytest.approx(float(peak_bytes(model_cost(arch, t))), rel=1e-12)


def test_a_moe_models_state_is_one_ranks_own(capsys):
    """DeepSeek-V3 over stages of 16, 15, 15 and 15 layers (ZeRO 0, bf16): each rank's gradients are
    2 bytes and its optimizer state 12 bytes (fp32 master, two moments) of its own parameters, so the
    busiest rank's are those of the rank holding the most.  Added by category (the busiest rank's
    dense parameters to another rank's routed ones), the gradients were those of 8.5 billion
    parameters, more than any rank holds."""
    config = Path(__file__).parent / "hf_configs" / "DeepSeek-V3.json"
    assert main(["summary", "--hf-config", str(config), "--flash", "--set", "b=1", "l=4096", "m1=1", "d=64", "ep=64",
                 "n_micro=32", "p=4", "--first-stage-layers", "16", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    most = max(got["parameters_per_rank"])
    assert (got["weight_bytes"], got["gradient_bytes"], got["optimizer_bytes"]) == (2 * most, 2 * most, 12 * most)
