"""torchtitan's Python configurations read without importing torchtitan.

Since 2026-02-23 (torchtitan 9810191, "Config System Refactor: TOML to Python Dataclass
Registry") a torchtitan run is a function returning ``Trainer.Config``: the bundled ones in
``torchtitan/models/<model>/config_registry.py``, the recipes in ``torchtitan_recipes/``, and a
user's own module, chosen with torchtitan's ``--module`` and ``--config``.  This module reads such a
function statically (``ast``; nothing of the file runs) into the sections of a job TOML, which
``models.torchtitan`` then reads with the rules it applies to the TOMLs (``python_setup``).

What the reader evaluates:

* a call of a dataclass (``Trainer.Config(...)``, ``ParallelismConfig(...)``, ``FullAC.Config()``,
  any name ending in ``Config``) with keyword arguments: a ``Built`` value of that class;
* ``model_registry(flavor, ...)``: the model of the module that defines it (``llama3`` for
  ``torchtitan/models/llama3``), its flavour and converters;
* another config function of the same module, or of a ``torchtitan.models.<model>.config_registry``
  or ``torchtitan_recipes`` module imported from the checkout the file sits in, without arguments
  (``config = llama3_8b()``);
* constants, lists, tuples, dicts, ``+ - * //`` on integers, names assigned in the function, and
  attribute assignments (``config.parallelism.tensor_parallel_degree = 2``); a section the
  function has not built takes its class's defaults when first assigned into.

Anything else (a call of another function, a subscript, a comparison) is kept as its source text
(``Unread``): accepted where the value changes no cost (a learning rate, a dataset), refused by
name where the reader needs it.  Statements other than assignments, returns, asserts, imports and
docstrings (``if``, ``for``, a helper called for its side effects) are refused, naming the line.

The two generations of the format (``GENERATIONS``) differ in how they state the batch and the
activation checkpointing; both become the TOML's keys (``sections``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from symbolic_cost.checks import InputError, file_text
from symbolic_cost.files import input_file
from symbolic_cost.models.torchtitan import DOCUMENT_MASK

GENERATIONS = ("torchtitan's Python configurations: the first generation (from 9810191, 2026-02-23: TrainingConfig's "
               "local_batch_size and seq_len, ActivationCheckpointConfig, model_converters; its selective mode a "
               "layer frequency until 114151a, 2026-03-23, op-level after) and the second (from "
               "73aed7f, 2026-08-20: num_tokens_per_microbatch_per_dp_rank and max_context_length, FullAC and "
               "SelectiveAC, converters given to model_registry), read up to b5bcd76 (2026-08-21)")

DEPTH = 16
"""How deep config functions may call each other (``config = base()``) before the reader refuses."""


@dataclass
class Built:
    """A dataclass value the configuration builds: its class (as written) and the fields it sets."""

    kind: str
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Unread:
    """A value the reader does not evaluate, by its source text, line and file."""

    text: str
    line: int
    where: str = ""


SECTIONS = {"training": ("TrainingConfig", {}), "parallelism": ("ParallelismConfig", {}),
            "compile": ("CompileConfig", {}), "activation_checkpoint": ("SelectiveAC.Config", {}),
            "comm": ("CommConfig", {}), "debug": ("DebugConfig", {}), "override": ("OverrideConfig", {"imports": []})}
"""``Trainer.Config``'s sections a function may assign into before building them, with the class
each defaults to (``Trainer.Config``'s ``default_factory``; selective AC its default policy) and the
defaults of the fields a function may change in place (``override.imports.append(...)``)."""


def refusal(what: str, line: int | None, why: str, name: str) -> InputError:
    """A refusal naming the construct by its first line (shortened) and its line number."""
    first = what.splitlines()[0] if what else "?"
    shown = first if len(first) <= 80 else first[:77] + "..."
    where = f" (line {line})" if line else ""
    return InputError(f"{name}: {shown}{where}: {why}", "--torchtitan")


def checkout(path: Path | None) -> Path | None:
    """The torchtitan checkout holding the file ``path``: the first folder above it with
    ``torchtitan/config/``."""
    for folder in path.resolve().parents if path is not None else ():
        if (folder / "torchtitan" / "config").is_dir():
            return folder
    return None


class Module:
    """One Python file of configurations: its functions, its imports, the model of its
    ``model_registry`` and the checkout it sits in (to follow imports of other config modules)."""

    def __init__(self, text: str, path: Path | None, name: str):
        self.name, self.path = name, path
        try:
            tree = ast.parse(text)
        except SyntaxError as error:
            raise InputError(f"{name}: not Python ({error.msg}, line {error.lineno})", "--torchtitan") from None
        except (RecursionError, MemoryError, ValueError):
            raise InputError(f"{name}: nested too deeply to be a torchtitan configuration", "--torchtitan") from None
        self.source = text
        self.functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
        self.imports: dict[str, tuple[str, str]] = {}
        for statement in tree.body:
            self.imported(statement)

    def imported(self, statement) -> None:
        """Remember what an ``import`` binds: ``name -> (module, attribute)``."""
        if isinstance(statement, ast.ImportFrom):
            module = "." * statement.level + (statement.module or "")
            for alias in statement.names:
                self.imports[alias.asname or alias.name] = (module, alias.name)

    def model(self, module: str) -> str | None:
        """The model whose ``model_registry`` an import names: ``torchtitan.models.<model>`` or, from
        a ``config_registry.py`` inside it, the package itself (``from . import model_registry``)."""
        parts = module.split(".")
        if module.startswith("torchtitan.models.") and len(parts) >= 3:
            return parts[2]
        folder = self.path.resolve().parent if self.path is not None else None
        if module == "." and folder is not None and folder.parent.name == "models":
            return folder.name          # torchtitan/models/<model>/config_registry.py
        return None

    def checkout(self) -> Path | None:
        return checkout(self.path)

    def experiment(self, module: str) -> str | None:
        """The torchtitan experiment (``torchtitan/experiments/<name>/``) whose ``model_registry`` an import
        names: ``torchtitan.experiments.<name>...``, or ``.`` from a file inside that folder."""
        parts = module.split(".")
        if module.startswith("torchtitan.experiments.") and len(parts) >= 3:
            return parts[2]
        folders = self.path.resolve().parent.parts if self.path is not None and module.startswith(".") else ()
        for at in range(len(folders) - 2):
            if folders[at:at + 2] == ("torchtitan", "experiments"):
                return folders[at + 2]
        return None


class Reader:
    """Evaluates config functions of ``Module`` s (see the module docstring)."""

    def __init__(self):
        self.modules: dict[str, Module] = {}     # the checkout's modules opened, by path

    def call(self, module: Module, function: str, depth: int = 0, args=(), keywords=None):
        """What ``function`` of ``module`` returns, its parameters bound to ``args`` and ``keywords``
        (their defaults otherwise); ``None`` where it returns nothing (a helper run for its effect)."""
        if depth > DEPTH:
            raise refusal(f"{function}()", None, f"config functions call each other more than {DEPTH} deep", module.name)
        node = module.functions.get(function)
        if node is None:
            known = ", ".join(n for n in module.functions if not n.startswith("_")) or "none"
            raise InputError(f"{module.name}: no function {function!r} (its functions: {known})",
                             "--torchtitan-config")
        scope = self.bind(module, node, list(args), dict(keywords or {}), depth)
        done, value = self.block(module, node.body, scope, depth)
        return value if done else None

    def bind(self, module: Module, node, args: list, keywords: dict, depth: int) -> dict:
        """The parameters of ``node`` bound as Python binds them (no ``*args`` or ``**kwargs``)."""
        a = node.args
        if a.vararg or a.kwarg:
            raise refusal(f"def {node.name}(...)", node.lineno, "*args and **kwargs are not read", module.name)
        positional = a.posonlyargs + a.args
        defaults = dict(zip([p.arg for p in positional[len(positional) - len(a.defaults):]], a.defaults))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        if len(args) > len(positional):
            raise refusal(f"{node.name}(...)", node.lineno, "called with more arguments than it takes", module.name)
        scope = dict(zip([p.arg for p in positional], args))
        for parameter in positional[len(args):] + a.kwonlyargs:
            name = parameter.arg
            if name in keywords:
                scope[name] = keywords.pop(name)
            elif name in defaults:
                scope[name] = self.value(module, defaults[name], {}, depth)
            else:
                raise refusal(f"def {node.name}(...)", node.lineno, f"its parameter {name} has no value (torchtitan "
                              f"calls a configuration with none)", module.name)
        if keywords:
            raise refusal(f"{node.name}(...)", node.lineno, f"no parameter {next(iter(keywords))}", module.name)
        return scope

    def block(self, module: Module, statements, scope: dict, depth: int):
        """``(returned, value)`` of a run of statements."""
        for statement in statements:
            done, value = self.statement(module, statement, scope, depth)
            if done:
                return True, value
        return False, None

    def statement(self, module: Module, s, scope: dict, depth: int):
        """``(returned, value)`` of one statement of a config function: assignments, returns, imports,
        asserts; ``if`` on a value the reader knows, ``for`` over a list it knows, a list's
        ``append`` and a helper called for its effect on its arguments."""
        if isinstance(s, ast.Return):
            return True, None if s.value is None else self.value(module, s.value, scope, depth)
        if isinstance(s, (ast.Assert, ast.Pass)) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)):
            return False, None
        if isinstance(s, ast.ImportFrom):
            module.imported(s)
            return False, None
        if isinstance(s, ast.FunctionDef):       # a local helper (an SFT sample formatter): never a cost
            scope[s.name] = Unread(f"def {s.name}", s.lineno, module.name)
            return False, None
        if isinstance(s, ast.If):
            test = self.value(module, s.test, scope, depth)
            if isinstance(test, (bool, type(None))):
                return self.block(module, s.body if test else s.orelse, scope, depth)
        if isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse:
            items = self.value(module, s.iter, scope, depth)
            if isinstance(items, list):
                for item in items:
                    scope[s.target.id] = item
                    done, value = self.block(module, s.body, scope, depth)
                    if done:
                        return True, value
                return False, None
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and self.effect(module, s.value, scope, depth):
            return False, None
        target, value = self.assignment(s)
        if target is None:
            raise refusal(ast.get_source_segment(module.source, s) or type(s).__name__, s.lineno,
                          "a statement the reader does not follow (it reads assignments, returns, imports, and if "
                          "and for on values it knows); write the configuration without it", module.name)
        if value is not None:
            self.assign(module, target, self.value(module, value, scope, depth), scope, depth)
        return False, None

    def effect(self, module: Module, node, scope: dict, depth: int) -> bool:
        """Run a call made for its effect: ``list.append(value)`` or a helper of the checkout."""
        if isinstance(node.func, ast.Attribute) and node.func.attr == "append" and len(node.args) == 1:
            owner = self.value(module, node.func.value, scope, depth)
            if isinstance(owner, list):
                owner.append(self.value(module, node.args[0], scope, depth))
                return True
            return False
        target = self.function(module, ast.get_source_segment(module.source, node.func) or "")
        if target is None:
            return False
        args = [self.value(module, a, scope, depth) for a in node.args]
        keywords = {k.arg: self.value(module, k.value, scope, depth) for k in node.keywords if k.arg is not None}
        self.call(target[0], target[1], depth + 1, args, keywords)
        return True

    @staticmethod
    def assignment(s):
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            return s.targets[0], s.value
        if isinstance(s, ast.AnnAssign):
            return s.target, s.value
        return None, None

    def assign(self, module: Module, target, value, scope: dict, depth: int) -> None:
        if isinstance(target, ast.Name):
            scope[target.id] = value
            return
        if isinstance(target, ast.Attribute):
            owner = self.value(module, target.value, scope, depth)
            if isinstance(owner, Built):
                owner.fields[target.attr] = value
                return
            if isinstance(owner, Unread):
                raise refusal(owner.text, owner.line or target.lineno, "a value the reader does not follow (a call of "
                              "a function outside the file and the checkout it sits in), so it cannot set its fields",
                              owner.where or module.name)
        raise refusal(ast.get_source_segment(module.source, target) or "an assignment", target.lineno,
                      "an assignment the reader does not follow", module.name)

    def value(self, module: Module, node, scope: dict, depth: int):
        """The value of an expression: a constant, a ``Built``, a list, or ``Unread``."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(module, e, scope, depth) for e in node.elts]
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {self.value(module, k, scope, depth): self.value(module, v, scope, depth)
                    for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Name) and node.id in scope:
            return scope[node.id]
        if isinstance(node, ast.Attribute):
            owner = self.value(module, node.value, scope, depth)
            if isinstance(owner, Built):
                return self.section(owner, node.attr)
            if isinstance(owner, Unread):       # named by what the reader could not follow
                return owner
        if isinstance(node, ast.BinOp):
            return self.arithmetic(module, node, scope, depth)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(module, node.operand, scope, depth)
            if isinstance(inner, int) and not isinstance(inner, bool):
                return -inner
        if isinstance(node, ast.Call):
            return self.called(module, node, scope, depth)
        return self.unread(module, node)

    @staticmethod
    def section(owner: Built, attr: str):
        """``owner.attr``: the field set, else (on ``Trainer.Config``) the section with its defaults."""
        if attr not in owner.fields and owner.kind == "Trainer.Config" and attr in SECTIONS:
            kind, defaults = SECTIONS[attr]
            owner.fields[attr] = Built(kind, {k: list(v) for k, v in defaults.items()})
        return owner.fields.get(attr, Unread(f"{owner.kind}.{attr}", 0))

    def arithmetic(self, module: Module, node, scope: dict, depth: int):
        left, right = self.value(module, node.left, scope, depth), self.value(module, node.right, scope, depth)
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right))
        operations = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                      ast.FloorDiv: lambda a, b: a // b if b else None}
        result = operations[type(node.op)](left, right) if ints and type(node.op) in operations else None
        if result is None or abs(result) > 2**62:        # bounded: a count, never a large power
            return self.unread(module, node)
        return result

    def called(self, module: Module, node, scope: dict, depth: int):
        callee = ast.get_source_segment(module.source, node.func) or ""
        keywords = {k.arg: self.value(module, k.value, scope, depth) for k in node.keywords if k.arg is not None}
        if callee.endswith("Config") and not node.args and len(keywords) == len(node.keywords):
            return Built(callee, keywords)
        if callee == "model_registry" and node.args:
            return self.model_spec(module, node, keywords, scope, depth)
        if callee == "default_adamw":
            return Built("OptimizersContainer.Config", dict(keywords, name="AdamW"))
        target = self.function(module, callee)
        if target is not None and len(keywords) == len(node.keywords):
            args = [self.value(module, a, scope, depth) for a in node.args]
            return self.call(target[0], target[1], depth + 1, args, keywords)
        return self.unread(module, node)

    def model_spec(self, module: Module, node, keywords: dict, scope: dict, depth: int) -> Built:
        source = module.imports.get("model_registry", (None, None))[0]
        model = module.model(source) if source is not None else None
        experiment = module.experiment(source) if model is None and source is not None else None
        if experiment is not None:
            raise refusal("model_registry(...)", node.lineno, f"the model_registry of torchtitan/experiments/"
                          f"{experiment}: {EXPERIMENTS.get(experiment, OTHER_EXPERIMENT)}", module.name)
        if model is None and source == ".":
            raise refusal("model_registry(...)", node.lineno, "model_registry comes from '.', the package the file "
                          "sits in, but the file is not in a torchtitan checkout's torchtitan/models/<model>/ "
                          "folder; read it where the checkout keeps it", module.name)
        if model is None:
            raise refusal("model_registry(...)", node.lineno, "the reader finds the model from an import of "
                          "model_registry from torchtitan.models.<model> (or . inside it)", module.name)
        flavor = self.value(module, node.args[0], scope, depth)
        return Built("ModelSpec", dict(keywords, name=model, flavor=flavor, converters_given="converters" in keywords))

    def function(self, module: Module, name: str) -> tuple[Module, str] | None:
        """The config function ``name`` stands for: one of ``module``'s, or one imported from a
        config module of the checkout."""
        if name in module.functions:
            return module, name
        if name not in module.imports:
            return None
        source, attribute = module.imports[name]
        path = self.locate(module, source)
        if path is None:
            return None
        key = str(path)
        if key not in self.modules:
            self.modules[key] = Module(input_file(path, "--torchtitan"), path, path.name)
        return self.modules[key], attribute

    def locate(self, module: Module, source: str) -> Path | None:
        """The file of a config module ``source`` inside the checkout (None elsewhere)."""
        if not (source.startswith("torchtitan.models.") or source.startswith("torchtitan_recipes")
                or source.startswith(".")):
            return None
        if source.startswith("."):
            if module.path is None:
                return None
            base = module.path.resolve().parent
            for _ in range(len(source) - len(source.lstrip(".")) - 1):
                base = base.parent
            path = base.joinpath(*source.lstrip(".").split(".")) if source.lstrip(".") else base
        else:
            root = module.checkout()
            if root is None:
                raise InputError(f"{module.name}: imports {source}, which the reader opens from the torchtitan "
                                 f"checkout the file sits in; this file is not in one", "--torchtitan")
            path = root.joinpath(*source.split("."))
        path = path.with_suffix(".py") if not path.is_dir() else path / "__init__.py"
        return path if path.is_file() else None

    @staticmethod
    def unread(module: Module, node) -> Unread:
        return Unread(ast.get_source_segment(module.source, node) or type(node).__name__, getattr(node, "lineno", 0),
                      module.name)


