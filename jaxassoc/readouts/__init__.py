"""Pipelines: plain functions from loaded inputs to result tables (no Hydra inside)."""
