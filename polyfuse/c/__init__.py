"""The C layer every stage shares: preprocessing, parsing, printing and walking C/OpenCL C
(:mod:`.preprocessor`, :mod:`.printer`, :mod:`.syntax`), the one table of scalar types
(:mod:`.types`) and the emitter that turns kernels into one OpenCL source (:mod:`.emit`).  It knows
the program records and nothing above them."""
