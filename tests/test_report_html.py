"""``report/report.html`` (issue 27, point 3): one self-contained page beside report.md with the same
tables and legend, sortable headers, the figures embedded and each job's provenance; the slow test opens
it in headless Chromium, clicks headers and takes a screenshot."""

import base64
import html
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from jaxassoc.app import report, store

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def weat_like_sweep(root):
    """Two models of WEAT (raw and whitened rows, an anisotropy row) and two RPAM benchmark jobs, written as
    finished jobs (no model run). Rows are not in the order of any column a test sorts by."""
    d_raw = {"m1": [0.9, -1.2, 0.1], "m2": [1.7, 0.3, -0.4]}
    for model, values in d_raw.items():
        job = root / f"model.name={model}"
        job.mkdir(parents=True)
        values = np.asarray(values)
        tests = pd.DataFrame(
            {
                "test": ["W1", "W2", "W10"],
                "d_raw": values,
                "ci_low_raw": values - 0.3,
                "ci_high_raw": values + 0.3,
                "p_raw": [0.0004, 0.03, 0.6],
                "d_whitened": values / 2,
                "ci_low_whitened": values / 2 - 0.4,
                "ci_high_whitened": values / 2 + 0.4,
                "p_whitened": [0.008, 0.2, 0.9],
                "effect_size": values / 2,
                "effect_size_raw": values,
                "effect_size_whitened": values / 2,
                "n_x": 8.0,
            }
        )
        anisotropy = pd.DataFrame([{"test": "anisotropy", "cosine_mean_raw": 0.3, "cosine_mean_whitened": 0.0}])
        config = {
            "model": {"name": model, "source": f"/models/{model}"},
            "metric": {"name": "weat"},
            "dataset": {"name": "weat_caliskan2017"},
            "stats": {"n_permutations": 1000, "n_bootstrap": 200},
        }
        provenance = {
            "config": config,
            "model": model,
            "metric": "weat",
            "dataset": "weat_caliskan2017",
            "config_hash": f"hash-of-{model}",
            "jaxassoc_commit": "0123abcd",
            "packages": {"jax": "0.0-test"},
            "seed": 0,
        }
        aggregates = pd.concat([tests, anisotropy], ignore_index=True)
        store.write_results(job, tests.head(0), aggregates, provenance, {"seconds": 1.5})
    for template, r in (("tp1", 0.1), ("tp2", 0.8)):
        job = root / f"metric=rpam,template={template}"
        job.mkdir(parents=True)
        aggregates = pd.DataFrame(
            {"benchmark": ["Bellezza"], "statistic": ["spearman"], "correlation": [r], "p_value": [0.01], "n": [399]}
        )
        config = {"model": {"name": "m1"}, "metric": {"name": "rpam"}, "template": {"name": template}}
        provenance = {"config": config, "model": "m1", "metric": "rpam", "config_hash": f"rpam-{template}"}
        store.write_results(job, aggregates.head(0), aggregates, provenance, {})
    return root


class Tables(HTMLParser):
    """The page's tables (header texts, cell texts, aria-sort of each header), images and attributes."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self.links, self.scripts, self.root = [], [], [], [], {}
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "html":
            self.root = attrs
        elif tag == "table":
            self.tables.append({"class": attrs.get("class", ""), "head": [], "sort": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("th", "td") and self.tables:
            self._cell = [tag, ""]
            if tag == "th":
                self.tables[-1]["sort"].append(attrs.get("aria-sort"))
        elif tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag in ("a", "link"):
            self.links.append(attrs.get("href", ""))
        elif tag == "script":
            self.scripts.append(attrs.get("src"))

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data

    def handle_endtag(self, tag):
        if tag == "tr" and self.tables and not self.tables[-1]["rows"][-1]:
            self.tables[-1]["rows"].pop()  # the header row
        if tag in ("th", "td") and self._cell is not None:
            kind, text = self._cell
            table = self.tables[-1]
            (table["head"] if kind == "th" else table["rows"][-1]).append(text.strip())
            self._cell = None

    def sortable(self):
        return [t for t in self.tables if "sortable" in t["class"]]


def parse(text: str) -> Tables:
    parser = Tables()
    parser.feed(text)
    return parser


def markdown_tables(text: str) -> list[list[str]]:
    """The header cells of every Markdown table, unescaped."""
    found = []
    for block in re.findall(r"(?:^\|.*\|\n)+", text, flags=re.M):
        header = block.splitlines()[0].strip("|").split(" | ")
        found.append([html.unescape(c.strip().replace("\\*", "*").replace("\\|", "|")) for c in header])
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    sweep = weat_like_sweep(tmp_path_factory.mktemp("html") / "sweep")
    out = report.write_report(sweep, rank=True)
    return sweep, out


def test_html_report_is_one_self_contained_page_with_the_markdowns_tables(built):
    sweep, out = built
    page = (out / "report.html").read_text(encoding="utf-8")
    text = (out / "report.md").read_text()
    parsed = parse(page)
    assert all(src is None for src in parsed.scripts)  # inline script only
    assert not [link for link in parsed.links if re.match(r"(https?:)?//", link)]  # nothing fetched
    assert "<link" not in page and "@import" not in page and "url(" not in page
    # the same tables, in the same order, with the same headers and cells
    shown = [t["head"] for t in parsed.sortable()]
    assert shown == markdown_tables(text) and len(shown) >= 6
    weat = next(t for t in parsed.sortable() if "d_raw" in t["head"])
    assert weat["rows"][0][weat["head"].index("p_raw")] == "<0.001 ***"
    assert weat["rows"][0][weat["head"].index("ci_raw")] == "[0.600, 1.200]"
    assert "p &lt; .05" in page and "stats.alternative" in page  # the legend
    # the figures, embedded: the very bytes of each PNG, with links to the PDF and SVG beside
    names = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", text)
    assert len(names) == len(parsed.images) >= 4
    for name, src in zip(names, parsed.images):
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]) == (out / name).read_bytes()
        assert name.replace(".png", ".pdf") in parsed.links and name.replace(".png", ".svg") in parsed.links
    # each job's provenance
    for job, model in (("model.name=m1", "m1"), ("model.name=m2", "m2")):
        block = page.split(f"<code>{job}</code>")[1].split("</details>")[0]
        assert f"hash-of-{model}" in block and f"/models/{model}" in block and "0123abcd" in block
        assert "config.stats.n_bootstrap" in block and "packages.jax" in block and "summary.seconds" in block
    assert page.count('<details class="provenance"') == 4
    # the ranking is there too, with the ranks its CIs allow
    assert "Ranking of models" in page and re.search(r"<td[^>]*>1 \(1(–2)?\): ", page)


def browser() -> str:
    for name in CHROMIUM_NAMES:
        if found := shutil.which(name):
            return found
    pytest.fail(
        "chromium is not installed, and the HTML report's browser test needs it: install it with "
        "`sudo apt-get install chromium` (Debian/Ubuntu; `scripts/setup.sh test` does so when run as root), "
        "or put chromium (or google-chrome) on PATH",
        pytrace=False,
    )


def chromium(binary, profile, *args, timeout=120) -> subprocess.CompletedProcess:
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout, check=False)


PRELUDE = """
<script>
function header(table, name) {
  return Array.prototype.find.call(table.tHead.rows[0].cells, function (th) { return th.textContent.trim() === name; });
}
function click(table, name) { header(table, name).querySelector("button").click(); }
var tables = Array.prototype.slice.call(document.querySelectorAll("table.sortable"));
var weat = tables.find(function (t) { return header(t, "d_raw"); });
var rpam = tables.find(function (t) { return header(t, "correlation"); });
window.addEventListener("load", function () {
  var shown = Array.prototype.filter.call(document.images, function (i) { return i.complete && i.naturalWidth > 0; });
  document.documentElement.setAttribute("data-images-shown", String(shown.length));
});
"""
CLICKS = (
    PRELUDE
    + """
