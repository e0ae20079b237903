"""
==============================================
Privacy–utility curves on bundled datasets
==============================================

Test score against ε of the private estimators, next to the two references every private model
must be read against: the **trivial** model (the training majority class; the training median
for regression), which a private model must beat to have learned anything, and the non-private
scikit-learn counterpart trained on the same split, which shows what privacy costs.

* **breast_cancer** (binary, n = 569): :class:`~skdpsco.DPLogisticRegression` and
  :class:`~skdpsco.DPHingeSVM` in a fully private pipeline: features mapped onto [0, 1] by their
  public, documented ranges (a fixed per-row map), :class:`~skdpsco.DPStandardScaler` at a quarter
  of ε and δ, ``Normalizer``, and the model at the other three quarters. Next to them,
  ``DPLogisticRegression`` with its defaults on the raw features (it learns the features' scales
  privately inside ``fit``, no public ranges). The non-private models get the everyday
  ``StandardScaler``.
* **diabetes** (regression, n = 442): :class:`~skdpsco.DPLpRegression` with ``p=2`` (least
  squares) and ``p=1`` (median regression) with their defaults on the features as shipped, targets
  divided by 100 and a stated public target bound ``y_bound=4`` (400 on the original scale of the
  disease-progression score), against ``LinearRegression``. The score is the mean absolute error,
  so the trivial model is the training median (the best constant for it).

**Where they beat the trivial model.** Measured over 6 splits, with these settings: both pipeline
models beat the majority class at every split from ε = 1 on (smallest margin +0.19), and so do the
defaults on raw features (smallest margin +0.14: 398 training rows are too few to resolve 30
features' orders of magnitude at ε = 1, so ``fit`` releases one private row bound in their place;
at ε = 0.3 they predict the majority class on most splits); median regression beats the training
median at every split from ε = 3 on (at ε = 1 by 0.06 on average, at one split by 0.01); least
squares, whose noise grows with the square of the target bound, only at ε = 10. At ε = 0.3 none
is reliably better than the trivial model: the curves go down to it. The lines
``private ... vs ...: margin`` below report these claims on this page's 3 splits, with the
smallest margin over the splits.

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


def raw_defaults(epsilon, seed, ledger):
    """DPLogisticRegression with its defaults on the raw features (private feature scaling)."""
    return DPLogisticRegression(epsilon=epsilon, delta=DELTA, classes=[0, 1], random_state=seed, accountant=ledger)


private_models = {
    "DPLogisticRegression pipeline": lambda eps, seed, ledger: private_pipeline(
        DPLogisticRegression(data_norm=1.0, classes=[0, 1]), eps, seed, ledger),
    "DPHingeSVM pipeline": lambda eps, seed, ledger: private_pipeline(
        DPHingeSVM(data_norm=1.0, classes=[0, 1]), eps, seed, ledger),
    "DPLogisticRegression defaults, raw features": raw_defaults,
}
reference_models = {
    "LogisticRegression": lambda: make_pipeline(StandardScaler(), LogisticRegression()),
    "LinearSVC": lambda: make_pipeline(StandardScaler(), LinearSVC()),
}
scores = {name: np.zeros((len(EPSILONS), SPLITS)) for name in private_models}
spent = {name: np.zeros(len(EPSILONS)) for name in private_models}
references = {name: [] for name in reference_models}
majority = np.zeros(SPLITS)
for split in range(SPLITS):
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=split)
    majority[split] = np.mean(y_test == np.bincount(y_train).argmax())
    for name, make in reference_models.items():
        references[name].append(make().fit(X_train, y_train).score(X_test, y_test))
    for i, epsilon in enumerate(EPSILONS):
        for name, make in private_models.items():
            ledger = PrivacyAccountant()
            model = make(epsilon, split, ledger).fit(X_train, y_train)
            scores[name][i, split] = model.score(X_test, y_test)
            spent[name][i] = ledger.spent()[0]  # the same at every split: it depends on the parameters only

print("pipeline epsilon spent (scaler and model composed):",
      np.round(spent["DPLogisticRegression pipeline"], 3), "for targets", EPSILONS)

# %%
# Regression: diabetes
# --------------------
# scikit-learn ships diabetes with features already centred and scaled (by its publisher, with
# statistics of all 442 rows); the private models still learn their own scaling privately, as
# they would on any table. Scores are the mean absolute error of the target divided by 100
# (lower is better).

Xr, yr = load_diabetes(return_X_y=True)
yr = yr / 100.0
regressors = {
    "DPLpRegression(p=2)": lambda eps, seed: DPLpRegression(p=2.0, epsilon=eps, delta=DELTA, y_bound=4.0,
                                                             random_state=seed, accountant=PrivacyAccountant()),
    "DPLpRegression(p=1)": lambda eps, seed: DPLpRegression(p=1.0, epsilon=eps, delta=DELTA, y_bound=4.0,
                                                             random_state=seed, accountant=PrivacyAccountant()),
}
errors = {name: np.zeros((len(EPSILONS), SPLITS)) for name in regressors}
spent.update({name: np.zeros(len(EPSILONS)) for name in regressors})
reference_errors, trivial_errors = [], np.zeros(SPLITS)
for split in range(SPLITS):
    X_train, X_test, y_train, y_test = train_test_split(Xr, yr, test_size=0.3, random_state=split)
    baseline = LinearRegression().fit(X_train, y_train)
    reference_errors.append(mean_absolute_error(y_test, baseline.predict(X_test)))
    trivial_errors[split] = mean_absolute_error(y_test, np.full_like(y_test, np.median(y_train)))  # non-private
    for i, epsilon in enumerate(EPSILONS):
        for name, make in regressors.items():
            model = make(epsilon, split).fit(X_train, y_train)
            errors[name][i, split] = mean_absolute_error(y_test, model.predict(X_test))
            spent[name][i] = model.epsilon_

# %%
# The curves
# ----------
# Mean over the splits, with the range of the splits as a band; dashed lines are the non-private
# references, the grey line the trivial model.

fig, (ax_c, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2))
for name, values in scores.items():
    mean = values.mean(axis=1)
    ax_c.plot(EPSILONS, mean, marker="o", label=name)
    ax_c.fill_between(EPSILONS, values.min(axis=1), values.max(axis=1), alpha=0.2)
for (name, values), style in zip(references.items(), ("--", ":")):
    ax_c.axhline(np.mean(values), color="k", linestyle=style, label=f"{name} (non-private)")
ax_c.axhline(majority.mean(), color="grey", linewidth=0.8, label="majority class (trivial)")
ax_c.set(xscale="log", xlabel="target ε (of the whole pipeline)", ylabel="test accuracy", title="breast_cancer")
ax_c.legend(loc="lower right", fontsize=8)

for name, values in errors.items():
    ax_r.plot(EPSILONS, values.mean(axis=1), marker="o", label=name)
    ax_r.fill_between(EPSILONS, values.min(axis=1), values.max(axis=1), alpha=0.2)
ax_r.axhline(np.mean(reference_errors), color="k", linestyle="--", label="LinearRegression (non-private)")
ax_r.axhline(trivial_errors.mean(), color="grey", linewidth=0.8, label="training median (trivial)")
ax_r.set(xscale="log", yscale="log", xlabel="ε", ylabel="test MAE (target / 100)", title="diabetes")
ax_r.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# The same numbers as a table: every score with its margin over the trivial model (mean over the
# splits; negative where the private model is worse than it).

for name, values in scores.items():
    print(name, " ".join(f"ε={e:g}: {m:.3f} ({m - majority.mean():+.3f})" for e, m in zip(EPSILONS, values.mean(axis=1))))
for name, values in references.items():
    print(name, f"{np.mean(values):.3f}")
print("majority class", f"{majority.mean():.3f}")
for name, values in errors.items():
    print(name, " ".join(f"ε={e:g}: {m:.3f} ({trivial_errors.mean() - m:+.3f})"
                         for e, m in zip(EPSILONS, values.mean(axis=1))))
print("LinearRegression", f"{np.mean(reference_errors):.3f}")
print("training median", f"{trivial_errors.mean():.3f}")

# %%
# The claims of the introduction, on this page's splits: the private score against the trivial
# model at the smallest ε from which the text says it beats it, the smallest margin over the
# splits, what privacy gives up against the non-private model, and what the fit spent.

CLAIMED_EPSILON = {"DPLogisticRegression pipeline": 1.0, "DPHingeSVM pipeline": 1.0,
                   "DPLogisticRegression defaults, raw features": 1.0,
                   "DPLpRegression(p=1)": 3.0, "DPLpRegression(p=2)": 10.0}
for (name, values), reference in zip(scores.items(), ("LogisticRegression", "LinearSVC", "LogisticRegression")):
    i = EPSILONS.index(CLAIMED_EPSILON[name])
    private, trivial, nonprivate = values[i].mean(), majority.mean(), np.mean(references[reference])
    print(f"{name} at ε={EPSILONS[i]:g}: private {private:.3f} vs majority class {trivial:.3f}: "
          f"margin {private - trivial:+.3f} (smallest over the {SPLITS} splits {np.min(values[i] - majority):+.3f}); "
          f"non-private {reference} {nonprivate:.3f} (privacy gives up {nonprivate - private:.3f}); "
          f"spent ε={spent[name][i]:.3f}, δ={DELTA:g}")
for name, values in errors.items():
    i = EPSILONS.index(CLAIMED_EPSILON[name])
    private, trivial, nonprivate = values[i].mean(), trivial_errors.mean(), np.mean(reference_errors)
    print(f"{name} at ε={EPSILONS[i]:g}: private MAE {private:.3f} vs training median {trivial:.3f}: "
          f"margin {trivial - private:+.3f} (lower is better; smallest over the {SPLITS} splits "
          f"{np.min(trivial_errors - values[i]):+.3f}); non-private LinearRegression {nonprivate:.3f} "
          f"(privacy gives up {private - nonprivate:.3f}); spent ε={spent[name][i]:.3f}, δ={DELTA:g}")
