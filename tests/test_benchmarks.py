"""The benchmark harnesses: ``benchmarks/speed.py`` (registries, skip rule, slopes, table),
``benchmarks/real.py`` (goal verdicts, loaders, the written tables), ``benchmarks/ledger.py``
(the ledger's cost per fit), ``benchmarks/svr.py`` (the tube loss's privacy constants) and
``benchmarks/glm.py`` (the anes96 loader)."""

import json
import math

import numpy as np
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


# -- the real-data harness (benchmarks/real.py) ------------------------------------------------------
def test_real_goal_verdicts_follow_the_thresholds():
    from benchmarks import real

    assert real.passes("binary", 1.0, 0.029) and not real.passes("binary", 1.0, 0.031)
    assert real.passes("multiclass", 3.0, 0.009) and not real.passes("multiclass", 3.0, 0.011)
    assert real.passes("regression", 1.0, 1.29) and not real.passes("regression", 3.0, 1.11)
    assert real.passes("binary", 0.3, 0.0) is None and real.passes("binary", 1.0, math.nan) is None
    assert real.gap("binary", 0.90, 0.95) == pytest.approx(0.05)
    assert real.gap("regression", 0.26, 0.2) == pytest.approx(1.3)
    assert real.beats("binary", 0.8, 0.7) and not real.beats("regression", 0.8, 0.7)
    assert real.beats("regression", 0.5, math.nan) is None


def test_real_loaders_are_public_maps_with_targets_within_the_default_bound():
    pytest.importorskip("statsmodels")
    from benchmarks import real

    assert not set(real.DATASETS) & set(real.VALIDATION)
    for dataset in (real.DATASETS["fair"], real.DATASETS["randhie"], real.DATASETS["diabetes"]):
        X, y = dataset.load()
        assert X.dtype == float and np.isfinite(X).all() and len(X) == len(y)
        if dataset.task == "regression":  # the public target bound keeps y where y_bound = 1 does not clip
            assert np.abs(y).max() <= 1.0
        else:
            assert set(np.unique(y)) <= set(dataset.classes)
    X, _ = real.DATASETS["fair"].load()
    occupation = X[:, len(real.FAIR_NUMERIC):len(real.FAIR_NUMERIC) + len(real.FAIR_OCCUPATION_CODES)]
    assert set(np.unique(occupation)) == {0.0, 1.0} and occupation.sum(axis=1).max() == 1.0


def test_real_harness_writes_the_goal_table_and_one_table_per_dataset(tmp_path):
    from benchmarks import real

    names = ["breast_cancer", "wine", "diabetes"]  # binary, multi-class, regression: scikit-learn's, so CI runs it
    try:
        import statsmodels  # noqa: F401  (a benchmark-only dependency: its sets join when installed)
        names.append("anes96")
    except ImportError:
        pass
    real.main(["--datasets", *names, "--epsilons", "1", "3", "--seeds", "2", "--out-dir", str(tmp_path)])
    text = (tmp_path / "real_full.md").read_text()
    saved = json.loads((tmp_path / "real_full.json").read_text())
    goal_lines = [line for line in text.splitlines() if line.startswith("| ") and line.split("|")[2].strip() in
                  real.ROW_SETS and line.split("|")[1].strip() in names]
    assert len(goal_lines) == len(names) * len(real.ROW_SETS)
    assert "| dataset | rows | metric | reference (raw) | trivial's gap | defaults ε=1 | gap ε=1 | pass ε=1 |" in text
    for name in names:
        assert f"### {name} (" in text
    peer = real.PEER in {e.name for e in real.ENTRIES}
    for row in saved["goal"]:
        records = [r for r in saved["records"] if r["dataset"] == row["dataset"]]
        ours = np.mean([r[row["metric"]] for r in records if r["model"] == real.OURS and r["rows"] == row["rows"]
                        and r["epsilon"] == 1.0])
        reference = np.mean([r[row["metric"]] for r in records if r["model"] == real.REFERENCE and r["rows"] == "raw"])
        assert row["gap"]["1.0"] == pytest.approx(real.gap(row["task"], ours, reference))
        assert row["passes"]["1.0"] == real.passes(row["task"], 1.0, row["gap"]["1.0"])
        trivial = np.mean([r[row["metric"]] for r in records if r["model"] == real.TRIVIAL and r["rows"] == "raw"])
        assert row["trivial_gap"] == pytest.approx(real.gap(row["task"], trivial, reference))
        assert (row["beats_peer"]["3.0"] is not None) == peer
    entries_per_rows = {(r["dataset"], r["rows"], r["model"]) for r in saved["records"]}
    assert len(entries_per_rows) == len(names) * len(real.ROW_SETS) * len(real.ENTRIES)
    assert {r["seed"] for r in saved["records"]} == {0, 1}


