"""`ringsim`: run a Ring-32 program and print what it cost, or export the device's capabilities."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

#: Device-memory capacity the CLI allocates against (the device's default).
DEVICE_MEMORY_BYTES = 16 * 1024**3


class ExitCode(IntEnum):
    OK = 0
    PROGRAM_ERROR = 1
    USAGE_ERROR = 2
    DEVICE_ERROR = 3
    INTERNAL_ERROR = 4


class CliError(Exception):
    """A known failure: printed as one `error: ...` line, exiting with `code`."""

    def __init__(self, message: str, code: ExitCode = ExitCode.PROGRAM_ERROR) -> None:
        super().__init__(message)
        self.code = code


# -- run ------------------------------------------------------------------------------------------------------------


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("program", type=Path, metavar="PROGRAM.json", help="a ringsim-program/1 file")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (sorted keys)")
    parser.add_argument("--cores-report", action="store_true", help="also print busy time per core")
    parser.add_argument("--seed", type=int, default=0, help="seed for buffers with init 'randn' (default 0)")


def _load(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text") from None
    except OSError as error:
        raise CliError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise CliError(f"{path}:{error.lineno}:{error.colno}: invalid JSON: {error.msg}") from None
    except RecursionError:
        raise CliError(f"{path}: invalid JSON: nesting too deep") from None


def _allocate(program: Any, seed: int, path: Path) -> dict[str, Any]:
    import torch

    total = sum(spec.nbytes for spec in program.buffers.values())
    if total > DEVICE_MEMORY_BYTES:
        raise CliError(f"{path}: buffers need {total} bytes, more than the device's {DEVICE_MEMORY_BYTES}")
    generator = torch.Generator().manual_seed(seed)
    buffers = {}
    for name, spec in program.buffers.items():
        if spec.init == "randn" and not spec.dtype.is_floating_point:
            raise CliError(f"{path}: buffer {name!r}: init 'randn' needs a floating dtype, not {spec.dtype}")
        if spec.init == "randn":
            tensor = torch.randn(spec.shape, generator=generator).to(spec.dtype)
        elif spec.init == "arange":
            tensor = torch.arange(math.prod(spec.shape)).reshape(spec.shape).to(spec.dtype)
        elif spec.init == "ones":
            tensor = torch.ones(spec.shape, dtype=spec.dtype)
        else:
            tensor = torch.zeros(spec.shape, dtype=spec.dtype)
        buffers[name] = tensor
    return buffers


def _format_report(report: Any, cores: bool) -> str:
    model = report.model
    total = report.total_cycles or 1.0

    def share(cycles: float) -> str:
        return f"{round(cycles):>14,} cycles  {100 * cycles / total:5.1f}%"

    lines = [
        f"kernel {report.name}: {round(report.total_cycles):,} cycles = {report.microseconds:.3f} us "
        f"at {model.clock_hz / 1e9:g} GHz (simulated)",
        f"  compute        {share(report.compute_cycles)}",
        f"  memory         {share(report.memory_cycles)}",
        f"  communication  {share(report.communication_cycles)}",
        f"  roofline bound {round(report.roofline_cycles):>14,} cycles  {report.bound}-bound, "
        f"{report.arithmetic_intensity:.3g} FLOP/byte (ridge {model.ridge_flops_per_byte:.0f})",
        f"  device memory  {report.bytes_read:,} bytes read, {report.bytes_written:,} written, "
        f"{report.sticks:,} sticks; achieved {report.achieved_bandwidth_gbps:.1f} GB/s "
        f"(model: {model.memory_peak_bytes_per_cycle:g} peak, "
        f"{model.memory_mixed_bytes_per_cycle:g} mixed)",
        f"  ring           {report.ring_bytes:,} bytes",
        f"  flops          {report.flops:,}",
        f"  cores          {len(report.per_core)} with work",
    ]
    if cores:
        lines.append(f"  {'core':>4} {'compute':>12} {'memory':>12} {'comm':>12} {'busy':>12} {'idle':>12}")
        for core, busy in sorted(report.per_core.items()):
            cells = (busy.compute, busy.memory, busy.communication, busy.busy, busy.idle)
            lines.append(f"  {core:>4} " + " ".join(f"{round(value):>12,}" for value in cells))
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from . import faults
    from .engine import ProgramError, launch, parse_program
    from .faults import FaultConfigError, TransientDeviceError

    document = _load(args.program)
    try:
        faults.load_env()
        program = parse_program(document)
        buffers = _allocate(program, args.seed, args.program)
        report = launch(program, buffers)
    except ProgramError as error:
        raise CliError(f"{args.program}: {error}") from None
    except FaultConfigError as error:
        raise CliError(str(error), ExitCode.USAGE_ERROR) from None
    except TransientDeviceError as error:
        raise CliError(f"{args.program}: {error}", ExitCode.DEVICE_ERROR) from None
    except (RuntimeError, ValueError, TypeError, IndexError) as error:
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise CliError(f"{args.program}: kernel failed: {first_line}") from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        print(_format_report(report, args.cores_report))
    return ExitCode.OK


# -- capabilities (implemented in ringsim.capabilities) --------------------------------------------------------------


def _add_capabilities_arguments(parser: argparse.ArgumentParser) -> None:
    from .capabilities import add_capabilities_arguments

    add_capabilities_arguments(parser)


def _capabilities(args: argparse.Namespace) -> int:
    from .capabilities import run_capabilities

    return run_capabilities(args)


# -- table and entry point ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    summary: str
    configure: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]


COMMANDS: Mapping[str, Command] = {
    "run": Command("run a program on the simulated device and print its cycle breakdown", _add_run_arguments, _run),
    "capabilities": Command("export the device's op x dtype registry", _add_capabilities_arguments, _capabilities),
}


def _exit_codes() -> str:
    return "exit codes:\n" + "\n".join(f"  {code.value}  {code.name.lower().replace('_', ' ')}" for code in ExitCode)


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the selected command's arguments are configured, so others' imports stay lazy."""
    parser = argparse.ArgumentParser(
        prog="ringsim",
        description="Ring-32 simulated accelerator.",
        epilog=_exit_codes(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(
            name,
            help=command.summary,
            description=command.summary,
            epilog=_exit_codes(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == selected:
            command.configure(sub)
    return parser


def _selected(argv: Sequence[str]) -> str | None:
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ringsim` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_selected(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return ExitCode.OK if exit_.code == 0 else ExitCode.USAGE_ERROR
    try:
        return int(COMMANDS[args.command].handler(args))
    except CliError as error:
        if args.debug:
            raise
        print(f"error: {error}", file=sys.stderr)
        return error.code
    except Exception as error:
        if args.debug:
            raise
        detail = (str(error).strip().splitlines() or [""])[0][:200]
        print(f"error: internal error: {type(error).__name__}: {detail} (rerun with --debug)", file=sys.stderr)
        return ExitCode.INTERNAL_ERROR
