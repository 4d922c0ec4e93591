#!/usr/bin/env bash
# Data-parallel training on this machine: 2 ranks × 1 thread vs 1 rank × 1 thread, native
# (`train --nproc_per_node 2`, the build against torch 2.11.0's LibTorch: build-cuda/, run on
# the CPU) and Python (scripts/bench/ddp_bench.py on that same torch: torch's
# DistributedDataParallel over Gloo; tiny_rave is the real RAVE's own training_step, acids-rave
# 2.3.1, wrapped as PyTorch Lightning 1.9's DDP strategy wraps it; s5_maze the SSM reference
# scripts/bench/reference/s5_maze.py), same models and per-rank batches; Python's 2 ranks without
# DDP, meeting once per step (what lock-stepping alone costs here); plus the communication share
# and the overlap of all-reduce with backward from a traced RAVE v2 run.
#
#   scripts/bench/ddp.sh [--quick]
#
# scripts/bench/rave_cpu_env.sh (run first) builds build-cuda/bin/{train,preprocess} and makes
# .venv-rave-cpu/. Environment: BUILD_DIR (default build-cuda; its bin/ has train and
# preprocess), RAVE_PYTHON (default .venv-rave-cpu/bin/python), CUDA_LIB (default
# /usr/local/cuda/lib64, put before LD_LIBRARY_PATH: libtorch_cuda.so links the toolkit's
# libraries; empty leaves LD_LIBRARY_PATH alone), REPS, RAVE_STEPS, SSM_STEPS, PY_STEPS, WORKERS;
# and, where the tree is not a git checkout with the setup scripts' machine behind it (the GPU
# machine's cores, scripts/gpu_check.sh's ddp step): SETUP=0 (do not run rave_cpu_env.sh),
# HOST_PY (the Python for the summaries, standard library only; default /usr/bin/python3),
# COMMIT (default: git describe of the tree), HOST (what the Markdown calls the machine).
#
# Throughput: examples per second of the whole job over the training loop (no validation, no
# checkpoints), from training_summary.json (total_steps · batch · world_size /
# total_training_time_seconds); and of the training step alone, the loader's wait taken out
# (step_examples_per_second, summed over ranks), which is what the Python side on synthetic
# input measures. 1-rank and 2-rank runs alternate, REPS each; a 2/1 ratio is the median of
# the REPS ratios of runs made one after the other (so that the host's drift over the minutes
# of the benchmark cancels), printed with their range. Three more 2-rank arms alternate with
# them: passive waits, every all-reduce on Gloo's ring (small_all_reduce_kib 0), and Gloo's
# event loop under the default scheduling policy (gloo_loop normal).
# Prints a Markdown section and writes it to scripts/bench/ddp_results.md (folded into
# BENCHMARKS.md by scripts/bench/run.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The tree the figures come from, taken before anything (the results file among it) is written.
COMMIT="${COMMIT:-$(git -C "$ROOT" describe --always --dirty --abbrev=7)}"
HOST_PY="${HOST_PY:-/usr/bin/python3}"
SETUP="${SETUP:-1}"
BIN="${BUILD_DIR:-$ROOT/build-cuda}/bin"
RAVE_PYTHON="${RAVE_PYTHON:-$ROOT/.venv-rave-cpu/bin/python}"
CUDA_LIB="${CUDA_LIB-/usr/local/cuda/lib64}"
REPS="${REPS:-5}"
RAVE_STEPS="${RAVE_STEPS:-300}"
SSM_STEPS="${SSM_STEPS:-200}"
PY_STEPS="${PY_STEPS:-20}"
# Loader threads per rank. 0: each rank loads on its training thread, so "1 rank × 1 thread"
# really uses one core (with 1, a single rank's loader already runs on the second core:
# measured s5_maze 1614 ex/s with workers 1 vs 1057 with 0, one rank).
WORKERS="${WORKERS:-0}"
if [[ "${1:-}" == "--quick" ]]; then REPS=1; RAVE_STEPS=30; SSM_STEPS=20; PY_STEPS=8; fi
# build-cuda/bin/{train,preprocess} and the venv with the real RAVE (idempotent); the setup
# scripts (scripts/setup.sh) through check_cuda_build.sh.
[[ "$SETUP" == 1 ]] && "$ROOT/scripts/bench/rave_cpu_env.sh" >&2
[[ -n "$CUDA_LIB" ]] && export LD_LIBRARY_PATH="$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_WAIT_POLICY=PASSIVE
WORK="$(mktemp -d /tmp/ddp_bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

