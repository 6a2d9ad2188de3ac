"""The report's section for ``caches.json``: bytes per cached object, and the monitor's scrape."""

from __future__ import annotations

from dralab_kit.bench.common import fmt, md_table
from dralab_kit.bench.models.caches import CachesResult

TITLE = "Watch caches: bytes per cached object, and the monitor's scrape"


def section(res: CachesResult) -> list[str]:
    """Bytes per cached object (whole against slim) and the monitor's scrape, as tables."""
    lines = [
        "Each cache rebuilt in memory from a claim, a pod and a ResourceSlice recorded on the 200-node fleet "
        "cluster (`kit/dralab_kit/fixtures/recorded.py`), decoded from JSON as a watch decodes them; "
        "`tracemalloc` bytes per object. *whole* is the object as the apiserver sends it (the caches' "
        "baseline until this run); *slim* is what the informers keep now (no `managedFields`).",
        "",
    ]
    rows = [[f"{int(n):,}", kind, fmt(fig.json_bytes), fmt(fig.whole), fmt(fig.slim),
             fmt(round(100 * fig.saved, 1), " %")]
            for n, kinds in res.per_object.items() for kind, fig in kinds.items()]
    lines += md_table(["objects", "kind", "JSON bytes", "whole, bytes each", "slim, bytes each", "saved"], rows)
    rows = [[f"{s.claims:,}", f"{s.nodes:,}", fmt(s.picture_ms), fmt(s.gauges_ms), fmt(s.text_ms), fmt(s.scrape_ms),
             fmt(s.scrape_us_per_claim), f"{s.series:,}", f"{s.series_without_hami:,}",
             fmt(round(s.text_bytes / 2**20, 1))] for s in res.monitor_scrape]
    lines += ["The monitor's scrape when something changed since the last one (an unchanged picture answers "
              "the last scrape's gauges): the allocation picture over every slice and claim, its gauges with "
              "HAMi's names, and the /metrics text; one thread's CPU, median of the repeats.", ""]
    lines += md_table(["claims", "nodes", "picture, ms", "gauges, ms", "text, ms", "scrape, ms", "µs per claim",
                       "series", "series without HAMi's names", "/metrics MiB"], rows)
    return lines
