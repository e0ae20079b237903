"""Compare private models with their non-private scikit-learn counterparts.

Used by ``python -m skdpsco compare``. Every model sees the same train/test split and the raw
features: the private models run with their defaults, which learn the features' scales privately
inside ``fit`` (``feature_scaling``), so no public bound or range is needed. The everyday
baseline (``StandardScaler`` + ``LogisticRegression``) is the reference: its scaler reads the
data's means and variances without privacy; ``LogisticRegression`` on the same raw features
shows what scaling is worth.

Classification compares ``DPLogisticRegression`` with ``LogisticRegression`` (test accuracy,
stratified splits); regression ``DPLpRegression`` with ``LinearRegression`` (test RMSE and R²,
plain random splits). The rows of a CSV file are read by :mod:`skdpsco._table`: its declared
categorical columns are one-hot encoded by a public encoder in front of every model.

The fully private pipeline
--------------------------
When the features have public bounds (:func:`public_feature_bounds`; ``--feature-bounds`` for a
CSV file) the table also has, for every epsilon, the pipeline :func:`make_private_pipeline`:

1. a fixed affine map of every feature onto ``[0, 1]`` by its public bounds (per row, no cost);
2. :class:`~skdpsco.preprocessing.DPStandardScaler` with ``feature_bounds=(0, 1)``, at a
   :data:`SCALER_SHARE` = 1/4 share of the target (epsilon, delta);
3. ``Normalizer`` (per row, no cost) and :class:`~skdpsco.linear_model.DPLogisticRegression`
   (``data_norm=1``, the same model as the Normalizer rows), at the remaining 3/4.

By basic composition the pipeline is (epsilon, delta)-DP; its "ε spent per fit" is what the
accountant's (tighter) composition of the two recorded events gives at that delta, and is
smaller. Step 1 makes the scaler's isotropic Gaussian noise proportional to each feature's
public range: without it, the noise on every feature is set by the widest one (in
``breast_cancer``, the areas, which span thousands, next to features that span 0.1).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from functools import partial

import numpy as np
from sklearn import datasets
from sklearn.base import clone
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, StandardScaler

from ._table import Table, load_table
from .accounting import PrivacyAccountant
from .linear_model import DPLogisticRegression, DPLpRegression
from .preprocessing import DPStandardScaler

BUNDLED_DATASETS = {
    "breast_cancer": datasets.load_breast_cancer,
    "digits": datasets.load_digits,
    "iris": datasets.load_iris,
    "wine": datasets.load_wine,
}


# Public feature bounds of the bundled datasets, copied from their documentation (never computed from
# the rows): for breast_cancer, wine and iris the Min and Max columns of the "Summary Statistics"
# table of ``load_<name>().DESCR`` (the UCI descriptions of the datasets, published with them);
# for digits the documented pixel range ("integer pixels in the range 0..16").
# Caveat: the published Min/Max are rounded extremes of the published rows themselves, so treating
# them as public is an assumption about this demonstration data (a few rows lie slightly outside
# them and are clipped). For your own data take bounds from the measurement's valid range, fixed
# before the data is seen. ``tests/test_cli.py`` checks these arrays against the DESCR tables.
_DOCUMENTED_RANGES = {
    "breast_cancer": (
        [6.981, 9.71, 43.79, 143.5, 0.053, 0.019, 0.0, 0.0, 0.106, 0.05,
         0.112, 0.36, 0.757, 6.802, 0.002, 0.002, 0.0, 0.0, 0.008, 0.001,
         7.93, 12.02, 50.41, 185.2, 0.071, 0.027, 0.0, 0.0, 0.156, 0.055],
        [28.11, 39.28, 188.5, 2501.0, 0.163, 0.345, 0.427, 0.201, 0.304, 0.097,
         2.873, 4.885, 21.98, 542.2, 0.031, 0.135, 0.396, 0.053, 0.079, 0.03,
         36.04, 49.54, 251.2, 4254.0, 0.223, 1.058, 1.252, 0.291, 0.664, 0.208],
    ),
    "wine": (
        [11.0, 0.74, 1.36, 10.6, 70.0, 0.98, 0.34, 0.13, 0.41, 1.3, 0.48, 1.27, 278.0],
        [14.8, 5.80, 3.23, 30.0, 162.0, 3.88, 5.08, 0.66, 3.58, 13.0, 1.71, 4.00, 1680.0],
    ),
    "iris": ([4.3, 2.0, 1.0, 0.1], [7.9, 4.4, 6.9, 2.5]),
    "digits": ([0.0] * 64, [16.0] * 64),
}

SCALER_SHARE = 0.25
"""Share of the private pipeline's target (epsilon, delta) given to ``DPStandardScaler``; the
model gets the rest. A fixed, public rule. Measured on breast_cancer (10 splits, auto algorithm),
shares of 1/4 and 1/2 give the same accuracy within the spread (0.815 / 0.922 / 0.950 against
0.815 / 0.917 / 0.946 at epsilon = 1 / 2 / 5); the model's noise is the larger cost, so it gets
the larger share."""


def public_feature_bounds(dataset: str | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Documented public ``(lower, upper)`` bounds of a bundled dataset's features, or ``None``.

    From the dataset's documentation, not from its rows (see ``_DOCUMENTED_RANGES`` for the
    sources and the caveat).
    """
    if dataset not in _DOCUMENTED_RANGES:
        return None
    lower, upper = _DOCUMENTED_RANGES[dataset]
    return np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)


