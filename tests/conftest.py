import os
import sys

from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))  # tests import reference.py directly

settings.register_profile("ci", max_examples=60, deadline=None)
settings.load_profile("ci")
