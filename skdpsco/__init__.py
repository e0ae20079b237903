"""skdpsco: differentially private linear models for scikit-learn.

Models trained by the algorithms of private stochastic convex optimization, each (epsilon,
delta)-differentially private under replace-one neighbouring datasets, with one shared
accountant built on ``dp-accounting``.
"""

from ._config import config_context, get_config, set_config
from ._delta import default_delta
from .accounting import (
    BudgetExceededError,
    LedgerProcessError,
    PrivacyAccountant,
    get_accountant,
    set_accountant,
)
from .linear_model import DPHingeSVM, DPHuberRegressor, DPLogisticRegression, DPLpRegression, DPPoissonRegressor, DPQuantileRegressor, PrivacyWarning
from .decomposition import DPPCA
from .location import inverse_sensitivity_location
from .model_selection import DPSearchCV
from .preprocessing import DPStandardScaler

__version__ = "0.1.0.dev0"

__all__ = [
    "BudgetExceededError",
    "DPHingeSVM",
    "DPHuberRegressor",
    "DPLogisticRegression",
    "DPLpRegression",
    "DPPCA",
    "DPPoissonRegressor",
    "DPQuantileRegressor",
    "DPSearchCV",
    "DPStandardScaler",
    "LedgerProcessError",
    "PrivacyAccountant",
    "PrivacyWarning",
    "config_context",
    "default_delta",
    "get_accountant",
    "get_config",
    "inverse_sensitivity_location",
    "set_accountant",
    "set_config",
]
