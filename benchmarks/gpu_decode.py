"""One decode step of a Llama 3 8B-shaped model timed on one CUDA GPU, as a serving engine runs it:
every kernel of the step captured in a CUDA graph and replayed, so that no Python or launch time
is counted between kernels.

Run on the GPU (PyTorch with CUDA): ``python benchmarks/gpu_decode.py OUT.json``.  The model is
written here from Llama 3's published shape (32 layers, hidden 4,096, 32 query heads and 8
key/value heads of 128, MLP 14,336, vocabulary 128,256; BF16, random weights), not from the
library: per layer an RMS norm, the fused QKV product, the new token's keys and values written
into the cache, attention over the ``context`` cached tokens (the 4 query heads of a key/value
head as 4 queries of one ``scaled_dot_product_attention``, so no key or value is copied), the
output product and residual, an RMS norm, the fused gate/up product, SiLU and product, the down
product and residual; then the final norm and the LM head.  Rotary embeddings are left out (an
element-wise pass over the few query and key rows).  Each point is the median of three means of
``REPS`` graph replays between CUDA events.  ``--dry`` runs it on the CPU at toy sizes, without a
graph.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.nn.functional as F

from gpu_kernels import seconds       # this folder's kernel timer: CUDA events, warm-up, median of three

REPS = 20
SHAPE = dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256)
TOY = dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=256)
POINTS = ((1, 1024), (1, 8192), (8, 1024), (8, 8192), (32, 1024), (32, 4096), (64, 1024), (64, 4096),
          (128, 1024), (128, 2048), (256, 1024))
"""(batch, cached tokens a sequence): at most 256K cached tokens (32 GiB of cache)."""


def weights(shape, device):
    """Random BF16 weights of every layer, the word table and the head."""
    def w(*size):
        return torch.randn(*size, device=device, dtype=torch.bfloat16) * 0.02
    h, q, kv, f = shape["hidden"], shape["heads"] * shape["head_dim"], shape["kv_heads"] * shape["head_dim"], shape["ffn"]
    layers = [dict(qkv=w(h, q + 2 * kv), o=w(q, h), gate_up=w(h, 2 * f), down=w(f, h),
                   norm1=torch.ones(h, device=device, dtype=torch.bfloat16),
                   norm2=torch.ones(h, device=device, dtype=torch.bfloat16)) for _ in range(shape["layers"])]
    return dict(layers=layers, table=w(shape["vocab"], h), head=w(h, shape["vocab"]),
                norm=torch.ones(h, device=device, dtype=torch.bfloat16))


def step(model, shape, tokens, caches, position):
    """One decode step of ``tokens`` (one a sequence) with ``position`` tokens cached: the logits."""
    b = tokens.shape[0]
    heads, kv_heads, d = shape["heads"], shape["kv_heads"], shape["head_dim"]
    group, h = heads // kv_heads, shape["hidden"]
    x = model["table"][tokens]                                       # (b, h)
    for layer, (k_cache, v_cache) in zip(model["layers"], caches):
        y = F.rms_norm(x, (h,), layer["norm1"]) @ layer["qkv"]
        q, k, v = y.split([heads * d, kv_heads * d, kv_heads * d], dim=-1)
        k_cache[:, :, position] = k.view(b, kv_heads, d)
        v_cache[:, :, position] = v.view(b, kv_heads, d)
        q = q.view(b, kv_heads, group, d)                            # a key/value head's queries as rows
        keys, values = k_cache[:, :, :position + 1], v_cache[:, :, :position + 1]
        a = F.scaled_dot_product_attention(q, keys, values)          # (b, kv_heads, group, d)
        x = x + a.reshape(b, heads * d) @ layer["o"]
        gate, up = (F.rms_norm(x, (h,), layer["norm2"]) @ layer["gate_up"]).chunk(2, dim=-1)
        x = x + (F.silu(gate) * up) @ layer["down"]
    return F.rms_norm(x, (h,), model["norm"]) @ model["head"]


def measure(shape, points, device) -> list[dict]:
    """Seconds of one decode step at each ``(batch, context)`` point."""
    model = weights(shape, device)
    rows = []
    for batch, context in points:
        row = dict(batch=batch, context=context)
        try:
            caches = [tuple(torch.zeros(batch, shape["kv_heads"], context + 1, shape["head_dim"], device=device,
                                        dtype=torch.bfloat16) for _ in range(2)) for _ in range(shape["layers"])]
            tokens = torch.randint(0, shape["vocab"], (batch,), device=device)
            with torch.no_grad():
                if device == "cuda":
                    stream = torch.cuda.Stream()
                    stream.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(stream):          # warm up off the default stream, then capture
                        for _ in range(2):
                            step(model, shape, tokens, caches, context)
                    torch.cuda.current_stream().wait_stream(stream)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        step(model, shape, tokens, caches, context)
                    row["seconds"] = seconds(graph.replay, device, reps=REPS)
                else:
                    row["seconds"] = seconds(lambda: step(model, shape, tokens, caches, context), device, reps=2)
            del caches
        except Exception as error:
            row["error"] = f"{type(error).__name__}: {error}"[:300]
        rows.append(row)
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def main(path, dry=False):
    device = "cpu" if dry else "cuda"
    shape, points = (TOY, ((1, 8), (4, 16))) if dry else (SHAPE, POINTS)
    facts = dict(torch=torch.__version__, date=time.strftime("%Y-%m-%d"))
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        facts.update(device=props.name, sms=props.multi_processor_count, cuda=torch.version.cuda)
    record = dict(machine=facts, shape=shape, decode=measure(shape, points, device))
    with open(path, "w") as out:
        json.dump(record, out, indent=1)
    for row in record["decode"]:
        print(row)


if __name__ == "__main__":
    main(sys.argv[1], dry="--dry" in sys.argv)
