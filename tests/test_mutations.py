"""The mutation check (``tests/mutations.py``): every one-line mutation of the model layer it lists
makes ``tests/test_simulations.py``, ``tests/test_model.py`` or ``tests/test_framework_memory.py`` fail.

Each mutation runs the files against a mutated copy of the package in a subprocess, its recorded
killer first (``tests/mutation_killers.json``); the mutations are split between ``SHARDS`` tests, each
under the suite's limit for one test, and the unmutated copy runs once after them.  Deselect with
``-m "not slow"``, or run the script alone: ``python tests/mutations.py``.
"""

import os

import pytest

import mutations


def test_the_five_mutations_of_the_issue_are_listed():
    required = [m.name for m in mutations.MUTATIONS if m.required]
    assert required == ["bubble", "1f1b-in-flight", "full-recompute-collectives", "zero3-allgathers",
                        "selective-keeps-qkv"]


def test_a_missing_anchor_is_refused(tmp_path):
    (tmp_path / "x.py").write_text("a = 1\na = 1\n")
    for anchor, count in (("b = 2", 0), ("a = 1", 2)):
        with pytest.raises(ValueError, match=f"anchor found {count} times in x.py"):
            mutations.Mutation("m", "x.py", anchor, "").apply(tmp_path)


SHARDS = 3
"""The mutations run in this many tests, each under the suite's limit for one test (20 minutes:
``faulthandler_timeout``); one more test runs the unmutated copy for all of them."""
JUDGED: dict = {}
"""The verdicts of the shards run in this session, for ``test_the_unmutated_copy_passes_what_killed``."""


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_mutation_is_killed_and_the_working_tree_is_untouched(shard):
    chosen = mutations.MUTATIONS[shard::SHARDS]

    def sources():
        return {m.path: (mutations.ROOT / m.path).read_text() for m in chosen}
    before = sources()
    results = mutations.judge(chosen, jobs=2)
    JUDGED.update(results)
    if os.environ.get("RECORD_MUTATION_KILLERS"):       # the run's killers, for the next run's order
        mutations.record(results)
    assert sources() == before
    survivors = [name for name, (killed, _) in results.items() if not killed]
    assert not survivors, f"mutations the tests do not catch: {', '.join(survivors)}"


@pytest.mark.slow
def test_the_unmutated_copy_passes_what_killed():
    """A kill stands only where the unmutated copy passes the test that failed (``check_baseline``):
    run once, after the shards, for every verdict they gave."""
    if not JUDGED:
        pytest.skip("no shard of the mutations ran in this session")
    mutations.check_baseline(JUDGED)


def test_a_recorded_killer_runs_first_and_no_file_is_dropped():
    first = mutations.TESTS[-1]
    assert mutations.batches(first) == [(first,), mutations.TESTS[:-1]]
    test = first + "::test_x"
    assert mutations.batches(test) == [(test,), (first,) + mutations.TESTS[:-1]]
    for unknown in (None, "tests/test_no_such_file.py", "tests/test_no_such_file.py::test_x"):
        assert mutations.batches(unknown) == [mutations.TESTS]


def test_a_failure_names_the_file_and_the_test_that_decide_the_verdict():
    line = mutations._last_failure("x\nFAILED tests/test_model.py::test_a[1 - 2] - assert 1 == 2\n1 failed")
    assert mutations.failed_file(line) == "tests/test_model.py"
    assert mutations.failed_test(line) == "tests/test_model.py::test_a"
    line = mutations._last_failure("FAILED tests/test_model.py::TestA::test_b - x")
    assert mutations.failed_test(line) == "tests/test_model.py::TestA::test_b"
    line = mutations._last_failure("ERROR tests/test_fsdp.py - ImportError: boom\n1 error")
    assert (mutations.failed_file(line), mutations.failed_test(line)) == ("tests/test_fsdp.py",) * 2
    line = mutations._last_failure("Traceback ...\nImportError: boom")
    assert (mutations.failed_file(line), mutations.failed_test(line)) == (None, None)


