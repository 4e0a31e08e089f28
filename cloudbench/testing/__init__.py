"""Fakes for fast unit tests (no hosts, no network): synthetic result directories
and a fake provider (:mod:`cloudbench.testing.fakes`)."""
