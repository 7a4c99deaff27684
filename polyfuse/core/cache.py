"""Content-addressed disk cache of everything polyfuse derives from a model or program that
does not depend on the inputs it runs on, so a second process starts where the first ended.

Kinds of entries, one sub-directory each: ``fuse`` (what ``polyfuse fuse`` writes: ``plan.json``,
``fused.cl``, ``report.md`` and the summary row), ``session`` (the fused program of an
:class:`polyfuse.InferenceSession` as it runs: source, evaluated launches, initial buffer
contents, and the kernel variant it chose), ``form`` (that choice, measured once per model) and
``binaries`` (device binaries, ``CL_PROGRAM_BINARIES``, of built programs).

An entry is stored under the SHA-256 of everything its content depends on: the input files'
bytes, the options (parameters, verification, tuning, ...), the device (its stable key: platform
name and version, device name, driver version; the device selection variables where no device
is resolved) and polyfuse itself (the hash of its source files, so an upgrade or a local edit is
a miss).  A file's digest is kept beside the entries with the file's size, modification time
and inode, so an unchanged 300 MB model is not read again to find its entry.  Entries are
written to a temporary name and renamed into place, so concurrent writers (batch jobs, Dask
workers sharing a file system) never expose half an entry.

Location: ``$POLYFUSE_CACHE`` if set, else ``$XDG_CACHE_HOME/polyfuse``, else
``~/.cache/polyfuse`` (the autotuner keeps its measurements in the ``tune`` sub-directory of the
same root).  ``polyfuse fuse --no-cache`` and ``InferenceSession(..., cache=False)`` bypass it;
``polyfuse cache clear`` empties it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import numpy as np

#: files of one fusion result, as written by :func:`polyfuse.report.write_outputs`
RESULT_FILES = ("plan.json", "fused.cl", "report.md")
#: bump when the layout of an entry changes
LAYOUT = 1


def cache_root() -> Path:
    """The cache root (module docstring)."""
    env = os.environ.get("POLYFUSE_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path("~/.cache").expanduser()) / "polyfuse"


@lru_cache(maxsize=1)
def code_hash() -> str:
    """SHA-256 of polyfuse's own source files (Python and the bundled headers)."""
    pkg = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*")):
        if f.is_file() and f.suffix in (".py", ".h", ".cl"):
            h.update(str(f.relative_to(pkg)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes, remembered per file identity (size, modification time, inode)."""
    st = os.stat(path)
    ident = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev]
    memo = cache_root() / "digests" / hashlib.sha256(
        os.path.realpath(path).encode()).hexdigest()[:32]
    try:
        entry = json.loads(memo.read_text())
        if entry["stat"] == ident:
            return str(entry["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    digest = h.hexdigest()
    _write_atomic(memo, json.dumps({"stat": ident, "sha256": digest}).encode())
    return digest


def key(inputs: Sequence[str], options: Mapping[str, Any], device: Any = None, *,
        code: bool = True) -> str:
    """The entry key of a result over the files ``inputs`` with ``options`` on ``device`` (a
    stable device key; None: the device selection variables stand for it); ``code=False`` for
    measurements that outlive edits of polyfuse (the kernel variant choice)."""
    ident = {
        "layout": LAYOUT,
        "code": code_hash() if code else None,
        "inputs": [file_digest(p) for p in inputs],
        "options": {k: options[k] for k in sorted(options)},
        "device": [str(device), os.environ.get("PYOPENCL_CTX", ""),
                   os.environ.get("POCL_DEVICES", ""), os.environ.get("OCL_ICD_VENDORS", "")],
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def _entry(k: str, kind: str = "fuse") -> Path:
    return cache_root() / kind / k[:2] / k


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (best effort: a read-only cache is only slower)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        return


def load_blob(kind: str, k: str) -> Optional[bytes]:
    """The bytes stored under ``k``; None on a miss."""
    try:
        return _entry(k, kind).read_bytes()
    except OSError:
        return None


def store_blob(kind: str, k: str, data: bytes) -> None:
    """Store ``data`` under ``k``."""
    _write_atomic(_entry(k, kind), data)


def load_record(kind: str, k: str) -> Optional[tuple[dict, dict[str, np.ndarray]]]:
    """``(meta, arrays)`` stored under ``k`` (arrays memory-mapped, read-only); None on a miss."""
    entry = _entry(k, kind)
    try:
        meta = json.loads((entry / "meta.json").read_text())
        arrays = {name: np.load(entry / f"{i}.npy", mmap_mode="r")
                  for i, name in enumerate(meta["arrays"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return meta["meta"], arrays


def store_record(kind: str, k: str, meta: Mapping[str, Any],
                 arrays: Mapping[str, np.ndarray]) -> None:
    """Store JSON-able ``meta`` and named ``arrays`` under ``k`` (best effort)."""
    entry = _entry(k, kind)
    if entry.exists():
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
        for i, arr in enumerate(arrays.values()):
            np.save(tmp / f"{i}.npy", np.ascontiguousarray(arr))
        (tmp / "meta.json").write_text(json.dumps({"arrays": list(arrays), "meta": dict(meta)}))
        try:
            os.replace(tmp, entry)
        except OSError:  # another writer won the race: its entry is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError:
        return


def load(k: str, out_dir: Path) -> Optional[dict]:
    """Copy a cached result into ``out_dir`` and return its summary; None on a miss."""
    entry = _entry(k)
    meta = entry / "summary.json"
    if not meta.is_file():
        return None
    try:
        summary = json.loads(meta.read_text())
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in RESULT_FILES:
            shutil.copyfile(entry / name, out_dir / name)
    except (OSError, ValueError):
        return None
    return summary


def store(k: str, out_dir: Path, summary: Mapping[str, Any]) -> None:
    """Store the files written in ``out_dir`` and ``summary`` under ``k`` (best effort)."""
    entry = _entry(k)
    if entry.exists():
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
        for name in RESULT_FILES:
            shutil.copyfile(out_dir / name, tmp / name)
        (tmp / "summary.json").write_text(json.dumps(dict(summary), sort_keys=True))
        try:
            os.replace(tmp, entry)
        except OSError:  # another writer won the race: its entry is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError:
        return


def clear() -> tuple[Path, int]:
    """Remove every cache entry (fusion results, sessions, binaries, tuning measurements);
    (root, files removed)."""
    root = cache_root()
    n = sum(1 for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0
    shutil.rmtree(root, ignore_errors=True)
    return root, n
