"""Chapter 04: autograd on accinte.

The C++ side does the work (the autograd kernels and the new ``accinte``
operators are registered when ``torch_accinte._C`` loads); this module only
marks the chapter as loaded, so that ``torch_accinte.loaded_chapters`` names
it.
"""
