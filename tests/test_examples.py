"""The examples teach the right thing: every private model they show beats the trivial model.

Each script of ``examples/`` (the quick start and the gallery pages) prints, for every private
model it claims to be useful, a line of the form

    private 0.924 vs majority class 0.626: margin +0.298 ...

(``... (lower is better ...`` for errors and excess risks, where the trivial model is the training
median or ``w = 0``), optionally with the smallest margin over its splits or seeds, and what the
fits spent. The test runs every script as the documentation build does and checks those lines: a
margin that is not positive (the private model is no better than predicting the majority class),
a margin that does not match the two printed scores, or a script that prints no such line fails.
"""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
CLAIM = re.compile(
    rf"private (?:MAE )?(?P<private>{NUMBER}) vs (?P<trivial_name>[^:]+?) (?P<trivial>{NUMBER}): "
    rf"margin (?P<margin>{NUMBER})"
)
SMALLEST = re.compile(rf"smallest over the \d+ (?:splits|seeds) (?P<smallest>{NUMBER})")
SPENT = re.compile(rf"(?:spent|spent by the fit|spent on these rows)\W.*?(?:ε|epsilon)=(?P<epsilon>{NUMBER})")


def _run(script: Path) -> str:
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _claims(output: str) -> list[dict]:
    claims = []
    for line in output.splitlines():
        match = CLAIM.search(line)
        if match is None:
            continue
        smallest = SMALLEST.search(line)
        claims.append({
            "line": line,
            "private": float(match["private"]),
            "trivial": float(match["trivial"]),
            "trivial_name": match["trivial_name"],
            "margin": float(match["margin"]),
            "smallest": float(smallest["smallest"]) if smallest else None,
            "lower_is_better": "lower is better" in line,
        })
    return claims


def _example_params():
    params = []
    for script in EXAMPLES:
        marks = [pytest.mark.slow] if script.name.startswith("plot_") else []  # the quick start takes ~2 s
        params.append(pytest.param(script, id=script.stem, marks=marks))
    return params


def test_every_example_is_collected():
    assert {path.name for path in EXAMPLES} >= {"quickstart.py", "plot_pipeline_search.py"}


@pytest.mark.parametrize("script", _example_params())
def test_example_private_model_beats_the_trivial_model_by_a_printed_margin(script):
    if script.name.startswith("plot_"):
        pytest.importorskip("matplotlib")
    output = _run(script)
    claims = _claims(output)
    assert claims, f"{script.name} prints no 'private ... vs <trivial model> ...: margin ...' line:\n{output}"
    for claim in claims:
        gain = claim["trivial"] - claim["private"] if claim["lower_is_better"] else claim["private"] - claim["trivial"]
        assert math.isclose(gain, claim["margin"], rel_tol=0.02, abs_tol=2e-3), (
            f"{script.name}: the printed margin does not match the printed scores: {claim['line']}")
        assert claim["margin"] > 0, f"{script.name}: the private model does not beat the trivial one: {claim['line']}"
        if claim["smallest"] is not None:
            assert claim["smallest"] > 0, f"{script.name}: at some split or seed it does not: {claim['line']}"
    spent = [float(match["epsilon"]) for match in SPENT.finditer(output)]
    assert spent and all(epsilon > 0 for epsilon in spent), f"{script.name} does not print the ε it spent:\n{output}"


def test_the_claim_parser_reads_both_directions():
    """The parser the example test relies on: a regression line's margin is trivial - private."""
    higher = _claims("private 0.924 vs majority class 0.626: margin +0.298; spent ε=5.000, δ=1e-05")
    lower = _claims("m at ε=3: private MAE 0.455 vs training median 0.608: margin +0.152 "
                    "(lower is better; smallest over the 3 splits +0.141); spent ε=3.000")
    worse = _claims("x at n=1000: private 5.92e-02 vs w = 0 4.49e-02: margin -1.43e-02 (lower is better; "
                    "smallest over the 3 seeds -9.6e-02)")
    assert [(c["private"], c["trivial"], c["margin"], c["lower_is_better"]) for c in higher + lower] == [
        (0.924, 0.626, 0.298, False), (0.455, 0.608, 0.152, True)]
    assert lower[0]["smallest"] == 0.141
    assert worse[0]["margin"] < 0 and worse[0]["smallest"] < 0 and worse[0]["trivial_name"] == "w = 0"
