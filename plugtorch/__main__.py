"""``python -m plugtorch ...``: the same command line as the ``plugtorch`` script."""
from .apps.cli import main

raise SystemExit(main())
