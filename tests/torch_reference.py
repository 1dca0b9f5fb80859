"""Cross-checks against PyTorch's own accounting (needs torch; the library never imports this).

Plain ``torch.nn`` reference implementations of our blocks, one device's
slice under tensor parallelism (``m1`` splits heads and ``f``), and three
counters that read PyTorch rather than us:

* ``count_flops``: ``torch.utils.flop_counter.FlopCounterMode``, forward and
  backward apart (it counts matrix products as ``2mnk`` and nothing else);
* ``saved_bytes``: every tensor autograd saves for backward
  (``saved_tensors_hooks``), unique storages counted once, parameters left out;
* ``parameter_count``: the ``numel`` of the parameters.

Where PyTorch and we count differently by design (see ``DIFFERENCES``), the
tests assert the difference exactly.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

DIFFERENCES = {
    "bias adds": "FlopCounterMode counts no bias adds (b l n forward, b l n for dB backward)",
    "elementwise": "FlopCounterMode counts no softmax, norm, activation, dropout, rotary or loss arithmetic",
    "dropout mask": "CPU dropout keeps a float mask: es_mask = es (CUDA's native dropout keeps 1-byte masks)",
    "token ids": "embedding backward keeps the int64 ids (8 b l bytes); we do not count them",
    "loss": "cross-entropy keeps int64 targets (8 b l bytes) besides the log-probabilities",
}
"""Where PyTorch's accounting and ours differ by design, each asserted exactly in the tests."""


class MLP(nn.Module):
    """``dropout(fc2(act(fc1(norm(x)))))`` with ``f/m1`` hidden units on this device."""

    def __init__(self, e, f, m1=1, gated=False, norm="layer", p=0.1, bias=True):
        super().__init__()
        self.norm = nn.LayerNorm(e) if norm == "layer" else nn.RMSNorm(e)
        self.gated, self.p = gated, p
        self.fc1 = nn.Linear(e, (2 if gated else 1) * f // m1, bias=bias)
        self.fc2 = nn.Linear(f // m1, e, bias=bias)

    def forward(self, x):
        y = self.fc1(self.norm(x))
        if self.gated:
            gate, up = y.chunk(2, dim=-1)
            y = F.silu(gate) * up
        else:
            y = F.gelu(y)                # no dropout after the activation (GPT-2, BERT, Megatron-LM)
        y = self.fc2(y)
        return F.dropout(y, self.p, self.training) if self.p else y


class Attention(nn.Module):
    """Materialised multi-head (or grouped-query) attention, ``h/m1`` heads on this device."""

    def __init__(self, e, h, m1=1, kv_heads=None, p=0.1, bias=True, norm="layer"):
        super().__init__()
        self.q, self.h, self.kv = e // h, h // m1, (kv_heads or h) // m1
        self.norm = nn.LayerNorm(e) if norm == "layer" else nn.RMSNorm(e)
        self.qkv = nn.Linear(e, (self.h + 2 * self.kv) * self.q, bias=bias)
        self.out = nn.Linear(self.h * self.q, e, bias=bias)
        self.p = p

    def forward(self, x):
        b, l, _ = x.shape
        y = self.qkv(self.norm(x))
        q, k, v = y.split([self.h * self.q, self.kv * self.q, self.kv * self.q], dim=-1)
        groups = self.h // self.kv
        # head-major copies, as the batched matmul of an unfused implementation makes them
        # (``clone``, not ``contiguous``, which returns a view when the layout happens to fit,
        # e.g. l = 1, and would pin the whole QKV output); grouped K and V are expanded to every
        # local query head (HF's repeat_kv)
        q = q.view(b, l, self.kv, groups, self.q).permute(0, 2, 3, 1, 4).clone()        # (b, kv, g, l, q)
        k = k.view(b, l, self.kv, 1, self.q).permute(0, 2, 3, 4, 1).expand(
            b, self.kv, groups, self.q, l).clone()                                      # (b, kv, g, q, l)
        v = v.view(b, l, self.kv, 1, self.q).permute(0, 2, 3, 1, 4).expand(
            b, self.kv, groups, l, self.q).clone()                                      # (b, kv, g, l, q)
        scores = torch.matmul(q, k) * (1 / math.sqrt(self.q))
        probs = F.dropout(torch.softmax(scores, dim=-1), self.p, self.training)
        c = torch.matmul(probs, v).permute(0, 3, 1, 2, 4).reshape(b, l, self.h * self.q)
        y = self.out(c)
        return F.dropout(y, self.p, self.training) if self.p else y


class GPT(nn.Module):
    """A small GPT: token and position embeddings, pre-norm layers, final norm, tied head, loss."""

    def __init__(self, vocab, positions, layers, e, h, f, p=0.1):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, e), nn.Embedding(positions, e)
        self.layers = nn.ModuleList(nn.ModuleList([Attention(e, h, p=p), MLP(e, f, p=p)]) for _ in range(layers))
        self.final = nn.LayerNorm(e)
        self.p = p

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
        x = F.dropout(x, self.p, self.training)
        for attention, mlp in self.layers:
            x = x + attention(x)
            x = x + mlp(x)
        logits = self.final(x) @ self.tokens.weight.t()
        return F.cross_entropy(logits.flatten(0, 1), ids.flatten())


class BERT(nn.Module):
    """A small BERT base model: word, position and token-type embeddings with a norm and
    dropout, layers (pre-norm, as our blocks; BERT's post-norm order changes no count), and
    the pooler on the first token."""

    def __init__(self, vocab, positions, types, layers, e, h, f):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, e), nn.Embedding(positions, e)
        self.types, self.norm = nn.Embedding(types, e), nn.LayerNorm(e)
        self.layers = nn.ModuleList(nn.ModuleList([Attention(e, h), MLP(e, f)]) for _ in range(layers))
        self.pooler = nn.Linear(e, e)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1])) + self.types(torch.zeros_like(ids))
        x = F.dropout(self.norm(x), 0.1, self.training)
        for attention, mlp in self.layers:
            x = x + attention(x)
            x = x + mlp(x)
        return torch.tanh(self.pooler(x[:, 0]))


def count_flops(module: nn.Module, *inputs) -> tuple[int, int]:
    """(forward, backward) FLOPs as ``FlopCounterMode`` counts them."""
    with FlopCounterMode(display=False) as forward:
        out = module(*inputs)
    with FlopCounterMode(display=False) as backward:
        out.sum().backward()
    return forward.get_total_flops(), backward.get_total_flops()


def saved_bytes(module: nn.Module, *inputs) -> int:
    """Bytes autograd keeps for backward: unique storages, parameters left out."""
    with saved_storages(module.parameters()) as kept:
        module(*inputs)
    return sum(kept.values())


@contextmanager
def saved_storages(parameters):
    """Inside the block, ``{storage address: bytes}`` of every storage autograd saves for
    backward, each counted once, the storages of ``parameters`` left out."""
    kept = {}
    params = {p.untyped_storage().data_ptr() for p in parameters}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield kept


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
