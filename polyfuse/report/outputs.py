"""The files of one fusion run: ``plan.json``, ``fused.cl``, ``report.md``, the rewritten host
program and, after coarsening, ``coarsened.cl`` and ``coarsening.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from polyfuse.passes.pipeline import FuseResult
from polyfuse.report.markdown import report_markdown
from polyfuse.report.plan_file import plan_json, plan_to_text


def write_outputs(result: FuseResult, out_dir: Union[str, Path], *,
                  host_include_dirs: tuple[str, ...] = (),
                  host_defines: Optional[dict[str, Optional[str]]] = None) -> dict[str, Path]:
    """Write ``plan.json``, ``fused.cl``, ``report.md`` and, for a program with a C/C++ host,
    ``fused_host.c``/``.cpp`` (the host rewritten to launch the fused kernels) into ``out_dir``.

    A host that cannot be rewritten is not an error of the fusion: ``report.md`` says why and
    ``paths["host_error"]`` is set to the message.
    """
    from polyfuse.codegen.host_rewrite import HostRewriteError, host_files_of, rewrite_hosts

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"plan": out / "plan.json", "source": out / "fused.cl", "report": out / "report.md"}
    paths["plan"].write_text(plan_to_text(plan_json(result.fused, result.verified)),
                             encoding="utf-8")
    paths["source"].write_text(result.fused.source)
    host_note = ""
    hosts = host_files_of(result.program)
    if hosts:
        try:
            from polyfuse.core.program import shared_runtime_options

            # the fused program is built with the host's own -cl-* options
            fhs = rewrite_hosts(result.program, result.fused, hosts,
                                include_dirs=host_include_dirs, defines=host_defines or {},
                                build_options=" ".join(shared_runtime_options(
                                    result.program.kernels.values())))
        except HostRewriteError as err:
            host_note = f"fused host not written: {err}"
            paths["host_error"] = Path(host_note)
        else:
            for i, fh in enumerate(fhs):
                key = "host" if i == 0 else f"host{i + 1}"
                paths[key] = out / fh.name
                paths[key].write_text(fh.text)
            names = ", ".join(f"`{fh.name}`" for fh in fhs)
            host_note = (f"{names}: the host program rewritten to launch the fused kernels "
                         "(build it like the original, plus `-lOpenCL`).")
            host_note += "".join(f"\n\n- {n}" for fh in fhs for n in fh.notes)
    report = report_markdown(result)
    if host_note:
        report += f"\n## Fused host\n\n{host_note}\n"
    paths["report"].write_text(report)
    if result.coarsening is not None:
        import json

        from polyfuse.runtime.execute import program_source

        paths["coarsened"] = out / "coarsened.cl"
        paths["coarsened"].write_text(program_source(result.coarsening.result.program))
        paths["coarsening"] = out / "coarsening.json"
        paths["coarsening"].write_text(json.dumps(result.coarsening.to_dict(), indent=2) + "\n")
    return paths


__all__ = ["write_outputs"]
