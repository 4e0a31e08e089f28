"""Stdlib-only programs shipped to measured hosts and run there with ``python3 FILE.py``."""
