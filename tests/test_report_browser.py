"""The HTML report in a real browser: headless Chromium, driven over the DevTools pipe.

Chromium is started with ``--remote-debugging-pipe`` (commands on fd 3, replies on
fd 4, NUL-terminated JSON), which needs nothing beyond the standard library: no
websocket client, no port to race for. The test loads the report, waits for the load
event, asks the page whether every image decoded, collects console errors, uncaught
exceptions and failed loads, and saves a screenshot. Where CI=true a missing
Chromium fails the test (``.ci/run`` installs it); elsewhere the test is skipped with
the reason.

    python -m tests.test_report_browser REPORT.html SHOT.png   # the same check by hand
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")
PAGE_TIMEOUT_S = 60.0
# Every <img> must be complete and decoded to a non-empty bitmap.
IMAGES_JS = ("JSON.stringify(Array.from(document.images).map(i => ({alt: i.alt, "
             "ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, h: i.naturalHeight})))")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageCheck:
    images: list[dict[str, Any]]
    errors: list[str] = field(default_factory=list)
    title: str = ""
    height: int = 0


class DevTools:
    """A minimal Chrome DevTools Protocol client over the debugging pipe."""

    def __init__(self, proc: subprocess.Popen[bytes], to_browser: int, from_browser: int):
        self.proc, self._out, self._in = proc, to_browser, from_browser
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no message from Chromium before the deadline")
            ready, _, _ = select.select([self._in], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium closed the pipe (exit {self.proc.poll()})")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return dict(json.loads(raw))

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = PAGE_TIMEOUT_S) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = PAGE_TIMEOUT_S) -> dict[str, Any]:
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        deadline = time.monotonic() + timeout
        while True:
            ev = self._read_message(deadline)
            self.events.append(ev)
            if ev.get("method") == method:
                return ev


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for ev in events:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                              for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            out.append("exception: " + str(p.get("exceptionDetails", {}).get("text")))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            out.append(f"load failed: {p.get('errorText')}")
    return out


def check_page(html: Path, screenshot: Path, chromium: str, width: int = 1280,
               height: int = 2200) -> PageCheck:
    """Load ``html`` in headless Chromium; report images, errors; save a screenshot."""
    cmd_r, cmd_w = os.pipe()
    res_r, res_w = os.pipe()

    def wire_fds() -> None:  # in the child: commands on fd 3, replies on fd 4
        a, b = os.dup(cmd_r), os.dup(res_w)
        os.dup2(a, 3)
        os.dup2(b, 4)

    with tempfile.TemporaryDirectory(prefix="stratbench-chromium-") as profile:
        proc = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # close_fds=False: the fds wired in preexec_fn must survive exec; the pipes
            # themselves are non-inheritable, so nothing else of ours leaks into Chromium.
            preexec_fn=wire_fds, start_new_session=True, close_fds=False)
        os.close(cmd_r)
        os.close(res_w)
        tools = DevTools(proc, cmd_w, res_r)
        try:
            target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.send("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                tools.send(f"{domain}.enable", session=session)
            tools.send("Emulation.setDeviceMetricsOverride",
                       {"width": width, "height": height, "deviceScaleFactor": 1,
                        "mobile": False}, session=session)
            tools.send("Page.navigate", {"url": html.resolve().as_uri()}, session=session)
            tools.wait_event("Page.loadEventFired")

            def evaluate(expr: str) -> Any:
                return tools.send("Runtime.evaluate", {"expression": expr,
                                                       "returnByValue": True},
                                  session=session)["result"].get("value")

            images = json.loads(evaluate(IMAGES_JS))
            check = PageCheck(images=images, title=str(evaluate("document.title")),
                              height=int(evaluate("document.body.scrollHeight")))
            shot = tools.send("Page.captureScreenshot", {"format": "png"}, session=session)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            check.errors = _errors(tools.events)
            return check
        finally:
            os.close(cmd_w)
            os.close(res_r)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


# -- the test ----------------------------------------------------------------------
def _chromium_or_skip() -> str:
    path = find_chromium()
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("Chromium is required on CI (.ci/run installs Debian's chromium); "
                        "none of " + ", ".join(CHROMIUM_NAMES) + " is on PATH")
        pytest.skip("headless Chromium not installed (apt-get install chromium); CI fails "
                    "instead of skipping")
    return path


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    from reports.files import write
    from reports.report import build_from_results
    from tests.helpers import report_results

    chromium = _chromium_or_skip()
    report = build_from_results(report_results(), tmp_path / "sweep")
    paths = write(report, tmp_path / "report")
    embedded = paths.html.read_text(encoding="utf-8").count("<img ")
    assert embedded >= 5, "the hand-built sweep should produce at least five plots"
    shot = tmp_path / "report.png"
    check = check_page(paths.html, shot, chromium)
    assert check.title.startswith("stratbench report")
    assert len(check.images) == embedded
    broken = [i for i in check.images if not i["ok"]]
    assert not broken, f"images that did not load: {broken}"
    assert all(i["w"] > 200 and i["h"] > 100 for i in check.images)
    assert check.errors == []
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"



def test_the_page_check_sees_broken_images_and_console_errors(tmp_path: Path) -> None:
    """The check above can fail: a missing image and a console error are both caught."""
    chromium = _chromium_or_skip()
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><head><title>broken</title></head><body>"
                    "<img alt='missing' src='data:image/png;base64,AAAA'>"
                    "<script>console.error('deliberate failure')</script></body></html>",
                    encoding="utf-8")
    check = check_page(page, tmp_path / "broken.png", chromium, height=400)
    assert [i["ok"] for i in check.images] == [False]
    assert any("deliberate failure" in err for err in check.errors), check.errors


if __name__ == "__main__":
    exe = find_chromium()
    if exe is None:
        sys.exit("no chromium on PATH")
    result = check_page(Path(sys.argv[1]), Path(sys.argv[2]), exe,
                        height=int(sys.argv[3]) if len(sys.argv) > 3 else 2200)
    print(json.dumps({"title": result.title, "height": result.height,
                      "images": result.images, "errors": result.errors}, indent=1))
