"""Controllers: small kernels that read signals from the ISV and write the next
step's adaptive quantities into it (SPEC §7)."""
