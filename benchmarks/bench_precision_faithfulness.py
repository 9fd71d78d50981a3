"""How far ``model.precision=mixed`` and ``bfloat16`` move each metric's headline numbers from ``float32``.

Runs the real CLI jobs (``python -m jaxassoc metric=... model=... model.precision=...``), each in its own
``hydra.run.dir`` under ``--out`` and all with one fresh ``cache_dir`` (a policy's model outputs are cached
apart: the model fingerprint names the precision), on the embedded offline models, then reads their
``items.parquet`` / ``aggregates.parquet`` and compares each policy with float32:

- RPAM Test d over WEAT-WS C1-C10 (the audit's ``rpam_weat_ws`` part: ``dataset=weat_ws template=tp1``);
- SeT and ILPS alignment with the ABC human ratings (Kendall's tau, the audit's ``stereotypes_*`` parts);
- UnStereoEval: US score and preference disparity per subset, and the share of pairs whose decision (male,
  neutral, female) changes;
- CrowS-Pairs: metric score per bias type, and the share of pairs whose outcome (more / less / neutral) flips;
- SEAT d (WEAT Caliskan suite in bleached templates) on MiniLM-L6 and on SmolLM2;
- causal mediation (Vig et al. 2020): the total effect and every head's natural indirect effect.

For each: max and mean |Δ| of the headline numbers, and whether float32's own decision (p < 0.05, or a CI
that excludes the null) changes. A job whose folder already holds ``results.json`` is not rerun (resume), nor one that failed before
(``failed.txt``, its last error line, shown in the table) unless ``--retry-failed``.
Prints a Markdown table and writes it, with the commands, sample sizes, times and ``uptime``, to ``--md``.

    .venv/bin/python benchmarks/bench_precision_faithfulness.py                      # ~25 min on 2 cores
    .venv/bin/python benchmarks/bench_precision_faithfulness.py --only rpam,crows_pairs --out /tmp/pf
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
ALPHA = 0.05
LN_THRESHOLD = math.log(1.65)  # UnStereoEval: neutral iff |FM| <= ln 1.65 (docs/methods.md §4)


@dataclass(frozen=True)
class Job:
    key: str
    label: str
    overrides: tuple[str, ...]


def jobs(args) -> list[Job]:
    smol = "model=smollm2-135m"
    return [
        Job("rpam", "RPAM d, WEAT-WS C1-C10 (SmolLM2)", (smol, "metric=rpam", "dataset=weat_ws", "template=tp1")),
        Job("set", "SeT alignment, ABC (SmolLM2)", (smol, "metric=set", "dataset=abc")),
        Job("ilps", "ILPS alignment, ABC (SmolLM2)", (smol, "metric=ilps", "dataset=abc")),
        Job(
            "unstereo",
            f"UnStereoEval USE-5, {args.unstereo_sample} templates (SmolLM2)",
            (smol, "metric=unstereo", "dataset=use5", f"dataset.sample={args.unstereo_sample}"),
        ),
        Job(
            "crows_pairs",
            f"CrowS-Pairs, {args.crows_sample} pairs (SmolLM2)",
            (smol, "metric=crows_pairs", "dataset=crows_pairs", f"dataset.sample={args.crows_sample}"),
        ),
        Job("seat_minilm", "SEAT d, WEAT tests (MiniLM-L6)", ("model=minilm-l6", "metric=seat")),
        Job("seat_smollm2", "SEAT d, WEAT tests (SmolLM2)", (smol, "metric=seat")),
        Job(
            "mediation",
            f"Mediation, {args.mediation_sample} professions x {args.mediation_templates} templates (SmolLM2)",
            (
                smol,
                "metric=mediation",
                f"dataset.sample={args.mediation_sample}",
                f"metric.templates={args.mediation_templates}",
            ),
        ),
    ]


def run_job(job: Job, precision: str, out: Path, cache: Path, retry: bool) -> tuple[Path, float | None]:
    folder = out / job.key / precision
    if (folder / "results.json").exists() or ((folder / "failed.txt").exists() and not retry):
        return folder, None
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "failed.txt").unlink(missing_ok=True)
    command = [sys.executable, "-m", "jaxassoc", *job.overrides, f"model.precision={precision}"]
    command += [f"hydra.run.dir={folder}", f"cache_dir={cache}", "quiet=true"]
    with (out / "uptime.log").open("a") as log:  # the machine's load as each job starts
        log.write(f"{job.key} {precision}: {uptime()}\n")
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    (out / f"{job.key}-{precision}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:  # reported in the table, the other jobs still run
        lines = [line for line in proc.stderr.splitlines() if line.strip() and "HYDRA_FULL_ERROR" not in line]
        (folder / "failed.txt").write_text(lines[-1] if lines else f"exit status {proc.returncode}")
        print(f"{' '.join(command)} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
    return folder, seconds


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def read(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(folder / "items.parquet"), pd.read_parquet(folder / "aggregates.parquet")


def deltas(a: pd.Series, b: pd.Series) -> tuple[float, float, int]:
    """(max |Δ|, mean |Δ|, n) over the rows where both are defined."""
    d = (b.astype(float) - a.astype(float)).abs().dropna()
    return (float(d.max()), float(d.mean()), len(d)) if len(d) else (math.nan, math.nan, 0)


def decision(frame: pd.DataFrame) -> pd.Series:
    """float32's kind of decision: p < 0.05 (two-sided tests), with the sign of the effect."""
    effect = frame["effect"].astype(float)
    return np.sign(effect).where(frame["p_value"].astype(float) < ALPHA, 0)


