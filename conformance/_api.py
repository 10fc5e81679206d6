"""What a conformance check is: the kit's only shared vocabulary.

A *section* is one integration mechanism, named as the guide's chapter that
adds it. A *check* is a function ``check(ctx)`` that exercises the
mechanism through public PyTorch APIs and the device name only, compares
with the CPU or with documented CUDA behaviour, and raises on a
difference. Each check belongs to one chapter (its section's unless it
says otherwise): the stage contract is that a check passes on stage NN
exactly when its chapter is <= NN.

A check may *require* other checks (``requires=``, on the section or the
check): what it cannot work without, such as a device that tensors can be
copied to. When a required check does not pass, the report shows the
check as *blocked by* it instead of failed, so that one missing mechanism
reads as one root cause, not as a failure of every mechanism built on it.
Checks use PyTorch's device-generic APIs (``torch.accelerator``,
``torch.Stream``, ``torch.Event``, ``torch.accelerator.memory``) wherever
PyTorch has one; whether ``torch.NAME`` mirrors ``torch.cuda``'s names is
the parity section's question alone (``sections/s00_parity.py``).

Nothing here, and nothing in ``sections/``, may import ``torch_accinte``
or know the name ``accinte``: the kit runs against any PrivateUse1 backend
(``--device NAME --package PKG``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable, Optional

import torch


class Skip(Exception):
    """Raised by a check that cannot run here (a reason, not a failure):
    for example a distributed check on a machine with one CPU."""


@dataclasses.dataclass(frozen=True)
class Context:
    """What a check is given."""

    #: The device type the backend renamed PrivateUse1 to (``"accinte"``).
    device: str
    #: The Python package imported before the checks run, or None when the
    #: backend loads with ``import torch`` alone (autoload).
    package: Optional[str]

    def dev(self, index: int = 0) -> torch.device:
        """``torch.device(NAME, index)``."""
        return torch.device(self.device, index)

    @property
    def module(self):
        """The device module, ``torch.NAME`` (None if it is not registered)."""
        return getattr(torch, self.device, None)

    def child_env(self) -> dict:
        """The environment for a fresh interpreter that must see the same
        backend as this one: this process's ``sys.path`` as PYTHONPATH."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        return env

    def child_argv(self, code: str) -> list:
        """``[python, -c, code]`` for a fresh interpreter; ``code`` imports
        the package itself if it needs it (see :attr:`package`)."""
        return [sys.executable, "-c", code]


@dataclasses.dataclass
class Check:
    """One check, as registered by :meth:`Section.check`."""

    name: str
    function: Callable[[Context], None]
    chapter: str
    #: One line: what is missing in the backend when this check fails.
    missing: str
    #: How many times the kit's deadline (``--timeout``) the check may run:
    #: more than 1 for a check whose work is long by nature, so that a
    #: loaded machine does not pass its deadline where nothing hangs.
    deadlines: int = 1
    #: The checks (``"sNN_file.check"``) this one needs: when one of them
    #: does not pass, a failure of this check is reported as *blocked by*
    #: it, not as a failure of its own mechanism.
    requires: tuple = ()


@dataclasses.dataclass
class Section:
    """One mechanism: a chapter number ("01".."14", or "real" for the
    real-use section), a title, and the line a failure prints."""

    chapter: str
    title: str
    missing: str
    checks: list = dataclasses.field(default_factory=list)
    #: The checks every check of this section needs (see
    #: :attr:`Check.requires`); a check never requires itself.
    requires: tuple = ()

    def check(self, function=None, *, chapter: Optional[str] = None,
              missing: Optional[str] = None, deadlines: int = 1,
              requires: tuple = ()):
        """Registers ``function`` as a check of this section. ``chapter``:
        the chapter whose mechanism it needs, when not the section's (a
        real-use check, or a stream check in the memory section);
        ``missing``: its own failure line, when the section's says too
        little; ``deadlines``: how many of the kit's deadlines it may run
        (see :attr:`Check.deadlines`); ``requires``: the checks it needs
        besides the section's (see :attr:`Check.requires`)."""

        def register(f):
            # NB: the kit's plan drops a check from its own requirements
            # (a section's requirement may be one of its own checks).
            needs = tuple(dict.fromkeys((*self.requires, *requires)))
            self.checks.append(Check(
                name=f.__name__, function=f,
                chapter=chapter or self.chapter,
                missing=missing or self.missing, deadlines=deadlines,
                requires=needs))
            return f

        return register(function) if function is not None else register
