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
