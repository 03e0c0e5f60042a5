"""Every registered op on every available backend (and its bare twin): the reusable kit, run here."""
from plugtorch.testing.conformance import *  # noqa: F403
