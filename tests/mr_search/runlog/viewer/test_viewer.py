"""The trajectory viewer: a static page that renders meta-episodes, checked in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from mr_search.eval.records import make_attempt, make_record, write_jsonl
from mr_search.prompts import REFLECTION_PROMPT
from mr_search.runlog.viewer.build import build_viewer, main

_CANDIDATES = ("/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or "")
CHROMIUM = next((p for p in _CANDIDATES if p and os.path.exists(p)), None)
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def _episode(uid: str, source: str, answers: list[str], gold: str) -> dict[str, Any]:
    attempts = []
    for k, answer in enumerate(answers):
        turns = [{"role": "user", "content": REFLECTION_PROMPT}] if k else []
        turns += [
            {
                "role": "assistant",
                "content": ("Let me check the city again. " if k else "") + f"<search>{uid} query {k}</search>",
            },
            {"role": "tool", "content": f"<information>Doc 1(Title: {gold}) passage for {uid} #{k}</information>"},
            {"role": "assistant", "content": f"<answer>{answer}</answer>"},
        ]
        attempts.append(make_attempt(k, turns, [gold], advantage=[0.75, -0.25][k]))
    return make_record(
        method="mr_search",
        uid=uid,
        data_source=source,
        question=f"Question {uid}?",
        golden_answers=[gold],
        attempts=attempts,
    )


@pytest.fixture
def trajectories(tmp_path: Path) -> Path:
    return write_jsonl(
        [
            _episode("alpha", "embedded_1hop", ["Kumholt", "Brimholt"], "Brimholt"),  # improved after reflection
            _episode("beta", "embedded_2hop", ["Tenaria", "Tenaria"], "Tenaria"),
            _episode("gamma", "embedded_2hop", ["</script><b>x</b>", "Nope"], "Vodikica"),  # hostile text stays text
        ],
        tmp_path / "trajectories.jsonl",
    )


def test_page_is_self_contained_and_embeds_every_episode(trajectories: Path, tmp_path: Path) -> None:
    page = build_viewer(trajectories, tmp_path / "view.html").read_text()
    assert not re.search(r"""(src|href)=["']https?://""", page), "the page must load no external resource"
    data = page.split('type="application/json">', 1)[1].split("</script>", 1)[0]
    episodes = json.loads(data)
    assert [e["uid"] for e in episodes] == ["alpha", "beta", "gamma"]
    assert [e["improved"] for e in episodes] == [True, False, False]
    assert episodes[0]["attempts"][1]["reflection"] == "Let me check the city again."


def test_cli_writes_the_page(trajectories: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(trajectories), "--out", str(tmp_path / "x.html")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "x.html")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: run scripts/setup_browser.sh (needs root apt-get)")
def test_page_renders_and_filters_in_chromium(trajectories: Path, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")
    page_path = build_viewer(trajectories, tmp_path / "trajectories.html")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(page_path.as_uri())
            assert page.locator("#count").inner_text() == "3 of 3 meta-episodes"
            alpha = page.locator('section[data-uid="alpha"]')
            attempts = alpha.locator(".attempt")
            assert attempts.count() == 2
            assert "answer: Kumholt" in attempts.nth(0).inner_text()
            assert "answer: Brimholt" in attempts.nth(1).inner_text()
            assert "advantage 0.75" in attempts.nth(0).inner_text()
            assert "Reflection: Let me check the city again." in attempts.nth(1).inner_text()
            # Passages are collapsed until the search is opened.
            passage = attempts.nth(0).locator("details.search pre")
            assert not passage.is_visible()
            attempts.nth(0).locator("details.search summary").click()
            assert "passage for alpha #0" in passage.inner_text()
            # Hostile model text is shown as text, never parsed as markup.
            assert "answer: </script><b>x</b>" in page.locator('section[data-uid="gamma"] .attempt').nth(0).inner_text()
            page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)

            page.check("#improved-filter")
            assert page.locator("section.episode").count() == 1
            assert page.locator("section.episode").get_attribute("data-uid") == "alpha"
            page.uncheck("#improved-filter")
            page.select_option("#source-filter", "embedded_2hop")
            assert [page.locator("section.episode").nth(i).get_attribute("data-uid") for i in range(2)] == [
                "beta",
                "gamma",
            ]
            assert page.locator("#count").inner_text() == "2 of 3 meta-episodes"
            assert errors == []
        finally:
            browser.close()
    assert (tmp_path / "viewer.png").read_bytes()[:4] == b"\x89PNG"
