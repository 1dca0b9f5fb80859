"""How a layer's blocks are put together and run, as frozen values: ``Residual`` (where a
block sits on the residual stream), ``Wiring`` (how a layer places its blocks), ``Run``
(the attention kernel, context parallelism, element sizes and conventions every block of a
layer shares) and ``Experts`` (how a mixture of experts is placed on the ranks and fed).
``blocks.attention``, ``blocks.mlp``, ``blocks.moe``, ``blocks.transformer_layer``,
``blocks.latent_attention`` and the model's two ``ends`` take them instead of a keyword each.

>>> Wiring(parallel=True, norms=1).residual(branch=True)
Residual(norm='layer', dropouts=True, post_norm=False, branch=True, shared_input=False)
>>> Wiring(norms=1)
Traceback (most recent call last):
...
symbolic_cost.checks.InputError: norms must be one of (2, 4) for a sequential layer, got 1
"""

from __future__ import annotations

from dataclasses import dataclass

from sympy import Expr

from symbolic_cost import conventions as conv
from symbolic_cost.blocks.context import Context
from symbolic_cost.blocks.graphs import check_scopes
from symbolic_cost.blocks.specs import flags, one_of
from symbolic_cost.checks import InputError, check_rules, element_size, settle
from symbolic_cost.cost import exact
from symbolic_cost.ops.norm import NORMS

PARTS = ("layer", "attention", "mlp")
"""``Wiring.part``: what ``transformer_layer`` builds, the whole layer or one of its blocks."""
NORMS_PER_LAYER = {False: (2, 4), True: (1, 2)}
"""``Wiring.norms``: sequential 2 (pre- or post-norm) or 4 (Gemma 2 and 3's sandwich);
parallel 1 (GPT-J, Falcon-7B, Phi) or 2 (GPT-NeoX, Falcon-40B)."""

__all__ = ["Residual", "Wiring", "Run", "Experts", "PARTS", "NORMS_PER_LAYER", "check_expert_training"]


def _norm(kind) -> None:
    """Refuse a norm kind ``ops.norm.NORMS`` does not have."""
    if kind not in NORMS:
        raise InputError(f"norm must be one of {', '.join(NORMS)}, got {kind!r}", "norm")


@dataclass(frozen=True)
class Residual:
    """Where a block sits on the residual stream.

    * ``norm`` (a kind of ``ops.norm.NORMS``): the kind of the block's norms;
    * ``dropouts``: the closing dropout (``False``: the residual add closes the block) and,
      unless the block's own values say, its inner dropouts;
    * ``post_norm``: a norm of the output on the sequence shard (Gemma 2 and 3's four norms);
    * ``branch``: a parallel layer's branch, its last matmul unreduced and no closing row (the
      layer sums and reduces both branches once);
    * ``shared_input``: an MLP branch reading the attention branch's norm output (no norm row;
      its input gradient joins the attention's before their one reduction).
    """

    norm: str = "layer"
    dropouts: bool = True
    post_norm: bool = False
    branch: bool = False
    shared_input: bool = False

    def __post_init__(self):
        _norm(self.norm)
        flags(self, "dropouts", "post_norm", "branch", "shared_input")


@dataclass(frozen=True)
class Wiring:
    """How a layer puts its blocks on the residual stream, and which of them it builds.

    * ``norm``, ``dropouts``: as in ``Residual``, for every block of the layer;
    * ``norms`` (``NORMS_PER_LAYER``): 2 or 4 norms in a sequential layer, 1 or 2 in a
      parallel one;
    * ``parallel``: ``y = x + attention(n1(x)) + mlp(n2(x))`` (GPT-J, GPT-NeoX, Falcon, Phi);
    * ``cross``: the encoder tokens a cross-attention reads (T5's decoder; ``None``: none);
    * ``part`` (``PARTS``): the whole ``"layer"``, or only its ``"attention"`` or ``"mlp"``.
    """

    norm: str = "layer"
    dropouts: bool = True
    norms: int = 2
    parallel: bool = False
    cross: Expr | None = None
    part: str = "layer"

    def __post_init__(self):
        _norm(self.norm)
        flags(self, "dropouts", "parallel")
        one_of(self.part, "part", PARTS)
        allowed = NORMS_PER_LAYER[self.parallel]
        if self.norms not in allowed:
            raise InputError(f"norms must be one of {allowed} for a {'parallel' if self.parallel else 'sequential'} "
                             f"layer, got {self.norms!r}", "norms")

    def residual(self, **placement) -> Residual:
        """The ``Residual`` of one of the layer's blocks, placed by ``placement``."""
        return Residual(self.norm, self.dropouts, **placement)


