"""`torch.ring`: the device module torch and its tests look up by the backend's name."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from ringsim import _C

_DeviceLike = int | str | torch.device | None


def _index(device: _DeviceLike) -> int:
    if device is None:
        return _C.current_device()
    if isinstance(device, int):
        return device
    parsed = torch.device(device)
    if parsed.type != "ring":
        raise ValueError(f"expected a ring device, got {parsed}")
    return _C.current_device() if parsed.index is None else parsed.index


def is_available() -> bool:
    """True when at least one ring device is present (always, for the simulator)."""
    return _C.device_count() > 0


def is_initialized() -> bool:
    """The simulator needs no lazy initialisation."""
    return True


def _lazy_init() -> None:
    """Nothing to do: the runtime is ready once the extension is loaded."""


def _is_in_bad_fork() -> bool:
    """Simulated devices survive fork; torch.manual_seed asks before seeding us."""
    return False


def device_count() -> int:
    """Number of ring devices."""
    return _C.device_count()


def current_device() -> int:
    """Index of the ring device the calling thread uses."""
    return _C.current_device()


def set_device(device: _DeviceLike) -> None:
    """Selects the ring device for the calling thread."""
    _C.set_device(_index(device))


class device:
    """Context manager that makes `device` current and restores the previous one on exit."""

    def __init__(self, device: _DeviceLike) -> None:
        self.index = _index(device)
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = _C.current_device()
        _C.set_device(self.index)

    def __exit__(self, *exc: object) -> None:
        _C.set_device(self.previous)


def synchronize(device: _DeviceLike = None) -> None:
    """No-op: ring kernels have finished when they return."""
    _index(device)


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The reduced-precision dtypes autocast may use on ring."""
    return [torch.float16, torch.bfloat16]


def _generator(device: _DeviceLike) -> torch.Generator:
    return _C.default_generator(_index(device))


def manual_seed(seed: int) -> None:
    """Seeds the current ring device's default generator."""
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds every ring device's default generator (torch.manual_seed calls this)."""
    for index in range(device_count()):
        _generator(index).manual_seed(int(seed))


def seed() -> None:
    """Seeds the current ring device's generator non-deterministically."""
    _generator(None).seed()


def seed_all() -> None:
    """Seeds every ring device's generator non-deterministically."""
    for index in range(device_count()):
        _generator(index).seed()


def initial_seed() -> int:
    """The seed of the current ring device's default generator."""
    return _generator(None).initial_seed()


def get_rng_state(device: _DeviceLike = "ring") -> torch.Tensor:
    """The default generator's state as a uint8 CPU tensor."""
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "ring") -> None:
    """Restores a state returned by get_rng_state."""
    _generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    """Every ring device's generator state."""
    return [get_rng_state(index) for index in range(device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    """Restores the states returned by get_rng_state_all."""
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes held by live ring tensors (in whole 128-byte sticks)."""
    return _C.memory_stats(_index(device))["allocated"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    """Peak of memory_allocated since start or the last reset_peak_memory_stats."""
    return _C.memory_stats(_index(device))["peak_allocated"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    """Restarts peak tracking from the current allocation."""
    _C.reset_peak_memory(_index(device))


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of the device's memory capacity."""
    stats = _C.memory_stats(_index(device))
    return stats["capacity"] - stats["allocated"], stats["capacity"]


def memory_stats(device: _DeviceLike = None) -> dict[str, Any]:
    """Allocator statistics, with the key names torch.cuda.memory_stats uses."""
    stats = _C.memory_stats(_index(device))
    return OrderedDict(
        [
            ("active.all.current", stats["active_allocations"]),
            ("allocated_bytes.all.current", stats["allocated"]),
            ("allocated_bytes.all.peak", stats["peak_allocated"]),
            ("allocation.all.allocated", stats["total_allocations"]),
            ("allocation.all.current", stats["active_allocations"]),
            ("allocation.all.freed", stats["total_frees"]),
            ("capacity_bytes", stats["capacity"]),
        ]
    )


_NO_COMPILER = (
    "torch.compile on ring needs its compiler: install tributary-compiler "
    "(or `import ring_inductor` where TORCH_DEVICE_BACKEND_AUTOLOAD=0)"
)


class _Refusing(type):
    """Any attribute Inductor asks of the class (`supports_caching`, ...) raises the one-line error."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(_NO_COMPILER)


class NoCompiler(metaclass=_Refusing):
    """What Inductor finds on `torch.ring` when no compiler registered ring's codegen: using it names the compiler
    to install or import, instead of Inductor's bare assertion."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError(_NO_COMPILER)


#: Inductor's lookup for a privateuse1 device's codegen (torch._inductor.codegen.common.init_backend_registration).
Scheduling = PythonWrapperCodegen = CppWrapperCodegen = WrapperFxCodegen = NoCompiler
