"""The CMake commands of a Snapdragon build, the same for every engine.

They are the revision's own three commands (configure with the preset, build, install), run
from the checkout root. Two differences, both for safety:

- the install goes to ``<install-dir>.hexbuild-partial`` and hexbuild renames it into place
  after the build, so an interrupted or failed build never leaves a half-written package and a
  finished one never keeps files from an older build;
- with ``--htp`` naming fewer versions than the revision builds, the configure step adds
  ``-DCMAKE_PROJECT_ggml_INCLUDE=<build-dir>/hexbuild-htp-select.cmake`` and
  ``-DHEXBUILD_HTP_VERSIONS=...``. Upstream builds every ``libggml-htp-vNN.so`` (one
  ExternalProject ``htp-vNN`` each) as part of ``all`` and installs them all with
  ``install(FILES ...)``, which fails when one is missing. That file, included right after
  ``project(ggml)``, (1) takes the other ``htp-vNN`` targets out of ``all`` at the end of the
  ggml directory and (2) drops their ``libggml-htp-vNN.so`` from ``install(FILES)`` calls; every
  other install rule runs unchanged. A later build of every version removes both cache
  entries again (``-U``), so the build directory goes back to the revision's own behaviour.
"""

from __future__ import annotations

import shlex
from pathlib import Path

HTP_SELECT_FILE = "hexbuild-htp-select.cmake"
HTP_SELECT_VARS = ("CMAKE_PROJECT_ggml_INCLUDE", "HEXBUILD_HTP_VERSIONS")
TARGETS_FILE = "hexbuild-targets.cmake"
TARGETS_VARS = ("CMAKE_PROJECT_INCLUDE", "HEXBUILD_BUILD_TARGETS")
STAGING_SUFFIX = ".hexbuild-partial"
LOG_NAME = "hexbuild-build.log"
# The checkout must be visible where the commands run; a remote or Docker-in-Docker engine
# mounts an empty directory instead, and this exit status says so.
NO_CHECKOUT_STATUS = 97
KEEP_MARKER = "/tmp/.hexbuild-ran"

HTP_SELECT_CMAKE = r"""# Written by hexbuild for `hexbuild build --htp ...`: build and install only the NPU libraries
# of the HTP versions in HEXBUILD_HTP_VERSIONS. Included right after project(ggml) through
# CMAKE_PROJECT_ggml_INCLUDE; hexbuild removes both cache entries when it builds every version.
include_guard(GLOBAL)

# install(FILES ...) without the libggml-htp-vNN.so of the other versions; every argument of
# every other call is passed on exactly (bracket-quoted, so empty values and ';' survive).
# With --build-target too, hexbuild-targets.cmake's install() drops those files itself: CMake
# keeps one level of _install(), so two wrappers of install() cannot be stacked.
if(NOT HEXBUILD_BUILD_TARGETS)
function(install)
  if(ARGC EQUAL 0)
    _install()
    return()
  endif()
  set(_hexbuild_call "_install(")
  math(EXPR _hexbuild_last "${ARGC} - 1")
  foreach(_hexbuild_i RANGE 0 ${_hexbuild_last})
    set(_hexbuild_arg "${ARGV${_hexbuild_i}}")
    if(ARGV0 STREQUAL "FILES" AND _hexbuild_arg MATCHES "libggml-htp-(v[0-9]+)\\.so$"
       AND NOT CMAKE_MATCH_1 IN_LIST HEXBUILD_HTP_VERSIONS)
      continue()
    endif()
    string(APPEND _hexbuild_call " [==[${_hexbuild_arg}]==]")
  endforeach()
  string(APPEND _hexbuild_call ")")
  cmake_language(EVAL CODE "${_hexbuild_call}")
endfunction()
endif()

function(_hexbuild_htp_targets dir out)
  get_property(_targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  set(_found)
  foreach(_t IN LISTS _targets)
    if(_t MATCHES "^htp-v[0-9]+$")
      list(APPEND _found ${_t})
    endif()
  endforeach()
  get_property(_subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(_sub IN LISTS _subdirs)
    _hexbuild_htp_targets("${_sub}" _more)
    list(APPEND _found ${_more})
  endforeach()
  set(${out} ${_found} PARENT_SCOPE)
endfunction()

# At the end of the ggml directory every htp-vNN target exists: keep the selected ones in `all`.
function(_hexbuild_htp_select)
  _hexbuild_htp_targets("${CMAKE_CURRENT_SOURCE_DIR}" _all)
  foreach(_v IN LISTS HEXBUILD_HTP_VERSIONS)
    if(NOT "htp-${_v}" IN_LIST _all)
      message(FATAL_ERROR "hexbuild: this revision has no NPU library target htp-${_v} (it has: ${_all})")
    endif()
  endforeach()
  set(_skipped)
  foreach(_t IN LISTS _all)
    string(REPLACE "htp-" "" _v "${_t}")
    if(NOT _v IN_LIST HEXBUILD_HTP_VERSIONS)
      set_property(TARGET ${_t} PROPERTY EXCLUDE_FROM_ALL TRUE)
      list(APPEND _skipped ${_v})
    endif()
  endforeach()
  message(STATUS "hexbuild: building the NPU libraries for ${HEXBUILD_HTP_VERSIONS} only (not ${_skipped})")
endfunction()
cmake_language(DEFER CALL _hexbuild_htp_select)
"""


