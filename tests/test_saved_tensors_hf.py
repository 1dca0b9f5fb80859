"""Kept activation bytes against the tensors PyTorch autograd saves, for small Hugging Face
models (GPT-2, BERT, Llama): eager attention, fp32, CPU, train mode (dropout active).

Autograd's side is counted with ``saved_tensors_hooks`` (unique storages, parameters left
out, as ``torch_reference.saved_bytes``).  Ours is ``model_cost(...).activation_bytes``
under the ``pytorch-eager`` conventions with CPU dropout masks (``es_mask = es``).  Every
difference is written here by hand from the models' code and asserted exactly:

* eager bookkeeping: int64 token ids ``8 b l``, int64 targets ``8 b l`` and the loss's 0-d
  total weight (4 bytes);
* GPT-2: ``gelu_new`` is a Python composite that also keeps ``tanh``'s output, ``0.5 x`` and
  ``1 + tanh`` (3 ``(b, l, f)`` tensors per layer); position ids are one ``(1, l)`` row;
* BERT: token-type ids are one ``(1, l)`` row; position ids are a slice of the
  ``(1, P)`` buffer, which they pin whole; the pooler's ``hidden[:, 0]`` pins the whole last
  hidden state;
* Llama: ``LlamaRMSNorm`` keeps the normalised ``x`` too (``b l e`` per norm; OLMo 2's norms of
  the whole Q and K projections as well, ``b l (h + kv) q``); the rotary
  ``cos`` and ``sin`` (``(1, l, q)`` each, once per model); ``repeat_kv`` copies K and V to
  every query head before the matmul.

The stored measurements at real widths (``symbolic_cost/report/memory_measured.py``, read by
``reports/memory.md``) are checked against the same hand terms without torch.  Regenerate
them with ``python tests/test_saved_tensors_hf.py --write symbolic_cost/report/memory_measured.py``.
"""

import pprint
import sys

import pytest
from hypothesis import given, settings, strategies as st

from symbolic_cost.models import model_cost
from symbolic_cost.models.config import from_config
from symbolic_cost.report import memory, memory_measured
from symbolic_cost.tools import pytorch_eager as eager

FP32 = 4


def _library(config, b, l):
    """Our kept activation bytes for the model of ``config`` under the preset."""
    return model_cost(from_config(config), eager.training(b, l), "pytorch-eager").activation_bytes


def _hand_terms(config, b, l):
    """What autograd saves beyond our rows, derived from the Hugging Face code (see above)."""
    family, layers = config["model_type"], _layers(config)
    if family == "gpt2":
        f = config.get("n_inner") or 4 * config["n_embd"]
        e, h = config["n_embd"], config["n_head"]
        gelu = 3 * b * l * f * FP32 if config.get("activation_function", "gelu_new") == "gelu_new" else 0
        pinned = 2 * b * l * e * FP32 if b == 1 or h == 1 else 0        # Q, a view of the QKV output
        return layers * (gelu + pinned) + 8 * b * l + 8 * l + _targets(b, l) + FP32   # ids, positions, weight
    if family == "bert":
        e, positions = config["hidden_size"], config["max_position_embeddings"]
        return 8 * b * l + 8 * l + 8 * positions + b * (l - 1) * e * FP32  # ids, types, buffer, pooler
    e, h = config["hidden_size"], config["num_attention_heads"]
    q, kv = e // h, config.get("num_key_value_heads", h)
    expanded = 0 if b == kv == 1 else 2 * b * (h - kv) * l * q * FP32    # repeat_kv (a view for b = kv = 1)
    per_layer = 2 * b * l * e * FP32 + expanded                          # x_hat of 2 norms
    if family == "olmo2":                                                # and of q_norm, k_norm
        per_layer += b * l * (h + kv) * q * FP32
    return layers * per_layer + b * l * e * FP32 + 2 * l * q * FP32 + 8 * b * l + _targets(b, l) + FP32


def _targets(b, l):
    """The shifted labels: copied (``8 b l``), or for one sequence a view of the labels padded
    to ``l + 1`` (``8 (l + 1)``)."""
    return 8 * (l + 1) if b == 1 else 8 * b * l


def _layers(config):
    return config.get("n_layer", config.get("num_hidden_layers"))


# -- the stored measurements at real widths (no torch needed) -------------------------------

