"""Builds the site, serves it on localhost and takes headless Chromium screenshots of a few pages.

    python docs/scripts/screenshots.py [--output docs/screenshots] [--browser chromium]

Needs the docs extra and a Chromium (Debian: `apt-get install chromium`). The PNGs land in
`--output` (docs/screenshots/ is ignored by git): look at them before a documentation change
lands.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent  # docs/scripts/ -> the repository
# name -> page path on the site: the home page, guides, an API page, the model card, the CLI.
PAGES = {
    "home": "",
    "guide-fine-tuning": "guides/fine-tuning/",
    "guide-long-documents": "guides/long-documents/",
    "api-model": "reference/api/model/",
    "model-card": "models/albert_en_mini/",
    "cli": "reference/cli/",
}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1280,1600",
]


def build(site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        cwd=REPO,
        env=env,
        check=True,
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no line per request
        pass


def serve(site: Path) -> http.server.ThreadingHTTPServer:
    """A server for `site` on a free localhost port, running in a daemon thread."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def screenshot(browser: str, url: str, target: Path) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={target}", url],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--output", type=Path, default=REPO / "docs" / "screenshots")
    options.add_argument("--browser", default=shutil.which("chromium") or "chromium")
    args = options.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        build(site)
        server = serve(site)
        try:
            port = server.server_address[1]
            for name, page in PAGES.items():
                target = args.output / f"{name}.png"
                screenshot(args.browser, f"http://127.0.0.1:{port}/{page}", target)
                print(target)
        finally:
            server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
