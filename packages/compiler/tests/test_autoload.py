"""Installed, the compiler registers through torch's backend autoload: `import torch` alone compiles ring tensors,
and Inductor stays unimported until the first compile."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_import_torch_alone_compiles_a_softmax_on_ring() -> None:
    script = """
        import sys
        import torch
        loaded = ("torch._inductor.compile_fx" in sys.modules, "ring_inductor.register" in sys.modules)
        print("inductor imported:", *loaded)
        x = torch.randn(4, 64).to("ring")
        y = torch.compile(lambda t: torch.softmax(t, -1))(x)
        print(y.device, bool((y.cpu() - torch.softmax(x.cpu(), -1)).abs().max() < 1e-6))
        print("registered:", "ring_inductor.register" in sys.modules)
    """
    env = {key: value for key, value in os.environ.items() if key != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # lowered for real, not a cached graph's code
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["inductor imported: False False", "ring:0 True", "registered: True"]
