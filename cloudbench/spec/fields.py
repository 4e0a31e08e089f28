"""Field types shared by every section of the spec: names, durations, sizes, bit rates."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
)

from cloudbench.core.units import parse_bitrate, parse_duration, parse_size

NAME_RE = r"^[A-Za-z][A-Za-z0-9_-]{0,31}$"
NAME = re.compile(NAME_RE)


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(lambda v: v, return_type=float),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(us|µs|ms|s|m|min|h|d)?\s*$"},
            ],
            "description": "seconds, or a number with a unit: 500ms, 20s, 10m, 1h, 7d",
        }
    ),
]


Size = Annotated[
    int,
    BeforeValidator(parse_size),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
            "description": "bytes, or a number with a unit: 64KiB, 1MiB",
        }
    ),
]


Name = Annotated[str, Field(pattern=NAME_RE)]


class Model(BaseModel):
    """Base of every spec section: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


BitRate = Annotated[
    float,
    BeforeValidator(parse_bitrate),
    WithJsonSchema(
        {
            "anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}],
            "description": "bits per second, or a number with a unit: 50mbit, 1gbit",
        }
    ),
]
