"""Private Newton (``algorithm='newton'``) against the default noisy GD and ``LogisticRegression`` (issue 15 item 3).

    python -m benchmarks.newton --validation          # tuning data: synthetic raw-scale family, modechoice, iris
    python -m benchmarks.newton --speed               # n = 1e5, d = 20 (3 seeds) and n = 1e6, d = 100 (time, 1 seed)
    python -m benchmarks.newton --benchmark           # the real benchmark sets (reported after the choice)

Every private entry is ``DPLogisticRegression`` at its defaults (feature scaling, ``radius=None``,
``delta = min(1e-5, n**-1.1)``, public ``classes``) with ``algorithm`` set: ``'noisy_gd'`` (the default
that ``'auto'`` chose before this benchmark, up to its work cap), ``'newton'`` and, with
``--variants``, ``'newton'`` with other ``solver_options`` (the tuning runs). The reference is
scikit-learn's ``LogisticRegression()`` (lbfgs, ``max_iter=5000``) behind a ``StandardScaler``, in
the same process right before the private fits; its time is the denominator of the time ratios.
Metrics on held-out rows: log-loss, ROC AUC (binary), accuracy, and the fit time in seconds.

Data:

* **validation** (defaults were chosen on these only): the synthetic raw-scale family of
  :func:`raw_family` (the family the radius rule of :mod:`skdpsco.defaults` was chosen on, with
  ``n`` up to 1e5), and ``modechoice`` (binary) and ``iris`` (3 classes) of
  ``benchmarks/real.py --validation`` (statsmodels);
* **speed**: :func:`benchmarks.speed.make_data` (unit rows, logistic labels), the issue's goal sizes;
* **benchmark**: the binary and multiclass sets of ``benchmarks/real.py`` (never used for tuning).

Results: ``benchmarks/results/newton_<mode>.md`` (and ``.json`` with the records); the summary
``benchmarks/results/newton.md`` is written by hand from them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.accounting import gaussian_noise_multiplier
from skdpsco.solvers import ALGORITHMS, AUTO_NEWTON_SIGNAL

from . import real
from .machine import machine_info
from .speed import make_data
from .utility import RESULTS

EPSILONS = (0.3, 1.0, 3.0)
"""The issue's privacy levels."""

REFERENCE = "LogisticRegression"
ENTRIES = {"noisy_gd": {"algorithm": "noisy_gd"}, "newton": {"algorithm": "newton"}}
"""Private entries: name -> ``DPLogisticRegression`` parameters."""

FAMILY = dict(n=(1000, 10_000, 30_000, 100_000), d=(10, 40), norm=(2.0, 8.0))
"""Cells of the synthetic validation family (:func:`raw_family`)."""

N_TEST = 20_000
"""Held-out rows drawn with every synthetic training set."""


def raw_family(n: int, d: int, norm: float, seed: int):
    """Raw-scale logistic data: AR(0.5)-correlated standard Gaussian features ``z``, labels
    ``P(y = 1) = sigmoid(<w, z>)`` with ``||w|| = norm``, and raw features ``x_j = s_j z_j + o_j``
    with scales ``s_j`` log-uniform in ``[1e-3, 1e3]`` and offsets ``o_j`` uniform in ``[-3 s_j,
    3 s_j]``. Returns ``(X_train, y_train, X_test, y_test)`` with ``n`` and :data:`N_TEST` rows."""
    rng = np.random.default_rng([1000, n, d, int(norm), seed])
    m = n + N_TEST
    covariance = 0.5 ** np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    z = rng.multivariate_normal(np.zeros(d), covariance, size=m)
    w = rng.standard_normal(d)
    w *= norm / np.linalg.norm(w)
    y = (rng.random(m) < 1.0 / (1.0 + np.exp(-(z @ w)))).astype(int)
    scales = 10.0 ** rng.uniform(-3.0, 3.0, d)
    X = z * scales + scales * rng.uniform(-3.0, 3.0, d)
    return X[:n], y[:n], X[n:], y[n:]


def scores(model, X, y, classes) -> dict:
    probabilities = model.predict_proba(X)
    out = {"logloss": float(log_loss(y, probabilities, labels=classes)),
           "accuracy": float(np.mean(model.predict(X) == y))}
    if len(classes) == 2:
        out["auc"] = float(roc_auc_score(y, probabilities[:, 1]))
    return out