@pytest.mark.parametrize("name", list(memory_measured.MEASURED))
def test_stored_measurements_are_ours_plus_the_hand_terms(name):
    run = memory_measured.MEASURED[name]
    for layers, measured in run["saved"].items():
        config = {**run["config"], _layer_key(run["config"]): layers}
        assert measured == _library(config, run["b"], run["l"]) + _hand_terms(config, run["b"], run["l"]), layers
        assert eager.saved_bytes(config, run["b"], run["l"]) == measured


def _layer_key(config):
    return "n_layer" if config["model_type"] == "gpt2" else "num_hidden_layers"


def test_the_terms_of_the_tool_are_the_hand_terms():
    """``tools.pytorch_eager`` names each term the report explains; each equals the hand count."""
    b, l = 3, 7
    gpt2 = dict(model_type="gpt2", n_embd=12, n_head=3, n_layer=2, vocab_size=11, n_positions=16)
    bert = dict(model_type="bert", hidden_size=12, num_attention_heads=3, num_hidden_layers=2,
                intermediate_size=20, vocab_size=13, max_position_embeddings=16)
    llama = dict(model_type="llama", hidden_size=12, num_attention_heads=3, num_key_value_heads=1,
                 num_hidden_layers=2, intermediate_size=20, vocab_size=11, max_position_embeddings=16)
    terms = lambda c: {t.name: (t.bytes, t.per_layer) for t in eager.hf_terms(c, b, l, FP32)}  # noqa: E731
    assert terms(gpt2) == {"gelu_new composite": (3 * b * l * 48 * 4, True), "position ids (1, l)": (-8 * 2 * l, False),
                           "query view pins the QKV output": (0, True), "targets view the padded labels": (0, False)}
    one = {t.name: t.bytes for t in eager.hf_terms({**gpt2, "n_head": 1}, 1, l, FP32)}
    assert (one["query view pins the QKV output"], one["targets view the padded labels"]) == (2 * l * 12 * 4, 8)
    assert terms(bert) == {"token-type ids (1, l)": (-8 * 2 * l, False), "position ids pin the buffer": (8 * (16 - b * l), False),
                           "pooler slice pins the hidden state": (b * (l - 1) * 12 * 4, False)}
    assert terms(llama) == {"LlamaRMSNorm keeps x_hat": (2 * b * l * 12 * 4, True),
                            "final LlamaRMSNorm keeps x_hat": (b * l * 12 * 4, False),
                            "rotary cos, sin": (2 * l * 4 * 4, False), "repeat_kv copies": (2 * b * 2 * l * 4 * 4, True),
                            "targets view the padded labels": (0, False)}
    books = {t.name: t.bytes for t in eager.bookkeeping(from_config(gpt2), b, l, FP32)}
    assert books == {"token ids": 8 * b * l, "position ids": 8 * b * l, "targets": 8 * b * l, "total weight": 4}


def test_the_report_explains_every_measured_byte_of_a_layer():
    """``reports/memory.md``: from the library's layer to the measured one, nothing remains; the
    measured layer is ours under the preset plus the hand-counted per-layer terms."""
    for name, run in memory_measured.MEASURED.items():
        assert memory.layer_chain(name)[-1] == ("remaining", 0)
        one, two = ({**run["config"], _layer_key(run["config"]): n} for n in (1, 2))
        ours = _library(two, run["b"], run["l"]) - _library(one, run["b"], run["l"])
        hand = _hand_terms(two, run["b"], run["l"]) - _hand_terms(one, run["b"], run["l"])
        assert run["saved"][2] - run["saved"][1] == ours + hand


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="device"):
        eager.training(1, 8, device="tpu")
    with pytest.raises(ValueError, match="model_type 'opt'"):
        eager.hf_terms({"model_type": "opt"}, 1, 8, 4)


def test_cpu_masks_are_elements_and_cuda_masks_bytes():
    assert eager.training(2, 8).mask_bytes == 4
    assert eager.training(2, 8, "bf16").mask_bytes == 2
    assert eager.training(2, 8, "bf16", "cuda").mask_bytes == 1


# -- live: tiny Hugging Face models ---------------------------------------------------------

def _torch():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    return torch, transformers


