"""`python -m testreuse.shards` runs the shard-planning CLI."""

import sys

from testreuse.shards.cli import main

sys.exit(main())
