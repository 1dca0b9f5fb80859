import atexit
import os
import shutil
import sys
import tempfile

from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))  # tests import reference.py directly

settings.register_profile("ci", max_examples=60, deadline=None)
settings.load_profile("ci")

# Compiled kernels go to a cache of this test session, not the user's (numeric.kernel_cache),
# made only where no outer session gave one (the mutation runs inherit theirs) and removed when the
# process that made it ends (not a child forked from it).
if "SYMBOLIC_COST_CACHE" not in os.environ:
    _CACHE, _MAKER = tempfile.mkdtemp(prefix="symbolic_cost_kernels_"), os.getpid()
    os.environ["SYMBOLIC_COST_CACHE"] = _CACHE
    atexit.register(lambda: os.getpid() == _MAKER and shutil.rmtree(_CACHE, ignore_errors=True))


LONGEST_FIRST = ("tests/test_mutations.py", "tests/test_docs_commands.py", "tests/test_loop_kernel.py",
                 "tests/test_fsdp_gloo.py", "tests/test_extrema.py", "tests/test_bad_input.py",
                 "tests/test_docs_site.py", "tests/test_tensor_parallel_ends.py", "tests/test_app.py",
                 "tests/test_notebooks.py", "tests/test_serving_search.py", "tests/test_hf_families.py")
"""The files that take longest, in the order the workers take them first: pytest-xdist hands out whole
files in collection order (``--no-loadscope-reorder``), and a long file started last would keep one
worker busy while the others stand idle."""


def pytest_collection_modifyitems(items):
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONGEST_FIRST)))
