"""StereoSet (Nadeem, Bethke & Reddy 2021) from its published JSON (``dev.json``), which jaxassoc does not
package (CC BY-SA 4.0; README, "StereoSet data"): ``dataset=stereoset dataset.path=<file>``.

The file is ``{"version": ..., "data": {"intrasentence": [...], "intersentence": [...]}}``; each example
has ``id``, ``target``, ``bias_type`` (gender, profession, race, religion), ``context`` and three
``sentences``, each with ``id``, ``sentence`` and ``gold_label`` (``stereotype``, ``anti-stereotype``,
``unrelated``; one of each). An intrasentence context holds the word ``BLANK``, which each candidate
sentence fills with one word (its *template word*: the sentence's whitespace word at the BLANK's index,
punctuation removed, as the authors' loader). Either split may be absent. A missing key, a wrong type, a
label missing or given twice, or a context without BLANK is a :class:`~jaxassoc.errors.DataError` naming
the file, the example (``data.intrasentence[12]``, its id) and the field; so is an example whose
stereotype and anti-stereotype sentences are the same (spaces aside), which would be a tie whatever the model.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pandas as pd

from jaxassoc.data.textfile import read_utf8
from jaxassoc.errors import DataError

SPLITS = ("intrasentence", "intersentence")
LABELS = ("stereotype", "anti-stereotype", "unrelated")
BLANK = "BLANK"
EXAMPLE_KEYS = ("id", "target", "bias_type", "context", "sentences")
SENTENCE_KEYS = ("id", "sentence", "gold_label")


def load_stereoset(path: str | Path) -> pd.DataFrame:
    """One row per candidate sentence, in file order: ``split``, ``example`` (its id), ``target``,
    ``bias_type``, ``context``, ``label`` (the gold label), ``sentence``, ``sentence_id``,
    ``template_word`` (intrasentence; "" otherwise) and ``where`` (the example's place in the file)."""
    source = str(path)
    if not Path(path).is_file():
        raise DataError(f"{source}: no such file; give the path of StereoSet's dev.json (README, 'StereoSet data')")
    try:
        document = json.loads(read_utf8(Path(path), source))
    except json.JSONDecodeError as e:
        raise DataError(f"{source}, line {e.lineno}, column {e.colno}: not JSON ({e.msg})") from None
    return parse_stereoset(document, source)


def parse_stereoset(document, source: str) -> pd.DataFrame:
    """The candidate rows of a parsed StereoSet document (see :func:`load_stereoset`)."""
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, dict):
        raise DataError(f"{source}: the top level needs a key 'data' holding 'intrasentence' and/or 'intersentence'")
    splits = [s for s in SPLITS if s in data]
    if not splits:
        raise DataError(f"{source}: 'data' holds neither 'intrasentence' nor 'intersentence' (keys: {sorted(data)})")
    rows = []
    for split in splits:
        if not isinstance(data[split], list):
            raise DataError(f"{source}: data.{split} must be a list of examples")
        seen: dict[str, int] = {}
        for i, example in enumerate(data[split]):
            rows += _example_rows(example, split, f"{source}: data.{split}[{i}]")
            first = seen.setdefault(rows[-1]["example"], i)
            if first != i:  # its candidates would be averaged with the first's
                raise DataError(
                    f"{source}: data.{split}[{i}]: id {rows[-1]['example']!r} is already data.{split}[{first}]"
                )
    if not rows:
        raise DataError(f"{source}: no examples in {', '.join('data.' + s for s in splits)}")
    return pd.DataFrame(rows)


def _field(record, key: str, where: str) -> str:
    if not isinstance(record, dict) or key not in record:
        raise DataError(f"{where}: missing key {key!r}")
    value = record[key]
    if key != "sentences" and (not isinstance(value, str) or not value.strip()):
        raise DataError(f"{where}: {key!r} must be a non-empty string, not {value!r}")
    return value


def _example_rows(example, split: str, where: str) -> list[dict]:
    fields = {k: _field(example, k, where) for k in EXAMPLE_KEYS}
    where = f"{where} (id {fields['id']})"
    sentences = fields["sentences"]
    if not isinstance(sentences, list):
        raise DataError(f"{where}: 'sentences' must be a list of three candidates")
    blank_at = None
    if split == "intrasentence":
        words = fields["context"].split(" ")
        hits = [i for i, w in enumerate(words) if BLANK in w]
        if len(hits) != 1:
            raise DataError(f"{where}: the context {fields['context']!r} must hold the word {BLANK} once")
        blank_at = hits[0]
    rows, seen = [], {}
    for j, sentence in enumerate(sentences):
        at = f"{where}, sentences[{j}]"
        s = {k: _field(sentence, k, at) for k in SENTENCE_KEYS}
        if s["gold_label"] not in LABELS:
            raise DataError(f"{at}: gold_label {s['gold_label']!r} is not one of {list(LABELS)}")
        if s["gold_label"] in seen:
            raise DataError(
                f"{at}: a second {s['gold_label']!r} sentence (the first is sentences[{seen[s['gold_label']]}])"
            )
        seen[s["gold_label"]] = j
        template_word = ""
        if blank_at is not None:
            words = s["sentence"].split(" ")
            if blank_at >= len(words):
                raise DataError(f"{at}: the sentence {s['sentence']!r} has no word where the context has {BLANK}")
            template_word = words[blank_at].translate(str.maketrans("", "", string.punctuation))
            if not template_word:
                raise DataError(f"{at}: the word filling {BLANK} in {s['sentence']!r} is only punctuation")
        rows.append(
            {
                "split": split,
                "example": fields["id"],
                "target": fields["target"],
                "bias_type": fields["bias_type"],
                "context": fields["context"],
                "label": s["gold_label"],
                "sentence": s["sentence"],
                "sentence_id": s["id"],
                "template_word": template_word,
                "where": at,
            }
        )
    missing = [label for label in LABELS if label not in seen]
    if missing:
        raise DataError(
            f"{where}: no {missing[0]!r} sentence; each example needs one sentence of each of {list(LABELS)}"
        )
    stereo, anti = (rows[seen[label]]["sentence"] for label in LABELS[:2])
    if " ".join(stereo.split()) == " ".join(anti.split()):
        as_written = "" if stereo == anti else f" (as {stereo!r}: they differ only in spaces)"
        raise DataError(
            f"{where}, sentences[{seen['anti-stereotype']}]: the anti-stereotype sentence {anti!r} is the "
            f"stereotype one (sentences[{seen['stereotype']}]){as_written}; the example would be a tie whatever "
            f"the model, so make them differ"
        )
    return rows
