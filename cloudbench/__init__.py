"""cloudbench: cloud network measurement campaigns with statistics you can trust."""

__version__ = "0.1.0"
