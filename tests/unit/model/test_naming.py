"""Claim naming: Lab 20's names when they fit, valid hashed cuts when not, never random."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dralab.model import naming

LABEL_CHARS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=120)


def test_lab20_claim_name() -> None:
    assert (
        naming.claim_name("dra-ascend-e2e", "ascend-share-a", "app", "ascend310p")
        == "dra-ascend-e2e-ascend-share-a-app-ascend310p"
    )


def test_long_name_is_cut_with_hash() -> None:
    name = naming.claim_name("team-with-a-long-namespace", "inference-server-" + "x" * 40, "sidecar", "nvidia")
    assert len(name) == 63 and naming.is_dns_label(name)
    assert name.startswith("team-with-a-long-namespace-inference-server-")


def test_exact_63_is_kept() -> None:
    full = "a" * 63
    assert naming.dns_label(full) == full
    assert naming.dns_label("a" * 64) != "a" * 63


def test_names_with_dots_become_labels() -> None:
    name = naming.claim_name("ns", "web.v2", "app", "nvidia")
    assert naming.is_dns_label(name) and name.startswith("ns-web-v2-app-nvidia-")


def test_generated_names_are_deterministic_and_distinct() -> None:
    a = naming.generated_name("web-7f9c-", "uid-1")
    assert a == naming.generated_name("web-7f9c-", "uid-1")
    assert a != naming.generated_name("web-7f9c-", "uid-2")
    assert a.startswith("web-7f9c-") and len(a) == len("web-7f9c-") + 5


def test_collision_variant_differs_and_is_valid() -> None:
    base = naming.claim_base("ns", "a-b", "c", "nvidia")
    assert base == naming.claim_base("ns", "a", "b-c", "nvidia")  # the rare collision the variant resolves
    v1 = naming.collision_variant(base, "uid-1")
    v2 = naming.collision_variant(base, "uid-2")
    assert v1 != v2 and v1 != naming.dns_label(base)
    assert naming.is_dns_label(v1) and naming.is_dns_label(v2)


def test_label_value() -> None:
    assert naming.label_value("ascend-share-a") == "ascend-share-a"
    long = naming.label_value("p" * 100)
    assert len(long) <= 63


@given(LABEL_CHARS, LABEL_CHARS, LABEL_CHARS, st.sampled_from(["nvidia", "hygon", "ascend310p", "ascend910b4-1"]))
def test_claim_names_are_always_valid_labels(ns: str, pod: str, container: str, suffix: str) -> None:
    name = naming.claim_name(ns, pod, container, suffix)
    assert naming.is_dns_label(name)
    full = naming.claim_base(ns, pod, container, suffix)
    if naming.is_dns_label(full):
        assert name == full


@given(LABEL_CHARS, LABEL_CHARS)
def test_distinct_long_names_do_not_share_a_cut(a: str, b: str) -> None:
    long_a, long_b = "x" * 60 + a, "x" * 60 + b
    if long_a != long_b:
        assert naming.dns_label(long_a) != naming.dns_label(long_b)


@given(st.text(max_size=300), st.text(max_size=20))
def test_variants_are_valid_for_any_input(full: str, salt: str) -> None:
    assert naming.is_dns_label(naming.collision_variant(full, salt))
    assert naming.is_dns_label(naming.hashed_label(full))


def test_a_trailing_newline_is_not_a_label() -> None:
    assert not naming.is_dns_label("abc\n")
    assert naming.dns_label("abc\n") != "abc\n" and naming.is_dns_label(naming.dns_label("abc\n"))
    assert naming.label_value("abc\n") != "abc\n"
