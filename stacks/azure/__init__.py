"""The azure Pulumi project (entry point: __main__.py)."""
