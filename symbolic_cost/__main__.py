"""``python -m symbolic_cost``: the command line."""

import sys

from symbolic_cost.cli import main

sys.exit(main())
