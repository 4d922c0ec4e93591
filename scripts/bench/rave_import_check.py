"""Run by scripts/bench/rave_cpu_env.sh in the venv it made: imports acids-rave with the
stand-ins of rave_gpu_step.py for what RAVE imports at module level but the benchmarks never
call (GPUtil, librosa, ...), and says which torch it got."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from rave_gpu_step import replace_unused_imports  # noqa: E402

replaced = replace_unused_imports()
import rave  # noqa: E402,F401

print("rave_cpu_env: acids-rave imports on torch", torch.__version__, "from", torch.__file__,
      "; stand-ins for", ", ".join(replaced) or "nothing")
