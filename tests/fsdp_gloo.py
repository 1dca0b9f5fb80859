"""PyTorch FSDP2 (``fully_shard``) on the CPU: one training step of a tiny Llama from
``transformers`` over 2 or 4 local processes on the gloo backend, recording every collective
FSDP2 issues and the bytes of the gathered (unsharded) weights over the step.

Run by ``tests/test_fsdp_gloo.py`` in a subprocess (``python tests/fsdp_gloo.py``), which
prints one JSON object per layout.  The library is not imported here: this is the outside
oracle.

Each unit is a ``fully_shard`` module, as torchtitan wraps a Llama: the token embedding, every
decoder layer, the final norm with the output projection, then the root (left without
parameters of its own).  ``torch.optim.AdamW`` then steps once; its moments' local shards are
recorded.  ``torch.distributed``'s ``all_gather_single``,
``reduce_scatter_single`` and ``all_reduce`` (what FSDP2 calls, ``_fsdp_collectives.py``) are
wrapped to log each call: its kind, the pass it runs in, the whole tensor's elements (the
gathered output, the scattered input, the reduced tensor), the element size and the group.

Gathered weights: the storages of the unsharded parameters (FSDP2 resizes them to 0 when it
reshards) and the flat all-gather outputs still alive (weak references), summed at every unit's
forward, at the backward of every layer's down projection (its first product in backward, by
then FSDP2 has gathered the layer and prefetched the one before) and at every collective.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import weakref

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import LlamaConfig, LlamaForCausalLM

CONFIG = dict(model_type="llama", hidden_size=16, intermediate_size=32, num_attention_heads=2,
              num_key_value_heads=2, num_hidden_layers=2, vocab_size=64, max_position_embeddings=64,
              tie_word_embeddings=False)
"""The tiny Llama (its ``config.json``; the test reads the same dictionary into the library)."""

LAYOUTS = ((2, 2, True), (2, 2, False), (4, 2, True))
"""``(world, shard, reshard_after_forward)``: FSDP over 2 ranks, the same without resharding,
and HSDP on a 2 x 2 mesh (2 replica groups of 2 shards)."""

TOKENS = 8


class Recorder:
    """The collectives of one rank and the gathered bytes sampled over the step."""

    def __init__(self):
        self.phase, self.calls, self.peak, self.storages, self.buffers = "fwd", [], {}, {}, []

    def gathered(self) -> int:
        params = sum(s.nbytes() for s in self.storages.values())
        return params + sum(b().numel() * b().element_size() for b in self.buffers if b() is not None)

    def sample(self, *_):
        gc.collect()           # a buffer left in a reference cycle is garbage, freed whenever gc runs next
        self.peak[self.phase] = max(self.peak.get(self.phase, 0), self.gathered())

    def unsharded(self, module, *_):
        """A unit's forward: remember its unsharded parameters' storages."""
        for p in module.parameters():
            if not hasattr(p, "device_mesh"):          # a plain tensor: gathered, not a DTensor shard
                self.storages[id(p)] = p.untyped_storage()
        self.sample()

    def wrap(self, name, kind, whole):
        original = getattr(dist, name)

        def logged(*args, **kwargs):
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            if kind == "allgather":
                self.buffers.append(weakref.ref(tensors[0]))     # the flat output FSDP2 copies out of
            group = kwargs.get("group")
            self.calls.append(dict(kind=kind, pass_=self.phase, elements=whole(tensors), bytes=tensors[0].element_size(),
                                   group=dist.get_process_group_ranks(group) if group is not None else list(
                                       range(dist.get_world_size()))))
            self.sample()
            return original(*args, **kwargs)
        setattr(dist, name, logged)


def build(mesh, reshard: bool):
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in CONFIG.items() if k != "model_type"}))
    units = [model.model.embed_tokens, *model.model.layers, [model.model.norm, model.lm_head]]
    for unit in units:
        fully_shard(unit, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    return model


def worker(rank, world, shard, reshard, path, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world // shard, shard), mesh_dim_names=("replicate", "shard")) \
        if shard != world else init_device_mesh("cpu", (world,))
    model = build(mesh, reshard)
    log = Recorder()
    for layer in model.model.layers:
        layer.mlp.down_proj.register_forward_hook(lambda m, i, out: out.register_hook(log.sample) and None)
    for unit in (model.model.embed_tokens, *model.model.layers, model.model.norm, model.lm_head):
        unit.register_forward_pre_hook(log.unsharded)
    log.wrap("all_gather_single", "allgather", lambda t: t[0].numel())
    log.wrap("reduce_scatter_single", "reducescatter", lambda t: t[1].numel())
    log.wrap("all_reduce", "allreduce", lambda t: t[0].numel())
    ids = torch.randint(0, CONFIG["vocab_size"], (1, TOKENS))
    loss = model(input_ids=ids, labels=ids).loss
    log.phase = "loss"
    log.sample()                                   # the loss: every activation kept
    log.phase = "bwd"
    loss.backward()
    log.phase = "after"
    log.sample()
    adam = torch.optim.AdamW(model.parameters(), lr=1e-3)
    adam.step()                                    # its moments: DTensors, one local shard each
    moments = sum(v.to_local().numel() * v.element_size() for state in adam.state.values()
                  for v in state.values() if hasattr(v, "to_local"))
    units = dict(embedding=model.model.embed_tokens, layer=model.model.layers[0], head=model.lm_head, norm=model.model.norm)
    sizes = {name: sum(p.numel() for p in unit.parameters()) for name, unit in units.items()}
    held = sum(p.to_local().numel() for p in model.parameters())
    queue.put(dict(rank=rank, world=world, shard=shard, reshard=reshard, calls=log.calls, peak=log.peak,
                   sizes=sizes, held=held, moments=moments, parameters=sum(p.numel() for p in model.parameters())))
    dist.barrier()
    dist.destroy_process_group()


def run(world, shard, reshard):
    """One step of the layout on ``world`` processes; every rank's record."""
    context = mp.get_context("fork")          # a fresh interpreter (run as a script): nothing to inherit
    queue = context.Queue()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "store")
        procs = [context.Process(target=worker, args=(r, world, shard, reshard, path, queue)) for r in range(world)]
        for p in procs:
            p.start()
        records = [queue.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
    return sorted(records, key=lambda r: r["rank"])


if __name__ == "__main__":
    for layout in LAYOUTS:
        print(json.dumps(run(*layout)))
        sys.stdout.flush()
