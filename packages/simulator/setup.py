"""Builds ringsim._C, the native half of the device, against the installed torch."""

from pathlib import Path

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

# The extension links against this exact torch: the wheel requires its release (torch==2.13.0 for 2.13.0+cpu), so
# pip refuses to install a wheel built for 2.13 beside 2.14. The workspace's lock reads the range of
# `[tool.uv.dependency-metadata]` in the root pyproject.toml instead of building this to learn it.
TORCH_RELEASE = torch.__version__.partition("+")[0]

csrc = Path("src/ringsim/csrc")
setup(
    install_requires=[f"torch=={TORCH_RELEASE}", "numpy>=1.26", "pyyaml>=6.0"],
    ext_modules=[
        CppExtension(
            name="ringsim._C",
            sources=sorted(str(p) for p in csrc.rglob("*.cpp")),
            include_dirs=[str(csrc.resolve())],
            extra_compile_args=["-O2", "-std=c++20"],  # torch 2.14 headers require C++20
        )
    ],
    # ninja compiles the sources in parallel and rebuilds only what changed; without it torch falls back to distutils.
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
