"""The driver campaign: NodePrepareResources then NodeUnprepareResources (v1 and v1beta1) with
malformed claims, against a real ``DriverProcess`` over its unix sockets inside a :class:`Sandbox`.

Claims carry wrong uids, missing or junk allocations, unknown devices and pools, junk consumed
capacity and path-like uids. The contract: the call never fails as a whole, every requested claim
gets an answer, a claim is either prepared (spec on disk, devices reported) or has an error, and
nothing is written or removed outside the claim's own files.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dralab_kit.fixtures.sandbox import Sandbox
from dralab_kit.fuzz.findings import Findings, run_cases
from dralab_kit.fuzz.strategies import driver_case

SENTINEL_UID = "5e471ne1-0000-4000-8000-000000000001"


class FuzzClaims:
    """A claim source that answers with whatever the current case put there."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], Any] = {}

    def get_claim(self, namespace: str, name: str) -> Any:
        return copy.deepcopy(self.claims.get((namespace, name)))


@contextlib.contextmanager
def driver_under_test() -> Iterator[tuple[Any, FuzzClaims, Path, Sandbox]]:
    """A real driver (in-process, fake backend, Lab 20's node) in a fresh folder it cannot write outside of."""
    from dralab.driver.library import stub_library
    from dralab.driver.runner import DriverProcess, RunOptions
    from dralab_kit.fixtures.driver_claims import NODE

    root = Path(tempfile.mkdtemp(prefix="dfz", dir="/tmp"))
    try:
        with Sandbox(root) as box:
            lib = root / "lib" / "libvcore.so"
            lib.parent.mkdir()
            lib.write_bytes(stub_library())  # an ELF header the driver accepts
            source = FuzzClaims()
            opts = RunOptions(node=NODE, backend="fake", plugin_dir=str(root / "p"), registry_dir=str(root / "r"),
                              cdi_dir=str(root / "cdi"), state_dir=str(root / "s"), enforcement_library=str(lib),
                              publish=False)
            proc = DriverProcess(opts, claims=source).start()
            try:
                yield proc, source, root, box
            finally:
                proc.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def tree(root: Path) -> set[str]:
    """Every path under ``root``, relative (what the driver may and may not touch)."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def check_driver_tree(before: set[str], after: set[str], allowed: Callable[[str], bool]) -> list[tuple[str, Any]]:
    """Paths that appeared outside the driver's per-claim files, or host files that vanished (pure)."""
    out: list[tuple[str, Any]] = []
    appeared = sorted(p for p in after - before if not allowed(p))
    vanished = sorted(p for p in before - after if not allowed(p))
    if appeared:
        out.append(("file_outside_claim_files", appeared[:5]))
    if vanished:
        out.append(("host_file_removed", vanished[:5]))
    return out


