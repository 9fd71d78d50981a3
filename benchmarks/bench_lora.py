"""LoRA training step on SmolLM2-135M: jaxassoc's ``finetune.step.train_step`` against PyTorch + peft doing the
same, each pinned to the same threads in its own process; and (``--mesh``) the loss curve on 8 simulated
devices (fsdp=2 x tp=4) against one device.

1. **Speed** (default). The same fixed batches on both sides: ``--batch`` rows x ``--seq`` real tokens of
   WikiText-2 (test split, detokenised, concatenated and cut into rows; no padding), next-token loss on every
   position but the last of a row, rank 8 (alpha 16) adapters on the query and value projections, AdamW
   (lr 1e-4, constant, no weight decay, eps 1e-8) after clipping the gradients to global norm 1, float32.

   - jaxassoc: ``lora.add_adapters`` + ``Objective(kind="cda", lam=0.0)`` (the next-token term alone) +
     ``OptimizerConfig`` + ``train_step``, compiled ahead of time (``lower`` and ``compile`` timed apart),
     then the first run and ``--steps`` warm steps (each ``block_until_ready``).
   - PyTorch: ``transformers.LlamaForCausalLM`` with exactly the GGUF's weights (``_reference.py``, written once
     to a temporary folder and read with ``from_pretrained``), ``peft.get_peft_model(LoraConfig(r=8,
     lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))``, ``torch.optim.AdamW`` over the
     trainable parameters, ``loss = model(input_ids, attention_mask, labels=input_ids, use_cache=False).loss``,
     ``backward``, ``clip_grad_norm_(1.0)``, ``step``: eager (what peft users run); ``--torch-compile`` adds a
     run of ``torch.compile(model)`` (inductor on the CPU), reported apart.

   Printed per side: first step (JAX: trace + lower, compile, first run), the median of the warm steps,
   tokens/s, the training's useful GFLOP/s (forward matmuls + the activation gradients; no frozen-weight
   gradients) against that framework's 1024² float32 matmul rate in the same process (the ceiling), the peak
   resident memory of its process (``VmHWM``: model loading included) and during training alone (the
   kernel's high-water mark reset after loading); then the warm-step ratio torch / jax (the issue's target:
   >= 1.2) and the first step's loss on both sides (the base model's, adapters start at B = 0: must agree).
2. **Mesh** (``--mesh``): 8 CPU devices (``jax_num_cpu_devices``), SmolLM2 loaded on ``make_mesh(fsdp=2,
   tp=4)`` and on one device, the same adapters (same key) and ``--mesh-steps`` steps (default 20) of the same
   training on ``--mesh-batch`` x ``--mesh-seq`` tokens (default 8 x 32, rows split over fsdp as
   ``finetune.adapt`` splits them); both loss curves, their max |difference| (PASS when <= 1e-4, else exit
   status 1), and the max |difference| of the trained adapters.

Run: ``python benchmarks/bench_lora.py [--threads 2] [--steps 10] [--torch-compile]``,
``python benchmarks/bench_lora.py --mesh``; ``--quick`` for a smoke run (2 warm steps; mesh: 5 steps).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matmul_rate import pin_threads

RANK, ALPHA, LR, CLIP = 8, 16.0, 1e-4, 1.0
JAX_TARGETS, TORCH_TARGETS = ("attn.q", "attn.v"), ["q_proj", "v_proj"]
DISTINCT_BATCHES = 4  # the fixed batches, cycled
RESULT = "RESULT "


# -- data and memory ---------------------------------------------------------------------------------------


def wikitext_rows(tokenizer, rows: int, seq: int):
    """``(rows, seq)`` int32 token ids: WikiText-2's test split, detokenised, concatenated and cut into rows."""
    import numpy as np

    from jaxassoc.data import wikitext2_sentences

    need, ids, sentences = rows * seq, [], wikitext2_sentences("test", detokenize=True)
    for start in range(0, len(sentences), 500):
        ids += tokenizer(" ".join(sentences[start : start + 500]) + " ", add_special_tokens=False)["input_ids"]
        if len(ids) >= need:
            return np.asarray(ids[:need], np.int32).reshape(rows, seq)
    raise SystemExit(f"WikiText-2 has {len(ids)} tokens, fewer than the {need} asked for")


