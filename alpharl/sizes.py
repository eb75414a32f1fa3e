"""Network and distribution sizes: the one definition of each (SPEC §4)."""
import math

from alpharl.actions import N_ACTIONS  # noqa: F401  (defined by the action list; a size of every head)

#: Width of the shared encoder's hidden layers (obs_dim -> HIDDEN -> HIDDEN).
HIDDEN = 128
#: Atoms of the C51 return distribution.
N_ATOMS = 21
#: Support of the C51 distribution: linspace(V_MIN, V_MAX, N_ATOMS), in reward units.
V_MIN = -10.0
V_MAX = 10.0
#: Spacing of the supports.
DELTA_Z = (V_MAX - V_MIN) / (N_ATOMS - 1)
#: ln N_ATOMS: the C51 cross-entropy of a uniform prediction (l_q starts near it).
LN_N_ATOMS = math.log(N_ATOMS)


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for positive ints: blocks of b that cover a items."""
    return -(-a // b)