# -- the ledger's cost per fit (benchmarks/ledger.py) ---------------------------------------------------
def test_ledger_harness_times_the_charge_and_checks_the_running_epsilon(tmp_path):
    from benchmarks import ledger

    ledger.main(["--histories", "default DPLogisticRegression()", "Gaussian + randomized response",
                 "--sizes", "2", "5", "--out-dir", str(tmp_path)])
    rows = [line.split("|")[1:-1] for line in (tmp_path / "ledger.md").read_text().splitlines()
            if line.startswith("| default") or line.startswith("| Gaussian")]
    assert [(name.strip(), int(k)) for name, k, *_ in rows] == [
        ("default DPLogisticRegression()", 2), ("default DPLogisticRegression()", 5),
        ("Gaussian + randomized response", 2), ("Gaussian + randomized response", 5),
    ]
    for row in rows:
        charge_ms, file_ms, epsilon, difference = float(row[2]), float(row[4]), float(row[7]), float(row[8])
        assert charge_ms > 0 and file_ms > 0 and epsilon > 0 and difference <= 1e-9 * epsilon
    assert [int(row[9]) for row in rows] == [1, 1, 5, 5]  # one Gaussian; and four randomized responses


def test_low_signal_harness_pairs_both_paths_and_marks_the_switch():
    from benchmarks import low_signal, real

    iris = real.VALIDATION["iris"]
    X, y = iris.load()
    below, above = (low_signal.cell(iris, X, y, epsilon, seeds=2) for epsilon in (0.3, 30.0))
    assert below["switch"] and below["signal_ratio"] <= 1.0 < above["signal_ratio"] and not above["switch"]
    for c in (below, above):
        assert c["paired"] == pytest.approx(np.mean(c["row_bound"] - c["magnitudes"]))
    # forced magnitudes and the row bound are different fits where the default switches
    assert not np.array_equal(below["magnitudes"], below["row_bound"])
    text = low_signal.table([below, above])
    assert "**row bound**" in text.splitlines()[2] and "| magnitudes |" in text.splitlines()[3]
    assert low_signal.verdict([below, above]).startswith("Cells where the default takes the row bound: 1;")


def test_rare_column_harness_pairs_every_rule_with_the_default():
    from benchmarks import rare_column, real

    synthetic = rare_column.synthetic_cell(6000, 1.0, seeds=2)
    assert abs(synthetic["reference"]) < 2.0
    assert all(len(synthetic[variant]["coef"]) == 2 for variant in rare_column.VARIANTS)
    # the rare level's released variance lies below the relative floor: with and without it the models differ
    assert not np.array_equal(synthetic["default"]["coef"], synthetic["no relative floor"]["coef"])
    wine = real.DATASETS["wine"]
    cell = rare_column.real_cell(wine, *wine.load(), 3.0, seeds=2)
    default, floor = cell["values"]["default"], cell["values"]["floor 4"]
    assert cell["paired"]["floor 4"][0] == pytest.approx(np.mean(floor - default))
    assert cell["paired"]["default"] == (0.0, 0.0, 2)
    assert len(rare_column.synthetic_table([synthetic]).splitlines()) == 2 + len(rare_column.VARIANTS)
    assert rare_column.real_table([cell]).splitlines()[2].startswith("| wine | accuracy | 3 |")


def test_linear_time_slope_reads_the_sizes_from_1e5_up():
    from benchmarks.linear_time import slope

    ns = [10**4, 10**5, 10**6, 10**7]
    assert slope(ns, [5.0, 1.0, 10.0, 100.0]) == pytest.approx(1.0)  # the fixed cost at 1e4 is left out
    assert slope(ns, [1.0, 1.0, 100.0, 10**4]) == pytest.approx(2.0)


def test_engine_bounds_a_slow_scikit_learn_fit(monkeypatch):
    import time

    from benchmarks import engine

    monkeypatch.setattr(engine, "SKLEARN_TIMEOUT_S", 0.5)
    assert engine.bounded_time(lambda: time.sleep(3.0), 1) == (0.5, False)
    seconds, finished = engine.bounded_time(lambda: time.sleep(0.01), 1)
    assert finished and 0.005 < seconds < 0.5
    record = {"vs_sklearn": 0.4, "sklearn_finished": False}
    assert engine._ratio(record, "vs_sklearn") == "≤ 0.40"


