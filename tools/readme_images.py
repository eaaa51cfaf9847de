"""The README's demo pictures from a run dir: the report's plots (PNGs embedded in report.html, in
page order) and the progress display (progress.svg, rendered by headless Chromium).

    python tools/readme_images.py runs/<id>          # writes docs/images/demo-*.png
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: report.html's plots in page order -> README image names
PLOTS = ("demo-success.png", "demo-arm-vs-baseline.png")


def main(run: Path) -> None:
    out = ROOT / "docs" / "images"
    html = (run / "report.html").read_text()
    pngs = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    for name, data in zip(PLOTS, pngs, strict=False):
        (out / name).write_bytes(base64.b64decode(data))
        print(f"wrote {out / name}")
    svg = run / "progress.svg"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if svg.exists() and chromium:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [
                    chromium,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    f"--user-data-dir={tmp}",
                    "--hide-scrollbars",
                    "--window-size=1100,200",
                    f"--screenshot={out / 'demo-progress.png'}",
                    svg.resolve().as_uri(),
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
        print(f"wrote {out / 'demo-progress.png'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