"$BIN/preprocess" --generate_demo "$WORK/audio" --demo_seconds 6 --seed 1 >/dev/null
"$BIN/preprocess" --input_path "$WORK/audio" --output_path "$WORK/adb" --num_signal 8192 >/dev/null
"$BIN/preprocess" --input_path "$WORK/audio" --output_path "$WORK/adb32" --num_signal 32768 >/dev/null
"$BIN/preprocess" --generate_neural_demo "$WORK/h5" --groups 1 --units 182 --trials 512 --seed 1 >/dev/null
"$BIN/preprocess" --kind neural --input_path "$WORK/h5" --output_path "$WORK/ndb" >/dev/null

# native CONFIG DB STEPS NPROC [TRAIN ARGS…] → examples/s of the job
native() {
  local cfg="$1" db="$2" steps="$3" nproc="$4" out
  shift 4
  out="$(mktemp -d "$WORK/runs.XXXXXX")"
  local launch=""
  [[ "$nproc" -gt 1 ]] && launch="--nproc_per_node $nproc"
  "$BIN/train" $launch --device cpu --config "$cfg" --db_path "$db" --out_path "$out" --threads 1 --max_steps "$steps" \
    --val_every 1000000 --save_every 1000000 --log_every "$steps" --workers "$WORKERS" "$@" >"$out.log" 2>&1 ||
    { echo "ddp.sh: train --config $cfg ($nproc rank(s)) failed; the end of its output:" >&2; tail -20 "$out.log" >&2; exit 1; }
  "$HOST_PY" - "$out" <<'PY'
import glob, json, sys
s = json.load(open(glob.glob(sys.argv[1] + "/*/training_summary.json")[0]))
d = s.get("distributed", {})
per_rank = s.get("distributed", {}).get("per_rank", [])
step_eps = sum(r["step_examples_per_second"] for r in per_rank) if per_rank else s["step_examples_per_second"]
print(json.dumps({"eps": s["total_steps"] * s["batch"] * s["world_size"] / s["total_training_time_seconds"],
                  "step_eps": step_eps,
                  "comm_wait_share": d.get("comm_wait_share", 0.0),
                  "collectives": per_rank[0]["collectives"] if per_rank else 0,
                  "comm_busy_share": max((r["comm_busy_share"] for r in d.get("per_rank", [])), default=0.0)}))
PY
}

# Two independent one-rank jobs at once (no communication at all): their summed examples/s is
# the most 2 ranks can reach on this host, whatever the collectives cost (cores shared with the
# system, memory bandwidth, caches, turbo).
pair() {
  local a b
  a="$(mktemp "$WORK/pair.XXXXXX")"
  b="$(mktemp "$WORK/pair.XXXXXX")"
  native "$@" >"$a" & native "$@" >"$b"
  wait
  "$HOST_PY" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); print(json.dumps({"eps": a["eps"]+b["eps"], "step_eps": a["step_eps"]+b["step_eps"]}))' "$a" "$b"
}

