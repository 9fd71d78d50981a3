"""Give the memory a process has freed back to the operating system.

Loading a model (a GGUF file is dequantised through temporary copies) and a job's statistics free
hundreds of MB in pieces that glibc's allocator keeps in its heap, so the resident size of a long
process (the default audit) only grows. ``malloc_trim`` returns the free pages; elsewhere (macOS,
musl) this is a garbage collection only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Collect garbage, then hand the allocator's free pages back to the OS (glibc only)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
