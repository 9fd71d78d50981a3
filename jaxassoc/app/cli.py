"""The ``jaxassoc`` command line before Hydra takes over: ``--help`` and the check of the overrides.

:func:`help_text` is jaxassoc's own ``--help``: the metrics, datasets, models and other choices read from the
config files (``conf/<group>/*.yaml``, their leading comment says what each is; the schemas Hydra also
lists as choices stay hidden), the top-level options, sweeps and examples. It imports neither JAX nor
Hydra, so it answers at once; this module must stay light to import for that reason (everything heavy is
imported inside the functions that need it).

:func:`check_overrides` composes each job's config as Hydra will, before Hydra creates any folder, and
turns Hydra's composition errors into jaxassoc's words (:func:`explain`): a mistyped key names the closest
valid keys instead of Hydra's ``+key`` hint (which jaxassoc would then refuse), a mistyped choice
(``metric=weatt``) the closest choices without the ``*_schema`` entries, and a launcher whose Hydra plugin
is not installed the extra that brings it (``pip install 'jaxassoc[launchers]'``).
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import textwrap
from pathlib import Path, PurePath
from typing import Any

from jaxassoc.errors import ConfigError

CONFIG_MODULE = "jaxassoc.conf"
WIDTH = 100
GROUPS = ("model", "metric", "dataset", "template", "whitening", "intervention", "stats", "mesh", "audit")

OPTIONS = {
    "seed": "the job's seed, 0..2^32-1 (sampling, permutations, bootstrap); default 0",
    "quiet": "true: no stage lines, progress bars or tables, only errors and where the results are",
    "resume": "false: rerun a job whose finished results are in its folder (default true: skip it)",
    "cache_dir": "where model outputs are cached (default $JAXASSOC_CACHE, else the user cache folder); null: off",
    "cache_max_gb": "after each job, drop the least recently used cache entries beyond this size (default: no limit)",
    "compile_cache": "false: do not keep XLA's compiled functions in <cache folder>/xla",
    "distributed": "true: jax.distributed.initialize() first, one process per host (docs/multihost.md)",
    "distributed_timeout_s": "how long distributed=true waits for every process to connect (default 120)",
}
"""The top-level options with one line each (``AppConfig`` in :mod:`jaxassoc.app.config`, besides the groups)."""

LAUNCHER_PLUGINS = {
    "joblib": ("local_parallel", "hydra-joblib-launcher"),
    "submitit_local": ("submitit_local", "hydra-submitit-launcher"),
    "submitit_slurm": ("slurm", "hydra-submitit-launcher"),
}
"""Hydra's launcher configs that come from a plugin: file name -> (jaxassoc's launcher name, the plugin's
distribution); ``jaxassoc[launchers]`` installs both plugins."""

LAUNCHERS_EXTRA = "pip install 'jaxassoc[launchers]'"


def conf_dir() -> Path:
    """The folder of jaxassoc's configs (``conf/`` in a checkout, ``jaxassoc/conf`` in a wheel)."""
    import importlib

    return Path(importlib.import_module(CONFIG_MODULE).__file__).parent


def wants_help(argv: list[str]) -> bool:
    """True when the command line asks for jaxassoc's help (``-h`` or ``--help``; ``--hydra-help`` is Hydra's)."""
    return any(arg in ("-h", "--help") for arg in argv)


def name_of_source(overrides: list[str], source: str) -> str | None:
    """The name that labels a model given by ``model.source=`` alone (no ``model=`` choice, no ``model.name=``),
    derived from ``source``: a folder's or file's name without ``.gguf``, a hub id's last part
    (``/data/llama-3-8b/`` -> ``llama-3-8b``, ``EleutherAI/pythia-70m`` -> ``pythia-70m``). None when the
    overrides choose or name the model: the run is labelled as they say, never with the default model's name
    for another model's weights."""
    keys = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    if "model.source" not in keys or keys & {"model", "model.name"}:
        return None
    local = Path(str(source)).expanduser()
    stem = (local.resolve() if local.exists() else PurePath(str(source).rstrip("/\\"))).name  # "." -> its folder
    stem = stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    return stem or str(source)


def wants_version(argv: list[str]) -> bool:
    """True when the command line asks for jaxassoc's version (``--version``, which Hydra would answer with
    its own)."""
    return "--version" in argv


