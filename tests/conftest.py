import os
import sys
import tempfile

from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))  # tests import reference.py directly

settings.register_profile("ci", max_examples=60, deadline=None)
settings.load_profile("ci")

# Compiled kernels go to a cache of this test session, not the user's (numeric.kernel_cache).
os.environ.setdefault("SYMBOLIC_COST_CACHE", tempfile.mkdtemp(prefix="symbolic_cost_kernels_"))
