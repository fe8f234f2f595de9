"""The kernel check's image recipe (shipped as ``hexbuild.kernel_recipe``; see
hexbuild.kernels.image)."""
