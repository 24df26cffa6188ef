"""Start, stop or probe the project's Bazel remote cache: nginx with WebDAV PUT on loopback.

usage: python3 tools/remote_cache/server.py start|stop|status [--port=18080] [--state=DIR]

The cache lives in a persistent state directory (default
${XDG_CACHE_HOME:-~/.cache}/oprt-remote-cache), so a later CI run on the same machine
starts warm. nginx must be installed (`apt-get install nginx`; .ci/run does that).
There is no eviction: delete DIR/data while no Bazel server uses it to start empty.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_STATE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "oprt-remote-cache"


def _log(message: str) -> None:
    print(f"remote_cache: {message}", file=sys.stderr, flush=True)


def _pid(state: Path) -> int | None:
    """The running server's pid, or None (a failed start leaves an empty pid file)."""
    try:
        pid = int((state / "nginx.pid").read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _healthy(port: int) -> bool:
    url = f"http://127.0.0.1:{port}/health"
    try:
        put = urllib.request.Request(url, data=b"ok", method="PUT")
        urllib.request.urlopen(put, timeout=2).close()
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.read() == b"ok"
    except (urllib.error.URLError, OSError):
        return False


def start(state: Path, port: int) -> int:
    if (pid := _pid(state)) is not None:
        _log(f"already running (pid {pid}) on 127.0.0.1:{port}, data in {state / 'data'}")
        return 0
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        _log("nginx is not installed; install it (Debian: apt-get install nginx)")
        return 1
    for sub in ("data", "logs", "tmp"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    # As root, workers would run as nobody and could not write a root-owned data dir.
    user_line = "user root root;" if os.geteuid() == 0 else ""
    conf = (HERE / "nginx.conf.in").read_text()
    for key, value in {"@STATE@": str(state), "@PORT@": str(port), "@USER_LINE@": user_line}.items():
        conf = conf.replace(key, value)
    (state / "nginx.conf").write_text(conf)
    command = [nginx, "-p", str(state), "-e", str(state / "logs/error.log"), "-c", str(state / "nginx.conf")]
    subprocess.run(command + ["-t", "-q"], check=True)
    subprocess.run(command, check=True)
    for _ in range(100):
        if _healthy(port):
            _log(f"serving 127.0.0.1:{port} from {state / 'data'}")
            return 0
        time.sleep(0.05)
    _log(f"nginx did not answer on 127.0.0.1:{port}; see {state / 'logs/error.log'}")
    return 1


def stop(state: Path) -> int:
    pid = _pid(state)
    if pid is None:
        _log("not running")
        return 0
    os.kill(pid, signal.SIGQUIT)  # graceful: finish in-flight uploads
    for _ in range(100):
        if _pid(state) is None:
            _log("stopped")
            return 0
        time.sleep(0.05)
    os.kill(pid, signal.SIGTERM)
    _log("stopped (forced)")
    return 0


def status(state: Path, port: int) -> int:
    pid = _pid(state)
    entries = sum(1 for _ in (state / "data").rglob("*")) if (state / "data").exists() else 0
    print(f"pid={pid} port={port} healthy={_healthy(port) if pid else False} entries={entries} state={state}")
    return 0 if pid else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE)
    args = parser.parse_args()
    state = args.state.resolve()
    if args.action == "start":
        return start(state, args.port)
    if args.action == "stop":
        return stop(state)
    return status(state, args.port)


if __name__ == "__main__":
    sys.exit(main())
