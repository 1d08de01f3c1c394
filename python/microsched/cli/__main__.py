"""`python -m microsched.cli ...` is the `microsched` command."""

import sys

from . import main

sys.exit(main())
