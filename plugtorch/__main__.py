"""``python -m plugtorch ...``: the same command line as the ``plugtorch`` script."""
from .cli import main

raise SystemExit(main())
