"""Volcano Jobs (``batch.volcano.sh/v1alpha1`` Job) in HAMi syntax to DRA, as a pure function.

A Volcano Job's pods are created later by the Volcano controller, many per task, so each task's
pod template gets ResourceClaimTemplates (one claim per pod, owned by it) instead of named claims.
Every task template is converted by the same :class:`~dralab.model.convert.Converter` as a pod (in
``template`` lifecycle): same resources, defaults, selectors, denials and template names.
Also here: the minimal Job CRD the local cluster installs so the apiserver serves Jobs without Volcano.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dralab.model.convert import Converter
from dralab.model.denials import Denied, check_type
from dralab.model.jsonpatch import copy_json, diff
from dralab.model.vendors import VendorTable

GROUP = "batch.volcano.sh"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Job"


def is_job(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("kind") == KIND and str(obj.get("apiVersion", "")).startswith(f"{GROUP}/")


@dataclass
class JobConversion:
    """The converted Job, its patch, and the ResourceClaimTemplates its tasks reference."""

    original: dict[str, Any]
    job: dict[str, Any]
    namespace: str
    tasks: list[str] = field(default_factory=list)  # names of the tasks that were converted
    objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.tasks)

    @property
    def patch(self) -> list[dict[str, Any]]:
        return diff(self.original, self.job)


def template_converter(table: VendorTable, opt_out_label: str = "dralab.io/convert") -> Converter:
    """The converter for task templates: ``template`` lifecycle whatever the webhook's pod lifecycle."""
    return Converter(table, "template", opt_out_label)


def convert_job(
    job: dict[str, Any], converter: Converter, *, namespace: str | None = None, request_uid: str | None = None
) -> JobConversion:
    """Convert every task of ``job``; :class:`Denied` names the task field (``spec.tasks[i].template...``)."""
    if converter.lifecycle != "template":
        raise ValueError("Volcano Jobs are converted with a template-lifecycle converter")
    if not is_job(job):
        raise Denied("kind", f"expected a {API_VERSION} Job")
    meta = check_type(job, "metadata", dict, "metadata") or {}
    ns = namespace or meta.get("namespace") or "default"
    out = JobConversion(original=job, job=job, namespace=ns)
    if converter.opted_out(job):
        return out
    spec = check_type(job, "spec", dict, "spec") or {}
    tasks = check_type(spec, "tasks", list, "spec.tasks") or []
    job_name = meta.get("name") or meta.get("generateName") or "job"
    mutated = copy_json(job)
    templates: dict[str, dict[str, Any]] = {}
    for index, task in enumerate(tasks):
        where = f"spec.tasks[{index}]"
        if not isinstance(task, dict):
            raise Denied(where, "must be an object")
        template = check_type(task, "template", dict, f"{where}.template") or {}
        task_name = task.get("name") or str(index)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**(template.get("metadata") or {}), "name": f"{job_name}-{task_name}", "namespace": ns},
            "spec": template.get("spec") or {},
        }
        try:
            conv = converter.convert(pod, namespace=ns, request_uid=request_uid)
        except Denied as exc:
            raise Denied(f"{where}.template.{exc.field}", exc.problem) from None
        if not conv.changed:
            continue
        new_meta = {k: v for k, v in conv.pod["metadata"].items() if k not in ("name", "namespace")}
        mutated["spec"]["tasks"][index]["template"] = {**template, "metadata": new_meta, "spec": conv.pod["spec"]}
        out.tasks.append(task_name)
        for obj in conv.objects:
            templates.setdefault(obj["metadata"]["name"], obj)
    out.job = mutated
    out.objects = list(templates.values())
    return out


def leftovers(job: dict[str, Any], converter: Converter) -> list[str]:
    """Task fields that still carry HAMi resources (what a validating check would refuse)."""
    found = []
    for index, task in enumerate(((job.get("spec") or {}).get("tasks")) or []):
        template = (task or {}).get("template") or {}
        pod = {"kind": "Pod", "metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}}
        found += [f"spec.tasks[{index}].template.{f}" for f in converter.leftovers(pod)]
    return found


def crd() -> dict[str, Any]:
    """A minimal CustomResourceDefinition for Volcano's Job: enough for the apiserver to store and admit Jobs.

    Written by this project (no Volcano controller runs): the schema pins nothing below ``spec`` and
    ``status`` so task templates keep every field, which is all the admission path needs.
    """
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"jobs.{GROUP}", "labels": {"app.kubernetes.io/managed-by": "dralab"}},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": "JobList", "plural": "jobs", "singular": "job",
                      "shortNames": ["vcjob", "vj"]},
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": open_object,
                        "status": open_object,
                    },
                }},
            }],
        },
    }
