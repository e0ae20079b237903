"""The documentation: every public name is in the API reference; the Sphinx build is warning-free."""

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import skdpsco

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.rst"


def _documented_names() -> set[str]:
    """Names listed in the autosummary blocks of docs/api.rst under ``currentmodule:: skdpsco``."""
    names, module, in_block = set(), None, False
    for line in API.read_text().splitlines():
        current = re.match(r"\.\. currentmodule:: (\S+)", line)
        if current:
            module = current.group(1)
        if line.startswith(".. autosummary::"):
            in_block = True
            continue
        if in_block:
            if line.strip() and not line.startswith(" "):
                in_block = False
            elif line.strip() and not line.strip().startswith(":"):
                names.add(f"{module}.{line.strip()}")
    return names


def test_every_public_name_is_in_the_api_reference():
    documented = _documented_names()
    missing = sorted(name for name in skdpsco.__all__ if f"skdpsco.{name}" not in documented)
    assert not missing, f"public names missing from docs/api.rst: {missing}"


def test_the_listed_submodule_names_exist():
    """A name of the API reference that no longer exists would break the build late: fail here."""
    for qualified in _documented_names():
        module, _, name = qualified.rpartition(".")
        assert hasattr(importlib.import_module(module), name), qualified


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    if importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("sphinx_gallery") is None:
        pytest.skip("sphinx / sphinx-gallery not installed (pip install -e '.[docs]')")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "docs", str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
