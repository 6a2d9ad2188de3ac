"""Strict YAML (dralab.yamlio): a key written twice in one mapping is refused with file, line and key,
by every loader of a file type dralab reads; merge keys keep working; every shipped YAML file loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dralab import yamlio
from dralab.config import load_config
from dralab.errors import UserError
from dralab.kube.config import load_kubeconfig
from dralab.model.inventory import load_inventory
from dralab.webhook.cli import convert_documents
from dralab_kit.pulumi.runner import _yaml_load as load_stack_settings
from harness.loader import load_suite
from harness.profile import load_profile
from harness.schema import load_lab

REPO = Path(__file__).resolve().parents[2]


def _refused(path: Path, line: int, key: str) -> str:
    """The message expected for ``key`` repeated at ``line`` of ``path``."""
    return f"{path}:{line}: duplicate key '{key}' in one mapping"


# (file name, text with the key repeated, line of the repetition, key, loader)
FILES = [
    ("lab.yaml",
     "apiVersion: dralab.io/v1alpha1\nkind: Lab\nname: x\nsteps:\n  - id: a\n    evidence: one\n"
     "    evidence: two\n", 7, "evidence", load_lab),
    ("dralab.yaml", "webhook:\n  maxClaimsPerPod: 2\n  lifecycle: claim\n  maxClaimsPerPod: 500\n", 4,
     "maxClaimsPerPod", load_config),
    ("profile.yaml", "name: p\ncluster:\n  source: kubeconfig\n  source: local\n", 4, "source", load_profile),
    ("inventory.yaml", "nodes:\n  - name: n1\n    arch: arm64\n    name: n2\n", 4, "name", load_inventory),
    ("hami.yaml", "nvidia:\n  resourceCountName: a/gpu\nhygon: {}\nnvidia:\n  resourceCountName: b/gpu\n", 4,
     "nvidia", lambda p: load_config(None, p)),
    ("Pulumi.local.yaml", "config:\n  dralab:profile: local\n  dralab:profile: baremetal\n", 3, "dralab:profile",
     load_stack_settings),
    ("labs.yaml", "apiVersion: dralab.io/v1alpha1\nkind: LabSuite\nkind: LabSuite\nlabs: [x]\n", 3, "kind",
     load_suite),
    ("kubeconfig", "apiVersion: v1\nclusters: []\ncurrent-context: a\ncurrent-context: b\n", 4, "current-context",
     load_kubeconfig),
]


@pytest.mark.parametrize(("name", "text", "line", "key", "loader"), FILES, ids=[f[0] for f in FILES])
def test_each_file_type_refuses_a_repeated_key(tmp_path: Path, name: str, text: str, line: int, key: str,
                                               loader) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserError) as info:
        loader(path)
    message = str(info.value)
    assert message.startswith(_refused(path, line, key)), message
    assert message.endswith("remove or rename one of them")


def test_hami_configmap_names_the_embedded_config(tmp_path: Path) -> None:
    path = tmp_path / "hami-cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\ndata:\n  device-config.yaml: |\n"
                    "    nvidia: {resourceCountName: a/gpu}\n    nvidia: {resourceCountName: b/gpu}\n")
    with pytest.raises(UserError, match=r"hami-cm\.yaml:data\.device-config\.yaml:2: duplicate key 'nvidia'"):
        load_config(None, path)


def test_pods_given_to_dralab_convert_are_strict() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: []\n---\n" \
           "apiVersion: v1\nkind: Pod\nmetadata:\n  name: q\n  name: r\n"
    # the line counts in the whole stream, across documents
    with pytest.raises(UserError, match=r"^pods\.yaml:11: duplicate key 'name'"):
        convert_documents(text, None, None, "pods.yaml")


def test_message_gives_both_lines_and_the_fix() -> None:
    with pytest.raises(yamlio.DuplicateKeyError) as info:
        yamlio.load("a: 1\nb:\n  c: 2\n  d: 3\n  c: 4\n", "x.yaml")
    err = info.value
    assert (err.source, err.line, err.key, err.first_line) == ("x.yaml", 5, "c", 3)
    assert str(err) == "x.yaml:5: duplicate key 'c' in one mapping (first at line 3): remove or rename one of them"


def test_flow_mappings_and_non_string_keys() -> None:
    with pytest.raises(yamlio.DuplicateKeyError, match="duplicate key 1"):
        yamlio.load("{1: a, 2: b, 1: c}\n", "f.yaml")
    assert yamlio.load("{a: {x: 1}, b: {x: 1}}\n", "f.yaml") == {"a": {"x": 1}, "b": {"x": 1}}  # other mappings


def test_merge_keys_keep_working() -> None:
    text = (
        "base: &base {lifecycle: claim, maxClaimsPerPod: 4}\n"
        "more: &more {claimCreateBurst: 10}\n"
        "webhook:\n  <<: [*base, *more]\n  maxClaimsPerPod: 8\n"  # a merged key overridden here: allowed
    )
    doc = yamlio.load(text, "merge.yaml")
    assert doc["webhook"] == {"lifecycle": "claim", "maxClaimsPerPod": 8, "claimCreateBurst": 10}
    assert doc == yaml.safe_load(text)
    with pytest.raises(yamlio.DuplicateKeyError, match=r"merge\.yaml:3: duplicate key 'x'"):
        yamlio.load("base: &b\n  x: 1\n  x: 2\nuse:\n  <<: *b\n", "merge.yaml")


def test_everything_else_is_safe_load() -> None:
    text = "a: [1, 2.5, true, null, '3']\nb: !!str 4\n---\nc: 1\n"
    assert yamlio.load_all(text, "s.yaml") == list(yaml.safe_load_all(text))
    with pytest.raises(yaml.YAMLError):
        yamlio.load("a: !!python/object:os.system {}\n", "s.yaml")  # no arbitrary objects
    with pytest.raises(yaml.YAMLError):
        yamlio.load("a: [\n", "s.yaml")


def shipped_yaml() -> list[Path]:
    """Every YAML file the repository ships (Helm templates are Go templates, not YAML: left out)."""
    patterns = ["kit/labs/**/*.yaml", "kit/labs/**/*.yml", "kit/harness/profiles/**/*.yaml", "dralab/**/*.yaml",
                "dralab/**/*.yml", "kit/dralab_kit/**/*.yaml", "kit/dralab_kit/**/*.yml", "infra/*.yaml",
                "tests/e2e/*.yaml", "playbooks/**/*.yml", "playbooks/**/*.yaml",
                "charts/dralab/values.yaml", "charts/dralab/Chart.yaml"]
    return sorted({p for pattern in patterns for p in REPO.glob(pattern) if p.is_file()})


def test_every_shipped_yaml_file_loads_strictly() -> None:
    files = shipped_yaml()
    assert len(files) > 40, files  # the globs still find the repository's files
    assert REPO / "kit" / "labs" / "preempt-sharers" / "lab.yaml" in files
    for path in files:
        yamlio.load_all(path.read_text(), str(path.relative_to(REPO)))


# Loaders that stay lenient, each with why: files dralab wrote itself, or code owned elsewhere.
LENIENT = {
    "dralab/yamlio.py": "the strict loader itself",
    "kit/dralab_kit/bench/concurrency.py": "the scheduler config the local cluster wrote",
    "kit/dralab_kit/bench/admission.py": "the local cluster's own kubeconfig",
    "kit/harness/cdi.py": "CDI specs the driver wrote (a torn file is skipped, as the runtime does)",
    "dralab/driver/cdi.py": "the driver's own CDI specs",
    "dralab/driver/state.py": "driver code (claim preview input): to move to dralab.yamlio by its owners",
    "dralab/driver/devices/nvidia.py": "the NVIDIA toolkit's CDI specs, skipped when unreadable",
}


def test_no_other_lenient_yaml_loader() -> None:
    """A new ``yaml.safe_load`` would bring back silent last-value-wins: use dralab.yamlio instead."""
    found = set()
    for folder in ("dralab", "kit", "infra"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text()
            if "yaml.safe_load" in text or "yaml.load(" in text or "yaml.load_all(" in text:
                found.add(str(path.relative_to(REPO)))
    unexpected = found - set(LENIENT)
    assert not unexpected, f"load YAML with dralab.yamlio.load/load_all/load_file (strict), not yaml: {unexpected}"
