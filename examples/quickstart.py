"""
===========
Quick start
===========

Train a differentially private logistic regression on raw features and compare it with the
non-private ``StandardScaler`` + ``LogisticRegression`` pipeline.

The private model learns the features' scales itself, privately (``feature_scaling``, on by
default: part of the fit's one guarantee), so it needs no public bound on the rows. A
``PrivacyAccountant`` with a budget records the fit and would refuse one that exceeded it.
"""

from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdpsco import DPLogisticRegression, PrivacyAccountant

X, y = load_breast_cancer(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)

with PrivacyAccountant(epsilon=5.0, delta=1e-5) as ledger:
    model = DPLogisticRegression(epsilon=5.0, delta=1e-5, classes=[0, 1]).fit(X_train, y_train)

baseline = make_pipeline(StandardScaler(), LogisticRegression()).fit(X_train, y_train)
private = model
print(f"private model ({model.algorithm_}): test accuracy {private.score(X_test, y_test):.3f}")
print(f"non-private StandardScaler + LogisticRegression: test accuracy {baseline.score(X_test, y_test):.3f}")
print(f"privacy spent by the fit: epsilon={model.epsilon_:.3f}, delta={model.delta_:g}")
spent_eps, spent_delta = ledger.spent()
print(f"ledger: {len(ledger.history)} fit(s), epsilon={spent_eps:.3f} of the budget 5.0 at delta={spent_delta:g}")