def ci_excludes_zero(frame: pd.DataFrame) -> pd.Series:
    low, high = frame["ci_low"].astype(float), frame["ci_high"].astype(float)
    return np.sign(low).where(np.sign(low) == np.sign(high), 0)


def compare(key: str, ref: tuple, other: tuple) -> list[dict]:
    """Rows of the table: one per headline number of ``key``'s metric."""
    (ri, ra), (oi, oa) = ref, other
    rows = []

    def row(what, a, b, n_what, changed=None, note=""):
        mx, mean, n = deltas(a, b)
        rows.append(dict(number=what, max=mx, mean=mean, n=f"{n} {n_what}", changed=changed, note=note))

    def tests(index, effect, ci=True):
        r = ra[ra[effect].notna()].set_index(index).rename(columns={effect: "effect"})  # not the summary rows
        o = oa.set_index(index).rename(columns={effect: "effect"}).loc[r.index]
        p = (decision(r) != decision(o)).sum()
        changed = f"p<.05: {p} of {len(r)}"
        if ci:
            changed += f"; CI excl. 0: {(ci_excludes_zero(r) != ci_excludes_zero(o)).sum()} of {len(r)}"
        return r, o, changed

    if key == "rpam":
        r, o, changed = tests("test", "effect_size")
        row("d per test", r["effect"], o["effect"], "tests", changed)
        share = [float(f.loc[f["test"] == "all", "share_positive"].iloc[0]) for f in (ra, oa)]
        row("share of tests with d > 0 (F1)", pd.Series(share[:1]), pd.Series(share[1:]), "score")
    elif key in ("set", "ilps"):
        r, o = ra.iloc[[0]], oa.iloc[[0]]
        changed = f"p<.05: {int((r['p_value'].iloc[0] < ALPHA) != (o['p_value'].iloc[0] < ALPHA))} of 1"
        row("Kendall tau, all groups", r["kendall_tau_overall"], o["kendall_tau_overall"], "score", changed)
        row("P@3, all groups", r["p_at_3_overall"], o["p_at_3_overall"], "score")
        ti, to = ri.set_index(["template", "group"]), oi.set_index(["template", "group"])
        row("Kendall tau per group", ti["kendall_tau"], to["kendall_tau"].loc[ti.index], "groups")
    elif key == "unstereo":
        r, o = ra.set_index("subset"), oa.set_index("subset").loc[ra["subset"]]
        within = int(((o["us_score"] - r["us_score"]).abs() <= r["us_std_error"]).sum())
        note = (
            f"unconstrained: {r.loc['unconstrained', 'us_score']:.1f} → {o.loc['unconstrained', 'us_score']:.1f}; "
            f"Δ within float32's standard error in {within} of {len(r)} subsets"
        )
        row("US score (%) per subset", r["us_score"], o["us_score"], "subsets", note=note)
        note = (
            f"unconstrained: {r.loc['unconstrained', 'preference_disparity']:.1f} → "
            f"{o.loc['unconstrained', 'preference_disparity']:.1f}"
        )
        row("preference disparity (pp) per subset", r["preference_disparity"], o["preference_disparity"], "subsets",
            note=note)  # fmt: skip
        ki = ri.set_index("orig_index")
        ko = oi.set_index("orig_index").loc[ki.index]

        def side(fm):
            return np.where(np.abs(fm) <= LN_THRESHOLD, 0, np.sign(fm))

        flips = side(ki["FM_logprob"].to_numpy()) != side(ko["FM_logprob"].to_numpy())
        row("FM = log P(F) - log P(M) per pair", ki["FM_logprob"], ko["FM_logprob"], "pairs",
            f"{flips.sum()} of {len(flips)} pairs ({100 * flips.mean():.1f}%) change M / neutral / F")  # fmt: skip
        for side_ in ("M", "F"):
            row(f"log P({side_} sentence)", ki[f"{side_}_logprob"], ko[f"{side_}_logprob"], "sentences")
    elif key == "crows_pairs":
        r, o = ra.set_index("bias_type"), oa.set_index("bias_type").loc[ra["bias_type"]]
        p = ((r["p_value"] < ALPHA) != (o["p_value"] < ALPHA)).sum()
        row("metric score (%) per bias type", r["metric_score"], o["metric_score"], "rows (all + types)",
            f"p<.05 vs 50%: {p} of {len(r)}", f"all pairs: {r.loc['all', 'metric_score']:.1f} → "
            f"{o.loc['all', 'metric_score']:.1f}")  # fmt: skip
        ki, ko = ri.set_index("pair"), oi.set_index("pair").loc[ri.set_index("pair").index]
        flips = (ki["outcome"] != ko["outcome"]).to_numpy()
        margin = (ki["sent_more_score"] - ki["sent_less_score"]).abs().to_numpy()
        note = f"{flips.sum()} of {len(flips)} pairs ({100 * flips.mean():.1f}%) flip"
        if flips.any():
            note += f"; float32 margin of the flipped pairs <= {margin[flips].max():.3g} nats"
            note += f" (median margin of all pairs {np.median(margin):.3g})"
        row("sentence log-likelihood, sent_more", ki["sent_more_score"], ko["sent_more_score"], "pairs")
        sign = {"more": 1.0, "neutral": 0.0, "less": -1.0}
        row("decision per pair (more 1, neutral 0, less -1)", ki["outcome"].map(sign), ko["outcome"].map(sign),
            "pairs", note)  # fmt: skip
    elif key.startswith("seat"):
        r, o, changed = tests("test", "d")
        row("d per test", r["effect"], o["effect"], "tests", changed)
    elif key == "mediation":
        total_r, total_o = (f[f["component"] == "total"].iloc[0] for f in (ra, oa))
        ci = [int(np.sign(t["total_ci_low"]) == np.sign(t["total_ci_high"])) for t in (total_r, total_o)]
        row("total effect", pd.Series([total_r["total_effect"]]), pd.Series([total_o["total_effect"]]), "score",
            f"CI excl. 0: {int(ci[0] != ci[1])} of 1",
            f"{total_r['total_effect']:.3f} → {total_o['total_effect']:.3f}")  # fmt: skip
        heads = [f[f["component"] == "head"].set_index(["layer", "head"]) for f in (ra, oa)]
        rh, oh = heads[0], heads[1].loc[heads[0].index]
        ci = [np.sign(h["indirect_ci_low"]).where(np.sign(h["indirect_ci_low"]) == np.sign(h["indirect_ci_high"]), 0)
              for h in (rh, oh)]  # fmt: skip
        top = [set(h["indirect_effect"].abs().nlargest(10).index) for h in (rh, oh)]
        row("natural indirect effect per head", rh["indirect_effect"], oh["indirect_effect"], "heads",
            f"CI excl. 0: {int((ci[0] != ci[1]).sum())} of {len(rh)}",
            f"top-10 heads by |NIE|: {len(top[0] & top[1])} of 10 shared; largest |NIE| in float32 "
            f"{rh['indirect_effect'].abs().max():.3g}")  # fmt: skip
        row("natural direct effect per head", rh["direct_effect"], oh["direct_effect"], "heads")
        neurons = [set(map(tuple, f.loc[f["component"] == "neuron", ["layer", "neuron"]].to_numpy())) for f in (ra, oa)]
        note = f"neurons selected (top per layer): {len(neurons[0] & neurons[1])} of {len(neurons[0])} the same"
        rows.append(dict(number="selected neurons", max=math.nan, mean=math.nan, n="", changed=None, note=note))
    return rows


