"""``python -m blockflow``: the same as the ``blockflow`` command."""
import sys

from .cli import main

sys.exit(main())
