"""Build the compiled per-example SGD kernel (``skdpsco/solvers/_kernel.pyx``).

Everything else about the package is declared in ``pyproject.toml``; this file only lists the
Cython extension, which ``pip install .`` compiles with the build requirements declared there
(setuptools, Cython, numpy and scipy for the BLAS declarations).
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        "skdpsco.solvers._kernel",
        ["skdpsco/solvers/_kernel.pyx"],
        extra_compile_args=["-O3"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
]

setup(ext_modules=cythonize(extensions, language_level=3))
