"""The explorer's tests import the example models (examples/, the project's top-level folder of
tlaplus/Examples specifications) and the benchmark models (bench/) by their module names."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "examples", ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
