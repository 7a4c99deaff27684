"""The ground every layer stands on: the program records (:mod:`.program`), isl helpers
(:mod:`.islutil`), formula text (:mod:`.mathtext`), the on-disk cache (:mod:`.cache`), the
native-crash watchdog (:mod:`.watchdog`) and the OpenCL driver registry (:mod:`.drivers`).
Nothing here imports another polyfuse package but :mod:`polyfuse.c`."""
