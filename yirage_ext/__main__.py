"""`python -m yirage_ext [--json]`: the diagnostics report (see yirage_ext/_diagnostics.py)."""
import sys

from ._diagnostics import main

sys.exit(main())
