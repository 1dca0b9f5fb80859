"""Write Megatron-Bridge's recipe functions as data (``bridge_recipes.json``), read from its source
without importing it.

Megatron-Bridge publishes its training setups as Python functions that build a ``ConfigContainer``
(``llama31_405b_pretrain_config()``, ``llama3_70b_pretrain_64gpu_gb200_fp8cs_config()``, ...): a base
(``_pretrain_common()``), a model built from a Hugging Face id
(``AutoBridge.from_hf_pretrained("meta-llama/Meta-Llama-3-70B").get_model_config()``), then one
assignment per field (``cfg.model.tensor_model_parallel_size = 4``), helpers applied to ``cfg``, and a
mixed-precision recipe by name.  This module walks those functions' syntax trees the way Python
would run them, for the few statement forms the recipes use:

* ``cfg = f()`` and ``f(cfg)`` for a function of the package (followed through its imports and
  aliases), a dataclass built with keywords (``DistributedDataParallelConfig(overlap_grad_reduce=True)``)
  as a section, and ``cfg.section.key = value`` for a literal, a module constant, ``torch.bfloat16``;
* ``if`` on a value known here (``compute_dtype == "fp8_cs"``); any other condition, a loop, or a value
  it cannot know, is skipped and listed under the recipe's ``skipped`` (read the recipe there).

Run it on a checkout of Megatron-Bridge (the source of the committed file is named in its
``source``)::

    python -m symbolic_cost.models.bridge_recipes_extract CHECKOUT COMMIT > bridge_recipes.json
"""

from __future__ import annotations

import ast
import json
import operator
import re
import sys
from pathlib import Path

SECTIONS = ("model", "train", "dataset", "ddp", "optimizer", "mixed_precision", "comm_overlap", "dist", "tokenizer",
            "peft")
"""The ``ConfigContainer`` sections that hold a cost (``models.megatron_bridge`` reads them); logging,
checkpoints, tokenizer paths, schedulers and the like are left out."""

KEPT = {"train": ("micro_batch_size", "global_batch_size", "rampup_batch_size"),
        "dataset": ("seq_length", "sequence_length"),
        "tokenizer": ("tokenizer_type", "vocab_size", "use_tokenizer_vocab_size")}
"""The fields of the data sections that hold a cost (the rest name files, seeds and workers)."""

FOLDERS = ("recipes", "perf_recipes")
PRECISIONS = "megatron.bridge.training.mixed_precision"
"""Where the mixed-precision recipes are registered by their function names."""
HF = "__hf_model__"


COMPARISONS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Gt: operator.gt, ast.GtE: operator.ge,
               ast.Lt: operator.lt, ast.LtE: operator.le, ast.Is: operator.is_, ast.IsNot: operator.is_not,
               ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}

PEFT_CLASSES = {"lora": "megatron.bridge.peft.lora.LoRA", "dora": "megatron.bridge.peft.dora.DoRA"}
"""The adapters ``default_peft_config(scheme, **fields)`` builds by scheme, written as a dump's ``_target_``."""


class Unknown(Exception):
    """A value or statement this walk does not evaluate."""


class Package:
    """The package's modules: their functions, constants and imported names."""

    def __init__(self, root: Path):
        self.root, self.modules = root, {}
        for path in sorted(root.rglob("*.py")):
            name = ".".join(path.relative_to(root.parent.parent).with_suffix("").parts)
            name = name.removesuffix(".__init__")
            self.modules[name] = ast.parse(path.read_text(), str(path))

    def lookup(self, module: str, name: str, depth: int = 0):
        """``("function", module, FunctionDef)`` or ``("constant", value)`` for ``name`` in ``module``."""
        tree = self.modules.get(module)
        if tree is None or depth > 20:
            raise Unknown(f"{module}.{name}")
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return ("function", module, node)
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    return ("constant", ast.literal_eval(node.value))
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return self.lookup(node.module, alias.name, depth + 1)
        raise Unknown(f"{module}.{name}")


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    raise Unknown(ast.unparse(node))


