"""The admission webhook: HAMi-syntax pods in, DRA pods and their claims out, with no claim outliving its pod.

Modules, one job each:

- Requests: :mod:`.server` (the ASGI admission server), :mod:`.handlers` (AdmissionReview in and out),
  :mod:`.lifecycle` (what a converted pod gets created), :mod:`.volcano` (Volcano Jobs),
  :mod:`.converters` (the converters a configuration implies), :mod:`.extended` (DRAExtendedResource
  warnings), :mod:`.limits` (bounds against hostile callers).
- Connections and process: :mod:`.transport` (TLS and request deadlines), :mod:`.tls` (reloaded
  certificates), :mod:`.certs` (self-signed ones), :mod:`.workers` (N server workers),
  :mod:`.metrics` (Prometheus), :mod:`.cli` (``dralab convert``, ``dralab webhook serve``).
- Background: :mod:`.controllers` (what the elected replica runs: the janitor, adoption of HAMi-DRA's
  claims, ShareBudgets, the Lease, the CA written into the configurations).
- Registration: :mod:`.registration` (the webhook configurations).
"""