EXPERIMENTS = {
    "torchft": "fault tolerance (torchft: replica groups that join and leave the job, DiLoCo's semi-synchronous "
               "steps and fragments, its FaultTolerantTrainer) is not modelled",
}
"""torchtitan's experiments (``torchtitan/experiments/<name>/``) whose model registries build a trainer the
library does not model, with what each adds; the others are refused as ``OTHER_EXPERIMENT``."""
OTHER_EXPERIMENT = "an experiment's own model registry and trainer (its parallelisation and steps) are not read"


def evaluate(text: str, path: Path | None, name: str, function: str) -> Built:
    """The ``Trainer.Config`` that ``function`` of the file returns (refused otherwise)."""
    module = Module(text, path, name)
    try:
        value = Reader().call(module, function, args=(), keywords={})
    except RecursionError:
        raise InputError(f"{name}: nested too deeply to be a torchtitan configuration", "--torchtitan") from None
    if not isinstance(value, Built) or value.kind != "Trainer.Config":
        raise InputError(f"{name}: {function}() returns {getattr(value, 'text', value)!r}, not a Trainer.Config",
                         "--torchtitan-config")
    return value


NO_COST = {"hf_assets_path", "dump_folder", "profiler", "profiling", "metrics", "tokenizer", "dataloader",
           "lr_scheduler", "checkpoint", "comm", "validator", "debug"}
