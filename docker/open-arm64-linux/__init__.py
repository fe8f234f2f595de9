"""The recipe of the open AArch64 Linux toolchain image (shipped as hexbuild.open_recipe; read by
hexbuild.toolchain.open_image)."""
