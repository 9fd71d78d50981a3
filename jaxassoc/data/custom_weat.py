"""Users' own WEAT tests from a YAML, JSON or CSV file, or from four word lists (``dataset=custom_weat``).

The schema (``docs/datasets.md``):

- **YAML / JSON**: a mapping of test id to test; a test maps ``X``, ``Y``, ``A``, ``B`` to lists of
  words, with an optional ``name`` (a title) and optional ``labels`` (a mapping of ``X``/``Y``/``A``/``B``
  to a label such as ``Flowers``). The packaged ``weat/weat_caliskan2017.json`` is such a file. A set may
  instead name a ``.txt`` file, one word or target a line (e.g. ``X: targets_x.txt``, relative to the test
  file's folder): long target lists, or RPAM targets that are n-grams or sentences.
- **CSV**: a header row with the columns ``test``, ``set`` (``X``, ``Y``, ``A`` or ``B``) and ``word``, one
  word a row; optional columns ``name`` (the test's title) and ``label`` (the set's label); no column
  named twice.

Every test must have the four sets; each set at least two words (WEAT's d needs a spread), no word twice
in a set and no word in two sets of a test (the word rule of every metric,
:func:`jaxassoc.data.word_sets.check_distinct_words`). |X| ≠ |Y| and |A| ≠ |B| are allowed (the
permutation test keeps both sizes). Every error is a :class:`~jaxassoc.errors.DataError` naming the file,
the line, the test, the set and the word.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from jaxassoc.data.textfile import check_header, read_utf8
from jaxassoc.data.weat import WeatSuite, WeatTest
from jaxassoc.errors import DataError, InputError

SETS = ("X", "Y", "A", "B")
FORMATS = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".csv": "csv"}
TEST_KEYS = (*SETS, "name", "labels")
CSV_COLUMNS = ("test", "set", "word")
MIN_WORDS = 2
TEXT_FILE = ".txt"  # a set given as a file name: one word or target a line


@dataclasses.dataclass(frozen=True)
class _Set:
    """One word set as read: its words and the line of each (None: no line, e.g. the command line)."""

    words: tuple[str, ...]
    lines: tuple[int | None, ...]
    label: str
    line: int | None  # where the set starts


@dataclasses.dataclass(frozen=True)
class _Test:
    id: str
    name: str
    sets: dict[str, _Set]
    line: int | None


def weat_file_format(path: str | Path) -> str:
    """``yaml``, ``json`` or ``csv`` from the file's suffix; DataError naming the file otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise DataError(
            f"{path}: unknown format {suffix or '(no suffix)'!r} for WEAT tests; use a .yaml, .yml, .json or .csv "
            f"file (docs/datasets.md)"
        )
    return FORMATS[suffix]


