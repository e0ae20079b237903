"""Build the compiled extensions: the per-example SGD kernel (``skdpsco/solvers/_kernel.pyx``), the
fused per-block kernels of the row passes (``skdpsco/rows/_blocks.pyx``) and the secure mode's bit generator over the operating system's CSPRNG (``skdpsco/_osrandom.pyx``).

Everything else about the package is declared in ``pyproject.toml``; this file only lists the
Cython extensions, which ``pip install .`` compiles with the build requirements declared there
(setuptools, Cython, numpy for its headers and bit generator declarations, scipy for the BLAS
declarations).
"""

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

KERNEL_FLAGS = ["-O3", "-fno-math-errno"]
"""The kernels' C flags: ``-fno-math-errno`` lets ``sqrt`` compile to the instruction alone (no call
to libm to set ``errno`` on a negative argument, which the kernels never pass); every result stays
the IEEE one, bit for bit. No ``-march``: the wheel runs on any x86-64 (SSE2)."""

extensions = [
    Extension(
        "skdpsco.solvers._kernel",
        ["skdpsco/solvers/_kernel.pyx"],
        extra_compile_args=KERNEL_FLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
    Extension(
        "skdpsco.rows._blocks",
        ["skdpsco/rows/_blocks.pyx"],
        extra_compile_args=KERNEL_FLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
    Extension(
        "skdpsco.rows._maps",
        ["skdpsco/rows/_maps.pyx"],
        extra_compile_args=KERNEL_FLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
    Extension(
        "skdpsco._osrandom",
        ["skdpsco/_osrandom.pyx"],
        include_dirs=[numpy.get_include()],
        extra_compile_args=["-O3"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
]

setup(ext_modules=cythonize(extensions, language_level=3))
