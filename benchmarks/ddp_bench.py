#!/usr/bin/env python3
"""Python side of the data-parallel benchmark (bench.py --only ddp): the training step of tiny_rave
(the real RAVE, acids-rave 2.3.1, its own training_step) or s5_maze (tests/oracle/s5_maze.py) under
torch's DistributedDataParallel (Gloo, CPU), against `train --nproc_per_node N`. Runs in
.venv-rave-cpu (RAVE on torch 2.11.0, the LibTorch of build-cuda/).

  ddp_bench.py --model tiny_rave|s5_maze --world N [--steps 20] [--warmup 3] [--threads T]
               [--batch B] [--phase 1|2] [--config FILE] [--bins 140] [--sync_bn 1|0] [--seed 0]
               [--lockstep_only 0|1] [--rave_backward manual|tensor]

It spawns the N ranks; rank 0 prints one JSON object: steps_per_second (the slowest rank),
examples_per_second (steps/s x B x N), per_rank, params_in_sync, the DDP settings and the model's
sizes; at world 1 also plain_steps_per_second (the same step without DDP) and, for tiny_rave, both
first-step losses (equal when DDP changes nothing). --lockstep_only 1 drops DDP: the ranks train
apart and meet once per step in a 1-element all-reduce (what lock-stepping alone costs).

One step per rank on fixed synthetic input seeded by rank. tiny_rave: RAVE v2 from its v2.gin with
the bindings of configs/tiny_rave.toml (rave_bindings; RAVE_FIXED: what RAVE hard-codes, refused
otherwise), stepped by rave_oracle.Harness; under DDP wrapped as Lightning 1.9's strategy="ddp"
wraps it on the CPU (DistributedDataParallel(LightningDistributedModule(model)), DDPStrategy's
kwargs). RAVE 2.3.1 calls loss.backward() itself, not manual_backward, so under Lightning's DDP it
all-reduces no gradient (Lightning issue #9237): --rave_backward tensor runs exactly that
(params_in_sync false); manual (the default, what is compared) runs each backward as
manual_backward would, prepare_for_backward first. s5_maze: DistributedDataParallel with its
defaults; torch.nn.SyncBatchNorm refuses CPU input, so SyncBatchNormRows gathers the BatchNorm
statistics over every rank's rows (as distributed/sync_batch_norm.h does); --sync_bn 0 keeps them
local. DDP rebuilds its buckets in the second iteration: warm-up should cover two steps. Gloo uses
loopback (GLOO_SOCKET_IFNAME=lo unless set); libgomp reads OMP_WAIT_POLICY when it loads.
"""
import contextlib
import datetime
import functools
import os
import socket
import statistics
import sys
import time
import tomllib
import types
from importlib.metadata import version

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import benchlib

REPO = benchlib.ROOT
sys.path.insert(0, os.path.join(REPO, "tests", "oracle"))
import s5_maze  # noqa: E402  (tests/oracle/s5_maze.py)

# What RAVE fixes in code and a native config can change (RAVE.configure_optimizers: Adam at 1e-3
# and 1e-4, betas (0.5, 0.9), LinearLR to 0.1 over phase 1; training_step applies the feature-matching
# weight twice; v2's LeakyReLU(0.2); v2.gin has no noise generator): a config asking otherwise is refused.
RAVE_FIXED = {"train.lr": 1e-3, "train.discriminator_lr": 1e-4, "train.adam_beta1": 0.5,
              "train.adam_beta2": 0.9, "train.lr_end_factor": 0.1,
              "train.feature_matching_weight_twice": True, "model.activation": "leaky_relu",
              "model.noise_bands": 0, "model.padding": "centered", "model.discriminator": "period_scale",
              "model.amplitude_modulation": True, "model.adain": False, "data.channels": 1}
