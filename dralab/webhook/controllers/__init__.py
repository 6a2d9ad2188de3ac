"""The webhook's background controllers: what the elected replica runs beside admission.

- :mod:`.janitor`: no managed claim outlives its pod (owner patches, orphan reaping)
- :mod:`.adoption`: HAMi-DRA's claims get their pods as owners, orphans are reaped (migration)
- :mod:`.budgets` and :mod:`.budget_lock`: ShareBudgets, their status and the admission gate's lock
- :mod:`.lease`: leader election on a coordination.k8s.io Lease
- :mod:`.cainject`: the webhook writes its own CA into its configurations (chart caInjector: dralab)
"""
