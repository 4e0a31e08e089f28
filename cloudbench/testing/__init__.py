"""Fakes for fast unit tests (no hosts, no network): synthetic result directories."""
