"""Plug-ins of chapters 02 and later, imported by ``torch_accinte``."""
