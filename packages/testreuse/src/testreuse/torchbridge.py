"""Every contact with torch's test internals, in one place, so a torch upgrade that moves them fails here loudly.

What is used, and why it is the least invasive choice:
- `PrivateUse1TestBase.setUpClass()` once before upstream files import: consistent class names (`TestFoo<DEVICE>`, not
  `TestFooPRIVATEUSE1` for the first class) and `dtypesIfPRIVATEUSE1` honoured for the first test too.
- `OpInfo.dtypesIf[<backend>]`: torch's own per-device dtype table; narrowing it makes `@ops` generate only the
  cases the backend can run.
- `PrivateUse1TestBase.set_test_configs(op_overrides=...)`: torch's own hook to decorate exact (test, op, dtype)
  cases; tolerances go through it as `toleranceOverride` DecorateInfos. (`op_allowlist` is not used: an allowlist
  that empties an `@ops` list makes torch raise at import, losing the whole file.)
- `PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1`: torch's own switch to instantiate only the device under test, set
  only while upstream files are collected (tests, and the processes they start, never inherit it).
- `op_db` and `module_db`: the catalogs of OpInfo and ModuleInfo names configs are checked against.
- The `param_kwargs` default of an instantiated test: torch's own parametrization record (op, dtype, module), so
  nothing is parsed back out of method names.
- `DeviceTypeTestBase._get_dtypes`, wrapped on `PrivateUse1TestBase`, and `ops._parametrize_test` /
  `modules._parametrize_test`, wrapped, during collection only: `edits.*.include` adds dtypes to a test's `@dtypes`
  list for the device, OpInfos to its `@ops` list, ModuleInfos to its `@modules` list (restored after each).
- `torch._dynamo.utils.counters["stats"]["unique_graphs"]`, read before and after a compiled run's test: the
  graphs dynamo compiled for it, the evidence that a compiled run did not fall back to eager everywhere.
- Per test instance, never the class or torch (undone after the test): `setUp` then `set_rng_seed(seed)`,
  `_apply_precision_override_for_test` then the configured tolerance, TestCase methods moving tensors to CPU.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from testreuse.capabilities import ResolvedCapabilities

INTERNAL_MODULE = "torch.testing._internal.common_device_type"
ONLY_FOR_KEY = "PYTORCH_TESTING_DEVICE_ONLY_FOR"
UNREGISTERED_NAMES = ("privateuse1", "privateuseone")


class BridgeError(Exception):
    """The device or torch is not in the state testreuse needs; the message is one line."""


@dataclass(frozen=True)
class Tolerance:
    generic_class: str | None
    generic_test: str | None
    op: str
    dtype: str
    atol: float
    rtol: float


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process so far (0 before dynamo is first imported)."""
    if "torch._dynamo" not in sys.modules:
        return 0
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def static_recompiles() -> None:
    """Dynamo's automatic dynamic shapes off: read from the environment when dynamo's config is first imported,
    set on it when it already is."""
    os.environ["TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES"] = "0"
    config = sys.modules.get("torch._dynamo.config")
    if config is not None:
        config.automatic_dynamic_shapes = False


def backend_name() -> str:
    return torch._C._get_privateuse1_backend_name()


def check_backend(expected: str | None) -> str:
    """The registered privateuse1 backend, checked before torch's test internals are imported."""
    name = backend_name()
    if name in UNREGISTERED_NAMES:
        raise BridgeError(
            "no privateuse1 backend is registered: install one that autoloads through the torch.backends "
            "entry point group, or pass --testreuse-backend MODULE"
        )
    if expected is not None and name != expected:
        raise BridgeError(f"the registered privateuse1 backend is {name!r}, not {expected!r}")
    module = getattr(torch, name, None)
    if module is None or not module.is_available():
        raise BridgeError(f"privateuse1 backend {name!r} is registered but torch.{name}.is_available() is false")
    if INTERNAL_MODULE in sys.modules:
        from torch.testing._internal.common_device_type import PrivateUse1TestBase, device_type_test_bases

        if PrivateUse1TestBase not in device_type_test_bases:
            raise BridgeError(
                f"{INTERNAL_MODULE} was imported before backend {name!r} was registered; register the backend first"
            )
    return name


def op_db() -> Sequence[Any]:
    """torch's OpInfos; importing them is slow and must follow backend registration, so callers import on use."""
    from torch.testing._internal.common_methods_invocations import op_db as ops

    return ops


