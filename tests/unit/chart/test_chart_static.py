"""The chart's data without helm: vendor file in step with the vendor table, values mapped onto the config."""

from __future__ import annotations

import json

import pytest
import yaml

from dralab.config import parse_config
from dralab.driver.devices import BACKENDS
from dralab.errors import UserError
from dralab_kit.provision.chart import (
    chart_dir,
    chart_values,
    chart_vendor_file,
    config_from_values,
    default_values,
    merged_values,
    split_image,
)


def test_chart_vendor_file_matches_the_vendor_table() -> None:
    shipped = (chart_dir() / "files" / "vendors.yaml").read_text()
    assert shipped == chart_vendor_file(), "run: python -m dralab_kit.provision.chart sync"


def test_default_values_render_a_config_dralab_accepts() -> None:
    cfg = parse_config(config_from_values(default_values()), "chart defaults")
    assert cfg.driver.backend == "fake"
    assert cfg.webhook.lifecycle == "claim"
    assert cfg.driver.enforcement_library == "/usr/local/dralab/lib/libvcore.so"
    assert [v.key for v in cfg.vendors.enabled_vendors()] == ["ascend", "nvidia", "hygon"]


def test_chart_defaults_equal_the_config_defaults_where_they_overlap() -> None:
    from dralab.config import DEFAULT_CONFIG_YAML

    defaults = yaml.safe_load(DEFAULT_CONFIG_YAML)
    rendered = config_from_values(default_values())
    for section in ("webhook", "driver"):
        for key, value in defaults[section].items():
            if key == "enforcementLibrary":
                continue  # the chart installs vcore on the host and names that path
            assert rendered[section][key] == value, f"{section}.{key}"
    assert rendered["vendors"]["enabled"] == defaults["vendors"]["enabled"]


@pytest.mark.parametrize("backend", ["fake", "ascend", "nvidia"])
@pytest.mark.parametrize("lifecycle", ["claim", "template"])
def test_chart_values_map_backend_and_lifecycle(backend: str, lifecycle: str) -> None:
    values = merged_values(chart_values(backend=backend, lifecycle=lifecycle))
    cfg = parse_config(config_from_values(values))
    assert cfg.driver.backend == backend
    assert cfg.webhook.lifecycle == lifecycle
    if backend != "fake":
        assert [v.key for v in cfg.vendors.enabled_vendors()] == [backend]
        assert values["driver"]["privileged"] is True
    else:
        assert values["driver"]["privileged"] is False


def test_an_installed_enforcement_library_replaces_vcore() -> None:
    values = merged_values({"driver": {"enforcementLibrary": "/opt/hami/libvgpu.so"}})
    assert config_from_values(values)["driver"]["enforcementLibrary"] == "/opt/hami/libvgpu.so"


def test_chart_values_reject_bad_input_with_a_clear_message() -> None:
    with pytest.raises(UserError, match="backend must be one of"):
        chart_values(backend="rocm")
    with pytest.raises(UserError, match="claim lifecycle"):
        chart_values(lifecycle="pod")
    with pytest.raises(UserError, match="unknown vendor"):
        chart_values(vendors=["metax"])


def test_image_is_split_into_repository_and_tag() -> None:
    assert split_image("registry:5000/dralab:e2e") == ("registry:5000/dralab", "e2e")
    assert split_image("dralab") == ("dralab", "")
    assert split_image("ghcr.io/x/dralab@sha256:abc") == ("ghcr.io/x/dralab@sha256:abc", "")
    assert chart_values(image="dralab:e2e")["image"] == {"repository": "dralab", "tag": "e2e"}


def test_every_value_is_described_by_the_schema() -> None:
    schema = json.loads((chart_dir() / "values.schema.json").read_text())

    def walk(values: dict, node: dict, path: str) -> None:
        props = node.get("properties", {})
        for key, value in values.items():
            assert key in props, f"{path}{key} is not in values.schema.json"
            if isinstance(value, dict) and props[key].get("properties"):
                walk(value, props[key], f"{path}{key}.")

    walk(default_values(), schema, "")
    assert schema["properties"]["driver"]["properties"]["backend"]["enum"] == list(BACKENDS)
