"""Differentially private linear models."""

from ._base import PrivacyWarning
from ._logistic import DPLogisticRegression
from ._glm import DPPoissonRegressor
from ._regression import DPLpRegression
from ._robust import DPHuberRegressor, DPQuantileRegressor
from ._svm import DPHingeSVM

__all__ = ["DPHingeSVM", "DPHuberRegressor", "DPLogisticRegression", "DPLpRegression", "DPPoissonRegressor", "DPQuantileRegressor", "PrivacyWarning"]
