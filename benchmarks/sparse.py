"""Sparse high-dimensional benchmark (issue 7): l1-constrained Private FTRL against the l2 solvers.

    python -m benchmarks.sparse quick          # a few minutes: d in {10^3, 10^4}
    python -m benchmarks.sparse full           # d up to 10^5 (both generators; see benchmarks/README.md for times)
    python -m benchmarks.sparse full --generator bow        # one generator: sparse_full_bow.*
    python -m benchmarks.sparse full --merge                # sparse_full.* from sparse_full_{bow,dominant}.json
    python -m benchmarks.sparse full --cells dominant:100000:2000   # one cell (sparse_full_cells.*)

Writes ``benchmarks/results/sparse_{mode}.{md,json}`` (the JSON records the machine, every fit and
its solver diagnostics).

Why these data (the l1 geometry needs two things at once)
---------------------------------------------------------
Private mirror descent clips per-row gradients in **l2** and adds isotropic Gaussian noise calibrated
to that l2 sensitivity (``ftrl_mirror.md`` §3.5): the rows must be bounded in l2 (``data_norm = 1``,
every row is scaled to unit norm, which is also what the ``Normalizer`` of the utility benchmark
does). Its advantage, ``log d`` instead of ``d`` in the noise term of the bound, pays only when the
minimiser ``w*`` has a **small l1 norm** (few informative features) **and** the informative
coordinates of the mean gradient stand out of the noise. Normalising a dense row of ``d`` features
would shrink the few informative ones by ``sqrt(d)`` and destroy exactly that signal, so both
generators keep the informative features a fixed share of the row norm whatever ``d``:

* ``bow`` (bag-of-words-like, ``s = 20``): every row has 10 non-zero binary "words", 3 drawn from the
  ``s`` informative ones and 7 from the ``d - s`` background ones, scaled to unit norm;
  ``w* = +-4`` on the informative words (alternating signs, so the classes are balanced and the
  intercept is 0). Sparse rows: the informative words carry 30 % of the squared norm of a row, and
  each informative word appears in 15 % of the rows.
* ``dominant`` (``s = 5``): the informative block is a Gaussian vector carrying 81 % of the squared
  norm (l2 share 0.9), the rest is 10 background features at +-1 at random positions;
  ``w* = +-4`` on the informative block.

Labels follow the logistic model of ``w*`` (well specified: ``w*`` minimises the population risk),
so ``||w*||_1 = 4 s`` and ``||w*||_2 = 4 sqrt(s)`` are the natural radii. The Bayes accuracy of the
model is printed in the table (``w*`` on the test set).

Protocol
--------
Every cell (generator, d, n) draws, for each of 5 seeds, a fresh training set (seed family 10_000)
and uses one test set of 10^4 rows (seed family 20_000); every private model runs at the same
(epsilon, delta) with ``delta = 1e-6`` (< 1/n for every n here) and ``random_state = seed``. All
models are fitted without an intercept (``fit_intercept=False``; the generators are symmetric in
the label, so an intercept of 0 is public knowledge), on the same rows. Radii are **public
constants of the generator, stated here and never tuned on any data**: the estimators' default
``radius = 10`` for the l2 solvers, the l2 radius matched to ``||w*||_2``, and the l1 ball matched to
``||w*||_1``. Non-private references: scikit-learn's ``LogisticRegression`` with the l2 and the l1
penalty (``C = 1``, the default) and the majority-class predictor. Reported: test accuracy, mean ±
std over seeds, and in the JSON the test logistic loss, the fraction of ``||w||_1`` on the
informative features and the fit time.

The private estimators take dense arrays (``accept_sparse=False``) and keep one clipped copy, so
``n d`` is kept at or below 2 10^8 (1.6 GB per copy); at ``d = 10^5`` only ``n = 2000`` fits.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from skdpsco import DPLogisticRegression, PrivacyAccountant
from skdpsco.geometry import l1_geometry_exponent

from .machine import machine_info
from .utility import RESULTS

DELTA = 1e-6
N_TEST = 10_000
SEEDS = 5
WEIGHT = 4.0


# -- generators ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Generator:
    name: str
    informative: int
    draw: Callable  # (n, d, rng) -> CSR rows with unit l2 norm

    def w_star(self, d: int) -> np.ndarray:
        w = np.zeros(d)
        w[: self.informative] = WEIGHT * np.where(np.arange(self.informative) % 2 == 0, 1.0, -1.0)
        return w

    def sample(self, n: int, d: int, seed: int):
        rng = np.random.default_rng(seed)
        X = self.draw(n, d, rng)
        margin = X @ self.w_star(d)
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-margin))).astype(int)
        return X, y


def _rows(n, d, cols, values):
    k = cols.shape[1]
    X = sp.csr_matrix((values.ravel(), cols.ravel(), np.arange(0, n * k + 1, k)), shape=(n, d))
    X.sum_duplicates()  # a background column drawn twice in a row is one feature with the summed value
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    return sp.diags(1.0 / norms) @ X


def _bow(s: int, inform_per_row: int = 3, background_per_row: int = 7):
    def draw(n, d, rng):
        informative = np.argsort(rng.random((n, s)), axis=1)[:, :inform_per_row]  # distinct words
        background = rng.integers(s, d, size=(n, background_per_row))
        return _rows(n, d, np.hstack([informative, background]), np.ones((n, inform_per_row + background_per_row)))

    return draw


def _dominant(s: int, share: float = 0.9, background_per_row: int = 10):
    def draw(n, d, rng):
        block = rng.normal(size=(n, s))
        block *= share / np.linalg.norm(block, axis=1, keepdims=True)
        background = rng.choice([-1.0, 1.0], size=(n, background_per_row))
        background *= np.sqrt(1.0 - share**2) / np.sqrt(background_per_row)
        cols = np.hstack([np.tile(np.arange(s), (n, 1)), rng.integers(s, d, size=(n, background_per_row))])
        return _rows(n, d, cols, np.hstack([block, background]))

    return draw


GENERATORS = {
    "bow": Generator("bow", 20, _bow(20)),
    "dominant": Generator("dominant", 5, _dominant(5)),
}


# -- models --------------------------------------------------------------------------------------
def _private(**params):
    def make(epsilon, seed, w_star):
        resolved = {k: (v(w_star) if callable(v) else v) for k, v in params.items()}
        return DPLogisticRegression(epsilon=epsilon, delta=DELTA, data_norm=1.0, fit_intercept=False, classes=[0, 1],
                                    random_state=seed, accountant=PrivacyAccountant(), **resolved)

    return make


def _l1(w):
    return float(np.abs(w).sum())


def _l2(w):
    return float(np.linalg.norm(w))


PRIVATE = {
    "auto, R=10": _private(algorithm="auto"),
    "auto, R=‖w*‖₂": _private(algorithm="auto", radius=_l2),
    "phased_sgd, R=10": _private(algorithm="phased_sgd"),
    "ftrl ℓ2, R=10": _private(algorithm="ftrl"),
    "ftrl ℓ2, R=‖w*‖₂": _private(algorithm="ftrl", radius=_l2),
    "ftrl ℓ1 ball, p=1+1/ln d, R=‖w*‖₁": _private(algorithm="ftrl", constraint="l1", radius=_l1,
                                                  constraint_p=lambda w: l1_geometry_exponent(w.size)),
    "ftrl ℓ1 ball, p=2 (default), R=‖w*‖₁": _private(algorithm="ftrl", constraint="l1", radius=_l1),
}
"""Private entries: name -> (epsilon, seed, w*) -> estimator. What ``auto`` picks follows the
estimators' rule at the time of the run (recorded per fit in the JSON and per row in the table);
``phased_sgd`` is pinned so that the comparison does not move with that rule. The
two l1 entries differ in the potential: the l1 geometry of the spec (§1.4; ``fit_intercept=False``,
so ``d`` is the number of parameters) and the default Euclidean one."""

REFERENCES = {
    "trivial": None,
    "LR ℓ2": lambda: LogisticRegression(C=1.0, fit_intercept=False, max_iter=1000),
    "LR ℓ1": lambda: LogisticRegression(C=1.0, fit_intercept=False, penalty="l1", solver="liblinear"),
}

MODES = {
    "quick": dict(cells=(("bow", 1000, 5000), ("dominant", 1000, 5000), ("bow", 10_000, 5000),
                         ("dominant", 10_000, 5000)),
                  epsilons=(1.0, 3.0)),
    "full": dict(cells=tuple((g, d, n) for g in ("bow", "dominant")
                             for d, n in ((1000, 2000), (1000, 20_000), (1000, 100_000), (10_000, 2000),
                                          (10_000, 10_000), (100_000, 2000))),
                 epsilons=(0.3, 1.0, 3.0)),
}


# -- running -------------------------------------------------------------------------------------
def _scores(coef, X_test, y_test, informative):
    margin = np.asarray(X_test @ coef).ravel()
    signed = np.where(y_test == 1, 1.0, -1.0)
    total = np.abs(coef).sum()
    return {
        "accuracy": float(np.mean((margin > 0) == (y_test == 1))),
        "log_loss": float(np.mean(np.logaddexp(0.0, -signed * margin))),
        "informative_share": float(np.abs(coef[:informative]).sum() / total) if total > 0 else 0.0,
    }


def run_cell(generator: str, d: int, n: int, epsilons, seeds: int = SEEDS, log=print):
    """Raw records of one (generator, d, n) cell: one per (model, epsilon, seed)."""
    gen = GENERATORS[generator]
    w_star = gen.w_star(d)
    X_test, y_test = gen.sample(N_TEST, d, 20_000 + d)
    cell = {"generator": generator, "d": d, "n": n}
    records = [{**cell, "model": "Bayes (w*)", "epsilon": None, "seed": None,
                **_scores(w_star, X_test, y_test, gen.informative)}]
    for seed in range(seeds):
        X_sparse, y = gen.sample(n, d, 10_000 + 100 * seed + d % 97)
        majority = int(np.mean(y) >= 0.5)
        records.append({**cell, "model": "trivial", "epsilon": None, "seed": seed,
                        "accuracy": float(np.mean(y_test == majority))})
        for name, make in REFERENCES.items():
            if make is None:
                continue
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                coef = make().fit(X_sparse, y).coef_.ravel()
            records.append({**cell, "model": name, "epsilon": None, "seed": seed,
                            "seconds": time.perf_counter() - start, **_scores(coef, X_test, y_test, gen.informative)})
        X = X_sparse.toarray()
        for epsilon in epsilons:
            for name, make in PRIVATE.items():
                model = make(epsilon, seed, w_star)
                start = time.perf_counter()
                model.fit(X, y)
                seconds = time.perf_counter() - start
                info = {k: v for k, v in model.solver_info_.items() if isinstance(v, (int, float, str, type(None)))}
                records.append({**cell, "model": name, "epsilon": epsilon, "seed": seed, "seconds": seconds,
                                "epsilon_spent": float(model.epsilon_), "radius": float(model.radius_),
                                "algorithm": model.algorithm_, "info": info,
                                **_scores(model.coef_.ravel(), X_test, y_test, gen.informative)})
        del X
        log(f"  {generator} d={d} n={n} seed {seed} done", flush=True)
    return records


def table(records, epsilons, metric: str = "accuracy") -> str:
    """One row per (generator, d, n, epsilon); ``metric`` mean ± std per model (best private entry in
    bold: largest accuracy, smallest ``log_loss``); non-private columns repeated on every epsilon row."""
    models = ["trivial", "LR ℓ2", "LR ℓ1", *PRIVATE]
    pick = max if metric == "accuracy" else min
    header = "| data | d | n | ε | Bayes | " + " | ".join(models) + " | auto ran |"
    lines = [header, "|" + "---|" * (6 + len(models))]
    cells = list(dict.fromkeys((r["generator"], r["d"], r["n"]) for r in records))
    for generator, d, n in cells:
        rs = [r for r in records if (r["generator"], r["d"], r["n"]) == (generator, d, n)]
        bayes = next(r[metric] for r in rs if r["model"] == "Bayes (w*)")
        for epsilon in epsilons:
            entries = []
            values_by_model = {}
            for model in models:
                eps = None if model in REFERENCES else epsilon
                values = [r[metric] for r in rs if r["model"] == model and r["epsilon"] == eps and metric in r]
                values_by_model[model] = float(np.mean(values)) if values else float("nan")
                entries.append(f"{np.mean(values):.3f} ± {np.std(values):.3f}" if values else "—")
            best = pick(PRIVATE, key=lambda m: values_by_model[m])
            entries = [f"**{e}**" if m == best else e for m, e in zip(models, entries)]
            chosen = sorted({r.get("algorithm", "?") for r in rs if r["model"].startswith("auto") and r["epsilon"] == epsilon})
            lines.append(f"| {generator} | {d:,} | {n:,} | {epsilon:g} | {bayes:.3f} | " + " | ".join(entries)
                         + f" | {', '.join(chosen)} |")
    return "\n".join(lines)


def run(mode: str, cells=None, generator=None, log=print):
    """Run ``mode`` and write ``sparse_{mode}.{md,json}``; returns the accuracy table. With
    ``generator``, only its cells, written to ``sparse_{mode}_{generator}.*``; with ``cells``, only
    those, written to ``sparse_{mode}_cells.*``."""
    config = MODES[mode]
    stem = RESULTS / (f"sparse_{mode}_cells" if cells else f"sparse_{mode}_{generator}" if generator
                      else f"sparse_{mode}")
    cells = cells or [c for c in config["cells"] if generator in (None, c[0])]
    started = time.perf_counter()
    records = []
    for generator, d, n in cells:
        records += run_cell(generator, d, n, config["epsilons"], log=log)
    minutes = (time.perf_counter() - started) / 60
    threads = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    return write(stem, mode, {"machine": machine_info(), "threads": threads, "minutes": minutes, "delta": DELTA,
                              "seeds": SEEDS, "n_test": N_TEST, "epsilons": config["epsilons"], "records": records})


def write(stem, mode: str, result: dict) -> str:
    """``stem.json`` (everything) and ``stem.md`` (the accuracy table); returns the table."""
    minutes, records = result["minutes"], result["records"]
    RESULTS.mkdir(exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    accuracy = table(records, result["epsilons"])
    loss = table(records, result["epsilons"], "log_loss")
    note = f"\n{result['note']}.\n" if "note" in result else ""
    stem.with_suffix(".md").write_text(
        f"### Sparse high-dimensional logistic regression ({mode}; {SEEDS} seeds, δ = {DELTA:g}, "
        f"test n = {N_TEST:,})\n\nGenerators, radii and protocol: `benchmarks/sparse.py`. Run time "
        f"{minutes:.1f} min.{note}\n#### Test accuracy (mean ± std; best private entry in bold)\n\n{accuracy}\n\n"
        f"#### Test logistic loss (mean ± std; best private entry in bold; the trivial model's is log 2 = 0.693)"
        f"\n\n{loss}\n")
    return accuracy


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=sorted(MODES), nargs="?", default="quick")
    parser.add_argument("--cells", nargs="+", default=None, help="generator:d:n, e.g. bow:10000:2000")
    parser.add_argument("--generator", choices=sorted(GENERATORS), default=None,
                        help="only this generator's cells (written to sparse_{mode}_{generator}.*)")
    parser.add_argument("--merge", action="store_true",
                        help="no fitting: combine sparse_{mode}_{generator}.json of every generator into sparse_{mode}.*")
    args = parser.parse_args(argv)
    if args.merge:
        print(merge(args.mode))
        return
    cells = [(g, int(d), int(n)) for g, d, n in (c.split(":") for c in args.cells)] if args.cells else None
    print(run(args.mode, cells, args.generator))


def merge(mode: str) -> str:
    """``sparse_{mode}.*`` from the per-generator runs ``sparse_{mode}_{generator}.json``."""
    parts = [json.loads((RESULTS / f"sparse_{mode}_{g}.json").read_text()) for g in GENERATORS]
    merged = {**parts[0], "minutes": sum(p["minutes"] for p in parts), "records": [r for p in parts for r in p["records"]],
              "runs": [{k: p[k] for k in ("machine", "minutes")} for p in parts],
              "note": "assembled from the per-generator runs " + ", ".join(f"sparse_{mode}_{g}.json" for g in GENERATORS)}
    return write(RESULTS / f"sparse_{mode}", mode, merged)


if __name__ == "__main__":
    np.seterr(over="ignore")
    main()
