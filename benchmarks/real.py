"""Real-data benchmark of the defaults (the feature-scaling issue): raw tables whose feature scales
differ by orders of magnitude, with and without ``Normalizer``.

    python -m benchmarks.real --quick                      # 3 seeds, epsilon in {1, 3}
    python -m benchmarks.real                              # 10 seeds, epsilon in {0.3, 1, 3, 10}
    python -m benchmarks.real --datasets fair wine --epsilons 1 --seeds 2
    python -m benchmarks.real --validation                 # the tuning sets (VALIDATION), not these

diffprivlib needs scikit-learn < 1.7: run in the peers environment of ``benchmarks/README.md``
(``PYTHONPATH=. /tmp/peers/bin/python -m benchmarks.real``) to fill its columns; elsewhere they are
skipped with a note. statsmodels (a benchmark-only dependency: ``pip install skdpsco[bench]`` or
``benchmarks/requirements-peers.txt``) provides ``fair``, ``randhie`` and ``anes96``.

Datasets (``DATASETS``)
-----------------------
Every loader is a fixed per-row map with public constants only: nothing is fitted on the rows (no
min/max, mean, quantile or category list read from the data). Features stay on their raw scale.
Categorical (nominal) columns become indicators of their *documented* codes, the first code being
the reference (dropped: it would be collinear with the intercept); ordered codes (ratings, education
levels, income brackets) stay numeric, as in the data sets' own documentation and models.
Regression targets are divided by a public bound so that ``|y| <= 1``, the default ``y_bound`` of
``DPLpRegression`` (RMSE is then in those units; the ratio to the non-private RMSE, which the goal
judges, does not depend on the division).

* ``breast_cancer`` (scikit-learn, 569 x 30, binary): the 30 raw measurements; malignant / benign.
* ``wine`` (scikit-learn, 178 x 13, 3 classes): the 13 raw measurements (proline up to ~1700,
  hue below 2); the cultivar.
* ``digits_binary`` (scikit-learn, 1797 x 64, binary): the 8 x 8 pixel counts (0-16); digit >= 5,
  the split of ``benchmarks/utility.py``.
* ``digits`` (scikit-learn, 1797 x 64, 10 classes): the same pixels; the digit.
* ``diabetes`` (scikit-learn, 442 x 10, regression): the *unscaled* features
  (``load_diabetes(scaled=False)``; the default scaled copy was centred and scaled with statistics of
  all 442 rows, which a private fit may not use): age, sex (coded 1/2, becomes the indicator
  ``sex == 2``), bmi, bp, s1-s6. Target: disease progression divided by 346, the bound of
  :data:`benchmarks.goal.DIABETES_TARGET_BOUND` (the range 25-346 printed with the data; it is also
  the bundled set's maximum, so treat it as the data set's published range, as ``goal.py`` does).
* ``fair`` (statsmodels, 6366 x 16, binary, 32 % positive): target ``affairs > 0`` (the issue's);
  rate_marriage (1-5) and religious (1-4) ratings, age, yrs_married, children and educ (years, coded
  9-20) numeric; occupation and occupation_husb are nominal (documented codes 1-6: student, farming
  or unskilled, white-collar, teacher/nurse/..., managerial, professional): indicators of codes 2-6.
* ``randhie`` (statsmodels, 20190 x 9, regression): target ``log1p(mdvis)`` (the issue's; mdvis is
  the number of outpatient visits to an MD in a year) divided by ``log1p(365)``, the public bound of
  one visit a day (larger counts would be clipped; none in the data); the 9 documented regressors
  lncoins, idp, lpi, fmde, physlm, disea, hlthg, hlthf, hlthp (already indicators where nominal).
* ``anes96`` (statsmodels, 944 x 9, binary, 42 % positive): target ``vote`` (expected vote, 0 =
  Clinton, 1 = Dole). statsmodels' own example models PID (party identification, 7 ordered
  levels) as a multinomial outcome; ``vote`` is chosen because it is the survey's binary outcome
  (AUC applies, classes balanced enough for it to be informative) and the benchmark already has two
  multi-class sets. Features: popul (census place population in 1000s, 0-7300: the large-scale
  column), TVnews (0-7), selfLR, ClinLR, DoleLR (1-7), PID (0-6), age, educ (1-7), income (1-24),
  ordered codes kept numeric. ``logpopul`` is dropped: it is a transform of ``popul``, not a raw
  feature.

Splits: 70/30, stratified for classification, plain for regression, ``random_state = seed`` for
seeds 0..N-1; the private models get ``random_state = seed`` as well.

Row sets and entries (``ROW_SETS``, ``ENTRIES``)
------------------------------------------------
Every entry runs on the raw rows and, as a separate row set, on ``Normalizer()``-ed rows (a per-row
map, no privacy cost; the non-private references are refitted on those rows too).

* ``skdpsco defaults``: ``DPLogisticRegression`` / ``DPLpRegression`` with only ``epsilon``,
  ``delta = min(1e-5, n_train ** -1.1)``, ``random_state`` and ``classes`` (the documented label
  set) set, plus a fresh ``PrivacyAccountant`` per fit (bookkeeping only: the shared default
  accountant would accumulate every fit's record).
* ``diffprivlib``: ``LogisticRegression(epsilon, data_norm=1)`` and
  ``LinearRegression(epsilon, bounds_X=(-1, 1), bounds_y=(-1, 1))``, pure epsilon-DP (stronger than
  our (epsilon, delta)), ``C = 1``. The bounds are the public ones our defaults use (rows clipped to
  norm ``data_norm = 1``, hence every coordinate in [-1, 1]; targets within ``y_bound = 1``): both
  libraries clip to them. After ``Normalizer`` they are exact. Bounds read from the training rows
  (e.g. each feature's min and max, or the largest row norm) would make diffprivlib look better on
  the raw rows, but such a fit is not differentially private (the bounds themselves leak) and would
  be unfair to the defaults, which may not read them either.
* ``non-private StandardScaler + LR``: ``StandardScaler`` then ``LogisticRegression(max_iter=5000)``
  (``C = 1``; the iteration cap only lets lbfgs converge) or ``LinearRegression()``: the goal's
  reference.
* ``non-private LR (unscaled)``: the same model without the scaler.
* ``trivial``: class priors (``DummyClassifier(strategy='prior')``: AUC 0.5, majority-class
  accuracy) or the training mean (``DummyRegressor()``).

Metrics (``METRICS``): ROC AUC and accuracy for binary tasks, accuracy for multi-class, RMSE for
regression; mean +- std over seeds; median fit time. The goal columns (``GOAL``): at epsilon = 1 the
defaults within 0.03 of the reference's AUC (binary) or accuracy (multi-class), RMSE within 1.3x;
at epsilon = 3 within 0.01 / 1.1x. The reference is ``non-private StandardScaler + LR`` on the
**raw** rows for both row sets (what a non-private analyst gets from the table as it is; applying
``Normalizer`` is part of the pipeline being judged). "trivial's gap" is the trivial model's gap
on the same scale: how much a threshold asks of a data set (on randhie the mean alone is within
1.05x of the reference's RMSE). "Beats diffprivlib": the defaults' mean goal metric (AUC for
binary sets) is better than diffprivlib's on the same row set and epsilon.

Validation sets (``VALIDATION``, ``--validation``): the other bundled real data of scikit-learn and
statsmodels big enough to fit a linear model on, for tuning defaults without touching the sets
above (they are small: most bundled sets are tiny or time series; see ``VALIDATION``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from sklearn import datasets
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer, StandardScaler

from skdpsco import DPLogisticRegression, DPLpRegression, PrivacyAccountant

from .goal import DIABETES_TARGET_BOUND, _stats, diffprivlib_models
from .machine import machine_info
from .utility import RESULTS

RANDHIE_TARGET_BOUND = math.log1p(365.0)
"""Public bound on ``log1p(mdvis)``: at most one outpatient visit a day for a year."""

GRUNFELD_TARGET_BOUND = math.log1p(1e4)
"""Public bound on ``log1p(invest)`` (grunfeld, millions of 1947 dollars): gross investment below
ten billion 1947 dollars for any US firm of the period (an order-of-magnitude bound, not a data
maximum: the largest value is about 1500)."""

ENGEL_TARGET_BOUND = 1e4
"""Public bound on engel's annual household food expenditure (Belgian francs of the 1850s; an
order-of-magnitude bound, the largest value is about 2000)."""


# -- datasets ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RealDataset:
    """A bundled real data set: ``load()`` returns ``(X, y)`` as float arrays (raw features, public
    per-row maps only); ``classes`` is the documented label set (``None`` for regression)."""

    name: str
    task: str  # "binary", "multiclass" or "regression"
    load: Callable[[], tuple]
    classes: tuple | None
    source: str
    target: str


def _indicators(codes: np.ndarray, levels) -> np.ndarray:
    """Indicator columns ``codes == level`` for the documented ``levels`` (the reference level,
    omitted by the caller, gets all zeros): a fixed per-row map."""
    return np.column_stack([(np.asarray(codes) == level).astype(float) for level in levels])


def _statsmodels_frame(name: str):
    try:
        import statsmodels.datasets as sm_datasets
    except ImportError as exc:  # a benchmark-only dependency
        raise ImportError(f"the {name} data set needs statsmodels: pip install skdpsco[bench]") from exc
    return getattr(sm_datasets, name).load_pandas().data


def _sklearn(loader, target=lambda y: y, **kwargs):
    def load():
        X, y = loader(return_X_y=True, **kwargs)
        return np.asarray(X, dtype=float), target(np.asarray(y))
    return load


def _diabetes():
    X, y = datasets.load_diabetes(return_X_y=True, scaled=False)
    X = X.copy()
    X[:, 1] = (X[:, 1] == 2).astype(float)  # sex, coded 1/2: one indicator (the first code is the reference)
    return X, y / DIABETES_TARGET_BOUND


FAIR_NUMERIC = ["rate_marriage", "age", "yrs_married", "children", "religious", "educ"]
FAIR_OCCUPATION_CODES = (2, 3, 4, 5, 6)  # documented codes 1-6; 1 (student) is the reference


def _fair():
    frame = _statsmodels_frame("fair")
    X = np.column_stack([frame[FAIR_NUMERIC].to_numpy(float),
                         _indicators(frame["occupation"], FAIR_OCCUPATION_CODES),
                         _indicators(frame["occupation_husb"], FAIR_OCCUPATION_CODES)])
    return X, (frame["affairs"].to_numpy() > 0).astype(int)


RANDHIE_FEATURES = ["lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp"]


def _randhie():
    frame = _statsmodels_frame("randhie")
    return frame[RANDHIE_FEATURES].to_numpy(float), np.log1p(frame["mdvis"].to_numpy(float)) / RANDHIE_TARGET_BOUND


ANES96_FEATURES = ["popul", "TVnews", "selfLR", "ClinLR", "DoleLR", "PID", "age", "educ", "income"]


def _anes96():
    frame = _statsmodels_frame("anes96")
    return frame[ANES96_FEATURES].to_numpy(float), frame["vote"].to_numpy().astype(int)


def _registry(*sets: RealDataset) -> dict:
    return {d.name: d for d in sets}


DATASETS = _registry(
    RealDataset("breast_cancer", "binary", _sklearn(datasets.load_breast_cancer), (0, 1), "scikit-learn",
                "malignant (0) / benign (1)"),
    RealDataset("wine", "multiclass", _sklearn(datasets.load_wine), (0, 1, 2), "scikit-learn", "cultivar"),
    RealDataset("digits_binary", "binary", _sklearn(datasets.load_digits, lambda y: (y >= 5).astype(int)), (0, 1),
                "scikit-learn", "digit >= 5"),
    RealDataset("digits", "multiclass", _sklearn(datasets.load_digits), tuple(range(10)), "scikit-learn", "digit"),
    RealDataset("diabetes", "regression", _diabetes, None, "scikit-learn", "progression / 346"),
    RealDataset("fair", "binary", _fair, (0, 1), "statsmodels", "affairs > 0"),
    RealDataset("randhie", "regression", _randhie, None, "statsmodels", "log1p(mdvis) / log1p(365)"),
    RealDataset("anes96", "binary", _anes96, (0, 1), "statsmodels", "vote (0 Clinton, 1 Dole)"),
)


# -- validation sets (for tuning defaults; never the benchmark's) ------------------------------------
STAR98_FEATURES = ["LOWINC", "PERASIAN", "PERBLACK", "PERHISP", "PERMINTE", "AVYRSEXP", "AVSALK", "PERSPENK",
                   "PTRATIO", "PCTAF", "PCTCHRT", "PCTYRRND"]


def _star98():
    """Share of a district's students above the national math median (in [0, 1]: bound 1) on the
    12 base regressors (the 8 bundled interaction columns are products of these, not raw)."""
    frame = _statsmodels_frame("star98")
    share = frame["NABOVE"].to_numpy(float) / (frame["NABOVE"] + frame["NBELOW"]).to_numpy(float)
    return frame[STAR98_FEATURES].to_numpy(float), share


MODECHOICE_FEATURES = ["ttme", "invc", "invt", "gc", "hinc", "psize"]


def _modechoice():
    """Whether a travel mode was chosen (one row per individual and mode: 4 rows per person, so
    rows are not independent and a row-level split shares people across train and test); mode
    (documented codes 1 air, 2 train, 3 bus, 4 car) as indicators of 2-4."""
    frame = _statsmodels_frame("modechoice")
    X = np.column_stack([frame[MODECHOICE_FEATURES].to_numpy(float), _indicators(frame["mode"], (2, 3, 4))])
    return X, frame["choice"].to_numpy().astype(int)


GRUNFELD_FIRMS = ("US Steel", "General Electric", "Chrysler", "Atlantic Refining", "IBM", "Union Oil",
                  "Westinghouse", "Goodyear", "Diamond Match", "American Steel")
"""The documented firms other than the reference, General Motors (statsmodels' description)."""


def _grunfeld():
    """``log1p(invest)`` / :data:`GRUNFELD_TARGET_BOUND` on value, capital, year and the firm
    (indicators of :data:`GRUNFELD_FIRMS`). A panel (20 years of 11 firms): a row-level split puts
    years of the same firm on both sides."""
    frame = _statsmodels_frame("grunfeld")
    X = np.column_stack([frame[["value", "capital", "year"]].to_numpy(float),
                         _indicators(frame["firm"], GRUNFELD_FIRMS)])
    return X, np.log1p(frame["invest"].to_numpy(float)) / GRUNFELD_TARGET_BOUND


def _engel():
    """Food expenditure / :data:`ENGEL_TARGET_BOUND` on household income (one feature, in francs: a
    row norm of hundreds to thousands)."""
    frame = _statsmodels_frame("engel")
    return frame[["income"]].to_numpy(float), frame["foodexp"].to_numpy(float) / ENGEL_TARGET_BOUND


VALIDATION = _registry(
    RealDataset("iris", "multiclass", _sklearn(datasets.load_iris), (0, 1, 2), "scikit-learn", "species"),
    RealDataset("star98", "regression", _star98, None, "statsmodels", "NABOVE / (NABOVE + NBELOW)"),
    RealDataset("modechoice", "binary", _modechoice, (0, 1), "statsmodels", "mode chosen"),
    RealDataset("grunfeld", "regression", _grunfeld, None, "statsmodels", "log1p(invest) / log1p(1e4)"),
    RealDataset("engel", "regression", _engel, None, "statsmodels", "foodexp / 1e4"),
)
"""Other bundled real data, for tuning (``--validation``). Left out: statsmodels' sets with fewer
than 100 rows (ccard, cpunish, committee, copper, heart, longley, scotland, spector, stackloss,
statecrime, strikes, china_smoking), its time series (co2, elnino, nile, sunspots, macrodata,
danish_data, interest_inflation, fertility) and cancer (one feature, a count model);
scikit-learn's linnerud (20 rows). scikit-learn's ``fetch_*`` sets need a download."""


# -- entries ---------------------------------------------------------------------------------------
ROW_SETS = {"raw": (), "normalizer": (Normalizer,)}
"""Per-row maps applied before every entry (no privacy cost), as step factories."""


@dataclass(frozen=True)
class Entry:
    name: str
    private: bool
    make: Callable  # (task, epsilon, delta, seed, classes) -> estimator


def _skdpsco_defaults(task, epsilon, delta, seed, classes):
    common = dict(epsilon=epsilon, delta=delta, random_state=seed, accountant=PrivacyAccountant())
    if task == "regression":
        return DPLpRegression(**common)
    return DPLogisticRegression(classes=list(classes), **common)


def _diffprivlib(task, epsilon, delta, seed, classes):
    if task == "regression":  # the public bounds our defaults use: |x_j| <= ||x|| <= 1, |y| <= 1
        return diffprivlib_models.LinearRegression(epsilon=epsilon, bounds_X=(-1.0, 1.0), bounds_y=(-1.0, 1.0),
                                                   random_state=seed)
    return diffprivlib_models.LogisticRegression(epsilon=epsilon, data_norm=1.0, random_state=seed)


def _nonprivate(task):
    return LinearRegression() if task == "regression" else LogisticRegression(max_iter=5000)


def _trivial(task, *_):
    return DummyRegressor() if task == "regression" else DummyClassifier(strategy="prior")


OURS = "skdpsco defaults"
PEER = "diffprivlib"
REFERENCE = "non-private StandardScaler + LR"
TRIVIAL = "trivial"

ENTRIES = [
    Entry(OURS, True, _skdpsco_defaults),
    *([Entry(PEER, True, _diffprivlib)] if diffprivlib_models is not None else []),
    Entry(REFERENCE, False, lambda task, *_: make_pipeline(StandardScaler(), _nonprivate(task))),
    Entry("non-private LR (unscaled)", False, lambda task, *_: _nonprivate(task)),
    Entry(TRIVIAL, False, _trivial),
]
"""LR is ``LogisticRegression`` for classification, ``LinearRegression`` for regression."""

METRICS = {"binary": ("auc", "accuracy"), "multiclass": ("accuracy",), "regression": ("rmse",)}
"""Metrics per task; the first is the one the goal judges."""

GOAL = {1.0: (0.03, 1.3), 3.0: (0.01, 1.1)}
"""epsilon -> (largest gap in AUC / accuracy to the reference, largest RMSE ratio to it)."""

MODES = {"quick": dict(seeds=3, epsilons=(1.0, 3.0)), "full": dict(seeds=10, epsilons=(0.3, 1.0, 3.0, 10.0))}


def default_delta(n_train: int) -> float:
    """``min(1e-5, n ** -1.1)``: below ``1 / n`` by a margin, as in ``benchmarks/utility.py``."""
    return min(1e-5, float(n_train) ** -1.1)


def split(dataset: RealDataset, X, y, seed: int):
    """70/30 split, stratified for classification."""
    stratify = None if dataset.task == "regression" else y
    return train_test_split(X, y, test_size=0.3, random_state=seed, stratify=stratify)


def _positive_score(model, X):
    if hasattr(model, "decision_function"):
        return model.decision_function(X)
    return model.predict_proba(X)[:, 1]


def scores(model, X, y, task) -> dict:
    """The task's metrics of a fitted model on ``(X, y)``."""
    prediction = model.predict(X)
    if task == "regression":
        return {"rmse": float(np.sqrt(np.mean((prediction - y) ** 2)))}
    out = {"accuracy": float(np.mean(prediction == y))}
    if task == "binary":
        out["auc"] = float(roc_auc_score(y, _positive_score(model, X)))
    return out


def _fit_one(estimator, row_set, data, task):
    X_train, X_test, y_train, y_test = data
    model = make_pipeline(*(step() for step in ROW_SETS[row_set]), estimator)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and diffprivlib's notes; results speak
        try:
            model.fit(X_train, y_train)
        except ValueError as exc:  # infeasible: reported, not hidden
            return {"error": str(exc)[:120]}
        seconds = time.perf_counter() - start
        result = {**scores(model, X_test, y_test, task), "seconds": seconds}
    chosen = getattr(estimator, "algorithm_", None)
    return {**result, **({"algorithm": chosen} if chosen else {})}


def run(datasets_: list[RealDataset], epsilons, seeds: int, row_sets=tuple(ROW_SETS), entries=None, log=print):
    """One record per (dataset, row set, entry, epsilon, seed); epsilon is ``None`` for the
    non-private entries."""
    entries = ENTRIES if entries is None else entries
    records = []
    for dataset in datasets_:
        X, y = dataset.load()
        for seed in range(seeds):
            data = split(dataset, X, y, seed)
            delta = default_delta(len(data[2]))
            for row_set in row_sets:
                for entry in entries:
                    for epsilon in (epsilons if entry.private else (None,)):
                        estimator = entry.make(dataset.task, epsilon, delta, seed, dataset.classes)
                        records.append(dict(dataset=dataset.name, rows=row_set, model=entry.name, epsilon=epsilon,
                                            seed=seed, **_fit_one(estimator, row_set, data, dataset.task)))
            log(f"{dataset.name} seed {seed} done")
    return records


# -- summaries ---------------------------------------------------------------------------------------
def _select(records, **where):
    return [r for r in records if all(r.get(k) == v for k, v in where.items())]


def summary(records, metric, **where):
    """``(mean, std)`` of ``metric`` over the matching records (NaN when none has it)."""
    values = [r[metric] for r in _select(records, **where) if metric in r]
    return _stats(values) if values else (math.nan, math.nan)


def gap(task, ours: float, reference: float) -> float:
    """Shortfall of ``ours`` against the reference: metric difference (AUC / accuracy) or RMSE ratio."""
    return ours / reference if task == "regression" else reference - ours


def passes(task, epsilon, value) -> bool | None:
    """Whether a gap meets :data:`GOAL` at ``epsilon`` (``None``: no goal there, or no value)."""
    if epsilon not in GOAL or math.isnan(value):
        return None
    return value <= GOAL[epsilon][1 if task == "regression" else 0]


def beats(task, ours: float, peer: float) -> bool | None:
    if math.isnan(ours) or math.isnan(peer):
        return None
    return ours < peer if task == "regression" else ours > peer


def goal_rows(datasets_, records, epsilons) -> list[dict]:
    """One row per (dataset, row set): the reference, the defaults and the verdicts per epsilon."""
    rows = []
    for dataset in datasets_:
        metric = METRICS[dataset.task][0]
        reference = summary(records, metric, dataset=dataset.name, rows="raw", model=REFERENCE)[0]
        trivial = summary(records, metric, dataset=dataset.name, rows="raw", model=TRIVIAL)[0]
        for row_set in dict.fromkeys(r["rows"] for r in _select(records, dataset=dataset.name)):
            row = dict(dataset=dataset.name, rows=row_set, task=dataset.task, metric=metric, reference=reference,
                       trivial_gap=gap(dataset.task, trivial, reference), ours={}, gap={}, passes={}, peer={},
                       beats_peer={})
            for epsilon in epsilons:
                ours = summary(records, metric, dataset=dataset.name, rows=row_set, model=OURS, epsilon=epsilon)[0]
                peer = summary(records, metric, dataset=dataset.name, rows=row_set, model=PEER, epsilon=epsilon)[0]
                row["ours"][epsilon], row["peer"][epsilon] = ours, peer
                row["gap"][epsilon] = gap(dataset.task, ours, reference)
                row["passes"][epsilon] = passes(dataset.task, epsilon, row["gap"][epsilon])
                row["beats_peer"][epsilon] = beats(dataset.task, ours, peer)
            rows.append(row)
    return rows


def _verdict(value) -> str:
    return "—" if value is None else ("yes" if value else "**no**")


def _gap_text(task, value) -> str:
    if math.isnan(value):
        return "—"
    return f"{value:.2f}x" if task == "regression" else f"{value:+.3f}"


def goal_table(rows, epsilons) -> str:
    """Markdown: the goal's verdicts, one line per (dataset, row set)."""
    goal_eps = [e for e in GOAL if e in epsilons]
    header = ["dataset", "rows", "metric", "reference (raw)", "trivial's gap"]
    for epsilon in goal_eps:
        header += [f"defaults ε={epsilon:g}", f"gap ε={epsilon:g}", f"pass ε={epsilon:g}"]
    header += [f"beats diffprivlib ε={e:g}" for e in epsilons]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for row in rows:
        cells = [row["dataset"], row["rows"], row["metric"], f"{row['reference']:.3f}",
                 _gap_text(row["task"], row["trivial_gap"])]
        for epsilon in goal_eps:
            cells += [f"{row['ours'][epsilon]:.3f}", _gap_text(row["task"], row["gap"][epsilon]),
                      _verdict(row["passes"][epsilon])]
        cells += [_verdict(row["beats_peer"][e]) for e in epsilons]
        lines.append("| " + " | ".join(cells) + " |")
    verdicts = [v for row in rows for v in row["passes"].values() if v is not None]
    wins = [v for row in rows for v in row["beats_peer"].values() if v is not None]
    lines += ["", f"Goal cells met: {sum(verdicts)} of {len(verdicts)}. "
                  f"Cells where the defaults beat diffprivlib: "
                  + (f"{sum(wins)} of {len(wins)}." if wins else "not measured (diffprivlib absent).")]
    return "\n".join(lines)


def _cell(records, task, **where) -> str:
    metrics = METRICS[task]
    mean, std = summary(records, metrics[0], **where)
    if math.isnan(mean):
        errors = [r["error"] for r in _select(records, **where) if "error" in r]
        return f"infeasible: {errors[0][:40]}" if errors else "—"
    text = f"{mean:.3f} ± {std:.3f}"
    if len(metrics) > 1:
        text += f" (acc {summary(records, metrics[1], **where)[0]:.3f})"
    return text


def dataset_table(dataset: RealDataset, records, epsilons) -> str:
    """Markdown: one line per (row set, entry); a column per epsilon (private) or one (non-private)."""
    mine = _select(records, dataset=dataset.name)
    header = ["rows", "entry", "non-private"] + [f"ε={e:g}" for e in epsilons] + ["fit time (ms, median)", "auto ran"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for row_set in dict.fromkeys(r["rows"] for r in mine):
        for model in dict.fromkeys(r["model"] for r in mine):
            where = dict(rows=row_set, model=model)
            chosen = sorted({r["algorithm"] for r in _select(mine, **where) if "algorithm" in r})
            private = any(r["epsilon"] is not None for r in _select(mine, **where))
            cells = [row_set, model, "—" if private else _cell(mine, dataset.task, epsilon=None, **where)]
            cells += [_cell(mine, dataset.task, epsilon=e, **where) if private else "" for e in epsilons]
            seconds = [r["seconds"] for r in _select(mine, **where) if "seconds" in r]
            cells += [f"{1e3 * float(np.median(seconds)):.1f}" if seconds else "—", ", ".join(chosen) or ""]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(datasets_, records, epsilons, seeds) -> tuple[str, list[dict]]:
    """The whole markdown report (goal table, then one table per data set) and the goal rows."""
    rows = goal_rows(datasets_, records, epsilons)
    parts = [f"## Goal ({seeds} seeds; reference: {REFERENCE} on the raw rows)", "", goal_table(rows, epsilons)]
    if diffprivlib_models is None:
        parts += ["", "Note: diffprivlib is not importable here (it needs scikit-learn < 1.7): its columns are "
                      "skipped. Run in the peers environment (benchmarks/README.md)."]
    for dataset in datasets_:
        X, _ = dataset.load()
        metrics = " / ".join(METRICS[dataset.task])
        parts += ["", f"### {dataset.name} ({dataset.source}, {dataset.task}, n = {X.shape[0]}, d = {X.shape[1]}, "
                      f"target: {dataset.target}; {metrics})", "", dataset_table(dataset, records, epsilons)]
    return "\n".join(parts), rows


def _json_ready(value):
    """Goal rows with float keys turned into strings and NaN into None, for JSON."""
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write(stem: str, text: str, rows, records, meta: dict, directory: Path = RESULTS) -> None:
    """``<stem>.md`` (machine, run time, tables) and ``<stem>.json`` (meta, goal rows, records)."""
    directory.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    (directory / f"{stem}.md").write_text(
        f"# Real-data benchmark of the defaults ({stem})\n\nMachine: {json.dumps(info)}\n\n"
        f"Run: {json.dumps(meta)}\n\n{text}\n")
    (directory / f"{stem}.json").write_text(json.dumps(
        {"machine": info, "run": meta, "goal": _json_ready(rows), "records": _json_ready(records)}, indent=1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, epsilon in {1, 3} (else 10 seeds, 4 epsilons)")
    parser.add_argument("--validation", action="store_true", help="run the validation registry instead")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--epsilons", nargs="+", type=float, default=None)
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--rows", nargs="+", default=list(ROW_SETS), choices=list(ROW_SETS))
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    registry = VALIDATION if args.validation else DATASETS
    unknown = set(args.datasets or ()) - set(registry)
    if unknown:
        parser.error(f"unknown data sets {sorted(unknown)}; choose from {sorted(registry)}")
    chosen = [registry[name] for name in (args.datasets or registry)]
    epsilons = tuple(args.epsilons or MODES[mode]["epsilons"])
    seeds = args.seeds or MODES[mode]["seeds"]
    started = time.perf_counter()
    records = run(chosen, epsilons, seeds, tuple(args.rows))
    text, rows = report(chosen, records, epsilons, seeds)
    meta = dict(mode=mode, validation=args.validation, datasets=[d.name for d in chosen], epsilons=epsilons,
                seeds=seeds, rows=args.rows, minutes=round((time.perf_counter() - started) / 60, 2))
    write(f"real_{'validation_' if args.validation else ''}{mode}", text, rows, records, meta, args.out_dir)
    print(text)


if __name__ == "__main__":
    main()
