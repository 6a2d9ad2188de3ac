"""Who may read ``/metrics``: the cluster decides, with a TokenReview and then a SubjectAccessReview.

Why: the webhook's, driver's and monitor's metrics name namespaces, pods and their device shares, so
reading them is reading every tenant's use. Like controller-runtime's metrics filter
(``filters.WithAuthenticationAndAuthorization``), a caller sends ``Authorization: Bearer <token>``;
the server asks the apiserver who that is (``authentication.k8s.io/v1`` TokenReview) and whether
that user may ``get`` the non-resource path ``/metrics`` (``authorization.k8s.io/v1``
SubjectAccessReview with the user's groups, uid and extra). RBAC then says who scrapes: a
ClusterRole with ``nonResourceURLs: ["/metrics"], verbs: ["get"]`` bound to Prometheus's account.

The three servers differ (Starlette under uvicorn, a raw asyncio server, a threaded stdlib server),
so the decision lives here once: the review bodies and the reading of their answers are pure
functions, :class:`MetricsAuthorizer` runs them blocking (:meth:`~MetricsAuthorizer.check`) or on
asyncio (:meth:`~MetricsAuthorizer.acheck`) over any dralab client (:class:`~dralab.kube.Kube`,
:class:`~dralab.kube.AsyncKube`). It fails closed: no token or a token the apiserver does not
authenticate is 401, an authenticated user without the permission 403, and a review that could not
be made (apiserver down, the server's own account may not create reviews, a malformed answer, too
many reviews in flight) 503, never an answer with the metrics. Decisions are cached per token (its
SHA-256, never the token) for a few seconds in a bounded cache, so a scrape every few seconds costs
the apiserver two small POSTs per TTL, not per scrape; a failed review is not cached.
"""

from __future__ import annotations

import hashlib
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from dralab.util import get_logger

log = get_logger("dralab.kube.authz")

TOKENREVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECTACCESSREVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
TTL_SECONDS = 10.0  # how long an allow or deny is reused for the same token
MAX_ENTRIES = 1024  # tokens remembered at once (the oldest go first)
MAX_INFLIGHT = 8  # reviews under way at once; beyond that: 503 (a flood of made-up tokens holds no threads)
REVIEW_TIMEOUT = 5.0  # seconds per review call
MAX_TOKEN_BYTES = 16384  # longer: not a token the apiserver issues (401 without asking it)
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="dralab metrics"'}


@dataclass(frozen=True)
class Decision:
    """The answer to one request for the metrics: ``status`` 200 (serve), 401, 403 or 503, and why."""

    status: int
    reason: str
    user: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200

    def headers(self) -> dict[str, str]:
        """The headers of the refusal (a Bearer challenge on 401, a retry hint on 503)."""
        if self.status == 401:
            return dict(CHALLENGE)
        if self.status == 503:
            return {"Retry-After": "5"}
        return {}


NO_TOKEN = Decision(401, "unauthorized: send Authorization: Bearer <token> (a token the cluster issued)")
BAD_TOKEN = Decision(401, "unauthorized: the cluster does not authenticate this token")


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value; None when there is none."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


def token_review(token: str, audiences: tuple[str, ...] = ()) -> dict[str, Any]:
    """The TokenReview that asks the apiserver who ``token`` belongs to."""
    spec: dict[str, Any] = {"token": token}
    if audiences:
        spec["audiences"] = list(audiences)
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}


def reviewed_user(answer: Any) -> dict[str, Any] | None:
    """The authenticated user of a TokenReview answer (``username``, ``uid``, ``groups``, ``extra``), else None."""
    status = answer.get("status") if isinstance(answer, dict) else None
    if not isinstance(status, dict) or status.get("authenticated") is not True:
        return None
    user = status.get("user")
    if not isinstance(user, dict) or not isinstance(user.get("username"), str) or not user["username"]:
        return None
    return user