def _status_mib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _peak_mib() -> float:
    """This process's peak RSS: the kernel's high-water mark of its memory (``VmHWM``), not ``ru_maxrss``, which
    a child started by fork and exec inherits from its parent (here: the process holding the torch model)."""
    peak = _status_mib("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if peak is None else peak


class PeakMemory:
    """Peak RSS of the whole process and since :meth:`start` (``VmHWM`` after writing 5 to
    ``/proc/self/clear_refs``, which resets the high-water mark to the current RSS; None where not allowed)."""

    def start(self) -> None:
        self.before, self.resident = _peak_mib(), _status_mib("VmRSS")  # loading's peak, before the reset
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.reset = True
        except OSError:
            self.reset = False

    def stop(self) -> dict:
        during = _peak_mib() if self.reset else None
        return {"rss_process_mib": max(self.before, _peak_mib()), "rss_training_mib": during,
                "rss_before_training_mib": self.resident}  # fmt: skip


def train_gflop(cfg: dict, rows: int, seq: int) -> float:
    """Useful GFLOP of one LoRA training step: the forward matmuls, and in the backward pass the gradients of
    the activations (the same products again; attention's two products each give two gradients); the
    frozen weights get none. The adapters' own products (rank 8) are left out."""
    d, ff, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    head_dim = cfg.get("head_dim") or d // cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    linear = 2 * (L * (2 * d * d + 2 * d * kv * head_dim + 3 * d * ff) + V * d) * seq
    attention = 4 * L * d * seq * (seq + 1) / 2  # causal: QK^T and AV over (query, key <= query) pairs
    return rows * (2 * linear + 3 * attention) / 1e9


# -- the JAX side ------------------------------------------------------------------------------------------


def jax_training(model, key_seed: int = 0):
    """``(objective, adapted model)``: the benchmark's adapters (key ``key_seed``) and next-token objective."""
    import jax

    from jaxassoc.finetune.objectives import Objective
    from jaxassoc.models import lora

    adapted = lora.add_adapters(model, lora.LoRASpec(RANK, ALPHA, JAX_TARGETS), jax.random.key(key_seed))
    objective = Objective(adapted.port, adapted.config, "cda", False, "kl", 0.0, adapted.weights_dtype)
    return objective, adapted


def jax_batches(ids, mesh=None) -> list:
    """The step batches of ``train_step`` (one micro batch each) from ``(n, rows, seq)`` ids, placed."""
    import jax
    import numpy as np

    from jaxassoc.finetune import batches
    from jaxassoc.finetune.adapt import _placer

    place, out = _placer(mesh), []
    for step_ids in ids:
        rows = batches.causal_rows(step_ids, np.ones_like(step_ids))
        micro = place({"train": batches.split_micro(rows, 1)})
        out.append({"micro": jax.block_until_ready(micro), "whole": None})
    return out


def jax_side(args) -> dict:
    import jax
    import numpy as np
    from _matmul_rate import jax_gflops

    from jaxassoc.finetune.optim import OptimizerConfig
    from jaxassoc.finetune.step import init_state, train_step
    from jaxassoc.models import lora
    from jaxassoc.models.loading import load_model

    ceiling = jax_gflops()
    model = load_model("smollm2-135m")
    objective, adapted = jax_training(model)
    optimizer = OptimizerConfig(learning_rate=LR, steps=args.steps + 1, schedule="constant", clip=CLIP)
    batches = jax_batches(np.load(Path(args.data) / "ids.npy"))
    frozen, trainable = adapted.params, lora.count(adapted)  # counted now: the step donates the adapters' arrays
    state = init_state(lora.trainable(adapted), optimizer.build())
    memory = PeakMemory()
    memory.start()
    t = time.perf_counter()
    lowered = train_step.lower(state, frozen, batches[0], objective=objective, optimizer=optimizer)
    lower = time.perf_counter() - t
    t = time.perf_counter()
    step = lowered.compile()
    compile_s = time.perf_counter() - t
    seconds, losses = [], []
    for i in range(args.steps + 1):
        t = time.perf_counter()
        state, metrics = step(state, frozen, batches[i % len(batches)])
        jax.block_until_ready((state, metrics))
        seconds.append(time.perf_counter() - t)
        losses.append(float(metrics["loss"]))
    return {"ceiling_gflops": ceiling, "lower_s": lower, "compile_s": compile_s, "first_run_s": seconds[0],
            "first_step_s": lower + compile_s + seconds[0], "warm_s": seconds[1:], "losses": losses,
            "trainable": trainable, **memory.stop()}  # fmt: skip


# -- the PyTorch side --------------------------------------------------------------------------------------


def torch_side(args) -> dict:
    import numpy as np
    import torch
    from _matmul_rate import torch_gflops
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    torch.set_num_threads(args.threads)
    ceiling = torch_gflops()
    base = LlamaForCausalLM.from_pretrained(Path(args.data) / "hf", dtype=torch.float32)
    config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TORCH_TARGETS, lora_dropout=0.0)
    model = get_peft_model(base, config)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    forward = torch.compile(model) if args.side == "torch-compile" else model
    ids = [torch.from_numpy(x.astype(np.int64)) for x in np.load(Path(args.data) / "ids.npy")]
    mask = torch.ones_like(ids[0])

    def step(batch):
        optimizer.zero_grad(set_to_none=True)
        loss = forward(input_ids=batch, attention_mask=mask, labels=batch, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        optimizer.step()
        return loss.item()

    memory = PeakMemory()
    memory.start()
    seconds, losses = [], []
    for i in range(args.steps + 1):
        t = time.perf_counter()
        losses.append(step(ids[i % len(ids)]))
        seconds.append(time.perf_counter() - t)
    return {"ceiling_gflops": ceiling, "first_step_s": seconds[0], "warm_s": seconds[1:], "losses": losses,
            "trainable": sum(p.numel() for p in params), "threads": torch.get_num_threads(), **memory.stop()}  # fmt: skip


# -- the parent: data, the two processes, the table ----------------------------------------------------------


def prepare(folder: Path, args) -> dict:
    """The torch checkpoint (the GGUF's tensors, float32) and the batches' token ids, into ``folder``."""
    import numpy as np
    from _reference import torch_llama_from_gguf

    from jaxassoc.resources import smollm2_gguf

    model, hf_config, tokenizer = torch_llama_from_gguf(smollm2_gguf())
    model.save_pretrained(folder / "hf")
    ids = wikitext_rows(tokenizer, DISTINCT_BATCHES * args.batch, args.seq)
    np.save(folder / "ids.npy", ids.reshape(DISTINCT_BATCHES, args.batch, args.seq))
    return hf_config


def child(side: str, folder: Path, args) -> dict:
    command = [sys.executable, __file__, "--side", side, "--data", str(folder), "--threads", str(args.threads),
               "--steps", str(args.steps)]  # fmt: skip
    print(f"running the {side} side ...", flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    lines = done.stdout.splitlines()
    if done.returncode or not lines or not lines[-1].startswith(RESULT):
        raise SystemExit(f"the {side} side failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][len(RESULT) :])


def speed(args) -> None:
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="bench-lora-") as tmp:
        folder = Path(tmp)
        hf_config = prepare(folder, args)
        sides = ["jax", "torch"] + (["torch-compile"] if args.torch_compile else [])
        results = {side: child(side, folder, args) for side in sides}
    gflop, tokens = train_gflop(hf_config, args.batch, args.seq), args.batch * args.seq
    print(
        f"\nLoRA training step, SmolLM2-135M, {args.batch} x {args.seq} tokens (WikiText-2 test), rank {RANK} "
        f"alpha {ALPHA:g} on q and v ({results['jax']['trainable']:,} trained parameters in jaxassoc, "
        f"{results['torch']['trainable']:,} in peft), AdamW lr {LR:g}, clip {CLIP:g}, float32, {args.threads} "
        f"thread(s), {args.steps} warm steps (median); {gflop:.0f} GFLOP of useful work per step"
    )
    print("| run | first step (s) | warm step median (s) | tokens/s | GFLOP/s | % of its 1024² f32 matmul | "
          "RSS (MiB): before training / training peak / process peak |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    medians = {}
    for side, r in results.items():
        medians[side] = statistics.median(r["warm_s"])
        first = f"{r['first_step_s']:.1f}"
        if side == "jax":
            first += f" (lower {r['lower_s']:.1f}, compile {r['compile_s']:.1f}, run {r['first_run_s']:.1f})"
        training = "n/a" if r["rss_training_mib"] is None else f"{r['rss_training_mib']:.0f}"
        rate = gflop / medians[side]
        print(
            f"| {side} | {first} | {medians[side]:.3f} (min {min(r['warm_s']):.3f}, max {max(r['warm_s']):.3f}) | "
            f"{tokens / medians[side]:.0f} | {rate:.1f} | {100 * rate / r['ceiling_gflops']:.0f} % of "
            f"{r['ceiling_gflops']:.0f} | {r['rss_before_training_mib']:.0f} / {training} / {r['rss_process_mib']:.0f} |"
        )
    print(f"\nmatmul ceilings (1024², float32): JAX {results['jax']['ceiling_gflops']:.0f}, torch "
          f"{results['torch']['ceiling_gflops']:.0f} GFLOP/s")  # fmt: skip
    for side in sides[1:]:
        print(f"warm step, {side} / jax: {medians[side] / medians['jax']:.2f}x (target >= 1.2 vs eager torch)")
    print(
        f"jax first step / torch first step: {results['jax']['first_step_s'] / results['torch']['first_step_s']:.1f}x"
    )
    first = {side: r["losses"][0] for side, r in results.items()}
    delta = max(abs(v - first["jax"]) for v in first.values())
    print(f"first-step loss (base model, B = 0): {', '.join(f'{k} {v:.6f}' for k, v in first.items())}; "
          f"max |Δ| {delta:.2e}")  # fmt: skip
    print("losses per step:", {k: np.round(r["losses"], 5).tolist() for k, r in results.items()})


# -- the mesh check ------------------------------------------------------------------------------------------


def mesh_check(args) -> int:
    import jax
    import numpy as np

    jax.config.update("jax_num_cpu_devices", 8)
    from jaxassoc.finetune.optim import OptimizerConfig
    from jaxassoc.finetune.step import init_state, train_step
    from jaxassoc.models import lora
    from jaxassoc.models.loading import load_model
    from jaxassoc.models.mesh import make_mesh

    mesh = make_mesh(fsdp=2, tp=4)
    optimizer = OptimizerConfig(learning_rate=LR, steps=args.mesh_steps, schedule="constant", clip=CLIP)
    curves, trained, seconds = {}, {}, {}
    ids = None
    for name, on in (("one device", None), ("fsdp=2 x tp=4", mesh)):
        model = load_model("smollm2-135m", mesh=on)
        if ids is None:
            rows = wikitext_rows(model.tokenizer, DISTINCT_BATCHES * args.mesh_batch, args.mesh_seq)
            ids = rows.reshape(DISTINCT_BATCHES, args.mesh_batch, args.mesh_seq)
        objective, adapted = jax_training(model)
        fresh = lora.trainable(adapted)
        shardings = jax.tree.map(lambda x: x.sharding, fresh)
        state = init_state(fresh, optimizer.build())
        state = state._replace(params=jax.device_put(state.params, shardings))
        batches, frozen = jax_batches(ids, on), adapted.params
        t, losses = time.perf_counter(), []
        for i in range(args.mesh_steps):
            state, metrics = train_step(state, frozen, batches[i % len(batches)], objective=objective,
                                        optimizer=optimizer)  # fmt: skip
            losses.append(float(metrics["loss"]))
        seconds[name] = time.perf_counter() - t
        curves[name] = np.asarray(losses)
        trained[name] = jax.tree.map(np.asarray, state.params)
        del model, adapted, frozen, state, batches
    one, many = curves.values()
    delta = float(np.abs(one - many).max())
    drift = max(float(np.abs(a - b).max()) for a, b in zip(*(jax.tree.leaves(t) for t in trained.values())))
    print(f"{args.mesh_steps} steps of {args.mesh_batch} x {args.mesh_seq} tokens, {jax.device_count()} CPU devices")
    for name, curve in curves.items():
        print(f"{name:14s} ({seconds[name]:.1f} s with compilation): {np.round(curve, 6).tolist()}")
    print(f"max |Δ loss| {delta:.2e}; max |Δ| of the trained adapters {drift:.2e}")
    verdict = delta <= 1e-4
    print(f"{'PASS' if verdict else 'FAIL'}: the mesh's loss curve {'equals' if verdict else 'differs from'} one "
          f"device's within 1e-4")  # fmt: skip
    return 0 if verdict else 1


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10, help="warm steps timed (after the first)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--torch-compile", action="store_true", help="also time torch.compile(model)")
    parser.add_argument("--mesh", action="store_true", help="the 8-device loss-curve check instead")
    parser.add_argument("--mesh-steps", type=int, default=20)
    parser.add_argument("--mesh-batch", type=int, default=8)
    parser.add_argument("--mesh-seq", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 warm steps; mesh: 5 steps")
    parser.add_argument("--side", choices=("jax", "torch", "torch-compile"), help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.mesh_steps = min(args.steps, 2), min(args.mesh_steps, 5)
    pinned = pin_threads(args.threads)
    if args.side:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        out = jax_side(args) if args.side == "jax" else torch_side(args)
        print(RESULT + json.dumps(out))
        return
    print(pinned, flush=True)
    if args.mesh:
        raise SystemExit(mesh_check(args))
    speed(args)


if __name__ == "__main__":
    main()
