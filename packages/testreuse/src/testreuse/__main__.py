"""`python -m testreuse` runs the CLI."""

import sys

from testreuse.cli import main

sys.exit(main())
