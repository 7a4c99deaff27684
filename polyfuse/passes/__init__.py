"""The compilation record and the passes over it: :mod:`.compilation` (the record and one
function per pass), :mod:`.pipeline` (the pass lists and ``fuse_program``), and tuning by
measurement, of the orchestration (:mod:`.orchestration_tuning`) and of coarsening factors
(:mod:`.coarsening_tuning`)."""
