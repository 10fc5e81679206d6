"""Chapter 06: ``import torch`` alone brings up the accinte device.

Nothing to register here: the chapter's work happens before this package is
imported, in the ``torch.backends`` entry point (``_torch_accinte_autoload``,
beside the package) that PyTorch runs at the end of ``import torch``. This
module marks the chapter as loaded, so that
``torch_accinte.loaded_chapters`` names it.
"""
