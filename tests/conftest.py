"""Shared test settings: fp32 matmuls at full precision for parity checks, small thread pools, and a cache
folder of the session's own (``JAXASSOC_CACHE``), so no test or app it starts writes to the user's cache."""

import os
import shutil
import tempfile

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
SESSION_CACHE = tempfile.mkdtemp(prefix="jaxassoc-test-cache-")
os.environ["JAXASSOC_CACHE"] = SESSION_CACHE

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SESSION_CACHE, ignore_errors=True)
