"""`python -m microsched ...` is the `microsched` command."""

import sys

from .cli import main

sys.exit(main())
