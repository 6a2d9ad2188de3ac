"""``dralab lab``: list, run with progress and a report path, exit codes, one-line user errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dralab.cli import main


def _memory_lab(tmp_path: Path, ok: bool) -> tuple[Path, Path]:
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": "default"}}))  # fmt: skip
    profile = tmp_path / "memory.yaml"
    profile.write_text(yaml.safe_dump({"name": "memory", "cluster": {"source": "memory", "objects": "objects.yaml"}}))
    lab = tmp_path / "small"
    lab.mkdir()
    match = {"metadata": {"name": "default" if ok else "other"}}
    doc = {"apiVersion": "dralab.io/v1alpha1", "kind": "Lab", "name": "small", "steps": [
        {"id": "check", "try": [{"assert": {"resource": "Namespace/default", "match": match}, "timeout": 0.1}]},
        {"id": "after", "try": [{"events": {}}]}]}  # fmt: skip
    (lab / "lab.yaml").write_text(yaml.safe_dump(doc))
    return lab, profile


class _Proc:
    def __init__(self, returncode: int, stdout: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, ""


def _cli(*args: str, cwd: Path) -> _Proc:
    """Run ``dralab <args>`` in this process (a new interpreter would only add start-up time)."""
    from click.testing import CliRunner

    from harness.cli import lab

    assert args[0] == "lab"
    result = CliRunner().invoke(lab, [a if a != "out" else str(cwd / "out") for a in args[1:]])
    return _Proc(result.exit_code, result.output)


def test_run_passes_prints_progress_and_the_report(tmp_path: Path) -> None:
    lab, profile = _memory_lab(tmp_path, ok=True)
    proc = _cli("lab", "run", str(lab), "--profile", str(profile), "--reports-dir", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✓ 01-check" in proc.stdout and "2 passed, 0 partial, 0 failed, 0 skipped" in proc.stdout
    report = next((tmp_path / "out").glob("*-small-*/report.md"))
    assert f"report: {report}" in proc.stdout.replace("\n", "")


def test_run_fails_with_exit_1_and_says_why(tmp_path: Path) -> None:
    lab, profile = _memory_lab(tmp_path, ok=False)
    proc = _cli("lab", "run", str(lab), "--profile", str(profile), "--reports-dir", "out", cwd=tmp_path)
    assert proc.returncode == 1
    assert "✗ 01-check" in proc.stdout
    assert 'metadata.name: expected "other", got "default"' in proc.stdout
    assert "02-after skipped: step 'check' failed earlier" in proc.stdout
    assert (tmp_path / "out" / "latest" / "report.html").is_file()


def test_unknown_lab_and_profile_are_one_line_errors(tmp_path: Path, capsys) -> None:
    import pytest

    with pytest.raises(SystemExit) as exc:
        main(["lab", "run", "no-such-lab"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no lab 'no-such-lab'") and "lab20-ascend-hami-dra" in err
    assert "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        main(["lab", "run", "lab20-ascend-hami-dra", "--profile", "nope"])
    assert exc.value.code == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err


def test_list_shows_the_shipped_labs(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["lab", "list"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "lab20-ascend-hami-dra" in out and "nvidia-gpu-share" in out
