"""`python -m polyvox.cli`: the `polyvox` command."""

import sys

from polyvox.cli import main

sys.exit(main())
