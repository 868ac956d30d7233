"""``python -m skycore.cli``: the ``skycore`` command."""

from skycore.cli import main

main()