# A native config's keys as gin bindings on RAVE's v2.gin (RAVE's macros and configurables, as
# rave_oracle.TINY_V2 binds them). The native defaults of the train keys are v2.gin's
# (families/rave/rave_family.cpp), except phase_1_duration's and the beta schedule's.
RAVE_GIN = {"model.n_band": "N_BAND", "model.capacity": "CAPACITY", "model.latent_size": "LATENT_SIZE",
            "model.ratios": "RATIOS", "model.dilations": "DILATIONS", "model.kernel_size": "KERNEL_SIZE",
            "model.discriminator_capacity": "discriminator.ConvNet.capacity",
            "model.discriminator_n_layers": "discriminator.ConvNet.n_layers",
            "model.periods": "discriminator.MultiPeriodDiscriminator.periods",
            "model.n_scales": "discriminator.MultiScaleDiscriminator.n_discriminators",
            "model.stft_scales": "core.MultiScaleSTFT.scales", "train.phase_1_duration": "PHASE_1_DURATION",
            "train.update_discriminator_every": "RAVE.update_discriminator_every",
            "train.beta_start": "BetaWarmupCallback.initial_value",
            "train.beta_end": "BetaWarmupCallback.target_value",
            "train.beta_warmup_steps": "BetaWarmupCallback.warmup_len",
            "train.valid_signal_crop": "RAVE.valid_signal_crop"}


def require(ok, message):
    if not ok:
        raise SystemExit(f"ddp_bench: {message}")


def rave_bindings(cfg):
    """The gin bindings that build a native RAVE v2 config's network and training settings on RAVE's
    v2.gin; data.n_signal and train.batch are the batch's shape."""
    sections = {"model": cfg["model"], "data": cfg.get("data", {}), "train": cfg.get("train", {})}
    require(sections["model"].get("family") == "rave" and sections["model"].get("version") == "v2",
            "tiny_rave: built on RAVE's v2.gin: model.version must be v2")
    value = lambda key, default=None: sections[key.split(".")[0]].get(key.split(".")[1], default)  # noqa: E731
    for key, fixed in RAVE_FIXED.items():
        require(value(key, fixed) == fixed, f"tiny_rave: {key} = {value(key, fixed)!r}: RAVE 2.3.1 fixes it to "
                f"{fixed!r} (no gin setting reaches it)")
    b = [f"SAMPLING_RATE = {value('data.sampling_rate', 44100)}"]
    b += [f"{name} = {value(key)!r}" for key, name in RAVE_GIN.items() if value(key) is not None]
    if value("train.feature_matching_weight") is not None:
        b.append(f"RAVE.weights = {{'feature_matching': {float(value('train.feature_matching_weight'))!r}}}")
    return b


@functools.cache
def rave_modules():
    """rave_oracle and what the DDP wrapping needs, imported once per process as rave_gpu_step.py
    imports them (stand-ins for the modules the step never uses, the PQMF prototype from the table)."""
    import rave_gpu_step
    oracle, replaced, pqmf_source, table = rave_gpu_step.import_rave(True)
    from pytorch_lightning.overrides.distributed import LightningDistributedModule, prepare_for_backward
    from pytorch_lightning.strategies import DDPStrategy
    strategy = DDPStrategy()
    strategy.pre_configure_ddp()  # on the CPU: find_unused_parameters True unless given
    return types.SimpleNamespace(oracle=oracle, replaced=replaced, pqmf_source=pqmf_source, table=table,
                                 pqmf_matches=rave_gpu_step.pqmf_matches, wrapper=LightningDistributedModule,
                                 prepare_for_backward=prepare_for_backward, ddp_kwargs=dict(strategy._ddp_kwargs))