"""``Trainer.Config`` fields that change no count (logging, data, checkpoints, the learning rate's
schedule, seeds)."""

LOSSES = ("ChunkedLossWrapper.Config", "CrossEntropyLoss.Config", "BaseLoss.Config", "ChunkedCELoss.Config")
"""The losses read: cross-entropy over the vocabulary, chunked or not (the same FLOPs and bytes
moved; a chunked one, ``CHUNKED``, keeps one chunk's logits alive at a time: ``Training.loss_chunks``)."""

CHUNKED = ("ChunkedLossWrapper.Config", "ChunkedCELoss.Config")
"""The losses that run the LM head and the loss a chunk of the sequence at a time, each chunk's
backward before the next (``num_chunks``, 8 unless given, in both: torchtitan 786e26f and b5bcd76)."""

DROPPED = {
    "training": {"disable_cuda_graphs", "num_tokens_per_microbatch_per_dp_rank", "num_tokens_per_train_step",
                 "max_context_length"},
    "parallelism": {"spmd_backend", "enable_fsdp_symm_mem", "context_parallel_ptrr_mask_key", "pipeline_parallel_expert_parallel_overlap",
                    "num_pp_microbatches", "enable_sequence_parallel"},
    "compile": {"enable_async_tensor_parallel"},
}
"""Fields of the Python generations with no TOML key: no cost (CUDA graphs, the SPMD backend, the
load balancer), or turned into the TOML's keys by ``sections`` (the token counts, the pipeline's
micro-batches, async TP)."""