class Walk:
    """One function's run: its names, what it skipped, and its return value."""

    def __init__(self, package: Package, module: str, skipped: list):
        self.package, self.module, self.skipped = package, module, skipped

    def call(self, function: ast.FunctionDef, module: str, args: list, kwargs: dict):
        names = {}
        params = function.args.args
        defaults = [None] * (len(params) - len(function.args.defaults)) + list(function.args.defaults)
        for i, (param, default) in enumerate(zip(params, defaults)):
            if i < len(args):
                names[param.arg] = args[i]
            elif param.arg in kwargs:
                names[param.arg] = kwargs[param.arg]
            elif default is not None:
                names[param.arg] = Walk(self.package, module, self.skipped).value(default, {})
        return Walk(self.package, module, self.skipped).block(function.body, names)

    def block(self, body: list, names: dict):
        for statement in body:
            try:
                done, value = self.statement(statement, names)
            except (Unknown, TypeError, ValueError, SyntaxError, AttributeError) as why:   # not made here
                why = re.sub(r" at 0x[0-9a-f]+", "", str(why))      # an object's address: not the same twice
                self.skipped.append(f"{self.module}: {ast.unparse(statement).splitlines()[0][:120]} ({why})")
                continue
            if done:
                return value
        return None

    def statement(self, node, names: dict):
        if isinstance(node, ast.Return):
            return True, None if node.value is None else self.value(node.value, names)
        if isinstance(node, (ast.Expr,)) and isinstance(node.value, ast.Constant):
            return False, None                                  # a docstring
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.value(node.value, names)
            return False, None
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = self.value(node.value, names)
            for target in targets:
                self.assign(target, value, names)
            return False, None
        if isinstance(node, ast.If):
            test = self.value(node.test, names)
            if not isinstance(test, bool):
                raise Unknown("a condition on a value the recipe computes")
            result = self.block(node.body if test else node.orelse, names)
            return result is not None, result
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)):
            return False, None
        raise Unknown(type(node).__name__)

    def assign(self, target, value, names: dict):
        if isinstance(target, ast.Name):
            names[target.id] = value
            return
        if isinstance(target, ast.Attribute):
            owner = self.owner(target.value, names)
            if not isinstance(owner, dict):
                raise Unknown(f"{ast.unparse(target.value)} is not a configuration")
            owner[target.attr] = value
            return
        raise Unknown(ast.unparse(target))

    def owner(self, node, names: dict):
        """The configuration an assignment writes into; a section the walk has not seen built (a
        field of a dataclass default) starts empty."""
        if isinstance(node, ast.Attribute):
            parent = self.owner(node.value, names)
            if isinstance(parent, dict):
                if not isinstance(parent.get(node.attr), dict):
                    parent[node.attr] = {} if parent.get(node.attr) is None else parent[node.attr]
                return parent[node.attr]
        return self.value(node, names)

    def value(self, node, names: dict):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(item, names) for item in node.elts]
        if isinstance(node, ast.Dict):
            return {self.value(k, names): self.value(v, names) for k, v in zip(node.keys, node.values) if k}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            operand = self.value(node.operand, names)
            return not operand if isinstance(node.op, ast.Not) else -operand
        if isinstance(node, ast.Name):
            if node.id in names:
                return names[node.id]
            found = self.package.lookup(self.module, node.id)
            if found[0] == "constant":
                return found[1]
            raise Unknown(node.id)
        if isinstance(node, ast.Attribute):
            if _dotted(node.value) == "torch":
                return f"torch.{node.attr}"                     # a dtype, as the dumps write it
            owner = self.value(node.value, names)
            if isinstance(owner, dict) and node.attr in owner:
                return owner[node.attr]
            raise Unknown(ast.unparse(node))
        if isinstance(node, ast.BoolOp):
            values = [self.value(v, names) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARISONS:
            left, right = self.value(node.left, names), self.value(node.comparators[0], names)
            return COMPARISONS[type(node.ops[0])](left, right)
        if isinstance(node, ast.Call):
            return self.called(node, names)
        raise Unknown(ast.unparse(node)[:60])

    def keywords(self, node: ast.Call, names: dict) -> dict:
        """A dataclass's fields as its call gives them; a field whose value is unknown here is left
        out and listed."""
        fields = {}
        for keyword in node.keywords:
            try:
                fields[keyword.arg] = self.value(keyword.value, names)
            except (Unknown, TypeError, ValueError) as why:
                self.skipped.append(f"{self.module}: {keyword.arg}={ast.unparse(keyword.value)[:80]} ({why})")
        return fields

    def called(self, node: ast.Call, names: dict):
        text = _dotted(node.func)
        if re.search(r"from_hf_pretrained\(\)\.(get_model_config|to_megatron_provider)$", text):
            inner = node.func.value
            model = {HF: self.value(inner.args[0], names)}
            revision = [k.value for k in inner.keywords if k.arg == "revision"]
            if revision:
                model[HF + "revision"] = self.value(revision[0], names)
            return model
        if text.endswith((".get_model_config", ".to_megatron_provider")):
            raise Unknown("a model built by a provider, not from a Hugging Face id")
        if isinstance(node.func, ast.Attribute) and node.func.attr == "lower" and not node.args:
            owner = self.value(node.func.value, names)
            if isinstance(owner, str):
                return owner.lower()
        if not isinstance(node.func, ast.Name):
            raise Unknown(text)
        if node.func.id == "default_peft_config":              # recipes/utils: the adapter a scheme names
            scheme = self.value(node.args[0], names)
            if isinstance(scheme, dict) or scheme is None or str(scheme).lower() == "none":
                return scheme
            if str(scheme).lower() not in PEFT_CLASSES:
                raise Unknown(f"PEFT scheme {scheme!r}")
            return {"_target_": PEFT_CLASSES[str(scheme).lower()], **self.keywords(node, names)}
        if node.func.id in ("LoRA", "DoRA") and not node.args:
            return {"_target_": PEFT_CLASSES[node.func.id.lower()], **self.keywords(node, names)}
        if node.func.id == "isinstance" and isinstance(node.args[1], ast.Name):
            value, kind = self.value(node.args[0], names), node.args[1].id
            return isinstance(value, str) if kind == "str" else isinstance(value, dict)   # a dict: a dataclass
        if node.func.id == "get_mixed_precision_config":       # a recipe by its registered name
            name = self.value(node.args[0], names)
            if isinstance(name, dict):                          # already a configuration
                return name
            name = str(name).replace("-", "_")
            found = self.package.lookup(PRECISIONS, name)
            return self.call(found[2], found[1], [], {})
        if node.func.id[:1].isupper() and not node.args:       # a dataclass: the keywords it can know
            return self.keywords(node, names)
        found = self.package.lookup(self.module, node.func.id)
        if found[0] != "function":
            raise Unknown(text)
        args = [self.value(a, names) for a in node.args]
        kwargs = {k.arg: self.value(k.value, names) for k in node.keywords if k.arg}
        return self.call(found[2], found[1], args, kwargs)


def named_precision(package: Package, name: str, skipped: list):
    """The fields of the mixed-precision recipe registered as ``name`` (its function's), or the name
    where it is not one."""
    try:
        found = package.lookup(PRECISIONS, name.replace("-", "_"))
    except Unknown:
        return name
    return Walk(package, found[1], skipped).call(found[2], found[1], [], {})


def recipe_names(package: Package):
    """``(name, module)`` of every public ``*_config`` function or alias of the recipe folders."""
    for module, tree in package.modules.items():
        if not any(f".{folder}." in f"{module}." for folder in FOLDERS):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_config") and not node.name.startswith("_"):
                yield node.name, module
            if isinstance(node, ast.ImportFrom) and node.module and ".recipes." in f"{node.module}.":
                for alias in node.names:
                    if alias.asname and alias.asname.endswith("_config") and not alias.asname.startswith("_"):
                        yield alias.asname, module


COSTLY = re.compile(r"cfg\.(" + "|".join(SECTIONS) + r")\b|precision")
"""A skipped statement that may set a cost (the others set paths, logging, schedules)."""

HOUSEKEEPING = "megatron.bridge.perf_recipes._common:"
"""The benchmarks' shared helper: its conditions set CUDA graphs, random-number trackers, the
operation fuser and DeepEP's SM count, none of which changes a count."""

GPUS = re.compile(r"_(\d+)gpu_([a-z0-9]+?)_")


def extract(package: Package) -> dict:
    """``{name: recipe}`` for every recipe that builds a model from a Hugging Face id."""
    recipes = {}
    for name, module in recipe_names(package):
        if name in recipes:
            continue
        skipped = []
        kind, where, function = package.lookup(module, name)
        try:
            cfg = Walk(package, where, skipped).call(function, where, [], {})
        except Unknown:
            continue
        model = cfg.get("model") if isinstance(cfg, dict) else None
        if not isinstance(model, dict) or not model.get(HF):
            continue
        if isinstance(cfg.get("mixed_precision"), str):         # a recipe by name: its fields
            cfg["mixed_precision"] = named_precision(package, cfg["mixed_precision"], skipped)
        sections = {s: cfg[s] for s in SECTIONS if isinstance(cfg.get(s), (dict, str))}
        for section, keys in KEPT.items():
            if isinstance(sections.get(section), dict):
                sections[section] = {k: v for k, v in sections[section].items() if k in keys}
        sections["model"] = {k: v for k, v in model.items() if not k.startswith(HF)}
        if isinstance(sections.get("mixed_precision"), dict):
            sections["mixed_precision"] = {k: v for k, v in sections["mixed_precision"].items()}
        gpus = GPUS.search(function.name + "_")
        skipped = [s for s in skipped if not s.startswith(HOUSEKEEPING)]
        recipes[name] = {"function": function.name, "module": where, "hf_model": model[HF],
                         "hf_revision": model.get(HF + "revision"),
                         "devices": int(gpus.group(1)) if gpus else None, "system": gpus.group(2) if gpus else None,
                         "config": sections, "skipped": sorted({s for s in skipped if COSTLY.search(s)})}
    return dict(sorted(recipes.items()))


def main(argv=None):
    checkout, commit = (argv or sys.argv[1:])[:2]
    package = Package(Path(checkout) / "src" / "megatron" / "bridge")
    source = {"repo": "NVIDIA-NeMo/Megatron-Bridge", "commit": commit,
              "folders": [f"src/megatron/bridge/{f}" for f in FOLDERS],
              "written_by": "python -m symbolic_cost.models.bridge_recipes_extract"}
    recipes = extract(package)
    lines = [f" {json.dumps(name)}: {json.dumps(r, default=str)}" for name, r in recipes.items()]
    print('{"source": ' + json.dumps(source) + ',\n"recipes": {\n' + ",\n".join(lines) + "\n}}")


if __name__ == "__main__":
    main()
