"""Typed bench results: one pydantic model per result file in ``bench/results/``.

The report renders each section from its model (see :mod:`dralab_kit.bench.sections`), so a
figure's shape is written down once, here, and a result file that does not fit fails to load.
"""

from __future__ import annotations

from typing import Any

from dralab_kit.bench.models.admission import AdmissionResult
from dralab_kit.bench.models.base import BenchResult, Context
from dralab_kit.bench.models.caches import CachesResult
from dralab_kit.bench.models.cluster import ClusterResult
from dralab_kit.bench.models.concurrency import ConcurrencyResult
from dralab_kit.bench.models.driver import DriverResult
from dralab_kit.bench.models.faults import FaultsResult
from dralab_kit.bench.models.fleet import FleetResult
from dralab_kit.bench.models.fuzz import FuzzResult
from dralab_kit.bench.models.install import InstallResult
from dralab_kit.bench.models.janitor import JanitorResult
from dralab_kit.bench.models.lab import LabResult
from dralab_kit.bench.models.node import NodeResult
from dralab_kit.bench.models.pains import PainsResult
from dralab_kit.bench.models.prefer import PreferResult
from dralab_kit.bench.models.quiet import FleetQuietResult
from dralab_kit.bench.models.setup import SetupResult
from dralab_kit.bench.models.taints import TaintsResult
from dralab_kit.bench.models.vcore import VcoreResult

# result file stem -> its model
MODELS: dict[str, type[BenchResult]] = {
    "admission": AdmissionResult,
    "caches": CachesResult,
    "cluster": ClusterResult,
    "concurrency": ConcurrencyResult,
    "driver": DriverResult,
    "faults": FaultsResult,
    "fleet": FleetResult,
    "fleet-quiet": FleetQuietResult,
    "fuzz": FuzzResult,
    "install": InstallResult,
    "janitor": JanitorResult,
    "lab": LabResult,
    "node": NodeResult,
    "pains": PainsResult,
    "pains-node": PainsResult,
    "prefer": PreferResult,
    "setup": SetupResult,
    "taints": TaintsResult,
    "vcore": VcoreResult,
}


def parse(name: str, data: dict[str, Any]) -> BenchResult:
    """``data`` of ``<name>.json`` as its model; a result with no model keeps only the common fields."""
    return MODELS.get(name, BenchResult).model_validate(data)


__all__ = ["MODELS", "BenchResult", "Context", "parse"]
