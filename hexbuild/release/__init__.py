"""`hexbuild release`: build → verify → package (per OS) → checksums → deploy → smoke.

core.py runs the stages and writes the report, stages.py holds each stage, options.py what a
release is asked to do, report.py the report's parts and its human form."""

from .core import STAGE_ERRORS, Release, run_release
from .options import MANIFEST, OSES, REPORT, SCHEMA, SUMS, ReleaseOptions

__all__ = ["MANIFEST", "OSES", "REPORT", "SCHEMA", "STAGE_ERRORS", "SUMS", "Release", "ReleaseOptions",
           "run_release"]
