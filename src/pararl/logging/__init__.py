"""Run telemetry: metric writers (CSV, TensorBoard), console progress, meters."""

from pararl.logging.console import Console
from pararl.logging.meters import RateMeter
from pararl.logging.writers import (
    MetricsWriter,
    UnknownMetricError,
    column,
    last_row,
    truncate_after,
)

__all__ = [
    "Console",
    "MetricsWriter",
    "RateMeter",
    "UnknownMetricError",
    "column",
    "last_row",
    "truncate_after",
]
