#!/usr/bin/python3
"""Python side of the data-parallel benchmark: the training step of tiny_rave or s5_maze under
torch's own DistributedDataParallel (Gloo, CPU), for comparison with `train --nproc_per_node N`.
Run it with Debian's /usr/bin/python3 (python3-torch 1.13, the LibTorch the native build links).

  ddp_bench.py --model tiny_rave|s5_maze --world N [--steps 20] [--warmup 3] [--threads T]
               [--batch B] [--phase 1|2] [--config FILE] [--bins 140] [--sync_bn 1|0] [--seed 0]
               [--lockstep_only 0|1]

It starts N processes itself with torch.multiprocessing.spawn (no torchrun: Debian 12's needs
`--redirects 1 --tee 1` workarounds). Rank 0 prints one JSON object on stdout:
  model, world_size, threads, batch_per_rank, steps, steps_per_second (the slowest rank),
  examples_per_second (steps/s x B x N), per_rank (steps/s and median step ms of every rank),
  sync, params_in_sync, torch; world 1 adds plain_steps_per_second (the same step without DDP).
--lockstep_only 1 drops DDP: each rank trains its own model and the ranks meet only in a
1-element all-reduce after every step (sync "lockstep_only"), which measures what lock-stepping
N processes alone costs on the host, whatever the gradients' communication.

What one step is (per rank, fixed synthetic input made once per rank, seeded by rank):
  tiny_rave phase 1: PQMF -> encoder -> reparametrisation -> generator -> PQMF inverse,
    multiband + fullband spectral distance + beta*KL, zero_grad, backward, Adam (betas of the
    config, default 0.5/0.9) over encoder+decoder -- rave_v2.py, as ref_bench.py's `step`;
  tiny_rave phase 2 (--phase 2): the encoder frozen; every update_discriminator_every-th step
    (counting from phase_1_duration, as trainer/rave_family.cpp) a discriminator step (the
    autoencoder and spectral distances under no_grad, period/scale discriminator on real and
    reconstructed audio, hinge loss, Adam at discriminator_lr), the others generator steps
    (spectral + KL + feature matching + adversarial terms, Adam over the decoder);
  s5_maze: Linear -> S5 block(s) -> Linear on x [B, bins, input_dim], MSE against a fixed random
    target, zero_grad, backward, AdamW (two groups, s5_maze.py) -- no loss read back.
Sizes come from configs/<model>.toml (tomllib): capacity, latent_size, n_band, ratios,
dilations, kernel_size, activation, stft_scales, the discriminator keys, data.n_signal and
train.batch/lr/...; for s5_maze input_dim, output_dim, d_model, state_dim, n_layers, dropout,
dt_min/dt_max and train.batch/lr/weight_decay. The time axis of s5_maze (bins) is no config
key: the data sets it; 140 is the synthetic reaching set's (data/neural/synthetic_reaching.h).

Facts relied on (torch/nn/parallel/distributed.py, 1.13):
  - the constructor broadcasts rank 0's parameters and buffers (_sync_module_states) and builds
    a Reducer whose buckets are dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB) for the first and
    bucket_cap_mb = 25 MiB for the others, in reverse parameter order; the buckets are rebuilt
    in gradient-arrival order in the second iteration's forward (_rebuild_buckets), so warm-up
    should cover at least two steps for steady-state timing;
  - gradient all-reduces start from autograd hooks during backward and are averaged over the
    world size; backward returns after the reducer has finished (finalize_backward);
  - broadcast_buffers=True (default): rank 0's buffers are broadcast before every forward;
  - hooks act only after a forward through the DDP wrapper (prepare_for_backward), so a module
    called directly (phase 2's discriminator in a generator step, the autoencoder in a
    discriminator step) synchronises nothing -- as the native trainer syncs only the parameters
    of the optimizer about to step (distributed/gradient_sync.h);
  - find_unused_parameters=False requires every wrapped parameter that requires grad to get a
    gradient: phase 2 therefore sets requires_grad=False on the frozen encoder before wrapping
    (the native model and RAVE detach the encoder's output instead, which also leaves it
    without gradients).
torch.nn.SyncBatchNorm (torch/nn/modules/batchnorm.py) refuses CPU input in 1.13, so the S5
BatchNorm's statistics over every rank's rows (what the native trainer does in data-parallel
training, distributed/sync_batch_norm.h) are computed by SyncBatchNormRows below: one Gloo
all-reduce of [sum x, sum x^2, n] forward and one of [sum dy, sum dy*x_hat] backward, float64.
--sync_bn 0 keeps the local statistics. Gloo uses the loopback interface
(GLOO_SOCKET_IFNAME=lo unless set), as the native process group does for a 127.0.0.1 master.
libgomp reads OMP_WAIT_POLICY when it loads: export it before running (the JSON records it).
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time
import tomllib

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rave_v2  # noqa: E402
import s5_maze  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def require(ok, message):
    if not ok:
        raise SystemExit(f"ddp_bench: {message}")


# ---------------------------------------------------------------------------------------------
# tiny_rave


class RaveGeneratorLoss(nn.Module):
    """The generator's loss as a module, so that DDP wraps exactly the autoencoder. The
    discriminator (phase 2) comes in as an argument: DDP neither owns nor synchronises it."""

    def __init__(self, rave, feature_matching_weight):
        super().__init__()
        self.rave = rave
        self.feature_matching_weight = feature_matching_weight

    def forward(self, x, beta, discriminator=None):
        losses = self.rave.phase1_losses(x, beta)
        loss = losses["loss_gen"]
        if discriminator is not None:
            features = discriminator(torch.cat([x, losses["y"]], 0))
            adv = rave_v2.adversarial_losses(features, x.size(0), self.feature_matching_weight)
            loss = loss + adv["feature_matching"] + adv["adversarial"]
        return loss


class RaveWorkload:
    def __init__(self, cfg, a, rank, ddp):
        m, d, t = cfg["model"], cfg.get("data", {}), cfg.get("train", {})
        require(m.get("family") == "rave" and m.get("version") == "v2",
                "tiny_rave: the Python reference implements RAVE v2 only (model.version)")
        require(m.get("padding", "centered") == "centered", "tiny_rave: only model.padding = centered")
        require(m.get("noise_bands", 0) == 0, "tiny_rave: no noise synthesis in the Python reference")
        require(d.get("channels", 1) == 1, "tiny_rave: mono audio only (data.channels)")
        require("batch" in t or a.batch, "tiny_rave: the config has no train.batch; give --batch")
        sizes = {k: m[k] for k in ("capacity", "latent_size", "n_band", "ratios", "dilations", "kernel_size",
                                   "activation", "stft_scales", "discriminator_capacity",
                                   "discriminator_n_layers", "periods", "n_scales") if k in m}
        o = rave_v2.preset("v2", **sizes)
        self.batch = a.batch or t["batch"]
        self.n_signal = d["n_signal"]
        self.phase = a.phase
        torch.manual_seed(a.seed)  # the same initial model on every rank (DDP broadcasts rank 0's anyway)
        self.rave = rave_v2.RAVE(o)
        self.discriminator = None
        if self.phase == 2:
            require(m.get("discriminator", "period_scale") == "period_scale",
                    "tiny_rave --phase 2: only model.discriminator = period_scale")
            self.discriminator = rave_v2.make_discriminator(o)
            for p in self.rave.encoder.parameters():
                p.requires_grad_(False)
        self.rave.train()
        gen = RaveGeneratorLoss(self.rave, t.get("feature_matching_weight", 20.0))
        self.gen = DistributedDataParallel(gen) if ddp else gen
        betas = (t.get("adam_beta1", 0.5), t.get("adam_beta2", 0.9))
        self.gen_opt = torch.optim.Adam(self.rave.generator_parameters(), lr=t.get("lr", 1e-3), betas=betas)
        if self.discriminator is not None:
            self.discriminator.train()
            self.dis = DistributedDataParallel(self.discriminator) if ddp else self.discriminator
            self.dis_opt = torch.optim.Adam(self.discriminator.parameters(), lr=t.get("discriminator_lr", 1e-4),
                                            betas=betas)
        self.first_step = t.get("phase_1_duration", 0) if self.phase == 2 else 0
        self.dis_every = t.get("update_discriminator_every", 4)
        self.beta = t.get("beta_start", 1e-6)
        torch.manual_seed(a.seed + 1 + rank)  # reparametrisation noise differs per rank
        g = torch.Generator().manual_seed(a.seed + 1000 + rank)
        self.x = torch.rand(self.batch, 1, self.n_signal, generator=g) - 0.5

    def is_dis_step(self, i):
        return self.discriminator is not None and (self.first_step + i) % self.dis_every == 0

    def step(self, i):
        if self.is_dis_step(i):
            with torch.no_grad():
                y = self.rave.phase1_losses(self.x, self.beta)["y"]
            features = self.dis(torch.cat([self.x, y], 0))
            loss = rave_v2.adversarial_losses(features, self.x.size(0))["loss_dis"]
            self.dis_opt.zero_grad()
            loss.backward()
            self.dis_opt.step()
            return
        loss = self.gen(self.x, self.beta, self.discriminator)
        self.gen_opt.zero_grad()
        loss.backward()
        self.gen_opt.step()

    def modules(self):
        return [self.rave] + ([self.discriminator] if self.discriminator is not None else [])

    def describe(self, steps):
        o = self.rave.o
        out = {"phase": self.phase, "n_signal": self.n_signal, "capacity": o.capacity, "latent_size": o.latent_size,
               "n_band": o.n_band, "ratios": o.ratios, "dilations": o.dilations, "kernel_size": o.kernel_size,
               "stft_scales": o.stft_scales}
        if self.discriminator is not None:
            out.update({"discriminator_capacity": o.discriminator_capacity,
                        "discriminator_n_layers": o.discriminator_n_layers, "periods": o.periods,
                        "n_scales": o.n_scales,
                        "discriminator_steps_timed": sum(self.is_dis_step(i) for i in steps)})
        return out


# ---------------------------------------------------------------------------------------------
# s5_maze


class SyncBatchNormRows(torch.autograd.Function):
    """(x - mean) * invstd over the rows x [N, C] with every rank's statistics (see the module
    docstring). Returns (y, mean, var, count); only y is differentiable."""

    @staticmethod
    def forward(ctx, x, eps):
        x = x.contiguous()
        c = x.size(1)
        xd = x.double()
        sums = torch.cat([xd.sum(0), (xd * xd).sum(0), xd.new_full((1,), x.size(0))])
        dist.all_reduce(sums)
        n = sums[2 * c:]
        mean = sums[:c] / n
        var = (sums[c:2 * c] / n - mean * mean).clamp_min(0)
        invstd = (var + eps).rsqrt()
        y = (x - mean.to(x.dtype)) * invstd.to(x.dtype)
        ctx.save_for_backward(y, invstd.to(x.dtype), n)
        ctx.mark_non_differentiable(mean, var, n)
        return y, mean, var, n

    @staticmethod
    def backward(ctx, dy, *_):
        y, invstd, n = ctx.saved_tensors
        dy = dy.contiguous()  # autograd materialises a zero gradient when y got none
        c = y.size(1)
        gd = dy.double()
        sums = torch.cat([gd.sum(0), (gd * y.double()).sum(0)])
        dist.all_reduce(sums)
        mean_g = (sums[:c] / n).to(y.dtype)
        mean_gy = (sums[c:] / n).to(y.dtype)
        return invstd * (dy - mean_g - y * mean_gy), None


class SyncBatchNorm1d(nn.BatchNorm1d):
    """s5_maze.S5Block's norm (input [B, C, T], statistics over B x T) with the statistics of
    every rank in training; running statistics updated from the global ones (unbiased var)."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        b, c, t = x.shape
        y, mean, var, n = SyncBatchNormRows.apply(x.transpose(1, 2).reshape(b * t, c), self.eps)
        with torch.no_grad():
            count = float(n)
            self.num_batches_tracked += 1
            m = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
            self.running_mean.mul_(1 - m).add_(mean.to(self.running_mean.dtype), alpha=m)
            self.running_var.mul_(1 - m).add_(var.to(self.running_var.dtype), alpha=m * count / (count - 1))
        if self.affine:
            y = y * self.weight + self.bias
        return y.reshape(b, t, c).transpose(1, 2)


