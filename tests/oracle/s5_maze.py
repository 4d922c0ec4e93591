#!/usr/bin/python3
"""The s5_maze SSM decoder in plain PyTorch, for timing against the native trainer.

Written from the same facts as models/ssm/ (Melina-Jingting/foundational_ssm, lindermanlab/S5):
Linear(units -> H) -> S5 block -> Linear(H -> 2); block = BatchNorm (no affine, stats over
batch x time) -> S5 -> GELU (tanh) -> dropout -> GLU (W1 x * sigmoid(W2 x)) -> dropout -> residual.
S5: diagonalised HiPPO-LegS, conjugate symmetry (P/2 complex states, y = 2 Re(C~ x) + D u),
B~ = V^-1 B, C~ = C V, learnable log-step U[log dt_min, log dt_max], ZOH, Re(lambda) <= -1e-4,
Hillis-Steele parallel scan with (a_i, b_i) . (a_j, b_j) = (a_j a_i, a_j b_i + b_j) on complex
tensors. AdamW lr 1e-3, wd 0.01; Lambda and log-step without weight decay.

  s5_maze.py [--threads N] [--steps 30] [--warmup 5]     prints one JSON line of step times
  s5_maze.py --check DIR                                  loads ssm_step_bench --export DIR
                                                          (DIR/ssm_step.{json,bin}, rt-golden/1:
                                                          weights by name + batch), replays the
                                                          recorded steps, compares the losses
                                                          and the parameters after them
Run it with Debian's /usr/bin/python3 (python3-torch 1.13).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import rt_golden

# The file ssm_step_bench --export DIR writes in DIR.
EXPORT_STEM = "ssm_step"


def make_dplr_hippo(n):
    k = torch.arange(n, dtype=torch.float64)
    q = torch.sqrt(1 + 2 * k)
    A = -(torch.tril(q[:, None] * q[None, :]) - torch.diag(k))
    p = torch.sqrt(k + 0.5)
    S = A + p[:, None] * p[None, :]
    diag = torch.diagonal(S)
    lambda_real = diag.mean().item()
    skew = S - torch.diag(diag)
    omega, V = torch.linalg.eigh(torch.complex(torch.zeros_like(skew), -skew), UPLO="L")
    return torch.complex(torch.full_like(omega, lambda_real), omega), V


def lecun_truncated_normal(shape, fan_in):
    x = torch.randn(shape, dtype=torch.float64)
    while True:
        out = x.abs() > 2
        if not out.any():
            break
        x = torch.where(out, torch.randn(shape, dtype=torch.float64), x)
    return x * (math.sqrt(1.0 / fan_in) / 0.87962566103423978)


def scan_parallel(a, b):
    """x_t = a_t x_{t-1} + b_t over dim 1 of b [B, T, P]; a is [T, P]."""
    T = b.shape[1]
    A, X = a, b
    d = 1
    while d < T:
        a_late = A[d:]
        X = torch.cat([X[:, :d], a_late * X[:, : T - d] + X[:, d:]], 1)
        if 2 * d < T:
            A = torch.cat([A[:d], a_late * A[: T - d]], 0)
        d *= 2
    return X


class S5Layer(nn.Module):
    def __init__(self, H, N, dt_min=1e-3, dt_max=1e-1):
        super().__init__()
        lam, V = make_dplr_hippo(N)
        P = N // 2
        lam, V = lam[:P], V[:, :P]
        Vinv = V.conj().t()
        B_tilde = Vinv @ lecun_truncated_normal((N, H), N).to(torch.complex128)
        Cp = lecun_truncated_normal((H, N, 2), N)
        C_tilde = torch.complex(Cp[..., 0], Cp[..., 1]) @ V
        f32 = lambda t: nn.Parameter(t.to(torch.float32).contiguous())
        self.Lambda_re = f32(lam.real)
        self.Lambda_im = f32(lam.imag)
        self.B = f32(torch.view_as_real(B_tilde.resolve_conj()))
        self.C = f32(torch.view_as_real(C_tilde.resolve_conj()))
        self.D = f32(torch.randn(H, dtype=torch.float64))
        lo, hi = math.log(dt_min), math.log(dt_max)
        self.log_step = f32(torch.rand(P, dtype=torch.float64) * (hi - lo) + lo)

    def forward(self, u):
        lam = torch.complex(self.Lambda_re.clamp(max=-1e-4), self.Lambda_im)
        step = torch.exp(self.log_step)
        lambda_bar = torch.exp(lam * step)
        B_bar = ((lambda_bar - 1.0) / lam)[:, None] * torch.view_as_complex(self.B)
        T = u.shape[1]
        Bu = torch.complex(u @ B_bar.real.t(), u @ B_bar.imag.t())
        x = scan_parallel(lambda_bar[None, :].expand(T, -1), Bu)
        y = 2.0 * torch.real(x @ torch.view_as_complex(self.C).t())
        return y + self.D * u


class S5Block(nn.Module):
    def __init__(self, H, N, dropout, dt_min=1e-3, dt_max=1e-1):
        super().__init__()
        self.norm = nn.BatchNorm1d(H, affine=False)
        self.ssm = S5Layer(H, N, dt_min, dt_max)
        self.glu_w1 = nn.Linear(H, H)
        self.glu_w2 = nn.Linear(H, H)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.norm(x.transpose(1, 2)).transpose(1, 2)
        h = F.gelu(self.ssm(h), approximate="tanh")
        h = self.drop(h)
        h = self.glu_w1(h) * torch.sigmoid(self.glu_w2(h))
        return x + self.drop(h)


class S5Decoder(nn.Module):
    def __init__(self, units=182, H=64, N=64, out=2, layers=1, dropout=0.05, dt_min=1e-3, dt_max=1e-1):
        super().__init__()
        self.encoder = nn.Linear(units, H)
        self.blocks = nn.ModuleList([S5Block(H, N, dropout, dt_min, dt_max) for _ in range(layers)])
        self.decoder = nn.Linear(H, out)

    def forward(self, x):
        h = self.encoder(x)
        for b in self.blocks:
            h = b(h)
        return self.decoder(h)


SSM_PARAMS = ("Lambda_re", "Lambda_im", "log_step")


def make_optimizer(model, lr, wd):
    decay = [p for n, p in model.named_parameters() if n.split(".")[-1] not in SSM_PARAMS]
    no_decay = [p for n, p in model.named_parameters() if n.split(".")[-1] in SSM_PARAMS]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}], lr=lr)


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def check(directory):
    manifest, arrays = rt_golden.read(os.path.join(directory, EXPORT_STEM))
    tensors = {name: torch.from_numpy(a) for name, a in arrays.items()}
    x, y = tensors.pop("input:x"), tensors.pop("input:target")
    final = {k.split(":", 1)[1]: tensors.pop(k) for k in list(tensors) if k.startswith("final:")}
    o = manifest["options"]
    model = S5Decoder(o["input_dim"], o["d_model"], o["state_dim"], o["output_dim"], o["n_layers"], dropout=0.0)
    ours = dict(model.named_parameters())
    ours.update(dict(model.named_buffers()))
    loaded = set()
    for name, t in tensors.items():
        key = name.split(":", 1)[1]
        if key not in ours:
            sys.exit(f"check: native tensor '{key}' has no counterpart in the Python model")
        with torch.no_grad():
            ours[key].copy_(t.to(ours[key].dtype).reshape(ours[key].shape))
        loaded.add(key)
    missing = set(dict(model.named_parameters())) - loaded
    if missing:
        sys.exit(f"check: Python parameters not in the export: {sorted(missing)}")
    opt = make_optimizer(model, manifest["lr"], manifest["weight_decay"])
    ok = True
    losses = [s["loss"] for s in manifest["steps"]]
    for i, native in enumerate(losses):
        ours_loss = train_step(model, opt, x, y)
        diff = abs(ours_loss - native)
        ok = ok and diff <= 1e-4
        print(f"step {i}: native loss {native:.7f}  python loss {ours_loss:.7f}  |diff| {diff:.2e}")
    worst, worst_name = 0.0, ""
    for name, p in model.named_parameters():
        if name not in final:
            sys.exit(f"check: the export has no final value of '{name}'")
        d = (p.detach() - final[name].reshape(p.shape)).abs().max().item()
        if d > worst:
            worst, worst_name = d, name
    params_ok = worst <= 1e-5
    print(f"parameters after {len(losses)} AdamW steps: max |diff| {worst:.2e} ({worst_name})")
    ok = ok and params_ok
    print("check: " + ("PASS (loss |diff| <= 1e-4 at every step, parameters within 1e-5)" if ok else "FAIL"))
    return 0 if ok else 1


def add_shape_args(ap, steps=30, warmup=5):
    """The s5_maze shape and the timing loop's options (benchmarks/fssm_step.py takes the same)."""
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bins", type=int, default=140)
    ap.add_argument("--units", type=int, default=182)
    ap.add_argument("--d_model", type=int, default=64)
    ap.add_argument("--state", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shape_args(ap)
    ap.add_argument("--dropout", type=float, default=0.05)
    ap.add_argument("--check", metavar="DIR")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.check:
        return check(a.check)
    model = S5Decoder(a.units, a.d_model, a.state, 2, a.layers, a.dropout)
    opt = make_optimizer(model, 1e-3, 0.01)
    x = torch.rand(a.batch, a.bins, a.units) * 0.5
    y = torch.randn(a.batch, a.bins, 2)
    for _ in range(a.warmup):
        train_step(model, opt, x, y)
    ms = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        train_step(model, opt, x, y)
        ms.append((time.perf_counter() - t0) * 1e3)
    s = sorted(ms)
    print(json.dumps({"impl": "python", "torch": torch.__version__, "threads": a.threads, "batch": a.batch,
                      "bins": a.bins, "units": a.units, "d_model": a.d_model, "state": a.state, "steps": a.steps,
                      "median_ms": s[len(s) // 2], "min_ms": s[0], "max_ms": s[-1], "step_ms": ms}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
