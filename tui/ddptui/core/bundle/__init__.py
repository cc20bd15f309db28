"""The hand-off file (`*.ddpt`): pack a run, open it again anywhere, report on it, diff two of them."""

from .manifest import DEFAULT_MAX_SIZE, FORMAT_VERSION, BundleError, BundleRefused
from .read import Bundle, open_any, open_bundle, open_run

__all__ = ["DEFAULT_MAX_SIZE", "FORMAT_VERSION", "Bundle", "BundleError", "BundleRefused", "open_any",
           "open_bundle", "open_run"]
