"""Regenerate the committed ``*_pb2.py`` / ``*_pb2_grpc.py`` from the ``.proto`` files next to this module.

Run ``python -m dralab.driver.proto.generate`` after editing a ``.proto``. The include root is the
repository root, so each descriptor is registered under its own path (``dralab/driver/proto/...``)
and the generated modules import each other as ``dralab.driver.proto.*``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROTOS = ("pluginregistration.proto", "dra_v1.proto", "dra_v1beta1.proto")


def generate(out_root: Path = ROOT) -> list[Path]:
    """Run protoc (from grpcio-tools) over every proto into ``out_root``; return the files written."""
    try:
        from grpc_tools import protoc
    except ImportError:
        from dralab.errors import UserError

        raise UserError("grpcio-tools is not installed: run `.venv/bin/pip install -e './kit[test]'`") from None
    include = Path(protoc.__file__).resolve().parent / "_proto"
    rel = [str((HERE / name).relative_to(ROOT)) for name in PROTOS]
    args = ["protoc", f"-I{ROOT}", f"-I{include}", f"--python_out={out_root}", f"--grpc_python_out={out_root}", *rel]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    written = []
    target = Path(out_root) / HERE.relative_to(ROOT)
    for name in PROTOS:
        stem = name.removesuffix(".proto")
        written += [target / f"{stem}_pb2.py", target / f"{stem}_pb2_grpc.py"]
    return written


def main() -> None:
    for path in generate():
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    sys.exit(main())
