"""The enforcement contract: what a container must be given so the in-container library enforces its share.

Pure functions, no I/O. A vendor names its profile in the vendor table (``enforcement:``):

- ``hami-vnpu-core`` (Ascend, the HAMivNPUCore contract): ``ASCEND_VISIBLE_DEVICES`` (physical ids),
  ``NPU_MEM_QUOTA`` (MiB), ``NPU_PRIORITY`` (consumed cores; omitted when 0 so the runtime keeps its
  default), ``NPU_GLOBAL_SHM_PATH`` and ``NPU_LOCAL_SHM_PATH``.
- ``hami-core`` (NVIDIA, Hygon; the HAMi-core contract): per device index ``i`` in allocation order
  ``CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m`` and ``CUDA_DEVICE_SM_LIMIT_<i>`` (omitted when 0: HAMi-core
  reads 0 as unlimited anyway, so the absence says "no compute reservation" explicitly), plus
  ``CUDA_DEVICE_MEMORY_SHARED_CACHE``.
- ``none``: no enforcement env.

Consumed capacity of ``None`` means the allocation carried no consumed capacity (an exclusive
allocation): memory is then the whole device and there is no compute reservation.

The container-side paths of each profile are part of the contract too (``layout``): the node driver
mounts host paths there, the enforcement library and the probes read them. A claim's own directory
is private to the claim. What sharers of one device must see in common is a single file per device
(``shared_file`` inside ``shared_dir``), and only profiles whose runtime needs it have one:
``hami-vnpu-core`` coordinates the sharers of an NPU through its global registry; dralab's vcore
keeps all of a claim's accounting in the claim's directory, so ``hami-core`` shares nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dralab.errors import UserError
from dralab.model.quantity import mib

PROFILES = ("hami-vnpu-core", "hami-core", "none")

# Where the enforcement library's directory is mounted in every container, and the preload file.
LIBRARY_DIR = "/usr/local/dralab/lib"
LD_SO_PRELOAD = "/etc/ld.so.preload"


@dataclass(frozen=True)
class DeviceShare:
    """One allocated device of a claim, as the enforcement layer needs it.

    ``memory_bytes``/``cores`` are the consumed capacity (None: not consumable, the whole device).
    """

    index: int
    physical_id: int
    total_memory_bytes: int
    memory_bytes: int | None = None
    cores: int | None = None

    @property
    def memory_mib(self) -> int:
        """The memory quota in MiB: the consumed memory, else the whole device."""
        return mib(self.memory_bytes if self.memory_bytes is not None else self.total_memory_bytes)

    @property
    def reserves_compute(self) -> bool:
        """False when the claim consumed no cores (best effort): no throttling env then."""
        return bool(self.cores)


@dataclass(frozen=True)
class Layout:
    """Container paths of one profile: the claim's own directory, and the per-device file its sharers share.

    ``shared_file`` is a name template with ``{physical_id}``; the file lives in ``shared_dir``.
    """

    claim_dir: str | None
    shared_dir: str | None = None
    shared_file: str | None = None

    def shared_file_name(self, physical_id: int) -> str | None:
        """The name of device ``physical_id``'s shared file (None when the profile shares nothing)."""
        if not (self.shared_dir and self.shared_file):
            return None
        return self.shared_file.format(physical_id=physical_id)

    def shared_path(self, physical_id: int) -> str | None:
        """The container path of device ``physical_id``'s shared file (None when the profile shares nothing)."""
        file_name = self.shared_file_name(physical_id)
        return f"{self.shared_dir}/{file_name}" if file_name else None


_LAYOUTS = {
    "hami-vnpu-core": Layout(
        claim_dir="/hami-vnpu-shmem", shared_dir="/hami-shared-region", shared_file="{physical_id}_global_registry"
    ),
    "hami-core": Layout(claim_dir="/usr/local/vgpu"),
    "none": Layout(claim_dir=None),
}


def _check(profile: str) -> None:
    if profile not in _LAYOUTS:
        raise UserError(
            f"unknown enforcement profile {profile!r}: use one of {', '.join(PROFILES)} in the vendor table"
        )


def layout(profile: str) -> Layout:
    """The container-side directories of ``profile``."""
    _check(profile)
    return _LAYOUTS[profile]


def preload_entry(library_file_name: str) -> str:
    """The line of the container's ``/etc/ld.so.preload``: the library inside the mounted library dir."""
    return f"{LIBRARY_DIR}/{library_file_name}\n"


def enforcement_env(profile: str, shares: Sequence[DeviceShare], claim_uid: str = "") -> dict[str, str]:
    """The environment one claim's containers get, in a deterministic order (insertion order of the dict).

    ``shares`` are in allocation-result order; that order defines the NVIDIA device indexes ``i``.
    """
    _check(profile)
    if not shares or profile == "none":
        return {}
    if profile == "hami-vnpu-core":
        return _vnpu_env(shares)
    return _hami_core_env(shares, claim_uid)


def _vnpu_env(shares: Sequence[DeviceShare]) -> dict[str, str]:
    first = shares[0]
    env = {
        "ASCEND_VISIBLE_DEVICES": ",".join(str(s.physical_id) for s in shares),
        # One quota applies to every visible NPU of the claim: the smallest share, so no device is overrun.
        "NPU_MEM_QUOTA": str(min(s.memory_mib for s in shares)),
    }
    reserved = [s.cores for s in shares if s.reserves_compute]
    if reserved:
        env["NPU_PRIORITY"] = str(min(c for c in reserved if c is not None))
    lay = _LAYOUTS["hami-vnpu-core"]
    env["NPU_GLOBAL_SHM_PATH"] = str(lay.shared_path(first.physical_id))
    env["NPU_LOCAL_SHM_PATH"] = f"{lay.claim_dir}/vnpu_local_shmem"
    return env


def _hami_core_env(shares: Sequence[DeviceShare], claim_uid: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for i, share in enumerate(shares):
        env[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = f"{share.memory_mib}m"
        if share.reserves_compute:
            env[f"CUDA_DEVICE_SM_LIMIT_{i}"] = str(share.cores)
    name = claim_uid or "claim"
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = f"{_LAYOUTS['hami-core'].claim_dir}/{name}.cache"
    return env
