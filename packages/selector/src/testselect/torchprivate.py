"""Every torch private API `testselect evidence` relies on, in one place, so a torch release that moves one fails here.

Imported only inside the pytest processes that observe tests (the plugin), never by the CLI or the index.
"""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def op_name(func: torch._ops.OpOverload) -> str:
    """`aten::add.Tensor`, or `aten::mm` for a default overload: the schema's name, not the Python packet's."""
    schema = func._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def dtype_name(dtype: torch.dtype) -> str:
    """`float64`: the index's canonical dtype names (`torch.double` and `torch.float64` are one dtype)."""
    return str(dtype).removeprefix("torch.")


class OpRecorder(TorchDispatchMode):
    """An eager dispatch mode that counts each aten overload it sees and the dtypes of its tensor (and dtype) args;
    a call that raises is kept apart, in `raised` (a device lacking the op raises as well)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.dtypes: dict[str, set[str]] = {}
        self.raised: dict[str, set[str]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = op_name(func)
        dtypes = set()
        for leaf in tree_leaves((args, kwargs)):
            if isinstance(leaf, torch.Tensor):
                dtypes.add(dtype_name(leaf.dtype))
            elif isinstance(leaf, torch.dtype):  # a factory's `dtype=`: the dtype it runs in
                dtypes.add(dtype_name(leaf))
        try:
            result = func(*args, **kwargs)
        except Exception:
            self.raised.setdefault(name, set()).update(dtypes)
            raise
        self.counts[name] += 1
        self.dtypes.setdefault(name, set()).update(dtypes)
        return result


class CompiledOpRecorder:
    """Records the aten ops of every graph Inductor compiles while active: its post-grad graph, after decomposition,
    is what a compiled test really runs (the eager recorder sees only the ops run outside compiled code).

    Uses `torch._inductor.config.post_grad_custom_post_pass` with a `CustomGraphPass` whose `uuid()` is None, so
    Inductor's FX graph cache is bypassed and every compile is seen; `torch._dynamo.reset()` on entry, so a function
    compiled by an earlier case is compiled (and seen) again.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.dtypes: dict[str, set[str]] = {}
        self.raised: dict[str, set[str]] = {}  # a graph is recorded as compiled, not as run: none is known to raise
        self._patch: Any = None

    def _record(self, graph: torch.fx.Graph) -> None:
        for node in graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            name = op_name(node.target)
            self.counts[name] += 1
            seen = self.dtypes.setdefault(name, set())
            for leaf in tree_leaves(([a.meta.get("val") for a in node.all_input_nodes], node.meta.get("val"))):
                if isinstance(leaf, torch.Tensor):
                    seen.add(dtype_name(leaf.dtype))

    def __enter__(self) -> CompiledOpRecorder:
        import torch._dynamo
        from torch._inductor import config
        from torch._inductor.custom_graph_pass import CustomGraphPass

        recorder = self

        class _Record(CustomGraphPass):
            def __call__(self, graph: torch.fx.Graph) -> None:
                recorder._record(graph)

            def uuid(self) -> None:
                return None

        torch._dynamo.reset()
        self._patch = config.patch(post_grad_custom_post_pass=_Record())
        self._patch.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._patch.__exit__(*exc)


#: `param_kwargs` keys that are the case's device, OpInfo, dtypes and ModuleInfo, not other `@parametrize` arguments.
_PARAMETRIZED_ELSEWHERE = ("device", "op", "dtype", "dtypes", "module_info")


def case_params(item: Any) -> dict[str, Any]:
    """The OpInfo (full name), ModuleInfo and dtypes torch's parametrization handed a pytest item: the record torch
    keeps as the `param_kwargs` default of each instantiated test, so a case is known by what it runs, not by its
    name."""
    cls, name = getattr(item, "cls", None), getattr(item, "originalname", None) or item.name
    function = inspect.getattr_static(cls, name, None) if cls is not None else None
    try:
        kwargs = inspect.signature(function, follow_wrapped=False).parameters["param_kwargs"].default
    except (KeyError, ValueError, TypeError):
        kwargs = {}
    kwargs = kwargs if isinstance(kwargs, dict) else {}
    raw = kwargs.get("dtypes", kwargs.get("dtype"))
    raw = raw if isinstance(raw, list | tuple) else [raw] if raw is not None else []
    module = kwargs.get("module_info")
    texts = {k: _param_text(v) for k, v in kwargs.items() if k not in _PARAMETRIZED_ELSEWHERE}
    return {
        "opinfo": getattr(kwargs.get("op"), "full_name", None),
        "module": getattr(module, "name", None),
        "case_dtypes": [dtype_name(d) for d in raw if isinstance(d, torch.dtype)],
        "case_params": {k: v for k, v in sorted(texts.items()) if v is not None},
    }


def _param_text(value: Any) -> str | None:
    """A `@parametrize` value as testreuse's `only.params` compares it: a scalar's text, a dtype's or a function's
    name; None for another object (its text holds an address that differs between runs)."""
    if value is None or isinstance(value, str | bool | int | float):
        return str(value)
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    name = getattr(value, "__name__", None)
    return name if isinstance(name, str) else None


def privateuse1_name() -> str:
    """The name privateuse1 goes by now (`privateuseone` until a backend renames it)."""
    return torch._C._get_privateuse1_backend_name()


def register_device_module(name: str, module: Any) -> None:
    """`torch.<name>`: torch looks a backend's device module up by its name."""
    torch._register_device_module(name, module)


def name_device_classes() -> None:
    """`PrivateUse1TestBase.setUpClass()` once, before the test files import: every file's classes are then named
    for the device (`TestFooRING`), as a run on the device names them. Left alone, torch names the first file's
    `TestFooPRIVATEUSE1`."""
    from torch.testing._internal.common_device_type import PrivateUse1TestBase

    PrivateUse1TestBase.setUpClass()