def _to_unit_range(X, lower, upper):
    """The fixed affine map of every feature onto [0, 1] by its public bounds (per row)."""
    return (np.asarray(X, dtype=float) - lower) / (upper - lower)


def make_private_pipeline(
    feature_bounds, *, epsilon, delta, algorithm="auto", radius=None, random_state=None,
    accountant=None, classes=None, scaler_share=SCALER_SHARE,
):
    """Public range map -> ``DPStandardScaler`` -> ``Normalizer`` -> ``DPLogisticRegression``.

    The scaler gets ``scaler_share`` of ``(epsilon, delta)``, the model the rest (its own feature
    scaling of the normalised rows included: without it the pipeline's accuracy on breast_cancer
    at epsilon 1 drops from 0.92 to 0.84), so by basic composition the pipeline is
    (epsilon, delta)-DP; both fits are charged to ``accountant``.
    ``feature_bounds`` must be public: ``(lower, upper)``, scalars or arrays of shape
    ``(n_features,)``.
    """
    if not 0.0 < scaler_share < 1.0:
        raise ValueError(f"scaler_share must be in (0, 1); got {scaler_share!r}.")
    lower, upper = (np.asarray(b, dtype=float) for b in feature_bounds)
    if not np.all(lower < upper):
        raise ValueError("feature bounds need lower < upper for every feature.")
    return make_pipeline(
        FunctionTransformer(_to_unit_range, kw_args={"lower": lower, "upper": upper}),
        DPStandardScaler(
            epsilon=scaler_share * epsilon,
            delta=scaler_share * delta,
            feature_bounds=(0.0, 1.0),
            random_state=random_state,
            accountant=accountant,
        ),
        Normalizer(),
        DPLogisticRegression(
            epsilon=(1.0 - scaler_share) * epsilon,
            delta=(1.0 - scaler_share) * delta,
            data_norm=1.0,  # the Normalizer's rows; the model re-standardises them privately (its default)
            radius=radius,
            algorithm=algorithm,
            random_state=random_state,
            accountant=accountant,
            classes=classes,
        ),
    )


def load_data(
    dataset: str | None, csv_path: str | None, target: str | None, task: str | None = None,
    categories: dict | None = None,
) -> tuple[Table, str]:
    """``(table, name)`` of a bundled dataset (classification) or of a CSV file (:func:`load_table`)."""
    if csv_path is not None:
        if target is None:
            raise ValueError("--csv needs --target COLUMN naming the target column.")
        return load_table(csv_path, target, task, categories), csv_path
    if dataset not in BUNDLED_DATASETS:
        raise ValueError(f"--dataset must be one of {sorted(BUNDLED_DATASETS)}; got {dataset!r}.")
    X, y = BUNDLED_DATASETS[dataset](return_X_y=True)
    return Table(X, y, "classification", list(range(X.shape[1])), {}), dataset


@dataclass
class Row:
    """One model's line of the table: its scores (``{metric: [one per split]}``), privacy spent
    and fit times."""

    model: str
    epsilon: float | None
    scores: dict
    epsilons_spent: list
    delta_spent: float | None
    fit_seconds: list