def test_engine_measures_only_the_chosen_parts_of_the_chosen_sizes():
    from benchmarks import engine

    assert engine.size("5e4x1000") == (50_000, 1000)
    records = engine.cell(400, 3, False, 1, only=("unscaled",))
    assert [r["model"] for r in records] == [name for name, *_ in engine.PAIRS]
    for record in records:
        assert record["vs_unscaled"] == pytest.approx(record["default_s"] / record["unscaled_s"])
        assert "vs_sklearn" not in record and "peak_memory_over_X" not in record
    assert "| ✗" not in engine.table(records).splitlines()[2].split("|")[6]  # no scikit-learn column filled


def test_engine_moment_floor_sets_the_rows_the_releases_read_and_restores_the_rule():
    from benchmarks import engine
    from skdpsco.linear_model import _scaling

    def rows(n, data_norm=None, mu=0.05):
        return _scaling.plan_scaling(n, 20, data_norm, gaussian_mu=mu, subsample_moments=True).moment_rows

    rule = _scaling.MOMENT_ROWS, _scaling.SCALED_MOMENT_ROWS, _scaling.moment_rows
    whole = _scaling.plan_scaling(10**6, 20, None, gaussian_mu=0.05)
    guard = _scaling.magnitude_rows(whole)
    with engine.moment_floor(1024):  # the rule's other terms still apply
        assert rows(10**6) == max(1024, guard, _scaling.variance_rows(whole))
        assert rows(10**6, data_norm=1.0, mu=50.0) == 1024
    with engine.moment_floor(1024, exact=True):
        assert rows(10**6) == rows(10**6, data_norm=1.0) == 1024
        assert rows(500) == 500
    assert (_scaling.MOMENT_ROWS, _scaling.SCALED_MOMENT_ROWS, _scaling.moment_rows) == rule
    assert rows(10**6) == max(_scaling.SCALED_MOMENT_ROWS, guard, _scaling.variance_rows(whole))


def test_moment_rows_fits_a_floor_that_reads_the_same_rows_once(monkeypatch):
    from benchmarks import moment_rows

    fitted = []
    original = moment_rows.fit_auc
    monkeypatch.setattr(moment_rows, "fit_auc", lambda *a, floor=None: fitted.append(floor) or original(*a, floor=floor))
    record = moment_rows.cell(600, 3, 3.0, 2, floors=(100, 10**6), test_rows=200)
    rules = {rule["floor"]: rule for rule in record["rules"]}
    assert rules[10**6]["moment_rows"] == 600 and rules[10**6]["difference"] == 0.0  # all rows: the same fit
    assert rules[100]["moment_rows"] < 600
    assert sorted(fitted) == sorted([600, rules[100]["moment_rows"]] * 2)  # two seeds, one fit per distinct rule
    assert len(moment_rows.table([record]).splitlines()) == 4


def test_auto_compute_table_marks_auto_and_the_gap_to_the_best():
    from benchmarks.auto_compute import table

    records = [dict(rows="signal", n=10**5, d=20, model="M", algorithm=a, auto=a == "b", auc=auc, auc_std=0.0, seconds=s)
               for a, auc, s in (("a", 0.90, 5.0), ("b", 0.89, 0.1))]
    lines = table(records).splitlines()
    assert "| a | 0.9000" in lines[2] and lines[2].endswith("+0.0000 |")
    assert "| b (auto) | 0.8900" in lines[3] and lines[3].endswith("-0.0100 |")


def test_categorical_search_declares_its_categories_and_fills_the_table():
    import ast
    import inspect

    pd = pytest.importorskip("pandas")

    from benchmarks import categorical_search

    tree = ast.parse(inspect.getsource(categorical_search))
    declared = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name)}
    for name in ("FAIR_CATEGORIES", "ANES96_CATEGORIES"):
        assert isinstance(declared[name], ast.Dict), f"{name} must be a literal codebook, not computed"
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame({"colour": rng.choice(["red", "green", "blue"], n), "x": rng.normal(size=n)})
    y = ((X["colour"] == "red").to_numpy() ^ (rng.random(n) < 0.2)).astype(int)
    c = categorical_search.cell("tiny", {"colour": ["blue", "green", "red"]}, X, y, 1.0, seeds=1)
    lines = categorical_search.table([c]).strip().splitlines()
    assert len(lines) == 2 + len(categorical_search.ENTRIES)
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    assert c["scores"]["pipeline"]["epsilon"] == pytest.approx([1.0], rel=1e-4)


