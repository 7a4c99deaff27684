"""Digests of what ``polyfuse fuse`` writes for every bundled example and model.

    .venv/bin/python tests/golden/regenerate.py          # rewrite tests/golden/digests.json
    .venv/bin/python tests/golden/regenerate.py --check  # exit 1 and list the files that changed
    .venv/bin/python tests/golden/regenerate.py --out DIR  # also keep the outputs in DIR

Why: a refactoring of the pipeline must not change ``plan.json``, ``report.md``, ``fused.cl`` or
``fused_host.c`` (``schedules/`` checks the plans alone, computed without a device).  The files
are made as a user makes them, by the CLI (``polyfuse fuse -q KERNELS.cl --host HOST.c`` per
example, ``polyfuse fuse -q --no-timing --no-cache MODELS.onnx`` for the models), on the default
OpenCL device: planning reads that device's limits, so the digests hold for the device they were
made on (named in the file; ``tests/test_golden.py`` skips on another one).  The outputs carry
no times; the checkout's absolute path, should one appear, is replaced by ``<root>``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = ROOT / "tests" / "golden" / "digests.json"
EXAMPLES = ROOT / "examples"
#: the files compared (each where the command writes it)
OUTPUTS = ("plan.json", "report.md", "fused.cl", "fused_host.c")


def examples() -> list[Path]:
    """The bundled OpenCL programs (kernels.cl with host.c)."""
    return sorted(p for p in EXAMPLES.iterdir() if (p / "host.c").is_file()
                  and (p / "kernels.cl").is_file())


def models() -> list[Path]:
    return sorted((EXAMPLES / "models").glob("*.onnx"))


def device_name() -> str:
    """The default device the digests are made on (its limits shape the plans)."""
    from polyfuse.runtime.device import device_limits

    lim = device_limits(None)
    return f"{lim.name} ({lim.platform})"


def _fuse(args: list[str], cache: str) -> None:
    env = dict(os.environ, POLYFUSE_CACHE=cache)
    done = subprocess.run([sys.executable, "-m", "polyfuse", "fuse", "-q", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"polyfuse fuse {' '.join(args)} failed:\n{done.stderr[-3000:]}")


def produce(out: Path) -> dict[str, str]:
    """Fuse everything into ``out``; the sha256 of each compared file by its relative path."""
    with tempfile.TemporaryDirectory() as cache:
        for ex in examples():
            _fuse([str(ex / "kernels.cl"), "--host", str(ex / "host.c"), "--out",
                   str(out / ex.name)], cache)
        _fuse(["--no-timing", "--no-cache", *map(str, models()), "--out", str(out / "models")],
              cache)
    digests = {}
    for path in sorted(out.rglob("*")):
        if path.name in OUTPUTS:
            text = path.read_bytes().replace(str(ROOT).encode(), b"<root>")
            digests[path.relative_to(out).as_posix()] = hashlib.sha256(text).hexdigest()
    return digests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--out", help="keep the outputs in this directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        digests = produce(Path(args.out) if args.out else Path(tmp))
    record = {"device": device_name(), "files": digests}
    if not args.check:
        DIGESTS.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"wrote {DIGESTS.relative_to(ROOT)} ({len(digests)} files)")
        return 0
    old = json.loads(DIGESTS.read_text())
    if old["device"] != record["device"]:
        print(f"the digests were made on {old['device']}, this is {record['device']}",
              file=sys.stderr)
        return 2
    changed = sorted(k for k in old["files"].keys() | digests.keys()
                     if old["files"].get(k) != digests.get(k))
    if changed:
        print("outputs changed: " + ", ".join(changed) + " (rerun with --out DIR and diff; "
              "regenerate only when the change is meant)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
