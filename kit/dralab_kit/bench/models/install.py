"""``install.json``: dralab from its image and chart against the host-process node profile."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Latency, Model, Num


class ImageBuild(Model):
    cold_s: Num | None = None
    warm_s: Num | None = None
    archive_mib: Num | None = None
    host_process_venv_site_packages_mib: Num | None = None


class InfraTimes(Model):
    cold_up_s: Num | None = None
    warm_up_s: Num | None = None
    destroy_s: Num | None = None


class InstallResult(BenchResult):
    image: ImageBuild | None = None
    infra: InfraTimes = Field(default_factory=InfraTimes)
    pods: dict[str, Latency] = Field(default_factory=dict)
    chart_over_host_processes_p50: Num | None = None
