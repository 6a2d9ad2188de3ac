"""The converters a configuration implies, built in one place for the webhook and for ``dralab convert``.

The offline preview must decide as the webhook does: a pod the webhook denies (too many claims for
``webhook.maxClaimsPerPod``, a HAMi resource its HAMi config does not allow, ...) is refused by
``dralab convert`` with the same message. Both therefore build their converters with
:func:`build_converters` from the same :class:`~dralab.config.Config` (``load_config``: the config file
and HAMi's device config), and nothing else builds a pod converter for admission.
"""

from __future__ import annotations

from dataclasses import dataclass

from dralab.config import Config
from dralab.model.convert import Converter
from dralab.model.volcano import template_converter
from dralab.webhook.registration import ALWAYS_EXCLUDED


@dataclass(frozen=True)
class Converters:
    """What admission converts with, for one configuration."""

    pod: Converter  # Pods: the configured lifecycle, opt-out label and webhook.maxClaimsPerPod
    volcano: Converter  # Volcano Jobs' task templates (template lifecycle)
    volcano_registered: bool  # migration.volcanoJobs: the webhook is registered for (so sees) Volcano Jobs
    excluded: frozenset[str]  # namespaces never converted (webhook.excludeNamespaces and the fixed ones)


def build_converters(config: Config) -> Converters:
    """The converters of ``config``: the webhook's (:func:`dralab.webhook.server.build`) and ``dralab convert``'s."""
    wh = config.webhook
    return Converters(
        pod=Converter(config.vendors, wh.lifecycle, wh.opt_out_label, max_claims=wh.max_claims_per_pod),
        volcano=template_converter(config.vendors, wh.opt_out_label),
        volcano_registered=config.migration.volcano_jobs,
        excluded=frozenset({*wh.exclude_namespaces, *ALWAYS_EXCLUDED}),
    )
