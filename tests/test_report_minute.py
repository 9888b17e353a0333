"""A report read in a minute: the answers first, a short table per workload, the rest
folded; the Markdown summary small enough for a CI job summary.

Rendered from the report fixtures (a sweep saved and loaded like any other) and from
the two stored default sweeps of a 2-core Xeon (``tests/fixtures/stored-sweeps.tar.xz``,
the sweeps the limits were set on), on every machine.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.results.store import save
from reports.explain import split_profiles
from reports.html import render_html
from reports.markdown import SUMMARY_LIMIT, render_markdown
from reports.report import build
from tests.helpers import report_results, stored_sweeps

ABOVE_PLOT_WORDS = 400  # the HTML's text before the first plot, folded text included
PARAGRAPH_WORDS = 60  # any one block of text before the first plot
BLOCKS = {"p", "li", "div", "td", "th", "summary", "details", "h1", "h2", "h3", "h4",
          "dt", "dd", "figcaption", "tr", "ul", "table"}


class _AboveFirstPlot(HTMLParser):
    """The text before the first <figure>: every word, and the words of each block."""

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []
        self.blocks: list[list[str]] = [[]]
        self.done = False
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "figure":
            self.done = True
        if tag in ("style", "title"):
            self.skip += 1
        if tag in BLOCKS:
            self.blocks.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "title"):
            self.skip -= 1
        if tag in BLOCKS:
            self.blocks.append([])

    def handle_data(self, data: str) -> None:
        if self.done or self.skip:
            return
        self.words += data.split()
        self.blocks[-1] += data.split()


def above_first_plot(page: str) -> _AboveFirstPlot:
    """Parse ``page`` up to its first plot (it must have one)."""
    assert "<figure" in page, "the report has no plot"
    parsed = _AboveFirstPlot()
    parsed.feed(page)
    return parsed


def _sweeps(tmp_path: Path) -> list[Path]:
    sweep = tmp_path / "fixture-sweep"
    for r in report_results():
        save(r, sweep / "results" / f"{r.key}.json")
    return [sweep, *stored_sweeps(tmp_path / "stored")]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, str, str]]:
    out = []
    for sweep in _sweeps(tmp_path_factory.mktemp("minute")):
        report = build(sweep)
        out.append((sweep, render_html(report), render_markdown(report)))
    return out


def test_the_html_answers_before_the_first_plot_in_few_words(
        rendered: list[tuple[Path, str, str]]) -> None:
    assert [sweep.name for sweep, _, _ in rendered] == ["fixture-sweep", "a", "b"]
    for sweep, page, _ in rendered:
        seen = above_first_plot(page)
        assert len(seen.words) <= ABOVE_PLOT_WORDS, (sweep, len(seen.words))
        longest = max(seen.blocks, key=len)
        assert len(longest) <= PARAGRAPH_WORDS, (sweep, " ".join(longest))
        text = " ".join(seen.words)
        # The first screen answers: the answers table and the first workload's short table.
        assert "answer vs it" in text and "vs the answer" in text, sweep
        before = page[:page.index("<figure")]
        assert "class='answers'" in before and "class='brief'" in before


def test_the_explanations_are_folded_and_paths_are_links(
        rendered: list[tuple[Path, str, str]]) -> None:
    for sweep, page, _ in rendered:
        assert page.count("<details class='more'>") >= 1, sweep
        # No profile path inside a sentence: each is a link (or the one command).
        text = html.unescape(re.sub(r"<a [^>]*>[^<]*</a>", "", page))
        assert not re.search(r"profiles: [^<]*; open them with", text), sweep
        assert split_profiles(text)[1] == [], sweep


def test_the_markdown_summary_fits_a_ci_job_summary(
        rendered: list[tuple[Path, str, str]]) -> None:
    for sweep, _, md in rendered:
        size = len(md.encode("utf-8"))
        # GitHub's limit is 1 MiB; a stored default sweep stays far below it.
        assert size <= SUMMARY_LIMIT, (sweep, size)
        head = md.split("\n### ")[0]  # before the first workload
        assert "**Answers**" in head and "| configuration | examples/s |" in md
        paragraphs = [p for p in head.split("\n\n") if not p.lstrip().startswith("|")]
        assert max(len(p.split()) for p in paragraphs) <= PARAGRAPH_WORDS, sweep


def test_split_profiles_takes_the_paths_out_of_a_sentence() -> None:
    text = ("x over b (profiles: /s/a, /s/b; open them with: tensorboard --logdir /s). "
            "cause not measured: the profiled steps do not show the difference "
            "(10 vs 12 ms per step; profiles: /s/c; open them with: tensorboard --logdir "
            "/s/c). end")
    cut, dirs = split_profiles(text)
    assert dirs == ["/s/a", "/s/b", "/s/c"]
    assert cut == ("x over b. cause not measured: the profiled steps do not show the "
                   "difference (10 vs 12 ms per step). end")
