"""Write `forward_reference.json`: every case of `forward_cases` as the current tree's forward computes it.

    TRITON_INTERPRET=1 .venv/bin/python -m tests.pruners.data.make_forward_reference

Written 2026-12-05 with the tree before `pruners/model.py` was split (its forward is the reference the
split must reproduce bit for bit); rerunning it on a later tree must leave the file unchanged.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

OUT = Path(__file__).with_name("forward_reference.json")


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("make_forward_reference: set TRITON_INTERPRET=1 (the reference is the CPU interpreter's)",
              file=sys.stderr)
        return 2
    from tests.pruners.data.forward_cases import CASES, run_case

    names = list(argv if argv else CASES)
    data = json.loads(OUT.read_text()) if OUT.exists() and argv else {}
    for name in names:
        data[name] = run_case(name)
        print(name, flush=True)
    OUT.write_text(json.dumps({k: data[k] for k in CASES if k in data}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
