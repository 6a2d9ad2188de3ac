"""Hypothesis strategies for hostile input: AdmissionReviews (typed as the apiserver sends them, or
malformed anywhere), size attacks, raw bodies, and driver claims with path-like or junk fields.

Typed strategies produce what a real apiserver can hand over (every field of its type, values as
hostile as a user can write them); untyped ones put junk of any type anywhere, as a direct caller
or a broken claim source could.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import strategies as st

CHIP = "Ascend310P"
HAMI_KEYS = (f"huawei.com/{CHIP}", f"huawei.com/{CHIP}-memory", f"huawei.com/{CHIP}-core",
             "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage",
             "hygon.com/hcunum", "hygon.com/hcumem", "huawei.com/Ascend999", "huawei.com/Ascend910B3-memory")
ANNOTATIONS = (f"hami.io/use-{CHIP}-uuid", f"hami.io/no-use-{CHIP}-uuid", "hami.io/use-nputype",
               "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gputype", "hygon.com/use-hcutype")
# RFC 1123 label, matched whole (written here, not imported: the checker must not share the webhook's bugs).
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)

quantity = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1", "0", "8192", "14k", "16Gi", "1.5", "500m", "-1", "1e3", "1E400", "0x10", " 1", "1 ",
                     "∞", "1Ki", "99999999999999999999999", "1.0Gi", "", "NaN", "1e-3", "+1", "1_000"]),
    st.from_regex(r"-?[0-9]{1,25}(\.[0-9]{1,4})?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]{1,3})?", fullmatch=True),
    st.text(max_size=10),
    junk,
)

annotation_value = st.one_of(
    st.sampled_from(["", ",", " , ", "a,b", '"', "\\", '") || true || ("', "' + '", "\n", "x" * 300,
                     ",".join(["A"] * 200), "310P3", "BENCH-0000", "}{", "\u202e", "in [\"a\"]"]),
    st.text(max_size=40),
    junk,
)

name_text = st.one_of(st.text(max_size=70), st.sampled_from(["", "a", "A_b", "x" * 300, "../etc", "-", "a.b"]))

# Namespaces: valid labels wherever the namespace is not the field under attack (a bad one is denied
# before the pod is read, which would hide every pod-level check), hostile ones where it is.
good_namespace = st.one_of(st.just("team-a"), st.from_regex(NAMESPACE, fullmatch=True).filter(
    lambda ns: ns != "kube-system"))
bad_namespace = st.one_of(
    st.sampled_from(["x/../kube-system", "kube-system/..", "../etc", "default/../kube-system", "Team-A", "team_a",
                     "a" * 64, "-a", "a-", "a.b", " kube-system", "kube-system ", "team-a\n", "kube-system\n",
                     "team-a\x00", "\uff4b\uff55\uff42\uff45-system", "%2e%2e", "kube-system%2F..", "\u202eteam-a"]),
    st.from_regex(r"[a-z0-9.\-_/A-Z]{1,70}\n?", fullmatch=True),
    name_text,
).filter(lambda ns: ns != "" and not NAMESPACE.fullmatch(ns))

# What the apiserver can hand a webhook: it decodes the pod into its typed struct before admission,
# so every field has its type and quantities are valid quantity strings, but names, annotation
# values and quantity sizes are whatever the user wrote (validation runs after mutation).
typed_quantity = st.one_of(
    st.sampled_from(["1", "0", "8192", "14k", "16Gi", "1.5", "500m", "1k", "1M", "2", "100", "101", "1Ki",
                     "99999999999999999999999", "1.0Gi", "1e3", "1E400", "1e-3", "8Ei", "0.000001"]),
    st.from_regex(r"[0-9]{1,25}(\.[0-9]{1,4})?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]{1,3})?", fullmatch=True),
)


def _maybe_junk(draw: st.DrawFn, typed: bool, value: Any, one_in: int) -> Any:
    """``value``, or (untyped input only, one time in ``one_in``) junk of any type in its place."""
    return draw(junk) if not typed and draw(st.integers(0, one_in - 1)) == 0 else value


@st.composite
def container(draw: st.DrawFn, typed: bool) -> Any:
    keys = draw(st.lists(st.sampled_from(HAMI_KEYS), max_size=4, unique=True))
    res: dict[str, Any] = {}
    for where in draw(st.lists(st.sampled_from(["limits", "requests"]), max_size=2, unique=True)):
        values = {k: draw(typed_quantity if typed else quantity) for k in keys}
        res[where] = _maybe_junk(draw, typed, values, 8)
    out: dict[str, Any] = {"name": draw(name_text) if draw(st.booleans()) else "app", "image": "busybox"}
    if bool(res) or draw(st.booleans()):
        out["resources"] = _maybe_junk(draw, typed, res, 8)
    if draw(st.integers(0, 5)) == 0:
        out["restartPolicy"] = draw(st.sampled_from(["Always", "Never"]))
    return _maybe_junk(draw, typed, out, 10)


@st.composite
def hostile_pod(draw: st.DrawFn, typed: bool = True) -> Any:
    """A pod in HAMi syntax with hostile values where users put them (untyped: junk anywhere)."""
    meta: dict[str, Any] = {}
    if draw(st.integers(0, 4)):
        meta["name"] = draw(name_text)
    if draw(st.integers(0, 3)) == 0:
        meta["generateName"] = draw(name_text)
    if draw(st.booleans()):
        keys = draw(st.lists(st.sampled_from(ANNOTATIONS), max_size=3, unique=True))
        values = annotation_value if not typed else st.one_of(st.text(max_size=40), annotation_value.filter(
            lambda v: isinstance(v, str)))
        meta["annotations"] = {a: draw(values) for a in keys}
    if draw(st.integers(0, 4)) == 0:
        meta["labels"] = _maybe_junk(draw, typed, {"dralab.io/convert": draw(st.sampled_from(["false", "x"]))}, 2)
    spec: dict[str, Any] = {}
    for kind in draw(st.lists(st.sampled_from(["containers", "initContainers"]), min_size=1, max_size=2,
                              unique=True)):
        spec[kind] = _maybe_junk(draw, typed, draw(st.lists(container(typed), max_size=3)), 10)
    if draw(st.integers(0, 6)) == 0:
        spec["resourceClaims"] = _maybe_junk(draw, typed, [{"name": "app-ascend310p"}], 2)
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": _maybe_junk(draw, typed, meta, 10),
                           "spec": _maybe_junk(draw, typed, spec, 15)}
    if not typed:
        pod["kind"] = draw(st.sampled_from(["Pod", "Pod", "Pod", "Service", 7]))
    return _maybe_junk(draw, typed, pod, 20)


@st.composite
def review(draw: st.DrawFn, typed: bool = True) -> Any:
    """An AdmissionReview around a hostile pod; untyped: malformed in one or more places as well."""
    pods = hostile_pod(typed)
    request: dict[str, Any] = {
        "uid": draw(st.uuids().map(str)),
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-a" if typed else draw(good_namespace),
        "operation": draw(st.sampled_from(["CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT"] if typed else
                                          ["CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT", "create"])),
        "object": draw(pods),
    }
    if request["operation"] in ("UPDATE", "DELETE") or draw(st.integers(0, 9)) == 0:
        request["oldObject"] = draw(pods)
    if request["operation"] == "DELETE" and typed:
        request["object"] = None
    if draw(st.integers(0, 9)) == 0:
        request["dryRun"] = draw(st.booleans()) if typed else draw(st.one_of(st.booleans(), junk))
    if not typed:
        for key in draw(st.lists(st.sampled_from(sorted(request)), max_size=2, unique=True)):
            if draw(st.integers(0, 3)) == 0:
                request[key] = draw(junk)  # wrong type
    doc: dict[str, Any] = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    if not typed:
        doc["apiVersion"] = draw(st.sampled_from(["admission.k8s.io/v1"] * 8 + ["v1beta1", 1]))
        doc["request"] = _maybe_junk(draw, typed, request, 15)
    return doc


@st.composite
def namespace_attack_review(draw: st.DrawFn) -> Any:
    """A pod review, well-formed but for a hostile namespace: its denial must name ``request.namespace``
    (checked first, so also when the pod carries hostile values of its own)."""
    doc = draw(review(typed=True))
    doc["request"]["namespace"] = draw(bad_namespace)
    doc["request"]["operation"] = draw(st.sampled_from(["CREATE", "CREATE", "CREATE", "UPDATE"]))
    if doc["request"]["object"] is None:
        doc["request"]["object"] = draw(hostile_pod(typed=True))
    return doc


# Size attacks: values a typed pod can carry that once cost seconds of exact arithmetic or made claims
# no node can satisfy. Every case is hostile, so every answer must be a denial (or 413), never an allow.
exponent_quantity = st.builds(
    lambda mantissa, exponent, suffix: f"{mantissa}e{exponent}{suffix}",
    st.sampled_from(["1", "9", "0.5", "123456789"]),
    st.one_of(st.integers(65, 10**7), st.integers(-(10**7), -65), st.sampled_from([9999999, -9999999])),
    st.sampled_from(["", "Mi"]),
)
digit_quantity = st.one_of(
    st.integers(65, 6000).map(lambda n: "9" * n),  # thousands of digits
    st.integers(65, 4000).map(lambda n: "0." + "0" * n + "1Gi"),  # thousands of fraction digits
    st.integers(21, 60).map(lambda n: "1" + "0" * n),  # absurd but short and parseable
)
absurd_count = st.one_of(st.integers(65, 10**6).map(str), st.sampled_from(["1e18", "1E12", "65", "1k", "1M"]))
absurd_memory = st.one_of(st.sampled_from(["2Ei", "8Ei", "1025Ti", "2000000000000"]),
                          st.integers(2**30 + 1, 10**15).map(str))  # MiB beyond 1 PiB


@st.composite
def size_attack_review(draw: st.DrawFn) -> Any:
    """A typed review whose pod carries one exponent, digit-length or size attack (or too many claims), or a
    body just over the server's size limit (raw bytes: 413 expected)."""
    kind = draw(st.sampled_from(["exponent", "digits", "count", "memory", "containers", "body"]))
    if kind == "body":
        from dralab.webhook.limits import ServerLimits

        return b" " * (ServerLimits().max_body_bytes + draw(st.integers(1, 4096)))
    limits: dict[str, Any] = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"}
    containers = 1
    if kind == "exponent":
        limits[draw(st.sampled_from(["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"]))] = draw(
            exponent_quantity)
    elif kind == "digits":
        limits[draw(st.sampled_from(["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"]))] = draw(
            digit_quantity)
    elif kind == "count":
        limits["nvidia.com/gpu"] = draw(absurd_count)
    elif kind == "memory":
        limits["nvidia.com/gpumem"] = draw(absurd_memory)
    else:
        containers = draw(st.integers(17, 600))  # over the default maxClaimsPerPod (16)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "attack"},
           "spec": {"containers": [{"name": f"c{i}", "image": "busybox", "resources": {"limits": dict(limits)}}
                                   for i in range(containers)]}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": draw(st.uuids().map(str)), "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "team-a",
                        "operation": "CREATE", "object": pod}}


