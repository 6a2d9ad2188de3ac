"""The report's section and verdict for ``cluster.json``: bring-up, tear-down, memory and Go builds."""

from __future__ import annotations

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.cluster import ClusterResult, RunTimes
from dralab_kit.bench.sections.format import table, verdict_text

TITLE = "Local cluster: bring-up, tear-down, memory, builds"


def verdicts(res: ClusterResult) -> list[list[str]]:
    """``cluster up`` from empty to ready against its target."""
    return [["cluster", "`cluster up` from an empty state to ready (median)", fmt(res.up_s.median, " s"),
             f"<= {fmt(res.up_target_s, ' s')}", verdict_text(res.up_within_target)]]


def _row(label: str, t: RunTimes) -> list[object]:
    return [label, fmt(t.median), fmt(t.min), fmt(t.max), t.runs]


def section(res: ClusterResult) -> list[str]:
    """Seconds per command, idle memory of the control plane, and the Go builds the builder recorded."""
    out = [
        "A throw-away cluster of the benchmark's own; `up` of the running cluster is the baseline (the fixed",
        "cost of the command).",
        "",
    ]
    out += table(["measure", "median s", "min s", "max s", "runs"], [
        _row("`up`, empty state to ready", res.up_s),
        _row("`up` of the running cluster (baseline)", res.baseline),
        _row("`down`", res.down_s),
        ["`cluster build` when everything is built", fmt(res.build_check_s), "", "", 1],
    ])
    if res.control_plane_rss_mib:
        out += [
            "Control plane resident memory at idle (MiB, mean over the sample): "
            + ", ".join(f"{k} {fmt(v)}" for k, v in res.control_plane_rss_mib.items())
            + ".",
            "",
        ]
    builds = res.recorded_builds.builds
    out += ["**Go builds recorded by the builder** (measured when a build really ran; never a constant):", ""]
    if isinstance(builds, dict) and builds:
        cache = {True: "warm", False: "empty (cold)"}
        rows = [[w, ", ".join(b.binaries), fmt(b.seconds, " s"), b.finished, b.go,
                 ", ".join(f"{m} {v}" for m, v in b.modules.items()),
                 "unknown" if b.go_cache_was_present is None else cache[b.go_cache_was_present],
                 b.cpus] for w, b in sorted(builds.items())]
        out += table(["wrapper", "binaries", "build time", "finished", "Go", "modules", "Go build cache", "cores"],
                     rows)
    else:
        out += ["Not measured: no build was recorded in the benchmark machine's cache.", ""]
    return out
