import re
import runpy
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from skdpsco import PrivacyAccountant
from skdpsco.__main__ import _parser, main
from skdpsco._table import MISSING_CELLS, load_table
from skdpsco.compare import BUNDLED_DATASETS, public_feature_bounds
from skdpsco.linear_model import DPLogisticRegression

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
        (["a", "label"], [["x", 0], [2, 1], [3, 0], [4, 1]], "label", "column 'a' holds text: declare its categories with --categories a="),
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


def _mixed_rows(n=160, seed=0):
    """Columns of a small mixed table: two numeric features, a categorical one, and three targets
    (continuous, text labels, integer codes), every cell distinctive enough to be searched for."""
    rng = np.random.default_rng(seed)
    size, weight = rng.uniform(10, 99, n), rng.uniform(10, 99, n)
    colour = rng.choice(["crimson", "teal", "ochre"], n)
    price = 2 * size - weight + np.where(colour == "crimson", 40, 0) + rng.normal(0, 3, n)
    return {
        "size": [f"{v:.4f}" for v in size],
        "weight": [f"{v:.4f}" for v in weight],
        "colour": list(colour),
        "price": [f"{v:.4f}" for v in price],
        "grade": np.where(price > np.median(price), "premium", "budget").tolist(),
        "code": np.where(price > np.median(price), "7", "3").tolist(),
    }


def write_columns(path, columns):
    write_csv(path, list(columns), list(zip(*columns.values())))
    return str(path)


def _table_lines(out):
    return [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| model")]


COLOURS = ["--categories", "colour=crimson,teal,ochre"]
FAST = ["--repeats", "2", "--epsilons", "2", "5"]


def test_compare_regression_on_a_csv_file_with_a_categorical_column(tmp_path, capsys):
    columns = _mixed_rows()
    del columns["grade"], columns["code"]
    path = write_columns(tmp_path / "houses.csv", columns)
    assert main(["compare", "--csv", path, "--target", "price", *COLOURS, *FAST]) == 0
    out = capsys.readouterr().out
    assert f"dataset: {path} (n=160, d=5), 2 random splits" in out  # 2 numeric + 3 one-hot columns
    assert "task: regression, detected by the public rule" in out and "--task chooses it" in out
    assert "2 numeric (raw), 1 categorical one-hot encoded" in out
    assert "| model | target ε | test RMSE (mean ± std) | test R² (mean ± std) |" in out
    rows = _table_lines(out)
    assert [row.split("|")[1].strip() for row in rows] == [
        "mean of the training targets (trivial)",
        "LinearRegression, raw features (same input, non-private)",
        "LinearRegression, StandardScaler (everyday, non-private)",
        "DPLpRegression (auto)",
        "DPLpRegression (auto)",
    ]
    linear = [c.strip() for c in rows[1].strip("|").split("|")]
    assert float(linear[3].split("±")[0]) > 0.95  # the encoded colour is needed for this R²
    for row, eps in zip(rows[3:], (2.0, 5.0)):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[1]) == eps and 0 < float(cells[4]) <= eps and float(cells[5]) == 1e-5
        assert float(cells[2].split("±")[0]) > 0
    assert "All 4 private fits above" in out


