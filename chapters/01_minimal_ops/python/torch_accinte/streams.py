"""``torch.accinte.streams``: the stream and event classes, under the
submodule name ``torch.cuda.streams`` has (``from torch.accinte.streams
import Stream``)."""

from torch_accinte.device_module import Event, Stream

__all__ = ["Event", "Stream"]
