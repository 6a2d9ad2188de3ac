"""Whether the enforcement library can enforce a claim on this node: pure checks and the decision.

Fail closed. A claim whose vendor profile enforces (``enforcement:`` in the vendor table is not
``none``) is prepared only with a library the node can load: missing, unreadable, not an ELF shared
object, or an ELF built for another machine, and the claim is refused (with the path and the fix),
the driver reports not ready, and a refusal is counted. Prepared without a loadable library the
container would run with the whole device and nothing would say so (``ld.so`` only prints a line
and skips an ``/etc/ld.so.preload`` entry it cannot load). Running without enforcement is a choice
an operator makes by name: the driver's ``enforcement: none`` (config key, ``--enforcement``, chart
value ``driver.enforcement``).

Why a module of its own, with no I/O: the same decision is made in three places (Prepare, the
readiness probe, the offline ``dralab driver cdi``), and each failure mode must be testable with
plain bytes. A library for another machine need not be built, and an unreadable file cannot be
made by ``chmod 000`` when the tests run as root. The driver reads the file's first bytes
(``dralab.driver.state.read_library_head``, injectable) and hands them, or the error, here.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

from dralab.errors import UserError

REQUIRED = "required"
NONE = "none"
MODES = (REQUIRED, NONE)

HEAD_BYTES = 64  # an ELF64 header
ELF_MAGIC = b"\x7fELF"
ELFCLASS64 = 2
ELFDATA2LSB = 1
ET_DYN = 3  # a shared object
EM_X86_64 = 62
EM_AARCH64 = 183

# The node's architecture (``uname -m``) -> the e_machine a library it can preload must carry.
NODE_MACHINES = {"x86_64": EM_X86_64, "amd64": EM_X86_64, "aarch64": EM_AARCH64, "arm64": EM_AARCH64}
# e_machine -> a name, for messages (any other number is shown as the number).
MACHINE_NAMES = {
    3: "i386",
    8: "mips",
    20: "ppc",
    21: "ppc64",
    22: "s390",
    40: "arm",
    EM_X86_64: "x86_64",
    EM_AARCH64: "aarch64",
    243: "riscv",
    258: "loongarch",
}
_TYPES = {0: "untyped", 1: "relocatable object", 2: "executable", 4: "core dump"}

# Decisions
ENFORCE = "enforce"  # mount the library and the preload file
SKIP = "skip"  # no library: the profile enforces nothing, or the operator chose enforcement: none
REFUSE = "refuse"  # fail the claim


@dataclass(frozen=True)
class LibraryStatus:
    """What the check found: ``reason`` is '' when the library is usable, else a short code (a metric label)."""

    path: str
    reason: str = ""
    problem: str = ""  # how the library is unusable, completing "enforcement library <path> ..."

    @property
    def usable(self) -> bool:
        return not self.reason

    def refusal(self, profile: str = "") -> str:
        """The error a refused claim gets (the kubelet shows it as the pod's event): the path and the fix."""
        needs = f", and claims of vendor profile {profile} need it" if profile else ""
        return (
            f"enforcement library {self.path} {self.problem}{needs}: the driver's init container installs it "
            "(see its logs), or set driver.enforcementLibrary to where it is; "
            "to run without enforcement set driver.enforcement: none"
        )


def node_machine() -> str:
    """This node's architecture as ``uname -m`` names it."""
    return platform.machine()


def check_mode(value: str | None, source: str = "driver.enforcement") -> str:
    """The enforcement mode (``required`` when unset); a UserError naming ``source`` for anything else."""
    if value in (None, ""):
        return REQUIRED
    if value not in MODES:
        raise UserError(f"{source} must be 'required' or 'none', got {value!r}")
    return str(value)


def missing(path: str) -> LibraryStatus:
    return LibraryStatus(path, "missing", "is missing")


def unreadable(path: str, error: OSError) -> LibraryStatus:
    """A library the driver cannot read (a directory, no permission, an I/O error)."""
    why = error.strerror or type(error).__name__
    return LibraryStatus(path, "unreadable", f"cannot be read ({why})")


def check_head(path: str, head: bytes, machine: str) -> LibraryStatus:
    """Whether ``head`` (the file's first bytes) is an ELF shared object that ``machine`` can load."""
    if head[:4] != ELF_MAGIC:
        if not head:
            return LibraryStatus(path, "not_elf", "is empty, not an ELF shared library")
        return LibraryStatus(path, "not_elf", f"is not an ELF file (it starts with {head[:4].hex(' ')})")
    if len(head) < 20:
        return LibraryStatus(path, "not_elf", f"is a truncated ELF file ({len(head)} bytes)")
    want = NODE_MACHINES.get(machine)
    if want is None:
        why = f"cannot be checked: this node's architecture {machine!r} is neither x86_64 nor aarch64"
        return LibraryStatus(path, "unknown_machine", why)
    if head[4] != ELFCLASS64:
        return LibraryStatus(path, "wrong_machine", f"is a 32-bit ELF; this node ({machine}) loads 64-bit libraries")
    if head[5] != ELFDATA2LSB:
        return LibraryStatus(path, "wrong_machine", f"is a big-endian ELF; this node ({machine}) is little-endian")
    e_type = int.from_bytes(head[16:18], "little")
    e_machine = int.from_bytes(head[18:20], "little")
    if e_machine != want:
        built = MACHINE_NAMES.get(e_machine, "another machine")
        return LibraryStatus(
            path,
            "wrong_machine",
            f"is built for {built} (ELF e_machine {e_machine}), not for this node's {machine} (e_machine {want})",
        )
    if e_type != ET_DYN:
        kind = _TYPES.get(e_type, f"type {e_type}")
        return LibraryStatus(path, "not_shared_object", f"is an ELF {kind}, not a shared library")
    return LibraryStatus(path)


def check(path: str, head: bytes | OSError, machine: str) -> LibraryStatus:
    """The status of the library at ``path`` from what reading its first bytes gave (bytes or the error)."""
    if isinstance(head, FileNotFoundError | NotADirectoryError):
        return missing(path)
    if isinstance(head, OSError):
        return unreadable(path, head)
    return check_head(path, head, machine)


def decide(mode: str, profile: str, status: LibraryStatus | None) -> str:
    """ENFORCE, SKIP or REFUSE for a claim of ``profile`` under the driver's ``mode``.

    ``status`` is only looked at when the library is needed (it may be None otherwise).
    """
    if profile == NONE or mode == NONE:
        return SKIP
    if status is None or not status.usable:
        return REFUSE
    return ENFORCE


def effective_mode(mode: str, profile: str) -> str:
    """``required`` when claims of ``profile`` are enforced (or refused), ``none`` when nothing enforces them."""
    return NONE if NONE in (mode, profile) else REQUIRED


def elf_header(machine: int = EM_X86_64, e_type: int = ET_DYN, elf_class: int = ELFCLASS64) -> bytes:
    """A minimal little-endian ELF header (64 bytes): what the check reads of a real library.

    For tests, benches and previews that need a library the check accepts without building one.
    """
    ident = ELF_MAGIC + bytes([elf_class, ELFDATA2LSB, 1]) + bytes(9)
    return ident + e_type.to_bytes(2, "little") + machine.to_bytes(2, "little") + bytes(HEAD_BYTES - 20)


def stub_library(machine: str | None = None) -> bytes:
    """An ELF header the check accepts on ``machine`` (default: this node)."""
    return elf_header(NODE_MACHINES.get(machine or node_machine(), EM_X86_64))
