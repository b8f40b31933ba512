"""``python -m mr_search.runlog.viewer TRAJECTORIES.jsonl --out trajectories.html``."""

from __future__ import annotations

import logging

from mr_search.runlog.viewer.build import main

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    raise SystemExit(main())
