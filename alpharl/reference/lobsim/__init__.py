"""NumPy twin of cuda_kernels/lobsim/, file for file (the semantics: step.py's docstring)."""
from alpharl.reference.lobsim.step import ReferenceLobSim

__all__ = ["ReferenceLobSim"]
