"""The one error every Kubernetes API call in dralab raises."""

from __future__ import annotations

from typing import Any


class KubeError(Exception):
    """A non-2xx answer from the apiserver, or none at all (``status`` 0).

    ``reason`` is the Status object's machine reason (``NotFound``, ``AlreadyExists``) when the
    apiserver sent one, else the HTTP reason phrase or the transport error; ``body`` is the decoded
    Status (empty when there was none); ``what`` names the call (``GET /api/v1/...``) for messages.
    """

    def __init__(self, status: int, reason: str, body: dict[str, Any] | None = None, *, what: str = "") -> None:
        self.status = int(status or 0)
        self.reason = reason
        self.body: dict[str, Any] = body if isinstance(body, dict) else {}
        self.what = what
        super().__init__(str(self))

    @property
    def message(self) -> str:
        """The apiserver's human message, else the reason."""
        return str(self.body.get("message") or self.reason)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        """410: a watch's resourceVersion is older than the apiserver keeps (list again)."""
        return self.status == 410

    def __str__(self) -> str:
        head = f"{self.what}: " if self.what else ""
        if self.status:
            return f"{head}HTTP {self.status}: {self.message}"
        return f"{head}no answer from the apiserver: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes (keyword-only ``what``)
        return (_rebuild, (self.status, self.reason, self.body, self.what))


def _rebuild(status: int, reason: str, body: dict[str, Any], what: str) -> KubeError:
    return KubeError(status, reason, body, what=what)
