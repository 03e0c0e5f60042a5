"""Puts this folder on ``sys.path`` (pytest's prepend import mode does so for a conftest's folder),
so the harness modules here import by name from every test below it, the fx demos' included."""
