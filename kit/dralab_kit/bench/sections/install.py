"""The report's section for ``install.json``: the image and chart against the host-process node."""

from __future__ import annotations

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.install import InstallResult
from dralab_kit.bench.sections.format import table

TITLE = "Installed the way users install it: image, chart, cert-manager"


def section(res: InstallResult) -> list[str]:
    """The image build, the infra's bring-up and tear-down, and pod latency on both clusters."""
    image, infra = res.image, res.infra
    out = [
        "dralab from its image and chart on the real node (`node-chart`; cert-manager as pods, kube-proxy) against",
        "the host-process `node` profile, in one run (`dralab bench install`). Pods in HAMi syntax, one 310P3",
        "share each, applied one at a time, the two clusters taking turns.",
        "",
    ]
    if image is not None:
        venv = "host-process venv MiB (this checkout's, every extra)"
        out += table(["image build", "cold s", "warm s", "archive MiB", venv],
                     [["dralab image build", fmt(image.cold_s), fmt(image.warm_s),
                       fmt(image.archive_mib), fmt(image.host_process_venv_site_packages_mib)]])
    out += table(["dralab infra up --profile node", "seconds"],
                 [["cold (no cluster)", fmt(infra.cold_up_s)], ["warm (a second up)", fmt(infra.warm_up_s)],
                  ["destroy", fmt(infra.destroy_s)]])
    out += table(["pod apply -> Running", "n", "p50 s", "p99 s", "max s"],
                 [[label, fmt(s.n), fmt(s.p50), fmt(s.p99), fmt(s.max)] for label, s in res.pods.items()])
    out += [f"Chart over host processes, p50: {fmt(res.chart_over_host_processes_p50)}.", ""]
    return out
