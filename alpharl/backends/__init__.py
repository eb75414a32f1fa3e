"""The trainer's backends: ``base`` declares the operations the step calls (``Backend``),
``device`` runs them as kernel launches (cuda, sim), ``numpy`` through the kernels' NumPy
references; ``factory`` picks one. Kept empty: importing a backend module loads only its own
dependencies."""
