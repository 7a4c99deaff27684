"""Regenerate the checked-in fusion plans of the bundled examples.

    .venv/bin/python schedules/regenerate.py          # rewrite schedules/<name>.plan.json
    .venv/bin/python schedules/regenerate.py --check  # exit 1 and list the examples whose plan changed

``tests/test_schedules.py`` runs the check, so a change in planning shows up as a failing test
and, once regenerated, as a readable diff of these files.  Plans are computed without a device
(code generation fills sizes and kernel names but compiles nothing), so they are the same on
every machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEDULES = ROOT / "schedules"
EXAMPLES = ROOT / "examples"
MODELS = EXAMPLES / "models"
#: the device limits ONNX operator kernels are tiled for when plans are checked in, so the plans
#: do not depend on the machine that regenerates them
REFERENCE_LIMITS = {"max_work_group_size": 256, "local_mem_size": 32768}


def example_dirs() -> list[Path]:
    """Bundled OpenCL programs (kernels.cl + host.c) and ONNX models."""
    programs = [p for p in EXAMPLES.iterdir() if (p / "kernels.cl").exists()
                and (p / "host.c").exists()]
    return sorted(programs) + sorted(MODELS.glob("*.onnx"))


def plan_name(example: Path) -> str:
    return example.stem if example.suffix == ".onnx" else example.name


def plan_text(example: Path) -> str:
    """The plan.json text polyfuse computes for one bundled program or model."""
    import polyfuse
    from polyfuse.passes.pipeline import fuse_program
    from polyfuse.report import plan_json, plan_to_text

    if example.suffix == ".onnx":
        from polyfuse.frontend.onnx import load_onnx_model

        program = load_onnx_model(str(example), **REFERENCE_LIMITS).program
    else:
        program = polyfuse.load_opencl(str(example / "kernels.cl"),
                                       host=str(example / "host.c"))
    result = fuse_program(program, build=False)
    text = plan_to_text(plan_json(result.fused))
    return text.replace(str(ROOT) + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    changed = []
    for example in example_dirs():
        path = SCHEDULES / f"{plan_name(example)}.plan.json"
        text = plan_text(example)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                changed.append(plan_name(example))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if changed:
        print("plans changed: " + ", ".join(changed)
              + " (run `.venv/bin/python schedules/regenerate.py` and review the diff)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
