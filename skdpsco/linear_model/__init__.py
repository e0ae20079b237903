"""Differentially private linear models."""

from ._base import PrivacyWarning
from ._logistic import DPLogisticRegression

__all__ = ["DPLogisticRegression", "PrivacyWarning"]