# Rows: tiny_rave, s5_maze (SyncBatchNorm, the default) and s5_maze_local
# (train.distributed.batch_norm = local; Python: per-rank BatchNorm, DDP's default).
declare -A RESULT
for row in tiny_rave s5_maze s5_maze_local; do
  cfg="${row%_local}" db="$WORK/adb" steps="$RAVE_STEPS" extra=() pyextra=()
  [[ "$cfg" == s5_maze ]] && { db="$WORK/ndb"; steps="$SSM_STEPS"; }
  [[ "$row" == *_local ]] && { extra=(--train.distributed.batch_norm local); pyextra=(--sync_bn 0); }
  one=(); two=(); pas=(); ind=(); ring=(); loop=()
  for ((r = 0; r < REPS; ++r)); do
    one+=("$(native "$cfg" "$db" "$steps" 1)")
    two+=("$(native "$cfg" "$db" "$steps" 2 "${extra[@]}")")
    pas+=("$(native "$cfg" "$db" "$steps" 2 "${extra[@]}" --train.distributed.wait passive)")
    ring+=("$(native "$cfg" "$db" "$steps" 2 "${extra[@]}" --train.distributed.small_all_reduce_kib 0)")
    loop+=("$(native "$cfg" "$db" "$steps" 2 "${extra[@]}" --train.distributed.gloo_loop normal)")
    [[ "$row" != *_local ]] && ind+=("$(pair "$cfg" "$db" "$steps" 1)")
  done
  RESULT[$row.one]="$(printf '%s\n' "${one[@]}")"
  RESULT[$row.two]="$(printf '%s\n' "${two[@]}")"
  RESULT[$row.pas]="$(printf '%s\n' "${pas[@]}")"
  RESULT[$row.ind]="$(printf '%s\n' "${ind[@]}")"
  RESULT[$row.ring]="$(printf '%s\n' "${ring[@]}")"
  RESULT[$row.loop]="$(printf '%s\n' "${loop[@]}")"
  py1=(); py2=()
  for ((r = 0; r < REPS; ++r)); do
    py1+=("$("$RAVE_PYTHON" "$ROOT/scripts/bench/ddp_bench.py" --model "$cfg" --world 1 --steps "$PY_STEPS" --warmup 3 --threads 1)")
    py2+=("$("$RAVE_PYTHON" "$ROOT/scripts/bench/ddp_bench.py" --model "$cfg" --world 2 --steps "$PY_STEPS" --warmup 3 --threads 1 "${pyextra[@]}")")
    # The same 2 ranks without DDP, meeting once per step in a 1-element all-reduce: what
    # lock-stepping alone costs on this host (BatchNorm local has no other lock-step).
    [[ "$row" != *_local ]] && "$RAVE_PYTHON" "$ROOT/scripts/bench/ddp_bench.py" --model "$cfg" --world 2 \
      --steps "$PY_STEPS" --warmup 3 --threads 1 --lockstep_only 1 >>"$WORK/lockstep.$row"
  done
  RESULT[$row.py1]="$(printf '%s\n' "${py1[@]}")"
  RESULT[$row.py2]="$(printf '%s\n' "${py2[@]}")"
done
RESULT[s5_maze_local.ind]="${RESULT[s5_maze.ind]}"

# Bucket caps (train.distributed.first_bucket_mb / bucket_mb) on tiny_rave, 2 ranks: DDP's
# defaults (one bucket: its ~0.2 MiB of gradients fit in the first) against smaller caps
# (more all-reduces, started earlier in backward). Alternating, REPS each.
BUCKETS=("1 25" "0.03 0.06" "0.01 0.02")
for ((r = 0; r < REPS; ++r)); do
  for caps in "${BUCKETS[@]}"; do
    read -r first rest <<<"$caps"
    RESULT[bucket.$caps]+="$(native tiny_rave "$WORK/adb" "$RAVE_STEPS" 2 --train.distributed.first_bucket_mb "$first" \
      --train.distributed.bucket_mb "$rest")"$'\n'
  done
done
BUCKET_ARGS=()
for caps in "${BUCKETS[@]}"; do BUCKET_ARGS+=("$caps" "${RESULT[bucket.$caps]}"); done

# Where a 2-rank step's time goes, tiny_rave: rank 0's trace of steps 31-50 (60-step runs) for
# one process, and for 2 ranks with passive and with active waits.
OPS="$WORK/ops"
for arm in one passive active; do
  launch=(--nproc_per_node 2 --train.distributed.wait "$arm")
  [[ "$arm" == one ]] && launch=()
  "$BIN/train" "${launch[@]}" --device cpu --config tiny_rave --db_path "$WORK/adb" --out_path "$OPS/$arm" --threads 1 \
    --max_steps 60 --val_every 1000000 --save_every 1000000 --log_every 60 --workers "$WORKERS" --enable_profiling \
    --profile_steps 20 --profiling.skip_first 30 --profiling.warmup 1 >/dev/null 2>&1