def test_a_killer_no_longer_there_runs_every_file(monkeypatch):
    """A recorded test that was renamed away (pytest: exit 4, "not found") is not a crash: the
    mutation is judged on every file, the killer's first."""
    import subprocess
    ran = []

    def run(root, files):
        ran.append(files)
        if files == ("tests/test_model.py::test_gone",):
            return subprocess.CompletedProcess([], 4, "ERROR: not found: tests/test_model.py::test_gone\n", "")
        return subprocess.CompletedProcess([], 1, "FAILED tests/test_model.py::test_a - x\n", "")
    monkeypatch.setattr(mutations, "run_tests", run)
    monkeypatch.setattr(mutations, "_clone", lambda tmp: tmp)
    tests = ("tests/test_fsdp.py", "tests/test_model.py")
    assert mutations.check(None, "tests/test_model.py::test_gone", tests) == (True, "tests/test_model.py::test_a - x")
    assert ran == [("tests/test_model.py::test_gone",), ("tests/test_model.py", "tests/test_fsdp.py")]


def test_a_crashed_run_is_the_harness_failing_not_a_kill():
    import subprocess
    assert mutations._last_failure("") == "(nothing printed)"
    for status, out in ((-9, "partial"), (3, "INTERNALERROR"), (1, "")):
        assert mutations.crashed(subprocess.CompletedProcess([], status, out, ""))
    assert not mutations.crashed(subprocess.CompletedProcess([], 1, "FAILED tests/x.py::t - x", ""))


def test_a_run_forked_from_the_zygote_judges_as_a_fresh_interpreter(tmp_path, monkeypatch):
    """The same mutated copy and test, run in a child of ``mutation_zygote`` and in a fresh
    interpreter: the same status and the same failing test; the child imports the copy."""
    mutation = next(m for m in mutations.MUTATIONS if m.name == "flex-dispatch-unmarked")
    killer = mutations.killers()[mutation.name]
    root = mutations._copy(tmp_path)
    mutation.apply(root)
    if mutations.Zygote.of_this_thread() is None:
        pytest.skip("no zygote on this platform (os.fork, Linux)")
    try:
        forked = mutations.run_tests(root, (killer,))
    finally:
        mutations.Zygote.close_all()
    monkeypatch.setenv("MUTATION_ZYGOTE", "0")
    fresh = mutations.run_tests(root, (killer,))
    assert forked.returncode == fresh.returncode == 1
    assert mutations._last_failure(forked.stdout) == mutations._last_failure(fresh.stdout)
    assert mutations._last_failure(forked.stdout).startswith(killer)


def test_a_zygote_child_that_cannot_import_the_copy_is_a_crash(tmp_path):
    if mutations.Zygote.of_this_thread() is None:
        pytest.skip("no zygote on this platform (os.fork, Linux)")
    (tmp_path / "tests").mkdir()
    try:
        result = mutations.Zygote.of_this_thread().run(tmp_path, ("tests",))   # no package under tmp_path
    finally:
        mutations.Zygote.close_all()
    assert mutations.crashed(result) and "symbolic_cost" in result.stderr


def test_a_mutation_leaves_the_template_its_copy_links_to_untouched(tmp_path, monkeypatch):
    """A run's copy links to the template's files (``_clone``): the mutated file is a new one, so the
    template, and every later run's copy, keeps the source as it was."""
    template = mutations._copy(tmp_path / "template")
    monkeypatch.setattr(mutations, "template", lambda: template)
    mutation = next(m for m in mutations.MUTATIONS if m.name == "bubble")
    before = (template / mutation.path).read_text()
    root = mutations._clone(tmp_path / "run")
    mutation.apply(root)
    assert (root / mutation.path).read_text() == before.replace(mutation.anchor, mutation.replacement) != before
    assert (template / mutation.path).read_text() == before
