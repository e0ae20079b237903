"""
==============================================
Privacy–utility curves on bundled datasets
==============================================

Test score against ε of the private estimators, next to their non-private scikit-learn
counterparts trained on the same splits:

* **breast_cancer** (binary, n = 569): :class:`~skdpsco.DPLogisticRegression` and
  :class:`~skdpsco.DPHingeSVM` against ``LogisticRegression`` and ``LinearSVC``. The private
  models see a fully private pipeline: features mapped onto [0, 1] by their public, documented
  ranges (a fixed per-row map), :class:`~skdpsco.DPStandardScaler` at a quarter of ε and δ,
  ``Normalizer``, and the model at the other three quarters. The non-private models get the
  everyday ``StandardScaler``.
* **diabetes** (regression, n = 442): :class:`~skdpsco.DPLpRegression` with ``p=2`` (least
  squares) and ``p=1`` (median regression) against ``LinearRegression``, with ``Normalizer``
  rows, targets divided by 100 and a stated public target bound ``y_bound=4`` (400 on the
  original scale of the disease-progression score).

To keep the documentation build short this runs **3 splits** per ε on the small bundled sets
(the benchmark tables of ``benchmarks/results/`` use 10 seeds): the bands are wide, and the
numbers are an illustration, not a measurement.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, StandardScaler
from sklearn.svm import LinearSVC

from skdpsco import DPHingeSVM, DPLogisticRegression, DPLpRegression, DPStandardScaler, PrivacyAccountant
from skdpsco.compare import public_feature_bounds

EPSILONS = [0.3, 1.0, 3.0, 10.0]
SPLITS = 3
DELTA = 1e-5

# %%
# Classification: breast_cancer
# -----------------------------
# The feature bounds are the Min and Max columns of the dataset's documented "Summary
# Statistics" (``load_breast_cancer().DESCR``), copied into :mod:`skdpsco.compare`; they are
# never computed from the rows.

X, y = load_breast_cancer(return_X_y=True)
lower, upper = public_feature_bounds("breast_cancer")


def private_pipeline(model, epsilon, seed, ledger, share=0.25):
    """Public range map -> DPStandardScaler (share of the budget) -> Normalizer -> model."""
    model.set_params(epsilon=(1 - share) * epsilon, delta=(1 - share) * DELTA, random_state=seed, accountant=ledger)
    return make_pipeline(
        FunctionTransformer(lambda X: (X - lower) / (upper - lower)),
        DPStandardScaler(
            epsilon=share * epsilon, delta=share * DELTA, feature_bounds=(0.0, 1.0), random_state=seed, accountant=ledger
        ),
        Normalizer(),
        model,
    )


private_models = {
    "DPLogisticRegression": lambda: DPLogisticRegression(data_norm=1.0, classes=[0, 1]),
    "DPHingeSVM": lambda: DPHingeSVM(data_norm=1.0, classes=[0, 1]),
}
reference_models = {
    "LogisticRegression": lambda: make_pipeline(StandardScaler(), LogisticRegression()),
    "LinearSVC": lambda: make_pipeline(StandardScaler(), LinearSVC()),
}
scores = {name: np.zeros((len(EPSILONS), SPLITS)) for name in private_models}
references = {name: [] for name in reference_models}
spent = np.zeros((len(EPSILONS), SPLITS))
for split in range(SPLITS):
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=split)
    for name, make in reference_models.items():
        references[name].append(make().fit(X_train, y_train).score(X_test, y_test))
    for i, epsilon in enumerate(EPSILONS):
        for name, make in private_models.items():
            ledger = PrivacyAccountant()
            model = private_pipeline(make(), epsilon, split, ledger).fit(X_train, y_train)
            scores[name][i, split] = model.score(X_test, y_test)
            spent[i, split] = ledger.spent()[0]

print("pipeline epsilon spent (scaler and model composed):", np.round(spent.max(axis=1), 3), "for targets", EPSILONS)

# %%
# Regression: diabetes
# --------------------
# scikit-learn ships diabetes with features already centred and scaled (by its publisher, with
# statistics of all 442 rows), so only the per-row ``Normalizer`` is added here. Scores are the
# mean absolute error of the target divided by 100 (lower is better).

Xr, yr = load_diabetes(return_X_y=True)
yr = yr / 100.0
regressors = {
    "DPLpRegression(p=2)": lambda eps, seed: DPLpRegression(p=2.0, epsilon=eps, delta=DELTA, y_bound=4.0, radius=8.0,
                                                             random_state=seed, accountant=PrivacyAccountant()),
    "DPLpRegression(p=1)": lambda eps, seed: DPLpRegression(p=1.0, epsilon=eps, delta=DELTA, y_bound=4.0, radius=8.0,
                                                             random_state=seed, accountant=PrivacyAccountant()),
}
errors = {name: np.zeros((len(EPSILONS), SPLITS)) for name in regressors}
reference_errors, trivial_errors = [], []
for split in range(SPLITS):
    X_train, X_test, y_train, y_test = train_test_split(Xr, yr, test_size=0.3, random_state=split)
    baseline = make_pipeline(Normalizer(), LinearRegression()).fit(X_train, y_train)
    reference_errors.append(mean_absolute_error(y_test, baseline.predict(X_test)))
    trivial_errors.append(mean_absolute_error(y_test, np.full_like(y_test, np.median(y_train))))  # non-private
    for i, epsilon in enumerate(EPSILONS):
        for name, make in regressors.items():
            model = make_pipeline(Normalizer(), make(epsilon, split)).fit(X_train, y_train)
            errors[name][i, split] = mean_absolute_error(y_test, model.predict(X_test))

# %%
# The curves
# ----------
# Mean over the splits, with the range of the splits as a band; dashed lines are the non-private
# references.

fig, (ax_c, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2))
for name, values in scores.items():
    mean = values.mean(axis=1)
    ax_c.plot(EPSILONS, mean, marker="o", label=name)
    ax_c.fill_between(EPSILONS, values.min(axis=1), values.max(axis=1), alpha=0.2)
for (name, values), style in zip(references.items(), ("--", ":")):
    ax_c.axhline(np.mean(values), color="k", linestyle=style, label=f"{name} (non-private)")
ax_c.axhline(np.mean(y == 1), color="grey", linewidth=0.8, label="majority class")
ax_c.set(xscale="log", xlabel="ε (whole pipeline)", ylabel="test accuracy", title="breast_cancer")
ax_c.legend(fontsize=8)

for name, values in errors.items():
    ax_r.plot(EPSILONS, values.mean(axis=1), marker="o", label=name)
    ax_r.fill_between(EPSILONS, values.min(axis=1), values.max(axis=1), alpha=0.2)
ax_r.axhline(np.mean(reference_errors), color="k", linestyle="--", label="LinearRegression (non-private)")
ax_r.axhline(np.mean(trivial_errors), color="grey", linewidth=0.8, label="training median (non-private)")
ax_r.set(xscale="log", yscale="log", xlabel="ε", ylabel="test MAE (target / 100)", title="diabetes")
ax_r.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# The same numbers as a table.

for name, values in scores.items():
    print(name, " ".join(f"ε={e:g}: {m:.3f}" for e, m in zip(EPSILONS, values.mean(axis=1))))
for name, values in references.items():
    print(name, f"{np.mean(values):.3f}")
for name, values in errors.items():
    print(name, " ".join(f"ε={e:g}: {m:.3f}" for e, m in zip(EPSILONS, values.mean(axis=1))))
print("LinearRegression", f"{np.mean(reference_errors):.3f}")
