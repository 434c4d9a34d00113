"""torch-spyre's per-op and per-dtype settings in `global`: force_xfail, precision and the input seed.

They are read from the last config that writes each key inline (as the capability keys are), never from a backend's
capability export: an export says what a device can do, not how a suite treats it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from testreuse.errors import Location
from testreuse.model import GlobalConfig
from testreuse.yamlmarks import MarkedDocument

GLOBAL = ("test_suite_config", "global")
Tol = tuple[float, float]


@dataclass(frozen=True)
class GlobalDialect:
    """Where each forced op or dtype was written, the tolerances per (op, dtype) and per dtype, and the seed."""

    forced_ops: dict[str, Location] = field(default_factory=dict)
    forced_dtypes: dict[str, Location] = field(default_factory=dict)
    op_precision: dict[tuple[str, str], Tol] = field(default_factory=dict)
    dtype_precision: dict[str, Tol] = field(default_factory=dict)
    seed: int | None = None


def global_dialect(layers: Iterable[tuple[GlobalConfig, MarkedDocument, Path]]) -> GlobalDialect:
    """Merge the `global` sections in order: a later inline `supported_ops`, `supported_dtypes` or seed replaces."""
    result = GlobalDialect()
    for config, doc, _ in layers:
        forced_ops, op_precision = result.forced_ops, result.op_precision
        forced_dtypes, dtype_precision, seed = result.forced_dtypes, result.dtype_precision, result.seed
        if "supported_ops" in config.model_fields_set:
            ops = config.supported_ops or []
            forced_ops = {
                op.name: doc.locate((*GLOBAL, "supported_ops", i, "force_xfail"))
                for i, op in enumerate(ops)
                if op.force_xfail
            }
            op_precision = {
                (op.name, d.name): (d.precision.atol, d.precision.rtol)
                for op in ops
                for d in op.dtypes or ()
                if d.precision is not None
            }
        if "supported_dtypes" in config.model_fields_set:
            dtypes = config.supported_dtypes or []
            forced_dtypes = {
                d.name: doc.locate((*GLOBAL, "supported_dtypes", i, "force_xfail"))
                for i, d in enumerate(dtypes)
                if d.force_xfail
            }
            dtype_precision = {d.name: (d.precision.atol, d.precision.rtol) for d in dtypes if d.precision is not None}
        if config.input_config is not None and config.input_config.seed is not None:
            seed = config.input_config.seed
        result = GlobalDialect(forced_ops, forced_dtypes, op_precision, dtype_precision, seed)
    return result
