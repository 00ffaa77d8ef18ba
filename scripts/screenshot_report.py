#!/usr/bin/env python3
"""Screenshot a kernelpilot report.html in headless Chromium (Playwright), offline.

    python3 scripts/screenshot_report.py RUN/report.html OUT.png [--width 1280] [--chromium /usr/bin/chromium]

Uses the system's Chromium (Debian's /usr/bin/chromium by default; $KERNELPILOT_CHROMIUM overrides), never a
browser download. Every request that is not a file:// URL is aborted and listed; console errors and page errors
are printed. Exits 1 when the page made any of them or a chart did not render (a .js-plotly-plot of zero size).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

#: Chromium flags for a headless, offline, sandbox-less run (CI runs as root).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, load the page, wait for its charts, write the full-page screenshot; 0 when clean."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="the report.html to open")
    parser.add_argument("out", type=Path, help="the PNG to write (full page)")
    parser.add_argument("--width", type=int, default=1280, help="viewport width in CSS pixels (default 1280)")
    parser.add_argument("--chromium", default=os.environ.get("KERNELPILOT_CHROMIUM", "/usr/bin/chromium"),
                        help="the Chromium executable (default /usr/bin/chromium or $KERNELPILOT_CHROMIUM)")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"error: {args.report} is not a file", file=sys.stderr)
        return 2
    if not Path(args.chromium).is_file():
        print(f"error: no Chromium at {args.chromium} (apt-get install chromium, or pass --chromium PATH)",
              file=sys.stderr)
        return 2
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": args.width, "height": 900})
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else (problems.append(f"network request blocked: {route.request.url}"), route.abort()))
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.goto(args.report.resolve().as_uri(), wait_until="load")
            try:
                page.wait_for_selector("body[data-charts]", state="attached", timeout=30_000)  # no eval: CSP
                if page.get_attribute("body", "data-charts") != "drawn":
                    problems.append("the charts could not be drawn")
            except PlaywrightTimeout:
                problems.append("the charts did not render within 30 s")
            sizes = page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot')).map(d => "
                                  "[d.id, d.getBoundingClientRect().width, d.getBoundingClientRect().height])")
            problems += [f"chart {i} has no size ({w}x{h})" for i, w, h in sizes if not (w > 0 and h > 0)]
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=True)
        finally:
            browser.close()
    print(f"wrote {args.out} ({len(sizes)} charts)")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