done

# Overlap: RAVE v2 (16 M generator parameters: many 25 MiB buckets) on 2 ranks, steps 3-4 traced.
# Without the receptive-field crop: at full size it cuts ~27000 samples each side, nothing left
# of 32768 (train refuses it, as RAVE fails there); the gradients' buckets are the same.
V2OUT="$WORK/v2"
"$BIN/train" --nproc_per_node 2 --device cpu --config v2 --db_path "$WORK/adb32" --out_path "$V2OUT" --threads 1 --batch 1 \
  --n_signal 32768 --train.valid_signal_crop false --max_steps 5 --val_every 1000000 --save_every 1000000 --log_every 5 --enable_profiling \
  --profile_steps 2 --profiling.skip_first 2 --profiling.warmup 1 >/dev/null 2>&1

LOCKSTEP_DIR="$WORK" "$HOST_PY" - "$ROOT" "$V2OUT" "$REPS" "$RAVE_STEPS" "$SSM_STEPS" "$PY_STEPS" \
  "$COMMIT" "$WORKERS" "$OPS" \
  "${RESULT[tiny_rave.one]}" "${RESULT[tiny_rave.two]}" "${RESULT[tiny_rave.py1]}" "${RESULT[tiny_rave.py2]}" "${RESULT[tiny_rave.ind]}" "${RESULT[tiny_rave.pas]}" "${RESULT[tiny_rave.ring]}" "${RESULT[tiny_rave.loop]}" \
  "${RESULT[s5_maze.one]}" "${RESULT[s5_maze.two]}" "${RESULT[s5_maze.py1]}" "${RESULT[s5_maze.py2]}" "${RESULT[s5_maze.ind]}" "${RESULT[s5_maze.pas]}" "${RESULT[s5_maze.ring]}" "${RESULT[s5_maze.loop]}" \
  "${RESULT[s5_maze_local.one]}" "${RESULT[s5_maze_local.two]}" "${RESULT[s5_maze_local.py1]}" "${RESULT[s5_maze_local.py2]}" "${RESULT[s5_maze_local.ind]}" "${RESULT[s5_maze_local.pas]}" "${RESULT[s5_maze_local.ring]}" "${RESULT[s5_maze_local.loop]}" \
  "${BUCKET_ARGS[@]}" <<'PY' | tee "$ROOT/scripts/bench/ddp_results.md"
import collections, glob, json, os, statistics, sys
root, v2, reps, rave_steps, ssm_steps, py_steps = sys.argv[1:7]
sha, workers, ops_dir = sys.argv[7], sys.argv[8], sys.argv[9]
res = sys.argv[10:34]
buckets = sys.argv[34:]
runs = lambda text: [json.loads(l) for l in text.splitlines() if l.strip()]
med = lambda rs, k: statistics.median(r[k] for r in rs)
py_rave = runs(res[2])[0]
torch_version = py_rave["torch"].split("+")[0]
rave_version = py_rave["sizes"]["rave"].split()[-1]
pl_version = py_rave["sizes"]["pytorch_lightning"]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
host = os.environ.get("HOST") or f"this {os.cpu_count()}-core machine"
print(f"## Data-parallel training: 2 ranks vs 1 on {host}\n")
print(f"CPU: {cpu}, {os.cpu_count()} cores. Ratios are what to compare across hosts; absolute figures differ by host.\n")
print(f"`scripts/bench/ddp.sh` (commit {sha}): `train --nproc_per_node 2` vs one process, 1 intra-op thread "
      f"per rank and `--workers {workers}` (loading on the training thread: one core per rank), the config's batch per "
      f"rank (so 2 ranks train twice the examples per step), Gloo over loopback, "
      f"`OMP_WAIT_POLICY=PASSIVE`; job examples/s over the training loop, median of {reps} alternating runs "
      f"({rave_steps} steps tiny_rave, {ssm_steps} steps s5_maze); a 2/1 ratio is the median of the {reps} ratios "
      f"of runs made one after the other, the range theirs. Native: the build against torch {torch_version}'s "
      f"LibTorch (`build-cuda/`, on the CPU). Python: `scripts/bench/ddp_bench.py` on that same torch "
      f"(`DistributedDataParallel`, Gloo, same model and sizes, {py_steps} timed steps after 3 warm-up steps, "
      f"synthetic input, no loader; median of {reps} runs): tiny_rave is the real RAVE (acids-rave "
      f"{rave_version}) built from its own v2.gin with the config's sizes bound, stepped by its own "
      f"`training_step`, callbacks, optimizers and LR scheduler, wrapped as PyTorch Lightning {pl_version}'s "
      f"`strategy=\"ddp\"` wraps it (the whole module, `find_unused_parameters=True`), each of its "
      f"`loss.backward()` run as `manual_backward` runs it (RAVE calls `Tensor.backward` itself, with which "
      f"Lightning's DDP all-reduces no gradients; ddp_bench.py's docstring); s5_maze is the SSM reference "
      f"`scripts/bench/reference/s5_maze.py` under `DistributedDataParallel` with DDP's defaults.\n")
