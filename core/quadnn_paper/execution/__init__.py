"""Execution: where a section's runs train (inline, this machine's GPUs/CPUs, SLURM), and the plan.

:func:`run_section` is what a notebook calls (a section's work through :func:`execute_work`); the :mod:`.runners` package (inline, local, slurm)
submits keyed jobs; ``python -m quadnn_paper.execution.status`` prints the plan (``make status``).
This layer imports the engine and the sections, never the reverse. Importing it does not import
torch (the engine is imported where it is used), so a job process starts quickly.
"""

from .execute import execute, execute_work, pending_note
from .run import run_section
from .runners import RUNNERS, Job, make_runner
from .sections import SECTIONS, SectionOutputs

__all__ = [
    "execute",
    "execute_work",
    "pending_note",
    "RUNNERS",
    "Job",
    "make_runner",
    "SECTIONS",
    "SectionOutputs",
    "run_section",
]
