"""``python -m blockflow``: the same as the ``blockflow`` command's core (docs/cli.md), its modules
loaded inside the Ctrl-C guard (blockflow.console)."""
import sys

from blockflow.console import core_main

sys.exit(core_main())
