"""Shared test settings: fp32 matmuls at full precision for parity checks, small thread pools."""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
