"""The token-bucket drain workload's spec parameters (``kind: tokenbucket``; the old spelling
``kind: tbdrain`` is read as ``tokenbucket`` named ``tbdrain``, as it was named before)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from cloudbench.spec.fields import Duration, Name
from cloudbench.store.formats import RENAMED_KINDS
from cloudbench.workloads.throughput.params import PairWorkloadModel

KIND = "tokenbucket"


class TbDrainWorkload(PairWorkloadModel):
    """Token-bucket drain (Uta et al.): send flat out until the rate drops and stays down."""

    kind: Literal["tokenbucket", "tbdrain"]  # the old spelling routes here (store.formats.RENAMED_KINDS)
    name: Name = "tokenbucket"
    max_duration: Duration = Field(600.0, gt=0, description="give up a drain after this long")
    window: Duration = Field(10.0, gt=0, description="drained when min(first window) × factor > "
                             "max(last window)")
    factor: float = Field(0.75, gt=0, lt=1)
    rest: Duration | None = Field(None, ge=0, description="rest after the drain, then drain again "
                                  "to measure the refill (none: one drain)")

    @model_validator(mode="before")
    @classmethod
    def _old_kind(cls, data: Any) -> Any:
        """``kind: tbdrain`` (the old spelling) becomes ``tokenbucket``; its default name stays
        ``tbdrain`` so that its summaries keep the name older runs of the same spec have."""
        if isinstance(data, dict) and RENAMED_KINDS.get(str(data.get("kind"))) == KIND:
            return {**data, "kind": KIND, "name": data.get("name", data["kind"])}
        return data

    def bursts(self) -> list[dict[str, Any]]:
        out = [{"seconds": self.max_duration, "stop": "drain", "pause_after_s": self.rest or 0.0}]
        if self.rest is not None:
            out.append({"seconds": self.max_duration, "stop": "drain"})
        return out

    def tool_options(self) -> dict[str, Any]:
        return {**super().tool_options(), "drain": {"window_s": self.window, "factor": self.factor}}
