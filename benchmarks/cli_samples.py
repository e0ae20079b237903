"""The sample files and outputs of the command line's user guide (``docs/user_guide/cli.rst``).

``python -m benchmarks.cli_samples [DIRECTORY]`` writes ``houses.csv`` and ``sales.csv`` (2000
generated house sales: ``area``, ``rooms`` numeric, ``city``, ``heating`` text, and the targets
``price`` (houses) and ``sold`` (sales, yes / no)) into ``DIRECTORY`` (default: a temporary one) and
runs the guide's two ``compare`` commands on them, printing their output: the guide's samples are
what a rerun prints (up to the fit times).
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CITIES = {"paris": 150.0, "lyon": 60.0, "nice": 90.0}
HEATING = {"gas": 0.0, "electric": -10.0, "heat pump": 25.0}
CATEGORIES = ["--categories", "city=" + ",".join(CITIES), "--categories", "heating=" + ",".join(HEATING)]
COMMANDS = {
    "houses.csv": ["--target", "price", *CATEGORIES],
    "sales.csv": ["--target", "sold", *CATEGORIES, "--feature-bounds", "0", "200"],
}


def house_sales(n: int = 2000, seed: int = 0) -> list[dict]:
    """``n`` generated rows: price linear in the features plus Gaussian noise (sd 40); ``sold`` is
    ``yes`` when a noisy price is above the median price."""
    rng = np.random.default_rng(seed)
    area = rng.uniform(20.0, 200.0, n).round(1)
    rooms = rng.integers(1, 7, n)
    city = rng.choice(list(CITIES), n, p=[0.5, 0.3, 0.2])
    heating = rng.choice(list(HEATING), n, p=[0.5, 0.3, 0.2])
    price = (3.0 * area + 20.0 * rooms + np.array([CITIES[c] for c in city])
             + np.array([HEATING[h] for h in heating]) + rng.normal(0.0, 40.0, n)).round(1)
    sold = np.where(price + rng.normal(0.0, 40.0, n) > np.median(price), "yes", "no")
    return [dict(area=a, rooms=r, city=c, heating=h, price=p, sold=s)
            for a, r, c, h, p, s in zip(area, rooms, city, heating, price, sold)]


def write(directory: Path) -> None:
    rows = house_sales()
    for name, drop in (("houses.csv", "sold"), ("sales.csv", "price")):
        with open(directory / name, "w", newline="") as handle:
            fields = [k for k in rows[0] if k != drop]
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows({k: row[k] for k in fields} for row in rows)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    directory = Path(argv[0]) if argv else Path(tempfile.mkdtemp())
    directory.mkdir(parents=True, exist_ok=True)
    write(directory)
    for name, options in COMMANDS.items():
        command = [sys.executable, "-m", "skdpsco", "compare", "--csv", name, *options]
        print("$ python -m skdpsco compare --csv", name, " ".join(options), flush=True)
        subprocess.run(command, cwd=directory, check=True)


if __name__ == "__main__":
    main()
