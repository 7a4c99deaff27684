"""OpenCL drivers that are installed but not registered, and registering them for polyfuse's own
processes.

pyopencl reaches drivers through the ICD loader, which loads the libraries named by the ``.icd``
files of one folder: ``/etc/OpenCL/vendors``, or ``$OCL_ICD_VENDORS`` when set, and then only that
one.  It reads that folder once, at the first platform enumeration.  Container images with a GPU
driver mounted (NVIDIA's ``libnvidia-opencl.so.1``) often lack the ``.icd`` file, so the GPU is
invisible although its driver is there.

polyfuse never writes to ``/etc``.  With the user's consent (``polyfuse devices --register``, which
leaves a setting file under the cache root, or ``POLYFUSE_REGISTER_DRIVERS=1``) :func:`apply`
writes a vendors folder of its own under the cache root, holding the entries of the folder the
loader would have read plus one per driver found, and points ``OCL_ICD_VENDORS`` at it.  It must
run before pyopencl first enumerates platforms: ``polyfuse.apps.cli.main`` and
``polyfuse.runtime.device`` (at import) call it.  Child processes inherit the variable.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from polyfuse.core.cache import cache_root

#: (vendor, library file) of the GPU drivers whose missing ``.icd`` file is looked for
KNOWN_DRIVERS: tuple[tuple[str, str], ...] = (
    ("NVIDIA", "libnvidia-opencl.so.1"),
    ("AMD", "libamdocl64.so"),
    ("Intel", "libigdrcl.so"),
)
#: where distributions, ROCm, Intel's compute runtime and NVIDIA's container toolkit put them
SEARCH_DIRS: tuple[str, ...] = (
    "/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/usr/local/lib", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/opt/rocm/lib",
    "/opt/rocm/opencl/lib", "/usr/lib/x86_64-linux-gnu/intel-opencl", "/usr/lib64/intel-opencl",
)
SYSTEM_VENDORS = "/etc/OpenCL/vendors"
#: ``1`` registers the drivers found, ``0`` never does; unset: the setting file decides
ENV_SWITCH = "POLYFUSE_REGISTER_DRIVERS"
#: directories searched instead of :data:`SEARCH_DIRS` (``os.pathsep``-separated)
ENV_PATH = "POLYFUSE_DRIVER_PATH"


@dataclass(frozen=True)
class Driver:
    """A driver library found on disk."""

    vendor: str
    path: str

    def __str__(self) -> str:
        return f"{self.vendor} {self.path}"


def search_dirs() -> list[str]:
    """``$POLYFUSE_DRIVER_PATH`` when set, else :data:`SEARCH_DIRS`."""
    env = os.environ.get(ENV_PATH)
    return [d for d in env.split(os.pathsep) if d] if env else list(SEARCH_DIRS)


def active_vendors() -> str:
    """What the ICD loader reads: ``$OCL_ICD_VENDORS`` when set, else the system folder."""
    return os.environ.get("OCL_ICD_VENDORS") or SYSTEM_VENDORS


def _entries(vendors: str) -> dict[str, str]:
    """``.icd`` file name -> library it names, for a vendors folder, one ``.icd`` file, or (as
    ocl-icd accepts in ``OCL_ICD_VENDORS``) a library's path; none for a missing path."""
    path = Path(vendors)
    if path.is_dir():
        files = sorted(path.glob("*.icd"))
    elif path.suffix == ".icd" and path.is_file():
        files = [path]
    elif path.is_file():
        return {"user.icd": vendors}
    else:
        return {}
    out = {}
    for f in files:
        try:
            lib = f.read_text(errors="replace").strip()
        except OSError:
            continue
        if lib:
            out[f.name] = lib
    return out


def find_unregistered(dirs: Optional[Sequence[str]] = None,
                      vendors: Optional[str] = None) -> list[Driver]:
    """Known driver libraries present in ``dirs`` (default :func:`search_dirs`) that no entry of
    ``vendors`` (default :func:`active_vendors`) names; one per vendor.  An entry names a library
    by path or by file name (``nvidia.icd`` usually holds just ``libnvidia-opencl.so.1``)."""
    named = {os.path.basename(lib) for lib in _entries(vendors or active_vendors()).values()}
    found = []
    for vendor, lib in KNOWN_DRIVERS:
        if lib in named:
            continue
        for d in dirs if dirs is not None else search_dirs():
            if os.path.isfile(os.path.join(d, lib)):
                found.append(Driver(vendor, os.path.join(d, lib)))
                break
    return found


def setting_path() -> Path:
    """The file whose presence means the user agreed to registration (``devices --register``)."""
    return cache_root() / "register_drivers"


def wanted() -> bool:
    """Whether to register: ``$POLYFUSE_REGISTER_DRIVERS`` when set, else the setting file."""
    env = os.environ.get(ENV_SWITCH, "").strip()
    if env:
        return env not in ("0", "no", "false")
    return setting_path().is_file()


def vendors_folder(drivers: Sequence[Driver], base: Optional[str] = None) -> Path:
    """A vendors folder under the cache root holding ``base``'s entries (default: what the loader
    reads now, so already registered drivers, PoCL among them, stay visible) and one
    ``<vendor>.icd`` per driver.  Named by its content and renamed into place once complete, so
    concurrent processes share it and none sees it half written."""
    entries = _entries(base or active_vendors())
    for drv in drivers:
        entries[f"polyfuse-{drv.vendor.lower()}.icd"] = drv.path
    digest = hashlib.sha256(repr(sorted(entries.items())).encode()).hexdigest()[:16]
    folder = cache_root() / "icd" / digest
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    for name, lib in entries.items():
        (tmp / name).write_text(lib + "\n")
    try:
        os.replace(tmp, folder)
    except OSError:  # another process made the same folder first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


#: the drivers :func:`apply` registered in this process (for ``polyfuse devices``)
REGISTERED: list[Driver] = []


def apply(force: bool = False) -> list[Driver]:
    """Register the unregistered drivers for this process and its children when the user agreed
    (or ``force``); returns those registered.  Without effect once pyopencl has enumerated."""
    if not (force or wanted()):
        return []
    drivers = find_unregistered()
    if not drivers:
        return []
    try:
        folder = vendors_folder(drivers)
    except OSError:  # an unwritable cache: `polyfuse devices` still names the drivers found
        return []
    os.environ["OCL_ICD_VENDORS"] = str(folder)
    REGISTERED.extend(drivers)
    return drivers


def remember(agree: bool) -> Path:
    """Write (``agree``) or remove the setting file; returns its path."""
    path = setting_path()
    if agree:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("register OpenCL drivers that are installed but not registered "
                        "(polyfuse devices --register; --unregister removes this file)\n")
    else:
        path.unlink(missing_ok=True)
    return path


def system_command(driver: Driver) -> str:
    """The one command (as root) that registers ``driver`` for every program on the machine."""
    return f"echo {driver.path} | sudo tee {SYSTEM_VENDORS}/{driver.vendor.lower()}.icd"
