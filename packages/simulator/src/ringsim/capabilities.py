"""`ringsim capabilities`: the device's op x dtype registry, exported for the test framework and the selector.

The YAML/JSON shape is what the test framework reads as ``global``: ``supported_dtypes`` and ``supported_ops`` (OpInfo
names with their dtypes), plus ``aten_ops``: every aten overload the device registers, with its kind and numerics
class. Output is deterministic (sorted) so it can be committed and diffed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

from ringsim.ops.register import STUBBED, registered
from ringsim.ops.registry import DEVICE, OPINFO_NEEDS, SPECS, dtype_name, opinfo_dtypes, sort_dtypes
from ringsim.ops.variants import variants
from ringsim.torchbridge import privateuse1_registrations

#: Held, not computed in: listed per aten op that accepts it, but not as a dtype tests may run in.
HELD_ONLY = frozenset({torch.float64})


def capabilities() -> dict[str, Any]:
    """The registry as plain data: device, supported_dtypes, supported_ops (OpInfo names), aten_ops."""
    aten_ops = []
    for spec in SPECS:
        dtypes = [{"name": dtype_name(d)} for d in sort_dtypes(spec.dtypes)]
        for variant in filter(lambda v, spec=spec: registered(spec, v), variants(spec)):
            aten_ops.append(
                {
                    "name": f"aten::{variant.qualname}",
                    "kind": str(spec.kind),
                    "tolerance": str(spec.tolerance),
                    "dtypes": dtypes,
                }
            )
    aten_ops.extend(_runtime_ops({op["name"] for op in aten_ops}))
    supported_ops = [
        {"name": name, "dtypes": [{"name": dtype_name(d)} for d in opinfo_dtypes(name)]}
        for name in sorted(OPINFO_NEEDS)
    ]
    every = sort_dtypes(d for spec in SPECS for d in spec.dtypes if d not in HELD_ONLY)
    return {
        "device": DEVICE,
        "supported_dtypes": [{"name": dtype_name(d)} for d in every],
        "supported_ops": supported_ops,
        "aten_ops": sorted(aten_ops, key=lambda op: op["name"]),
    }


def _runtime_ops(listed: set[str]) -> list[dict[str, Any]]:
    """The other aten kernels the device registers (allocation, copies, views, storage: the runtime's own, in
    C++), read from the dispatcher, so the export is what a call can reach. They move bytes, so they take any dtype
    (complex and float64 too): no `dtypes`, which readers of the export take as any."""
    refused = {f"aten::{name}" for name in STUBBED}
    names = [n for n in privateuse1_registrations() if n.startswith("aten::") and n not in listed | refused]
    return [{"name": name, "kind": "runtime", "tolerance": "exact"} for name in names]


def render(data: dict[str, Any], fmt: str) -> str:
    """JSON with sorted keys, or block YAML with the same content and order."""
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    import yaml

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return yaml.dump(data, Dumper=_NoAliases, sort_keys=True, default_flow_style=False)


def add_capabilities_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml", help="output format (default: yaml)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")


def run_capabilities(args: argparse.Namespace) -> int:
    text = render(capabilities(), args.format)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as error:
            from ringsim.cli import CliError, ExitCode

            raise CliError(f"{args.output}: cannot write: {error.strerror}", ExitCode.USAGE_ERROR) from None
    else:
        sys.stdout.write(text)
    return 0
