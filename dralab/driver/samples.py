"""Lab 20's claims as data: the allocated claim A of Step 5, and variations of it.

Used by the benchmark's in-memory claim source, the tests and the docs' examples, so all of them
speak about the same claim.
"""

from __future__ import annotations

from typing import Any

from dralab.driver.claims import allocated_claim

NODE = "aio-node74-arm"
DRIVER = "ascend.project-hami.io"
NAMESPACE = "dra-ascend-e2e"
CLAIM_A = "dra-ascend-e2e-ascend-share-a-app-ascend310p"
CLAIM_A_UID = "8ec6bbf9-8ce0-4aa1-bc57-7078653d090c"
SHARE_A = "be06132e-0aff-4efc-bd8e-42a4e06ed385"


def lab20_claim(
    uid: str = CLAIM_A_UID,
    name: str = CLAIM_A,
    namespace: str = NAMESPACE,
    device: str = "npu-0-0",
    memory: str | None = "8Gi",
    cores: str | None = "50",
    share: str | None = SHARE_A,
    driver: str = DRIVER,
    node: str = NODE,
) -> dict[str, Any]:
    """Claim A as allocated in Lab 20 Step 5 (8 GiB and 50 cores of npu-0-0), with overridable fields."""
    result: dict[str, Any] = {"request": "npu", "driver": driver, "pool": node, "device": device}
    if share is not None:
        result["shareID"] = share
    consumed = {k: v for k, v in (("cores", cores), ("memory", memory)) if v is not None}
    if consumed:
        result["consumedCapacity"] = consumed
    return allocated_claim(namespace, name, uid, [result], node=node)