FUSED_QKV = ("llama3", "qwen3")
"""The models whose Python configurations of the second generation build q, k and v as one product
by default (their ``fuse_qkv=True`` since 3396a4b, 2026-06-24; a flavour named ``non_fused`` turns
it off)."""
AC_MODES = {"FullAC.Config": {"mode": "full"}, "SelectiveAC.Config": {"mode": "selective", "selective_ac_option": "op"},
            "MemoryBudgetAC.Config": {"mode": "memory_budget"}}
"""The second generation's activation-checkpointing classes as the TOML's ``mode`` (its selective
policy is the op-level one: ``activation_checkpoint.py``'s ``SelectiveAC``)."""


def _fields(value: Built, section: str, name: str) -> dict:
    """The fields of a section, its Python-only ones dropped; a value the reader did not evaluate
    is refused where the reader reads the key, dropped where the key changes no cost."""
    from symbolic_cost.models.torchtitan_keys import READ
    out = {}
    for key, v in value.fields.items():
        if key in DROPPED.get(section, ()):
            continue
        if isinstance(v, (Unread, Built)):
            if key in READ.get(section, ()):
                shown = v.text if isinstance(v, Unread) else f"{v.kind}(...)"
                raise InputError(f"{name}: {section}.{key} = {shown}: the reader does not evaluate it; write the "
                                 f"value", f"{section}.{key}")
            continue
        out[key] = v
    return out


