"""``dralab convert`` (offline conversion) and ``dralab webhook serve``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml

from dralab import yamlio
from dralab.config import Config, load_config
from dralab.errors import UserError
from dralab.model.denials import Denied
from dralab.model.volcano import convert_job
from dralab.model.volcano import is_job as is_volcano_job
from dralab.webhook.converters import build_converters
from dralab.webhook.limits import check_namespace, check_pod_names

HAMI_CONFIG_HELP = "HAMi's device-config.yaml (or its ConfigMap): resource names, chips, annotations, vendors."


def _documents(text: str, source: str) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yamlio.load_all(text, source) if d is not None]
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "parse error"
        raise UserError(f"{source}: not valid YAML ({first})") from None
    pods: list[dict[str, Any]] = []
    for number, doc in enumerate(docs, 1):
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        for item in items or []:
            if not isinstance(item, dict) or (item.get("kind") != "Pod" and not is_volcano_job(item)):
                kind = item.get("kind") if isinstance(item, dict) else type(item).__name__
                raise UserError(
                    f"{source}: document {number} is a {kind or 'document without kind'}, not a Pod or a Volcano Job"
                )
            pods.append(item)
    if not pods:
        raise UserError(f"{source}: no Pod documents (nor Volcano Jobs) found")
    return pods


def _namespace(pod: dict[str, Any], flag: str | None) -> str:
    own = (pod.get("metadata") or {}).get("namespace")
    if own and flag and own != flag:
        raise UserError(
            f"pod {pod['metadata'].get('name', '')} is in namespace {own} but --namespace is {flag}; drop one of them"
        )
    return own or flag or "default"


BUDGETS_NOTE = (
    "ShareBudgets were not consulted (offline, no cluster): the webhook may still deny a pod whose claims "
    "would take its namespace past a budget"
)


@dataclass
class Preview:
    """What ``dralab convert`` prints: the objects as YAML (stdout) and the notes (stderr)."""

    text: str
    notes: list[str] = field(default_factory=list)


def preview_documents(text: str, namespace: str | None, cfg: Config, source: str = "-") -> Preview:
    """Every pod and Volcano Job of ``text`` as the webhook serving ``cfg`` would admit it, as YAML.

    The converters are the webhook's (:func:`~dralab.webhook.converters.build_converters`) and the checks
    run in the webhook's order, so what the webhook denies is refused here with its message
    (:class:`UserError`, prefixed with the object): names first, then excluded namespaces (left
    unchanged), then conversion with ``webhook.maxClaimsPerPod``. Volcano Jobs are converted only when
    the webhook is registered for them (``migration.volcanoJobs``); budgets need a cluster and are not
    consulted (a note says so).
    """
    convs = build_converters(cfg)
    notes: list[str] = []
    out: list[dict[str, Any]] = []
    claims_made = False
    for obj in _documents(text, source):
        ns = _namespace(obj, namespace)
        raw_meta = obj.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        name = meta.get("name") or meta.get("generateName", "")
        job = is_volcano_job(obj)
        what = "Volcano Job" if job else "pod"
        try:
            ns = check_namespace(ns)  # as the webhook: names are checked before anything reads them
            if ns in convs.excluded:
                notes.append(f"{what} {ns}/{name}: namespace {ns} is excluded (webhook.excludeNamespaces), "
                             "the webhook leaves it unchanged")
                out.append(obj)
                continue
            if job and not convs.volcano_registered:
                notes.append(f"Volcano Job {ns}/{name}: left unchanged, the webhook is not registered for Volcano "
                             "Jobs (its pods are converted one by one); set migration.volcanoJobs: true to convert it")
                out.append(obj)
                continue
            if job:  # each task's pod template gets ResourceClaimTemplates
                converted = convert_job(obj, convs.volcano, namespace=ns)
                out.append(converted.job)
                out.extend(converted.objects)
                continue
            check_pod_names(meta.get("name"), meta.get("generateName"))
            conv = convs.pod.convert(obj, namespace=ns)
        except Denied as exc:
            raise UserError(f"{what} {ns}/{name}: {exc}") from None
        claims_made = claims_made or (conv.changed and convs.pod.lifecycle == "claim" and bool(conv.objects))
        out.append(conv.pod)
        out.extend(conv.objects)
    if claims_made:  # the budget gate checks the claims the webhook creates (claim lifecycle)
        notes.append(BUDGETS_NOTE)
    return Preview(yaml.safe_dump_all(out, sort_keys=False, width=4096, default_flow_style=False), notes)


def convert_documents(
    text: str, namespace: str | None, config_path: str | None, source: str = "-", hami_config: str | None = None
) -> str:
    """Every pod of ``text`` converted, each followed by the objects the webhook would create, as YAML."""
    return preview_documents(text, namespace, load_config(config_path, hami_config), source).text


@click.command("convert")
@click.option(
    "-f", "--filename", required=True, help="File with Pods and/or Volcano Jobs (batch.volcano.sh), or - for stdin."
)
@click.option("-n", "--namespace", default=None, help="Namespace for pods without one (default: default).")
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False), help="dralab config file.")
@click.option("--hami-config", default=None, type=click.Path(dir_okay=False), help=HAMI_CONFIG_HELP)
def convert(filename: str, namespace: str | None, config_path: str | None, hami_config: str | None) -> None:
    """Convert HAMi-syntax pods offline: prints each mutated Pod and the objects the webhook would create.

    \b
    Example:
      dralab convert -f pod.yaml > converted.yaml
      kubectl get pod mypod -o yaml | dralab convert -f - --namespace team-a
    """
    if filename == "-":
        text, source = sys.stdin.read(), "<stdin>"
    else:
        try:
            with open(filename, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise UserError(f"cannot read {filename}: {exc.strerror}") from None
        source = filename
    cfg = load_config(config_path, hami_config)
    for line in cfg.notes:
        click.echo(f"note: {line}", err=True)
    preview = preview_documents(text, namespace, cfg, source)
    for line in preview.notes:
        click.echo(f"note: {line}", err=True)
    click.echo(preview.text, nl=False)


@click.group("webhook")
def webhook() -> None:
    """Run the admission webhook.

    \b
    Example:
      dralab webhook serve --cert tls.crt --key tls.key --port 8443 --kubeconfig ~/.kube/config
    """


@webhook.command("serve")
@click.option("--cert", required=True, type=click.Path(exists=True, dir_okay=False), help="Serving certificate (PEM).")
@click.option("--key", required=True, type=click.Path(exists=True, dir_okay=False), help="Private key (PEM).")
@click.option("--port", default=8443, show_default=True, type=int)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False), help="dralab config file.")
@click.option("--kubeconfig", default=None, type=click.Path(dir_okay=False), help="Default: in-cluster, then ~/.kube.")
@click.option("--namespace", "own_namespace", default="", help="The webhook's own namespace (never converted).")
@click.option("--no-kube", is_flag=True, help="Convert only: create no claims, run no janitor (testing).")
@click.option("--bench-routes", is_flag=True, hidden=True)
@click.option("--hami-config", default=None, type=click.Path(dir_okay=False), help=HAMI_CONFIG_HELP)
@click.option(
    "--client-ca",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="Require a client certificate signed by this CA (the apiserver's, see SECURITY.md); default: none.",
)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=0),
              help="Server processes sharing the port (0: one per core, at most 8); see dralab/webhook/workers.py.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Run the janitor only while holding the Lease (needed with several workers or replicas).")
@click.option("--lease-name", default="dralab-webhook", show_default=True, help="The coordination.k8s.io Lease.")
@click.option("--lease-namespace", default=None, help="The Lease's namespace (default: --namespace, else default).")
@click.option("--inject-ca-from", default=None, type=click.Path(dir_okay=False),
              help="Write this CA (PEM) into --inject-ca-into's caBundle, keeping the rest (chart caInjector: dralab).")
@click.option("--inject-ca-into", multiple=True, metavar="mutating|validating/NAME",
              help="A webhook configuration whose caBundle --inject-ca-from keeps (repeatable).")
@click.option("--listen-fd", default=None, type=int, hidden=True)
@click.option("--shutdown-delay", default=0.0, show_default=True, type=click.FloatRange(min=0, max=300),
              help="Seconds to keep serving after SIGTERM, not ready, before closing the listener (in a cluster: "
                   "longer than the Service takes to drop the pod; the chart's webhook.shutdownDelaySeconds).")
@click.option("--no-metrics-authorization", is_flag=True,
              help="Serve /metrics to anyone (a trusted scrape network only): webhook.metricsAuthorization false.")
def serve(
    cert: str,
    key: str,
    port: int,
    host: str,
    config_path: str | None,
    kubeconfig: str | None,
    own_namespace: str,
    no_kube: bool,
    bench_routes: bool,
    hami_config: str | None = None,
    client_ca: str | None = None,
    workers: int = 1,
    leader_elect: bool = True,
    lease_name: str = "dralab-webhook",
    lease_namespace: str | None = None,
    listen_fd: int | None = None,
    no_metrics_authorization: bool = False,
    inject_ca_from: str | None = None,
    inject_ca_into: tuple[str, ...] = (),
    shutdown_delay: float = 0.0,
) -> None:
    """Serve /mutate, /validate, /healthz, /readyz and /metrics over HTTPS; certificates reload on change.

    \b
    Example:
      dralab webhook serve --cert /tls/tls.crt --key /tls/tls.key --port 8443 --namespace dralab-system
    """
    from dralab.webhook import workers as procs
    from dralab.webhook.controllers.cainject import CAInjector, Target

    cfg = load_config(config_path, hami_config)
    targets = [Target.parse(text) for text in inject_ca_into]
    if bool(inject_ca_from) != bool(targets):
        raise UserError("--inject-ca-from and --inject-ca-into go together: the CA file and where to write it")
    count = workers or procs.auto_workers()
    if count > 1 and not leader_elect and not no_kube:
        raise UserError(
            f"--workers {count} with --no-leader-elect would run {count} janitors; keep leader election on "
            "(the default) or serve with --workers 1"
        )
    if count > 1 and listen_fd is None:  # the supervisor: bind once, start the workers, wait
        sys.exit(procs.Supervisor(procs.serve_argv(), count, host, port).run())
    for line in cfg.notes:
        click.echo(f"note: {line}", err=True)

    from dralab.kube import AsyncKube, Kube
    from dralab.webhook.controllers.lease import LeaderElector
    from dralab.webhook.limits import ServerLimits
    from dralab.webhook.server import Server, background, build

    # also checks the credentials now; 10 s per call keeps a hung lease renewal within the renew deadline
    api = None if no_kube else Kube.from_kubeconfig(kubeconfig, timeout=10.0)
    admission_api = None if api is None else AsyncKube(api.config)  # the same loaded credentials
    elect = leader_elect and api is not None
    webhook = build(cfg, api, own_namespace, janitor=not elect, admission_api=admission_api, workers=count,
                    watch_classes=api is not None)
    elector = None

    def injector() -> CAInjector | None:
        return CAInjector(api, Path(inject_ca_from), targets) if api is not None and inject_ca_from else None

    if elect:
        assert api is not None
        leadership = procs.Leadership(lambda: (*background(webhook), injector()), webhook.publish)
        elector = LeaderElector(api, lease_namespace or own_namespace or "default", lease_name,
                                on_start=leadership.start, on_stop=leadership.stop)
    sock = None
    if listen_fd is not None:
        import socket

        sock = socket.socket(fileno=listen_fd)
    # /metrics: only callers the cluster authorizes (webhook.metricsAuthorization); without an API client: 503
    from dralab.kube.authz import metrics_authorizer

    enabled = cfg.webhook.metrics_authorization and not no_metrics_authorization
    metrics_auth = metrics_authorizer(enabled, admission_api, "webhook")
    server = Server(webhook, cert, key, host=host, port=port, bench_routes=bench_routes, client_ca=client_ca,
                    sock=sock, elector=elector, metrics_auth=metrics_auth,
                    limits=ServerLimits(shutdown_delay_seconds=shutdown_delay))
    alone = None if elect else injector()  # no election: this one process is the only writer
    if alone is not None:
        alone.start()
    server.run()
