"""dralab's one Kubernetes API layer, built on the official ``kubernetes`` package.

Why this shape: dralab speaks raw API paths and keeps objects as plain dicts end to end (DRA
fields of alpha features, conversion output, admission patches), so the typed models and the
generated request serializer of ``kubernetes.client`` are skipped. What is used from the official
package is what is hard to get right: its kubeconfig and in-cluster loaders (contexts, exec
plugins, OIDC, TLS options, proxies) and its connection pool (``kubernetes.client``'s urllib3
``RESTClientObject``). The asyncio side (:class:`AsyncKube`, for the webhook's admission path)
uses the same loaded credentials over a small bounded pool of kept-alive HTTP/1.1 connections.

- :mod:`.config`: one loader for kubeconfig and in-cluster credentials; rotating tokens; no key files.
- :mod:`.tls`: the synchronous client's shared TLS context, which resumes the session of a connection the
  apiserver closed instead of a full handshake.
- :mod:`.client`: :class:`Kube`, the synchronous client (request/get/list/create/patch/apply/delete/watch).
- :mod:`.aio`: :class:`AsyncKube`, the same calls on asyncio; :mod:`.http1`: its connection pool.
- :mod:`.watch`: :class:`ListWatch`, the one list-and-watch loop (resourceVersion, 410 relist, backoff).
- :mod:`.informer`: :class:`Informer` (a cache over a ListWatch) and :class:`PodClaimLoop` (pods + claims).
- :mod:`.paths`: URL paths with escaped segments; :mod:`.kinds`: the one table of well-known kinds (apiVersion,
  resource, scope); :mod:`.discovery`: any other kind to its resource, asked of the apiserver.
- :mod:`.errors`: :class:`KubeError`, the one error type (``status`` 0: no answer).
- :mod:`.authz`: callers of ``/metrics`` checked with TokenReview and SubjectAccessReview.

Which client does which job (one of each; issue 28):

- Talking to an apiserver from the product: :class:`Kube` (threads, watches) or :class:`AsyncKube`
  (the admission path). Their credentials and TLS come from :mod:`.config` (:meth:`KubeConfig.ssl_context`),
  and so do those of the kit's own API clients (the local cluster's ``ClusterHandle.admin_config``).
- HTTP/1.1 on the wire: :class:`.http1.Connection`. The admission benchmark times its POSTs on
  one of these per worker, bare (no pool, no resend), so what it measures is one request and its
  answer on a kept-alive connection, on the same code the webhook's own calls go through.
- The kit's plain HTTP (health probes, ``/metrics`` scrapes of any component, the concurrency
  benchmarks' bursts, which stream a watch while they create): httpx. No product code calls it.
"""

from __future__ import annotations

from dralab.kube.aio import AsyncKube
from dralab.kube.client import PARTIAL_METADATA, PATCH_TYPES, Kube
from dralab.kube.config import KubeConfig, TokenFile, load_config, load_files, load_incluster, load_kubeconfig
from dralab.kube.discovery import Discovery
from dralab.kube.errors import KubeError
from dralab.kube.watch import Expired, ListWatch

__all__ = [
    "PARTIAL_METADATA",
    "PATCH_TYPES",
    "AsyncKube",
    "Discovery",
    "Expired",
    "Kube",
    "KubeConfig",
    "KubeError",
    "ListWatch",
    "TokenFile",
    "load_config",
    "load_files",
    "load_incluster",
    "load_kubeconfig",
]