def mtp_layers(trainer: Built) -> int:
    """DeepSeek's multi-token-prediction modules that ``model_registry(num_mtp_layers=...)`` builds."""
    spec = trainer.fields.get("model_spec")
    count = spec.fields.get("num_mtp_layers", 0) if isinstance(spec, Built) else 0
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InputError(f"num_mtp_layers = {getattr(count, 'text', count)!r}: a whole number, written as one",
                         "num_mtp_layers")
    return count


def sections(trainer: Built, name: str, notes: list, frequency: bool | None = None) -> dict:
    """The job TOML's sections that ``trainer`` (a ``Trainer.Config``) stands for; ``frequency``
    as ``layer_frequency`` finds it in the file's checkout."""
    data, f = {}, trainer.fields
    for key, value in f.items():
        if key in NO_COST or key in ("model_spec", "model_converters", "training", "parallelism", "compile",
                                     "activation_checkpoint", "optimizer", "loss", "override"):
            continue
        raise InputError(f"{name}: Trainer.Config {key}=...: a field this reader does not read (it may change the "
                         f"cost)", key)
    data["model"] = _model(f.get("model_spec"), f.get("model_converters"), data, name, notes)
    for section in ("training", "parallelism", "compile"):
        value = f.get(section)
        if isinstance(value, Built):
            data[section] = _fields(value, section, name)
        elif section in f:          # unread, it would leave the section at its defaults, silently
            shown = (value.text.splitlines() or [""])[0][:80] + " ..." if isinstance(value, Unread) else repr(value)
            raise InputError(f"{name}: {section} = {shown}: the reader does not evaluate it (a call it does not "
                             f"follow, arguments by position or **, a keyword given twice); write the "
                             f"section's Config(...) with its values as keywords", section)
    data["activation_checkpoint"] = _checkpointing(f.get("activation_checkpoint", DEFAULT_AC[generation(f)]), name,
                                                   frequency)
    data["optimizer"] = _optimizer(f.get("optimizer"), name)
    data["loss_chunks"] = _loss(f.get("loss"), mtp_layers(trainer), name)
    _override(f.get("override"), notes)
    _batch(f, data, name)
    return data


REGISTRY = {"llama3": ("attn_backend", "tp_gemm_backend"),
            "deepseek_v3": ("attn_backend", "moe_comm_backend", "non_blocking_capacity_factor", "num_mtp_layers"),
            "qwen3": ("attn_backend", "moe_comm_backend"),
            "gpt_oss": ("attn_backend", "moe_comm_backend")}
"""The arguments of each model's ``model_registry`` the reader reads (their defaults: flex attention,
GPT-OSS's varlen, ``ATTENTION_DEFAULT``; the standard all-to-all, no MTP modules)."""

ATTENTION_DEFAULT = {"gpt_oss": "varlen"}
"""``model_registry``'s ``attn_backend`` where a model's is not flex (``gpt_oss/__init__.py``: varlen)."""

CONVERTERS = {"Float8LinearConverter.Config": "float8", "MXFP8LinearConverter.Config": "mx",
              "NVFP4LinearConverter.Config": "nvfp4"}
"""Converter classes by the TOML's name for them (``[model] converters``); any other is named by its
class, which ``models.torchtitan.float8`` refuses."""


