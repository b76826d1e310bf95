"""Utilities for developers of ``sklearn_plm_explain`` and of its tests."""