raw_body = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    junk.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 200_000).map(lambda d: ("[" * d + "]" * d).encode()),
    st.integers(1, 200_000).map(lambda d: ('{"request":' * d + "{}" + "}" * d).encode()),
    st.sampled_from([b"", b"null", b"{}", b'{"request": null}', b'{"request": []}', b"\xff\xfe", b"1e999999"]),
)


# ---------------------------------------------------------------- driver claims

# gRPC strings are UTF-8 on the wire: lone surrogates cannot even be sent
utf8 = st.characters(exclude_categories=["Cs"])
wire_name = st.one_of(st.text(utf8, max_size=70), st.sampled_from(["", "a", "A_b", "x" * 300, "../etc", "-"]))
path_like = st.sampled_from(["", ".", "..", "../..", "../x", "/", "/tmp/x", "a/b", "common", "\x00", "*"])
uid_text = st.one_of(st.uuids().map(str), path_like, st.text(utf8, max_size=40))


@st.composite
def driver_case(draw: st.DrawFn, typed: bool = True) -> Any:
    """Claims to prepare, each with what the apiserver answers for it.

    Typed: what a real apiserver can return (every field of its type; uids, names, devices, pools
    and quantities arbitrary). Untyped: junk anywhere, as a broken or hostile claim source would.
    """
    from dralab_kit.fixtures.driver_claims import DRIVER, NODE

    claims = []
    for _ in range(draw(st.integers(0, 4))):
        ns = draw(st.one_of(st.just("team-a"), wire_name))
        name = draw(st.one_of(st.just("c"), wire_name))
        uid = draw(uid_text)
        caps = draw(st.lists(st.sampled_from(["memory", "cores", "other"]), max_size=3, unique=True))
        result: Any = {
            "request": "npu" if typed else draw(st.one_of(st.just("npu"), junk)),
            "driver": draw(st.sampled_from([DRIVER, DRIVER, DRIVER, "other.example.com", ""])),
            "pool": draw(st.sampled_from([NODE, NODE, "elsewhere", ""])),
            "device": draw(st.sampled_from(["npu-0-0", "npu-1-0", "npu-9-0", "", "../npu"])),
            "consumedCapacity": {k: draw(typed_quantity if typed else quantity) for k in caps},
        }
        if draw(st.booleans()):
            result["shareID"] = draw(st.one_of(st.uuids().map(str), st.text(utf8, max_size=10)))
        results: Any = [_maybe_junk(draw, typed, result, 10)] * draw(st.integers(1, 2))
        doc: Any = {
            "metadata": {"namespace": ns, "name": name,
                         "uid": uid if draw(st.integers(0, 5)) else draw(uid_text)},
            "status": {"allocation": {"devices": {"results": _maybe_junk(draw, typed, results, 10)}}},
        }
        if draw(st.integers(0, 9)) == 0:
            doc["status"] = {} if typed else draw(junk)  # not allocated
        if not typed:
            for where in draw(st.lists(st.sampled_from(["allocation", "metadata"]), max_size=1)):
                if where == "allocation" and isinstance(doc["status"], dict):
                    doc["status"]["allocation"] = draw(junk)
                else:
                    doc["metadata"] = draw(junk)
        doc = _maybe_junk(draw, typed, doc, 15)
        claims.append({"ns": ns, "name": name, "uid": uid, "doc": doc, "known": draw(st.integers(0, 7)) > 0})
    extra_unprepare = draw(st.lists(st.tuples(wire_name, wire_name, uid_text), max_size=3))
    return {"claims": claims, "beta": draw(st.booleans()), "extra_unprepare": extra_unprepare}
