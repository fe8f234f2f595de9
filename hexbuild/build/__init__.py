"""`hexbuild build`: the revision's Snapdragon build, run in its pinned toolchain image.

Plain functions, in the order a build goes, one module each:

- ``options``: ``BuildOptions`` and the checks of single values;
- ``plan``: ``plan_build(options)`` reads the checkout (hexbuild.source) and decides everything without
  side effects: preset, build and install directories, HTP versions, image, the CMakeUserPresets
  handling and the CMake commands. ``dry_run`` and ``container_spec`` need no daemon.
- ``container``: the container spec for a plan and ``dry_run``;
- ``run``: ``run_build(options)`` runs that plan on an engine (Docker through the SDK, or ``local``),
  streams the log to ``<build-dir>/hexbuild-build.log``, moves the finished install into place,
  verifies the package and writes its manifest (``publish``). It prints progress but never the final
  result: the CLI (or the release command) renders the ``BuildResult``.

Defaults come from the checkout: the image it pins for the OS (docs, then CI), the preset
``arm64-<os>-snapdragon-<release|debug>`` (``relwithdebinfo``: the revision's own preset when it
has one, else the release preset with ``-DCMAKE_BUILD_TYPE=RelWithDebInfo``), and the build and
install directories its docs use. For Linux, when the docs give it the same build directory as
Android (as llama.cpp's do), hexbuild appends ``-linux`` so the two never share a CMake cache;
without Linux docs it uses ``build-snapdragon-linux`` and ``pkg-snapdragon-linux/llama.cpp``.
"""

from __future__ import annotations


from .container import container_spec, default_user, dry_run, local_command, resolve_transfer
from .options import BUILD_TYPES, DEFAULT_DIRS, OSES, RESERVED_ENV, BuildOptions
from .plan import BuildPlan, plan_build
from .publish import MANIFEST_FACTS, BuildResult, image_is_older, revision_facts
from .run import run_build

__all__ = ["BUILD_TYPES", "DEFAULT_DIRS", "MANIFEST_FACTS", "OSES", "RESERVED_ENV", "BuildOptions", "BuildPlan",
           "BuildResult", "container_spec", "default_user", "dry_run", "image_is_older", "local_command",
           "plan_build", "resolve_transfer", "revision_facts", "run_build"]
