"""`python -m testselect`: the same CLI as the `testselect` script."""

from testselect.cli import main

raise SystemExit(main())
