"""Where the credentials come from: a kubeconfig or the in-cluster service account, loaded once.

The official ``kubernetes`` package's loaders do the parsing (contexts, exec plugins, OIDC,
``insecure-skip-tls-verify``, proxies) into a ``kubernetes.client.Configuration``. Two things are
added around them:

- **No key files on disk.** The official kubeconfig loader writes embedded certificate and key
  data to files in the temp dir and removes them only at a clean interpreter exit. Here embedded
  data is put into anonymous memory files (``memfd_create``) first and handed to the loader as
  ``/proc/self/fd/N`` paths: nothing is ever written under a directory, so nothing can be left
  behind by a crash or a ``SIGKILL``. The memory files close with the last :class:`KubeConfig`
  that uses them.
- **Token rotation.** The kubelet rotates a pod's projected service account token; kubeconfig
  ``tokenFile`` users rotate theirs the same way. A :class:`TokenFile` hook re-reads the file
  whenever it changed (a ``stat`` per request) instead of the official in-cluster loader's
  once-a-minute timer or the kubeconfig loader's read-once. Exec plugins and OIDC keep the
  official loader's own refresh hook (it asks the plugin again when the credential expired).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import ssl
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dralab import yamlio
from dralab.errors import UserError
from dralab.kube.tls import ResumingContext

# kubeconfig keys holding base64 data, and the key of the file path the loader is given instead
_DATA_KEYS = {
    "certificate-authority-data": "certificate-authority",
    "client-certificate-data": "client-certificate",
    "client-key-data": "client-key",
}


class TokenFile:
    """A bearer token read from a file, read again whenever the file is replaced or rewritten.

    Installed as the configuration's ``refresh_api_key_hook``, which the client calls before each
    request. The kubelet swaps a new token in atomically (a new inode behind the same path), so a
    ``stat`` per request notices a rotation without a timer. While the file is missing or empty (a
    rotation in progress) the last token is kept: the apiserver's 401 then says what is wrong.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._token = ""

    def current(self) -> str:
        """The token as the file holds it now (empty if it was never readable)."""
        try:
            st = self.path.stat()
        except OSError:
            return self._token
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if seen != self._seen:
                try:
                    text = self.path.read_text().strip()
                except OSError:
                    return self._token
                if text:
                    self._token, self._seen = text, seen
            return self._token

    def __call__(self, configuration: Any) -> None:
        token = self.current()
        if token:
            configuration.api_key["BearerToken"] = f"Bearer {token}"
            configuration.api_key_prefix.pop("BearerToken", None)


