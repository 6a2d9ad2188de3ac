"""``dralab image``: build dralab's container image without a Docker daemon, and look inside an archive."""

from __future__ import annotations

from pathlib import Path

import click

from dralab import __version__


@click.group(short_help="Build dralab's container image with buildah (no Docker daemon).")
def image() -> None:
    """Build dralab's image from the Dockerfile with buildah (no Docker daemon, no registry).

    \b
    Example:
      dralab image build                      # prints the OCI archive's path
      ctr -n k8s.io images import --local "$(dralab image build --tag dev)"
      dralab image inspect ~/.cache/dralab/image/out/dralab-dev-amd64.oci.tar
    """


@image.command("build")
@click.option("--tag", default=__version__, show_default=True, help="tag of dralab.local/dralab")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the OCI archive to write (default: ${DRALAB_CACHE:-~/.cache/dralab}/image/out/)")
@click.option("--platform", default=None, metavar="linux/ARCH", help="this machine's architecture only")
@click.option("--context", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="the checkout to build (default: the one dralab runs from)")
@click.option("--python-image", default=None, help="an image already in the storage instead of the local base")
@click.option("--debian-image", default=None, help="the vcore stage's base (default: the Python base)")
@click.option("--refresh-base", is_flag=True, help="remake the Debian base (today's security updates)")
@click.option("--no-cache", is_flag=True, help="rerun every Dockerfile step")
def build_cmd(tag: str, out: Path | None, platform: str | None, context: Path | None, python_image: str | None,
              debian_image: str | None, refresh_base: bool, no_cache: bool) -> None:  # fmt: skip
    """Build the image into an OCI archive that `ctr images import` names dralab.local/dralab:TAG.

    Needs root, buildah and mmdebstrap (apt-get install buildah mmdebstrap). The Debian base is
    made once and cached; buildah's storage is private to ${DRALAB_CACHE:-~/.cache/dralab}/image/.
    Progress goes to stderr, the archive's path to stdout.
    """
    import time

    from dralab_kit.image.build import build

    started = time.monotonic()
    result = build(tag, archive=out, platform=platform, context=context, python_image=python_image,
                   debian_image=debian_image, refresh_base=refresh_base, layers=not no_cache,
                   say=lambda msg: click.echo(msg, err=True))  # fmt: skip
    click.echo(f"done in {time.monotonic() - started:.1f}s", err=True)
    click.echo(str(result.archive))


@image.command("inspect")
@click.argument("archive", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--verify", is_flag=True, help="also check every blob against its digest")
def inspect_cmd(archive: Path, verify: bool) -> None:
    """What an OCI archive's image holds: name, platform, user, entrypoint, layers, Python packages."""
    from dralab_kit.image.oci import Archive, site_packages

    with Archive(archive) as arc:
        if verify:
            arc.verify()
        info = arc.info()
        files = arc.files()
    click.echo(f"names:       {', '.join(info.names) or '(none)'}")
    click.echo(f"manifest:    {info.manifest_digest}")
    click.echo(f"platform:    {info.os}/{info.architecture}")
    click.echo(f"user:        {info.user or '(root)'}")
    click.echo(f"entrypoint:  {info.entrypoint} cmd {info.cmd}")
    click.echo(f"env:         {' '.join(info.env)}")
    click.echo(f"layers:      {len(info.layers)}, {info.size / 2**20:.1f} MiB compressed")
    click.echo(f"files:       {len(files)}, {sum(f.size for f in files.values()) / 2**20:.1f} MiB")
    click.echo(f"python:      {' '.join(p for p in site_packages(files) if p.endswith('.dist-info'))}")