def _model(spec, converters_container, data: dict, name: str, notes: list) -> dict:
    """``[model]`` (and ``[float8]``) from ``model_registry(flavor, ...)``: the model, its flavour,
    its converters (in the call, the second generation, whose float8 is row-wise unless named;
    or in ``model_converters``, the first, tensor-wise unless named)."""
    if not isinstance(spec, Built) or spec.kind != "ModelSpec":
        raise InputError(f"{name}: the Trainer.Config has no model_spec=model_registry(...) the reader sees",
                         "model_spec")
    fields = spec.fields
    if not isinstance(fields["flavor"], str):
        raise InputError(f"{name}: model_registry({getattr(fields['flavor'], 'text', fields['flavor'])!r}): the "
                         f"reader reads a flavour written as a string", "model_registry")
    model = dict(name=fields["name"], flavor=fields["flavor"])
    for key, value in fields.items():
        if key not in ("name", "flavor", "converters", "converters_given") + REGISTRY.get(fields["name"], ()):
            raise InputError(f"{name}: {fields['name']}'s model_registry(..., {key}=...): an argument the reader does "
                             f"not read", f"model_registry {key}")
    if fields.get("non_blocking_capacity_factor") is not None:
        raise InputError(f"{name}: non_blocking_capacity_factor={fields['non_blocking_capacity_factor']}: HybridEP's "
                         f"non-blocking dispatch into a buffer of fixed capacity (tokens x EP x min(local experts, "
                         f"top-k) x the factor rows, dropping any beyond) is not modelled: its memory and drops "
                         f"would be missed; leave it out (blocking dispatch)",
                         "non_blocking_capacity_factor")
    if fields.get("moe_comm_backend", "standard") != "standard":    # read with [parallelism]'s backend
        model["moe_comm_backend"] = fields["moe_comm_backend"]
    backend = fields.get("attn_backend", ATTENTION_DEFAULT.get(fields["name"], "flex"))
    if backend == "varlen" or str(fields["flavor"]).endswith("_attn"):
        notes.append(DOCUMENT_MASK)
    if fields.get("tp_gemm_backend", "default") != "default":
        notes.append(f"tp_gemm_backend {fields['tp_gemm_backend']!r} folds the attention's TP collectives into its "
                     f"products; not counted (the collectives are counted exposed or behind compute as --overlap says)")
    given = fields.get("converters") if fields.get("converters_given") else \
        converters_container.fields.get("converters") if isinstance(converters_container, Built) else None
    if given in (None, []):
        return model
    if not isinstance(given, list) or not all(isinstance(c, Built) for c in given):
        raise InputError(f"{name}: converters {getattr(given, 'text', given)!r}: the reader reads a list of converter "
                         f"configurations", "converters")
    model["converters"] = [CONVERTERS.get(c.kind, c.kind) for c in given]
    float8 = next((c for c in given if c.kind == "Float8LinearConverter.Config"), None)
    if float8 is not None:
        data["float8"] = _float8(float8, fields.get("converters_given"))
    mx = next((c for c in given if c.kind == "MXFP8LinearConverter.Config"), None)
    if mx is not None:      # its fqns (every Linear when empty); model_compile_enabled changes no count
        fqns = mx.fields.get("fqns", [])
        data["mx"] = {"converter": "MXFP8LinearConverter", **({} if isinstance(fqns, (Unread, Built)) else {"fqns": fqns})}
    return model


def _float8(converter: Built, second: bool) -> dict:
    """``[float8]``: the converter's recipe (its default: row-wise in the second generation,
    tensor-wise in the first), filter (the head, ``lm_head`` since the second, as the TOML's
    ``output``), FSDP float8 gathers and emulation."""
    f = converter.fields
    recipe = f.get("recipe_name") or ("rowwise" if second else "tensorwise")
    filtered = ["output" if q == "lm_head" else q for q in f.get("filter_fqns", [])] \
        if isinstance(f.get("filter_fqns", []), list) else f["filter_fqns"]
    out = dict(recipe_name=recipe, filter_fqns=filtered, emulate=f.get("emulate", False))
    if "enable_fsdp_float8_all_gather" in f:
        out["enable_fsdp_float8_all_gather"] = f["enable_fsdp_float8_all_gather"]
    return {k: v for k, v in out.items() if not isinstance(v, (Unread, Built))}


DEFAULT_AC = {1: Built("ActivationCheckpointConfig"), 2: Built("SelectiveAC.Config")}
"""``Trainer.Config``'s activation checkpointing when the function sets none, by generation."""


def generation(f: dict) -> int:
    """The generation of a ``Trainer.Config``'s fields: 1 where they hold a field only the first has
    (``model_converters``, ``profiling``, ``ActivationCheckpointConfig``, the batch as
    ``local_batch_size`` and ``seq_len``, ``pipeline_parallel_microbatch_size``), else 2."""
    training = f["training"].fields if isinstance(f.get("training"), Built) else {}
    parallelism = f["parallelism"].fields if isinstance(f.get("parallelism"), Built) else {}
    first = ("model_converters" in f or "profiling" in f or GEN1_BATCH & set(training)
             or "pipeline_parallel_microbatch_size" in parallelism
             or getattr(f.get("activation_checkpoint"), "kind", None) == "ActivationCheckpointConfig")
    return 1 if first else 2


