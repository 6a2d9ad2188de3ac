"""Who may read /metrics (dralab.kube.authz) against the scripted apiserver: TokenReview, then
SubjectAccessReview, cached for a few seconds, and closed when a review cannot be made."""

from __future__ import annotations

import json

import anyio
import pytest

from dralab.kube import AsyncKube, Kube, load_kubeconfig
from dralab.kube.authz import (
    SUBJECTACCESSREVIEWS,
    TOKENREVIEWS,
    DecisionCache,
    MetricsAuthorizer,
    access_review,
    bearer_token,
    metrics_authorizer,
    token_review,
)

USER = {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]}}
AUTHENTICATED = (201, {"kind": "TokenReview", "status": {"authenticated": True, "user": USER}})
UNAUTHENTICATED = (201, {"kind": "TokenReview", "status": {"authenticated": False, "error": "invalid token"}})
ALLOWED = (201, {"kind": "SubjectAccessReview", "status": {"allowed": True}})
DENIED = (201, {"kind": "SubjectAccessReview", "status": {"allowed": False, "reason": "no RBAC rule"}})
FORBIDDEN = (403, {"kind": "Status", "reason": "Forbidden", "code": 403,
                   "message": 'tokenreviews.authentication.k8s.io is forbidden: User "x" cannot create'})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kube(apiserver):
    client = Kube.from_kubeconfig(apiserver.kubeconfig, timeout=5.0)
    yield client
    client.close()


def reviews(apiserver, path: str) -> list[dict]:
    return [json.loads(s.body) for s in apiserver.script.requests("POST") if s.path == path]


