"""Writes a wheel (PEP 427) from files given as `archive_path=file_path` pairs.

    make_wheel.py --out OUT.whl --name oprt --version 0.1.0 --tag cp311-cp311-linux_x86_64 \
        --build-info operator_runtime/_build_info.py \
        operator_runtime/__init__.py=python/operator_runtime/__init__.py ...

Bazel's //python:wheel runs it (tools/wheel/defs.bzl); it needs nothing but the standard
library. Entries are written in sorted order with a fixed timestamp, so the same inputs
give the same bytes. The build info (PYTHON_TAG, TORCH_RELEASE of the venv _C compiled
against) gives the torch requirement, pinned to that release since _C binds to its C++
API, and must agree with the tag.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import runpy
import sys
import zipfile

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--tag", required=True, help="python-abi-platform, e.g. cp311-cp311-linux_x86_64")
    parser.add_argument("--summary", default="")
    parser.add_argument("--build-info", required=True, help="operator_runtime/_build_info.py of _C")
    parser.add_argument("files", nargs="+", help="archive_path=file_path")
    args = parser.parse_args(argv)
    build_info = runpy.run_path(args.build_info)
    if not args.tag.startswith(build_info["PYTHON_TAG"] + "-"):
        sys.exit(f"make_wheel: tag {args.tag} does not match _C, built for {build_info['PYTHON_TAG']}")
    dist_info = f"{args.name}-{args.version}.dist-info"
    entries = {}
    for pair in args.files:
        archive_path, _, file_path = pair.partition("=")
        with open(file_path, "rb") as f:
            entries[archive_path] = f.read()
    metadata = [f"Metadata-Version: 2.1", f"Name: {args.name}", f"Version: {args.version}"]
    if args.summary:
        metadata.append(f"Summary: {args.summary}")
    metadata.append(f"Requires-Dist: torch=={build_info['TORCH_RELEASE']}.*")
    entries[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    entries[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: oprt tools/wheel/make_wheel.py\nRoot-Is-Purelib: false\n"
        f"Tag: {args.tag}\n"
    ).encode()
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in sorted(entries.items())]
    record.append(f"{dist_info}/RECORD,,")
    entries[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for path in sorted(entries):
            info = zipfile.ZipInfo(path, _FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            # Extension modules stay executable once installed.
            info.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
            wheel.writestr(info, entries[path])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
