"""`python -m bench` (make bench) and `python -m bench --scale` (make bench-scale)."""

import sys

from .environment import unwind_on_sigterm
from .run import main

unwind_on_sigterm()
sys.exit(main(sys.argv[1:]))
