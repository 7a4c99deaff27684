"""Content-addressed disk cache of fusion results, so a second ``polyfuse fuse`` of an unchanged
model is near-instant.

An entry is stored under the SHA-256 of everything the result depends on: the model's bytes, the
options (parameters, verification, tuning, timing), the selected device (``--device``,
``PYOPENCL_CTX``, ``POCL_DEVICES``, ``OCL_ICD_VENDORS``) and polyfuse itself (the hash of its
source files, so an upgrade or a local edit is a miss).  An entry holds the written files
(``plan.json``, ``fused.cl``, ``report.md``) and the summary row as JSON.  Entries are written
to a temporary directory and renamed into place, so concurrent writers (batch jobs, Dask
workers sharing a file system) never expose half an entry.

Location: ``$POLYFUSE_CACHE`` if set, else ``$XDG_CACHE_HOME/polyfuse``, else
``~/.cache/polyfuse`` (the autotuner keeps its measurements in the ``tune`` sub-directory of the
same root).  ``polyfuse fuse --no-cache`` bypasses it; ``polyfuse cache clear`` empties it.
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

#: files of one fusion result, as written by :func:`polyfuse.pipeline.write_outputs`
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
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*")):
        if f.is_file() and f.suffix in (".py", ".h", ".cl"):
            h.update(str(f.relative_to(pkg)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def key(inputs: Sequence[str], options: Mapping[str, Any], device: Any = None) -> str:
    """The entry key of a run over the files ``inputs`` with ``options``."""
    ident = {
        "layout": LAYOUT,
        "code": code_hash(),
        "inputs": [_file_digest(p) for p in inputs],
        "options": {k: options[k] for k in sorted(options)},
        "device": [str(device), os.environ.get("PYOPENCL_CTX", ""),
                   os.environ.get("POCL_DEVICES", ""), os.environ.get("OCL_ICD_VENDORS", "")],
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def _entry(k: str) -> Path:
    return cache_root() / "fuse" / k[:2] / k


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
    """Remove every cache entry (fusion results and tuning measurements); (root, files removed)."""
    root = cache_root()
    n = sum(1 for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0
    shutil.rmtree(root, ignore_errors=True)
    return root, n