class SsmWorkload:
    def __init__(self, cfg, a, rank, ddp):
        m, t = cfg["model"], cfg.get("train", {})
        require(m.get("family") == "ssm" and m.get("variant") == "s5_maze",
                "s5_maze: the Python reference implements model.variant = s5_maze only")
        require(m.get("discretization", "zoh") == "zoh", "s5_maze: only model.discretization = zoh")
        require("batch" in t or a.batch, "s5_maze: the config has no train.batch; give --batch")
        self.batch = a.batch or t["batch"]
        self.bins = a.bins
        self.units, self.out = m.get("input_dim", 182), m.get("output_dim", 2)
        self.d_model, self.state, self.layers = m.get("d_model", 64), m.get("state_dim", 64), m.get("n_layers", 1)
        self.dropout = m.get("dropout", 0.05)
        torch.manual_seed(a.seed)
        self.model = s5_maze.S5Decoder(self.units, self.d_model, self.state, self.out, self.layers, self.dropout,
                                       m.get("dt_min", 1e-3), m.get("dt_max", 1e-1))
        self.sync_bn = bool(ddp and a.world > 1 and a.sync_bn)
        for block in self.model.blocks:
            if self.sync_bn:
                norm = SyncBatchNorm1d(self.d_model, affine=False)
                norm.load_state_dict(block.norm.state_dict())
                block.norm = norm
        self.model.train()
        self.run = DistributedDataParallel(self.model) if ddp else self.model
        self.opt = s5_maze.make_optimizer(self.model, t.get("lr", 1e-3), t.get("weight_decay", 0.01))
        torch.manual_seed(a.seed + 1 + rank)  # dropout masks differ per rank
        g = torch.Generator().manual_seed(a.seed + 1000 + rank)
        self.x = torch.rand(self.batch, self.bins, self.units, generator=g) * 0.5
        self.y = torch.randn(self.batch, self.bins, self.out, generator=g)

    def step(self, i):
        self.opt.zero_grad()
        loss = F.mse_loss(self.run(self.x), self.y)
        loss.backward()
        self.opt.step()

    def modules(self):
        return [self.model]

    def describe(self, steps):
        return {"bins": self.bins, "input_dim": self.units, "output_dim": self.out, "d_model": self.d_model,
                "state_dim": self.state, "n_layers": self.layers, "dropout": self.dropout,
                "scan": "parallel (complex Hillis-Steele, s5_maze.py)", "sync_batch_norm": self.sync_bn}


