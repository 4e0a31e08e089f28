"""Distances on the Earth and the delay light needs to cover them.

Geodesic distances come from geographiclib (Karney's algorithm on the WGS84
ellipsoid, accurate to nanometres) rather than a spherical formula: Persico et
al. used Vincenty's formulae for their propagation bound, and Karney's method is
the robust successor that also converges for nearly antipodal points.
"""

from __future__ import annotations

from geographiclib.geodesic import Geodesic

C_M_PER_S = 299_792_458.0
FIBRE_FRACTION = 2.0 / 3.0  # light in silica fibre: refractive index ≈ 1.47 → ≈ 0.68 c


def geodesic_m(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Shortest distance in metres between two (latitude, longitude) points in degrees."""
    return float(Geodesic.WGS84.Inverse(a[0], a[1], b[0], b[1])["s12"])


def propagation_s(distance_m: float, speed_fraction: float = 1.0) -> float:
    """One-way time for light at ``speed_fraction`` of c to travel ``distance_m``."""
    if speed_fraction <= 0:
        raise ValueError("speed_fraction must be > 0")
    return distance_m / (C_M_PER_S * speed_fraction)
