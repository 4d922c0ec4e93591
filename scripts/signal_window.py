#!/usr/bin/env python3
"""How long after exec a stop signal still ends `train` by its default action.

Before any code of train's runs, the dynamic loader maps and relocates its libraries (LibTorch
and its ~290 dependencies); no handler exists then, so SIGTERM's default action ends the process:
nothing is written and a shell sees status 143, as after a handled stop, but without the
"stopped by SIGTERM during start-up" line. This measures that window on this machine: for each
delay, how many of N starts sent SIGTERM after it ended by the default action.

    scripts/signal_window.py [--train build/bin/train] [--runs 8]

Load the machine the way yours is loaded (other jobs, a cold disk) to see its window there.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default=os.path.join(ROOT, "build", "bin", "train"))
    ap.add_argument("--runs", type=int, default=8, help="starts per delay (default 8)")
    args = ap.parse_args()
    if not os.access(args.train, os.X_OK):
        sys.exit(f"signal_window.py: no train at {args.train} (scripts/build.sh makes it)")
    if args.runs < 1:
        sys.exit(f"signal_window.py: --runs {args.runs}: at least 1")
    with tempfile.TemporaryDirectory() as scratch:
        # A database that does not exist: a start that got its handlers fails at once, unwritten.
        command = [args.train, "--config", "tiny_rave", "--db_path", os.path.join(scratch, "none"),
                   "--out_path", os.path.join(scratch, "runs"), "--max_steps", "1"]
        print(f"{args.train}: SIGTERM after each delay, {args.runs} starts each")
        for delay_ms in (0, 10, 20, 50, 100, 150, 200, 300, 500, 800):
            default_action = 0
            for _ in range(args.runs):
                p = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(delay_ms / 1000.0)
                p.send_signal(signal.SIGTERM)
                if p.wait() == -signal.SIGTERM:
                    default_action += 1
            print(f"  {delay_ms:4d} ms: {default_action}/{args.runs} ended by the default action")
            if default_action == 0 and delay_ms >= 100:
                break


if __name__ == "__main__":
    main()
