"""The report's blocks and ``report.html``: one self-contained page beside ``report.md``.

:mod:`jaxassoc.app.report` builds the report as a list of blocks (:class:`Heading`, :class:`Paragraph`,
:class:`Table`, :class:`Figures`, :class:`Items`) and renders them twice: as ``report.md`` and, here, as
``report.html``. The page holds the same headings, legend and tables (cells from
:func:`jaxassoc.app.tables.present`, with each table's notes), the figures embedded as base64 PNG (each with
links to its PDF and SVG beside the page), and each job's provenance from its ``results.json``
(model, source and revision, code commit, packages, device, the full config). Its CSS and JavaScript are
inline and it loads nothing: clicking a column header sorts the table by that column (numbers as numbers,
``<0.001`` as 0.001, ``[lo, hi]`` by lo; empty cells last), clicking again reverses the order.
"""

from __future__ import annotations

import base64
import html
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from jaxassoc.app import figures, tables


@dataclass(frozen=True, eq=False)
class Heading:
    text: str  # Markdown inline: `code`, \* for a literal star
    level: int = 2


@dataclass(frozen=True, eq=False)
class Paragraph:
    text: str  # Markdown inline


@dataclass(frozen=True, eq=False)
class Table:
    table: pd.DataFrame  # raw values; shown through tables.present, with attrs["notes"] under it


@dataclass(frozen=True, eq=False)
class Figures:
    names: tuple[str, ...]  # PNG file names in the report folder (PDF and SVG beside each)


@dataclass(frozen=True, eq=False)
class Items:
    items: tuple[str, ...]  # Markdown inline each


DISPLAY_DPI = 120  # a figure's PNG is shown at this many pixels per inch of the figure (it has figures.DPI)
NUMBER = re.compile(r"^\s*[<>≈]?\s*[\[(]?\s*(?:[-−]?∞|[-−]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)", re.IGNORECASE)

CSS = """
:root { --fg: #1b1b1b; --muted: #5b5b5b; --line: #d5d8dc; --head: #eef1f4; --zebra: #f8f9fa; --accent: #1f5fa8; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); margin: 0; background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 1.5rem 1.5rem 4rem; }
h1 { font-size: 1.6rem; margin: 0 0 .6rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 .6rem; padding-bottom: .25rem; border-bottom: 2px solid var(--line); }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
code { font: .88em/1.3 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f1f3f5;
       padding: 0 .25em; border-radius: 3px; }
nav { background: var(--zebra); border: 1px solid var(--line); border-radius: 6px; padding: .5rem 1rem; }
nav ol { margin: .2rem 0; padding-left: 1.2rem; columns: 2; }
.scroll { overflow-x: auto; margin: .4rem 0 .2rem; }
table { border-collapse: collapse; font-size: .86rem; }
th, td { border: 1px solid var(--line); padding: .22rem .5rem; text-align: left; vertical-align: top;
         white-space: nowrap; }
thead th { background: var(--head); position: sticky; top: 0; }
tbody tr:nth-child(even) { background: var(--zebra); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th button { all: unset; cursor: pointer; font-weight: 600; }
th button::after { content: " \\2195"; color: #9aa3ad; font-weight: 400; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; color: var(--accent); }
th[aria-sort="descending"] button::after { content: " \\25BC"; color: var(--accent); }
th button:focus-visible { outline: 2px solid var(--accent); }
p.note { color: var(--muted); font-size: .84rem; margin: .15rem 0 .8rem; }
figure { margin: 1rem 0 1.6rem; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: .84rem; }
details { border: 1px solid var(--line); border-radius: 6px; margin: .4rem 0; padding: .3rem .7rem; }
details[open] { padding-bottom: .7rem; }
summary { cursor: pointer; }
table.kv td:first-child { color: var(--muted); }
table.kv td { white-space: pre-wrap; word-break: break-all; }
footer { color: var(--muted); font-size: .8rem; margin-top: 3rem; }
"""

