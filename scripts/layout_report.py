"""How the layout's dependencies point, measured from the imports: the stage
modules that import an adapter or a driver, the ``type: ignore`` comments in the
tests, and the modules of ``streams`` each path's processor depends on.

    python scripts/layout_report.py [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import grimp

STAGES = ("ingest", "session", "consolidation", "query", "erasure")
MEMORY_CORE = ("model", "provider", "registry", "rules", "agent_configs", "cube_locks")
OUTER = ("streams.adapters", "aiokafka", "redis", "sqlalchemy", "httpx")
PATHS = {
    "chat event to its row": "streams.ingest.processor",
    "session end to its memories": "streams.consolidation.processor",
    "query to its reply": "streams.query.processor",
}
IMPORT = re.compile(r"^\s*(?:from|import)\s+([\w.]+)", re.M)


def stage_modules(root: Path) -> list[Path]:
    files = [f for s in STAGES for f in (root / "streams" / s).rglob("*.py")]
    memory = root / "streams" / "memory"
    for name in MEMORY_CORE:
        files += [memory / f"{name}.py"] if (memory / f"{name}.py").exists() else []
        files += list((memory / name).rglob("*.py")) if (memory / name).is_dir() else []
    return sorted(files)


def importing_outer(root: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in stage_modules(root):
        found = sorted({m for m in IMPORT.findall(f.read_text())
                        if any(m == o or m.startswith(o + ".") for o in OUTER)})
        if found:
            out[str(f.relative_to(root))] = found
    return out


def type_ignores(root: Path) -> int:
    return sum(f.read_text().count("type: ignore") for f in (root / "tests").rglob("*.py"))


def path_modules(root: Path) -> dict[str, int]:
    sys.path.insert(0, str(root))
    graph = grimp.build_graph("streams", include_external_packages=False)
    return {name: len(graph.find_upstream_modules(entry)) for name, entry in PATHS.items()
            if entry in graph.modules}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = ap.parse_args()
    outer = importing_outer(args.root)
    print(json.dumps({
        "stage_files_importing_adapters_or_drivers": len(outer),
        "import_statements": sum(len(v) for v in outer.values()),
        "files": outer,
        "type_ignores_in_tests": type_ignores(args.root),
        "modules_each_path_depends_on": path_modules(args.root),
    }, indent=1))


if __name__ == "__main__":
    main()
