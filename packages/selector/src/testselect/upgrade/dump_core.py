"""Dump torch's OpInfo and ModuleInfo databases as JSON, so two torch versions can be compared without importing both.

Run by path in the interpreter whose torch is described (`python dump_core.py [--ops a,b] [--max-samples N]`): that
environment need not have testselect, so this file imports nothing but the standard library and torch. It prints
one JSON object on stdout; any failure is one `error:` line on stderr naming torch's version, exit 2.

The torch-private names it reads (all of `torch.testing._internal`, which torch does not keep stable):
- `torch.testing._internal.common_methods_invocations`: `op_db`, `python_ref_db` (the `_refs.*` OpInfos, which
  the ufunc and reduction lists include) and the module-level lists in `OP_LISTS`
- `torch.testing._internal.common_modules.module_db`
- OpInfo: `name`, `variant_test_name`, `formatted_name`, `supported_dtypes(device)`, `dtypesIfCUDA`,
  `supports_autograd`, `supports_forward_ad`, `supports_out`, `decorators` (skips included), `skips`,
  `sample_inputs(device, dtype, requires_grad=)`; SampleInput: `input`, `args`, `kwargs`
- ModuleInfo: `name`, `formatted_name`, `dtypes`, `module_cls`, `decorators`
- DecorateInfo (`torch.testing._internal.opinfo.core`, the items of `decorators`): `decorators`, `cls_name`,
  `test_name`, `device_type`, `dtypes`, `active_if`
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time

FORMAT = "testselect-core-dump/1"
# The lists upstream tests pass to @ops (the index's `params.ops.source`): op_db, the refs, and their sublists.
OP_LISTS = (
    "op_db",
    "unary_ufuncs",
    "binary_ufuncs",
    "reduction_ops",
    "spectral_funcs",
    "shape_funcs",
    "reference_masked_ops",
    "python_ref_db",
)
MODULE_LIST = "module_db"


def _dtype_names(dtypes: object) -> list[str]:
    return sorted(str(d).removeprefix("torch.") for d in dtypes or ())


def _shape(value: object, torch: object) -> object:
    """A sample argument reduced to what identifies it across versions: tensor shapes and dtypes, else its type."""
    if isinstance(value, torch.Tensor):
        return ["tensor", list(value.shape), str(value.dtype).removeprefix("torch.")]
    if isinstance(value, list | tuple):
        return [_shape(v, torch) for v in value]
    if isinstance(value, dict):
        return {str(k): _shape(v, torch) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, bool | int | float | str | type(None)):
        return value
    return type(value).__name__


def _samples(op: object, torch: object, cap: int) -> dict[str, object]:
    """The hash of the first `cap` sample inputs' shapes on CPU (seed 0, float32 or the op's first dtype), in any
    order: run with PYTHONHASHSEED fixed, since some sample functions iterate a set of strings."""
    supported = _dtype_names(op.supported_dtypes("cpu"))
    if not supported:
        return {"sample_dtype": None, "samples": 0, "samples_hash": None}
    dtype_name = "float32" if "float32" in supported else supported[0]
    torch.manual_seed(0)
    try:
        found = op.sample_inputs("cpu", getattr(torch, dtype_name), requires_grad=False)
        shapes = [
            [_shape(s.input, torch), _shape(list(s.args), torch), _shape(dict(s.kwargs), torch)]
            for s in itertools.islice(found, cap)
        ]
    except Exception as exc:  # an upstream sample function that raises is a fact about this version
        first = str(exc).splitlines()[0] if str(exc) else ""
        return {"sample_dtype": dtype_name, "samples_error": f"{type(exc).__name__}: {first}"[:200]}
    ordered = sorted(json.dumps(shape, sort_keys=True) for shape in shapes)  # the same samples in another order
    digest = hashlib.sha256(json.dumps(ordered).encode()).hexdigest()[:16]
    return {"sample_dtype": dtype_name, "samples": len(shapes), "samples_hash": digest}


def _decorations(decorators: object) -> list[dict[str, object]]:
    """Each decorator with the tests it targets (a plain decorator targets all), sorted, for a per-case compare."""
    found = []
    for item in decorators or ():
        wrapped = getattr(item, "decorators", None)
        names = [getattr(d, "__name__", type(d).__name__) for d in wrapped] if wrapped is not None else None
        found.append(
            {
                "cls": getattr(item, "cls_name", None),
                "test": getattr(item, "test_name", None),
                "device": getattr(item, "device_type", None),
                "dtypes": _dtype_names(item.dtypes) if getattr(item, "dtypes", None) else None,
                "active": bool(getattr(item, "active_if", True)),
                "what": names or [getattr(item, "__name__", type(item).__name__)],
            }
        )
    return sorted(found, key=lambda d: json.dumps(d, sort_keys=True))


def _op(op: object, torch: object, cap: int) -> dict[str, object]:
    return {
        "name": op.name,
        "variant_test_name": op.variant_test_name,
        "dtypes_cpu": _dtype_names(op.supported_dtypes("cpu")),
        "dtypes_cuda": _dtype_names(getattr(op, "dtypesIfCUDA", None)),
        "supports_autograd": bool(op.supports_autograd),
        "supports_forward_ad": bool(op.supports_forward_ad),
        "supports_out": bool(op.supports_out),
        "decorators": len(op.decorators or ()),
        "skips": len(op.skips or ()),
        "decorations": _decorations(op.decorators),
        **_samples(op, torch, cap),
    }


def _module(info: object) -> dict[str, object]:
    cls = info.module_cls
    return {
        "name": info.name,
        "dtypes": _dtype_names(info.dtypes),
        "module_cls": f"{cls.__module__}.{cls.__qualname__}",
        "decorators": len(info.decorators or ()),
        "decorations": _decorations(info.decorators),
    }


def dump(only: set[str] | None, cap: int) -> dict[str, object]:
    """The databases as plain data: ops (op_db and the refs) by full test name (`name_variant`, dots as
    underscores), which lists hold each, and the modules."""
    started = time.monotonic()
    import torch
    from torch.testing._internal import common_methods_invocations as methods
    from torch.testing._internal.common_modules import module_db

    every = [*methods.op_db, *methods.python_ref_db]
    chosen = [op for op in every if only is None or op.name in only]
    ops = {op.formatted_name: _op(op, torch, cap) for op in chosen}
    lists = {}
    for name in OP_LISTS:
        members = getattr(methods, name, None)
        if isinstance(members, list):
            lists[name] = sorted({op.formatted_name for op in members if op.formatted_name in ops})
    return {
        "format": FORMAT,
        "torch": torch.__version__,
        "filter": sorted(only) if only is not None else None,
        "max_samples": cap,
        "ops": ops,
        "lists": lists,
        "modules": {info.formatted_name: _module(info) for info in module_db},
        "seconds": round(time.monotonic() - started, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="only these OpInfo names, comma-separated (every variant of each)")
    parser.add_argument("--max-samples", type=int, default=8, help="sample inputs hashed per op (default: 8)")
    args = parser.parse_args()
    only = {name.strip() for name in args.ops.split(",") if name.strip()} if args.ops else None
    try:
        import torch
    except ImportError as exc:
        print(f"error: {sys.executable}: no usable torch ({exc})", file=sys.stderr)
        return 2
    try:
        data = dump(only, max(args.max_samples, 0))
    except Exception as exc:  # torch moved a name this file reads: say which version, not a traceback
        print(f"error: torch {torch.__version__}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    json.dump(data, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
