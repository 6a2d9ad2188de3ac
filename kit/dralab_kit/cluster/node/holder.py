"""The real node's private mount namespace: set it up, then hold it open until told to stop.

Started as ``unshare --mount --propagation private -- python -m dralab_kit.cluster.node.holder
--root NODE_DIR``; containerd and the kubelet join it with ``nsenter --mount=/proc/<pid>/ns/mnt``.
Inside it, and only there:

- ``/run`` and ``/var/lib`` are fresh tmpfs, so what containerd, runc and libcni write to their
  hard-coded paths (``/run/containerd/s`` shim sockets, ``/run/runc``, ``/var/lib/cni/results``)
  never reaches the host and vanishes with the namespace;
- the kernel settings the kubelet writes (``vm.overcommit_memory``, ``kernel.panic``, ...) are
  files of the node folder bind-mounted over ``/proc/sys/...``, so the host's values stay;
- every container mount (rootfs overlays, network namespace files) lives in this namespace too.

Propagation is private: none of these mounts is seen by the host.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
from pathlib import Path

from dralab_kit.cluster.node.paths import NodePaths

TMPFS_DIRS = ("/run", "/var/lib")
# Written by the kubelet at start unless protectKernelDefaults; each becomes a private file.
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


MS_BIND = 4096
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    """mount(2) itself: the mount tool would write its utab under the host's /run before the tmpfs hides it."""
    rc = _libc.mount(
        source.encode(), target.encode(), fstype.encode() if fstype else None, flags, data.encode() if data else None
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise SystemExit(f"mount {source} on {target} failed: {os.strerror(err)}")


def setup(paths: NodePaths) -> dict[str, str]:
    """Mount the tmpfs folders and the private sysctl files; returns what was mounted where."""
    root = paths.root.resolve()
    for folder in TMPFS_DIRS:
        if root.is_relative_to(folder):
            raise SystemExit(
                f"the node folder {root} is under {folder}, which the node hides; set DRALAB_HOME elsewhere"
            )
    mounted: dict[str, str] = {}
    for folder in TMPFS_DIRS:
        _mount("tmpfs", folder, "tmpfs", 0, "mode=0755,size=256m")
        mounted[folder] = "tmpfs"
    Path("/var/lib/cni").mkdir()
    paths.sysctl_dir.mkdir(parents=True, exist_ok=True)
    for key in SYSCTLS:
        target = Path("/proc/sys") / key
        if not target.exists():
            continue
        private = paths.sysctl_dir / key.replace("/", ".")
        private.write_text(target.read_text())
        _mount(str(private), str(target), None, MS_BIND)
        mounted[str(target)] = str(private)
    return mounted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dralab_kit.cluster.node.holder")
    parser.add_argument("--root", required=True, type=Path, help="the node folder")
    parser.add_argument("--cluster", default="")
    parser.add_argument("--node", default="")
    parser.add_argument("--host-ns", required=True, help="the starter's mount namespace (mnt:[inode])")
    args = parser.parse_args(argv)
    paths = NodePaths(args.cluster, args.node, args.root)
    own = os.readlink("/proc/self/ns/mnt")
    if own == args.host_ns:
        print("refusing to mount: not in a private mount namespace (run under `unshare --mount`)", file=sys.stderr)
        return 2
    mounted = setup(paths)
    stop = {"now": False}

    def on_term(_sig: int, _frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    ready = {"pid": os.getpid(), "mntns": own, "mounts": mounted}
    tmp = paths.ns_ready.with_suffix(".tmp")
    tmp.write_text(json.dumps(ready, indent=2) + "\n")
    os.replace(tmp, paths.ns_ready)
    print(f"private mount namespace {own} ready: {json.dumps(mounted)}", flush=True)
    while not stop["now"]:
        signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
