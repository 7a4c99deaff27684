"""What users run, each one a list of passes with its options: the ONNX front door
(:mod:`.onnx_run`), an onnxruntime-style session (:mod:`.session`), batch runs over a directory
(:mod:`.batch`) and the ``polyfuse`` command (:mod:`.cli`, also ``python -m polyfuse``)."""
