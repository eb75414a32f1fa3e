"""The ``alpharl`` command line: one module per command or command group."""
