"""``dralab monitor`` (serves the allocation gauges) and ``dralab top`` (shows them as a live table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from prometheus_client.core import GaugeMetricFamily


@click.command("monitor")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 in a pod).")
@click.option("--port", default=9464, show_default=True, type=int)
@click.option("--kubeconfig", default=None, type=click.Path(dir_okay=False), help="Default: in-cluster, then ~/.kube.")
@click.option("--once", is_flag=True, help="Print the /metrics text for the objects listed now, and exit.")
@click.option("--hami-metrics/--no-hami-metrics", default=True, show_default=True,
              help="Also export the gauges under HAMi's metric and label names (for HAMi dashboards).")
@click.option("--metrics-authorization/--no-metrics-authorization", default=True, show_default=True,
              envvar="DRALAB_METRICS_AUTHORIZATION",
              help="/metrics only for a bearer token the cluster authorizes for GET /metrics (TokenReview, "
              "SubjectAccessReview); off: anyone who reaches the port (the chart's metrics.authorization: false).")
@click.option("--tls-cert", default=None, envvar="DRALAB_MONITOR_TLS_CERT", type=click.Path(dir_okay=False),
              help="Serve HTTPS with this certificate (PEM, reloaded when it changes); default: plain HTTP.")
@click.option("--tls-key", default=None, envvar="DRALAB_MONITOR_TLS_KEY", type=click.Path(dir_okay=False),
              help="The certificate's private key (PEM).")
def monitor(host: str, port: int, kubeconfig: str | None, once: bool, hami_metrics: bool,
            metrics_authorization: bool = True, tls_cert: str | None = None, tls_key: str | None = None) -> None:
    """Serve per-device, per-pod and per-namespace allocation gauges on /metrics (plus /healthz, /readyz).

    The values come from watching ResourceSlices and ResourceClaims, not from the nodes. The same
    values are also exported under HAMi's names (hami_gpu_memory_allocated_bytes, GPUDeviceMemoryAllocated,
    ...; see dralab.monitor.hami) unless --no-hami-metrics.

    \b
    Example:
      dralab monitor --host 0.0.0.0 --port 9464
      curl -s -H "Authorization: Bearer $(kubectl create token prometheus)" localhost:9464/metrics
      dralab monitor --no-metrics-authorization   # trusted network only: /metrics for anyone
    """
    from dralab.kube import Kube
    from dralab.monitor.collector import AllocationWatch, registry_for
    from dralab.monitor.server import MonitorServer

    api = Kube.from_kubeconfig(kubeconfig)
    if once:
        from prometheus_client import CollectorRegistry, generate_latest

        from dralab.monitor.allocation import compute
        from dralab.monitor.collector import CLAIMS, SLICES, families

        alloc = compute(api.list_all(SLICES)[0], api.list_all(CLAIMS)[0])

        class _Once:
            def collect(self) -> list[GaugeMetricFamily]:
                return families(alloc, hami_metrics)

        registry = CollectorRegistry()
        registry.register(_Once())
        click.echo(generate_latest(registry).decode(), nl=False)
        return
    from dralab.kube.authz import metrics_authorizer

    watch = AllocationWatch(api)
    auth = metrics_authorizer(metrics_authorization, api, "monitor")
    server = MonitorServer(registry_for(watch, hami_metrics), watch.ready, host, port, metrics_auth=auth,
                           tls_cert=tls_cert, tls_key=tls_key)
    watch.start()
    note = "" if auth is not None else " (no authorization: --no-metrics-authorization)"
    click.echo(f"serving allocation gauges on {server.scheme}://{host}:{server.port}/metrics{note}", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        watch.stop()


@click.command("top")
@click.option("-n", "--namespace", default=None, help="Only this namespace's claims.")
@click.option("--once", is_flag=True, help="Print the table once and exit (no live view).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="json (with --once): devices, shares (with what the driver applied, from the claim's "
                   "status.devices), per-pod and per-namespace sums.")
@click.option("--kubeconfig", default=None, type=click.Path(dir_okay=False), help="Default: in-cluster, then ~/.kube.")
def top(namespace: str | None, once: bool, output: str, kubeconfig: str | None) -> None:
    """A live table of device shares: device, node, enforcement, memory used/total, cores used/total, sharers.

    A node whose driver runs with enforcement: none shows NONE and a warning line: quotas are not
    enforced in its containers.

    \b
    Example:
      dralab top                    # redrawn on every slice or claim change; Ctrl-C ends it
      dralab top -n team-a --once
    """
    from dralab.kube import Kube
    from dralab.monitor.allocation import compute
    from dralab.monitor.collector import CLAIMS, SLICES, AllocationWatch
    from dralab.monitor.top import as_json, plain, table

    api = Kube.from_kubeconfig(kubeconfig)
    if once:
        alloc = compute(api.list_all(SLICES)[0], api.list_all(CLAIMS)[0], namespace)
        click.echo(as_json(alloc) if output == "json" else plain(alloc), nl=output == "json")
        return
    from rich.live import Live

    watch = AllocationWatch(api)
    watch.start()
    title = f"device shares ({namespace})" if namespace else "device shares"
    try:
        with Live(table(watch.allocation(namespace), title), auto_refresh=False) as live:
            while True:
                watch.changed.wait(5.0)  # an event, or a periodic redraw
                watch.changed.clear()
                live.update(table(watch.allocation(namespace), title), refresh=True)
    except KeyboardInterrupt:
        pass
    finally:
        watch.stop()
