"""Chart: metrics behind authorization (review RBAC for each component, a reader ClusterRole, tokens and
TLS on the ServiceMonitors, the config key), the monitor's HTTPS, and the optional NetworkPolicies."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from dralab.config import parse_config
from dralab_kit.provision.chart import config_from_values, merged_values

from .conftest import Render, run_helm

pytestmark = pytest.mark.slow

TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
ALL_ON = {"metrics": {"serviceMonitor": {"enabled": True}},
          "monitor": {"enabled": True, "serviceMonitor": {"enabled": True}}}


def kind(objs: list[dict[str, Any]], k: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == k]


def named(objs: list[dict[str, Any]], k: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in kind(objs, k) if o["metadata"]["name"] == name]
    return found


def config_of(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(named(objs, "ConfigMap", "dralab-config")["data"]["config.yaml"])


def endpoint(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (ep,) = named(objs, "ServiceMonitor", name)["spec"]["endpoints"]
    return ep


def test_by_default_every_component_may_review_and_a_reader_role_exists(render: Render) -> None:
    objs = render({"monitor": {"enabled": True}})
    role = named(objs, "ClusterRole", "dralab-metrics-auth")
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == {("authentication.k8s.io", "tokenreviews", "create"),
                       ("authorization.k8s.io", "subjectaccessreviews", "create")}
    binding = named(objs, "ClusterRoleBinding", "dralab-metrics-auth")
    assert binding["roleRef"]["name"] == "dralab-metrics-auth"
    assert {s["name"] for s in binding["subjects"]} == {"dralab-webhook", "dralab-driver", "dralab-monitor"}
    assert {s["namespace"] for s in binding["subjects"]} == {"dralab-system"}
    (rule,) = named(objs, "ClusterRole", "dralab-metrics-reader")["rules"]
    assert rule["nonResourceURLs"] == ["/metrics"] and rule["verbs"] == ["get"]
    assert not rule.get("resources") and not rule.get("apiGroups")
    assert config_of(objs)["webhook"]["metricsAuthorization"] is True
    assert config_of(objs)["driver"]["metricsAuthorization"] is True
    env = named(objs, "Deployment", "dralab-monitor")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "DRALAB_METRICS_AUTHORIZATION", "value": "true"} in env
    assert not [o for o in objs if o["metadata"]["name"] == "dralab-metrics-reader"
                and o["kind"] == "ClusterRoleBinding"]  # nobody is a reader until named


def test_review_rights_follow_the_components_enabled(render: Render) -> None:
    objs = render({"webhook": {"enabled": False}})
    subjects = named(objs, "ClusterRoleBinding", "dralab-metrics-auth")["subjects"]
    assert [s["name"] for s in subjects] == ["dralab-driver"]


def test_scraper_subjects_are_bound_to_the_reader_role(render: Render) -> None:
    objs = render({"metrics": {"scraperSubjects": [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"},
        {"kind": "Group", "name": "scrapers"}]}})
    binding = named(objs, "ClusterRoleBinding", "dralab-metrics-reader")
    assert binding["roleRef"]["name"] == "dralab-metrics-reader"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"},
        {"kind": "Group", "name": "scrapers", "apiGroup": "rbac.authorization.k8s.io"}]


def test_service_monitors_send_the_service_account_token(render: Render) -> None:
    objs = render(ALL_ON)
    for name in ("dralab-webhook", "dralab-driver", "dralab-monitor"):
        assert endpoint(objs, name)["bearerTokenFile"] == TOKEN_FILE, name
    assert endpoint(objs, "dralab-webhook")["scheme"] == "https"
    assert endpoint(objs, "dralab-driver")["scheme"] == "http"  # the driver's port is plain (SECURITY.md)
    assert endpoint(objs, "dralab-monitor")["scheme"] == "http"  # monitor.tls off by default


def test_a_token_from_a_secret_replaces_the_token_file(render: Render) -> None:
    auth = {"type": "Bearer", "credentials": {"name": "scraper-token", "key": "token"}}
    objs = render({**ALL_ON, "metrics": {"serviceMonitor": {"enabled": True, "authorization": auth}}})
    for name in ("dralab-webhook", "dralab-driver", "dralab-monitor"):
        ep = endpoint(objs, name)
        assert ep["authorization"] == auth and "bearerTokenFile" not in ep


def test_switched_off_no_review_rights_no_tokens_and_the_config_says_so(render: Render) -> None:
    values = {**ALL_ON, "metrics": {"authorization": False, "serviceMonitor": {"enabled": True}}}
    objs = render(values)
    names = {o["metadata"]["name"] for o in objs}
    assert "dralab-metrics-auth" not in names and "dralab-metrics-reader" not in names
    for name in ("dralab-webhook", "dralab-driver", "dralab-monitor"):
        assert "bearerTokenFile" not in endpoint(objs, name) and "authorization" not in endpoint(objs, name)
    assert config_of(objs)["webhook"]["metricsAuthorization"] is False
    assert config_of(objs)["driver"]["metricsAuthorization"] is False
    env = named(objs, "Deployment", "dralab-monitor")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "DRALAB_METRICS_AUTHORIZATION", "value": "false"} in env
    # the Python twin of the chart's config agrees
    assert config_from_values(merged_values(values))["driver"]["metricsAuthorization"] is False
    cfg = parse_config(config_of(objs))
    assert cfg.webhook.metrics_authorization is False and cfg.driver.metrics_authorization is False


def test_the_rendered_config_equals_the_python_mapping(render: Render) -> None:
    for values in ({}, {"metrics": {"authorization": False}}):
        assert config_of(render(values)) == config_from_values(merged_values(values))


def test_monitor_tls_from_cert_manager(render: Render) -> None:
    objs = render({"monitor": {"enabled": True, "tls": {"enabled": True}, "serviceMonitor": {"enabled": True}}})
    cert = named(objs, "Certificate", "dralab-monitor-tls")
    assert cert["spec"]["secretName"] == "dralab-monitor-tls"
    assert "dralab-monitor.dralab-system.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"]["name"] == "dralab-webhook-ca"
    pod = named(objs, "Deployment", "dralab-monitor")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["DRALAB_MONITOR_TLS_CERT"] == "/certs/tls.crt" and env["DRALAB_MONITOR_TLS_KEY"] == "/certs/tls.key"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert pod["volumes"] == [{"name": "certs", "secret": {"secretName": "dralab-monitor-tls"}}]
    ep = endpoint(objs, "dralab-monitor")
    assert ep["scheme"] == "https" and ep["bearerTokenFile"] == TOKEN_FILE
    assert ep["tlsConfig"] == {"serverName": "dralab-monitor.dralab-system.svc",
                               "ca": {"secret": {"name": "dralab-monitor-tls", "key": "ca.crt"}}}


def test_monitor_tls_from_an_existing_secret(render: Render) -> None:
    objs = render({"monitor": {"enabled": True, "tls": {"enabled": True, "secretName": "mine"}},
                   "webhook": {"certManager": {"enabled": False}, "tls": {"secretName": "wh", "caBundle": "Y2E="}}})
    assert not [c for c in kind(objs, "Certificate") if "monitor" in c["metadata"]["name"]]
    pod = named(objs, "Deployment", "dralab-monitor")["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "certs", "secret": {"secretName": "mine"}}]


def test_network_policies_are_off_by_default(render: Render) -> None:
    assert kind(render({"monitor": {"enabled": True}}), "NetworkPolicy") == []


def test_network_policies_admit_the_apiserver_and_the_scrapers_only(render: Render) -> None:
    objs = render({"monitor": {"enabled": True},
                   "networkPolicy": {"enabled": True, "apiserverCIDRs": ["10.0.0.10/32"]}})
    policies = {p["metadata"]["name"]: p["spec"] for p in kind(objs, "NetworkPolicy")}
    assert set(policies) == {"dralab-webhook", "dralab-driver", "dralab-monitor"}
    scrapers = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    webhook = policies["dralab-webhook"]
    assert webhook["policyTypes"] == ["Ingress"]
    assert webhook["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "webhook"
    assert webhook["ingress"] == [
        {"from": [{"ipBlock": {"cidr": "10.0.0.10/32"}}], "ports": [{"port": "https", "protocol": "TCP"}]},
        {"from": [scrapers], "ports": [{"port": "https", "protocol": "TCP"}]}]
    for name in ("dralab-driver", "dralab-monitor"):
        assert policies[name]["ingress"] == [{"from": [scrapers], "ports": [{"port": "metrics", "protocol": "TCP"}]}]
        assert policies[name]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == name.split("-")[1]
    # the named ports exist on the pods they select
    ports = {
        "dralab-webhook": named(objs, "Deployment", "dralab-webhook"),
        "dralab-driver": named(objs, "DaemonSet", "dralab-driver"),
        "dralab-monitor": named(objs, "Deployment", "dralab-monitor"),
    }
    for name, workload in ports.items():
        declared = {p["name"] for c in workload["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        assert {p["port"] for rule in policies[name]["ingress"] for p in rule["ports"]} <= declared, name


def test_the_scrapers_are_configurable_and_none_admits_nobody(render: Render) -> None:
    peers = [{"namespaceSelector": {"matchLabels": {"team": "obs"}}, "podSelector": {}}]
    objs = render({"webhook": {"enabled": False}, "networkPolicy": {"enabled": True, "scrapers": peers}})
    (policy,) = kind(objs, "NetworkPolicy")
    assert policy["spec"]["ingress"][0]["from"] == peers  # replaces the default whole, no merged labels
    # an empty list must not become `from: []`, which a NetworkPolicy reads as "from everywhere"
    objs = render({"monitor": {"enabled": True}, "networkPolicy": {"enabled": True, "scrapers": [],
                                                                    "apiserverCIDRs": ["10.0.0.10/32"]}})
    policies = {p["metadata"]["name"]: p["spec"] for p in kind(objs, "NetworkPolicy")}
    assert policies["dralab-driver"]["ingress"] == [] and policies["dralab-monitor"]["ingress"] == []
    assert [r["from"] for r in policies["dralab-webhook"]["ingress"]] == [[{"ipBlock": {"cidr": "10.0.0.10/32"}}]]
    for spec in policies.values():
        assert all(rule.get("from") for rule in spec["ingress"])


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"networkPolicy": {"enabled": True}}, "networkPolicy.apiserverCIDRs is empty"),
        ({"monitor": {"enabled": True, "tls": {"enabled": True}},
          "webhook": {"certManager": {"enabled": False}, "tls": {"secretName": "wh", "caBundle": "Y2E="}}},
         "set monitor.tls.secretName"),
        ({"metrics": {"authorization": "no"}}, "authorization"),
        ({"networkPolicy": {"enabled": True, "apiserverCIDRs": ["not-a-cidr"]}}, "apiserverCIDRs"),
    ],
)
def test_bad_values_are_refused_with_the_fix(helm, values: dict[str, Any], message: str) -> None:
    from dralab_kit.provision.chart import chart_dir

    out = run_helm(helm, "template", "dralab", str(chart_dir()), values=values, check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_lint_strict_with_everything_on(helm) -> None:
    from dralab_kit.provision.chart import chart_dir

    values = {**ALL_ON, "monitor": {"enabled": True, "tls": {"enabled": True}, "serviceMonitor": {"enabled": True}},
              "networkPolicy": {"enabled": True, "apiserverCIDRs": ["10.0.0.10/32"]},
              "metrics": {"serviceMonitor": {"enabled": True},
                          "scraperSubjects": [{"kind": "ServiceAccount", "name": "p", "namespace": "m"}]}}
    out = run_helm(helm, "lint", "--strict", str(chart_dir()), values=values, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
