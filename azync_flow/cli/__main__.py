"""`python -m azync_flow.cli`."""

import sys

from azync_flow.cli import main

sys.exit(main())
