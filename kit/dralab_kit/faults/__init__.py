"""One fault-scenario engine for both profiles (``local`` and ``node``), with one leak audit.

- :mod:`.audit`: the pure audits every scenario ends with (leaked claims and capacity, over-commit, CDI specs)
- :mod:`.target`: the struck node on either profile: its components by role, CDI folder, call records, workload
- :mod:`.context`: what a scenario works with (:class:`~.context.Ctx`): the apiserver reads, waits, the audit
- :mod:`.engine`: the scenario registry and :func:`~.engine.run_scenario`, which adds the final audit
- :mod:`.workloads`: Deployments and StatefulSets the scenarios drive, and waiting for their rollouts
- :mod:`.denier`: a validating webhook that refuses pods after dralab mutated them
- :mod:`.scenarios`: the scenarios themselves

``dralab bench faults`` runs the ``local`` scenarios and ``dralab bench node`` the ``node`` ones; the
reliability suite (``tests/reliability``) runs both, asserting that each passes.
"""
