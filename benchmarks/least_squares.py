"""Least squares: noisy GD against sufficient statistics perturbation (``algorithm='newton'``, one
Newton step from 0 on a released Hessian and gradient; issue 15 item 3).

    python -m benchmarks.least_squares --validation              # tuning data: star98, grunfeld, engel
    python -m benchmarks.least_squares --validation --variants   # the grid the defaults were chosen on
    python -m benchmarks.least_squares --benchmark               # diabetes, randhie, goal.py's synthetic cells

Every private entry is ``DPLpRegression`` at its defaults (``p=2``, feature scaling,
``y_bound='private'``, ``radius=None``) with ``algorithm`` set: ``'noisy_gd'`` (what ``'auto'`` chose
for ``p=2`` before this benchmark) and ``'newton'`` (at its defaults: one step for the squared loss)
and, with ``--variants``, the tuning runs: ``'newton'`` with other ``solver_options`` (the Hessian's
share, the floor's factor, a second step) and with other adaptive ridges in place of the eigenvalue
floor (:func:`curvature_variant`: AdaSSP's shift, a plain ridge). 10 seeds,
epsilon in {0.3, 1, 3, 10}, fit time (median, whole ``fit``).

Data:

* **validation** (the defaults were chosen on these only): the regression sets of
  ``benchmarks/real.py --validation`` (star98, grunfeld, engel; statsmodels), its 70/30 splits and
  ``delta = min(1e-5, n_train**-1.1)``; metric: test RMSE, and its ratio to ``StandardScaler +
  LinearRegression`` (the reference of ``benchmarks/real.py``);
* **benchmark** (reported after the choice, never tuned on): the regression sets of
  ``benchmarks/real.py`` (diabetes, randhie), as above, and the synthetic least-squares cells of
  ``benchmarks/goal.py`` (``n`` in {1e3, 1e4, 1e5}, ``d = 20``, rows on the unit sphere, ``y = <w*, x>
  + 0.1 N(0, 1)`` clipped to 1, ``Normalizer`` before every model, goal.py's ``delta = 1e-6``);
  metric: excess test MSE over ``w*``, and ``LinearRegression``'s.

Results: ``benchmarks/results/least_squares_<mode>.md`` (and ``.json`` with the records); the summary
``benchmarks/results/least_squares.md`` is written by hand from them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
import warnings

import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer, StandardScaler

from skdpsco import DPLpRegression, PrivacyAccountant
from skdpsco.solvers import newton

from . import goal, real
from .machine import machine_info
from .utility import RESULTS

EPSILONS = (0.3, 1.0, 3.0, 10.0)

ENTRIES = {"noisy_gd": {"algorithm": "noisy_gd"}, "newton": {"algorithm": "newton"}}
"""Private entries: name -> ``DPLpRegression`` parameters."""

VARIANTS = {
    f"newton h={share:g} f={floor:g}": {
        "algorithm": "newton", "solver_options": {"hessian_share": share, "floor_factor": floor}}
    for share in (0.15, 0.2, 0.3, 0.4, 0.5) for floor in (1.0, 1.5, 2.0)
}
VARIANTS["newton T=2"] = {"algorithm": "newton", "solver_options": {"n_steps": 2, "hessian_steps": 1}}
"""The tuning grid (``--variants``): share of ``mu**2`` on the Hessian and the eigenvalue floor's
factor; a second Newton step (its gradient at the first step's point, sensitivity ``2 L / n``)."""

CURVATURE_VARIANTS = {"newton AdaSSP shift": "shift", "newton ridge": "ridge"}
"""Other adaptive ridges than the eigenvalue floor (``--variants``; :func:`curvature_variant`)."""


@contextlib.contextmanager
def curvature_variant(kind: str):
    """Within the block, the Newton solver's curvature is the released Hessian ``H`` (eigenvalues
    ``e``) plus a ridge instead of ``max(e, floor)``: ``'shift'``, AdaSSP's ``max(0, floor - e_min)``
    (Wang 2018, with the released matrix's smallest eigenvalue in place of a separately released
    ``lambda_min``); ``'ridge'``, ``e + floor`` (raised to the floor where still below)."""
    original = newton.PrivateNewton._curvature

    def curvature(self, released, n_classes):
        assert n_classes == 1  # least squares: no multinomial projection
        weights = np.array([noise**-2.0 for _, noise in released])
        average = sum(weight * hessian for weight, (hessian, _) in zip(weights, released)) / weights.sum()
        floor = self.floor_factor * math.sqrt(2.0 * average.shape[0] / weights.sum())
        eigenvalues, eigenvectors = np.linalg.eigh(average)
        if kind == "shift":
            eigenvalues = eigenvalues + max(0.0, floor - eigenvalues.min())
        else:
            eigenvalues = np.maximum(eigenvalues + floor, floor)
        return eigenvalues, eigenvectors, floor

    newton.PrivateNewton._curvature = curvature
    try:
        yield
    finally:
        newton.PrivateNewton._curvature = original

VALIDATION = ("star98", "grunfeld", "engel")
BENCHMARK_REAL = ("diabetes", "randhie")
SYNTHETIC = {f"synthetic_n{n:.0e}": n for n in (10**3, 10**4, 10**5)}


def _rmse(prediction, y) -> float:
    return float(np.sqrt(np.mean((prediction - y) ** 2)))


def _excess_mse(prediction, y, reference) -> float:
    return float(np.mean((prediction - y) ** 2) - np.mean((reference - y) ** 2))


def _fit(make, X, y) -> tuple:
    """``(fitted model, seconds)``."""
    model = make()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixed row-bound and delta notes; results speak
        model.fit(X, y)
    return model, time.perf_counter() - start


def _private(entry: dict, epsilon: float, delta: float, seed: int):
    return lambda: DPLpRegression(epsilon=epsilon, delta=delta, random_state=seed, accountant=PrivacyAccountant(),
                                  **entry)


def run_real(names, entries: dict, seeds: int, log=print) -> list:
    registry = {**real.DATASETS, **real.VALIDATION}
    records = []
    for name in names:
        dataset = registry[name]
        X, y = dataset.load()
        for seed in range(seeds):
            X_train, X_test, y_train, y_test = real.split(dataset, X, y, seed)
            delta = real.default_delta(len(y_train))
            reference, seconds = _fit(lambda: make_pipeline(StandardScaler(), LinearRegression()), X_train, y_train)
            records.append(dict(data=name, model="reference", epsilon=None, seed=seed,
                                score=_rmse(reference.predict(X_test), y_test), seconds=seconds))
            records.append(dict(data=name, model="trivial", epsilon=None, seed=seed,
                                score=_rmse(np.full(len(y_test), y_train.mean()), y_test), seconds=0.0))
            for model_name, entry in entries.items():
                variant = CURVATURE_VARIANTS.get(model_name)
                with curvature_variant(variant) if variant else contextlib.nullcontext():
                    for epsilon in EPSILONS:
                        model, seconds = _fit(_private(entry, epsilon, delta, seed), X_train, y_train)
                        records.append(dict(data=name, model=model_name, epsilon=epsilon, seed=seed,
                                            score=_rmse(model.predict(X_test), y_test), seconds=seconds))
        log(f"{name} done")
    return records


def run_synthetic(entries: dict, seeds: int, log=print) -> list:
    records = []
    for name, n in SYNTHETIC.items():
        cell = next(c for c in goal.CELLS if c.name == f"synthetic_regression_n{n:.0e}")
        for seed in range(seeds):
            X_train, X_test, y_train, y_test, margin = cell.split(seed)
            reference, seconds = _fit(lambda: make_pipeline(Normalizer(), LinearRegression()), X_train, y_train)
            records.append(dict(data=name, model="reference", epsilon=None, seed=seed,
                                score=_excess_mse(reference.predict(X_test), y_test, margin), seconds=seconds))
            for model_name, entry in entries.items():
                for epsilon in EPSILONS:
                    private = _private(entry, epsilon, cell.delta, seed)
                    model, seconds = _fit(lambda: make_pipeline(Normalizer(), private()), X_train, y_train)
                    records.append(dict(data=name, model=model_name, epsilon=epsilon, seed=seed,
                                        score=_excess_mse(model.predict(X_test), y_test, margin), seconds=seconds))
        log(f"{name} done")
    return records


def table(records, ratio: bool) -> str:
    """Markdown: one line per (data, model); mean +- std per epsilon (with ``ratio``, also the mean's
    ratio to the reference's), the median fit time."""
    header = ["data", "model", *[f"ε={e:g}" for e in EPSILONS], "non-private", "fit ms (median)"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for data in dict.fromkeys(r["data"] for r in records):
        mine = [r for r in records if r["data"] == data]
        reference = float(np.mean([r["score"] for r in mine if r["model"] == "reference"]))
        trivial = [r["score"] for r in mine if r["model"] == "trivial"]
        for model in dict.fromkeys(r["model"] for r in mine if r["epsilon"] is not None):
            cells = []
            for epsilon in EPSILONS:
                scores = [r["score"] for r in mine if r["model"] == model and r["epsilon"] == epsilon]
                text = f"{np.mean(scores):.4g} ± {np.std(scores):.2g}"
                cells.append(text + (f" ({np.mean(scores) / reference:.2f}x)" if ratio else ""))
            seconds = [r["seconds"] for r in mine if r["model"] == model]
            nonprivate = f"{reference:.4g}" + (f" (trivial {np.mean(trivial):.4g})" if trivial else "")
            lines.append(f"| {data} | {model} | " + " | ".join(cells) + f" | {nonprivate} | {1e3 * np.median(seconds):.1f} |")
    return "\n".join(lines)


def summary(records, names) -> str:
    """Per model, the geometric mean over (data, epsilon) of the RMSE ratio to the reference."""
    lines = ["| model | geometric mean of the RMSE ratio over the cells |", "|---|---|"]
    models = dict.fromkeys(r["model"] for r in records if r["epsilon"] is not None)
    for model in models:
        ratios = []
        for data in names:
            reference = np.mean([r["score"] for r in records if r["data"] == data and r["model"] == "reference"])
            for epsilon in EPSILONS:
                ratios.append(np.mean([r["score"] for r in records if r["data"] == data and r["model"] == model
                                       and r["epsilon"] == epsilon]) / reference)
        lines.append(f"| {model} | {np.exp(np.mean(np.log(ratios))):.3f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--validation", action="store_true")
    mode.add_argument("--benchmark", action="store_true")
    parser.add_argument("--variants", action="store_true", help="also the tuning grid VARIANTS and CURVATURE_VARIANTS")
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    variants = {**VARIANTS, **{name: ENTRIES["newton"] for name in CURVATURE_VARIANTS}}
    entries = {**ENTRIES, **(variants if args.variants else {})}
    started = time.perf_counter()
    if args.validation:
        stem = "least_squares_validation" + ("_variants" if args.variants else "")
        records = run_real(VALIDATION, entries, args.seeds)
        text = table(records, ratio=True) + "\n\n" + summary(records, VALIDATION)
    else:
        stem = "least_squares_benchmark"
        real_records = run_real(BENCHMARK_REAL, entries, args.seeds)
        synthetic = run_synthetic(entries, args.seeds)
        records = real_records + synthetic
        text = (f"### Real sets (RMSE; ratio to StandardScaler + LinearRegression)\n\n{table(real_records, True)}\n\n"
                f"### goal.py's synthetic least-squares cells (excess test MSE over w*)\n\n{table(synthetic, False)}")
    info = machine_info()
    meta = dict(seeds=args.seeds, epsilons=EPSILONS, entries=entries, minutes=round((time.perf_counter() - started) / 60, 2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(f"# {stem}\n\nMachine: {json.dumps(info)}\n\nRun: {json.dumps(meta)}\n\n{text}\n")
    (RESULTS / f"{stem}.json").write_text(json.dumps({"machine": info, "run": meta, "records": records}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
