"""``torch.accinte`` against ``torch.cuda``: the names of tools/cuda_names.py.

The list there classifies every public name of ``torch.cuda``; these tests
hold it to the installed release's ``torch.cuda`` and to the stage's
``torch.accinte``: an applicable name exists from its chapter's stage on and
not before.
"""

import pytest
import torch

from conftest import load_tool, stage_has


cuda_names = load_tool("cuda_names")


def test_every_torch_cuda_name_is_classified():
    """A name that a new release adds to ``torch.cuda`` must be classified."""
    # NB: the submodules that torch.cuda imports only on use are classified
    # too, so that tests importing them earlier cannot change the answer.
    assert cuda_names.unclassified(cuda_names.public_names(torch.cuda)) == []


def test_applicable_names_exist_on_torch_cuda():
    """The applicable list holds names of torch.cuda, not typos."""
    assert sorted(cuda_names.APPLICABLE.keys() - cuda_names.public_names(torch.cuda)) == []


def _params(present: bool):
    return [pytest.param(name, id=name)
            for name, chapter in sorted(cuda_names.APPLICABLE.items())
            if stage_has(chapter) == present]


@pytest.mark.parametrize("name", _params(present=True))
def test_applicable_name_exists_on_torch_accinte(name):
    """Every applicable name of a loaded chapter is on torch.accinte (under
    the device's name where CUDA's has "CUDA" in it)."""
    assert hasattr(torch.accinte, cuda_names.counterpart(name))


@pytest.mark.parametrize("name", _params(present=False))
def test_name_of_a_later_chapter_does_not_exist_yet(name):
    """A name exists only from the stage of the chapter that adds it on."""
    assert not hasattr(torch.accinte, cuda_names.counterpart(name))