def fmt(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="job folders and the cache (default: a new tmp dir)")
    parser.add_argument("--md", type=Path, default=ROOT / "benchmarks" / "precision_faithfulness.md")
    parser.add_argument("--precisions", default="mixed,bfloat16", help="compared with float32")
    parser.add_argument("--only", default=None, help="comma-separated job keys (default: all)")
    parser.add_argument("--retry-failed", action="store_true", help="rerun jobs that failed before (else reported)")
    parser.add_argument("--unstereo-sample", type=int, default=500)
    parser.add_argument("--crows-sample", type=int, default=500)
    parser.add_argument("--mediation-sample", type=int, default=6)
    parser.add_argument("--mediation-templates", type=int, default=3)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="jaxassoc-precision-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"
    chosen = [j for j in jobs(args) if args.only is None or j.key in args.only.split(",")]
    precisions = args.precisions.split(",")
    loads = [uptime()]
    started = time.perf_counter()
    table, seconds = [], {}
    for job in chosen:
        folders = {}
        for precision in ["float32", *precisions]:
            folders[precision], took = run_job(job, precision, out, cache, args.retry_failed)
            done = folders[precision] / "results.json"
            seconds[(job.key, precision)] = (
                json.loads(done.read_text())["summary"]["seconds"] if done.exists() else None
            )
            print(f"{job.key} {precision}: {'reused' if took is None else f'{took:.0f} s'}", flush=True)
        for precision in precisions:
            failed = [folders[p] / "failed.txt" for p in ("float32", precision) if (folders[p] / "failed.txt").exists()]
            if failed:
                note = "; ".join(f"the {f.parent.name} job failed: {f.read_text().strip()}" for f in failed)
                table.append(dict(metric=job.label, precision=precision, number="(none)", max=math.nan,
                                  mean=math.nan, n="", changed=None, note=note))  # fmt: skip
                continue
            for r in compare(job.key, read(folders["float32"]), read(folders[precision])):
                table.append(dict(metric=job.label, precision=precision, **r))
    loads.append(uptime())
    logged = (out / "uptime.log").read_text().splitlines() if (out / "uptime.log").exists() else []
    averages = [float(line.split("load average:")[1].split(",")[0]) for line in logged if "load average:" in line]
    lines = [
        "| metric | policy | number | n | max \\|Δ\\| | mean \\|Δ\\| | float32's decision changed | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['metric']} | {r['precision']} | {r['number']} | {r['n']} | {fmt(r['max'])} | {fmt(r['mean'])} | "
            f"{r['changed'] or ''} | {r['note'].replace('|', chr(92) + '|')} |"
        )
    times = "; ".join(
        f"{job.key} " + " / ".join(fmt(seconds[(job.key, p)]) for p in ["float32", *precisions]) for job in chosen
    )
    header = [
        "# Precision faithfulness: `mixed` and `bfloat16` against `float32`",
        "",
        f"Written by `benchmarks/bench_precision_faithfulness.py` on {datetime.date.today()} "
        f"({platform.node()}, {platform.processor() or platform.machine()}), JAX on the CPU.",
        f"Command: `.venv/bin/python benchmarks/bench_precision_faithfulness.py {' '.join(sys.argv[1:])}`.",
        f"Samples: UnStereoEval USE-5 `dataset.sample={args.unstereo_sample}`, CrowS-Pairs "
        f"`dataset.sample={args.crows_sample}`, mediation `dataset.sample={args.mediation_sample}` professions, "
        f"`metric.templates={args.mediation_templates}`; the other jobs on their full datasets.",
        f"Load (`uptime`) at start: `{loads[0]}`; at end: `{loads[1]}`"
        + (
            f"; 1-minute load average as the {len(averages)} jobs run in {out} started: "
            f"{min(averages):.2f}–{max(averages):.2f} (`uptime.log` there)."
            if averages
            else "."
        ),
        f"Job seconds (the app's own count, without the interpreter's start; float32 / "
        f"{' / '.join(precisions)}): {times}. This invocation: {time.perf_counter() - started:.0f} s "
        "(a job whose folder held results.json was reused, not rerun).",
        "",
        "Decisions: p < 0.05 (with the effect's sign) and, where the metric has one, a 95 % CI excluding 0, each "
        "compared between the policy's job and float32's; 'a of b' counts the rows whose decision differs.",
        "",
    ]
    text = "\n".join([*header, *lines]) + "\n"
    print(text)
    if args.only is None:
        args.md.write_text(text)
        print(f"written: {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