class RaveWorkload:
    """RAVE's own training_step, callbacks, optimizers and LR scheduler through rave_oracle.Harness
    (Lightning 1.9's per-batch calls without a Trainer); with ddp, wrapped as Lightning's DDP strategy
    wraps it (see the module docstring)."""

    def __init__(self, cfg, a, rank, ddp):
        r = rave_modules()
        require("batch" in cfg.get("train", {}) or a.batch, "tiny_rave: the config has no train.batch; give --batch")
        self.bindings = rave_bindings(cfg)
        self.batch, self.n_signal = a.batch or cfg["train"]["batch"], cfg.get("data", {})["n_signal"]
        self.phase, self.rave_backward = a.phase, a.rave_backward
        torch.manual_seed(a.seed)  # the same initial model on every rank (DDP broadcasts rank 0's anyway)
        with contextlib.redirect_stdout(sys.stderr):  # RAVE prints as it builds; stdout is the JSON's
            self.model = model = r.oracle.build("v2", self.bindings)
            self.receptive_field = r.oracle.prepare(model)  # what Lightning's sanity validation leaves
        self.pqmf_matches_scipy_build = r.pqmf_matches(r.table, model)
        self.h = r.oracle.Harness(model)
        # batch_idx is the step (one epoch): in phase 2 RAVE steps the discriminator when batch_idx %
        # update_discriminator_every == 0. Phase 2 as rave_gpu_step.run_phase: the callbacks' counts
        # (WarmupCallback's flips warmed_up, BetaWarmupCallback's sets beta) start at model.warmup.
        self.first_step = int(model.warmup) if self.phase == 2 else 0
        for cb in self.h.callbacks if self.phase == 2 else []:
            cb.state["training_steps"] = max(cb.state["training_steps"], self.first_step)
        self.ddp = None
        if ddp:
            self.ddp = DistributedDataParallel(r.wrapper(model), device_ids=None, **r.ddp_kwargs)
            # What _LightningModuleWrapperBase.forward reads of the Trainer when training.
            model._trainer = types.SimpleNamespace(training=True, model=self.ddp)
            self.inside_ddp = False
            model.training_step = self.strategy_training_step
        torch.manual_seed(a.seed + 1 + rank)  # reparametrisation noise differs per rank
        g = torch.Generator().manual_seed(a.seed + 1000 + rank)
        self.x = torch.rand(self.batch, 1, self.n_signal, generator=g) - 0.5
        self.first_loss = None

    def strategy_training_step(self, batch, batch_idx):
        """Harness.step calls this as model.training_step: DDPStrategy.training_step (the DDP
        wrapper's forward, whose LightningDistributedModule calls model.training_step again: RAVE's
        own this time), then DDPStrategy.post_training_step."""
        if self.inside_ddp:
            step = functools.partial(type(self.model).training_step, self.model)
            if self.rave_backward == "tensor":
                return step(batch, batch_idx)
            # manual: the loss's backward as LightningModule.manual_backward runs it under DDP
            # (DDPStrategy.pre_backward: Lightning's prepare_for_backward, then the backward).
            original, ddp = torch.Tensor.backward, self.ddp

            def backward(loss, *args, **kwargs):
                rave_modules().prepare_for_backward(ddp, loss)
                return original(loss, *args, **kwargs)
            torch.Tensor.backward = backward
            try:
                return step(batch, batch_idx)
            finally:
                torch.Tensor.backward = original
        self.inside_ddp = True
        try:
            out = self.ddp(batch, batch_idx)
        finally:
            self.inside_ddp = False
        self.ddp.require_backward_grad_sync = True  # DDPStrategy.post_training_step
        return out

    def step(self, i):
        # A fresh batch tensor each step, as a loader gives (training_step sets its requires_grad).
        loss, _ = self.h.step(self.x.clone(), self.first_step + i)
        if self.first_loss is None:
            self.first_loss = float(loss)
            assert bool(self.model.warmed_up) == (self.phase == 2)

    def describe(self, steps):
        r, m = rave_modules(), self.model
        out = {"phase": self.phase, "n_signal": self.n_signal, "rave": "acids-rave " + version("acids-rave"),
               "gin": "v2.gin", "gin_bindings": self.bindings, "receptive_field": self.receptive_field,
               "parameters": {k: sum(p.numel() for p in getattr(m, k).parameters())
                              for k in ("encoder", "decoder", "discriminator")},
               "pytorch_lightning": version("pytorch-lightning"), "replaced_imports": r.replaced,
               "pqmf_prototype": r.pqmf_source, "pqmf_matches_scipy_build": self.pqmf_matches_scipy_build,
               "rave_backward": self.rave_backward}
        if self.phase == 2:
            every = int(m.update_discriminator_every)
            out["discriminator_steps_timed"] = sum((self.first_step + i) % every == 0 for i in steps)
        return out


