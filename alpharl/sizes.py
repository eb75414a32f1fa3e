"""Network and distribution sizes: the one definition of each (SPEC §4)."""

#: Width of the shared encoder's hidden layers (obs_dim -> HIDDEN -> HIDDEN).
HIDDEN = 128
#: Actions of the agent (see alpharl.actions).
N_ACTIONS = 9
#: Atoms of the C51 return distribution.
N_ATOMS = 21
#: Support of the C51 distribution: linspace(V_MIN, V_MAX, N_ATOMS), in reward units.
V_MIN = -10.0
V_MAX = 10.0
#: Spacing of the supports.
DELTA_Z = (V_MAX - V_MIN) / (N_ATOMS - 1)
