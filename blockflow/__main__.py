"""``python -m blockflow``: the same as the ``blockflow`` command."""
import sys

from blockflow.cli import main

sys.exit(main())