JS = """
(function () {
  function keyOf(text) {
    var t = text.trim().replace(/^[<>\\u2248]\\s*/, "").replace(/^[\\[(]\\s*/, "").replace(/\\u2212/g, "-");
    if (/^-\\u221e/.test(t)) return -Infinity;
    if (/^\\u221e/.test(t)) return Infinity;
    var m = t.match(/^-?\\d+(\\.\\d+)?(e[-+]?\\d+)?/i);
    return m ? parseFloat(m[0]) : null;
  }
  function sortBy(table, column, th) {
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (row, i) {
      var text = row.cells[column] ? row.cells[column].textContent.trim() : "";
      return { row: row, text: text, key: keyOf(text), i: i };
    });
    var numeric = rows.every(function (r) { return r.text === "" || r.key !== null; });
    var sign = ascending ? 1 : -1;
    rows.sort(function (a, b) {
      if ((a.text === "") !== (b.text === "")) return a.text === "" ? 1 : -1;
      var c = 0;
      if (a.text !== "") {
        c = numeric ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
                    : a.text.localeCompare(b.text, undefined, { numeric: true, sensitivity: "base" });
      }
      return c !== 0 ? sign * c : a.i - b.i;
    });
    rows.forEach(function (r) { body.appendChild(r.row); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      th.querySelector("button").addEventListener("click", function () { sortBy(table, column, th); });
    });
  });
  document.documentElement.setAttribute("data-sortable", "ready");
})();
"""