WORKLOADS = {"tiny_rave": RaveWorkload, "s5_maze": SsmWorkload}


# ---------------------------------------------------------------------------------------------
# timing and checks


def timed_steps(work, a, after_step=lambda: None):
    """W warm-up steps, then S timed ones; returns the per-step seconds. Under DDP every rank
    meets at a barrier before the clock starts. `after_step` runs inside each step's time."""
    for i in range(a.warmup):
        work.step(i)
        after_step()
    if dist.is_initialized():
        dist.barrier()
    times = []
    for i in range(a.warmup, a.warmup + a.steps):
        t0 = time.perf_counter()
        work.step(i)
        after_step()
        times.append(time.perf_counter() - t0)
    return times


def lockstep(flag=torch.zeros(1)):
    """--lockstep_only: one 1-element all-reduce per step, the ranks' only meeting."""
    dist.all_reduce(flag)


def parameter_checksums(work):
    """Per parameter: sum, sum of squares and an index-weighted sum (float64)."""
    rows = []
    for module in work.modules():
        for p in module.parameters():
            v = p.detach().double().flatten()
            w = torch.arange(1, v.numel() + 1, dtype=torch.float64)
            rows.append(torch.stack([v.sum(), (v * v).sum(), (v * w).sum()]))
    return torch.stack(rows)


