"""Deterministic, valid Kubernetes names for the objects conversion creates.

Claim names follow Lab 20 (``<namespace>-<pod>-<container>-<suffix>``) whenever that is a valid
DNS-1123 label; anything longer or with characters a label cannot hold is cut and suffixed with a
hash of the full name, so two different full names never share a cut name by accident. Nothing
here is random: the same input always gives the same name.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

DNS_LABEL_MAX = 63
HASH_LEN = 10
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
# The alphabet the apiserver draws generateName suffixes from (no vowels, no look-alikes).
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def is_dns_label(name: str) -> bool:
    return len(name) <= DNS_LABEL_MAX and bool(_LABEL.fullmatch(name))


def digest(text: str, length: int = HASH_LEN) -> str:
    """The first ``length`` hex digits of the sha256 of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _cut(text: str, room: int) -> str:
    cleaned = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    return cleaned[:room].strip("-")


def hashed_label(full: str, salt: str = "") -> str:
    """``full`` cut to a DNS label that ends in a hash of ``full`` (and ``salt``)."""
    h = digest(f"{full}\x00{salt}" if salt else full)
    prefix = _cut(full, DNS_LABEL_MAX - HASH_LEN - 1)
    return f"{prefix}-{h}" if prefix else h


def dns_label(full: str) -> str:
    """``full`` itself when it is a valid DNS label, else its hashed cut."""
    return full if is_dns_label(full) else hashed_label(full)


def claim_base(namespace: str, pod: str, container: str, suffix: str) -> str:
    """The uncut Lab 20 claim name; the key collisions and renames are tracked by."""
    return f"{namespace}-{pod}-{container}-{suffix}"


def claim_name(namespace: str, pod: str, container: str, suffix: str) -> str:
    """Lab 20's claim name, e.g. ``dra-ascend-e2e-ascend-share-a-app-ascend310p``."""
    return dns_label(claim_base(namespace, pod, container, suffix))


def collision_variant(full: str, salt: str) -> str:
    """The name to use when ``dns_label(full)`` is held by another pod's claim: always hashed, salted."""
    return hashed_label(full, salt)


def generated_name(generate_name: str, seed: str) -> str:
    """A pod name for ``generateName`` pods, derived from ``seed`` (the admission UID), never random.

    Five characters from the apiserver's own suffix alphabet, so it reads like a generated name.
    """
    raw = hashlib.sha256(seed.encode()).digest()
    suffix = "".join(_GENERATE_ALPHABET[b % len(_GENERATE_ALPHABET)] for b in raw[:5])
    return f"{generate_name}{suffix}"


def manifest_seed(obj: Any) -> str:
    """A stable seed for offline conversion: the hash of the manifest's canonical JSON."""
    return digest(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str), 32)


def label_value(text: str) -> str:
    """``text`` as a valid label value (<= 63 characters), hashed when it does not fit."""
    if len(text) <= DNS_LABEL_MAX and _LABEL_VALUE.fullmatch(text):
        return text
    return hashed_label(text)


def template_name(suffix: str, content: Any) -> str:
    """A ResourceClaimTemplate name from its content: equal shapes share one template."""
    return dns_label(f"dralab-{suffix}-{manifest_seed(content)[:HASH_LEN]}")