def measure(config: dict, b: int, l: int, seed: int = 0) -> dict:
    """Bytes autograd saves in one train-mode forward of the Hugging Face model of ``config``
    (fp32, CPU, eager attention), by the autograd node that saved each storage (unique
    storages, parameters left out); GPT-2 and Llama with their LM loss, BERT up to its pooler."""
    torch, transformers = _torch()
    torch.manual_seed(seed)
    settings = {k: v for k, v in config.items() if k != "model_type"}
    hf = transformers.AutoConfig.for_model(config["model_type"], **settings)
    auto = transformers.AutoModel if config["model_type"] == "bert" else transformers.AutoModelForCausalLM
    model = auto.from_config(hf, attn_implementation="eager").float().train()
    ids = torch.randint(0, hf.vocab_size, (b, l))
    from torch_reference import saved_storages
    with saved_storages(model.parameters()) as kept:
        out = model(input_ids=ids) if config["model_type"] == "bert" else model(input_ids=ids, labels=ids)
    root = out.pooler_output if config["model_type"] == "bert" else out.loss
    labels = _saved_by(root.grad_fn, torch)
    by_node = {}
    for ptr, size in kept.items():
        node = "+".join(sorted(labels.get(ptr, {"(unreached)"})))
        by_node[node] = by_node.get(node, 0) + size
    return by_node


def _saved_by(root, torch):
    """Storage -> names of the autograd nodes that saved it (walking back from ``root``)."""
    seen, stack, labels = set(), [root], {}
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for attr in dir(node):
            if attr.startswith("_saved_"):
                value = getattr(node, attr)
                for t in value if isinstance(value, (tuple, list)) else [value]:
                    if isinstance(t, torch.Tensor):
                        labels.setdefault(t.untyped_storage().data_ptr(), set()).add(node.name())
        stack += [n for n, _ in node.next_functions]
    return labels


def _saved(config, b, l):
    return sum(measure(config, b, l).values())


SHAPES = dict(b=st.integers(1, 3), l=st.integers(1, 6), h=st.integers(1, 3), q=st.integers(1, 3),
              layers=st.integers(1, 2))


@settings(max_examples=20, deadline=None)
@given(**SHAPES, f=st.integers(1, 9), act=st.sampled_from(["gelu_new", "gelu"]))
def test_gpt2_saved_tensors(b, l, h, q, layers, f, act):
    config = dict(model_type="gpt2", n_embd=h * q, n_head=h, n_layer=layers, n_inner=f, vocab_size=11,
                  n_positions=8, activation_function=act, bos_token_id=0, eos_token_id=0)
    assert _saved(config, b, l) == _library(config, b, l) + _hand_terms(config, b, l)


@settings(max_examples=20, deadline=None)
@given(**SHAPES, f=st.integers(1, 9), extra=st.integers(0, 3))
def test_bert_saved_tensors(b, l, h, q, layers, f, extra):
    config = dict(model_type="bert", hidden_size=h * q, num_attention_heads=h, num_hidden_layers=layers,
                  intermediate_size=f, vocab_size=13, max_position_embeddings=l + extra)
    assert _saved(config, b, l) == _library(config, b, l) + _hand_terms(config, b, l)


@settings(max_examples=20, deadline=None)
@given(**SHAPES, f=st.integers(1, 9), groups=st.integers(1, 3))
def test_llama_saved_tensors(b, l, h, q, layers, f, groups):
    q = 2 * q                                       # rotary pairs the channels of a head
    config = dict(model_type="llama", hidden_size=h * groups * q, num_attention_heads=h * groups,
                  num_key_value_heads=h, num_hidden_layers=layers, intermediate_size=f, vocab_size=11,
                  max_position_embeddings=8)
    assert _saved(config, b, l) == _library(config, b, l) + _hand_terms(config, b, l)


@settings(max_examples=15, deadline=None)
@given(**SHAPES, f=st.integers(1, 9), groups=st.integers(1, 3))
def test_olmo2_saved_tensors(b, l, h, q, layers, f, groups):
    """OLMo 2 normalises each sublayer's output, not its input: the same bytes as a pre-norm
    layer with norms of the whole Q and K projections."""
    q = 2 * q
    config = dict(model_type="olmo2", hidden_size=h * groups * q, num_attention_heads=h * groups,
                  num_key_value_heads=h, num_hidden_layers=layers, intermediate_size=f, vocab_size=11,
                  max_position_embeddings=8, eos_token_id=None, pad_token_id=None)
    assert _saved(config, b, l) == _library(config, b, l) + _hand_terms(config, b, l)


