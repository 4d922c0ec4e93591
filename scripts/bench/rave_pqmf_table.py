"""RAVE's PQMF prototype filters, computed with RAVE's pinned scipy (1.10.0), for machines
without it.

  .venv-rave/bin/python scripts/bench/rave_pqmf_table.py [--out FILE]
      (default scripts/bench/rave_pqmf_prototypes.json)

RAVE (acids-rave 2.3.1) designs its PQMF prototype at construction only (rave.pqmf.get_prototype:
scipy.optimize.fmin over a Kaiser-window firwin). scipy 1.10.0 has no Python 3.12 wheel, and newer
scipy lacks `scipy.signal.kaiser` and firwin's `nyq`, which rave/pqmf.py imports and uses. So
rave_gpu_step.py and rave_train.py (--replace-unused-imports, where scipy is not 1.10.0) swap
get_prototype for a lookup in this table.

This script computes the table with the real get_prototype, then checks that RAVE's CachedPQMF
built through the lookup is bit-identical (every buffer and weight, torch.equal) to the one built
with real scipy, and stores a sha256 of that state so the GPU run can check its own build.
"""
import argparse
import hashlib
import json
import os
from importlib.metadata import version

import numpy as np
import torch

ATTENUATION = 100            # v1.gin: pqmf.CachedPQMF.attenuation (v2.gin includes v1.gin)
BANDS = (2, 4, 8, 16, 32)    # v2.gin's N_BAND is 16; the oracle's tiny configs use 4


def state_sha256(module):
    """sha256 over the module's state tensors (sorted names, float32 bytes)."""
    d = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        d.update(k.encode())
        d.update(v.detach().cpu().contiguous().numpy().tobytes())
    return d.hexdigest()


def lookup(table):
    """A get_prototype(atten, M, N=None) that answers from the table (float64, exact)."""
    def get_prototype(atten, M, N=None):
        key = f"{int(atten)},{int(M)}"
        if N is not None or key not in table:
            raise KeyError(f"no PQMF prototype stored for attenuation={atten} n_band={M} N={N}")
        return np.array([float.fromhex(s) for s in table[key]["h"]], dtype=np.float64)
    return get_prototype


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(here, "rave_pqmf_prototypes.json"))
    a = ap.parse_args()
    import scipy                 # here, so that rave_gpu_step.py can import lookup() without it
    import rave.pqmf as pqmf
    real = pqmf.get_prototype
    table = {}
    for m in BANDS:
        h = real(ATTENUATION, m)
        table[f"{ATTENUATION},{m}"] = {"h": [float(v).hex() for v in h]}
    # Same construction twice: real scipy, then the table; all state must match bit for bit.
    for m in BANDS:
        entry = table[f"{ATTENUATION},{m}"]
        pqmf.get_prototype = real
        ref = pqmf.CachedPQMF(attenuation=ATTENUATION, n_band=m)
        pqmf.get_prototype = lookup(table)
        got = pqmf.CachedPQMF(attenuation=ATTENUATION, n_band=m)
        pqmf.get_prototype = real
        a_sd, b_sd = ref.state_dict(), got.state_dict()
        assert a_sd.keys() == b_sd.keys()
        for k in a_sd:
            assert a_sd[k].dtype == b_sd[k].dtype and torch.equal(a_sd[k], b_sd[k]), (m, k)
        entry["state_sha256"] = state_sha256(ref)
        entry["state_keys"] = sorted(a_sd)
        print(f"n_band {m}: {len(entry['h'])} taps, CachedPQMF state bit-identical "
              f"({len(a_sd)} tensors) sha256 {entry['state_sha256'][:16]}")
    doc = {"generated_by": "scripts/bench/rave_pqmf_table.py",
           "rave": version("acids-rave"), "scipy": scipy.__version__, "torch": torch.__version__,
           "numpy": np.__version__, "note": "key 'attenuation,n_band'; h as float.hex of "
           "rave.pqmf.get_prototype(attenuation, n_band) (float64)", "prototypes": table}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes)")


if __name__ == "__main__":
    main()
