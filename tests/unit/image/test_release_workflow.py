"""The release workflow publishes what the chart installs by default, signed, with an SBOM.

Static checks (no GitHub here); actionlint and the pinning rules run over every workflow in
tests/unit/infra.
"""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
WORKFLOW = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())


def _steps(job: str) -> dict[str, dict]:
    return {s["name"]: s for s in WORKFLOW["jobs"][job]["steps"]}


def test_runs_on_version_tags_only_with_least_privilege() -> None:
    assert WORKFLOW[True] == {"push": {"tags": ["v*"]}}  # yaml reads the key `on` as True
    assert WORKFLOW["permissions"] == {"contents": "read"}
    for job in ("image", "chart"):
        assert WORKFLOW["jobs"][job]["permissions"] == {"contents": "read", "packages": "write", "id-token": "write"}


def test_image_is_multi_arch_from_the_dockerfile_with_sbom_and_signed_by_digest() -> None:
    steps = _steps("image")
    names = steps["Names and version"]["run"]
    assert 'owner="${OWNER,,}"' in names and "image=ghcr.io/$owner/dralab" in names
    assert "pyproject.toml" in names  # the tag must be the source's version
    build = steps["Build and push the image (SBOM and provenance attached)"]["with"]
    assert build["file"] == "Dockerfile" and build["platforms"] == "linux/amd64,linux/arm64"
    assert build["push"] is True and build["sbom"] is True and build["provenance"] == "mode=max"
    assert "${{ steps.names.outputs.image }}:${{ steps.names.outputs.version }}" in build["tags"]
    sign = steps["Sign the image"]
    assert sign["run"] == 'cosign sign --yes "${IMAGE}@${DIGEST}"'
    assert sign["env"]["DIGEST"] == "${{ steps.build.outputs.digest }}"
    assert any(s.get("uses", "").startswith("sigstore/cosign-installer@") for s in steps.values())


def test_chart_is_pushed_as_oci_with_the_images_version_and_signed() -> None:
    assert WORKFLOW["jobs"]["chart"]["needs"] == "image"
    steps = _steps("chart")
    push = steps["Package and push the chart"]["run"]
    assert 'helm package charts/dralab --version "$VERSION" --app-version "$VERSION"' in push
    assert 'helm push "dist/dralab-$VERSION.tgz" "oci://$CHARTS"' in push
    assert steps["Sign the chart"]["run"] == 'cosign sign --yes "${CHARTS}/dralab@${DIGEST}"'
    assert "kit/dralab_kit/provision/tools.py" in steps["The helm version dralab builds for its tests"]["run"]


def test_the_charts_default_image_is_the_published_one() -> None:
    values = yaml.safe_load((REPO / "charts" / "dralab" / "values.yaml").read_text())
    chart = yaml.safe_load((REPO / "charts" / "dralab" / "Chart.yaml").read_text())
    owner = chart["home"].removeprefix("https://github.com/").split("/")[0]
    assert values["image"]["repository"] == f"ghcr.io/{owner}/dralab"
    assert values["image"]["tag"] == ""  # -> appVersion, which the release sets to the tag's version


def test_security_md_says_how_to_verify_this_workflows_signatures() -> None:
    text = (REPO / "SECURITY.md").read_text()
    section = text[text.index("## Verifying a release") :]
    assert r"\.github/workflows/release\.yml@refs/tags/v" in section
    assert "--certificate-oidc-issuer" in section and "https://token.actions.githubusercontent.com" in section
    assert "cosign verify ghcr.io/dralab/charts/dralab" in section and ".SBOM" in section
