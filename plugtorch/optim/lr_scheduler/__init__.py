"""Learning-rate schedules, as ``torch.optim.lr_scheduler``: each rewrites ``group["lr"]`` of
its optimizer on every ``step()``, lists the rates in ``get_last_lr()``, and resumes exactly
from ``state_dict()`` / ``load_state_dict()``."""
from .base import EPOCH_DEPRECATION_WARNING, LRScheduler, _LRScheduler
from .composite import ChainedScheduler, SequentialLR
from .cyclic import CosineAnnealingLR, CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from .multiplicative import (
    ConstantLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
    StepLR,
)
from .plateau import ReduceLROnPlateau

__all__ = ["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler",
           "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR",
           "PolynomialLR", "LRScheduler", "EPOCH_DEPRECATION_WARNING", "_LRScheduler"]