def test_single_differences_measured_alone():
    """Each Hugging Face term, isolated by changing one thing and measuring twice."""
    b, l = 2, 5
    gpt2 = dict(model_type="gpt2", n_embd=12, n_head=3, n_layer=2, vocab_size=11, n_positions=8,
                bos_token_id=0, eos_token_id=0)
    # gelu_new keeps three (b, l, 4e) tensors per layer more than torch's GELU
    assert _saved(gpt2, b, l) - _saved({**gpt2, "activation_function": "gelu"}, b, l) == 2 * 3 * b * l * 48 * 4
    bert = dict(model_type="bert", hidden_size=12, num_attention_heads=3, num_hidden_layers=1,
                intermediate_size=20, vocab_size=13, max_position_embeddings=8)
    # one more row of the position buffer: 8 more bytes, whatever l is
    assert _saved({**bert, "max_position_embeddings": 9}, b, l) - _saved(bert, b, l) == 8
    llama = dict(model_type="llama", hidden_size=12, num_attention_heads=3, num_hidden_layers=1,
                 intermediate_size=20, vocab_size=11, max_position_embeddings=8)
    # repeat_kv: autograd keeps as much with one key/value head as with three; we keep less
    assert _saved({**llama, "num_key_value_heads": 1}, b, l) == _saved({**llama, "num_key_value_heads": 3}, b, l)
    assert _library({**llama, "num_key_value_heads": 3}, b, l) - _library({**llama, "num_key_value_heads": 1}, b, l) \
        == 2 * b * 2 * l * 4 * 4


def test_node_breakdown_agrees_with_the_reference_counter():
    """``measure`` counts what ``torch_reference.saved_bytes`` counts."""
    torch, transformers = _torch()
    from torch_reference import saved_bytes
    config = dict(model_type="bert", hidden_size=12, num_attention_heads=3, num_hidden_layers=1,
                  intermediate_size=20, vocab_size=13, max_position_embeddings=8)
    torch.manual_seed(0)
    hf = transformers.AutoConfig.for_model("bert", **{k: v for k, v in config.items() if k != "model_type"})
    model = transformers.AutoModel.from_config(hf, attn_implementation="eager").train()
    ids = torch.randint(0, 13, (2, 5))
    assert saved_bytes(model, ids) == _saved(config, 2, 5)


# -- regenerating the stored measurements -----------------------------------------------------

REAL = {   # real widths, 1 and 2 layers: one layer is their difference
    "gpt2": (dict(model_type="gpt2", vocab_size=50257, n_positions=1024, n_embd=768, n_head=12,
                  activation_function="gelu_new", bos_token_id=50256, eos_token_id=50256), 2, 1024),
    "bert-base-uncased": (dict(model_type="bert", vocab_size=30522, hidden_size=768, num_attention_heads=12,
                               intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512,
                               type_vocab_size=2), 2, 512),
    "llama-3.2-1b": (dict(model_type="llama", vocab_size=128256, hidden_size=2048, num_attention_heads=32,
                          num_key_value_heads=8, intermediate_size=8192, hidden_act="silu",
                          max_position_embeddings=131072, tie_word_embeddings=True), 1, 1024),
}


def write_measurements(path):
    """Measure ``REAL`` and write them as the data module the report reads."""
    torch, transformers = _torch()
    runs = {}
    for name, (config, b, l) in REAL.items():
        key = _layer_key(config)
        nodes = {n: measure({**config, key: n}, b, l) for n in (1, 2)}
        layer = {k: nodes[2].get(k, 0) - nodes[1].get(k, 0) for k in sorted(set(nodes[1]) | set(nodes[2]))}
        runs[name] = dict(config=config, b=b, l=l, saved={n: sum(v.values()) for n, v in nodes.items()},
                          layer_by_node={k: v for k, v in layer.items() if v})
        print(name, runs[name]["saved"], flush=True)
    command = "python tests/test_saved_tensors_hf.py --write symbolic_cost/report/memory_measured.py"
    text = ('"""What PyTorch autograd saved (bytes) in one train-mode forward of Hugging Face models at\n'
            'real widths with 1 and 2 layers: eager attention, fp32, CPU, unique storages, parameters\n'
            'left out; ``layer_by_node`` is the 2-layer run minus the 1-layer run, by the autograd node\n'
            f'that saved each storage.  Generated by ``{command}``\n'
            f'(torch {torch.__version__}, transformers {transformers.__version__}); read by ``report.memory``."""\n\n'
            f"COMMAND = {command!r}\n"
            f"VERSIONS = {{'torch': {torch.__version__!r}, 'transformers': {transformers.__version__!r}}}\n\n"
            f"MEASURED = {pprint.pformat(runs, width=110, sort_dicts=False)}\n")
    with open(path, "w") as out:
        out.write(text)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--write":
        sys.exit("usage: python tests/test_saved_tensors_hf.py --write symbolic_cost/report/memory_measured.py")
    write_measurements(sys.argv[2])