def _close_all(fds: list[int], folders: list[str]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    folders.clear()


class _MemoryFiles:
    """Anonymous in-memory files standing in for certificate and key files (Linux ``memfd``).

    They close when the last reference goes: the client configuration that names their paths
    holds one, so a configuration never outlives its files.
    """

    def __init__(self) -> None:
        self.fds: list[int] = []
        self._folders: list[str] = []
        self._finalizer = weakref.finalize(self, _close_all, self.fds, self._folders)

    def add(self, name: str, data: bytes) -> str:
        """A path to a file with ``data`` that exists nowhere on disk."""
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create(f"dralab-{name}", os.MFD_CLOEXEC)
            os.write(fd, data)
            self.fds.append(fd)
            return f"/proc/self/fd/{fd}"
        # no memfd (not Linux): a private folder, removed with these files
        if not self._folders:
            self._folders.append(tempfile.mkdtemp(prefix="dralab-kube-"))
        path = Path(self._folders[0]) / name
        path.write_bytes(data)
        path.chmod(0o600)
        return str(path)

    def close(self) -> None:
        self._finalizer()

    def __deepcopy__(self, memo: dict[int, Any]) -> _MemoryFiles:
        return self  # a copied configuration names the same files: it shares them


@dataclass
class KubeConfig:
    """Loaded credentials: the official client configuration plus where it came from."""

    configuration: Any  # kubernetes.client.Configuration
    source: str  # "in-cluster" or the kubeconfig's path
    _files: _MemoryFiles = field(default_factory=_MemoryFiles, repr=False)
    # the TLS context of every client on these credentials, with the stamp of the files it was built from
    _tls: tuple[tuple[Any, ...], ssl.SSLContext] | None = field(default=None, repr=False, compare=False)
    _tls_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # OpenSSL's counts (``session_stats``) of the contexts built again, kept across a rebuild
    _retired: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the configuration names the memory files' paths: it keeps them open as long as it lives
        self.configuration.dralab_memory_files = self._files

    @property
    def host(self) -> str:
        return str(self.configuration.host).rstrip("/")

    def authorization(self) -> str | None:
        """The ``Authorization`` header value current now (runs the refresh hook), or None."""
        value = self.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if not value:
            return None
        if value.lower().startswith("bearer "):
            return "Bearer " + value[7:]
        return value

    def ssl_context(self, *, verify_hostname: bool = True) -> ssl.SSLContext:
        """A client TLS context with the configured CA, client certificate and verification.

        ``verify_hostname=False`` is the synchronous client's (:class:`dralab.kube.client.Kube`): one context
        shared by every new connection of every client on these credentials, with the server's name
        matched by urllib3 after the handshake, as it does for a context of its own (the apiserver may be
        an IP address, which a name check inside ``ssl`` needs as a server name). Building a context reads
        and parses the CA and the client key, about half the CPU of a new connection in Python: every
        client's first call, every clone's, and every reconnect after the apiserver closed a connection or
        restarted (then every node's driver at once). That shared context is built again, for the
        connections made after, once a file it came from changed (a rotated client certificate), as a
        context built per connection would have seen."""
        if verify_hostname:
            return self._new_ssl_context(check_hostname=True)
        cfg = self.configuration
        stamp = file_stamps(cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file)
        with self._tls_lock:
            if self._tls is None or self._tls[0] != stamp:
                if self._tls is not None:
                    for key, value in self._tls[1].session_stats().items():
                        self._retired[key] = self._retired.get(key, 0) + int(value)
                self._tls = (stamp, self._new_ssl_context(check_hostname=False))
            return self._tls[1]

    def handshakes(self) -> int:
        """The TLS handshakes the clients on these credentials' shared context completed so far, each a new
        connection to the apiserver (which closes one idle for 90 s): what a node's driver, calling the
        apiserver rarely, pays per call when its connections expire in between. 0 before any connection;
        contexts built per connection (:meth:`ssl_context` with ``verify_hostname``) are not counted."""
        return self._shared_tls_count("connect_good")

    def resumed_handshakes(self) -> int:
        """Those of :meth:`handshakes` that resumed an earlier connection's session (:mod:`dralab.kube.tls`):
        a new connection without the certificates and signatures of a full handshake."""
        return self._shared_tls_count("hits")

    def _shared_tls_count(self, key: str) -> int:
        """One of OpenSSL's client counts on the shared context, its earlier builds included."""
        with self._tls_lock:
            current = int(self._tls[1].session_stats().get(key, 0)) if self._tls is not None else 0
            return self._retired.get(key, 0) + current

    def _new_ssl_context(self, check_hostname: bool) -> ssl.SSLContext:
        cfg = self.configuration
        if check_hostname:
            ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        else:  # the shared one: its clients reconnect after the apiserver's idle close, and resume (dralab.kube.tls)
            ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
            if cfg.ssl_ca_cert:
                ctx.load_verify_locations(cafile=cfg.ssl_ca_cert)
            else:
                ctx.load_default_certs()
        ctx.check_hostname = check_hostname and bool(cfg.verify_ssl)
        if not cfg.verify_ssl:
            ctx.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        return ctx


def file_stamps(*paths: str | None) -> tuple[Any, ...]:
    """What tells a file's new content from its old, per path (inode, change time, size; None for no path
    or a file that cannot be read): a ``stat`` each, no read."""
    stamps: list[Any] = []
    for path in paths:
        try:
            st = os.stat(path) if path else None
        except OSError:
            st = None
        stamps.append(None if st is None else (st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(stamps)


def _kubeconfig_paths(kubeconfig: str | os.PathLike[str] | None) -> Path | None:
    """The kubeconfig to read: the one given, else the first existing entry of $KUBECONFIG, else ~/.kube/config."""
    if kubeconfig:
        return Path(kubeconfig).expanduser()
    for entry in os.environ.get("KUBECONFIG", "").split(os.pathsep):
        if entry and Path(entry).expanduser().is_file():
            return Path(entry).expanduser()
    default = Path("~/.kube/config").expanduser()
    return default if default.is_file() else None


def _in_memory(doc: dict[str, Any], base: Path, files: _MemoryFiles) -> None:
    """Replace embedded ``*-data`` fields by memory-file paths and make relative file paths absolute."""
    for section, inner in (("clusters", "cluster"), ("users", "user")):
        for entry in doc.get(section) or []:
            body = (entry or {}).get(inner) or {}
            for data_key, file_key in _DATA_KEYS.items():
                if body.get(data_key):
                    try:
                        raw = base64.b64decode(body.pop(data_key), validate=True)
                    except ValueError:
                        raise UserError(
                            f"{section[:-1]} {entry.get('name')!r}: {data_key} is not base64; "
                            "fix the kubeconfig (kubectl config view --raw shows it)"
                        ) from None
                    body[file_key] = files.add(f"{entry.get('name')}-{file_key}", raw)
                elif body.get(file_key) and not os.path.isabs(str(body[file_key])):
                    body[file_key] = str(base / str(body[file_key]))
            if body.get("tokenFile") and not os.path.isabs(str(body["tokenFile"])):
                body["tokenFile"] = str(base / str(body["tokenFile"]))


def _current_user(doc: dict[str, Any], context: str | None) -> dict[str, Any]:
    name = context or doc.get("current-context")
    ctx = next((c.get("context") or {} for c in doc.get("contexts") or [] if c.get("name") == name), {})
    return next((u.get("user") or {} for u in doc.get("users") or [] if u.get("name") == ctx.get("user")), {})


def load_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> KubeConfig:
    """Credentials of ``context`` (default: the current one) of the kubeconfig at ``path``."""
    from kubernetes import client
    from kubernetes import config as kconfig

    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"kubeconfig {p} not found: pass --kubeconfig FILE or bring the cluster up first")
    try:
        doc = yamlio.load(p.read_text(), str(p)) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"kubeconfig {p} is not readable YAML ({exc})") from None
    if not isinstance(doc, dict):
        raise UserError(f"kubeconfig {p} is not a kubeconfig (a YAML mapping with clusters, users, contexts)")
    files = _MemoryFiles()
    cfg = client.Configuration()
    try:
        _in_memory(doc, p.resolve().parent, files)
        kconfig.load_kube_config_from_dict(doc, context=context, client_configuration=cfg, persist_config=False)
    except UserError:
        files.close()
        raise
    except Exception as exc:  # the loader raises ConfigException, KeyError, TypeError... on bad input
        files.close()
        which = f"context {context!r} of " if context else ""
        raise UserError(f"cannot load Kubernetes credentials from {which}kubeconfig {p} ({exc})") from None
    user = _current_user(doc, context)
    if user.get("tokenFile") and not (user.get("exec") or user.get("auth-provider")):
        hook = TokenFile(user["tokenFile"])
        hook(cfg)
        cfg.refresh_api_key_hook = hook  # type: ignore[assignment]  # the generated client declares None, calls it when set
    return KubeConfig(cfg, str(p), files)


def load_incluster() -> KubeConfig:
    """The pod's service account (token re-read on rotation, CA from the projected volume)."""
    from kubernetes import client
    from kubernetes import config as kconfig
    from kubernetes.config import incluster_config

    cfg = client.Configuration()
    kconfig.load_incluster_config(client_configuration=cfg)  # ConfigException when not in a pod
    hook = TokenFile(incluster_config.SERVICE_TOKEN_FILENAME)
    hook(cfg)
    cfg.refresh_api_key_hook = hook  # type: ignore[assignment]  # as above: declared None, called when set
    return KubeConfig(cfg, "in-cluster")


def load_files(server: str, ca: str | None, cert: str | None = None, key: str | None = None) -> KubeConfig:
    """Credentials already in files of their own (a local cluster's PKI): used in place, nothing copied."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = server.rstrip("/")
    cfg.ssl_ca_cert = ca
    cfg.cert_file, cfg.key_file = cert, key
    return KubeConfig(cfg, server)


def load_config(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeConfig:
    """``kubeconfig`` if given; else the in-cluster service account; else $KUBECONFIG or ~/.kube/config."""
    if kubeconfig:
        return load_kubeconfig(kubeconfig, context)
    from kubernetes.config import ConfigException

    try:
        return load_incluster()
    except ConfigException as in_cluster:
        path = _kubeconfig_paths(None)
        if path is None:
            raise UserError(
                f"no Kubernetes credentials: not in a pod ({in_cluster}) and no kubeconfig "
                "($KUBECONFIG, ~/.kube/config); pass --kubeconfig FILE"
            ) from None
        return load_kubeconfig(path, context)
