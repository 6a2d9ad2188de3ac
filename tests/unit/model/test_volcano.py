"""Volcano Jobs: each task template gets ResourceClaimTemplates with the pod rules, denials and names."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dralab.model.convert import Converter
from dralab.model.denials import Denied
from dralab.model.jsonpatch import apply as apply_patch
from dralab.model.vendors import load_vendor_table
from dralab.model.volcano import convert_job, crd, is_job, leftovers, template_converter
from dralab.webhook.cli import convert_documents

JOB = Path(__file__).parents[1] / "webhook" / "fixtures" / "volcano-job.yaml"
TABLE = load_vendor_table()


def _job() -> dict:
    return yaml.safe_load(JOB.read_text())


def test_each_task_gets_templates_and_claims() -> None:
    conv = convert_job(_job(), template_converter(TABLE))
    assert conv.tasks == ["master", "worker"]
    tasks = conv.job["spec"]["tasks"]
    for task in tasks[:2]:
        spec = task["template"]["spec"]
        (container,) = spec["containers"]
        assert container["resources"] == {"claims": [{"name": "main-ascend310p"}]}
        (ref,) = spec["resourceClaims"]
        assert ref["name"] == "main-ascend310p" and ref["resourceClaimTemplateName"].startswith("dralab-ascend310p-")
        assert task["template"]["metadata"]["labels"]["hami.io/dra"] == "true"
        assert "name" not in task["template"]["metadata"]
    assert tasks[0]["template"]["metadata"]["labels"]["role"] == "master"
    assert tasks[2] == _job()["spec"]["tasks"][2]  # no HAMi resources: untouched
    # equal requests share one content-named template, exactly as for pods
    (template,) = conv.objects
    assert template["kind"] == "ResourceClaimTemplate" and template["metadata"]["namespace"] == "team-a"
    request = template["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"]["capacity"]["requests"] == {"cores": "25", "memory": str(4096 * 2**20)}


def test_same_template_names_as_pods() -> None:
    job = _job()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "team-a"},
           "spec": job["spec"]["tasks"][1]["template"]["spec"]}
    pod_conv = Converter(TABLE, "template").convert(pod)
    job_conv = convert_job(job, template_converter(TABLE))
    assert job_conv.objects[0]["metadata"]["name"] == pod_conv.objects[0]["metadata"]["name"]


def test_patch_turns_the_original_into_the_converted_job() -> None:
    conv = convert_job(_job(), template_converter(TABLE))
    assert apply_patch(_job(), conv.patch) == conv.job


def test_denials_name_the_task_field() -> None:
    job = _job()
    limits = job["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"]["limits"]
    limits["huawei.com/Ascend310P-core"] = "150"
    with pytest.raises(Denied) as exc:
        convert_job(job, template_converter(TABLE))
    assert exc.value.field == "spec.tasks[1].template.spec.containers[0].resources.limits[huawei.com/Ascend310P-core]"


def test_memory_without_count_is_denied() -> None:
    job = _job()
    del job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend310P"]
    with pytest.raises(Denied, match="needs the device count"):
        convert_job(job, template_converter(TABLE))


def test_opted_out_job_is_left_alone() -> None:
    job = _job()
    job["metadata"]["labels"] = {"dralab.io/convert": "false"}
    assert convert_job(job, template_converter(TABLE)).changed is False


def test_claim_lifecycle_converter_is_refused() -> None:
    with pytest.raises(ValueError, match="template"):
        convert_job(_job(), Converter(TABLE, "claim"))


def test_leftovers_before_and_after() -> None:
    conv = convert_job(_job(), template_converter(TABLE))
    assert len(leftovers(_job(), template_converter(TABLE))) == 6
    assert leftovers(conv.job, template_converter(TABLE)) == []


def test_is_job_and_crd() -> None:
    assert is_job(_job()) and not is_job({"apiVersion": "batch/v1", "kind": "Job"})
    definition = crd()
    assert definition["metadata"]["name"] == "jobs.batch.volcano.sh"
    assert definition["spec"]["versions"][0]["name"] == "v1alpha1"


def test_convert_cli_previews_a_job(tmp_path: Path) -> None:
    # as the webhook: a Job is converted only where the webhook is registered for Jobs
    (unchanged,) = yaml.safe_load_all(convert_documents(JOB.read_text(), None, None, str(JOB)))
    assert unchanged == yaml.safe_load(JOB.read_text())
    cfg = tmp_path / "dralab.yaml"
    cfg.write_text("migration:\n  volcanoJobs: true\n")
    docs = list(yaml.safe_load_all(convert_documents(JOB.read_text(), None, str(cfg), str(JOB))))
    assert [d["kind"] for d in docs] == ["Job", "ResourceClaimTemplate"]
    assert docs[0]["spec"]["tasks"][0]["template"]["spec"]["resourceClaims"][0]["name"] == "main-ascend310p"
