"""`dralab convert`: Lab 20 Step 5 field by field, multi-document output, one-line refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dralab.errors import UserError
from dralab.webhook.cli import convert_documents

FIXTURE = Path(__file__).parent / "fixtures" / "lab20-pod.yaml"
CLAIM = "dra-ascend-e2e-ascend-share-a-app-ascend310p"


def test_lab20_step5_field_by_field() -> None:
    pod, claim = yaml.safe_load_all(convert_documents(FIXTURE.read_text(), None, None))
    # the mutated Pod
    assert pod["metadata"]["name"] == "ascend-share-a" and pod["metadata"]["namespace"] == "dra-ascend-e2e"
    assert pod["metadata"]["labels"] == {"hami.io/webhook": "ignore", "hami.io/dra": "true"}
    assert pod["metadata"]["annotations"] == {
        "hami.io/use-Ascend310P-uuid": "68496E64-20E05477-92C31323-6E78030A-BD003019"
    }
    assert pod["spec"]["runtimeClassName"] == "ascend"
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == {"claims": [{"name": CLAIM}]}
    assert pod["spec"]["resourceClaims"] == [{"name": CLAIM, "resourceClaimName": CLAIM}]
    # the ResourceClaim
    assert claim["apiVersion"] == "resource.k8s.io/v1" and claim["kind"] == "ResourceClaim"
    assert claim["metadata"]["name"] == CLAIM and claim["metadata"]["namespace"] == "dra-ascend-e2e"
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["name"] == "npu"
    exactly = request["exactly"]
    assert exactly["allocationMode"] == "ExactCount"
    assert exactly["count"] == 1
    assert exactly["deviceClassName"] == "hami-vnpu-core.project-hami.io"
    assert exactly["capacity"] == {"requests": {"cores": "50", "memory": "8589934592"}}
    assert exactly["selectors"] == [
        {
            "cel": {
                "expression": 'device.driver == "ascend.project-hami.io" && '
                'device.attributes["ascend.project-hami.io"].type == "HAMivNPUCore"'
            }
        },
        {
            "cel": {
                "expression": 'device.attributes["ascend.project-hami.io"].uuid in '
                '["68496E64-20E05477-92C31323-6E78030A-BD003019"]'
            }
        },
    ]


def test_several_pods_and_default_namespace() -> None:
    text = FIXTURE.read_text().replace("  namespace: dra-ascend-e2e\n", "")
    text = text + "---\n" + text.replace("ascend-share-a", "ascend-ctrl-b").replace('"8192"', "14000")
    docs = list(yaml.safe_load_all(convert_documents(text, None, None)))
    assert [d["kind"] for d in docs] == ["Pod", "ResourceClaim", "Pod", "ResourceClaim"]
    assert docs[1]["metadata"]["name"] == "default-ascend-share-a-app-ascend310p"
    assert docs[3]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["memory"] == str(
        14000 * 1024 * 1024
    )
    team = list(yaml.safe_load_all(convert_documents(text, "team-a", None)))
    assert team[1]["metadata"]["name"] == "team-a-ascend-share-a-app-ascend310p"


def test_template_lifecycle_from_config(tmp_path: Path) -> None:
    cfg = tmp_path / "dralab.yaml"
    cfg.write_text("webhook:\n  lifecycle: template\n")
    pod, template = yaml.safe_load_all(convert_documents(FIXTURE.read_text(), None, str(cfg)))
    assert template["kind"] == "ResourceClaimTemplate"
    assert pod["spec"]["resourceClaims"] == [
        {"name": "app-ascend310p", "resourceClaimTemplateName": template["metadata"]["name"]}
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Service\nmetadata: {name: s}\n", "document 1 is a Service, not a Pod"),
        ("a: [", "not valid YAML"),
        ("", "no Pod documents"),
    ],
)
def test_bad_documents(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        convert_documents(text, None, None)


def test_conflicting_namespace_flag() -> None:
    with pytest.raises(UserError, match="drop one of them"):
        convert_documents(FIXTURE.read_text(), "other", None)


def test_cli_invalid_input_is_one_line_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(FIXTURE.read_text().replace('"50"', '"150"'))
    proc = subprocess.run(
        [sys.executable, "-m", "dralab.cli", "convert", "-f", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "spec.containers[0].resources.limits[huawei.com/Ascend310P-core]" in proc.stderr


def test_cli_prints_multi_document_yaml() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dralab.cli", "convert", "-f", "-"],
        input=FIXTURE.read_text(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert [d["kind"] for d in yaml.safe_load_all(proc.stdout)] == ["Pod", "ResourceClaim"]