TARGETS_CMAKE = r"""# Written by hexbuild for `hexbuild build --build-target ...`: only some CMake targets are built,
# and `cmake --install` must install those and skip what was not built. Included after every
# project() through CMAKE_PROJECT_INCLUDE, it marks every install(TARGETS ...) OPTIONAL (a
# missing file is then skipped); every other install() call is passed on exactly, except that
# with `--htp` naming fewer versions (HEXBUILD_HTP_VERSIONS) install(FILES ...) also leaves out the
# libggml-htp-vNN.so of the other versions (the one install() wrapper for both selections).
# Run with `cmake -P` after the install, it copies a requested program the tree has no install
# rule for (a test program, say) from the build directory into the staging install.
if(CMAKE_SCRIPT_MODE_FILE)
  foreach(_t IN LISTS HEXBUILD_BUILD_TARGETS)
    if(EXISTS "${HEXBUILD_BUILD_BIN}/${_t}" AND NOT IS_DIRECTORY "${HEXBUILD_BUILD_BIN}/${_t}"
       AND NOT EXISTS "${HEXBUILD_STAGING}/bin/${_t}")
      file(COPY "${HEXBUILD_BUILD_BIN}/${_t}" DESTINATION "${HEXBUILD_STAGING}/bin")
      message(STATUS "hexbuild: ${_t} has no install rule in this tree; copied from ${HEXBUILD_BUILD_BIN}")
    endif()
  endforeach()
  return()
endif()
include_guard(GLOBAL)
function(install)
  if(ARGC EQUAL 0)
    _install()
    return()
  endif()
  set(_hexbuild_call "_install(")
  set(_hexbuild_names FALSE)
  math(EXPR _hexbuild_last "${ARGC} - 1")
  foreach(_hexbuild_i RANGE 0 ${_hexbuild_last})
    set(_hexbuild_arg "${ARGV${_hexbuild_i}}")
    if(HEXBUILD_HTP_VERSIONS AND ARGV0 STREQUAL "FILES" AND _hexbuild_arg MATCHES "libggml-htp-(v[0-9]+)\\.so$"
       AND NOT CMAKE_MATCH_1 IN_LIST HEXBUILD_HTP_VERSIONS)
      continue()
    endif()
    if(_hexbuild_i EQUAL 0 AND _hexbuild_arg STREQUAL "TARGETS")
      set(_hexbuild_names TRUE)
    elseif(_hexbuild_names AND _hexbuild_i GREATER 1 AND _hexbuild_arg MATCHES "^(EXPORT|RUNTIME_DEPENDENCIES|RUNTIME_DEPENDENCY_SET|ARCHIVE|LIBRARY|RUNTIME|OBJECTS|FRAMEWORK|BUNDLE|PRIVATE_HEADER|PUBLIC_HEADER|RESOURCE|FILE_SET|CXX_MODULES_BMI|INCLUDES|DESTINATION|PERMISSIONS|CONFIGURATIONS|COMPONENT|NAMELINK_COMPONENT|OPTIONAL|EXCLUDE_FROM_ALL|NAMELINK_ONLY|NAMELINK_SKIP)$")
      string(APPEND _hexbuild_call " OPTIONAL")
      set(_hexbuild_names FALSE)
    endif()
    string(APPEND _hexbuild_call " [==[${_hexbuild_arg}]==]")
  endforeach()
  if(_hexbuild_names)
    string(APPEND _hexbuild_call " OPTIONAL")
  endif()
  string(APPEND _hexbuild_call ")")
  cmake_language(EVAL CODE "${_hexbuild_call}")
endfunction()
"""


