"""The worked example in docs/method.md is what the code computes (its doctest block runs here)."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "method.md"


def test_the_worked_example_of_the_method_page_runs() -> None:
    text = re.sub(r"^```.*$", "", DOC.read_text(encoding="utf-8"), flags=re.M)  # a fence ends an expected output
    test = doctest.DocTestParser().get_doctest(text, {}, "docs/method.md", str(DOC), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 5, "the worked example's doctest block is gone from docs/method.md"
    assert result.failed == 0