def _checkpointing(value, name: str, frequency: bool | None) -> dict:
    """``[activation_checkpoint]``: the first generation's ``ActivationCheckpointConfig(mode=...)``
    or the second's classes (``AC_MODES``); ``None``, none.  ``frequency`` says whether the
    checkout's ``ActivationCheckpointConfig`` still has ``selective_ac_option`` (see
    ``layer_frequency``): without it, ``mode="selective"`` is the op-level policy."""
    if value is None:
        return {"mode": "none"}
    if isinstance(value, Built) and value.kind == "ActivationCheckpointConfig":
        read = {k: v for k, v in _fields(value, "activation_checkpoint", name).items()
                if k in ("mode", "selective_ac_option")}
        return _selective(read, name, frequency) if read.get("mode", "selective") == "selective" else read
    if isinstance(value, Built) and value.kind in AC_MODES:
        forced = value.fields.get("force_recompute_mm_shapes_by_fqns", ["moe.router.gate"])
        if forced != ["moe.router.gate"]:
            raise InputError(f"{name}: SelectiveAC.Config(force_recompute_mm_shapes_by_fqns={forced!r}): products "
                             f"recomputed by shape are not read", "force_recompute_mm_shapes_by_fqns")
        return dict(AC_MODES[value.kind])
    shown = value.text if isinstance(value, Unread) else getattr(value, "kind", value)
    raise InputError(f"{name}: activation_checkpoint = {shown}: the reader reads FullAC.Config, SelectiveAC.Config "
                     f"and ActivationCheckpointConfig", "activation_checkpoint")


def _selective(read: dict, name: str, frequency: bool | None) -> dict:
    """``ActivationCheckpointConfig(mode="selective")`` as the checkout runs it: its
    ``selective_ac_option`` (a layer frequency, ``"2"`` by default, or ``"op"``) where the class
    has that field, the op-level policy where it does not (torchtitan 114151a, 2026-03-23, removed
    the layer frequency)."""
    if frequency is None:
        raise InputError(f"{name}: ActivationCheckpointConfig(mode=\"selective\") is a layer frequency or the "
                         f"op-level policy depending on the torchtitan it runs in (114151a, 2026-03-23, removed "
                         f"selective_ac_option), and torchtitan/config/configs.py of the file's checkout could "
                         f"not be read: read the file where its checkout keeps it", "activation_checkpoint")
    if frequency:
        return read
    if "selective_ac_option" in read:
        raise InputError(f"{name}: ActivationCheckpointConfig(selective_ac_option=...): the checkout's "
                         f"ActivationCheckpointConfig has no such field (removed in 114151a, 2026-03-23), so "
                         f"torchtitan would refuse it", "selective_ac_option")
    return dict(read, mode="selective", selective_ac_option="op")


def layer_frequency(checkout: Path | None) -> bool | None:
    """Whether ``ActivationCheckpointConfig`` in the checkout's ``torchtitan/config/configs.py``
    has the field ``selective_ac_option``; ``None`` where that file cannot be read or holds no
    such class."""
    path = checkout / "torchtitan" / "config" / "configs.py" if checkout is not None else None
    try:
        tree = ast.parse(path.read_text()) if path is not None else None
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.ClassDef) and node.name == "ActivationCheckpointConfig":
            return any(isinstance(item, ast.AnnAssign) and getattr(item.target, "id", None) == "selective_ac_option"
                       for item in node.body)
    return None


def _optimizer(value, name: str) -> dict:
    """``[optimizer] name``: ``default_adamw(...)`` or ``OptimizersContainer.Config(name=...)``
    (AdamW by default), with its ``implementation`` (``models.torchtitan.IMPLEMENTATIONS``)."""
    if value is None:
        return {}
    if isinstance(value, Built) and value.kind == "OptimizersContainer.Config":
        return {k: v for k, v in value.fields.items() if k in ("name", "early_step_in_backward", "implementation")}
    shown = value.text if isinstance(value, Unread) else getattr(value, "kind", value)
    raise InputError(f"{name}: optimizer = {shown}: the reader reads default_adamw(...) and "
                     f"OptimizersContainer.Config(name=...)", "optimizer")


def _loss(value, mtp: int, name: str) -> int:
    """The chunks the loss runs in (``CHUNKED``; 1 otherwise); refuse a loss other than
    cross-entropy (``LOSSES``), and DeepSeek's MTP loss (``MTPLoss``) other than beside the
    model's MTP modules (``num_mtp_layers``), which it trains."""
    inner = value.fields.get("loss_fn") if isinstance(value, Built) and value.kind == LOSSES[0] else None
    multi = isinstance(value, Built) and value.kind == "MTPLoss.Config"
    if multi != (mtp > 0):
        raise InputError(f"{name}: num_mtp_layers={mtp} with loss {getattr(value, 'kind', 'cross-entropy')}: the MTP "
                         f"modules and MTPLoss go together", "loss")
    for loss in (() if multi else (value, inner)):
        if loss is not None and not (isinstance(loss, Built) and loss.kind in LOSSES):
            shown = loss.text if isinstance(loss, Unread) else getattr(loss, "kind", loss)
            raise InputError(f"{name}: loss = {shown}: the reader reads cross-entropy ({', '.join(LOSSES)}) and "
                             f"MTPLoss beside MTP modules", "loss")
    if not (isinstance(value, Built) and value.kind in CHUNKED):
        return 1
    chunks = value.fields.get("num_chunks", 8)
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise InputError(f"{name}: num_chunks = {getattr(chunks, 'text', chunks)!r}: a positive whole number, "
                         f"written as one", "num_chunks")
    return chunks


def _override(value, notes: list) -> None:
    if isinstance(value, Built) and value.fields.get("imports"):
        notes.append(f"override imports {value.fields['imports']}: kernels swapped for fused ones, counted as the "
                     f"operations they replace")


GEN1_BATCH = {"local_batch_size", "batch_size", "global_batch_size", "seq_len"}


