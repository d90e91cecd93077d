import sys

from dvfslab.cli import main

sys.exit(main())