print("| model | native 1 rank: job (step) | native 2 ranks: job (step) | native 2/1: job (step) | 2/1 job, paired runs' range | host ceiling: 2 independent 1-rank jobs / 1 | 2 ranks, passive waits: job, 2/1 | 2 ranks, every all-reduce on Gloo's ring: job, 2/1 | 2 ranks, Gloo's event loop under the default policy: job, 2/1 | exposed comm (2 ranks) | Python DDP 1 rank | Python DDP 2 ranks | Python 2/1 | native step/Python (2 ranks) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
# The median over reps of run r's 2-rank (or other arm's) figure over run r's 1-rank figure,
# and their range.
def paired(arm, base, k):
    ratios = sorted(a[k] / b[k] for a, b in zip(arm, base))
    return statistics.median(ratios), ratios[0], ratios[-1]
names = {"tiny_rave": "tiny_rave", "s5_maze": "s5_maze (BatchNorm sync)",
         "s5_maze_local": "s5_maze (BatchNorm local)"}
native_ratio = {}
for k, row in enumerate(("tiny_rave", "s5_maze", "s5_maze_local")):
    one, two, py1, py2, ind, pas, rng, lp = res[8 * k:8 * k + 8]
    o, t, i, q, g, n = runs(one), runs(two), runs(ind), runs(pas), runs(rng), runs(lp)
    p1, p2 = med(runs(py1), "examples_per_second"), med(runs(py2), "examples_per_second")
    e1, e2 = med(o, "eps"), med(t, "eps")
    s1, s2 = med(o, "step_eps"), med(t, "step_eps")
    (job, lo, hi), (step, _, _) = paired(t, o, "eps"), paired(t, o, "step_eps")
    native_ratio[row] = (job, step, p2 / p1, runs(py1))
    ji, si = paired(i, o, "eps")[0], paired(i, o, "step_eps")[0]
    print(f"| {names[row]} | {e1:.0f} ({s1:.0f}) ex/s | {e2:.0f} ({s2:.0f}) ex/s | **{job:.2f}×** ({step:.2f}×) | "
          f"{lo:.2f}–{hi:.2f}× | {ji:.2f}× ({si:.2f}×) | {med(q, 'eps'):.0f} ex/s, {paired(q, o, 'eps')[0]:.2f}× | "
          f"{med(g, 'eps'):.0f} ex/s, {paired(g, o, 'eps')[0]:.2f}× | "
          f"{med(n, 'eps'):.0f} ex/s, {paired(n, o, 'eps')[0]:.2f}× | "
          f"{100 * med(t, 'comm_wait_share'):.1f} % of step time "
          f"(collectives running: {100 * med(t, 'comm_busy_share'):.1f} %) | {p1:.0f} ex/s | "
          f"{p2:.0f} ex/s | {p2 / p1:.2f}× | **{s2 / p2:.2f}×** |")
print("\njob: examples/s of the training loop, loading included (on the training thread); step: the loader's "
      "wait taken out, as the Python side (synthetic input, no loader) measures. Host ceiling: two one-rank jobs "
      "started together, no communication between them, their examples/s summed over the 1-rank job's: what "
      "this host gives a second process on its second core, the bound any 2-rank figure sits under. "
      "BatchNorm local: `--train.distributed.batch_norm local` (Python: `--sync_bn 0`, per-rank statistics as "
      "DDP trains an unconverted model); its 1-rank job is the same as sync's. Native 2 ranks wait actively "
      "(`train.distributed.wait = auto`: 2 ranks × 1 thread on 2 cores); passive waits: "
      "`--train.distributed.wait passive`, alternating with the others. Native all-reduces whose other rank's "
      "copy is at most 1 MiB (all of these models') run as an all-gather and a local sum "
      "(`train.distributed.small_all_reduce_kib`, default 1024); the ring column sets it to 0, so every "
      "all-reduce takes Gloo's ring, as before it existed. Gloo's network event-loop thread runs under "
      "SCHED_BATCH (`train.distributed.gloo_loop = batch`, default); the last native column runs it under the "
      "default policy (`normal`).")
print("\n### Lock-step alone (Python)\n")
print("The Python side's 2 ranks without DDP (`ddp_bench.py --lockstep_only 1`): each rank trains its own "
      "model, and the ranks meet only in a 1-element Gloo all-reduce after every step. Against the same step in "
      "one process without DDP (the 1-rank run's `plain_steps_per_second`), run by run; what remains below the "
      "host ceiling is what keeping 2 ranks in step costs on this host, before any gradient is sent.\n")
print("| model | Python 1 rank, no DDP | Python 2 ranks, lock-step only | lock-step only 2/1 (paired runs' range) | "
      "Python DDP 2/1 (step) | native 2/1 (step) |")
print("|---|---|---|---|---|---|")
for row in ("tiny_rave", "s5_maze"):
    path = os.path.join(os.environ["LOCKSTEP_DIR"], "lockstep." + row)
    if not os.path.exists(path):
        continue
    lock = [{"eps": r["examples_per_second"]} for r in runs(open(path).read())]
    job, step, py_ratio, py1_runs = native_ratio[row]
    plain = [{"eps": r["plain_steps_per_second"] * r["batch_per_rank"]} for r in py1_runs]
    mid, lo, hi = paired(lock, plain, "eps")
    print(f"| {row} | {med(plain, 'eps'):.0f} ex/s | {med(lock, 'eps'):.0f} ex/s | **{mid:.2f}×** "
          f"({lo:.2f}–{hi:.2f}×) | {py_ratio:.2f}× | {step:.2f}× |")
# Operator time per step from the traces: the training thread's operators (self time, the
# collectives' own spans excluded), its blocked wait for the gradients, the whole step.
print("\n### Where a 2-rank step's time goes (tiny_rave)\n")
print("Rank 0's trace of steps 31–50 of a 60-step run (`--enable_profiling --profile_steps 20 "
      "--profiling.skip_first 30`), one process against 2 ranks with each wait policy; per step, medians over the "
      "20 steps. Operators: the self time of every operator on the training thread (what the CPU computes; a "
      "wait inside a collective is not an operator).\n")
print("| run | step | operators | gradient_sync_wait | per call: convolution, stft |")
print("|---|---|---|---|---|")
def op_profile(path):
    ev = json.load(open(path))["traceEvents"]
    steps = sorted((e for e in ev if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    main = collections.Counter(e["tid"] for e in steps).most_common(1)[0][0]
    ops = sorted((e for e in ev if e.get("ph") == "X" and e.get("tid") == main and e.get("cat") == "cpu_op"),
                 key=lambda e: (e["ts"], -e["dur"]))
    self_time, stack = {}, []
    for e in ops:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            self_time[id(stack[-1])] -= e["dur"]
        self_time[id(e)] = e["dur"]
        stack.append(e)
    per_step = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        opt = sum(self_time[id(e)] for e in ops if lo <= e["ts"] < hi)
        wait = sum(e["dur"] for e in ev if e.get("ph") == "X" and e["name"] == "gradient_sync_wait" and lo <= e["ts"] < hi)
        per_step.append((s["dur"], opt, wait))
    call = lambda name: statistics.mean(e["dur"] for e in ops if e["name"] == name)
    m = lambda k: statistics.median(p[k] for p in per_step) / 1000
    return m(0), m(1), m(2), call("aten::convolution"), call("aten::stft")
base = None
for arm, label in (("one", "1 process"), ("passive", "2 ranks, passive waits"), ("active", "2 ranks, active waits")):
    found = sorted(glob.glob(os.path.join(ops_dir, arm, "*", "profiler_traces", "*.pt.trace.json")))
    paths = [p for p in found if json.load(open(p)).get("distributedInfo", {}).get("rank", 0) == 0]
    if not paths:
        continue
    step, opt, wait, conv, stft = op_profile(paths[0])
    base = base or (opt, conv, stft)
    print(f"| {label} | {step:.1f} ms | {opt:.1f} ms ({opt / base[0]:.2f}×) | {wait:.1f} ms | "
          f"{conv:.0f} µs ({conv / base[1]:.2f}×), {stft:.0f} µs ({stft / base[2]:.2f}×) |")
print("\n### Gradient bucket caps, tiny_rave, 2 ranks\n")
print(f"`train.distributed.first_bucket_mb` / `bucket_mb` (DDP's defaults 1 / 25 MiB); job examples/s, median of "
      f"{reps} alternating runs of {rave_steps} steps; collectives per step include the spectral denominators' "
      f"all-reduce (the stop flag rides in the last bucket).\n")
print("| first / other bucket cap (MiB) | job ex/s | collectives per step | exposed comm |")
print("|---|---|---|---|")
for caps, text in zip(buckets[0::2], buckets[1::2]):
    b = runs(text)
    print(f"| {caps.replace(' ', ' / ')} | {med(b, 'eps'):.0f} | {med(b, 'collectives') / int(rave_steps):.1f} | "
          f"{100 * med(b, 'comm_wait_share'):.1f} % |")
# Overlap evidence from the v2 trace of each rank.
print("\n### Overlap: all-reduce starts while backward is still running\n")
print("RAVE v2 (`--config v2 --batch 1 --n_signal 32768 --train.valid_signal_crop false`, 2 ranks, steps 3–4 traced). Per traced step: the "
      "gradient buckets' `gloo:all_reduce` spans (`gloo:all_gather` for the 1 MiB first bucket, a small "
      "all-reduce), how many started before `gradient_sync_wait` (the end of "
      "autograd's backward, where the trainer starts waiting), and how much of their running time lay before it.\n")
print("| rank | step | all-reduces | started during backward | all-reduce time before backward ended |")
print("|---|---|---|---|---|")
traces = glob.glob(os.path.join(v2, "*", "profiler_traces", "*.pt.trace.json"))
for path in sorted(traces):
    t = json.load(open(path))
    rank = t["distributedInfo"]["rank"]
    ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        inside = lambda e: lo <= e["ts"] <= hi
        waits = [e for e in ev if e["name"] == "gradient_sync_wait" and inside(e)]
        ars = [e for e in ev if e["name"] in ("gloo:all_reduce", "gloo:all_gather") and inside(e)
               and e["args"].get("In msg nelems", 0) > 1]
        if not waits or not ars:
            continue
        w = min(e["ts"] for e in waits)
        before = sum(1 for e in ars if e["ts"] < w)
        busy = sum(e["dur"] for e in ars)
        busy_before = sum(max(0.0, min(e["ts"] + e["dur"], w) - e["ts"]) for e in ars)
        print(f"| {rank} | {s['name'].split('#')[1]} | {len(ars)} | **{before}** | {100 * busy_before / busy:.0f} % |")
PY
