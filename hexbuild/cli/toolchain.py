"""hexbuild toolchain: toolchain images hexbuild makes itself."""

from __future__ import annotations


import typer

toolchain_app = typer.Typer(help="Toolchain images hexbuild makes itself (the open AArch64 Linux toolchain, "
                                  "the kernel check's emulator).",
                            no_args_is_help=True)

# The options every image command takes (both recipes are made the same way: recipe_image.py).
METHOD = typer.Option("auto", "--method", metavar="auto|dockerfile|rootfs",
                      help="dockerfile (engine with a network), rootfs (debootstrap here, then import; "
                           "needs root) or auto (by whether the engine has a bridge network).")
REBUILD = typer.Option(False, "--rebuild", help="Make the image again, ignoring the engine's copy "
                                                "and the cached root filesystem.")
PRINT_REF = typer.Option(False, "--print", help="Print the image reference the recipe gives; no engine needed.")


@toolchain_app.command("open")
def open_toolchain(
    os_name: str = typer.Option("linux", "--os", metavar="linux",
                                help="Target OS; the open toolchain builds Linux programs only."),
    method: str = METHOD,
    rebuild: bool = REBUILD,
    print_ref: bool = PRINT_REF,
) -> None:
    """Create (or reuse) the open AArch64 Linux toolchain image from Debian packages only."""
    from ..errors import UsageError
    from ..toolchain import open_image
    from ..ui import ui

    if os_name != "linux":
        raise UsageError(f"--os {os_name}: the open toolchain builds Linux programs only",
                         hint="Android builds need the vendor image (the NDK and the Hexagon SDK): "
                              "hexbuild build --os android")
    rec = open_image.recipe()
    if print_ref:
        ui.result({"image": rec.image, "repository": open_image.REPOSITORY, "tag": rec.tag,
                   "recipe_hash": rec.hash, "packages": rec.packages}, rec.image)
        return
    _make_image(method, lambda client: open_image.ensure_open_image(client, method=method, rebuild=rebuild))


@toolchain_app.command("kernels")
def kernels_toolchain(
    method: str = METHOD,
    rebuild: bool = REBUILD,
    print_ref: bool = PRINT_REF,
) -> None:
    """Create (or reuse) the kernel check's image: LLVM 21 for Hexagon and qemu-hexagon built from Debian's
    QEMU source with hexbuild's HVX patches (what `hexbuild test kernels` runs in)."""
    from ..kernels import image as kimage
    from ..ui import ui

    rec = kimage.recipe()
    if print_ref:
        ui.result({"image": rec.image, "repository": kimage.REPOSITORY, "tag": rec.tag, "recipe_hash": rec.hash,
                   "packages": rec.packages, "qemu_version": kimage.QEMU_VERSION, "patches": sorted(kimage.patches())},
                  rec.image)
        return
    _make_image(method, lambda client: kimage.ensure_kernel_image(client, method=method, rebuild=rebuild))


def _make_image(method: str, ensure) -> None:
    from ..errors import UsageError
    from ..toolchain.engine import DockerEngine
    from ..toolchain.recipe_image import METHODS
    from ..ui import ui

    if method not in METHODS:  # before the engine is asked: bad input is one line whatever the engine's state
        raise UsageError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    engine = DockerEngine.connect()
    try:
        result = ensure(engine.client)
    except KeyboardInterrupt:
        from ..errors import Interrupted

        raise Interrupted("interrupted; the partial root filesystem was removed") from None
    finally:
        engine.close()
    how = {"dockerfile": "built from the Dockerfile", "rootfs": "built from a debootstrap root filesystem",
           "cache": "imported from the cached root filesystem", None: "already on the engine"}[result.method]
    ui.result(result.to_json(), f"{result.image} ({result.status}: {how}; {result.seconds:.1f}s)")


def register(app: typer.Typer) -> None:
    app.add_typer(toolchain_app, name="toolchain")