class SyncBatchNormRows(torch.autograd.Function):
    """(x - mean) * invstd over the rows x [N, C] with every rank's statistics. Returns (y, mean, var,
    count); only y is differentiable."""

    @staticmethod
    def forward(ctx, x, eps):
        x = x.contiguous()
        c, xd = x.size(1), x.double()
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
        c, gd = y.size(1), dy.double()
        sums = torch.cat([gd.sum(0), (gd * y.double()).sum(0)])
        dist.all_reduce(sums)
        mean_g, mean_gy = (sums[:c] / n).to(y.dtype), (sums[c:] / n).to(y.dtype)
        return invstd * (dy - mean_g - y * mean_gy), None


class SyncBatchNorm1d(nn.BatchNorm1d):
    """s5_maze.S5Block's norm (input [B, C, T], statistics over B x T) with every rank's statistics in
    training; running statistics updated from the global ones (unbiased var)."""

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
        self.batch, self.bins = a.batch or t["batch"], a.bins
        self.units, self.out = m.get("input_dim", 182), m.get("output_dim", 2)
        self.d_model, self.state, self.layers = m.get("d_model", 64), m.get("state_dim", 64), m.get("n_layers", 1)
        self.dropout = m.get("dropout", 0.05)
        torch.manual_seed(a.seed)
        self.model = s5_maze.S5Decoder(self.units, self.d_model, self.state, self.out, self.layers, self.dropout,
                                       m.get("dt_min", 1e-3), m.get("dt_max", 1e-1))
        self.sync_bn = bool(ddp and a.world > 1 and a.sync_bn)
        for block in self.model.blocks if self.sync_bn else []:
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
        F.mse_loss(self.run(self.x), self.y).backward()
        self.opt.step()

    def describe(self, steps):
        return {"bins": self.bins, "input_dim": self.units, "output_dim": self.out, "d_model": self.d_model,
                "state_dim": self.state, "n_layers": self.layers, "dropout": self.dropout,
                "scan": "parallel (complex Hillis-Steele, s5_maze.py)", "sync_batch_norm": self.sync_bn}


WORKLOADS = {"tiny_rave": RaveWorkload, "s5_maze": SsmWorkload}


def timed_steps(work, a, after_step=lambda: None):
    """--warmup steps, then --steps timed ones (each including after_step); the per-step seconds.
    Under DDP every rank meets at a barrier before the clock starts."""
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


def parameter_checksums(model):
    """Per parameter: sum, sum of squares and an index-weighted sum (float64)."""
    rows = []
    for p in model.parameters():
        v = p.detach().double().flatten()
        rows.append(torch.stack([v.sum(), (v * v).sum(), (v * torch.arange(1, v.numel() + 1, dtype=torch.float64)).sum()]))
    return torch.stack(rows)


