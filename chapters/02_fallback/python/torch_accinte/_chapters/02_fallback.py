"""Chapter 02: every ATen operator runs on accinte.

The C++ side does the work (the CPU fallback and the native kernels are
registered when ``torch_accinte._C`` loads); this module only marks the
chapter as loaded, so that ``torch_accinte.loaded_chapters`` names it.
"""
