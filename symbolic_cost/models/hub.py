"""Hugging Face model ids (``meta-llama/Llama-2-7b-hf``) as ``Architecture`` values, through the hub client.

The ``config.json`` of a model id is read the way ``transformers`` reads it: the hub client
(``huggingface_hub``, the optional extra ``pip install 'symbolic_cost[hub]'``) downloads it into
its cache, or reuses the cached copy, under the client's own settings:

==================== ==============================================================
``HF_HUB_OFFLINE=1``  no network: the cached copy or an error (``offline=True`` here
                      asks the same of one call)
``HF_HUB_CACHE``,     where the cache lives (default ``~/.cache/huggingface/hub``);
``HF_HOME``           ``cache_dir`` here overrides it for one call
``HF_TOKEN``          gated and private models (or ``hf auth login``)
==================== ==============================================================

The cache holds ``models--{org}--{name}/snapshots/{commit}/config.json`` (a link to
``blobs/{hash}``) and ``models--{org}--{name}/refs/{branch}``, the commit a branch or tag
named when it was fetched; a ``revision`` is a branch, a tag or a commit hash.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path

from symbolic_cost.models.architecture import Architecture
from symbolic_cost.models.config import from_config, read_json
from symbolic_cost.checks import InputError, shown
from symbolic_cost.files import input_file

INSTALL = "pip install 'symbolic_cost[hub]'"


def _client():
    """``(hf_hub_download, constants, errors)`` of the hub client, or a ``ValueError`` saying
    how to install it."""
    try:
        from huggingface_hub import constants, errors, hf_hub_download
    except ImportError:
        raise InputError(f"--hf-model needs the Hugging Face hub client (huggingface_hub): {INSTALL}, "
                         f"or pass the model's config.json with --hf-config", "--hf-model") from None
    return hf_hub_download, constants, errors


@contextmanager
def _quiet(name: str):
    """The logger ``name`` (and those under it) held to errors while the body runs."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def config_file(model_id: str, revision: str | None = None, cache_dir=None, offline: bool | None = None) -> Path:
    """The cached ``config.json`` of ``model_id``, fetched first when the cache lacks it.

    ``offline=None`` follows the client's offline mode (``HF_HUB_OFFLINE``); ``True`` reads
    the cache only.  Every failure is a ``ValueError`` naming the model id and the reason.
    """
    if not isinstance(model_id, str) or not model_id.strip():
        raise InputError(f"--hf-model must be a model id such as 'meta-llama/Llama-2-7b-hf', got {shown(model_id)}",
                         "--hf-model")
    download, constants, errors = _client()
    where = model_id + (f" (revision {revision})" if revision else "")
    try:
        with _quiet("huggingface_hub"):     # its retries log a line each; the refusal below says it once
            return Path(download(model_id, "config.json", revision=revision, cache_dir=cache_dir,
                                 local_files_only=bool(offline)))
    except errors.HFValidationError as error:
        reason = str(error) if len(str(error)) <= 200 else str(error)[:197] + "..."     # it quotes the id whole
        raise InputError(f"--hf-model {shown(model_id)} is not a valid model id: {reason}", "--hf-model") from None
    except errors.LocalEntryNotFoundError:
        cache = cache_dir or constants.HF_HUB_CACHE
        mode = "offline mode is on" if offline or constants.HF_HUB_OFFLINE else "the hub could not be reached"
        raise InputError(f"--hf-model {where}: config.json is not in the hub cache {str(cache)!r} and {mode}; "
                         f"fetch it once online, or pass the file with --hf-config", "--hf-model") from None
    except errors.GatedRepoError:
        raise InputError(f"--hf-model {where} is gated: accept its licence on the hub, then log in "
                         f"(hf auth login) or set HF_TOKEN", "--hf-model") from None
    except errors.RepositoryNotFoundError:
        raise InputError(f"--hf-model {where}: no such model on the hub (or it is private: log in "
                         f"or set HF_TOKEN)", "--hf-model") from None
    except errors.RevisionNotFoundError:
        raise InputError(f"--hf-model {model_id}: no revision {revision!r} on the hub", "--hf-model") from None
    except errors.EntryNotFoundError:
        raise InputError(f"--hf-model {where} has no config.json", "--hf-model") from None


def fetch_config(model_id: str, revision: str | None = None, cache_dir=None, offline: bool | None = None) -> dict:
    """The parsed ``config.json`` of ``model_id`` (see ``config_file``)."""
    path = config_file(model_id, revision, cache_dir, offline)
    text = input_file(path, "--hf-model")          # a regular file, size-capped
    return read_json(text, f"{model_id}'s config.json", "--hf-model", "a model's config.json")


def load(model_id: str, revision: str | None = None, cache_dir=None, offline: bool | None = None) -> Architecture:
    """An ``Architecture`` from a Hugging Face model id, named after the model (``Llama-2-7b-hf``)."""
    config = fetch_config(model_id, revision, cache_dir, offline)
    return from_config(config, model_id.rstrip("/").rsplit("/", 1)[-1])
