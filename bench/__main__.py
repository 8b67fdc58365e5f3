"""`python -m bench` (make bench) and `python -m bench --scale` (make bench-scale)."""

import signal
import sys

from .run import main


def _terminate(signum, frame):
    # SIGTERM unwinds like Ctrl-C, so the finally blocks stop the service and Neo4j.
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, _terminate)
sys.exit(main(sys.argv[1:]))
