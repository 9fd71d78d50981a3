"""Figures for papers: one way to save them, and the small choices every figure makes the same way.

:func:`save` writes a figure as ``<stem>.png`` (:data:`DPI` dots per inch), ``<stem>.pdf`` and ``<stem>.svg``
(vector), each cut to its drawn content (``bbox_inches="tight"``: no clipped title or colour-bar label) and
each written atomically (:func:`jaxassoc.app.store.atomic_write`). The PDF keeps its text as TrueType
(``pdf.fonttype`` 42, as journals ask, not Type 3), and neither vector file records a creation date, so the
same figure gives the same bytes.

:func:`text_colour` picks black or white text for a cell by the cell colour's luminance, :func:`symmetric_limit`
gives a diverging colour scale that covers the data (``vmax = max |value|``), and :func:`correlation_ci` a
confidence interval of a correlation from r and n (Fisher's z).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from jaxassoc.app import store  # noqa: E402

FORMATS = ("png", "pdf", "svg")
DPI = 200
SAVE_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.hashsalt": "jaxassoc"}
METADATA = {"pdf": {"CreationDate": None}, "svg": {"Date": None}, "png": {}}


def names(stem: str) -> tuple[str, ...]:
    """The file names :func:`save` writes for ``stem``: ``(stem.png, stem.pdf, stem.svg)``."""
    return tuple(f"{stem}.{fmt}" for fmt in FORMATS)


def _stem(path: str | Path) -> Path:
    """``path`` without a figure suffix (``cosine_matrices.png`` -> ``cosine_matrices``); other dots stay
    (a stem may hold ``model.name=x``)."""
    path = Path(path)
    return path.with_suffix("") if path.suffix[1:].lower() in FORMATS else path


def save(fig, path: str | Path, *, close: bool = True) -> list[Path]:
    """Write ``fig`` as PNG, PDF and SVG beside each other (``path`` is the stem, or any of the three file
    names); tight bounding box, atomic writes; closes the figure unless ``close=False``. Returns the paths,
    PNG first."""
    stem = _stem(path)
    written = []
    try:
        with plt.rc_context(SAVE_RC):
            for fmt, name in zip(FORMATS, names(stem.name)):
                target = stem.parent / name
                store.atomic_write(
                    target,
                    lambda p, fmt=fmt: fig.savefig(
                        p, format=fmt, dpi=DPI, bbox_inches="tight", pad_inches=0.05, metadata=METADATA[fmt]
                    ),
                )
                written.append(target)
    finally:
        if close:
            plt.close(fig)
    return written


def _linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def luminance(colour) -> float:
    """The relative luminance of an sRGB colour (WCAG 2: 0 black, 1 white)."""
    r, g, b = matplotlib.colors.to_rgb(colour)
    return 0.2126 * _linear(r) + 0.7152 * _linear(g) + 0.0722 * _linear(b)


def text_colour(background) -> str:
    """``"black"`` or ``"white"``, whichever contrasts more with ``background`` (WCAG contrast ratio:
    white wins below a luminance of about 0.18)."""
    lum = luminance(background)
    return "white" if (1.05 / (lum + 0.05)) > ((lum + 0.05) / 0.05) else "black"


def symmetric_limit(*values) -> float:
    """The largest finite |value| (1.0 when there is none, or it is 0): ``vmin=-limit, vmax=limit`` keeps 0
    at a diverging colour map's centre and no value saturates."""
    finite = [np.abs(np.asarray(v, dtype=float)) for v in values]
    finite = np.concatenate([f[np.isfinite(f)].ravel() for f in finite]) if finite else np.array([])
    limit = float(finite.max()) if finite.size else 0.0
    return limit if limit > 0 else 1.0


Z_95 = 1.959963984540054


def correlation_ci(r: float, n: float, statistic: str = "pearson", confidence: float = 0.95) -> tuple[float, float]:
    """A ``confidence`` interval of a correlation r over n pairs, by Fisher's z: ``tanh(atanh(r) ± z·SE)``
    with SE = 1/sqrt(n-3) for Pearson (Fisher 1921) and SE = sqrt((1 + r²/2)/(n-3)) for Spearman (Bonett &
    Wright 2000). ``(nan, nan)`` for another statistic (an F1 score), n < 4 or |r| >= 1."""
    statistic = str(statistic).lower()
    if statistic not in ("pearson", "spearman") or not (n >= 4) or not (abs(r) < 1):
        return math.nan, math.nan
    from scipy.stats import norm

    z = Z_95 if confidence == 0.95 else float(norm.ppf(0.5 + confidence / 2))
    variance = (1.0 + r * r / 2.0) if statistic == "spearman" else 1.0
    se = math.sqrt(variance / (n - 3))
    centre = math.atanh(r)
    return math.tanh(centre - z * se), math.tanh(centre + z * se)
