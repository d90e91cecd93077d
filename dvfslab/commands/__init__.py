"""One module per ``dvfslab`` sub-command (or group); each defines ``register(subparsers)``."""
