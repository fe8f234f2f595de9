"""hexbuild: build, package, deploy and run llama.cpp's Hexagon backend."""

__version__ = "0.1.0"