def _rmse(model, X, y):
    return float(np.sqrt(mean_squared_error(y, model.predict(X))))


METRICS = {
    "classification": {"accuracy": lambda model, X, y: model.score(X, y)},
    "regression": {"rmse": _rmse, "r2": lambda model, X, y: model.score(X, y)},
}
"""The test scores of each task, by name."""

TRIVIAL = "(trivial)"
"""Ends the name of the model that ignores the features, the floor of the table."""


def _fit_and_record(row: Row, model, metrics: dict, split) -> None:
    """Fit ``model`` on the training part of ``split``; add its test scores and fit time to ``row``."""
    X_train, X_test, y_train, y_test = split
    start = time.perf_counter()
    model.fit(X_train, y_train)
    row.fit_seconds.append(time.perf_counter() - start)
    for name, score in metrics.items():
        row.scores.setdefault(name, []).append(score(model, X_test, y_test))


def _encoded(encoder, model):
    """``model`` behind a fresh copy of the public feature ``encoder`` (none: the model)."""
    return model if encoder is None else make_pipeline(clone(encoder), model)


_NON_PRIVATE = {
    "classification": (
        f"majority class {TRIVIAL}", partial(DummyClassifier, strategy="most_frequent"),
        "LogisticRegression", partial(LogisticRegression, max_iter=5000),
    ),
    "regression": (f"mean of the training targets {TRIVIAL}", DummyRegressor, "LinearRegression", LinearRegression),
}


def _baselines(task, encoder):
    """The non-private models of ``task``, by row name: factories of unfitted models."""
    trivial, dummy, name, model = _NON_PRIVATE[task]
    return {
        trivial: dummy,
        f"{name}, raw features (same input, non-private)": lambda: _encoded(encoder, model()),
        f"{name}, StandardScaler (everyday, non-private)": lambda: _encoded(
            encoder, make_pipeline(StandardScaler(), model())
        ),
    }


def _private_model(make, encoder, epsilon, seed, ledger):
    """The unfitted private model ``make`` builds at ``epsilon``, seeded, charging ``ledger``."""
    return _encoded(encoder, make(epsilon=epsilon, random_state=seed, accountant=ledger))


def _private_models(task, encoder, *, epsilons, delta, algorithm, radius, feature_bounds, classes):
    """The private models of ``task``: ``{row key: (row name, epsilon, factory(seed, ledger))}``."""
    common = {"delta": delta, "algorithm": algorithm, "radius": radius}
    if task == "regression":
        kinds = {"model": (f"DPLpRegression ({algorithm})", partial(DPLpRegression, **common))}
    else:
        model = partial(DPLogisticRegression, classes=classes, **common)
        kinds = {"model": (f"DPLogisticRegression ({algorithm})", model)}
        if feature_bounds is not None:
            kinds["pipeline"] = (
                f"DPStandardScaler → DPLogisticRegression ({algorithm}), ε split 1:3",
                partial(make_private_pipeline, feature_bounds, classes=classes, **common),
            )
    return {
        (kind, eps): (name, eps, partial(_private_model, make, encoder, eps))
        for kind, (name, make) in kinds.items()
        for eps in epsilons
    }


