"""Jinja2 templates for device scripts and commands (shipped as hexbuild.templates)."""