def inline(text: str) -> str:
    """Markdown inline text as HTML: escaped, `code` spans, ``\\*`` as a star."""
    escaped = html.escape(str(text), quote=False).replace("\\*", "*")
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _slug(text: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", re.sub(r"`", "", text).lower()).strip("-") or "section"
    slug, k = base, 2
    while slug in taken:
        slug, k = f"{base}-{k}", k + 1
    taken.add(slug)
    return slug


def table_html(table: pd.DataFrame, sortable: bool = True) -> str:
    """A table as :func:`jaxassoc.app.tables.present` shows it (sortable headers), its notes under it."""
    shown = tables.present(table)
    numeric = {
        c
        for c in shown.columns
        if shown[c].ne("").any() and shown[c].map(lambda v: v == "" or bool(NUMBER.match(v))).all()
    }
    head = "".join(
        f'<th scope="col" aria-sort="none"><button type="button">{html.escape(str(c))}</button></th>'
        if sortable
        else f'<th scope="col">{html.escape(str(c))}</th>'
        for c in shown.columns
    )
    body = "\n".join(
        "<tr>"
        + "".join(
            ('<td class="num">' if c in numeric else "<td>") + f"{html.escape(str(v))}</td>"
            for c, v in zip(shown.columns, row)
        )
        + "</tr>"
        for row in shown.itertuples(index=False)
    )
    notes = "".join(f'<p class="note">Note: {html.escape(str(n))}</p>' for n in table.attrs.get("notes", []))
    kind = ' class="sortable"' if sortable else ""
    return f'<div class="scroll"><table{kind}><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table></div>{notes}'


def _png_width(data: bytes) -> int | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        return None
    return struct.unpack(">I", data[16:20])[0]


def figure_html(out: Path, name: str) -> str:
    """One figure: the PNG inline (base64), shown at its size in CSS pixels, with links to its PDF and SVG."""
    data = (Path(out) / name).read_bytes()
    width = _png_width(data)
    size = f' width="{round(width * DISPLAY_DPI / figures.DPI)}"' if width else ""
    stem = name.rsplit(".", 1)[0]
    links = " · ".join(
        f'<a href="{html.escape(f)}">{f.rsplit(".", 1)[1].upper()}</a>'
        for f in figures.names(stem)[1:]
        if (Path(out) / f).exists()
    )
    source = base64.b64encode(data).decode("ascii")
    return (
        f'<figure id="fig-{html.escape(stem)}"><img src="data:image/png;base64,{source}" alt="{html.escape(stem)}"{size}>'
        f"<figcaption><code>{html.escape(name)}</code>{' · ' + links if links else ''}</figcaption></figure>"
    )


KEY_FIELDS = (
    "model",
    "model_source",
    "model_revision",
    "metric",
    "dataset",
    "dataset_version",
    "template",
    "template_text",
    "whitening",
    "whitening_reference",
    "seed",
    "config_hash",
    "jaxassoc_commit",
    "jaxassoc_dirty",
    "jaxassoc_source_sha256",
    "plugin_module",
    "plugin_version",
    "plugin_source_sha256",
    "device",
)


def _flat(value: Any, prefix: str, out: dict[str, str]) -> dict[str, str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flat(inner, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value if isinstance(value, str) else json.dumps(value, default=str)
    return out


def provenance_html(job: str, record: dict) -> str:
    """One job's provenance (its ``results.json`` without the aggregate rows) as a folded key-value table:
    the key fields first, then the run's summary, the other provenance fields, the config, the packages."""
    provenance = dict(record.get("provenance") or {})
    rows: dict[str, str] = {}
    for key in KEY_FIELDS:
        if provenance.get(key) not in (None, ""):
            _flat(provenance[key], key, rows)
    _flat(record.get("summary") or {}, "summary", rows)
    for key, value in provenance.items():
        if key not in KEY_FIELDS and key not in ("config", "packages"):
            _flat(value, key, rows)
    _flat(provenance.get("config") or {}, "config", rows)
    _flat(provenance.get("packages") or {}, "packages", rows)
    _flat(record.get("files") or {}, "files (bytes)", rows)
    body = "\n".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in rows.items())
    what = " · ".join(str(provenance[k]) for k in ("model", "metric", "dataset") if provenance.get(k))
    return (
        f'<details class="provenance" id="job-{html.escape(re.sub(r"[^A-Za-z0-9_.=-]+", "-", job))}">'
        f"<summary><code>{html.escape(job)}</code> — {html.escape(what)}</summary>"
        f'<div class="scroll"><table class="kv"><tbody>\n{body}\n</tbody></table></div></details>'
    )


def render(title: str, blocks: list, out: Path, records: dict[str, dict]) -> str:
    """The page: title, contents, the blocks (figures read from ``out``), each job's provenance."""
    taken: set[str] = set()
    parts, contents = [], []
    for block in blocks:
        if isinstance(block, Heading):
            slug = _slug(block.text, taken)
            if block.level == 2:
                contents.append(f'<li><a href="#{slug}">{inline(block.text)}</a></li>')
            parts.append(f'<h{block.level} id="{slug}">{inline(block.text)}</h{block.level}>')
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{inline(block.text)}</p>")
        elif isinstance(block, Table):
            parts.append(table_html(block.table))
        elif isinstance(block, Figures):
            parts += [figure_html(out, name) for name in block.names]
        elif isinstance(block, Items):
            parts.append("<ul>" + "".join(f"<li>{inline(item)}</li>" for item in block.items) + "</ul>")
    slug = _slug("Provenance", taken)
    contents.append(f'<li><a href="#{slug}">Provenance</a></li>')
    parts.append(f'<h2 id="{slug}">Provenance</h2>')
    parts.append(
        f"<p>{len(records)} job(s), each as its <code>results.json</code> records it: model, code, packages, "
        "device and the full config (click a job to open it).</p>"
    )
    parts += [provenance_html(job, record) for job, record in records.items()]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title>",
            f"<style>{CSS}</style></head><body><main>",
            f"<h1>{html.escape(title)}</h1>",
            '<nav aria-label="contents"><strong>Contents</strong><ol>' + "".join(contents) + "</ol></nav>",
            *parts,
            "<footer>Written by <code>jaxassoc-report</code>; the figures' PDF and SVG files lie beside this page."
            " Click a column header to sort a table.</footer>",
            f"</main><script>{JS}</script></body></html>",
            "",
        ]
    )
