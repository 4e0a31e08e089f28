"""The gcp Pulumi project (entry point: __main__.py)."""
