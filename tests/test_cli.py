import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from skdpsco.__main__ import main
from skdpsco.compare import load_csv

ROOT = Path(__file__).resolve().parents[1]


def test_compare_prints_a_table_with_private_and_non_private_rows(capsys):
    assert main(["compare", "--repeats", "2", "--epsilons", "1", "5"]) == 0
    out = capsys.readouterr().out
    assert "dataset: breast_cancer (n=569, d=30, classes=2)" in out
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 3 + 2  # header, three baselines, two epsilons
    private = [line for line in table if line.startswith("| DPLogisticRegression")]
    for line, eps in zip(private, (1.0, 5.0)):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[1]) == eps
        assert 0.0 <= float(cells[2].split("±")[0]) <= 1.0
        assert 0 < float(cells[3]) <= eps  # epsilon spent per fit never above the target
        assert float(cells[4]) == 1e-5
    assert "together they spent epsilon=" in out


def test_compare_handles_a_multiclass_dataset(capsys):
    assert main(["compare", "--dataset", "wine", "--repeats", "1", "--epsilons", "2"]) == 0
    assert "classes=3" in capsys.readouterr().out


def write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(map(str, r)) for r in rows]) + "\n")


def test_compare_reads_a_csv_file(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    labels = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
    path = tmp_path / "data.csv"
    write_csv(path, ["a", "b", "c", "label"], [[*x, lab] for x, lab in zip(X.round(4), labels)])
    assert main(["compare", "--csv", str(path), "--target", "label", "--repeats", "1", "--epsilons", "3"]) == 0
    out = capsys.readouterr().out
    assert f"dataset: {path} (n=600, d=3, classes=2)" in out


@pytest.mark.parametrize(
    "header,rows,target,message",
    [
        (["a", "label"], [[1, 0], [2, 1]], "missing", "--target 'missing' is not a column"),
        (["a", "label"], [["x", 0], [2, 1]], "label", "line 2: every column but the target must be numeric"),
        (["a", "label"], [], "label", "has no data rows"),
    ],
)
def test_compare_reports_bad_csv_input(tmp_path, capsys, header, rows, target, message):
    path = tmp_path / "bad.csv"
    write_csv(path, header, rows)
    assert main(["compare", "--csv", str(path), "--target", target]) == 2
    assert message in capsys.readouterr().err


def test_compare_requires_target_with_csv(tmp_path, capsys):
    path = tmp_path / "d.csv"
    write_csv(path, ["a", "b"], [[1, 0]])
    assert main(["compare", "--csv", str(path)]) == 2
    assert "--csv needs --target" in capsys.readouterr().err


def test_load_csv_returns_numeric_features_and_raw_labels(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path, ["x1", "y", "x2"], [[1.5, "a", 2], [3, "b", 4]])
    X, y = load_csv(str(path), "y")
    np.testing.assert_array_equal(X, [[1.5, 2.0], [3.0, 4.0]])
    assert y.tolist() == ["a", "b"]


def test_quickstart_example_runs(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["quickstart.py"])
    runpy.run_path(str(ROOT / "examples" / "quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "test accuracy" in out and "privacy spent" in out
