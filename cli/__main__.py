"""``python -m alpharl.cli`` = the ``alpharl`` command."""
from alpharl.cli.app import main

main()