def test_compare_classification_on_a_csv_file_with_a_categorical_column(tmp_path, capsys):
    columns = _mixed_rows()
    del columns["price"], columns["code"]
    path = write_columns(tmp_path / "houses.csv", columns)
    argv = ["compare", "--csv", path, "--target", "grade", *COLOURS, *FAST, "--feature-bounds", "0", "100"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"dataset: {path} (n=160, d=5, classes=2), 2 stratified splits" in out
    assert "task: classification, detected by the public rule" in out
    assert "labels: the 2 labels of column 'grade' are taken as public" in out
    rows = _table_lines(out)
    assert len(rows) == 3 + 2 + 2  # baselines, DPLogisticRegression and the private pipeline at 2 epsilons
    for row in rows[3:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert 0.0 <= float(cells[2].split("±")[0]) <= 1.0 and 0 < float(cells[4]) <= float(cells[1])


def test_compare_task_option_overrides_the_rule(tmp_path, capsys):
    columns = _mixed_rows()
    del columns["price"], columns["grade"]
    path = write_columns(tmp_path / "codes.csv", columns)
    base = ["compare", "--csv", path, "--target", "code", *COLOURS, "--repeats", "1", "--epsilons", "5"]
    assert main(base) == 0  # two integer values: classification by the rule
    assert "task: classification, detected" in capsys.readouterr().out
    assert main([*base, "--task", "regression"]) == 0
    out = capsys.readouterr().out
    assert "task: regression, given by --task" in out and "test RMSE" in out


def test_compare_encodes_a_value_outside_the_declared_categories_as_zeros(tmp_path, capsys):
    columns = _mixed_rows()
    del columns["grade"], columns["code"]
    path = write_columns(tmp_path / "houses.csv", columns)
    argv = ["compare", "--csv", path, "--target", "price", "--categories", "colour=crimson,teal"]
    assert main([*argv, "--repeats", "1", "--epsilons", "5"]) == 0  # 'ochre' is all zeros
    captured = capsys.readouterr()
    assert "(n=160, d=4)" in captured.out and captured.err == ""


def _cells(path):
    """Every cell of a CSV file below its header (the private data)."""
    lines = Path(path).read_text().splitlines()[1:]
    return {cell for line in lines for cell in line.split(",") if cell}


def _blank(columns, column, row=3, value=""):
    columns[column][row] = value
    return columns


@pytest.mark.parametrize(
    "edit,argv,message",
    [
        (None, ["--target", "price"], "column 'colour' holds text: declare its categories with --categories colour="),
        (lambda c: _blank(c, "size"), ["--target", "price", *COLOURS], "column 'size' has missing values"),
        (lambda c: _blank(c, "weight", value="NaN"), ["--target", "price", *COLOURS], "column 'weight' has missing"),
        (lambda c: _blank(c, "colour"), ["--target", "price", *COLOURS], "column 'colour' has missing values"),
        (lambda c: _blank(c, "price", value="NA"), ["--target", "price", *COLOURS], "--target column 'price' has missing"),
        (None, ["--target", "price", *COLOURS, "--task", "classification"],
         "--task classification needs labels; column 'price' holds non-integer numbers"),
        (None, ["--target", "grade", *COLOURS, "--task", "regression"],
         "--task regression needs a numeric target; column 'grade' holds text"),
        (lambda c: {**c, "grade": ["premium"] * len(c["grade"])}, ["--target", "grade", *COLOURS],
         "column 'grade' holds a single value"),
        (lambda c: _blank(c, "code", row=0, value="5"), ["--target", "code", *COLOURS],
         "a label of column 'code' has a single row"),
        (None, ["--target", "cost", *COLOURS], "--target 'cost' is not a column"),
        (None, ["--target", "price", "--categories", "shade=crimson"], "--categories 'shade' is not a column"),
        (None, ["--target", "grade", "--categories", "grade=premium,budget"], "--categories 'grade' is the target"),
        (None, ["--target", "price", "--categories", "colour"], "--categories takes COLUMN=CATEGORY,CATEGORY"),
        (None, ["--target", "price", *COLOURS, "--feature-bounds", "0", "1"], "--feature-bounds builds the private"),
        (None, ["--target", "price", *COLOURS, "--delta", "0.05"],
         "--delta 0.05 is not below 1/n for the 28 training rows, so it promises nothing; pass --delta 1e-05"),
    ],
)
def test_compare_refuses_bad_csv_input_in_one_line_without_data_values(tmp_path, capsys, edit, argv, message):
    target = argv[argv.index("--target") + 1]
    columns = {name: cells for name, cells in _mixed_rows(n=40).items() if name not in {"grade", "code"} - {target}}
    if edit is not None:
        columns = edit(columns)
    path = write_columns(tmp_path / "rows.csv", columns)
    assert main(["compare", "--csv", path, *argv, "--repeats", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert message in captured.err
    leaked = {cell for cell in _cells(path) - MISSING_CELLS - set(columns) if cell in captured.err}
    assert not leaked, leaked


def _dump(path):
    """The content of an SQLite file, as SQL (independent of when its write-ahead log is merged)."""
    connection = sqlite3.connect(path)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def test_ledger_prints_the_fits_of_a_ledger_file_and_leaves_it_unchanged(tmp_path, capsys):
    path = tmp_path / "ledger.sqlite"
    ledger = PrivacyAccountant(epsilon=4.0, delta=1e-4, path=path)
    X, y = BUNDLED_DATASETS["iris"](return_X_y=True)
    for eps in (2.0, 0.5, 1.0):
        DPLogisticRegression(epsilon=eps, accountant=ledger, classes=[0, 1, 2], random_state=0).fit(X, y)
        if eps == 2.0:
            ledger.reset(confirm=True)
    spent, (reset,) = ledger.spent(), ledger.resets
    before = _dump(path)
    assert main(["ledger", str(path)]) == 0
    out = capsys.readouterr().out
    assert str(path) in out and "epsilon=4" in out  # the file and its budget
    assert f"epsilon={spent[0]:.4g} at delta=0.0001" in out  # what the fits spent together
    assert len([line for line in out.splitlines() if "DPLogisticRegression" in line]) == 2
    assert "reset" in out and f"epsilon={reset.epsilon:.4g}" in out  # the reset and what it forgot
    assert _dump(path) == before and len(ledger.history) == 2


def test_ledger_refuses_a_path_that_is_not_a_ledger_file_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "missing.sqlite"
    assert main(["ledger", str(missing)]) == 2
    assert "no file at" in capsys.readouterr().err and not missing.exists()
    other = tmp_path / "other.sqlite"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    connection.close()
    text = tmp_path / "rows.csv"
    write_csv(text, ["a"], [[1]])
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    for path in (other, text, empty):
        before = path.read_bytes()
        assert main(["ledger", str(path)]) == 2
        assert "is not a ledger file" in capsys.readouterr().err
        assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "other.sqlite", "rows.csv"]


def test_every_option_of_every_command_has_help(capsys):
    commands = next(action for action in _parser()._actions if action.dest == "command").choices
    assert set(commands) == {"compare", "ledger"}
    for command, parser in commands.items():
        assert parser.description
        for action in parser._actions:
            assert action.help, (command, action.dest)
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "usage: python -m skdpsco " + command in capsys.readouterr().out


def test_compare_reads_a_byte_order_mark_and_refuses_a_file_that_is_not_utf8(tmp_path, capsys):
    rows = "".join(f"{size},{label}\n" for size, label in [(1.5, "oui"), (2.5, "non")] * 10)
    marked = tmp_path / "marked.csv"
    marked.write_bytes(("\ufeffsize,label\n" + rows).encode("utf-8"))
    assert main(["compare", "--csv", str(marked), "--target", "label", "--repeats", "1", "--epsilons", "5"]) == 0
    assert "(n=20, d=1, classes=2)" in capsys.readouterr().out
    latin = tmp_path / "latin.csv"
    latin.write_bytes(("size,label\n" + rows.replace("non", "café")).encode("latin-1"))
    assert main(["compare", "--csv", str(latin), "--target", "label"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {latin} is not UTF-8 text: save it as UTF-8 (CSV UTF-8).\n"
