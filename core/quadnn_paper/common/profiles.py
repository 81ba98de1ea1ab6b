"""Run profiles: ``smoke`` (CI, seconds), ``cpu`` (the default: real phenomena at small scale),
``full`` (the paper's protocol).

Each experiment keeps its protocol as one table, ``{"smoke": ..., "cpu": ..., "full": ...}``,
in its own module; :func:`select` picks the entry and names the valid choices on a bad one.
"""
from __future__ import annotations

PROFILES = ("smoke", "cpu", "full")


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    return profile


def select(table: dict, profile: str):
    """Return ``table[profile]`` after checking ``profile`` and that the table covers all profiles."""
    check_profile(profile)
    missing = [p for p in PROFILES if p not in table]
    if missing:
        raise KeyError(f"protocol table lacks profiles {missing}")
    return table[profile]
