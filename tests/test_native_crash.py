"""A native abort (the device compiler's LLVM) in a kernel build is one line naming the stage,
the kernel and the signal; a device whose probe kernels fail is unusable with the reason."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from polyfuse.watchdog import WorkerCrashed, call_with_budget, stage


def _abort_in_build(progress: object = None) -> None:
    with stage("building OpenCL kernel 'poly' on some device"):
        os.abort()


def test_abort_in_a_build_names_stage_kernel_and_signal() -> None:
    with pytest.raises(WorkerCrashed) as info:
        call_with_budget(_abort_in_build)
    line = str(info.value)
    assert "\n" not in line and "'poly'" in line and "SIGABRT" in line
    assert info.value.signal == "SIGABRT" and "building OpenCL kernel" in info.value.stage


def test_a_device_failing_a_probe_kernel_is_unusable() -> None:
    from polyfuse.runtime import device as dv

    devices = dv.list_devices()
    if not devices:
        pytest.skip("no OpenCL device")
    good = dv._probe_kernels()
    wrong = replace(good[0], expected=good[0].expected + 1)
    dev = dv.get_device()
    assert dv.probe(dev, kernels=good[:1]).reason is None
    why = dv.probe(dev, kernels=(wrong,)).reason
    assert why is not None and "probe kernel 'vector4'" in why and "miscompiled" in why
