"""Features a test uses, inferred from its body, calls, dtypes and decorators: what a backend may lack."""

from __future__ import annotations

import re
from collections.abc import Iterable

FEATURES = (
    "autograd",
    "complex",
    "distributed",
    "dynamo",
    "float64",
    "inductor",
    "jit",
    "multi_device",
    "sparse",
)

_BODY_PATTERNS = {
    "autograd": re.compile(
        r"\.backward\(|\bgradgradcheck\b|\bgradcheck\b|requires_grad\s*=\s*True|\.requires_grad_\(|"
        r"torch\.autograd\b|\bautograd\.grad\("
    ),
    "sparse": re.compile(
        r"to_sparse|sparse_coo|sparse_cs[rc]|sparse_bs[rc]|torch\.sparse\b|\.is_sparse\b|\.coalesce\("
    ),
    "complex": re.compile(r"\bcomplex(32|64|128)\b|\bc(half|float|double)\b|view_as_complex|torch\.complex\("),
    "float64": re.compile(r"torch\.(double|float64)\b|\.double\(\)"),
    "distributed": re.compile(r"torch\.distributed\b|init_process_group|DistributedDataParallel|\bdist\.\w+\("),
    "dynamo": re.compile(r"torch\.compile\b|torch\._dynamo\b"),
    "inductor": re.compile(r"torch\._inductor\b|[\"']inductor[\"']"),
    "jit": re.compile(r"torch\.jit\b"),
}
# torch.compile uses Inductor unless another backend is named.
_COMPILE = re.compile(r"torch\.compile\b(?![^\n]*backend\s*=\s*[\"'](?!inductor)\w)")
_DISTRIBUTED_BASES = ("MultiProcessTestCase", "DistributedTestBase", "MultiThreadedTestCase")


def infer(body: str, dtypes: Iterable[str], decorators: Iterable[str], bases: Iterable[str]) -> list[str]:
    """Sorted feature names: body text patterns, the dtypes it runs, multi-device and distributed decorators/bases."""
    found = {name for name, pattern in _BODY_PATTERNS.items() if pattern.search(body)}
    if _COMPILE.search(body):
        found.add("inductor")
    names = set(dtypes)
    if names & {"complex32", "complex64", "complex128"}:
        found.add("complex")
    if "float64" in names:
        found.add("float64")
    if any(d == "deviceCountAtLeast" for d in decorators):
        found.add("multi_device")
    if any(base.split(".")[-1] in _DISTRIBUTED_BASES for base in bases):
        found.add("distributed")
    return sorted(found)
