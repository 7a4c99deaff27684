"""OpenCL drivers installed but not registered are found, named with the command that makes them
usable, and registered for polyfuse's own processes only when the user agrees; already registered
drivers (PoCL) stay visible.  Fakes stand in for the driver libraries: no GPU needed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from polyfuse.core import drivers

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake machine: NVIDIA's and AMD's libraries in ``lib/``, a system vendors folder that
    registers only PoCL, a cache root, no user setting."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libnvidia-opencl.so.1").write_bytes(b"")
    (lib / "libamdocl64.so").write_bytes(b"")
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    (vendors / "pocl.icd").write_text("libpocl.so.2\n")
    monkeypatch.setenv(drivers.ENV_PATH, f"{tmp_path / 'missing'}{os.pathsep}{lib}")
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    # recorded by monkeypatch, so that what apply() sets is undone after the test
    monkeypatch.setenv("OCL_ICD_VENDORS", "")
    monkeypatch.delenv("OCL_ICD_VENDORS")
    monkeypatch.delenv(drivers.ENV_SWITCH, raising=False)
    monkeypatch.setattr(drivers, "SYSTEM_VENDORS", str(vendors))
    monkeypatch.setattr(drivers, "REGISTERED", [])
    return tmp_path


def test_finds_installed_drivers_no_icd_file_names(machine: Path) -> None:
    found = drivers.find_unregistered()
    assert [(d.vendor, d.path) for d in found] == [
        ("NVIDIA", str(machine / "lib" / "libnvidia-opencl.so.1")),
        ("AMD", str(machine / "lib" / "libamdocl64.so"))]
    # NVIDIA's own nvidia.icd names the library without a directory: registered
    (machine / "vendors" / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    assert [d.vendor for d in drivers.find_unregistered()] == ["AMD"]
    # OCL_ICD_VENDORS replaces the system folder, as it does for the ICD loader
    os.environ["OCL_ICD_VENDORS"] = str(machine / "lib")  # holds no .icd file (undone: fixture)
    assert [d.vendor for d in drivers.find_unregistered()] == ["NVIDIA", "AMD"]
    assert drivers.find_unregistered(dirs=[str(machine / "missing")]) == []


def test_no_registration_without_consent(machine: Path) -> None:
    assert drivers.apply() == []
    assert "OCL_ICD_VENDORS" not in os.environ
    assert not (machine / "cache" / "icd").exists()


def test_registration_keeps_registered_drivers(machine: Path) -> None:
    drivers.remember(True)
    registered = drivers.apply()
    assert [d.vendor for d in registered] == ["NVIDIA", "AMD"]
    folder = Path(os.environ["OCL_ICD_VENDORS"])
    assert folder.parent == machine / "cache" / "icd"
    assert {f.name: f.read_text().strip() for f in folder.iterdir()} == {
        "pocl.icd": "libpocl.so.2",  # the system's entry: PoCL must not vanish
        "polyfuse-nvidia.icd": str(machine / "lib" / "libnvidia-opencl.so.1"),
        "polyfuse-amd.icd": str(machine / "lib" / "libamdocl64.so")}
    # a second process (or call) sees them registered: nothing more to do, same folder
    assert drivers.apply() == [] and os.environ["OCL_ICD_VENDORS"] == str(folder)
    assert drivers.vendors_folder(registered, base=str(machine / "vendors")) == folder


def test_environment_overrides_the_setting(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drivers.remember(True)
    monkeypatch.setenv(drivers.ENV_SWITCH, "0")
    assert drivers.apply() == [] and "OCL_ICD_VENDORS" not in os.environ
    drivers.remember(False)
    assert not drivers.setting_path().exists()
    monkeypatch.setenv(drivers.ENV_SWITCH, "1")
    assert len(drivers.apply()) == 2 and "OCL_ICD_VENDORS" in os.environ


def _devices(cache: Path, lib: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYOPENCL_CTX", "OCL_ICD_VENDORS", drivers.ENV_SWITCH)}
    env.update({"POLYFUSE_CACHE": str(cache), drivers.ENV_PATH: str(lib),
                "PYTHONPATH": str(ROOT)})
    return subprocess.run([sys.executable, "-m", "polyfuse", "devices", *flags], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)


def _rows(out: str) -> list[list[str]]:
    """Id, platform and device of each listed device."""
    return [re.split(r"\s{2,}", ln)[:3] for ln in out.splitlines() if ln[:1].isdigit()]


def test_devices_names_the_driver_and_registers_it(tmp_path: Path) -> None:
    """`polyfuse devices` names the driver found and the command; `--register` registers it
    for this and later polyfuse processes, with every device listed before still there."""
    lib = tmp_path / "lib"
    lib.mkdir()
    fake = lib / "libnvidia-opencl.so.1"  # an empty file: the loader skips what it cannot load
    fake.write_bytes(b"")
    cache = tmp_path / "cache"
    before = _devices(cache, lib)
    assert before.returncode == 0, before.stderr
    assert (f"found unregistered OpenCL driver: NVIDIA {fake} — run `polyfuse devices "
            "--register` (or set POLYFUSE_REGISTER_DRIVERS=1)") in before.stdout
    assert "rule: --device, else PYOPENCL_CTX" in before.stdout
    assert not (cache / "icd").exists()

    now = _devices(cache, lib, "--register")
    assert now.returncode == 0, now.stderr
    assert f"registered for polyfuse: OpenCL driver NVIDIA {fake}" in now.stdout
    assert "found unregistered" not in now.stdout
    assert _rows(now.stdout) == _rows(before.stdout)  # PoCL, from /etc or pip, still listed
    (folder,) = (cache / "icd").iterdir()
    assert (folder / "polyfuse-nvidia.icd").read_text().strip() == str(fake)

    later = _devices(cache, lib, "--json")  # the setting persists: no flag needed
    assert later.returncode == 0 and "registered for polyfuse" in later.stderr
    undone = _devices(cache, lib, "--unregister")
    assert "found unregistered OpenCL driver" in undone.stdout
    assert not (cache / "register_drivers").exists()