def test_cli_samples_write_the_guides_files(tmp_path):
    from benchmarks import cli_samples

    cli_samples.write(tmp_path)
    houses = (tmp_path / "houses.csv").read_text().splitlines()
    sales = (tmp_path / "sales.csv").read_text().splitlines()
    assert houses[0] == "area,rooms,city,heating,price" and sales[0] == "area,rooms,city,heating,sold"
    assert len(houses) == len(sales) == 2001
    cities = {line.split(",")[2] for line in houses[1:]}
    assert cities == set(cli_samples.CITIES)  # the categories the guide's command declares


def test_svr_tube_loss_is_huber_beyond_the_tube_with_the_huber_privacy_constants():
    from benchmarks.svr import InsensitiveHuberLoss
    from skdpsco.losses import HuberLoss

    t, tube = 0.3, 0.2
    loss, huber = InsensitiveHuberLoss(epsilon=t, tube=tube), HuberLoss(epsilon=t)
    z = np.linspace(-3.0, 3.0, 6001)
    y = np.full_like(z, 0.1)
    r = y - z
    inside = np.abs(r) <= tube
    assert np.all(loss.value(z[inside], y[inside]) == 0.0) and np.all(loss.derivative(z[inside], y[inside]) == 0.0)
    shifted = np.sign(r) * (np.abs(r) - tube)  # Huber of the residual moved to the tube's edge
    np.testing.assert_allclose(loss.value(z[~inside], y[~inside]), huber.value(np.zeros_like(shifted), shifted)[~inside])
    # the constants the fit is calibrated with: |phi'| <= min(t, |r|), phi' 1-Lipschitz in z
    derivative = loss.derivative(z, y)
    assert np.all(np.abs(derivative) <= np.minimum(t, np.abs(r)) + 1e-15)
    assert np.max(np.abs(np.diff(derivative)) / np.diff(z)) <= 1.0 + 1e-9
    np.testing.assert_allclose(np.gradient(loss.value(z, y), z)[1:-1], derivative[1:-1], atol=1e-3)
    assert loss.constants(1.0, 2.0, 1.0) == huber.constants(1.0, 2.0, 1.0)
    assert InsensitiveHuberLoss(epsilon=t).value(z, y) == pytest.approx(huber.value(z, y))


def test_svr_tube_regressor_spends_what_dphuberregressor_spends():
    from benchmarks.svr import insensitive_regressor
    from skdpsco import DPHuberRegressor, PrivacyAccountant

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    y = X @ [1.0, -1.0, 0.5] + rng.standard_t(3, size=2000)
    fits = [make(random_state=0, accountant=PrivacyAccountant()).fit(X, y)
            for make in (DPHuberRegressor, insensitive_regressor(0.1))]
    assert fits[0].epsilon_ == fits[1].epsilon_ and fits[0].delta_ == fits[1].delta_
    assert fits[1].loss_.tube > 0 and not np.allclose(fits[0].coef_, fits[1].coef_)


def test_glm_anes96_features_are_the_documented_exog_without_the_target():
    pytest.importorskip("statsmodels")
    from benchmarks.glm import ANES96_EXOG, _anes96

    for target in ("PID", "TVnews"):
        X, y = _anes96(target)()
        assert target not in ANES96_EXOG and X.shape == (944, len(ANES96_EXOG))
        assert np.all((y >= 0) & (y <= 7)) and np.all(y == np.round(y))


def test_a_rerun_keeps_the_notes_below_the_tables(tmp_path):
    from benchmarks.utility import write_with_notes

    path = tmp_path / "table.md"
    assert not write_with_notes(path, "# Title\n\n| a |\n|---|\n| 1 |\n")
    path.write_text(path.read_text() + "\n## Reading the table\n\nThe 1 means one.\n\n## More\n\nkept too\n")
    assert write_with_notes(path, "# Title\n\n| a |\n|---|\n| 2 |\n")
    assert path.read_text() == (
        "# Title\n\n| a |\n|---|\n| 2 |\n\n## Reading the table\n\nThe 1 means one.\n\n## More\n\nkept too\n"
    )
    with pytest.raises(ValueError, match="level-2 heading"):
        write_with_notes(path, "# Title\n\n## A heading the rerun would take for notes\n")
