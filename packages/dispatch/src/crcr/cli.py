"""`crcr`: the downstream CI job (`crcr ci`, or `prepare` / `leg` / `merge` across machines), its exact re-run
(`crcr reproduce`), this repository's own packages built for its sessions (`crcr build`), an interpreter holding one
torch core (`crcr env`), and the relay client (`gate`, `resolve`, `callback`) with a local relay (`relay`).

Exit codes: 0 green (or nothing differs), 1 red (or outcomes differ), 2 bad input or usage (one `error:` line).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from crcr.callback.command import add_callback
from crcr.ci.command import EXPECTED as CI_ERRORS
from crcr.ci.command import add_ci, add_distributed, add_reproduce
from crcr.ci.coreenv import add_env
from crcr.ci.devbuild import add_build
from crcr.ci.gc import GcError, add_gc
from crcr.gate.command import add_gate, add_resolve
from crcr.relay.command import add_relay

EXPECTED = (*CI_ERRORS, GcError)


#: The subcommands, in the order `--help` lists them: each adds its parser and sets `run` to a function
#: (args) -> exit code.
COMMANDS = (add_ci, add_distributed, add_reproduce, add_build, add_env, add_gc, add_gate, add_resolve, add_callback,
            add_relay)  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crcr", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and 2
    try:
        return args.run(args)
    except EXPECTED as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`crcr ci --dry-run | head`): nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
