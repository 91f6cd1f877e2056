"""Write orchestrator/folders/shipped.json from the repository's sub_graphs/ (run after editing them).

    .venv/bin/python scripts/shipped_manifest.py
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.folders.shipped import MANIFEST, manifest_of

REPOSITORY = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    manifest = manifest_of(REPOSITORY / "sub_graphs")
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{MANIFEST}: {len(manifest)} shipped folder(s)")
