"""Running kernels and programs: devices, limits, timing (:mod:`.device`); whole-program
execution (:mod:`.execute`) and verification of one run against another (:mod:`.verify`)."""

from polyfuse.runtime.device import (  # noqa: F401
    DeviceLimits,
    TimingResult,
    build_kernel,
    build_program,
    check_device,
    device_key,
    device_limits,
    device_target,
    get_context,
    get_device,
    list_devices,
    time_host,
    time_kernel,
)
from polyfuse.runtime.execute import (  # noqa: F401
    ProgramTiming,
    RunResult,
    program_source,
    run_program,
    time_program,
)
from polyfuse.runtime.verify import (  # noqa: F401
    BufferCheck,
    Verification,
    compare_runs,
    verify_programs,
)