@dataclass(frozen=True)
class Run:
    """How the blocks run, the same for every block of a layer.

    * ``flash``: one ``flash_attention`` kernel for the attention core;
    * ``context`` (a ``blocks.context.Context``): context parallelism of the attention;
    * ``es``, ``es_mask``: bytes of an element and of a dropout-mask element;
    * ``conventions``: a ``conventions.Conventions`` or a preset's name;
    * ``split_inputs``: under tensor parallelism each column-split product reduces its own input
      gradient (``Layout.entering``'s ``products``): ``q``, ``k`` and ``v``, and a gated MLP's
      ``gate`` and ``up``, are separate modules, each an allreduce in backward, as transformers'
      ``tp_plan`` (a ``DTensor.from_local`` per ``ColwiseParallel`` module) and DeepSpeed's AutoTP
      (a ``ColumnParallel`` per ``LinearLayer``) run them; Megatron-LM's fused ``qkv`` and ``fc1``
      reduce once each (``False``);
    * ``graphs``: the parts of the layer replayed from CUDA graphs (``blocks.graphs.SCOPES``):
      what they capture launches no kernel of its own.

    A block without attention reads only ``es``, ``es_mask``, ``conventions`` and ``graphs``.
    """

    flash: bool = False
    context: Context | None = None
    es: Expr = 2
    es_mask: Expr = 1
    conventions: conv.Conventions | str = conv.DEFAULT
    split_inputs: bool = False
    graphs: tuple = ()

    def __post_init__(self):
        flags(self, "flash", "split_inputs")
        object.__setattr__(self, "graphs", check_scopes(self.graphs))
        if self.context is not None and not isinstance(self.context, Context):
            raise InputError(f"context must be a blocks.context.Context, got {self.context!r}", "context")
        element_size(self.es, "es")
        element_size(self.es_mask, "es_mask")
        conv.get(self.conventions)

    @property
    def kw(self) -> dict:
        """The element sizes and conventions as the keywords of ``Layout.of``'s callers."""
        return dict(es=self.es, es_mask=self.es_mask, conventions=self.conventions)


@dataclass(frozen=True)
class Experts:
    """How the routed experts of an MoE block are placed and fed (``MoE`` says what they are).

    * ``ep``: the expert-parallel degree (``E/ep`` whole experts a rank, ranks ``etp`` apart);
    * ``etp``: the expert tensor-parallel degree (each expert's width ``f_x`` split over
      ``etp`` adjacent ranks);
    * ``capacity_factor``: ``C`` pads (or drops) every expert's rows to ``ceil(C t k / E)``
      (``None``: dropless);
    * ``imbalance``: the busiest rank's rows over the mean (``1 <= imbalance <= ep``);
    * ``replicated``: every tensor rank routes the same tokens (serving without sequence
      parallelism; ``blocks.moe``'s module docstring);
    * ``dispatcher``: how the tokens reach the experts' ranks (``DISPATCHERS``): ``"alltoall"``
      (Megatron-Core's all-to-all token dispatcher: every routed copy is sent to its expert's
      rank) or ``"flex"`` (``--moe-token-dispatcher-type flex`` with DeepEP or HybridEP: a token
      crosses the network once for each other NVLink domain holding one of its experts, and is
      forwarded inside that domain over NVLink; ``parallel.collectives.network_share``);
    * ``kernels``: what runs around the experts' products (``EXPERT_KERNELS``):
      ``"megatron-core"`` (training: Megatron-Core's ``TEGroupedMLP`` clamps a clamped gated
      unit's halves and adds the second product's bias outside its kernels, ``blocks.moe``'s
      ``expert_clamp`` and ``expert_bias``) or ``"fused"`` (a serving engine's fused MoE
      kernel, which does both inside its products).

    >>> Experts(ep=8, capacity_factor=0)
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: capacity_factor must be positive (or None: dropless), got 0
    """

    ep: Expr = 1
    etp: Expr = 1
    capacity_factor: Expr | None = None
    imbalance: Expr = 1
    replicated: bool = False
    dispatcher: str = "alltoall"
    kernels: str = "megatron-core"

    def __post_init__(self):
        settle(self, "ep", "etp", "capacity_factor", "imbalance")
        check_expert_training(self.ep, self.etp, self.capacity_factor, self.imbalance, imbalance_name="imbalance")
        flags(self, "replicated")
        one_of(self.dispatcher, "dispatcher", DISPATCHERS)
        one_of(self.kernels, "kernels", EXPERT_KERNELS)