def access_review(user: dict[str, Any], path: str = "/metrics", verb: str = "get") -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user`` may ``verb`` the non-resource ``path``."""
    spec: dict[str, Any] = {"user": user["username"], "nonResourceAttributes": {"path": path, "verb": verb}}
    groups = user.get("groups")
    if isinstance(groups, list) and groups:
        spec["groups"] = [str(g) for g in groups]
    if isinstance(user.get("uid"), str) and user["uid"]:
        spec["uid"] = user["uid"]
    extra = user.get("extra")
    if isinstance(extra, dict) and extra:
        spec["extra"] = {str(k): [str(v) for v in (vs if isinstance(vs, list) else [vs])] for k, vs in extra.items()}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def access_allowed(answer: Any) -> bool:
    """Whether a SubjectAccessReview answer allows (``status.allowed`` true and not ``denied``)."""
    status = answer.get("status") if isinstance(answer, dict) else None
    return isinstance(status, dict) and status.get("allowed") is True and status.get("denied") is not True


class ReviewFailed(Exception):
    """A review could not be made or its answer read (the request is refused with 503)."""


@dataclass
class DecisionCache:
    """Decisions by token digest for ``ttl`` seconds, at most ``max_entries`` (oldest out first); thread-safe."""

    ttl: float = TTL_SECONDS
    max_entries: int = MAX_ENTRIES
    clock: Callable[[], float] = time.monotonic
    _entries: OrderedDict[str, tuple[float, Decision]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: str) -> Decision | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self.clock():
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: str, decision: Decision) -> None:
        if self.ttl <= 0 or self.max_entries <= 0:
            return
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (self.clock() + self.ttl, decision)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


Step = tuple[str, dict[str, Any]]  # (collection path, review body) to POST


class MetricsAuthorizer:
    """Decides each request for the metrics by the cluster's authentication and RBAC (see the module).

    ``api``: a dralab client whose ``request`` is blocking (:class:`~dralab.kube.Kube`) or a coroutine
    (:class:`~dralab.kube.AsyncKube`); None answers every request 503 (nothing to ask). Its identity
    needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews`` (the chart grants it).
    """

    def __init__(
        self,
        api: Any,
        *,
        path: str = "/metrics",
        verb: str = "get",
        ttl: float = TTL_SECONDS,
        max_entries: int = MAX_ENTRIES,
        max_inflight: int = MAX_INFLIGHT,
        timeout: float = REVIEW_TIMEOUT,
        audiences: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.path = path
        self.verb = verb
        self.timeout = timeout
        self.audiences = tuple(audiences)
        self.cache = DecisionCache(ttl, max_entries, clock)
        self.max_inflight = max_inflight
        self._inflight = 0
        self._lock = threading.Lock()

    # -- the decision, as steps any caller can drive ------------------------------------------------

    def _steps(self, token: str) -> Generator[Step, Any, Decision]:
        """The reviews to POST, in order (each answer is sent back in); returns the decision."""
        user = reviewed_user((yield TOKENREVIEWS, token_review(token, self.audiences)))
        if user is None:
            return BAD_TOKEN
        name = str(user["username"])
        if access_allowed((yield SUBJECTACCESSREVIEWS, access_review(user, self.path, self.verb))):
            return Decision(200, "allowed", name)
        return Decision(403, f"forbidden: {name} may not {self.verb} {self.path} (bind it to a ClusterRole "
                             f"with nonResourceURLs [{self.path}] and verbs [{self.verb}])", name)

    def _start(self, header: str | None) -> tuple[Decision | None, str, str]:
        """(decision known without a review, token, cache key); takes an in-flight slot when a review is due."""
        token = bearer_token(header)
        if token is None or len(token) > MAX_TOKEN_BYTES:
            return NO_TOKEN if token is None else BAD_TOKEN, "", ""
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self.cache.get(key)
        if cached is not None:
            return cached, token, key
        if self.api is None:
            return Decision(503, "metrics authorization unavailable: no Kubernetes API client"), token, key
        with self._lock:
            if self._inflight >= self.max_inflight:
                return Decision(503, "too many authorization reviews in flight; retry"), token, key
            self._inflight += 1
        return None, token, key

    def _finish(self, key: str, decision: Decision | None, error: BaseException | None) -> Decision:
        with self._lock:
            self._inflight -= 1
        if decision is None:
            log.warning("metrics authorization failed closed: a review call failed",
                        extra={"fields": {"error": f"{type(error).__name__}: {error}"}})
            return Decision(503, "metrics authorization unavailable: the apiserver's review failed; retry")
        self.cache.put(key, decision)
        return decision

    def _answer(self, answer: Any) -> Any:
        if not isinstance(answer, dict):
            raise ReviewFailed(f"the review's answer is a {type(answer).__name__}, not an object")
        return answer

    # -- drivers ------------------------------------------------------------------------------------

    def check(self, header: str | None) -> Decision:
        """The decision for a request with this ``Authorization`` header value (blocking client)."""
        known, token, key = self._start(header)
        if known is not None:
            return known
        decision, error = None, None
        try:
            steps = self._steps(token)
            step = next(steps)
            while True:
                path, body = step
                answer = self.api.request("POST", path, body=body, timeout=self.timeout)
                if inspect.isawaitable(answer):  # an asyncio client called from a thread: not usable here
                    if inspect.iscoroutine(answer):
                        answer.close()  # never awaited: closed so that it warns of nothing
                    raise ReviewFailed("an asyncio client needs acheck()")
                step = steps.send(self._answer(answer))
        except StopIteration as done:
            decision = done.value
        except Exception as exc:  # KubeError (403: this account may not review, 0: no answer), bad answers
            error = exc
        return self._finish(key, decision, error)

    async def acheck(self, header: str | None) -> Decision:
        """:meth:`check` on asyncio: an asyncio client is awaited, a blocking one runs in a worker thread."""
        from dralab.kube.aio import call_api

        known, token, key = self._start(header)
        if known is not None:
            return known
        decision, error = None, None
        try:
            steps = self._steps(token)
            step = next(steps)
            while True:
                path, body = step
                answer: Any = await call_api(self.api.request, "POST", path, body=body, timeout=self.timeout)
                step = steps.send(self._answer(answer))
        except StopIteration as done:
            decision = done.value
        except Exception as exc:
            error = exc
        return self._finish(key, decision, error)


def metrics_authorizer(enabled: bool, api: Any, component: str, **options: Any) -> MetricsAuthorizer | None:
    """The authorizer a server's ``/metrics`` uses: None (served to anyone) when its switch is off
    (``webhook.metricsAuthorization`` / ``driver.metricsAuthorization`` false, the monitor's
    ``--no-metrics-authorization``, all three set by the chart's ``metrics.authorization``), which is
    logged, since then anything that reaches the port reads every tenant's use."""
    if not enabled:
        log.warning(
            "metrics are served without authorization (metricsAuthorization: false): anything that reaches "
            "the port reads them; keep it to a trusted scrape network (networkPolicy.enabled)",
            extra={"fields": {"component": component}},
        )
        return None
    return MetricsAuthorizer(api, **options)

