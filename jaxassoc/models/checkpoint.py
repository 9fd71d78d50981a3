"""Reading checkpoint weights into NumPy, and checking them against what a port expects.

- ``read_weights(folder)``: ``model.safetensors``, sharded safetensors (``model.safetensors.index.json``),
  or PyTorch ``pytorch_model.bin`` (sharded too) when torch is installed. Safetensors are parsed here
  (header + raw buffer), so bfloat16 works without torch.
- ``TensorTaker``: the bookkeeping every ``params_from_hf`` needs: strip the model prefix, take tensors by
  HF name with their expected shape, stack per-layer tensors, and refuse missing, extra or mis-shaped
  tensors in one ModelError that names all of them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import mmap
import struct
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping

import ml_dtypes
import numpy as np

from jaxassoc.errors import ModelError

_SAFETENSORS_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_SAFETENSORS_NAMES = {np.dtype(v): k for k, v in _SAFETENSORS_DTYPES.items()}


@dataclasses.dataclass(frozen=True)
class CheckpointLayout:
    """What a loaded model was read from, kept so that it can be written back in the same layout
    (``LanguageModel.save``): the Hugging Face config (a GGUF file's: the one it is read as) and the name and
    shape of every tensor the family's reader was given."""

    hf_config: Mapping[str, Any]
    shapes: Mapping[str, tuple[int, ...]]


@dataclasses.dataclass(frozen=True)
class Weights:
    """The tensors of a checkpoint with where they came from."""

    tensors: dict[str, np.ndarray]
    files: tuple[Path, ...]
    file_format: Literal["safetensors", "pytorch"]

    def sha256(self) -> str:
        return sha256_files(self.files)


def sha256_files(files: Iterable[Path]) -> str:
    """sha256 over the bytes of the files, in the given order."""
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """All tensors of one ``.safetensors`` file as read-only NumPy views of a memory map (bf16 via ml_dtypes).

    A file that is empty, truncated or whose header does not describe its bytes is a ModelError naming it.
    """
    size = path.stat().st_size
    if size < 8:
        raise _corrupt(path, f"it is {size} bytes long, too short for a safetensors header")
    data = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        (header_len,) = struct.unpack("<Q", data[:8].tobytes())
        if 8 + header_len > size:
            raise ValueError(f"the header claims {header_len} bytes but the file has {size}")
        header = json.loads(data[8 : 8 + header_len].tobytes())
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
    except (struct.error, ValueError) as e:
        raise _corrupt(path, str(e)) from None
    body = data[8 + header_len :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise _corrupt(path, f"the header entry of tensor {name!r} is malformed: {info!r}") from None
        if dtype not in _SAFETENSORS_DTYPES:
            raise ModelError(f"{path}: tensor {name!r} has unsupported dtype {dtype}")
        expected = int(np.prod(shape)) * np.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
        if end - start != expected or not 0 <= start <= end <= body.size:
            raise _corrupt(
                path,
                f"tensor {name!r} ({dtype} {list(shape)}, {expected} bytes) should lie at bytes "
                f"{start}-{end} of the data, which has {body.size} bytes",
            )
        tensors[name] = body[start:end].view(_SAFETENSORS_DTYPES[dtype]).reshape(shape)
    return tensors


def write_safetensors(path: Path, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> None:
    """Write ``tensors`` (NumPy arrays; bf16 via ml_dtypes) as one ``.safetensors`` file, the inverse of
    :func:`read_safetensors`: a JSON header padded to 8 bytes, then each tensor's bytes (C order) in name order.
    ModelError naming a tensor whose dtype safetensors cannot hold."""
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    arrays, offset = [], 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        if array.dtype not in _SAFETENSORS_NAMES:
            raise ModelError(f"tensor {name!r} has dtype {array.dtype}, which safetensors cannot hold")
        header[name] = {
            "dtype": _SAFETENSORS_NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        arrays.append(array)
        offset += array.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for array in arrays:
            f.write(array.reshape(-1).view(np.uint8).data)  # as bytes: bf16 has no buffer format


def _corrupt(path: Path, what: str) -> ModelError:
    return ModelError(
        f"{path} is not a valid checkpoint file: {what}; the file is corrupt or truncated, download or save it again"
    )


def read_pytorch_bin(path: Path) -> dict[str, np.ndarray]:
    """A PyTorch state dict, loaded with ``weights_only=True``; needs torch."""
    try:
        import torch
    except ImportError:
        raise ModelError(
            f"{path} is a PyTorch checkpoint and torch is not installed: install torch "
            "(`pip install torch`) or use a checkpoint with model.safetensors"
        ) from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises EOFError, RuntimeError, UnpicklingError, ... on bad bytes
        reason = " ".join(str(e).split(". ")[0].split()) or "the file is empty or ends early"
        raise _corrupt(path, f"torch cannot load it ({type(e).__name__}: {reason})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise _corrupt(path, "it does not hold a flat state dict (tensor name -> tensor)")
    return {k: _torch_to_numpy(v) for k, v in state.items()}


def _torch_to_numpy(t) -> np.ndarray:
    import torch

    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(ml_dtypes.bfloat16)
    return t.numpy()


def read_weights(folder: Path, *, progress: bool = False) -> Weights:
    """The weights of a HF checkpoint folder: safetensors first, else PyTorch ``.bin``; shards followed
    (with a progress bar over the files when ``progress``)."""
    folder = Path(folder)
    for name, reader, fmt in (
        ("model.safetensors", read_safetensors, "safetensors"),
        ("pytorch_model.bin", read_pytorch_bin, "pytorch"),
    ):
        single, index = folder / name, folder / f"{name}.index.json"
        if single.exists():
            files = (single,)
        elif index.exists():
            shard_names = _shard_names(index)
            files = tuple(folder / s for s in shard_names)
            missing = [str(f) for f in files if not f.exists()]
            if missing:
                raise ModelError(f"{index} lists shards that are missing: {missing}; download them again")
        else:
            continue
        tensors: dict[str, np.ndarray] = {}
        todo = files
        if progress:
            from tqdm.auto import tqdm

            todo = tqdm(files, desc=f"reading {folder.name}", unit="file", leave=False)
        for file in todo:
            tensors.update(reader(file))
        return Weights(tensors=tensors, files=files, file_format=fmt)
    raise ModelError(
        f"no weights in {folder}: expected model.safetensors, model.safetensors.index.json, "
        "pytorch_model.bin or pytorch_model.bin.index.json"
    )


def _shard_names(index: Path) -> list[str]:
    """The shard files a ``*.index.json`` lists in its ``weight_map``; ModelError naming it if malformed."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        names = sorted(set(weight_map.values()))
        if not names or not all(isinstance(n, str) for n in names):
            raise ValueError("its weight_map lists no shard files")
    except json.JSONDecodeError as e:
        raise ModelError(f"{index} is not valid JSON ({e}); download or save the checkpoint again") from None
    except (KeyError, TypeError, AttributeError, ValueError, UnicodeDecodeError) as e:
        what = "it has no 'weight_map'" if isinstance(e, KeyError) else str(e)
        raise ModelError(f"{index} is not a valid shard index: {what}; download or save the checkpoint again") from None
    return names


def drop_pages(array) -> None:
    """Unmap from this process the pages read so far of the memory-mapped file ``array`` is a view of
    (``madvise(MADV_DONTNEED)``; the data stay in the page cache and are read again on the next access), so
    that reading a checkpoint tensor by tensor keeps the resident size near one tensor. No-op otherwise."""
    base = array
    while base is not None and not isinstance(base, np.memmap):
        base = getattr(base, "base", None)
    m = getattr(base, "_mmap", None)
    if m is not None and hasattr(m, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        m.madvise(mmap.MADV_DONTNEED)


class LayerStack:
    """Per-layer tensors (memory-mapped views) seen as one array with a leading layer axis, never stacked
    whole: ``stack[index]`` reads only the layers and slices ``index`` covers (one device's slice of a
    sharded weight), ``np.asarray(stack, dtype)`` stacks them cast one layer at a time."""

    def __init__(self, parts: list[np.ndarray]):
        self.parts = parts
        self.shape = (len(parts), *parts[0].shape)
        self.dtype = parts[0].dtype
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape))

    def __getitem__(self, index) -> np.ndarray:
        index = index if isinstance(index, tuple) else (index,)
        layers, rest = index[0], index[1:]
        picked = self.parts[layers] if isinstance(layers, slice) else [self.parts[layers]]
        out = np.empty((len(picked), *self.parts[0][rest].shape), self.dtype)
        for i, part in enumerate(picked):
            out[i] = part[rest]
            drop_pages(part)
        return out if isinstance(layers, slice) else out[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = np.empty(self.shape, dtype=dtype or self.dtype)
        for i, part in enumerate(self.parts):
            out[i] = part
            drop_pages(part)
        return out

    def astype(self, dtype) -> np.ndarray:
        return self.__array__(dtype)


MODULE_LEAVES = {"scale": ("weight", False), "bias": ("bias", False), "w": ("weight", True), "b": ("bias", False)}
"""Leaf of a norm / :class:`~jaxassoc.models.linear.Linear` -> (its HF tensor suffix, transpose to ``(in, out)``)."""


_INVENT: contextvars.ContextVar[Callable[[str, tuple[int, ...]], np.ndarray] | None] = contextvars.ContextVar(
    "invent", default=None
)


@contextlib.contextmanager
def inventing(make: Callable[[str, tuple[int, ...]], np.ndarray]) -> Iterator[None]:
    """Within it, a :class:`TensorTaker` asked for a tensor the checkpoint lacks takes ``make(full name, shape as
    stored)`` instead of reporting it missing: how ``LanguageModel.save`` learns the name under which a family
    reads a tensor a checkpoint did not have (an untied head)."""
    token = _INVENT.set(make)
    try:
        yield
    finally:
        _INVENT.reset(token)


class TensorTaker:
    """Takes HF tensors by name for a port and reports every problem at once.

    ``prefixes`` are the model prefixes to strip (``"transformer."``, ``"bert."``, ...): the first one
    found on any tensor name is removed from all names that carry it. ``outside`` lists name prefixes of
    tensors that live outside the model prefix (heads: ``"lm_head."``, ``"cls."``), used to name missing
    tensors as the checkpoint would. ``ignore`` lists name prefixes of tensors a port deliberately leaves
    out (buffers such as ``attn.bias``, poolers, NSP heads); any other tensor not taken is an error.
    """

    def __init__(
        self,
        tensors: Mapping[str, np.ndarray],
        prefixes: tuple[str, ...],
        ignore: tuple[str, ...] = (),
        outside: tuple[str, ...] = (),
    ):
        self.prefix = next((p for p in prefixes if any(k.startswith(p) for k in tensors)), "")
        self.tensors = {k.removeprefix(self.prefix): v for k, v in tensors.items()}
        self.ignore = ignore
        self.outside = outside
        self.taken: set[str] = set()
        self.missing: list[str] = []
        self.bad_shapes: list[str] = []

    def full_name(self, name: str) -> str:
        """The name as the checkpoint spells it (with the model prefix unless it is a head tensor)."""
        return name if name.startswith(self.outside) else self.prefix + name

    def has(self, name: str) -> bool:
        return name in self.tensors

    def take(self, name: str, shape: tuple[int, ...], transpose: bool = False) -> np.ndarray:
        """The tensor ``name`` (transposed if asked), which must have ``shape`` afterwards; a wrong shape is
        reported as the checkpoint stores the tensor."""
        stored = tuple(shape)[::-1] if transpose else tuple(shape)  # as the checkpoint holds it
        invent = _INVENT.get()
        if name not in self.tensors and invent is not None:
            self.tensors[name] = invent(self.full_name(name), stored)
        if name not in self.tensors:
            self.missing.append(self.full_name(name))
            return np.zeros(shape, np.float32)
        self.taken.add(name)
        array = self.tensors[name]
        if tuple(array.shape) != stored:
            self.bad_shapes.append(f"{self.full_name(name)}: found {tuple(array.shape)}, expected {stored}")
            return np.zeros(shape, np.float32)
        return array.T if transpose else array

    def stack(self, pattern: str, n: int, shape: tuple[int, ...], transpose: bool = False) -> LayerStack:
        """``pattern.format(i)`` for i < n, on a new leading (layer) axis (a lazy :class:`LayerStack`)."""
        return LayerStack([self.take(pattern.format(i), shape, transpose) for i in range(n)])

    def module(self, name: str, shapes: Mapping[str, tuple[int, ...]], *, conv1d: bool = False) -> dict:
        """A norm's or a linear layer's leaves (:data:`MODULE_LEAVES`) from ``name.weight`` / ``name.bias``;
        ``conv1d``: weights stored ``(in, out)`` already (GPT-2's ``Conv1D``)."""
        return {
            leaf: self.take(f"{name}.{MODULE_LEAVES[leaf][0]}", s, _transposed(leaf, conv1d))
            for leaf, s in shapes.items()
        }

    def stacked(
        self, pattern: str, n: int, shapes: Mapping[str, tuple[int, ...]] | tuple[int, ...], *, conv1d: bool = False
    ):
        """:meth:`module` of ``pattern.format(i)`` for i < n, stacked on a leading layer axis (``shapes`` include
        it); a bare shape is a bias-free projection ``pattern.weight``, transposed to ``(in, out)``."""
        if not isinstance(shapes, Mapping):
            return self.stack(f"{pattern}.weight", n, shapes[1:], transpose=True)
        return {
            leaf: self.stack(f"{pattern}.{MODULE_LEAVES[leaf][0]}", n, s[1:], _transposed(leaf, conv1d))
            for leaf, s in shapes.items()
        }

    def head(self, embed, tied: bool, names: tuple[str, ...] = ("lm_head.weight",)):
        """The output head's weight: the first of ``names`` the checkpoint has (of ``embed``'s shape), else for
        a ``tied`` checkpoint ``embed`` itself (placing the parameters gives the head its own device buffer);
        an untied checkpoint without one misses ``names[0]``."""
        name = next((n for n in names if self.has(n)), None)
        if name is None and tied:
            return embed
        return self.take(name or names[0], tuple(np.shape(embed)))

    def finish(self, what: str) -> None:
        """Raise ModelError if any tensor was missing, mis-shaped, or left over."""
        extra = sorted(self.full_name(k) for k in self.tensors if k not in self.taken and not k.startswith(self.ignore))
        problems = []
        if self.missing:
            problems.append(f"missing tensors {_some(self.missing)}")
        if self.bad_shapes:
            problems.append(f"tensors with the wrong shape {_some(self.bad_shapes)}")
        if extra:
            problems.append(f"unexpected tensors {_some(extra)}")
        if problems:
            raise ModelError(
                f"the checkpoint does not match its {what} config: "
                + "; ".join(problems)
                + ". Check that config.json belongs to these weights."
            )


def _transposed(leaf: str, conv1d: bool) -> bool:
    return MODULE_LEAVES[leaf][1] and not conv1d


def _some(items: list[str], n: int = 6) -> str:
    """The first ``n`` items and how many more there are (a model has hundreds of tensors)."""
    return f"{items[:n]}" + (f" and {len(items) - n} more" if len(items) > n else "")