def run_comparison(
    X, y, *, epsilons, delta, repeats, test_size=0.3, algorithm="auto", radius=None, seed=0,
    feature_bounds=None, task="classification", encoder=None,
) -> tuple[list[Row], PrivacyAccountant]:
    """Fit every model of ``task`` on ``repeats`` splits; return the table rows and the ledger.

    Parameters
    ----------
    X, y : array-like
        The rows (features as in the file) and the target.
    epsilons, delta, algorithm, radius
        Of the private models.
    repeats, test_size, seed
        ``repeats`` train/test splits (stratified for classification), seeded ``seed``,
        ``seed + 1``, ...; each private fit is seeded as its split.
    feature_bounds : (lower, upper) or None, default=None
        Public bounds of the encoded features (never computed from ``X``): classification then
        has the fully private pipeline of :func:`make_private_pipeline` at every epsilon.
    task : {'classification', 'regression'}, default='classification'
        Classification compares ``DPLogisticRegression`` (label set ``np.unique(y)``, taken as
        public) with ``LogisticRegression``; regression ``DPLpRegression`` (its defaults) with
        ``LinearRegression``.
    encoder : transformer or None, default=None
        A public map from the rows to the features (the one-hot encoding of declared
        categories), put in front of every model but the trivial one; ``None``: the rows are
        the features.

    Returns
    -------
    rows : list of Row
        Each private model's "ε spent per fit" is what its own ledger spent (for the pipeline,
        the composition of its two fits).
    ledger : PrivacyAccountant
        Every private fit: since the repeats reuse the same rows, its total is the price of the
        whole experiment, not of one model.
    """
    ledger = PrivacyAccountant()
    baselines = _baselines(task, encoder)
    private = _private_models(
        task, encoder, epsilons=epsilons, delta=delta, algorithm=algorithm, radius=radius,
        feature_bounds=feature_bounds, classes=np.unique(y),
    )
    rows = {name: Row(name, None, {}, [], None, []) for name in baselines}
    rows.update({key: Row(name, eps, {}, [], delta, []) for key, (name, eps, _) in private.items()})
    metrics = METRICS[task]
    for repeat in range(repeats):
        split_seed = seed + repeat
        split = train_test_split(
            X, y, test_size=test_size, stratify=y if task == "classification" else None, random_state=split_seed
        )
        for name, make in baselines.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # lbfgs on unscaled features
                _fit_and_record(rows[name], make(), metrics, split)
        for key, (_, _, make) in private.items():
            fit_ledger = PrivacyAccountant()
            _fit_and_record(rows[key], make(split_seed, fit_ledger), metrics, split)
            rows[key].epsilons_spent.append(fit_ledger.spent()[0])  # at delta: the sum of the fits' deltas
            for record in fit_ledger.history:
                ledger.charge(
                    record.event, estimator=record.estimator, params=record.params,
                    epsilon=record.epsilon, delta=record.delta,
                )
    return list(rows.values()), ledger


def _mean_std(values, spec: str = ".3f") -> str:
    values = np.asarray(values)
    return f"{values.mean():{spec}} ± {values.std():{spec}}"


def _line(row: Row, score_cells: list[str]) -> str:
    """A table line: name, target ε, ``score_cells``, ε spent per fit, δ, median fit time."""
    target = "—" if row.epsilon is None else f"{row.epsilon:g}"
    spent = "non-private" if row.epsilon is None else f"{max(row.epsilons_spent):.4f}"
    delta = "—" if row.delta_spent is None else f"{row.delta_spent:g}"
    if row.model.endswith(TRIVIAL):
        spent = "—"
    cells = [row.model, target, *score_cells, spent, delta, f"{1e3 * np.median(row.fit_seconds):.1f}"]
    return "| " + " | ".join(cells) + " |"


def format_table(rows: list[Row]) -> str:
    """A markdown table: accuracy mean ± std over the repeats, its margin over the majority class
    (mean, and the smallest over the splits: a private model is worth showing only above the
    trivial one), privacy spent per fit, fit time."""
    lines = [
        "| model | target ε | test accuracy (mean ± std) | vs majority class (mean / worst split) "
        "| ε spent per fit | δ | fit time (ms, median) |",
        "|---|---|---|---|---|---|---|",
    ]
    majority = next(np.asarray(row.scores["accuracy"]) for row in rows if row.model.endswith(TRIVIAL))
    for row in rows:
        margin = np.asarray(row.scores["accuracy"]) - majority
        versus = "—" if row.model.endswith(TRIVIAL) else f"{margin.mean():+.3f} / {margin.min():+.3f}"
        lines.append(_line(row, [_mean_std(row.scores["accuracy"]), versus]))
    return "\n".join(lines)


def format_regression_table(rows: list[Row]) -> str:
    """A markdown table: test RMSE and R² mean ± std over the repeats, privacy spent per fit, fit
    time."""
    lines = [
        "| model | target ε | test RMSE (mean ± std) | test R² (mean ± std) | ε spent per fit | δ "
        "| fit time (ms, median) |",
        "|---|---|---|---|---|---|---|",
    ]
    lines.extend(_line(row, [_mean_std(row.scores["rmse"], "#.4g"), _mean_std(row.scores["r2"])]) for row in rows)
    return "\n".join(lines)


TABLES = {"classification": format_table, "regression": format_regression_table}
"""The table of each task's rows."""