def load_weat_file(path: str | Path) -> WeatSuite:
    """The WEAT tests of a YAML, JSON or CSV file (module docstring), checked, as a suite named by the file."""
    path = Path(path)
    kind = weat_file_format(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file; give the path of a WEAT test file (relative to where you run jaxassoc)")
    text = read_utf8(path, str(path))
    tests = _csv_tests(text, str(path)) if kind == "csv" else _mapping_tests(text, str(path), kind)
    return _suite(path.stem, tests, str(path))


def weat_suite_from_sets(
    sets: Mapping[str, Sequence[str]], *, test_id: str = "T1", source: str = "the command line"
) -> WeatSuite:
    """One WEAT test from four word lists ``{"X": [...], "Y": [...], "A": [...], "B": [...]}``, checked."""
    missing = [s for s in SETS if sets.get(s) is None]
    if missing:
        raise DataError(f"{source}: the WEAT test has no set {missing[0]}; give all four sets X, Y, A and B")
    parsed = {s: _Set(tuple(str(w) for w in sets[s]), (None,) * len(sets[s]), s, None) for s in SETS}
    return _suite("custom_weat", [_Test(test_id, test_id, parsed, None)], source)


def _where(source: str, line: int | None) -> str:
    return f"{source}, line {line}" if line is not None else source


def _suite(name: str, tests: list[_Test], source: str) -> WeatSuite:
    if not tests:
        raise DataError(f"{source}: no WEAT test found; see docs/datasets.md for the format")
    built = []
    for test in tests:
        for s in SETS:
            _check_set(test, s, source)
        _check_word_rule(test, source)
        words = [test.sets[s].words for s in SETS]
        labels = [test.sets[s].label for s in SETS]
        built.append(WeatTest(test.id, test.name, *words, *labels))
    return WeatSuite(name, tuple(built), source)


def _check_set(test: _Test, s: str, source: str) -> None:
    if s not in test.sets:
        raise DataError(
            f"{_where(source, test.line)}: test {test.id!r} has no set {s}; give all four sets X, Y, A and B"
        )
    found = test.sets[s]
    for word, line in zip(found.words, found.lines):
        if not word.strip():
            raise DataError(f"{_where(source, line)}: test {test.id!r}, set {s}: an empty word; remove it")
    if len(found.words) < MIN_WORDS:
        what = "is empty" if not found.words else f"has one word ({found.words[0]!r})"
        raise DataError(
            f"{_where(source, found.line)}: test {test.id!r}, set {s} {what}; a WEAT set needs at least "
            f"{MIN_WORDS} words"
        )


def _check_word_rule(test: _Test, source: str) -> None:
    """:func:`check_distinct_words` on the test, its InputError turned into a DataError at the word's line."""
    from jaxassoc.data.word_sets import check_distinct_words

    sets = [test.sets[s] for s in SETS]
    try:
        check_distinct_words(f"test {test.id!r}", [t.words for t in sets], SETS)
    except InputError as e:
        raise DataError(f"{_where(source, _offending_line(sets))}: {e}") from None


def _offending_line(sets: list[_Set]) -> int | None:
    """The line of the word :func:`check_distinct_words` refuses: the first repeat inside a set, else the
    first word already seen in an earlier set (the order in which it checks)."""
    for found in sets:
        seen: set[str] = set()
        for word, line in zip(found.words, found.lines):
            if word in seen:
                return line
            seen.add(word)
    seen = set()
    for found in sets:
        for word, line in zip(found.words, found.lines):
            if word in seen:
                return line
        seen |= set(found.words)
    return None


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _compose(text: str, source: str, kind: str) -> yaml.Node | None:
    if kind == "json":
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"{source}, line {e.lineno}, column {e.colno}: not valid JSON: {e.msg}") from None
        text = text.replace("\t", " ")  # a raw tab in valid JSON is whitespace (strings escape theirs); YAML refuses it
    try:
        return yaml.compose(io.StringIO(text), Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise DataError(f"{source}{where}: not valid {kind.upper()}: {e.problem}") from None


def _mapping_tests(text: str, source: str, kind: str) -> list[_Test]:
    root = _compose(text, source, kind)
    if root is None:
        raise DataError(f"{source}: the file is empty; give a mapping of test ids to tests (docs/datasets.md)")
    if not isinstance(root, yaml.MappingNode):
        raise DataError(
            f"{_where(source, _line(root))}: expected a mapping of test ids to tests "
            f"(e.g. T1: {{X: [...], Y: [...], A: [...], B: [...]}})"
        )
    tests = [_mapping_test(key, value, source) for key, value in root.value]
    _check_unique([(t.id, t.line) for t in tests], source, "test id")
    return tests


def _check_unique(names: list[tuple[str, int]], source: str, what: str) -> None:
    seen: set[str] = set()
    for name, line in names:
        if name in seen:
            raise DataError(f"{_where(source, line)}: {what} {name!r} appears twice; give each once")
        seen.add(name)


def _scalar(node: yaml.Node, source: str, what: str) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise DataError(f"{_where(source, _line(node))}: {what} must be a single value, not a list or mapping")
    return str(node.value)


def _mapping_test(key: yaml.Node, value: yaml.Node, source: str) -> _Test:
    test_id = _scalar(key, source, "a test id")
    if not isinstance(value, yaml.MappingNode):
        raise DataError(f"{_where(source, _line(value))}: test {test_id!r} must be a mapping with the keys X, Y, A, B")
    keys = [(_scalar(k, source, f"a key of test {test_id!r}"), _line(k)) for k, _ in value.value]
    _check_unique(keys, source, f"test {test_id!r}: key")
    fields = {}
    for k, v in value.value:
        name = _scalar(k, source, f"a key of test {test_id!r}")
        if name not in TEST_KEYS:
            raise DataError(
                f"{_where(source, _line(k))}: test {test_id!r} has an unknown key {name!r}; the keys "
                f"are {', '.join(TEST_KEYS)}"
            )
        fields[name] = v
    labels = _labels(fields.get("labels"), test_id, source)
    sets = {}
    for s in SETS:
        if s not in fields:
            raise DataError(
                f"{_where(source, _line(key))}: test {test_id!r} has no set {s}; give all four sets X, Y, A and B"
            )
        node = fields[s]
        if isinstance(node, yaml.ScalarNode) and str(node.value).lower().endswith(TEXT_FILE):
            sets[s] = _file_set(node, source, test_id, s, labels.get(s, s))
            continue
        if not isinstance(node, yaml.SequenceNode):
            raise DataError(
                f"{_where(source, _line(node))}: test {test_id!r}, set {s} must be a list of words or "
                f"the name of a {TEXT_FILE} file with one word or target a line"
            )
        words = tuple(_scalar(w, source, f"a word of test {test_id!r}, set {s}") for w in node.value)
        sets[s] = _Set(words, tuple(_line(w) for w in node.value), labels.get(s, s), _line(node))
    name = _scalar(fields["name"], source, f"the name of test {test_id!r}") if "name" in fields else test_id
    return _Test(test_id, name, sets, _line(key))


def _file_set(node: yaml.ScalarNode, source: str, test_id: str, s: str, label: str) -> _Set:
    """A set given as the name of a UTF-8 ``.txt`` file (relative to the test file's folder, ``~`` expanded): one
    word or target (an n-gram or a sentence, e.g. RPAM targets for ``template=tp2``) a line, stripped, blank
    lines skipped. A target twice in the file is a DataError at its line; the other checks name the set's
    line in the test file."""
    folder = Path(source).parent
    path = Path(node.value).expanduser()
    path = path if path.is_absolute() else folder / path
    if not path.is_file():
        raise DataError(
            f"{_where(source, _line(node))}: test {test_id!r}, set {s} names the file {node.value!r}, "
            f"but {path} is no file; give a text file with one word or target a line, relative to "
            f"the folder of {source}"
        )
    words: dict[str, int] = {}
    for number, line in enumerate(read_utf8(path, str(path)).splitlines(), 1):
        word = line.strip()
        if word in words:
            raise DataError(
                f"{path}, line {number}: test {test_id!r}, set {s}: {word!r} is already on line "
                f"{words[word]}; give each target once"
            )
        if word:
            words[word] = number
    if not words:
        raise DataError(
            f"{path}: test {test_id!r}, set {s}: the file holds no word or target (only blank lines); write one a line"
        )
    return _Set(tuple(words), (_line(node),) * len(words), label, _line(node))


def _labels(node: yaml.Node | None, test_id: str, source: str) -> dict[str, str]:
    if node is None:
        return {}
    if not isinstance(node, yaml.MappingNode):
        raise DataError(f"{_where(source, _line(node))}: the labels of test {test_id!r} must map X, Y, A, B to labels")
    labels = {}
    for k, v in node.value:
        s = _scalar(k, source, "a label's set")
        if s not in SETS:
            raise DataError(
                f"{_where(source, _line(k))}: test {test_id!r} labels an unknown set {s!r}; the sets are X, Y, A, B"
            )
        labels[s] = _scalar(v, source, f"the label of set {s}")
    return labels


def _csv_tests(text: str, source: str) -> list[_Test]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise DataError(f"{source}: the file is empty; its first row must name the columns {', '.join(CSV_COLUMNS)}")
    header = [h.strip() for h in header]
    check_header(header, source)
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise DataError(
            f"{source}, line 1: no column {missing[0]!r} (the header has {header}); the columns are "
            f"{', '.join(CSV_COLUMNS)}, optionally name and label"
        )
    col = {c: header.index(c) for c in (*CSV_COLUMNS, "name", "label") if c in header}
    rows: dict[str, dict] = {}
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            raise DataError(f"{source}, line {line}: a blank row; remove it")
        if len(row) != len(header):
            raise DataError(f"{source}, line {line}: {len(row)} fields, but the header has {len(header)}")
        test_id, s, word = (row[col[c]].strip() for c in CSV_COLUMNS)
        if s not in SETS:
            raise DataError(f"{source}, line {line}: test {test_id!r}: unknown set {s!r}; the sets are X, Y, A, B")
        entry = rows.setdefault(test_id, {"line": line, "name": test_id, "sets": {}})
        if "name" in col and row[col["name"]].strip():
            entry["name"] = row[col["name"]].strip()
        words, lines, label, first = entry["sets"].get(s, ((), (), s, line))
        if "label" in col and row[col["label"]].strip():
            label = row[col["label"]].strip()
        entry["sets"][s] = (words + (word,), lines + (line,), label, first)
    return [
        _Test(test_id, e["name"], {s: _Set(*v) for s, v in e["sets"].items()}, e["line"]) for test_id, e in rows.items()
    ]
