"""Integrations of gaca's estimators into other trainers: ``gaca.integrations.verl`` (docs/verl.md)."""
