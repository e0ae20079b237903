"""The speed harness of ``benchmarks/speed.py``: its registries, skip rule, slopes and table."""

import math

import pytest

from benchmarks import speed
from skdpsco.solvers import ALGORITHMS


def test_catalogue_has_every_estimator_with_every_algorithm():
    entries = speed.catalogue_entries()
    assert len(entries) == len(speed.ESTIMATORS) * len(ALGORITHMS)
    for name, params in entries.items():
        assert name == f"{params['estimator']} [{params['algorithm']}]"
        assert params.get("alpha", 0.0) == (speed.CATALOGUE_RIDGE if params["algorithm"] == "strongly_convex" else 0.0)


def test_slopes_fit_log_time_against_log_n():
    records = [{"n": n, "model": "m", "seconds": 2e-6 * n**1.5} for n in (10**3, 10**4, 10**5)]
    records += [{"n": 10**3, "model": "alone", "seconds": 1.0}, {"n": 10**4, "model": "m2", "error": "x"}]
    assert speed.slopes(records) == {"m": pytest.approx(1.5)}


def test_run_times_entries_records_infeasible_ones_and_skips_slow_ones_at_larger_n():
    # the catalogue's mode (budget_s): the cold fit is the time
    registry = {
        "fast": {"estimator": "DPLpRegression", "algorithm": "snowball"},
        "refused": {"algorithm": "strongly_convex"},  # needs alpha > 0: a ValueError, recorded
    }
    records = speed.run((2000, 4000), tuple(registry), 1, registry, budget_s=0.0)
    by = {(r["n"], r["model"]): r for r in records}
    assert by[(2000, "fast")]["seconds"] > 0 and by[(2000, "fast")]["peak_memory_over_X"] > 1.0
    assert math.isclose(by[(2000, "fast")]["vs_floor"] * by[(2000, "baselines")]["floor_s"], by[(2000, "fast")]["seconds"])
    assert by[(4000, "fast")]["error"].startswith("skipped")  # 10x its time at n = 2000 exceeds 0 s
    assert "alpha" in by[(2000, "refused")]["error"]
    text = speed.table(records, speed.slopes(records))
    assert "| 4e+03 | fast | skipped" in text and "| 2e+03 | refused | infeasible:" in text
    assert speed.goal_check(records, {}) == {"measured": False}


def test_default_mode_times_the_best_of_repeats_after_a_cold_fit():
    registry = {"fast": {"algorithm": "phased_sgd"}}
    (baselines, row) = speed.run((2000,), ("fast",), 2, registry)
    assert baselines["model"] == "baselines" and row["model"] == "fast"
    assert 0 < row["seconds"] and 0 < row["first_fit_s"] and row["peak_memory_over_X"] > 1.0