def leading_comment(path: Path) -> str:
    """The comment block at the top of a YAML file, as one line (``""`` when it starts with no comment)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(line for line in lines if line)


def first_sentences(text: str, limit: int = 170) -> str:
    """The first sentence of ``text``, and the next ones while the whole stays within ``limit`` characters;
    a first sentence longer than 1.5 times that ends at its first colon (``... on a causal LM with dataset=abc``)."""
    sentences = re.split(r"(?<=\.)(?<!\bal\.)(?<!e\.g\.)(?<!i\.e\.)\s+", text)
    kept = sentences[:1]
    if len(kept[0]) > 1.5 * limit and ": " in kept[0][:limit]:
        return kept[0][: kept[0].index(": ")] + "."
    for sentence in sentences[1:]:
        if len(" ".join([*kept, sentence])) > limit:
            break
        kept.append(sentence)
    return " ".join(kept)


def choices(group: str) -> dict[str, Path]:
    """The options of a config group that a user picks (``conf/<group>/*.yaml``), by name."""
    return {p.stem: p for p in sorted((conf_dir() / group).glob("*.yaml"), key=lambda p: p.stem)}


def _entries(group: str, indent: int = 2, name_width: int = 20) -> list[str]:
    lines = []
    for name, path in choices(group).items():
        described = first_sentences(leading_comment(path)) or "-"
        head = f"{' ' * indent}{name:<{name_width}} "
        if len(head) > indent + name_width + 1:
            head += "\n" + " " * (indent + name_width + 1)
        lines.append(
            textwrap.fill(
                described,
                WIDTH,
                initial_indent=head,
                subsequent_indent=" " * (indent + name_width + 1),
                break_on_hyphens=False,
            )
        )
    return lines


def _wrapped(names: list[str], indent: int) -> str:
    return textwrap.fill(
        ", ".join(names), WIDTH, initial_indent=" " * indent, subsequent_indent=" " * indent, break_on_hyphens=False
    )


def _models() -> list[str]:
    from jaxassoc.resources import EMBEDDED  # light: locates packages, imports none

    offline, hub, files = [], [], []
    for name, path in choices("model").items():
        text = path.read_text(encoding="utf-8")
        source = re.search(r"^source:\s*(\S+)", text, re.MULTILINE)
        source = source.group(1) if source else ""
        if source in EMBEDDED:
            offline.append(name)
        elif source.startswith(("~", "/", ".")):
            files.append(name)
        else:
            hub.append(name)
    lines = ["  offline, shipped as packages (no network):"]
    for name in offline:
        described = first_sentences(leading_comment(choices("model")[name]), 120)
        lines.append(
            textwrap.fill(
                described, WIDTH, initial_indent=f"    {name:<18} ", subsequent_indent=" " * 23, break_on_hyphens=False
            )
        )
    lines += [
        "  Hugging Face hub checkpoints (network or a local HF cache; model.source=<folder> for a local copy):",
        _wrapped(hub, 4),
    ]
    if files:
        lines += ["  vectors you download first (model.source=<file>):", _wrapped(files, 4)]
    lines.append(
        "  any other checkpoint: pick a config of its kind and set model.source=<hub id or folder> and model.name"
    )
    return lines


def _plugins() -> list[str]:
    named = [m.strip() for m in os.environ.get("JAXASSOC_PLUGINS", "").split(",") if m.strip()]
    try:
        from importlib.metadata import entry_points

        named += [f"{e.name} (entry point)" for e in entry_points(group="jaxassoc.metrics")]
    except Exception:  # a broken distribution's metadata: the help still prints
        pass
    if not named:
        return [
            "  Your own metrics: a module that calls register_metric, named in JAXASSOC_PLUGINS (examples/custom_metric.py)."
        ]
    return [
        textwrap.fill(
            f"Plugin modules (their metrics are not listed: --help imports no plugin): {', '.join(named)}.",
            WIDTH,
            initial_indent="  ",
            subsequent_indent="  ",
        )
    ]


EXAMPLES = """\
  jaxassoc                                                   the default audit (offline, ~5 min on 2 CPUs)
  jaxassoc model=glove-6b-50d metric=weat whitening=zca      WEAT W1-W10, raw and ZCA-whitened
  jaxassoc model=smollm2-135m metric=rpam dataset=bellezza template=tp1
  jaxassoc model=smollm2-135m metric=unstereo dataset=use5 dataset.sample=500
  jaxassoc model=glove-6b-50d metric=weat dataset=custom_weat dataset.path=my_tests.yaml
  jaxassoc -m model=smollm2-135m metric=rpam dataset=weat_ws template=tp1,tp2
  jaxassoc -m metric=rpam dataset=weat_ws intervention=none,ablate 'intervention.heads=[[3,1]]'
  jaxassoc -m hydra/launcher=local_parallel seed=1,2,3 ...   jobs in parallel processes (jaxassoc[launchers])
  jaxassoc metric=rpam --cfg job                             every option of a job with its value"""


def help_text() -> str:
    """jaxassoc's ``--help``: what it runs, every choice of the config groups, the options and examples."""
    groups = {g: list(choices(g)) for g in ("template", "whitening", "intervention", "mesh", "stats", "audit")}
    options = [
        textwrap.fill(text, WIDTH, initial_indent=f"  {key:<22} ", subsequent_indent=" " * 25)
        for key, text in OPTIONS.items()
    ]
    parts = [
        "usage: jaxassoc [GROUP=CHOICE ...] [KEY=VALUE ...]          one job; with no metric, the default audit",
        "       jaxassoc -m [GROUP=A,B ...] [KEY=V1,V2 ...]          a sweep: one job per combination",
        "       jaxassoc [...] --cfg job                             print the composed config instead of running",
        "",
        textwrap.fill(
            "Differentiable association and social-bias metrics for language models, in JAX. Each job composes "
            "a model, a metric and a dataset, writes its tables, provenance and figures into its own folder "
            "(outputs/<date>/<time>, or <sweep folder>/<overrides>) and skips itself when rerun into a folder "
            "that holds its finished results.",
            WIDTH,
        ),
        "",
        "Metrics (metric=NAME):",
        *_entries("metric"),
        *_plugins(),
        "",
        "Datasets (dataset=NAME):",
        *_entries("dataset"),
        "",
        "Models (model=NAME):",
        *_models(),
        "",
        "Other groups:",
        *(f"  {g}={'|'.join(names)}" for g, names in groups.items()),
        "  A group's options: group.key=value (e.g. stats.n_permutations=10000, metric.n_draws=1000);",
        "  `jaxassoc metric=NAME --cfg job` lists them with their values; docs/statistics_options.md says which",
        "  metric reads which stats option.",
        "",
        "Options:",
        *options,
        "",
        "Sweeps (-m): one folder per sweep, multirun/<date>/<time>/<overrides>; hydra.sweep.dir=DIR picks it, and",
        "  rerunning a sweep into the same DIR skips its finished jobs. A failed job does not stop the others: the",
        "  sweep ends with a list of the failed jobs, why, and their logs, and a non-zero exit status.",
        "  hydra/launcher=local_parallel (parallel processes), submitit_local or slurm need jaxassoc[launchers].",
        "",
        "Examples:",
        EXAMPLES,
        "",
        "Results: jaxassoc-report DIR (report.md, tables and plots of every job under DIR).",
        "Cache:   jaxassoc-cache list | clear [--older-than 7d].",
        "More:    README.md and docs/ in the source; jaxassoc --hydra-help for Hydra's own flags.",
    ]
    return "\n".join(parts)


# --- checking the overrides ------------------------------------------------------------------------------


def check_overrides(argv: list[str]) -> int | None:
    """Compose the config of the jobs the command line asks for (of a sweep, one per combination of group
    choices and keys: :func:`representatives`), as Hydra will, and raise ConfigError in jaxassoc's words
    (:func:`explain`) for the first one that fails. Returns the number of jobs of a sweep
    (``-m``; 1 for a single job), or None when the command line is one this check leaves to Hydra (its
    own flags such as ``--info``, another config, another sweeper). The metrics and schemas must be
    registered first (:func:`jaxassoc.app.main.register`)."""
    parsed = _parse_args(argv)
    if parsed is None:
        return None
    overrides, multirun = parsed
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():  # someone else's Hydra context: leave the check to Hydra
        return None
    try:
        jobs = _jobs(overrides) if multirun else [overrides]
    except ConfigError:
        raise
    except Exception:  # e.g. a sweep that only Hydra's own parser, with its config loader, can expand
        return None
    if jobs is None:
        return None
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        for job in representatives(jobs):
            try:
                compose(config_name="config", overrides=job)
            except Exception as e:
                error = explain(e)
                if error is None:
                    return None
                raise error from None
    return len(jobs)


def with_default_dataset(argv: list[str], defaults: dict[str, str]) -> list[str]:
    """``argv`` with ``dataset=<d>`` added when it names no dataset and its metric(s) all read the same own
    dataset by default (``defaults``: metric -> dataset, e.g. ``crows_pairs`` -> ``crows_pairs``; the others
    read the root config's), so the job folders name it. A sweep whose metrics default to different datasets
    is left as it is: each job's metric then picks its own default dataset in Hydra's defaults list
    (:func:`jaxassoc.app.config.register_configs`), and ``dataset=...`` on the command line applies to all."""
    parsed = _parse_args(argv)
    if parsed is None:
        return argv
    overrides, multirun = parsed
    if any(o.split("=", 1)[0].lstrip("+~") == "dataset" for o in overrides):
        return argv
    jobs = (_jobs(overrides) if multirun else [overrides]) or [overrides]
    metrics = {next((o.split("=", 1)[1] for o in job if o.split("=", 1)[0] == "metric"), None) for job in jobs}
    wanted = {defaults.get(m) for m in metrics}
    if wanted == {None} or len(wanted) > 1:
        return argv
    at = argv.index(overrides[0]) if overrides else len(argv)  # the overrides stay together for argparse
    return [*argv[:at], f"dataset={wanted.pop()}", *argv[at:]]


def check_output_folder(argv: list[str]) -> None:
    """ConfigError naming the output folder when it cannot be written: the folder Hydra writes into
    (``hydra.run.dir`` / ``hydra.sweep.dir`` as given, else ``outputs`` / ``multirun`` here) would be made
    under a file, or under a folder that is read-only. Checked before Hydra, whose own error is a traceback.
    A folder named with an interpolation (``${now:...}``) is checked from its first fixed part."""
    parsed = _parse_args(argv)
    if parsed is None:
        return
    overrides, multirun = parsed
    key, default = ("hydra.sweep.dir", "multirun") if multirun else ("hydra.run.dir", "outputs")
    given = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key), default)
    if not given.strip():
        raise ConfigError(f"{key}= is empty: name the output folder (an empty one would write into this folder)")
    folder = Path(given.split("${", 1)[0] or ".").expanduser()
    existing = next(p for p in (folder, *folder.parents) if p.exists() or p == Path(p.anchor or "."))
    if not existing.is_dir():
        raise ConfigError(
            f"the output folder {given} cannot be made: {existing} is a file, not a folder; choose another with {key}=..."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"the output folder {given} cannot be written: {existing} is read-only for this user; choose another "
            f"with {key}=..."
        )


def _parse_args(argv: list[str]) -> tuple[list[str], bool] | None:
    """The overrides and whether ``-m`` was given, as Hydra's own argument parser reads ``argv``; None when
    the command line is not a plain run or sweep of jaxassoc's config (left to Hydra)."""
    try:
        from hydra._internal.utils import get_args_parser
    except ImportError:
        return None
    with contextlib.redirect_stderr(io.StringIO()):  # a bad flag: Hydra's parser reports it after this check
        try:
            args = get_args_parser().parse_args(argv)
        except SystemExit:
            return None
    others = ("hydra_help", "shell_completion", "info", "config_path", "config_name", "config_dir")
    if any(getattr(args, name, None) for name in others) or getattr(args, "experimental_rerun", None):
        return None
    return list(args.overrides), bool(args.multirun)


def _jobs(overrides: list[str]) -> list[list[str]] | None:
    """Every job's overrides of a sweep, as Hydra's basic sweeper splits them (None: another sweeper)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as e:
        error = explain(e)
        if error is None:
            return None
        raise error from None
    if any(o.key_or_group == "hydra/sweeper" for o in parsed):
        return None
    hydra_overrides = [o.input_line for o in parsed if o.is_hydra_override()]
    task = [o for o in parsed if not o.is_hydra_override()]
    return [hydra_overrides + job for batch in BasicSweeper.split_arguments(task, None) for job in batch]


def representatives(jobs: list[list[str]]) -> list[list[str]]:
    """One job per distinct combination of group choices (``metric=weat``, ``hydra/launcher=...``) and set of
    other keys: composing those finds every mistyped key or choice of the sweep, without composing each of
    its jobs (``seed=range(0,1000)``: one job). A bad value of a key the first job of its combination does not
    show is left to Hydra's own check, which reports it without the ``+key`` hint."""
    seen, chosen = set(), []
    for job in jobs:
        signature = []
        for override in job:
            key = override.split("=", 1)[0]
            plain = key.lstrip("+~")
            signature.append(override if plain in GROUPS or "/" in plain else key)
        signature = tuple(sorted(signature))
        if signature not in seen:
            seen.add(signature)
            chosen.append(job)
    return chosen


def explain(e: Exception) -> ConfigError | None:
    """A ConfigError in jaxassoc's words for an error Hydra raises while composing a config; None for an
    error that is not about the config (Hydra reports it itself)."""
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(e, MissingConfigException) and e.missing_cfg_file:
        return _missing_choice(e.missing_cfg_file, list(e.options or []), str(e))
    if isinstance(e, ConfigCompositionException):
        line = re.search(r"To append to your config use \+(.+)$", str(e), re.DOTALL)
        cause = e.__cause__
        if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None) and line:
            return _unknown_key(line.group(1).strip(), cause)
        merging = re.match(r"Error merging override (.+)$", str(e), re.DOTALL)
        if merging and cause is not None:
            return ConfigError(f"{merging.group(1).strip()}: {_first_line(str(cause))}")
        ambiguous = re.match(r"Ambiguous value for argument '(.+?)'", str(e))
        if ambiguous:
            return ConfigError(
                f"{ambiguous.group(1)}: a comma-separated value makes a sweep only with -m (--multirun); write "
                "[a,b] for a list or quote it ('a,b') for a text"
            )
        return ConfigError(_without_plus_hint(str(e)))
    if isinstance(e, (OverrideParseException, MissingConfigException)):
        return ConfigError(_without_plus_hint(str(e)))
    return None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _without_plus_hint(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "To append to your config use +" not in line).strip()


def closest(word: str, candidates: list[str], n: int = 3) -> list[str]:
    """The candidates nearest to ``word`` (a typo's likely intent), best first; a candidate that starts
    with ``word`` counts too (``n_perm`` -> ``n_permutations``)."""
    near = difflib.get_close_matches(word, candidates, n=n, cutoff=0.6)
    starting = [c for c in candidates if word and c.startswith(word) and c not in near]
    return (near + starting)[:n]


def _did_you_mean(names: list[str]) -> str:
    return f"; did you mean {' or '.join(names)}?" if names else "."


def _unknown_key(line: str, cause: Any) -> ConfigError:
    """``stats.n_permutation=10`` -> ConfigError naming the closest keys of ``stats`` and all its keys."""
    from omegaconf import DictConfig

    full_key = str(cause.full_key)
    parent = getattr(cause, "parent_node", None)
    keys = sorted(str(k) for k in parent.keys()) if isinstance(parent, DictConfig) else []
    prefix, _, key = full_key.rpartition(".")
    where = "jaxassoc" if not prefix else prefix
    if prefix in ("metric", "dataset", "model") and isinstance(parent, DictConfig) and "name" in parent:
        where = f"{prefix}={parent.get('name')}"
    if not prefix:
        groups = [k for k in keys if k in GROUPS]
        options = [k for k in keys if k not in GROUPS and k != "hydra"]
        near = closest(key, groups + options)
        return ConfigError(
            f"{line}: {key} is not an option of jaxassoc{_did_you_mean(near)} The groups are "
            f"{', '.join(groups)} (group=choice, group.key=value) and the options {', '.join(options)} "
            "(jaxassoc --help)"
        )
    near = [f"{prefix}.{k}" for k in closest(key, keys)]
    show = f"jaxassoc {where} --cfg job" if "=" in where else "jaxassoc --cfg job"
    return ConfigError(
        f"{line}: {full_key} is not an option of {where}{_did_you_mean(near)} Its options are "
        f"{', '.join(keys)} (`{show}` shows them with their values)"
    )


def _missing_choice(missing: str, options: list[str], hydra_message: str) -> ConfigError:
    """``metric/weatt`` (a choice no config file names) -> ConfigError naming the closest choices; a
    launcher whose Hydra plugin is missing -> the extra that installs it."""
    group, _, choice = missing.rpartition("/")
    if group == "hydra/launcher" and choice in LAUNCHER_PLUGINS and choice not in options:
        name, plugin = LAUNCHER_PLUGINS[choice]
        return ConfigError(
            f"hydra/launcher={name} needs Hydra's {choice.split('_')[0]} launcher plugin ({plugin}), which is not "
            f"installed: {LAUNCHERS_EXTRA} (or pip install {plugin}); without it, leave hydra/launcher out and "
            "the sweep runs its jobs one after another in this process"
        )
    shown = [o for o in options if not o.endswith("_schema")]
    if not group or not shown:
        return ConfigError(_without_plus_hint(hydra_message))
    near = closest(choice, shown)
    what = {"model": "model config", "metric": "metric", "dataset": "dataset"}.get(group, f"{group} choice")
    listed = (
        f"The choices are {', '.join(shown)}"
        if len(shown) <= 20
        else f"There are {len(shown)} {what}s: jaxassoc --help lists them"
    )
    hint = ""
    if group == "model":
        hint = (
            "; for a checkpoint without a config, pick a config of its kind and set "
            "model.source=<hub id or folder> and model.name=<short name>"
        )
    elif group == "metric":
        hint = "; a metric of your own: name its module in JAXASSOC_PLUGINS"
    return ConfigError(f"{group}={choice}: there is no {what} {choice!r}{_did_you_mean(near)} {listed}{hint}")