def worker(rank, a, cfg, port):
    torch.set_num_threads(a.threads if a.threads > 0 else os.cpu_count())
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    plain = None
    if a.world == 1:
        plain = timed_steps(WORKLOADS[a.model](cfg, a, rank, ddp=False), a)
    if a.lockstep_only:
        work = WORKLOADS[a.model](cfg, a, rank, ddp=False)
        times = timed_steps(work, a, lockstep if a.world > 1 else lambda: None)
    else:
        work = WORKLOADS[a.model](cfg, a, rank, ddp=True)
        times = timed_steps(work, a)

    # Every rank's step times, then the parameter check: identical checksums on every rank.
    all_times = torch.zeros(a.world, a.steps, dtype=torch.float64)
    all_times[rank] = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(all_times)
    sums = parameter_checksums(work)
    lo, hi = sums.clone(), sums.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    if rank == 0:
        per_rank = []
        for r in range(a.world):
            t = all_times[r].tolist()
            per_rank.append({"rank": r, "steps_per_second": a.steps / sum(t),
                             "median_step_ms": statistics.median(t) * 1e3})
        sps = min(p["steps_per_second"] for p in per_rank)
        out = {"model": a.model, "world_size": a.world, "threads": torch.get_num_threads(),
               "batch_per_rank": work.batch, "steps": a.steps, "warmup": a.warmup,
               "steps_per_second": sps, "examples_per_second": sps * work.batch * a.world,
               "per_rank": per_rank}
        if plain is not None:
            out["plain_steps_per_second"] = a.steps / sum(plain)
            out["plain_median_step_ms"] = statistics.median(plain) * 1e3
        out.update({"sync": "lockstep_only" if a.lockstep_only else "ddp",
                    "params_in_sync": bool(torch.equal(lo, hi)),
                    "param_checksum_max_spread": float((hi - lo).abs().max()),
                    "config": os.path.relpath(a.config, REPO) if a.config.startswith(REPO) else a.config,
                    "sizes": work.describe(range(a.warmup, a.warmup + a.steps)),
                    "ddp": {"backend": "gloo", "bucket_cap_mb": 25,
                            "first_bucket_bytes": dist._DEFAULT_FIRST_BUCKET_BYTES, "broadcast_buffers": True,
                            "find_unused_parameters": False},
                    "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
                    "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                    "torch": torch.__version__})
        print(json.dumps(out), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=sorted(WORKLOADS))
    ap.add_argument("--world", type=int, default=2, help="processes (ranks)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (DDP rebuilds its buckets in the 2nd)")
    ap.add_argument("--threads", type=int, default=None,
                    help="intra-op threads per rank (default: train.threads; 0: all cores)")
    ap.add_argument("--batch", type=int, default=0, help="examples per rank (default: train.batch)")
    ap.add_argument("--phase", type=int, default=1, choices=(1, 2), help="tiny_rave: 2 = adversarial phase")
    ap.add_argument("--config", help="TOML (default: configs/<model>.toml)")
    ap.add_argument("--bins", type=int, default=140, help="s5_maze: time bins per example")
    ap.add_argument("--sync_bn", type=int, default=1, choices=(0, 1),
                    help="s5_maze: BatchNorm statistics over all ranks")
    ap.add_argument("--lockstep_only", type=int, default=0, choices=(0, 1),
                    help="no DDP, no gradient sync: the ranks meet once per step in a 1-element all-reduce "
                         "(what lock-stepping alone costs on this host; the models drift apart)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=300, help="seconds a collective may wait")
    a = ap.parse_args()
    require(a.world >= 1 and a.steps >= 1 and a.warmup >= 0, "--world and --steps must be >= 1, --warmup >= 0")
    require(a.phase == 1 or a.model == "tiny_rave", "--phase 2 is for tiny_rave")
    a.config = os.path.abspath(a.config or os.path.join(REPO, "configs", f"{a.model}.toml"))
    with open(a.config, "rb") as f:
        cfg = tomllib.load(f)
    if a.threads is None:
        a.threads = cfg.get("train", {}).get("threads", 0)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(a, cfg, free_port()), nprocs=a.world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