def python_ref_db() -> Sequence[Any]:
    """torch's OpInfos of its Python references (`_refs.*`), which `@ops(op_db + python_ref_db)` tests run too."""
    from torch.testing._internal.common_methods_invocations import python_ref_db as refs

    return refs


def module_db() -> Sequence[Any]:
    """torch's ModuleInfos (same import rule as op_db)."""
    from torch.testing._internal.common_modules import module_db as modules

    return modules


_UNSET = object()


@dataclass
class Preparation:
    """What prepare() changed in torch, so that a session leaves nothing behind: the device-only switch goes once
    collection is over, the narrowed OpInfo dtypes and the test configs when the session ends."""

    backend: str
    env_before: str | None
    dtypes_before: list[tuple[Any, Any]] = field(default_factory=list)
    added_dtypes: bool = False
    parametrizers: list[tuple[type, Any]] = field(default_factory=list)

    def end_collection(self) -> None:
        """Upstream files are instantiated: drop the device-only switch (restoring any value it had before) and the
        dtype additions."""
        if self.env_before is None:
            os.environ.pop(ONLY_FOR_KEY, None)
        else:
            os.environ[ONLY_FOR_KEY] = self.env_before
        if self.added_dtypes:
            from torch.testing._internal.common_device_type import PrivateUse1TestBase

            del PrivateUse1TestBase._get_dtypes
            self.added_dtypes = False
        for parametrizer, original in self.parametrizers:
            parametrizer._parametrize_test = original
        self.parametrizers.clear()

    def close(self) -> None:
        """Undo everything, newest first; safe to call twice."""
        from torch.testing._internal.common_device_type import PrivateUse1TestBase

        self.end_collection()
        for op, before in reversed(self.dtypes_before):
            if before is _UNSET:
                op.dtypesIf.pop(self.backend, None)
            else:
                op.dtypesIf[self.backend] = before
        self.dtypes_before.clear()
        PrivateUse1TestBase.set_test_configs()


Additions = Mapping[tuple[str, str], Sequence[str]]


@dataclass(frozen=True)
class Added:
    """What `edits.*.include` adds, per generic (class, test): dtype, OpInfo full and ModuleInfo names."""

    dtypes: Additions = field(default_factory=dict)
    ops: Additions = field(default_factory=dict)
    modules: Additions = field(default_factory=dict)


def prepare(capabilities: ResolvedCapabilities, tolerances: list[Tolerance], added: Added | None = None) -> Preparation:
    """Configure torch's device-generic machinery for the backend; call once, before any upstream file imports, and
    undo it with the returned Preparation."""
    from torch.testing._internal import common_device_type as cdt

    if cdt.PrivateUse1TestBase not in cdt.device_type_test_bases:
        raise BridgeError("torch did not add PrivateUse1TestBase: the backend reports itself unavailable")
    preparation = Preparation(backend_name(), os.environ.get(ONLY_FOR_KEY))
    os.environ[ONLY_FOR_KEY] = "privateuse1"
    cdt.PrivateUse1TestBase.setUpClass()
    _narrow_op_dtypes(capabilities, preparation)
    cdt.PrivateUse1TestBase.set_test_configs(op_overrides=_tolerance_overrides(tolerances) or None)
    added = added or Added()
    if added.dtypes and "_get_dtypes" not in vars(cdt.PrivateUse1TestBase):
        cdt.PrivateUse1TestBase._get_dtypes = _adding_dtypes(cdt.PrivateUse1TestBase, added.dtypes)
        preparation.added_dtypes = True
    from torch.testing._internal.common_modules import modules

    for parametrizer, attr, wanted, catalog in (
        (cdt.ops, "op_list", added.ops, lambda: {op.full_name: op for op in (*op_db(), *python_ref_db())}),
        (modules, "module_info_list", added.modules, lambda: {m.name: m for m in module_db()}),
    ):
        if wanted:
            original = parametrizer._parametrize_test
            preparation.parametrizers.append((parametrizer, original))
            parametrizer._parametrize_test = _adding_infos(original, attr, wanted, catalog())
    return preparation


def _adding_infos(original: Callable[..., Any], attr: str, added: Additions, catalog: dict[str, Any]) -> Any:
    """An `@ops`/`@modules` parametrizer that also yields the configured infos for the named tests only."""

    def _parametrize_test(self: Any, test: Any, generic_cls: Any, device_cls: Any) -> Iterator[Any]:
        before = getattr(self, attr)
        names = {getattr(i, "full_name", getattr(i, "name", None)) for i in before}
        extra = [
            catalog[n] for n in added.get((getattr(generic_cls, "__name__", ""), test.__name__), ()) if n in catalog
        ]
        setattr(self, attr, [*before, *(i for i in extra if getattr(i, "full_name", i.name) not in names)])
        try:
            yield from original(self, test, generic_cls, device_cls)
        finally:
            setattr(self, attr, before)

    return _parametrize_test


