"""Packs the GPU-runner bundle: a tarball that runs the test suite on a GPU host without Bazel.

usage: make_bundle.py OUT.tar.gz DEST=SRC [DEST=SRC ...]

Each DEST is the path inside the bundle (under `oprt-bundle/`). The archive is
deterministic (sorted, fixed mtime and owner) so it caches like any other output.
"""

import gzip
import io
import sys
import tarfile

ROOT = "oprt-bundle"


def _add(tar: tarfile.TarFile, dest: str, src: str) -> None:
    with open(src, "rb") as f:
        data = f.read()
    info = tarfile.TarInfo(f"{ROOT}/{dest}")
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o755 if dest.endswith((".sh", ".so")) else 0o644
    tar.addfile(info, io.BytesIO(data))


def main(argv: list[str]) -> int:
    out, pairs = argv[1], [arg.split("=", 1) for arg in argv[2:]]
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for dest, src in sorted(pairs):
                _add(tar, dest, src)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
