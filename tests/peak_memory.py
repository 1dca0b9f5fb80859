"""Live storage bytes over one training step of a PyTorch model, measured op by op.

A ``TorchDispatchMode`` sees every operator PyTorch runs, forward, backward (the CPU autograd
engine runs on the calling thread) and the optimizer's; after each it records the bytes of every
storage still alive (weak references: a storage counts until PyTorch frees it), each storage
once however many tensors view it.  Tensors made before the step (parameters, optimizer state,
the inputs) are registered by the caller.  This is the CPU allocator's view without its own
rounding: the sum of ``untyped_storage().nbytes()`` of live storages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


@dataclass
class Sample:
    """Live bytes after one operator of one phase."""

    phase: str
    op: str
    live: int


@dataclass
class LiveBytes(TorchDispatchMode):
    """Tracks live storages; ``samples`` holds one ``Sample`` per operator run in the mode."""

    phase: str = "forward"
    samples: list = field(default_factory=list)
    _storages: dict = field(default_factory=dict)

    def __post_init__(self):
        super().__init__()

    def register(self, *tensors) -> None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                ref = self._storages.get(storage.data_ptr())
                if ref is None or ref[0].expired():
                    self._storages[storage.data_ptr()] = (StorageWeakRef(storage), storage.nbytes())

    def live(self) -> int:
        for key in [k for k, (ref, _) in self._storages.items() if ref.expired()]:
            del self._storages[key]
        return sum(n for _, n in self._storages.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.register(*tree_flatten(out)[0], *tree_flatten(args)[0])
        self.samples.append(Sample(self.phase, str(func), self.live()))
        return out

    def peak(self) -> Sample:
        """The first sample with the most live bytes."""
        return max(self.samples, key=lambda s: s.live)


def training_step(model, batch: dict, optimizer, watch=None) -> LiveBytes:
    """One forward, ``loss.backward()``, ``optimizer.step()`` and ``zero_grad()`` under the tracker,
    which knows the parameters, the optimizer's state and the batch beforehand; ``watch`` is
    handed the tracker before the step runs (module hooks read its samples)."""
    mode = LiveBytes()
    if watch is not None:
        watch(mode)
    mode.register(*model.parameters(), *batch.values())
    mode.register(*(v for state in optimizer.state.values() for v in state.values()))
    with mode:
        out = model(**batch)
        mode.phase = "backward"
        out.loss.backward()
        del out
        mode.phase = "optimizer"
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return mode


def steady_step(model, batch: dict, watch=None) -> LiveBytes:
    """The second of two steps of ``AdamW(foreach=False)`` (the first makes the optimizer's state);
    ``watch``: as ``training_step``'s, for both steps."""
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    training_step(model, batch, optimizer, watch)
    return training_step(model, batch, optimizer, watch)