def _batch(f: dict, data: dict, name: str) -> None:
    """The batch as the TOML states it.  The second generation counts tokens: a forward of one
    data-parallel rank takes ``num_tokens_per_microbatch_per_dp_rank`` tokens in rows of
    ``max_context_length`` (its micro-batch), ``num_pp_microbatches`` of them a pipeline step
    under pipelining, and ``num_tokens_per_train_step`` (default: one such step on every
    data-parallel rank) the whole step (torchtitan's ``Trainer.__init__``)."""
    training = f["training"].fields if isinstance(f.get("training"), Built) else {}
    parallelism = f["parallelism"].fields if isinstance(f.get("parallelism"), Built) else {}
    if not isinstance(parallelism.get("enable_sequence_parallel", True), bool):
        raise InputError(f"{name}: enable_sequence_parallel must be True or False", "enable_sequence_parallel")
    compiled = f["compile"].fields if isinstance(f.get("compile"), Built) else {}
    if "enable_async_tensor_parallel" in compiled:
        data.setdefault("parallelism", {})["enable_async_tensor_parallel"] = compiled["enable_async_tensor_parallel"]
    if generation(f) == 1:
        return
    tokens = _count(training, "num_tokens_per_microbatch_per_dp_rank", 16384, name)
    context = _count(training, "max_context_length", 2048, name)
    step = _count(training, "num_tokens_per_train_step", -1, name)
    if tokens % context:
        raise InputError(f"{name}: num_tokens_per_microbatch_per_dp_rank {tokens} is not whole rows of "
                         f"max_context_length {context}: the reader counts rows of the context's length",
                         "num_tokens_per_microbatch_per_dp_rank")
    rows = tokens // context
    stages = _count(parallelism, "pipeline_parallel_degree", 1, name)
    pipelined = _count(parallelism, "num_pp_microbatches", 1, name) if stages > 1 else 1
    t = data.setdefault("training", {})
    t.update(seq_len=context, local_batch_size=rows * pipelined)
    if step != -1:
        if step % context:
            raise InputError(f"{name}: num_tokens_per_train_step {step} is not whole rows of max_context_length "
                             f"{context}", "num_tokens_per_train_step")
        t["global_batch_size"] = step // context
    if stages > 1:
        data.setdefault("parallelism", {})["pipeline_parallel_microbatch_size"] = rows


def _count(fields: dict, key: str, default: int, name: str) -> int:
    value = fields.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != default):
        shown = value.text if isinstance(value, Unread) else repr(value)
        raise InputError(f"{name}: {key} = {shown}: a positive whole number, written as one", key)
    return value


def python_setup(text: str, path: Path | None, name: str, function: str | None, world: int | None = None,
                 vocab: int | None = None):
    """The model, values and policy of the configuration ``function`` of a torchtitan Python file
    (``path``, to follow its imports; ``name`` for messages), read as ``models.torchtitan`` reads
    a job TOML of the same settings."""
    from symbolic_cost import symbols as S
    from symbolic_cost.models import torchtitan
    from symbolic_cost.models.torchtitan_keys import Job
    file_text(text, "--torchtitan", name)
    if function is None:
        functions = ", ".join(n for n in Module(text, path, name).functions if not n.startswith("_")) or "none"
        raise InputError(f"{name} is a Python file of torchtitan configurations: name one with --torchtitan-config "
                         f"(its functions: {functions})", "--torchtitan-config")
    trainer = evaluate(text, path, name, function)
    notes = [f"{function}() of {name} read without running it ({GENERATIONS})"]
    data = sections(trainer, f"{name} {function}()", notes, layer_frequency(checkout(path)))
    model = None
    if data["model"]["name"] != "llama3":
        if vocab is not None:
            raise InputError(f"--vocab-size: torchtitan's {data['model']['name']} flavours state their vocabulary",
                             "--vocab-size")
        from symbolic_cost.models.torchtitan_models import architecture
        model = partial(architecture, data["model"]["name"], data["model"]["flavor"], mtp_layers=mtp_layers(trainer))
    chunks = data.pop("loss_chunks")
    setup = torchtitan.job_setup(Job("", name, data), function, world, vocab, torchtitan.PYTHON_FLAVORS, notes,
                                 model=model)
    if chunks > 1:
        setup.policy["loss_chunks"] = chunks
        notes.append(f"the loss in {chunks} chunks of the sequence (torchtitan's chunked loss): one chunk's logits "
                     f"alive at a time")
    parallelism = trainer.fields.get("parallelism")
    if isinstance(parallelism, Built) and parallelism.fields.get("enable_sequence_parallel") is False \
            and setup.values[S.m1] > 1:
        setup.values[S.s1] = 1
        notes.append("enable_sequence_parallel False: the norms and residuals run whole on every tensor rank (s1 = 1)")
    name = data["model"]["name"]
    if setup.policy.get("recompute") == "op" and name in FUSED_QKV and "non_fused" not in data["model"]["flavor"] \
            and generation(trainer.fields) == 2:
        notes.append(f"the Python configurations' {name} computes q, k and v in one product (fuse_qkv), whose output "
                     "the policy keeps whole: counted as the unfused policy, which runs k's product again and keeps "
                     "kv_heads/heads less of it")
    return setup