def configure_argv(*, preset: str, build_dir: str, root: str, htp_subset: list[str] | None,
                   reset_selection: bool, build_type: str | None, cmake_args: list[str],
                   targets: list[str] | None = None, reset_targets: bool = False) -> list[str]:
    argv = ["cmake", "--preset", preset, "-B", build_dir]
    if build_type:
        argv.append(f"-DCMAKE_BUILD_TYPE={build_type}")
    if htp_subset:
        argv += [f"-DCMAKE_PROJECT_ggml_INCLUDE={root.rstrip('/')}/{build_dir}/{HTP_SELECT_FILE}",
                 f"-DHEXBUILD_HTP_VERSIONS={';'.join(htp_subset)}"]
    elif reset_selection:
        argv += [f"-U{v}" for v in HTP_SELECT_VARS]
    if targets:
        argv += [f"-DCMAKE_PROJECT_INCLUDE={root.rstrip('/')}/{build_dir}/{TARGETS_FILE}",
                 f"-DHEXBUILD_BUILD_TARGETS={';'.join(targets)}"]
    elif reset_targets:
        argv += [f"-U{v}" for v in TARGETS_VARS]
    return argv + list(cmake_args)


def build_argv(build_dir: str, targets: list[str] | None = None) -> list[str]:
    return ["cmake", "--build", build_dir] + (["--target", *targets] if targets else [])


def collect_argv(build_dir: str, install_dir: str, targets: list[str]) -> list[str]:
    """After the install: requested programs without an install rule, copied from the build."""
    return ["cmake", f"-DHEXBUILD_BUILD_TARGETS={';'.join(targets)}", f"-DHEXBUILD_BUILD_BIN={build_dir}/bin",
            f"-DHEXBUILD_STAGING={install_dir}{STAGING_SUFFIX}", "-P", f"{build_dir}/{TARGETS_FILE}"]


def install_argv(build_dir: str, install_dir: str) -> list[str]:
    return ["cmake", "--install", build_dir, "--prefix", install_dir + STAGING_SUFFIX]


def script(commands: list[list[str]], *, keep_marker: bool = False, prelude: list[str] | None = None) -> str:
    """The POSIX shell script the engine runs: stop at the first failure, echo each command.
    ``prelude``: shell lines that put the checkout in place first (copy mode)."""
    lines = []
    if keep_marker:
        # A kept container started again idles instead of building again, for `docker exec`.
        lines += [f"if [ -e {KEEP_MARKER} ]; then exec sleep infinity; fi", f": > {KEEP_MARKER}"]
    if prelude:
        lines += ["set -e", *prelude]
    lines += [f'[ -f CMakeLists.txt ] || {{ echo "hexbuild: the checkout is not visible at $PWD" >&2; '
              f"exit {NO_CHECKOUT_STATUS}; }}", "set -ex"]
    lines += [shlex.join(c) for c in commands]
    return "\n".join(lines) + "\n"


def cache_has_selection(build_dir: Path, names: tuple[str, ...] = HTP_SELECT_VARS) -> bool:
    """Whether an earlier `--htp` (or, with ``names=TARGETS_VARS[1:]``, `--build-target`) build
    left its selection in this build directory's cache."""
    try:
        text = (build_dir / "CMakeCache.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(line.startswith(f"{v}:") for line in text.splitlines() for v in names)