def _adding_dtypes(base: type, added: Additions) -> classmethod:
    """torch's `_get_dtypes` plus the configured dtypes, for `@dtypes` lists of single dtypes (not of tuples)."""
    original = inspect.getattr_static(base, "_get_dtypes").__func__

    def _get_dtypes(cls: type, test: Any) -> Any:
        dtypes = original(cls, test)
        generic = cls.__bases__[1].__name__ if len(cls.__bases__) == 2 else cls.__name__
        extra = [getattr(torch, d) for d in added.get((generic, test.__name__), ())]
        if dtypes is None or not extra or not all(isinstance(d, torch.dtype) for d in dtypes):
            return dtypes
        return [*dtypes, *(d for d in extra if d not in dtypes)]

    return classmethod(_get_dtypes)


def _narrow_op_dtypes(capabilities: ResolvedCapabilities, preparation: Preparation) -> None:
    if capabilities.ops is None and capabilities.dtypes is None:
        return
    name = preparation.backend
    for op in op_db():
        preparation.dtypes_before.append((op, op.dtypesIf.get(name, _UNSET)))
        if capabilities.ops is not None and op.full_name not in capabilities.ops:
            op.dtypesIf[name] = set()
            continue
        explicit = capabilities.ops.get(op.full_name) if capabilities.ops is not None else None
        if explicit is not None:
            op.dtypesIf[name] = _dtypes(explicit)
        elif capabilities.dtypes is not None:
            op.dtypesIf[name] = set(op.dtypesIf.get(name, op.dtypes)) & _dtypes(capabilities.dtypes)


def _dtypes(names: frozenset[str]) -> set[torch.dtype]:
    return {getattr(torch, n) for n in names}


def _tolerance_overrides(tolerances: list[Tolerance]) -> dict[str, list[Any]]:
    """One toleranceOverride per (class, test, op): torch keeps only the last one applied to a test."""
    from torch.testing._internal.common_device_type import tol, toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    grouped: dict[tuple[str | None, str | None, str], dict[torch.dtype, Any]] = defaultdict(dict)
    for t in tolerances:
        grouped[(t.generic_class, t.generic_test, t.op)][getattr(torch, t.dtype)] = tol(atol=t.atol, rtol=t.rtol)
    overrides: dict[str, list[Any]] = defaultdict(list)
    for (cls, test, op), table in grouped.items():
        info = DecorateInfo(toleranceOverride(table), cls, test, device_type=backend_name(), dtypes=tuple(table))
        overrides[op].append(info)
    return dict(overrides)


@dataclass(frozen=True)
class CaseParams:
    """What torch's parametrization handed one concrete test."""

    generic_class: str
    generic_test: str
    op: Any = None
    dtypes: tuple[str, ...] = ()
    module: str | None = None
    params: tuple[tuple[str, str], ...] = ()


#: `param_kwargs` keys that are the case's device, op, dtypes and module, not other `@parametrize` arguments.
_PARAMETRIZED_ELSEWHERE = frozenset({"device", "op", "dtype", "dtypes", "module_info"})


def _param_text(value: Any) -> str | None:
    """A parametrized value as a config writes it: a scalar's text, a dtype's or function's name; None for any
    other object, whose text (an address) would differ between runs."""
    if value is None or isinstance(value, str | bool | int | float):
        return str(value)
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    name = getattr(value, "__name__", None)
    return name if isinstance(name, str) else None


def case_params(cls: type, method: str) -> CaseParams:
    """Read the parametrization record torch keeps on an instantiated test (its `param_kwargs` default)."""
    from torch.testing._internal.common_device_type import DeviceTypeTestBase

    generic = cls
    if issubclass(cls, DeviceTypeTestBase) and len(cls.__bases__) == 2:
        generic = cls.__bases__[1]
    function = inspect.getattr_static(cls, method)
    test_name = _generic_test_name(cls, method, inspect.unwrap(function))
    try:
        kwargs = inspect.signature(function, follow_wrapped=False).parameters["param_kwargs"].default
    except (KeyError, ValueError, TypeError):
        kwargs = {}
    if not isinstance(kwargs, dict):
        kwargs = {}
    op = kwargs.get("op")
    module_info = kwargs.get("module_info")
    raw = kwargs.get("dtypes", kwargs.get("dtype"))
    raw_dtypes = raw if isinstance(raw, list | tuple) else [raw] if raw is not None else []
    dtypes = tuple(str(d).removeprefix("torch.") for d in raw_dtypes if isinstance(d, torch.dtype))
    texts = {k: _param_text(v) for k, v in kwargs.items() if isinstance(k, str) and k not in _PARAMETRIZED_ELSEWHERE}
    return CaseParams(
        generic.__name__,
        test_name,
        op,
        dtypes,
        module_info.name if module_info is not None else None,
        tuple(sorted((k, v) for k, v in texts.items() if v is not None)),
    )


