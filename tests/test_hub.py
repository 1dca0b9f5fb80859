"""Hugging Face model ids through the real hub client, on a cache laid out as the client lays it out.

No network: every test reads a temporary cache holding ``models--{org}--{name}/blobs/{git blob
sha1}``, ``snapshots/{commit}/config.json`` (a relative link to the blob) and ``refs/main`` (the
commit, no newline), the layout ``huggingface_hub`` writes and ``scan_cache_dir`` reads back.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from symbolic_cost.models import hub

CONFIG = Path(__file__).parent / "hf_configs" / "Llama-2-7b-hf.json"
MODEL, COMMIT = "meta-llama/Llama-2-7b-hf", "01c7f73d771dfac7d292323805ebc428287df4f9"
LLAMA_2_7B = 6_738_415_616      # parameters of Llama 2 7B (its model card: 6.74 B; 4096 wide, 32 layers)


def write_cache(root: Path, model: str = MODEL, commit: str = COMMIT, text: str | None = None) -> Path:
    """A hub cache holding ``config.json`` of ``model`` at ``commit``, which ``main`` names."""
    data = (text if text is not None else CONFIG.read_text()).encode()
    repo = root / ("models--" + model.replace("/", "--"))
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()    # a git file's etag
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / blob).write_bytes(data)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(Path("..", "..", "blobs", blob))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return root


@pytest.fixture
def cache(tmp_path):
    pytest.importorskip("huggingface_hub")
    return write_cache(tmp_path / "hub")


def test_the_cache_is_the_clients_layout(cache):
    from huggingface_hub import scan_cache_dir
    (repo,) = scan_cache_dir(cache).repos
    (revision,) = repo.revisions
    assert (repo.repo_id, repo.repo_type, revision.commit_hash, set(revision.refs)) == (
        MODEL, "model", COMMIT, {"main"})
    assert [f.file_name for f in revision.files] == ["config.json"]


def test_a_cached_model_id_loads_offline(cache):
    arch = hub.load(MODEL, cache_dir=cache, offline=True)
    assert (arch.name, arch.n_layers, arch.e, arch.h, arch.f, arch.vocab) == ("Llama-2-7b-hf", 32, 4096, 32, 11008, 32000)
    from symbolic_cost.models import model_cost
    assert model_cost(arch).parameters == LLAMA_2_7B


def test_a_revision_by_commit_or_branch(cache):
    assert hub.config_file(MODEL, revision=COMMIT, cache_dir=cache, offline=True).parent.name == COMMIT
    assert hub.fetch_config(MODEL, revision="main", cache_dir=cache, offline=True)["hidden_size"] == 4096
    with pytest.raises(ValueError, match=r"meta-llama/Llama-2-7b-hf \(revision v2\): config.json is not in the hub cache"):
        hub.config_file(MODEL, revision="v2", cache_dir=cache, offline=True)


def test_an_uncached_model_offline_names_the_model_and_the_reason(cache):
    with pytest.raises(ValueError, match=r"--hf-model mistralai/Mistral-7B-v0.1: .*not in the hub cache.*offline"):
        hub.load("mistralai/Mistral-7B-v0.1", cache_dir=cache, offline=True)


@pytest.mark.parametrize("bad", ["", "   ", None, "a/b/c", "two words/model"])
def test_a_bad_model_id_is_refused(cache, bad):
    with pytest.raises(ValueError, match="--hf-model"):
        hub.config_file(bad, cache_dir=cache, offline=True)


def test_a_broken_cached_config_is_refused(tmp_path):
    pytest.importorskip("huggingface_hub")
    cache = write_cache(tmp_path / "hub", text='{"model_type": "llama",')
    with pytest.raises(ValueError, match="config.json is not valid JSON"):
        hub.load(MODEL, cache_dir=cache, offline=True)
    for text, refused in (("[" * 100_000, "nested too deeply"), ("[1]", "is a JSON object")):
        cache = write_cache(tmp_path / f"hub-{len(text)}", text=text)
        with pytest.raises(ValueError, match=refused):
            hub.load(MODEL, cache_dir=cache, offline=True)


def test_the_clients_own_settings_are_honoured(cache):
    """``HF_HUB_OFFLINE`` and ``HF_HUB_CACHE`` alone (read when the client is imported) find the model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache))
    code = "from symbolic_cost.models.hub import load; a = load(%r); print(a.name, a.e, a.n_layers)"
    run = lambda model: subprocess.run([sys.executable, "-c", code % model], env=env,  # noqa: E731
                                       capture_output=True, text=True, timeout=120)
    found = run(MODEL)
    assert (found.returncode, found.stdout.split()) == (0, ["Llama-2-7b-hf", "4096", "32"]), found.stderr
    missing = run("org/absent")
    assert missing.returncode != 0 and "offline mode is on" in missing.stderr


def test_without_the_client_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)      # import huggingface_hub fails
    with pytest.raises(ValueError, match=r"pip install 'symbolic_cost\[hub\]'"):
        hub.load(MODEL)


def test_summary_takes_a_model_id_from_the_cache(cache):
    """``symbolic-cost summary --hf-model ID`` in a subprocess that sees only the hub's own settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache))
    run = lambda *words: subprocess.run([sys.executable, "-m", "symbolic_cost", "summary", *words],  # noqa: E731
                                        env=env, capture_output=True, text=True, timeout=120)
    done = run("--hf-model", MODEL, "--set", "l=4096")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Llama-2-7b-hf: ") and f"parameters: {LLAMA_2_7B:,}" in done.stdout
    absent = run("--hf-model", "org/absent")
    assert absent.returncode == 2 and absent.stderr.count("\n") == 1 and "org/absent" in absent.stderr
