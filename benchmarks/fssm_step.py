#!/usr/bin/env python3
"""One training step of foundational_ssm's own models on the s5_maze shape, timed: --model s4d its
PyTorch S4D decoder, --model s5 its JAX S5 decoder stepped by its own jitted step, both imported from
the checkout --fssm names (github.com/Melina-Jingting/foundational_ssm; nothing copied).
docs/perf/ssm_step.md says how each is built, stepped and threaded; bench.py --only ssm_step --fssm
DIR runs it in the venvs benchmarks/fssm_env.sh makes. Prints one JSON line like ssm_step_bench:
{"impl": "fssm_s4d" | "fssm_s5_jax", "median_ms", ...}.
"""
import importlib.util
import os
import subprocess
import sys
import types

import benchlib


def need(root, folder, *files):
    """The checkout's src/foundational_ssm/FOLDER, which must hold FILES."""
    path = os.path.join(root, "src", "foundational_ssm", folder)
    for name in files:
        if not os.path.isfile(os.path.join(path, name)):
            sys.exit(f"fssm_step: {os.path.join(path, name)} not found; --fssm must be a checkout of "
                     "github.com/Melina-Jingting/foundational_ssm")
    return path


def load_fssm_archive(root):
    """archive/ has no __init__.py and models/__init__.py imports JAX: load the two PyTorch files
    as a package of their own so that S4DNeuroModel's `from .s4d import S4D` resolves."""
    archive = need(root, "models/archive", "s4d.py", "S4DNeuroModel.py")
    pkg = types.ModuleType("fssm_archive")
    pkg.__path__ = [archive]
    sys.modules["fssm_archive"] = pkg
    for mod in ("s4d", "S4DNeuroModel"):
        spec = importlib.util.spec_from_file_location(f"fssm_archive.{mod}", os.path.join(archive, mod + ".py"))
        m = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = m
        spec.loader.exec_module(m)
    return sys.modules["fssm_archive.S4DNeuroModel"].S4DNeuroModel


def time_steps(step, a):
    """--warmup untimed calls of step(), then the ms of each of --steps timed ones."""
    return benchlib.time_calls(lambda _: step(), range(a.warmup), range(a.steps))


def run_s4d(a):
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    S4DNeuroModel = load_fssm_archive(a.fssm)
    model = S4DNeuroModel(input_dim=a.units, output_dim=2, d_state=a.state, num_layers=a.layers,
                          hidden_dim=a.d_model, dropout=0.1)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    loss_fn = torch.nn.MSELoss()
    x = torch.rand(a.batch, a.bins, a.units) * 0.5
    y = torch.randn(a.batch, a.bins, 2)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return time_steps(step, a), {"torch": torch.__version__}


def run_s5(a):
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:a.threads]))
    if a.threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    need(a.fssm, "utils", "pretrain_utils.py")
    sys.path.insert(0, os.path.join(a.fssm, "src"))
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import jax.random as jr
    from omegaconf import OmegaConf
    from foundational_ssm.models import SSMDecoder
    from foundational_ssm.utils.pretrain_utils import make_step_foundational, mse_loss_foundational
    from foundational_ssm.utils.training_utils import create_optimizer_and_state

    model, state = eqx.nn.make_with_state(SSMDecoder)(
        rng_seed=a.seed, input_dim=a.units, output_dim=2, dim_ssm_io=a.d_model, num_ssm_layers=a.layers,
        num_dataset_groups=1, dropout_p=0.05, ssm_layer_cls="S5Layer",
        ssm_layer_kwargs={"dim_ssm_state": a.state, "dt_min": 0.001, "dt_max": 0.1, "blocks": 1})
    opt, opt_state, _ = create_optimizer_and_state(model, OmegaConf.create(
        {"mode": "all", "algorithm_cls": "adamw",
         "algorithm_kwargs": {"learning_rate": 1e-3, "weight_decay": 0.01}}))
    key = jr.PRNGKey(a.seed)
    kx, ky, key = jr.split(key, 3)
    x = jr.uniform(kx, (a.batch, a.bins, a.units)) * 0.5
    y = jr.normal(ky, (a.batch, a.bins, 2))
    mask = jnp.ones((a.batch, a.bins), dtype=bool)
    groups = jnp.zeros((a.batch,), dtype=jnp.int32)
    box = {"model": model, "state": state, "opt_state": opt_state, "key": key}

    def step():
        box["key"], k = jr.split(box["key"])
        box["model"], box["state"], box["opt_state"], loss, _ = make_step_foundational(
            box["model"], box["state"], x, y, mask, k, groups, mse_loss_foundational, opt, box["opt_state"])
        loss.block_until_ready()

    return time_steps(step, a), {"jax": jax.__version__, "equinox": eqx.__version__}


def main():
    a = benchlib.options(__doc__, {"fssm": ..., "model": ..., "threads": 1, "steps": 20, "warmup": 3, "batch": 64,
                                   "bins": 140, "units": 182, "d_model": 64, "state": 64, "layers": 1, "seed": 0})
    if a.threads < 1:
        sys.exit(f"fssm_step: --threads {a.threads}: must be at least 1")
    if not os.path.isdir(a.fssm):
        sys.exit(f"fssm_step: --fssm {a.fssm}: not a folder")
    ms, versions = (run_s4d if a.model == "s4d" else run_s5)(a)
    commit = subprocess.run(["git", "-C", a.fssm, "rev-parse", "HEAD"], capture_output=True, text=True)
    versions["fssm_commit"] = commit.stdout.strip() if commit.returncode == 0 else None
    s = sorted(ms)
    benchlib.emit({"impl": "fssm_s4d" if a.model == "s4d" else "fssm_s5_jax", **versions, "threads": a.threads,
                   "batch": a.batch, "bins": a.bins, "units": a.units, "d_model": a.d_model, "state": a.state,
                   "layers": a.layers, "steps": a.steps, "median_ms": s[len(s) // 2], "min_ms": s[0],
                   "max_ms": s[-1], "step_ms": ms})


if __name__ == "__main__":
    main()
