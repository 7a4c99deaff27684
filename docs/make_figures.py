"""Draw the figures of the documentation from the code: ``docs/uar_qkv.svg``.

    .venv/bin/python docs/make_figures.py [OUT_DIR]

The UAR of ``examples/qkv`` (three ``linear`` launches of one kernel object feeding
``combine``), as polyfuse displays it in Jupyter.  ``tests/test_docs.py`` redraws it into a
temporary directory and fails when the committed picture is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def uar_qkv_svg() -> str:
    """The SVG of the QKV example's UAR."""
    import polyfuse
    from polyfuse.report.display import uar_to_svg

    example = ROOT / "examples" / "qkv"
    program = polyfuse.load_opencl(str(example / "kernels.cl"), host=str(example / "host.c"))
    return uar_to_svg(polyfuse.build_uar(program))


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "uar_qkv.svg"
    path.write_text(uar_qkv_svg())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
