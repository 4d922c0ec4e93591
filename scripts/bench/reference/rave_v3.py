"""RAVE v3 in Python for the native-vs-Python benchmark: v2 + Snake activations
(x + sin²(αx)/(α+1e-9), α (C,1) initialised to 1) + AdaIN before each residual unit (the
identity in training), as RaveOptions::preset("v3") (v3.gin = v2 + adain + snake + descript
discriminator). The descript discriminator takes no part in a phase-1 step and is not here.
Module structure and names follow models/rave/*.cpp (see rave_v2.py, whose blocks are reused).
"""
from rave_v2 import RAVE, Options, spectral_distance  # noqa: F401  (re-exported)


def preset(version="v3", **kw):
    if version != "v3":
        raise ValueError("rave_v3.preset: only v3 (see rave_v2.py)")
    o = Options(**kw)
    o.version = "v3"
    o.activation = "snake"
    o.adain = True
    return o