EXPERT_KERNELS = ("megatron-core", "fused")
"""What runs around the routed experts' products (``Experts.kernels``): Megatron-Core's
``TEGroupedMLP`` (training) or a serving engine's fused MoE kernel."""

DISPATCHERS = ("alltoall", "flex")
"""The token dispatchers ``Experts`` models: Megatron-Core's ``--moe-token-dispatcher-type``
``alltoall`` and ``flex`` (DeepEP's or HybridEP's kernels: ``--moe-flex-dispatcher-backend``)."""


def check_dispatcher(experts: Experts) -> None:
    """Refuse the flex dispatcher on an expert grid of one rank (``etp = ep = 1``): it exchanges
    tokens over the grid's ``etp x ep`` ranks, and Megatron-Core's asserts ``TPxEP > 1``; there
    it would be ignored.  Checked where the experts meet a MoE layer (``blocks.moe.moe``).

    >>> check_dispatcher(Experts(ep=2, dispatcher="flex"))
    >>> check_dispatcher(Experts(dispatcher="flex"))
    Traceback (most recent call last):
    ...
    symbolic_cost.checks.InputError: dispatcher 'flex' exchanges tokens over the expert grid's etp x ep ranks, and etp = ep = 1 holds every expert on one rank (Megatron-Core: 'Flex token dispatcher requires TPxEP > 1'); it would be ignored
    """
    if experts.dispatcher == "flex" and experts.etp is not None and experts.ep * experts.etp == 1:
        raise InputError("dispatcher 'flex' exchanges tokens over the expert grid's etp x ep ranks, and etp = ep = 1 "
                         "holds every expert on one rank (Megatron-Core: 'Flex token dispatcher requires TPxEP > 1'); "
                         "it would be ignored", "dispatcher")


def check_expert_training(ep, etp, capacity_factor, imbalance, imbalance_name="expert_imbalance") -> None:
    """Refuse expert-parallel settings that cannot be: degrees that are not positive integers,
    a capacity factor that is not positive, an imbalance below 1 (the busiest rank receives at
    least the mean) or beside a capacity factor (which sets every rank's rows).  The one home of
    these refusals (``Training`` and ``Experts``), the imbalance named ``imbalance_name``."""
    check_rules(dict(ep=ep, **({} if etp is None else {"etp": etp})), ())
    factor = None if capacity_factor is None else exact(capacity_factor, "capacity_factor")
    if factor is not None and factor.is_positive is False:
        raise InputError(f"capacity_factor must be positive (or None: dropless), got {factor}", "capacity_factor")
    load = exact(imbalance, imbalance_name)
    if load.is_number and load < 1:
        raise InputError(f"{imbalance_name} must be at least 1 (the busiest rank's rows over the mean), got {load}",
                         imbalance_name)
    if factor is not None and load != 1:
        raise InputError(f"{imbalance_name}={load} with capacity_factor={factor}: a capacity pads (or drops) every "
                         f"expert's rows to ceil(C t k / E) whatever the routing, so the busiest rank receives what "
                         f"every rank does; give one of them", imbalance_name)