click(weat, "d_raw");
click(rpam, "correlation");
click(rpam, "correlation");
click(weat, "test");
</script>
"""
)
ONE_CLICK = (
    PRELUDE
    + """
click(weat, "d_raw");
</script>
"""
)


@pytest.mark.slow
def test_html_report_in_headless_chromium_sorts_on_click_and_renders(built, tmp_path):
    """Chromium runs the page's script (``data-sortable=ready``), decodes every embedded figure, and clicking
    a header sorts that table: numbers as numbers (``d_raw``), descending on a second click
    (``correlation``), text with digit runs as numbers (W2 before W10)."""
    binary = browser()
    sweep, out = built
    page = (out / "report.html").read_text(encoding="utf-8")
    before = parse(page)
    clicked = tmp_path / "clicked.html"
    clicked.write_text(page.replace("</body>", CLICKS + "</body>"), encoding="utf-8")
    dumped = chromium(binary, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom", clicked.as_uri())
    assert dumped.returncode == 0 and "</html>" in dumped.stdout, dumped.stderr[-2000:]
    after = parse(dumped.stdout)
    assert after.root.get("data-sortable") == "ready"
    assert int(after.root.get("data-images-shown", 0)) == len(before.images) >= 4

    def column(parsed, name, within):
        table = next(t for t in parsed.sortable() if name in t["head"] and within in t["head"])
        j = table["head"].index(name)
        return table, [row[j] for row in table["rows"]]

    # the last click sorted the WEAT table by test (W1, W2, W10: natural order) after the d_raw click
    weat_before = column(before, "test", "d_raw")[1]
    weat, tests = column(after, "test", "d_raw")
    assert tests == sorted(tests, key=lambda t: int(t[1:])) and tests != weat_before
    assert weat["sort"][weat["head"].index("test")] == "ascending"
    assert weat["sort"][weat["head"].index("d_raw")] == "none"
    rpam_before = [float(v) for v in column(before, "correlation", "benchmark")[1]]
    rpam, values = column(after, "correlation", "benchmark")
    values = [float(v) for v in values]
    assert values == sorted(values, reverse=True) and rpam_before != values
    assert rpam["sort"][rpam["head"].index("correlation")] == "descending"

    # one click on d_raw alone: numeric ascending (text order would put -1.200 after -0.400 wrongly)
    once = tmp_path / "once.html"
    once.write_text(page.replace("</body>", ONE_CLICK + "</body>"), encoding="utf-8")
    dumped = chromium(binary, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom", once.as_uri())
    d_raw = [float(v) for v in column(parse(dumped.stdout), "d_raw", "test")[1]]
    assert d_raw == sorted(d_raw) and d_raw != [float(v) for v in column(before, "d_raw", "test")[1]]

    # a screenshot of the page as it opens: drawn, not blank
    shot = tmp_path / "report.png"
    taken = chromium(
        binary, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2400", (out / "report.html").as_uri()
    )
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as image:
        pixels = np.asarray(image.convert("L"), dtype=float)
    assert pixels.shape == (2400, 1280)
    assert (pixels < 128).mean() > 0.01 and (pixels > 250).mean() > 0.3  # text and figures on a white page
    colours = np.asarray(Image.open(shot).convert("RGB"), dtype=int)
    assert (np.abs(colours[..., 0] - colours[..., 2]) > 60).mean() > 0.002  # the figures' reds and blues
