"""Running kernels: device selection and limits, profiled timing (see :mod:`.device`)."""

from polyfuse.runtime.device import (  # noqa: F401
    DeviceLimits,
    TimingResult,
    build_kernel,
    build_program,
    check_device,
    device_key,
    device_limits,
    get_context,
    get_device,
    list_devices,
    time_host,
    time_kernel,
)