def _generic_test_name(cls: type, method: str, function: Any) -> str:
    """The generic test's name: its function's own name when the function was defined in a class body under it;
    else (a factory's `test` set by a `setattr` loop, a lambda) the instantiated name up to its device suffix
    (torch names a case `<name><params>_<device><dtypes>`; a privateuse1 class's suffix is the backend's name)."""
    function_name = getattr(function, "__name__", method)
    qualname = getattr(function, "__qualname__", "")
    owner = qualname.split(".")[-2] if "." in qualname else "<module>"
    in_class_body = owner not in ("<locals>", "<module>")  # `Cls.test`: not `factory.<locals>.test`, not `f`
    if in_class_body and (method == function_name or method.startswith(f"{function_name}_")):
        return function_name
    device = getattr(cls, "device_type", None)
    if device == "privateuse1":
        device = backend_name()
    cut = method.rfind(f"_{device}") if device else -1
    return method[:cut] if cut > 0 else method


@contextlib.contextmanager
def samples_without_shapes(op: Any, shapes: list[tuple[int, ...]]) -> Iterator[None]:
    """Drop sample inputs whose input tensor has one of `shapes` while one test runs (this test's op only)."""
    if op is None or not shapes:
        yield
        return
    original = op.sample_inputs
    excluded = set(shapes)

    def filtered(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for sample in original(*args, **kwargs):
            shape = getattr(sample.input, "shape", None)
            if shape is None or tuple(shape) not in excluded:
                yield sample

    op.sample_inputs = filtered
    try:
        yield
    finally:
        del op.sample_inputs


def testcase_methods() -> frozenset[str]:
    """Names `edits.functions.cpu_move` may patch: callables of torch's TestCase."""
    from torch.testing._internal.common_utils import TestCase

    return frozenset(name for name in dir(TestCase) if callable(getattr(TestCase, name, None)))


@contextlib.contextmanager
def patched_test(
    instance: Any,
    *,
    no_grad: bool = False,
    cpu_move: Sequence[str] = (),
    seed: int | None = None,
    precision: tuple[float, float] | None = None,
) -> Iterator[None]:
    """Run one test with the dialect's settings, patching only this TestCase instance (undone afterwards): the named
    methods see their tensor arguments on CPU, the seed follows torch's own `setUp` seeding, the tolerance follows
    torch's own per-test override, and grad mode is off for `no_grad`."""
    from torch.testing._internal.common_utils import set_rng_seed

    patches: dict[str, Callable[..., Any]] = {name: _on_cpu(getattr(instance, name)) for name in cpu_move}
    if seed is not None:
        setup = instance.setUp

        def seeded_setup() -> None:
            setup()
            set_rng_seed(seed)

        patches["setUp"] = seeded_setup
    apply = getattr(instance, "_apply_precision_override_for_test", None)
    if precision is not None and apply is not None:

        def with_tolerance(test: Any, param_kwargs: dict[str, Any]) -> None:
            apply(test, param_kwargs)
            instance.precision, instance.rel_tol = precision

        patches["_apply_precision_override_for_test"] = with_tolerance
    before = {name: vars(instance)[name] for name in patches if name in vars(instance)}
    vars(instance).update(patches)
    try:
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            yield
    finally:
        for name in patches:
            vars(instance).pop(name, None)
        vars(instance).update(before)


def _on_cpu(method: Callable[..., Any]) -> Callable[..., Any]:
    def moved(*args: Any, **kwargs: Any) -> Any:
        return method(*_cpu(args), **{k: _cpu(v) for k, v in kwargs.items()})

    return moved


def _cpu(value: Any) -> Any:
    """Tensors, also inside lists, tuples and dicts, moved to CPU; anything else unchanged."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, list):
        return [_cpu(v) for v in value]
    if type(value) is tuple:
        return tuple(_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: _cpu(v) for k, v in value.items()}
    return value
