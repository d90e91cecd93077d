import sys

try:
    from dvfslab.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python loads dvfslab: no traceback
    sys.exit(130)

sys.exit(main())
