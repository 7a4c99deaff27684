"""Performance modelling: micro-benchmarks (:mod:`.microbench`), roofline (:mod:`.roofline`)."""
