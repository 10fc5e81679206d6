"""Chapter 16: layouts (sparse, quantized and nested tensors).

The chapter has no Python of its own: its kernels register when the
backend's library loads. This module marks the chapter as part of the
stage (``torch_accinte.loaded_chapters``).
"""
