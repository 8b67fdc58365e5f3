# The checkout module sits at the project's top; nothing else is needed: the `vaultgraph`
# fixture comes from the installed vaultgraph package's pytest plugin.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
