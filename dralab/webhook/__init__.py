"""The admission webhook: HAMi-syntax pods in, DRA pods and their claims out, with no claim outliving its pod.

Modules, one job each:

- Requests: :mod:`.server` (the ASGI admission server), :mod:`.handlers` (AdmissionReview in and out),
  :mod:`.lifecycle` (what a converted pod gets created), :mod:`.volcano` (Volcano Jobs),
  :mod:`.converters` (the converters a configuration implies), :mod:`.extended` (DRAExtendedResource
  warnings), :mod:`.limits` (bounds against hostile callers).
- Connections and process: :mod:`.transport` (TLS and request deadlines), :mod:`.tls` (reloaded
  certificates), :mod:`.certs` (self-signed ones), :mod:`.workers` (N server workers),
  :mod:`.metrics` (Prometheus), :mod:`.cli` (``dralab convert``, ``dralab webhook serve``).
- Background: :mod:`.janitor` (no claim outlives its pod), :mod:`.adoption` (HAMi-DRA's claims),
  :mod:`.budgets` and :mod:`.budget_lock` (ShareBudgets), :mod:`.lease` (leader election).
- Registration: :mod:`.registration` (the webhook configurations), :mod:`.cainject` (its CA in them).
"""
