"""The embedded LOBSTER sample (package data; see README.md here and alpharl.lobster.sample)."""
