"""Print where a matrix run stands and pack its results (JSON reports, runner logs, server-log tails).

python -m gpu_tests.runner.snapshot /tmp/matrix OUT_DIR/results.tgz
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path


def status_lines(root: Path) -> list[str]:
    lines = []
    for path in sorted((root / "reports").glob("*.json")):
        try:
            r = json.loads(path.read_text())
        except ValueError:
            continue
        failed = [a["name"] for a in r.get("assertions", []) if not a["passed"]]
        t = r.get("timings", {})
        ev = r.get("events") or {}
        lines.append(
            f"{r.get('case_id', path.stem):50} {r.get('status', '?'):7} "
            f"start {t.get('server_startup_s', 0):5.0f}s "
            f"check {t.get('check_s', 0):5.0f}s failed={failed} missing={ev.get('missing_cpu_groups')} "
            f"{(r.get('error') or '')[:160]}"
        )
    return lines


def pack(root: Path, dest: Path, tail_lines: int = 150) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if not path.is_file():
                continue
            rel = path.relative_to(root)
            if path.suffix == ".json" or (path.suffix == ".log" and "server" not in path.name):
                tar.add(path, arcname=str(rel))
            elif path.name.endswith(".server.log"):
                tail = "\n".join(path.read_text(errors="replace").splitlines()[-tail_lines:]).encode()
                info = tarfile.TarInfo(str(rel) + ".tail")
                info.size = len(tail)
                tar.addfile(info, io.BytesIO(tail))


def main() -> int:
    root, dest = Path(sys.argv[1]), Path(sys.argv[2])
    for line in status_lines(root):
        print(line[:300])
    if root.exists():
        pack(root, dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
