"""The chart's values.schema.json and dralab's config model agree where their keys meet: a value the
chart accepts for webhook/driver/migration must not be refused by ``dralab.config`` later, in the pod."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from dralab.config import config_schema, parse_config
from dralab_kit.provision.chart import chart_dir, config_from_values, merged_values

SECTIONS = ("webhook", "driver", "migration")
CONSTRAINTS = ("type", "enum", "minimum", "maximum")


def chart_schema() -> dict[str, Any]:
    return json.loads((chart_dir() / "values.schema.json").read_text())


def config_section(name: str) -> dict[str, Any]:
    schema = config_schema()
    ref = schema["properties"][name]["anyOf"][0]["$ref"].rsplit("/", 1)[-1]
    return schema["$defs"][ref]["properties"]


def shared_keys(name: str) -> list[str]:
    chart = chart_schema()["properties"][name]["properties"]
    return sorted(set(chart) & set(config_section(name)))


@pytest.mark.parametrize("name", SECTIONS)
def test_shared_keys_have_the_same_type_values_and_range(name: str) -> None:
    chart = chart_schema()["properties"][name]["properties"]
    config = config_section(name)
    keys = shared_keys(name)
    assert len(keys) >= 4, f"{name}: the chart and the config should share keys, found {keys}"
    for key in keys:
        for constraint in CONSTRAINTS:
            if constraint in chart[key] and constraint in config[key]:
                assert chart[key][constraint] == config[key][constraint], f"{name}.{key}: {constraint} differs"
            if constraint != "type":
                # a limit only the config has would let helm install a value the pod then refuses
                assert constraint in chart[key] or constraint not in config[key], (
                    f"{name}.{key}: chart lacks {constraint}"
                )


def test_the_charts_default_values_give_a_config_the_schema_and_model_accept() -> None:
    doc = config_from_values(merged_values())
    jsonschema.validate(doc, config_schema())
    assert parse_config(doc, "chart").webhook.lifecycle == doc["webhook"]["lifecycle"]
