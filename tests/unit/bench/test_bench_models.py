"""Typed bench results: every committed result file loads through its model, and the report reads only models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from dralab_kit.bench.models import MODELS, BenchResult, parse
from dralab_kit.bench.models.driver import DriverResult
from dralab_kit.bench.report import SECTIONS

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results"
FILES = sorted(RESULTS.glob("*.json"))


def test_results_are_committed() -> None:
    assert FILES, f"no result files in {RESULTS}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_committed_result_loads_through_its_own_model(path: Path) -> None:
    assert path.stem in MODELS, f"{path.name} has no model: add one in dralab_kit/bench/models/"
    res = parse(path.stem, json.loads(path.read_text()))
    assert type(res) is MODELS[path.stem]
    ctx = res.run_context()
    assert ctx.date and ctx.run in ("quick", "full", "unknown")


def test_every_report_section_has_a_model() -> None:
    assert set(SECTIONS) <= set(MODELS), "a section without a model would read an untyped result"


def test_a_figure_of_the_wrong_shape_fails_to_load() -> None:
    assert DriverResult.model_validate({"prepare_1_claim": {"n": 5}}).prepare_1_claim.n == 5
    with pytest.raises(ValidationError):
        DriverResult.model_validate({"prepare_1_claim": {"n": "many"}})


def test_figures_keep_the_type_they_were_written_with() -> None:
    res = parse("cluster", {"control_plane_rss_mib": {"etcd": 41, "apiserver": 281.5}, "future_field": [1]})
    assert res.model_dump()["control_plane_rss_mib"] == {"etcd": 41, "apiserver": 281.5}
    assert type(res.model_dump()["control_plane_rss_mib"]["etcd"]) is int  # printed "41", not "41.0"
    assert res.model_extra == {"future_field": [1]}  # fields the report does not read are kept


def test_results_before_contexts_get_one_from_their_older_fields() -> None:
    old = {"measured_at": "2026-01-01T00:00:00Z", "machine": {"cpus": 4, "python": "3.11.7"}, "quick": True,
           "load_average": {"before": [1.5, 1.0, 1.0], "after": [2.5, 1.0, 1.0]}}
    ctx = parse("unknown-benchmark", old).run_context()
    assert (ctx.date, ctx.cores, ctx.python, ctx.run) == ("2026-01-01T00:00:00Z", 4, "3.11.7", "quick")
    assert ctx.load_average is not None and ctx.load_average.start == [1.5, 1.0, 1.0]
    assert type(parse("unknown-benchmark", old)) is BenchResult
