"""Run profiles: ``smoke`` (CI, seconds), ``cpu`` (the default: real phenomena at small scale),
``full`` (the paper's protocol).

Each experiment keeps its protocol as one table, ``{"smoke": ..., "cpu": ..., "full": ...}``,
in its own module; :func:`select` picks the entry and names the valid choices on a bad one.
"""

from __future__ import annotations

import copy

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


def check_tiny(tiny) -> bool:
    """``tiny`` if it is a boolean (or 0/1). A string is refused, not judged by its truth: papermill
    passes ``-p tiny no`` as the string "no", which Python would take for on."""
    if isinstance(tiny, bool) or (isinstance(tiny, int) and tiny in (0, 1)):
        return bool(tiny)
    raise ValueError(f"tiny must be True or False, got {tiny!r} (papermill: -p tiny True; make: TINY=1/0)")


def protocols(table: dict, caps=None):
    """A section's ``protocol(profile, tiny=False)``: :func:`protocol_of` its ``table`` (with
    ``caps``, what TINY=1 caps in the full protocol)."""

    def protocol(profile: str, tiny: bool = False) -> dict:
        """A copy of the profile's protocol (``tiny``, TINY=1, only with ``full``)."""
        return protocol_of(table, profile, tiny, caps)

    return protocol


def protocol_of(table: dict, profile: str, tiny: bool = False, caps=None) -> dict:
    """A deep copy of ``table[profile]`` (a caller may change it freely): every section's protocol.
    ``tiny`` (TINY=1) goes with the full profile only, and then ``caps(copy)`` (if given) gives the
    capped protocol; a section whose runs are what TINY caps leaves that to
    :func:`quadnn_paper.engine.tiny.capped`."""
    if check_tiny(tiny) and profile != "full":
        raise ValueError(f"tiny=True caps the full profile; use it with profile='full', not {profile!r}")
    P = copy.deepcopy(select(table, profile))
    return caps(P) if tiny and caps is not None else P


def data_text(words: str, tiny: bool = False) -> str:
    """A section's data in ``words``; at TINY=1, the tiny generated data written in that format."""
    return f"TINY=1: tiny generated data in the {words} format" if tiny else words