@contextlib.contextmanager
def _solver_clock(spent: list):
    """Within the block, every registered solver's ``run`` adds its wall time to ``spent`` (the
    rest of a fit is the estimator's: validation, clipping, feature scaling, planning)."""
    classes = {type(solver) for solver in ALGORITHMS.values()}
    originals = {cls: cls.run for cls in classes}

    def timed(original):
        def run(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                spent.append(time.perf_counter() - start)

        return run

    for cls, original in originals.items():
        cls.run = timed(original)
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.run = original


def _timed_fit(model, X, y) -> tuple[float, float]:
    """``(fit seconds, of which in the solver)``."""
    spent = []
    start = time.perf_counter()
    with warnings.catch_warnings(), _solver_clock(spent):
        warnings.simplefilter("ignore")
        model.fit(X, y)
    return time.perf_counter() - start, sum(spent)


def fit_entries(data, classes, epsilons, seed, entries, reference=True) -> list[dict]:
    """The reference (with ``reference``) and every private entry at every epsilon on one split
    ``(X, y, X_test, y_test)``; one record each, with ``seconds`` and the metrics."""
    X, y, X_test, y_test = data
    records = []
    if reference:
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
        seconds, _ = _timed_fit(model, X, y)
        records.append(dict(entry=REFERENCE, epsilon=None, seconds=seconds,
                            **scores(model, X_test, y_test, classes)))
    for epsilon in epsilons:
        for name, params in entries.items():
            model = DPLogisticRegression(epsilon=epsilon, delta=real.default_delta(len(y)), classes=list(classes),
                                         random_state=seed, accountant=PrivacyAccountant(), **params)
            seconds, solver_seconds = _timed_fit(model, X, y)
            records.append(dict(entry=name, epsilon=epsilon, seconds=seconds, solver_seconds=solver_seconds,
                                algorithm=model.algorithm_,
                                **scores(model, X_test, y_test, classes)))
    return [dict(seed=seed, n_classes=len(classes), **r) for r in records]


def run_validation(seeds: int, entries: dict, epsilons=EPSILONS, cells=None, log=print) -> list[dict]:
    records = []
    for n in FAMILY["n"]:
        for d in FAMILY["d"]:
            for norm in FAMILY["norm"]:
                cell = f"raw n={n} d={d} norm={norm:g}"
                if cells and cell not in cells:
                    continue
                for seed in range(seeds):
                    data = raw_family(n, d, norm, seed)
                    records += [dict(data=cell, n=n, d=d, **r) for r in fit_entries(data, (0, 1), epsilons, seed, entries)]
                log(f"{cell} done")
    for name in ("modechoice", "iris"):
        if cells and name not in cells:
            continue
        records += run_real(real.VALIDATION[name], max(seeds, 10), entries, epsilons)
        log(f"{name} done")
    return records


def run_real(dataset, seeds: int, entries: dict, epsilons=EPSILONS) -> list[dict]:
    X, y = dataset.load()
    records = []
    for seed in range(seeds):
        X_train, X_test, y_train, y_test = real.split(dataset, X, y, seed)
        data = (X_train, y_train, X_test, y_test)
        records += [dict(data=dataset.name, n=len(y_train), d=X.shape[1], **r)
                    for r in fit_entries(data, dataset.classes, epsilons, seed, entries)]
    return records


SPEED_SIZES = ((100_000, 20, 3, "noisy_gd"), (1_000_000, 100, 1, "phased_sgd"))
"""``(n, d, seeds, default before)`` of the speed runs: the issue's goal sizes, and what ``'auto'``
ran there before this benchmark (at ``n = 1e6, d = 100`` the noisy-GD plan's work exceeds its cap,
and it ran Phased-SGD), which is the entry in noisy GD's place."""


def run_speed(entries: dict, epsilon: float = 1.0, log=print) -> list[dict]:
    """The reference ``LogisticRegression()`` (no scaler, as the issue's goal states it), then every
    entry and ``'auto'`` (the default), at epsilon 1, on :func:`benchmarks.speed.make_data`."""
    records = []
    for n, d, seeds, before in SPEED_SIZES:
        sized = {before: {"algorithm": before}, **{k: v for k, v in entries.items() if k != "noisy_gd"},
                 "auto": {"algorithm": "auto"}}
        for seed in range(seeds):
            X, y = make_data(n + N_TEST, d, seed)
            data = (X[:n], y[:n], X[n:], y[n:])
            plain = LogisticRegression()
            seconds, _ = _timed_fit(plain, data[0], data[1])
            records.append(dict(data=f"speed n={n} d={d}", n=n, d=d, seed=seed, n_classes=2, entry="LogisticRegression()",
                                epsilon=None, seconds=seconds,
                                **scores(plain, data[2], data[3], (-1, 1))))
            records += [dict(data=f"speed n={n} d={d}", n=n, d=d, **r)
                        for r in fit_entries(data, (-1, 1), (epsilon,), seed, sized, reference=False)]
        log(f"speed n={n} d={d} done")
    return records


# -- tables ----------------------------------------------------------------------------------------------


def _mean_std(values) -> str:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return "-"
    return f"{np.mean(values):.4f} ± {np.std(values):.4f}" if len(values) > 1 else f"{values[0]:.4f}"


def table(records) -> str:
    """One row per (data, epsilon, entry): mean ± std over seeds of each metric and of the time,
    and the time over the reference's in the same run (``LogisticRegression()`` for the speed data,
    the scaled pipeline otherwise)."""
    lines = ["| data | epsilon | entry | log-loss | AUC | accuracy | seconds (solver) | time / LR |",
             "|---|---|---|---|---|---|---|---|"]
    for data in dict.fromkeys(r["data"] for r in records):
        rows = [r for r in records if r["data"] == data]
        reference = {r["seed"]: r["seconds"] for r in rows if r["epsilon"] is None}
        keys = dict.fromkeys((r["epsilon"], r["entry"]) for r in rows)
        for epsilon, entry in keys:
            chosen = [r for r in rows if r["epsilon"] == epsilon and r["entry"] == entry]
            ratios = [r["seconds"] / reference[r["seed"]] for r in chosen if r["seed"] in reference]
            cells = [_mean_std([r.get(m) for r in chosen]) for m in ("logloss", "auc", "accuracy")]
            lines.append(f"| {data} | {'-' if epsilon is None else f'{epsilon:g}'} | {entry} | " + " | ".join(cells)
                         + f" | {np.mean([r['seconds'] for r in chosen]):.3f}"
                         + (f" ({np.mean([r['solver_seconds'] for r in chosen]):.3f})" if epsilon is not None else "")
                         + " | "
                         + (f"{np.mean(ratios):.1f}" if ratios and epsilon is not None else "-") + " |")
    return "\n".join(lines)


def paired(records, entry: str, baseline: str = "noisy_gd") -> str:
    """``entry - baseline`` per (data, epsilon), paired by seed: mean difference ± its standard
    error, for log-loss, AUC and accuracy; and the mean time ratio ``baseline / entry``."""
    lines = [f"| data | epsilon | log-loss ({entry} - {baseline}) | AUC | accuracy | speed-up |", "|---|---|---|---|---|---|"]
    for data in dict.fromkeys(r["data"] for r in records):
        for epsilon in dict.fromkeys(r["epsilon"] for r in records if r["data"] == data and r["epsilon"] is not None):
            by_seed = {}
            for r in records:
                if r["data"] == data and r["epsilon"] == epsilon and r["entry"] in (entry, baseline):
                    by_seed.setdefault(r["seed"], {})[r["entry"]] = r
            pairs = [v for v in by_seed.values() if len(v) == 2]
            if not pairs:
                continue
            cells = []
            for metric in ("logloss", "auc", "accuracy"):
                diffs = [p[entry][metric] - p[baseline][metric] for p in pairs if metric in p[entry]]
                if not diffs:
                    cells.append("-")
                    continue
                error = np.std(diffs, ddof=1) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
                cells.append(f"{np.mean(diffs):+.4f} ± {error:.4f}")
            speedup = np.mean([p[baseline]["seconds"] / p[entry]["seconds"] for p in pairs])
            lines.append(f"| {data} | {epsilon:g} | " + " | ".join(cells) + f" | {speedup:.1f} |")
    return "\n".join(lines)


def signal(n: int, d: int, n_classes: int, epsilon: float) -> float:
    """``n mu / p`` of the ``'auto'`` rule (:func:`skdpsco.solvers._newton_signal`) for ``n`` training
    rows, ``d`` features (intercept column added) and the benchmark's delta."""
    p = (d + 1) * (1 if n_classes == 2 else n_classes)
    return n / gaussian_noise_multiplier(epsilon, real.default_delta(n)) / p


def signal_table(records, entry: str = "newton", baseline: str = "noisy_gd") -> str:
    """The cells sorted by :func:`signal`, with the paired ``entry - baseline`` AUC and accuracy:
    the evidence for :data:`skdpsco.solvers.AUTO_NEWTON_SIGNAL`."""
    rows = []
    for data in dict.fromkeys(r["data"] for r in records):
        cell = [r for r in records if r["data"] == data]
        n_classes = cell[0]["n_classes"]
        for epsilon in dict.fromkeys(r["epsilon"] for r in cell if r["epsilon"] is not None):
            by_seed = {}
            for r in cell:
                if r["epsilon"] == epsilon and r["entry"] in (entry, baseline):
                    by_seed.setdefault(r["seed"], {})[r["entry"]] = r
            pairs = [v for v in by_seed.values() if len(v) == 2]
            if not pairs:
                continue
            differences = {m: np.mean([p[entry][m] - p[baseline][m] for p in pairs]) if m in pairs[0][entry] else math.nan
                           for m in ("auc", "accuracy")}
            rows.append((signal(cell[0]["n"], cell[0]["d"], n_classes, epsilon), data, epsilon, differences))
    lines = [f"| n mu / p | data | epsilon | AUC ({entry} - {baseline}) | accuracy | 'auto' |", "|---|---|---|---|---|---|"]
    for value, data, epsilon, differences in sorted(rows, key=lambda row: row[0]):
        auc = "-" if math.isnan(differences["auc"]) else f"{differences['auc']:+.4f}"
        chosen = entry if value >= AUTO_NEWTON_SIGNAL else baseline
        lines.append(f"| {value:.0f} | {data} | {epsilon:g} | {auc} | {differences['accuracy']:+.4f} | {chosen} |")
    return "\n".join(lines)


def write(stem: str, records, meta: dict, directory: Path = RESULTS) -> str:
    entries = dict.fromkeys(r["entry"] for r in records if r["epsilon"] is not None)
    text = table(records)
    baseline = "noisy_gd" if "noisy_gd" in entries else None
    for entry in entries:
        if baseline and entry != baseline:
            text += f"\n\n{entry} against {baseline}, paired by seed (mean ± standard error):\n\n" + paired(records, entry, baseline)
    if baseline and "newton" in entries:
        text += ("\n\nThe cells by n mu / p (the 'auto' rule's signal; the choice it makes at the threshold "
                 f"{AUTO_NEWTON_SIGNAL:g}), newton against noisy_gd, mean paired differences:\n\n" + signal_table(records))
    directory.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    (directory / f"{stem}.md").write_text(f"# Private Newton ({stem})\n\nMachine: {json.dumps(info)}\n\n"
                                          f"Run: {json.dumps(meta)}\n\n{text}\n")
    (directory / f"{stem}.json").write_text(json.dumps({"machine": info, "run": meta, "records": records}, indent=1))
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--validation", action="store_true")
    mode.add_argument("--speed", action="store_true")
    mode.add_argument("--benchmark", action="store_true")
    parser.add_argument("--seeds", type=int, default=3, help="synthetic seeds; the real sets run max(seeds, 10)")
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--cells", nargs="+", default=None, help="validation: only these data (names as in the table)")
    parser.add_argument("--variants", default=None,
                        help="JSON {name: solver_options} of further 'newton' entries (tuning runs)")
    parser.add_argument("--no-default", action="store_true", help="leave the noisy_gd entry out (tuning runs)")
    parser.add_argument("--stem", default=None, help="result file name (default newton_<mode>)")
    args = parser.parse_args(argv)
    entries = {k: v for k, v in ENTRIES.items() if not (args.no_default and k == "noisy_gd")}
    for name, options in json.loads(args.variants or "{}").items():
        entries[name] = {"algorithm": "newton", "solver_options": options}
    started = time.perf_counter()
    if args.validation:
        records, name = run_validation(args.seeds, entries, tuple(args.epsilons), args.cells), "validation"
        seeds = {"synthetic": args.seeds, "real": max(args.seeds, 10)}
    elif args.speed:
        records, name = run_speed(entries), "speed"
        seeds = {f"n={n} d={d}": count for n, d, count, _ in SPEED_SIZES}
    else:
        records, name, seeds = [], "benchmark", max(args.seeds, 10)
        for dataset in real.DATASETS.values():
            if dataset.task != "regression":
                records += run_real(dataset, seeds, entries, tuple(args.epsilons))
                print(f"{dataset.name} done", flush=True)
    meta = dict(mode=name, seeds=seeds, epsilons=args.epsilons, entries=entries,
                minutes=round((time.perf_counter() - started) / 60, 2))
    print(write(args.stem or f"newton_{name}", records, meta))


if __name__ == "__main__":
    main()