class DriverTarget:
    """A driver under test with one sentinel claim prepared; rebuilt from scratch after a case damaged it."""

    def __init__(self) -> None:
        self._cm: Any = None
        self.start()

    def start(self) -> None:
        import grpc

        from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
        from dralab_kit.fixtures.driver_claims import lab20_claim

        self._cm = driver_under_test()
        self.proc, self.source, self.root, self.box = self._cm.__enter__()
        self.state = self.proc.served[0].state
        self.channel = grpc.insecure_channel(f"unix://{self.proc.served[0].server.paths.dra}")
        self.stubs = {False: (dra_v1_pb2, dra_v1_pb2_grpc.DRAPluginStub(self.channel)),
                      True: (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc.DRAPluginStub(self.channel))}
        self.sentinel = lab20_claim(uid=SENTINEL_UID, name="sentinel", namespace="keep")
        self.source.claims = {("keep", "sentinel"): self.sentinel}
        pb, stub = self.stubs[False]
        stub.NodePrepareResources(pb.NodePrepareResourcesRequest(
            claims=[pb.Claim(namespace="keep", name="sentinel", uid=SENTINEL_UID)]), timeout=30)
        self.sentinel_files = [self.spec(SENTINEL_UID), self.state.claim_dir(SENTINEL_UID)]
        self.before = tree(self.root)

    def stop(self) -> None:
        self.channel.close()
        self._cm.__exit__(None, None, None)

    def restart(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        self.start()

    def spec(self, uid: str) -> Path:
        return self.root / "cdi" / f"k8s.{self.state.driver}-{self.state.cdi_class}_{uid}.yaml"

    def allowed(self, rel: str) -> bool:
        """Paths a case may create or remove: its claims' files, the checkpoint, the fake device nodes."""
        drv = self.state.driver
        return (
            rel.startswith((f"s/{drv}/claims/", f"s/{drv}/.spare/"))  # .spare: claim folders made ahead
            or rel == f"s/{drv}/claims"
            or bool(re.fullmatch(re.escape(f"cdi/k8s.{drv}-{self.state.cdi_class}_") + r"[0-9A-Za-z-]+\.yaml", rel))
            or rel.startswith((f"s/{drv}/checkpoint", f"s/{drv}/.checkpoint", "cdi/.k8s.", "s/dev"))
        )


def check_driver_case(t: DriverTarget, case: Any, found: Findings) -> bool:
    """One case through Prepare then Unprepare; False when the target must be rebuilt."""
    import grpc

    pb, stub = t.stubs[case["beta"]]
    t.source.claims = {(c["ns"], c["name"]): c["doc"] for c in case["claims"] if c["known"]}
    t.source.claims[("keep", "sentinel")] = t.sentinel
    req = [pb.Claim(namespace=c["ns"], name=c["name"], uid=c["uid"]) for c in case["claims"]]
    try:
        resp = stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=req), timeout=30)
    except grpc.RpcError as exc:
        found.seen("prepare rpc error")
        found.problem(f"prepare_rpc_{_code(exc)}", {"details": _details(exc), "case": case})
        return True
    outcome = set()
    uids = [c["uid"] for c in case["claims"]]
    for c in case["claims"]:
        entry = resp.claims.get(c["uid"])
        if entry is None:
            found.problem("claim_without_answer", case)
            continue
        outcome.add("error" if entry.error else "prepared")
        if not entry.error and entry.devices and not t.spec(c["uid"]).is_file():
            found.problem("prepared_without_spec", case)
        served = t.source.claims.get((c["ns"], c["name"]))
        if not entry.error and not entry.devices and uids.count(c["uid"]) == 1 and c["known"] \
                and served is c["doc"] and _own_results(served, t.state.driver):
            found.problem("prepared_without_devices", case)
    found.seen("prepare " + ("+".join(sorted(outcome)) or "empty"))
    unprep = req + [pb.Claim(namespace=n, name=m, uid=u) for n, m, u in case["extra_unprepare"]]
    try:
        uresp = stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(claims=unprep), timeout=30)
    except grpc.RpcError as exc:
        found.problem(f"unprepare_rpc_{_code(exc)}", {"details": _details(exc), "case": case})
        return True
    if any(c.uid not in uresp.claims for c in unprep):
        found.problem("unprepare_claim_without_answer", case)
    healthy = True
    if t.box.blocked:
        found.problem("write_outside_driver_folders", {"blocked": t.box.blocked[:3],
                                                       "unprepare_uids": [c.uid for c in unprep]})
        t.box.blocked.clear()
        healthy = False
    gone = [str(p.relative_to(t.root)) for p in t.sentinel_files if not p.exists()]
    if gone:
        found.problem("other_claims_files_removed", {"paths": gone, "unprepare_uids": [c.uid for c in unprep]})
        healthy = False
    for kind, paths in check_driver_tree(t.before, tree(t.root), t.allowed):
        found.problem(kind, {"paths": paths, "unprepare_uids": [c.uid for c in unprep]})
        healthy = False
    try:
        stub.NodePrepareResources(pb.NodePrepareResourcesRequest(), timeout=10)
    except grpc.RpcError as exc:
        found.problem(f"dead_after_case_{_code(exc)}", case)
        healthy = False
    return healthy


def fuzz_driver(cases: int, seed: int | None = None, typed: bool = True) -> dict[str, Any]:
    """Malformed claims through NodePrepareResources then NodeUnprepareResources (v1 and v1beta1)."""
    found = Findings()
    started = time.monotonic()
    target = DriverTarget()
    rebuilt = 0

    def check(case: Any) -> None:
        nonlocal rebuilt
        if not check_driver_case(target, case, found):
            rebuilt += 1
            target.restart()

    logging.disable(logging.WARNING)  # the driver logs every refused claim; the findings say it all
    try:
        run_cases(driver_case(typed), cases, check, seed)
    finally:
        target.stop()
        logging.disable(logging.NOTSET)
    out = found.as_dict()
    out["driver_rebuilt_after_damage"] = rebuilt
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def _details(exc: Exception) -> str:
    details = getattr(exc, "details", None)
    return str(details() if callable(details) else exc)[:300]


def _code(exc: Exception) -> str:
    code = getattr(exc, "code", None)
    return code().name if callable(code) else type(exc).__name__


def _own_results(doc: Any, driver: str) -> bool:
    try:
        results = doc["status"]["allocation"]["devices"]["results"]
        return any(isinstance(r, dict) and r.get("driver") == driver for r in results)
    except (KeyError, TypeError):
        return False