def test_no_token_is_401_without_asking_the_apiserver(apiserver, kube) -> None:
    auth = MetricsAuthorizer(kube)
    for header in (None, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer  ", "Bearer a b"):
        decision = auth.check(header)
        assert decision.status == 401 and not decision.allowed, header
        assert decision.headers()["WWW-Authenticate"].startswith("Bearer")
    assert apiserver.script.requests() == []


def test_a_token_the_cluster_does_not_authenticate_is_401(apiserver, kube) -> None:
    apiserver.script.on("POST", TOKENREVIEWS, UNAUTHENTICATED)
    decision = MetricsAuthorizer(kube).check("Bearer forged")
    assert decision.status == 401
    assert reviews(apiserver, TOKENREVIEWS) == [token_review("forged")]
    assert reviews(apiserver, SUBJECTACCESSREVIEWS) == []  # nobody to authorize


def test_an_authenticated_user_without_the_permission_is_403(apiserver, kube) -> None:
    apiserver.script.on("POST", TOKENREVIEWS, AUTHENTICATED)
    apiserver.script.on("POST", SUBJECTACCESSREVIEWS, DENIED)
    decision = MetricsAuthorizer(kube).check("Bearer good")
    assert (decision.status, decision.user) == (403, USER["username"])
    (sar,) = reviews(apiserver, SUBJECTACCESSREVIEWS)
    assert sar == {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": USER["username"], "groups": USER["groups"], "uid": "u-1", "extra": USER["extra"],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}


def test_an_allowed_user_gets_200(apiserver, kube) -> None:
    apiserver.script.on("POST", TOKENREVIEWS, AUTHENTICATED)
    apiserver.script.on("POST", SUBJECTACCESSREVIEWS, ALLOWED)
    decision = MetricsAuthorizer(kube).check("bearer good")  # the scheme is case-insensitive
    assert decision.allowed and decision.status == 200 and decision.user == USER["username"]


def test_a_cached_decision_makes_no_second_review_until_the_ttl_passes(apiserver, kube) -> None:
    apiserver.script.on("POST", TOKENREVIEWS, AUTHENTICATED)
    apiserver.script.on("POST", SUBJECTACCESSREVIEWS, ALLOWED, DENIED)
    clock = Clock()
    auth = MetricsAuthorizer(kube, ttl=10.0, clock=clock)
    assert auth.check("Bearer good").allowed
    clock.now += 9.0
    assert auth.check("Bearer good").allowed
    assert len(reviews(apiserver, TOKENREVIEWS)) == 1 and len(reviews(apiserver, SUBJECTACCESSREVIEWS)) == 1
    clock.now += 1.5  # expired: asked again, and the binding is gone now
    assert auth.check("Bearer good").status == 403
    assert len(reviews(apiserver, SUBJECTACCESSREVIEWS)) == 2
    # a denial is cached the same way
    assert auth.check("Bearer good").status == 403
    assert len(reviews(apiserver, SUBJECTACCESSREVIEWS)) == 2


def test_the_cache_keeps_digests_only_and_is_bounded() -> None:
    clock = Clock()
    cache = DecisionCache(ttl=10.0, max_entries=2, clock=clock)
    from dralab.kube.authz import Decision

    for key in ("a", "b", "c"):
        cache.put(key, Decision(200, "ok"))
    assert len(cache) == 2 and cache.get("a") is None and cache.get("c") is not None


def test_tokens_are_not_kept_in_the_cache(apiserver, kube) -> None:
    apiserver.script.on("POST", TOKENREVIEWS, AUTHENTICATED)
    apiserver.script.on("POST", SUBJECTACCESSREVIEWS, ALLOWED)
    auth = MetricsAuthorizer(kube)
    auth.check("Bearer secret-token-value")
    assert "secret-token-value" not in repr(auth.cache._entries)


@pytest.mark.parametrize("failure", ["forbidden", "server_error", "unreachable", "not_json"])
def test_a_review_that_fails_fails_closed_and_is_not_cached(apiserver, kube, failure: str) -> None:
    if failure == "forbidden":  # the server's own account may not create TokenReviews
        apiserver.script.on("POST", TOKENREVIEWS, FORBIDDEN)
    elif failure == "server_error":
        apiserver.script.on("POST", TOKENREVIEWS, AUTHENTICATED)
        apiserver.script.on("POST", SUBJECTACCESSREVIEWS, (500, {"kind": "Status", "message": "etcd"}))
    elif failure == "not_json":
        apiserver.script.on("POST", TOKENREVIEWS, (201, b"[1, 2]"))
    api = kube
    if failure == "unreachable":
        from dralab.util import free_port

        config = load_kubeconfig(apiserver.kubeconfig)
        config.configuration.host = f"https://127.0.0.1:{free_port()}"
        api = Kube(config, timeout=2.0)
    auth = MetricsAuthorizer(api)
    decision = auth.check("Bearer good")
    assert decision.status == 503 and not decision.allowed
    assert decision.headers() == {"Retry-After": "5"}
    assert len(auth.cache) == 0  # the next scrape asks again
    if failure != "unreachable":
        apiserver.script.on("POST", TOKENREVIEWS, AUTHENTICATED)
        apiserver.script.on("POST", SUBJECTACCESSREVIEWS, ALLOWED)
        assert auth.check("Bearer good").allowed


def test_no_api_client_fails_closed() -> None:
    assert MetricsAuthorizer(None).check("Bearer good").status == 503
    assert MetricsAuthorizer(None).check(None).status == 401


def test_too_many_reviews_in_flight_are_refused(apiserver, kube) -> None:
    auth = MetricsAuthorizer(kube, max_inflight=1)
    auth._inflight = 1  # one review under way
    assert auth.check("Bearer another").status == 503
    assert apiserver.script.requests() == []


def test_an_overlong_token_is_401_without_a_review(apiserver, kube) -> None:
    assert MetricsAuthorizer(kube).check("Bearer " + "x" * 20000).status == 401
    assert apiserver.script.requests() == []


def test_acheck_awaits_the_asyncio_client(apiserver) -> None:
    apiserver.script.on("POST", TOKENREVIEWS, AUTHENTICATED, UNAUTHENTICATED)
    apiserver.script.on("POST", SUBJECTACCESSREVIEWS, ALLOWED)

    async def go() -> list[int]:
        api = AsyncKube(load_kubeconfig(apiserver.kubeconfig))
        try:
            auth = MetricsAuthorizer(api)
            first = await auth.acheck("Bearer good")
            cached = await auth.acheck("Bearer good")
            bad = await auth.acheck("Bearer other")
            return [first.status, cached.status, bad.status]
        finally:
            await api.close()

    assert anyio.run(go) == [200, 200, 401]
    assert len(reviews(apiserver, TOKENREVIEWS)) == 2


def test_acheck_runs_a_blocking_client_in_a_thread(apiserver, kube) -> None:
    apiserver.script.on("POST", TOKENREVIEWS, AUTHENTICATED)
    apiserver.script.on("POST", SUBJECTACCESSREVIEWS, DENIED)
    assert anyio.run(MetricsAuthorizer(kube).acheck, "Bearer good").status == 403


def test_acheck_fails_closed_on_asyncio_too(apiserver) -> None:
    apiserver.script.on("POST", TOKENREVIEWS, FORBIDDEN)

    async def go() -> int:
        api = AsyncKube(load_kubeconfig(apiserver.kubeconfig))
        try:
            return (await MetricsAuthorizer(api).acheck("Bearer good")).status
        finally:
            await api.close()

    assert anyio.run(go) == 503


def test_pure_parts() -> None:
    assert bearer_token("Bearer abc") == "abc" and bearer_token("  bearer   abc ") == "abc"
    assert bearer_token("Token abc") is None and bearer_token(None) is None
    assert token_review("t", ("aud",))["spec"] == {"token": "t", "audiences": ["aud"]}
    body = access_review({"username": "u"}, "/metrics", "get")
    assert body["spec"] == {"user": "u", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}


def test_switched_off_serves_anyone_and_says_so(caplog) -> None:
    import logging

    logging.getLogger("dralab").propagate = True
    try:
        with caplog.at_level(logging.WARNING, logger="dralab.kube.authz"):
            assert metrics_authorizer(False, object(), "monitor") is None
    finally:
        logging.getLogger("dralab").propagate = False
    assert any("metricsAuthorization: false" in r.getMessage() for r in caplog.records)
    assert isinstance(metrics_authorizer(True, None, "monitor"), MetricsAuthorizer)
