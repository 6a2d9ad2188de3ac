"""dralab's config as a typed model: one-line errors naming the key and the fix, the same defaults as
``DEFAULT_CONFIG_YAML``, and an exported JSON Schema that agrees with the model."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from dralab.config import DEFAULT_CONFIG_YAML, ConfigFile, config_schema, default_config, parse_config
from dralab.errors import UserError
from dralab.schema_cli import schema


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"wbhook": {}}, "c.yaml: unknown config key(s) wbhook (valid: driver, migration, vendors, webhook)"),
        ({"webhook": {"lifecycel": "claim"}}, "unknown key(s) lifecycel in webhook (valid: admissionDeadlineSeconds, "),
        ({"vendors": {"enable": []}}, "c.yaml: unknown key(s) enable in vendors (valid: enabled, overrides)"),
        ({"webhook": 3}, "c.yaml: 'webhook' must be a mapping"),
        ({"webhook": {"lifecycle": "pod"}}, "c.yaml: webhook.lifecycle must be 'claim' or 'template', got 'pod'"),
        ({"webhook": {"failurePolicy": "fail"}}, "webhook.failurePolicy must be 'Fail' or 'Ignore', got 'fail'"),
        ({"webhook": {"maxClaimsPerPod": 0}}, "c.yaml: webhook.maxClaimsPerPod must be a number from 1 to 1000, got 0"),
        ({"webhook": {"claimCreateBurst": True}}, "claimCreateBurst must be a number from 1 to 1000000, got True"),
        ({"webhook": {"claimCreateBurst": 2.5}}, "c.yaml: webhook.claimCreateBurst must be a whole number, got 2.5"),
        ({"webhook": {"admissionDeadlineSeconds": 30}}, "admissionDeadlineSeconds must be a number from 0.5 to 29"),
        ({"webhook": {"objectSelector": {"labels": {}}}},
         "c.yaml: webhook.objectSelector must be a label selector with matchLabels and/or matchExpressions"),
        ({"webhook": {"claimGracePeriodSeconds": "30"}}, "claimGracePeriodSeconds: input should be a valid integer"),
        ({"driver": {"backend": "amd"}}, "c.yaml: driver.backend must be fake, ascend or nvidia, got 'amd'"),
        ({"driver": {"cdiDir": 3}}, "c.yaml: driver.cdiDir: input should be a valid string (got 3)"),
        ({"driver": {"injectDeviceNodes": "yes"}}, "c.yaml: driver.injectDeviceNodes: input should be a valid boolean"),
        ({"migration": {"graceSeconds": -1}}, "migration.graceSeconds: input should be greater than or equal to 0"),
        ({"migration": {"claimLabels": {"team": 3}}}, "c.yaml: migration.claimLabels must map keys to string values"),
        ({"migration": {"adoptClaims": "no"}}, "c.yaml: migration.adoptClaims: input should be a valid boolean"),
        ([1], "c.yaml: the config must be a YAML mapping"),
    ],
)  # fmt: skip
def test_bad_configs_get_one_line_naming_the_key(doc: object, message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_config(doc, "c.yaml")  # type: ignore[arg-type]
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_documented_defaults_are_the_models_defaults() -> None:
    documented = default_config()
    empty = parse_config({})
    assert (documented.webhook, documented.driver, documented.migration) == (
        empty.webhook,
        empty.driver,
        empty.migration,
    )
    assert set(documented.vendors.enabled) == set(empty.vendors.enabled)
    # every key of DEFAULT_CONFIG_YAML is a field, and every field but the optional selectors is documented
    doc = yaml.safe_load(DEFAULT_CONFIG_YAML)
    for name, section in doc.items():
        fields = {info.alias for info in type(getattr(ConfigFile(), name)).model_fields.values()}
        assert set(section) <= fields
        assert fields - set(section) <= {"namespaceSelector", "objectSelector"}


def test_values_are_typed_as_callers_read_them() -> None:
    cfg = parse_config({"webhook": {"excludeNamespaces": ["a", "b"], "maxClaimsPerPod": 4.0}})
    assert cfg.webhook.exclude_namespaces == ("a", "b")
    assert cfg.webhook.max_claims_per_pod == 4 and isinstance(cfg.webhook.max_claims_per_pod, int)
    assert parse_config({"webhook": None, "driver": None}).driver.backend == "fake"
    with pytest.raises(ValueError):  # frozen, as the dataclasses were
        cfg.webhook.lifecycle = "template"  # type: ignore[misc]


def test_migration_mode_follows_a_hami_config_unless_the_file_says_otherwise() -> None:
    from dralab.model.hami_config import translate
    from dralab.model.vendors import builtin_table_data

    hami = translate({}, builtin_table_data(), "hami.yaml")
    assert parse_config({}, hami=hami).migration.enabled is True
    assert parse_config({"migration": {"enabled": False}}, hami=hami).migration.enabled is False
    assert parse_config({}).migration.enabled is False


def test_the_default_config_passes_the_exported_schema() -> None:
    jsonschema.validate(yaml.safe_load(DEFAULT_CONFIG_YAML), config_schema())
    jsonschema.validate({"webhook": None, "driver": {}}, config_schema())  # empty sections: the defaults


@pytest.mark.parametrize(
    "doc",
    [
        {"webhook": {"lifecycle": "pod"}},
        {"webhook": {"maxClaimsPerPod": 0}},
        {"webhook": {"admissionDeadlineSeconds": 30}},
        {"webhook": {"objectSelector": {"labels": {}}}},
        {"driver": {"backend": "amd"}},
        {"migration": {"claimLabels": {"a": 1}}},
        {"wbhook": {}},
    ],
)
def test_the_schema_refuses_what_the_model_refuses(doc: dict) -> None:
    with pytest.raises(UserError):
        parse_config(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, config_schema())


def test_dralab_schema_config_prints_the_schema() -> None:
    result = CliRunner().invoke(schema, ["config"])
    assert result.exit_code == 0, result.output
    exported = json.loads(result.output)
    assert exported["title"] == "dralab config"
    assert exported == json.loads(json.dumps(config_schema()))
