import re
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from skdpsco.__main__ import main
from skdpsco._table import load_table
from skdpsco.compare import BUNDLED_DATASETS, public_feature_bounds

ROOT = Path(__file__).resolve().parents[1]


def test_compare_prints_a_table_with_private_and_non_private_rows(capsys):
    assert main(["compare", "--repeats", "2", "--epsilons", "1", "5"]) == 0
    out = capsys.readouterr().out
    assert "dataset: breast_cancer (n=569, d=30, classes=2)" in out
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 3 + 2 + 2  # header, three baselines, two epsilons, two private pipelines
    private = [line for line in table if line.startswith("| DPLogisticRegression")]
    majority = float(next(line for line in table if line.startswith("| majority")).split("|")[3].split("±")[0])
    for line, eps in zip(private, (1.0, 5.0)):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[1]) == eps
        assert 0.0 <= float(cells[2].split("±")[0]) <= 1.0
        mean_margin, worst_margin = (float(v) for v in cells[3].split("/"))
        assert mean_margin == pytest.approx(float(cells[2].split("±")[0]) - majority, abs=1.5e-3)
        assert worst_margin <= mean_margin
        assert 0 < float(cells[4]) <= eps  # epsilon spent per fit never above the target
        assert float(cells[5]) == 1e-5
    assert "together they spent epsilon=" in out
    pipelines = [line for line in table if line.startswith("| DPStandardScaler → DPLogisticRegression")]
    assert len(pipelines) == 2
    for line, eps in zip(pipelines, (1.0, 5.0)):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[1]) == eps
        assert 0.0 <= float(cells[2].split("±")[0]) <= 1.0
        assert 0 < float(cells[4]) <= eps  # scaler and model composed: within the pipeline's target
        assert float(cells[5]) == 1e-5
    assert "the dataset's documented ranges" in out


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
    assert "| DPStandardScaler" not in out  # a CSV file has no documented public bounds
    assert "give --feature-bounds LOW HIGH" in out


def test_compare_runs_the_private_pipeline_on_a_csv_file_with_stated_bounds(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.uniform(-4, 4, size=(600, 3))
    labels = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
    path = tmp_path / "data.csv"
    write_csv(path, ["a", "b", "c", "label"], [[*x, lab] for x, lab in zip(X.round(4), labels)])
    argv = ["compare", "--csv", str(path), "--target", "label", "--repeats", "1", "--epsilons", "3"]
    assert main([*argv, "--feature-bounds", "-5", "5"]) == 0
    out = capsys.readouterr().out
    pipelines = [line for line in out.splitlines() if line.startswith("| DPStandardScaler")]
    assert len(pipelines) == 1 and "public bounds (--feature-bounds" in out
    assert main([*argv, "--feature-bounds", "5", "-5"]) == 2
    assert "--feature-bounds needs LOW < HIGH" in capsys.readouterr().err


def _documented_summary_ranges(descr):
    """(min, max) columns of the "Summary Statistics" table of a scikit-learn dataset description."""
    table = descr.split(":Summary Statistics:")[1].split(":Missing")[0]
    lower, upper = [], []
    for line in table.splitlines():
        match = re.match(r"^\s*([^=:][^:]*):\s+([-\d.]+)\s+([-\d.]+)", line)
        if match:
            lower.append(float(match.group(2)))
            upper.append(float(match.group(3)))
    return np.array(lower), np.array(upper)


@pytest.mark.parametrize("dataset", sorted(BUNDLED_DATASETS))
def test_public_feature_bounds_are_the_documented_ranges(dataset):
    """The bounds are copied from each dataset's documentation, not computed from its rows."""
    bunch = BUNDLED_DATASETS[dataset]()
    lower, upper = public_feature_bounds(dataset)
    assert lower.shape == upper.shape == (bunch.data.shape[1],)
    if dataset == "digits":
        assert "integer pixels in the range 0..16" in bunch.DESCR
        np.testing.assert_array_equal(lower, 0.0)
        np.testing.assert_array_equal(upper, 16.0)
    else:
        documented_lower, documented_upper = _documented_summary_ranges(bunch.DESCR)
        np.testing.assert_array_equal(lower, documented_lower)
        np.testing.assert_array_equal(upper, documented_upper)
    assert public_feature_bounds(None) is None


@pytest.mark.parametrize(
    "header,rows,target,message",
    [
        (["a", "label"], [[1, 0], [2, 1]], "missing", "--target 'missing' is not a column"),
        (["a", "label"], [["x", 0], [2, 1]], "label", "column 'a' holds text: declare its categories with --categories a="),
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


def test_load_table_returns_numeric_features_and_raw_labels(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path, ["x1", "y", "x2"], [[1.5, "a", 2], [3, "b", 4], [5, "a", 6], [7, "b", 8]])
    table = load_table(str(path), "y")
    np.testing.assert_array_equal(table.X, [[1.5, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    assert table.y.tolist() == ["a", "b", "a", "b"] and table.task == "classification"
    assert table.encoder() is None


def test_quickstart_example_runs(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["quickstart.py"])
    runpy.run_path(str(ROOT / "examples" / "quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "test accuracy" in out and "privacy spent" in out


def test_compare_reports_a_missing_csv_and_a_stray_target(capsys):
    assert main(["compare", "--csv", "/nonexistent/rows.csv", "--target", "y"]) == 2
    assert "--csv: cannot read '/nonexistent/rows.csv'" in capsys.readouterr().err
    assert main(["compare", "--dataset", "iris", "--target", "y"]) == 2
    assert "--target goes with --csv" in capsys.readouterr().err


def test_compare_help_explains_every_option_with_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    for option in ("--epsilons", "--delta", "--seed", "--radius", "--repeats", "--test-size"):
        line = next(line for line in text.splitlines() if line.strip().startswith(option))
        block = text[text.index(line):text.index(line) + 400]
        assert "default" in block, option
    assert "``" not in text and "Normalizer), which reads no statistic" not in text


def _numbers_blanked(text: str) -> list[str]:
    """The lines of ``text`` with every number replaced by ``#``: the output's format and labels."""
    return [re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "#", line).rstrip() for line in text.strip().splitlines()]


def test_readme_sample_output_has_the_format_compare_prints_today(capsys):
    # The README's "output of a fresh clone" is regenerated by running `python -m skdpsco compare`
    # and pasting its output; this fails when the code's output drifts from it (labels, columns,
    # notes), whatever the numbers (here one split instead of ten, to stay fast).
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"regenerated by that command\):\n\n```text\n(.*?)```", readme, re.S)
    assert block, "README.md lost its compare sample output block"
    assert main(["compare", "--repeats", "1"]) == 0
    assert _numbers_blanked(capsys.readouterr().out) == _numbers_blanked(block.group(1))
