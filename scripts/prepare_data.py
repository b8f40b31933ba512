#!/usr/bin/env python
"""Prepares MR-Search datasets; see ``python scripts/prepare_data.py --help`` and ``mr_search.data.cli``."""

from __future__ import annotations

import sys

from mr_search.data.cli import main

if __name__ == "__main__":
    sys.exit(main())
