"""The one placement core every decision goes through: spread, distributed selection, locality, tolerance (pure)."""
