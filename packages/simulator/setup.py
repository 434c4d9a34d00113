"""Builds ringsim._C, the native half of the device, against the installed torch."""

from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

csrc = Path("src/ringsim/csrc")
setup(
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
