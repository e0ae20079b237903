"""What the numbers were measured on: recorded next to every result file."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")
    except OSError:
        return platform.processor()


def machine_info() -> dict:
    """CPU, cores, load, Python and package versions."""
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        **{name: _version(name) for name in ("skdpsco", "numpy", "scipy", "scikit-learn", "dp-accounting", "diffprivlib")},
    }
