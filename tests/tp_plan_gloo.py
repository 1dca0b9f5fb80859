"""transformers' tensor parallelism (``tp_plan``) on the CPU: a tiny Llama loaded with
``from_pretrained(..., distributed_config=DistributedConfig(tp_size=2))`` over 2 local gloo
processes, one forward and backward of a causal-LM loss, untied and tied.

Run by ``tests/test_tensor_parallel_ends.py`` in a subprocess (``python tests/tp_plan_gloo.py``),
which prints one JSON object per case.  The library is not imported here: this is the outside
oracle.  Recorded on rank 0: the elements of every parameter this rank holds (a ``DTensor``'s local
shard), the shape of the logits the model returns, the plan it applied, and PyTorch's own count of
the collectives (``torch.distributed.tensor.debug.CommDebugMode``) after the forward and after the
backward.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from transformers import LlamaConfig, LlamaForCausalLM

CONFIG = dict(hidden_size=16, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
              num_hidden_layers=2, vocab_size=64, max_position_embeddings=64)
"""The tiny Llama: 2 layers, width 16, 4 query heads of 4, 2 key/value heads, MLP 32, vocabulary 64."""

BATCH, TOKENS, WORLD = 2, 8, 2
CASES = (False, True)
"""``tie_word_embeddings`` of each case, in the order printed."""


def _rank(rank, path, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD),
                      LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
    from transformers.distributed import DistributedConfig
    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(path, distributed_config=DistributedConfig(tp_size=WORLD),
                                             dtype=torch.float32)
    local = {name: (p.to_local().numel() if isinstance(p, DTensor) else p.numel())
             for name, p in model.named_parameters()}
    ids = torch.randint(0, CONFIG["vocab_size"], (BATCH, TOKENS))
    counted = CommDebugMode()
    with counted:
        output = model(input_ids=ids, labels=ids)
        forward = {str(k).rsplit(".", 1)[-1]: v for k, v in counted.get_comm_counts().items()}
        output.loss.backward()
    both = {str(k).rsplit(".", 1)[-1]: v for k, v in counted.get_comm_counts().items()}
    if rank == 0:
        with open(out, "w") as handle:
            json.dump({"local": local, "logits": list(output.logits.shape), "plan": dict(model.tp_plan),
                       "forward": forward, "backward": {k: v - forward.get(k, 0) for k, v in both.items()}}, handle)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    for tied in CASES:
        with tempfile.TemporaryDirectory() as folder:
            torch.manual_seed(0)
            LlamaForCausalLM(LlamaConfig(**CONFIG, tie_word_embeddings=tied)).save_pretrained(folder)
            out = os.path.join(folder, "out.json")
            mp.spawn(_rank, args=(folder, _free_port(), out), nprocs=WORLD)
            with open(out) as handle:
                print(handle.read())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
