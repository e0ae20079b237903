"""Sphinx configuration of the skdpsco documentation.

Build (from the repository root; zero warnings is part of the test suite,
``tests/test_docs.py::test_docs_build_without_warnings``, a slow test)::

    .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

Needs the ``docs`` extra: ``pip install -e '.[docs]'``. The gallery scripts in ``examples/`` are
executed during the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import skdpsco  # noqa: E402

project = "skdpsco"
author = "the skdpsco developers"
copyright = "the skdpsco developers, BSD-3-Clause"
version = release = skdpsco.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "privacy.md", "sg_execution_times.rst"]
root_doc = "index"
default_role = "literal"

# -- autodoc / autosummary / numpydoc ----------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": False, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set = set()

# -- sphinx-gallery ----------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    # every script in examples/ is executed at build time: plot_*.py and the quick start
    "filename_pattern": r"/(plot_|quickstart)",
    "ignore_pattern": r"__init__\.py",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "plot_gallery": "True",
    "backreferences_dir": "gen_modules/backreferences",
    "doc_module": ("skdpsco",),
    "matplotlib_animations": False,
    "show_memory": False,
    "min_reported_time": 1,
}

# -- HTML --------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skdpsco {release}"
html_static_path: list = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_show_sourcelink = False
