"""The aws Pulumi project (entry point: __main__.py)."""
