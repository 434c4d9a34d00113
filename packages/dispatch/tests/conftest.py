"""The helper modules beside the tests (the local GitHub API, payload mutations) import as top-level modules."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
