#!/usr/bin/python3
"""rave_configs.sh's rows (tab-separated: stack, parameters, phase-1 s/step, phase-2 s/step,
peak RSS MiB, RAVE's stated minimum GPU memory) -> benchmarks/results/rave_configs.json."""

import benchlib


def main():
    a = benchlib.summary_parser(__doc__, "rows batch n_signal threads rev?").parse_args()
    runs = []
    with open(a.rows) as f:
        for line in filter(str.strip, f):
            stack, params, p1, p2, rss, gpu = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
            runs.append({"config": stack, "parameters_trained": params, "phase_1_s_per_step": float(p1),
                         "phase_2_s_per_step": float(p2), "peak_rss_mib": float(rss), "rave_gpu_memory": gpu})
    b = benchlib.Blocks()
    b.text("Each row is `train --config … --smoke_test` at full size: median step time of phase 1 and of phase 2 "
           "(RAVE's adversarial phase, a discriminator update included) after one warm-up step each, and the peak "
           "resident memory of the whole smoke run (validation and the final checkpoint included). RAVE's minimum "
           "GPU memory is what its README states for the base config (batch 8 on a GPU): a different quantity, "
           "shown for scale.")
    b.table(["config", "parameters trained", "phase 1 step", "phase 2 step", "peak RSS", "RAVE's minimum GPU memory"],
            [[f"`{r['config'].replace('+', ' + ')}`", r["parameters_trained"], f"{r['phase_1_s_per_step']:.3f} s",
              f"{r['phase_2_s_per_step']:.3f} s", f"{r['peak_rss_mib']:.1f} MiB", r["rave_gpu_memory"] or "(as its base)"]
             for r in runs])
    benchlib.write_summary(a, "rave_configs", "RAVE's configurations on the CPU", b,
                           env=benchlib.environment(a.load_before, git=a.rev), raw={"runs": runs},
                           commands=[f"build/bin/train --config CONFIG [--config MIXIN] --db_path DB --smoke_test "
                                     f"--batch {a.batch} --n_signal {a.n_signal} --threads {a.threads} --workers 1"])


if __name__ == "__main__":
    main()
