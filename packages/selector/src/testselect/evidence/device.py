"""The recording device as the backend a test run sees: built once per torch and source, registered under the
target device's name, so upstream tests instantiate for it exactly as they would for the device itself (same class
and case names, same dtypes) while every op that reaches the device is written down and computed on CPU.

Imported only in the pytest processes of `testselect evidence --device`, before the test files are collected.
"""

from __future__ import annotations

import hashlib
import types
from pathlib import Path
from typing import Any

import torch
from torch.utils import cpp_extension

from testselect.torchprivate import name_device_classes, privateuse1_name, register_device_module

SOURCE = Path(__file__).with_name("recorder") / "recorder.cpp"


def build(build_root: Path) -> Any:
    """The compiled extension, from `build_root/<torch version>-<source hash>` (compiled there on first use; a
    second process waits for the first's build through torch's own lock)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    folder = build_root / f"{torch.__version__}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    return cpp_extension.load(
        name="testselect_recorder", sources=[str(SOURCE)], build_directory=str(folder), verbose=False
    )


def install(name: str, device_count: int, build_root: Path, ops: dict[str, list[str]]) -> Any:
    """Makes privateuse1 the recording device named `name` with `device_count` devices that registers `ops` (the
    device's export: op -> dtypes, none listed meaning any) itself; returns the extension, whose `take()` hands over
    (and clears) what reached the device since the last call, as (returned, raised) calls. Export names this torch
    does not know are left out (they cannot be called)."""
    if privateuse1_name() not in ("privateuseone", name):
        raise RuntimeError(f"privateuse1 is already the {privateuse1_name()!r} device: cannot record as {name!r}")
    native = build(build_root)
    native.configure(name, device_count)
    native.register_ops(sorted(ops))
    native.export(ops)
    torch.utils.rename_privateuse1_backend(name)
    register_device_module(name, device_module(name, native))
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    name_device_classes()
    return native


def device_module(name: str, native: Any) -> types.ModuleType:
    """`torch.<name>`: what torch's test machinery and `torch.manual_seed` call on a device module."""
    module = types.ModuleType(f"torch.{name}")

    def index(device: Any = None) -> int:
        if device is None:
            return native.current_device()
        if isinstance(device, int):
            return device
        parsed = torch.device(device)
        return native.current_device() if parsed.index is None else parsed.index

    def generator(device: Any = None) -> torch.Generator:
        return native.default_generator(index(device))

    class device:
        def __init__(self, target: Any) -> None:
            self.index, self.previous = index(target), -1

        def __enter__(self) -> None:
            self.previous = native.current_device()
            native.set_device(self.index)

        def __exit__(self, *exc: object) -> None:
            native.set_device(self.previous)

    functions = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "_lazy_init": lambda: None,
        "_is_in_bad_fork": lambda: False,
        "device_count": native.device_count,
        "current_device": native.current_device,
        "set_device": lambda device: native.set_device(index(device)),
        "synchronize": lambda device=None: None,
        "device": device,
        "get_amp_supported_dtype": lambda: [torch.float16, torch.bfloat16],
        "manual_seed": lambda seed: generator().manual_seed(int(seed)),
        "manual_seed_all": lambda seed: [generator(i).manual_seed(int(seed)) for i in range(native.device_count())],
        "seed": lambda: generator().seed(),
        "seed_all": lambda: [generator(i).seed() for i in range(native.device_count())],
        "initial_seed": lambda: generator().initial_seed(),
        "get_rng_state": lambda device=None: generator(device).get_state(),
        "set_rng_state": lambda state, device=None: generator(device).set_state(state),
    }
    for key, value in functions.items():
        setattr(module, key, value)
    return module
