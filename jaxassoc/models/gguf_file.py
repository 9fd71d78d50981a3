"""The GGUF container (llama.cpp's ``docs/gguf.md``, versions 2 and 3), parsed straight from a memory map.

The header, the metadata and the tensor directory are read with ``struct``; each tensor is a read-only
NumPy view of the file, shaped as ``gguf.GGUFReader`` shapes it (quantised types: rows of raw bytes), so
``gguf.quants.dequantize`` takes it as it is. ``GGUFReader`` builds a NumPy view for every item of every
metadata array: SmolLM2's 49k tokens and 48k merges took 3.2 s of its 7.6 s load; here they take 0.1 s.
Any malformed byte raises ``ValueError`` (or ``struct.error``), which :mod:`jaxassoc.models.gguf` reports
as a corrupt or truncated file.
"""

from __future__ import annotations

import math
import mmap
import struct
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
_STRING, _ARRAY = 8, 9
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
"""GGUF value type -> struct format (little-endian)."""
_PLAIN_TENSORS = {
    GGMLQuantizationType.F32: np.float32,
    GGMLQuantizationType.F16: np.float16,
    GGMLQuantizationType.F64: np.float64,
    GGMLQuantizationType.I8: np.int8,
    GGMLQuantizationType.I16: np.int16,
    GGMLQuantizationType.I32: np.int32,
    GGMLQuantizationType.I64: np.int64,
}
"""Tensor types stored as plain NumPy items; every other type is blocks of bytes."""


class GgufTensor(NamedTuple):
    name: str
    tensor_type: GGMLQuantizationType
    data: np.ndarray  # read-only view of the file: (*reversed dims) items, or rows of bytes when quantised


class GgufFile(NamedTuple):
    metadata: dict[str, Any]  # key -> int, float, bool, str or list of them
    tensors: list[GgufTensor]


class _Cursor:
    """Little-endian reads from a buffer, each checked against its end."""

    def __init__(self, buffer):
        self.buffer, self.pos = buffer, 0

    def _take(self, size: int) -> int:
        start, self.pos = self.pos, self.pos + size
        if self.pos > len(self.buffer):
            raise ValueError(f"the file ends at byte {len(self.buffer)}, inside a field at byte {start}")
        return start

    def scalar(self, fmt: str):
        return struct.unpack_from(fmt, self.buffer, self._take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        size = self.scalar("<Q")
        start = self._take(size)
        return str(self.buffer[start : start + size], "utf-8")

    def value(self, kind: int):
        if kind == _STRING:
            return self.string()
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind != _ARRAY:
            raise ValueError(f"unknown metadata value type {kind} at byte {self.pos}")
        item, count = self.scalar("<I"), self.scalar("<Q")
        if item in _SCALARS:
            dtype = np.dtype(_SCALARS[item])
            start = self._take(dtype.itemsize * count)
            return np.frombuffer(self.buffer, dtype, count, start).tolist()
        return [self.value(item) for _ in range(count)]


def read_gguf_file(path: Path) -> GgufFile:
    """The metadata and tensors of a GGUF file; ValueError on anything malformed or truncated."""
    with open(path, "rb") as f:
        buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # ValueError when the file is empty
    if buffer[:4] != MAGIC:
        raise ValueError(f"it starts with {bytes(buffer[:4])!r}, not the GGUF magic {MAGIC!r}")
    cursor = _Cursor(buffer)
    cursor.pos = 4
    version = cursor.scalar("<I")
    if version not in VERSIONS:
        raise ValueError(f"GGUF version {version} (jaxassoc reads versions {VERSIONS}, little-endian)")
    n_tensors, n_fields = cursor.scalar("<Q"), cursor.scalar("<Q")
    metadata = {}
    for _ in range(n_fields):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.scalar("<I"))
    directory = []
    for _ in range(n_tensors):
        name = cursor.string()
        dims = [cursor.scalar("<Q") for _ in range(cursor.scalar("<I"))]
        directory.append((name, dims, GGMLQuantizationType(cursor.scalar("<I")), cursor.scalar("<Q")))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
    start = -(-cursor.pos // alignment) * alignment
    tensors, seen = [], set()
    for name, dims, kind, offset in directory:
        if name in seen:
            raise ValueError(f"tensor {name!r} appears twice")
        seen.add(name)
        shape = tuple(reversed(dims))
        if kind in _PLAIN_TENSORS:
            dtype, count = np.dtype(_PLAIN_TENSORS[kind]), math.prod(dims)
        else:
            block, size = GGML_QUANT_SIZES[kind]
            dtype, count = np.dtype(np.uint8), math.prod(dims) // block * size
            shape = (*shape[:-1], shape[-1] // block * size)
        begin = start + offset
        if begin + count * dtype.itemsize > len(buffer):
            raise ValueError(f"tensor {name!r} runs past the end of the file (byte {len(buffer)})")
        tensors.append(GgufTensor(name, kind, np.frombuffer(buffer, dtype, count, begin).reshape(shape)))
    return GgufFile(metadata, tensors)