def worker(rank, a, cfg, port):
    torch.set_num_threads(a.threads if a.threads > 0 else os.cpu_count())
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    plain = plain_work = None
    if a.world == 1:
        plain_work = WORKLOADS[a.model](cfg, a, rank, ddp=False)
        plain = timed_steps(plain_work, a)
    work = WORKLOADS[a.model](cfg, a, rank, ddp=not a.lockstep_only)
    times = timed_steps(work, a, lockstep if a.lockstep_only and a.world > 1 else lambda: None)
    # Every rank's step times, then the parameter check: identical checksums on every rank.
    all_times = torch.zeros(a.world, a.steps, dtype=torch.float64)
    all_times[rank] = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(all_times)
    lo = parameter_checksums(work.model)
    hi = lo.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    if rank == 0:
        per_rank = [{"rank": r, "steps_per_second": a.steps / sum(t), "median_step_ms": statistics.median(t) * 1e3}
                    for r, t in enumerate(all_times.tolist())]
        sps = min(p["steps_per_second"] for p in per_rank)
        out = {"model": a.model, "world_size": a.world, "threads": torch.get_num_threads(),
               "batch_per_rank": work.batch, "steps": a.steps, "warmup": a.warmup, "steps_per_second": sps,
               "examples_per_second": sps * work.batch * a.world, "per_rank": per_rank}
        if plain is not None:
            out.update(plain_steps_per_second=a.steps / sum(plain), plain_median_step_ms=statistics.median(plain) * 1e3)
        if getattr(work, "first_loss", None) is not None:
            # Rank 0's first-step loss (what RAVE's training_step backpropagates); at world 1 also
            # the plain run's: DDP must not change what the step computes.
            out["first_step_loss"] = work.first_loss
            if plain_work is not None:
                out["plain_first_step_loss"] = plain_work.first_loss
        out.update(sync="lockstep_only" if a.lockstep_only else "ddp", params_in_sync=bool(torch.equal(lo, hi)),
                   param_checksum_max_spread=float((hi - lo).abs().max()),
                   config=os.path.relpath(a.config, REPO) if a.config.startswith(REPO) else a.config,
                   sizes=work.describe(range(a.warmup, a.warmup + a.steps)))
        ddp = getattr(work, "ddp", None)
        if ddp is not None:
            out["ddp"] = {"backend": "gloo", "wrapped": type(ddp.module).__name__,
                          "bucket_cap_mb": ddp.bucket_bytes_cap / 2 ** 20,
                          "first_bucket_bytes": dist._DEFAULT_FIRST_BUCKET_BYTES,
                          "broadcast_buffers": ddp.broadcast_buffers,
                          "find_unused_parameters": ddp.find_unused_parameters}
        out.update(gloo_socket_ifname=os.environ.get("GLOO_SOCKET_IFNAME"),
                   omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), torch=torch.__version__)
        benchlib.emit(out)
    dist.barrier()  # no rank leaves while another still uses the group (a Gloo teardown abort otherwise)
    dist.destroy_process_group()


def main():
    # --threads: intra-op threads per rank (default train.threads; 0: all cores); --batch: examples per rank
    # (default train.batch); --config: TOML (default configs/<model>.toml); --timeout: seconds a collective waits.
    a = benchlib.options(__doc__, {"model": ..., "world": 2, "steps": 20, "warmup": 3, "threads": -1, "batch": 0,
                                   "phase": 1, "config": None, "bins": 140, "sync_bn": 1, "lockstep_only": 0,
                                   "rave_backward": "manual", "seed": 0, "timeout": 300})
    require(a.model in WORKLOADS and a.rave_backward in ("manual", "tensor"), "--model tiny_rave|s5_maze, "
            "--rave_backward manual|tensor")
    require(a.world >= 1 and a.steps >= 1 and a.warmup >= 0, "--world and --steps must be >= 1, --warmup >= 0")
    require(a.phase == 1 or a.model == "tiny_rave", "--phase 2 is for tiny_rave")
    a.config = os.path.abspath(a.config or os.path.join(REPO, "configs", f"{a.model}.toml"))
    with open(a.config, "rb") as f:
        cfg = tomllib.load(f)
    if a.threads < 0:
        a.threads = cfg.get("train", {}).get("threads", 0)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a, cfg, port), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
