"""Build Go programs (Kubernetes, etcd, KWOK, helm, ...) from wrapper modules shipped with dralab."""

from dralab_kit.gobuild.builder import BuildResult, build_go_tools, cache_root, wrapper_names
from dralab_kit.gobuild.toolchain import MIN_GO, find_go

__all__ = ["MIN_GO", "BuildResult", "build_go_tools", "cache_root", "find_go", "wrapper_names"]
