"""Chapter 15: graphs used wrongly get a clear error, never a hang, a crash
or silently stale data."""

import pytest
import torch
import torch_accinte  # noqa: F401


def test_replay_without_a_capture():
    graph = torch.accinte.AccinteGraph()
    with pytest.raises(RuntimeError, match="replay without a preceding successful capture"):
        graph.replay()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        graph.pool()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        torch.accelerator.Graph().replay()


def test_capture_on_the_default_stream_is_refused():
    graph = torch.accinte.AccinteGraph()
    with pytest.raises(RuntimeError, match="must be captured on a non-default stream"):
        graph.capture_begin()
    with pytest.raises(RuntimeError, match="must be captured on a non-default stream"):
        with torch.accelerator.Graph():
            pass
    # Nothing was left capturing: work on the default stream runs.
    assert torch.equal((torch.ones(2, device="accinte") + 1).cpu(), torch.full((2,), 2.0))


def test_a_synchronize_inside_a_capture_raises_where_it_is_called():
    x = torch.ones(3, device="accinte")
    graph = torch.accinte.AccinteGraph()
    with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
        with torch.accinte.graph(graph):
            x.add_(1)
            torch.accinte.synchronize()
    assert not torch.accinte.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        graph.replay()
    # Nothing of the broken capture ran, and the device works.
    assert torch.equal(x.cpu(), torch.ones(3))


def test_an_item_inside_a_capture_raises_and_capture_end_names_the_rule():
    x = torch.ones(3, device="accinte")
    graph = torch.accinte.AccinteGraph()
    with torch.accinte.stream(torch.accinte.Stream()):
        graph.capture_begin()
        with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
            x.sum().item()
        with pytest.raises(RuntimeError, match="invalidated by an operation that cannot be captured"):
            graph.capture_end()
    graph.reset()


def test_capture_must_end_on_its_stream():
    graph = torch.accinte.AccinteGraph()
    stream = torch.accinte.Stream()
    with torch.accinte.stream(stream):
        graph.capture_begin()
        with torch.accinte.stream(torch.accinte.Stream()):
            with pytest.raises(RuntimeError, match="Capture must end on the same stream it began on"):
                graph.capture_end()
        graph.capture_end()
    assert not torch.accinte.is_current_stream_capturing()


def test_capturing_twice_and_bad_modes():
    graph = torch.accinte.AccinteGraph()
    with torch.accinte.graph(graph):
        torch.ones(1, device="accinte").add_(1)
    with pytest.raises(RuntimeError, match="already holds a capture"):
        with torch.accinte.graph(graph):
            pass
    graph.reset()
    with pytest.raises(RuntimeError, match="capture_error_mode must be"):
        with torch.accinte.graph(graph, capture_error_mode="strict"):
            pass
    assert not torch.accinte.is_current_stream_capturing()


def test_instantiate_needs_a_kept_graph_and_debug_dump_needs_debug_mode(tmp_path):
    graph = torch.accinte.AccinteGraph()
    with torch.accinte.graph(graph):
        torch.ones(1, device="accinte").add_(1)
    with pytest.raises(RuntimeError, match="keep_graph=True"):
        graph.instantiate()
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        graph.debug_dump(str(tmp_path / "g.dot"))
    debug = torch.accinte.AccinteGraph()
    debug.enable_debug_mode()
    with torch.accinte.graph(debug):
        torch.ones(4, device="accinte").mul_(2)
    debug.debug_dump(str(tmp_path / "g.dot"))
    assert "digraph" in (tmp_path / "g.dot").read_text()


def test_a_random_operator_with_a_generator_of_another_device():
    generator = torch.Generator(device="accinte:1")
    graph = torch.accinte.AccinteGraph()
    with pytest.raises(RuntimeError, match="cannot draw for a tensor on"):
        with torch.accinte.graph(graph):
            torch.rand(2, device="accinte", generator=generator)
    assert not torch.accinte.is_current_stream_capturing()


def test_empty_cache_inside_a_capture_is_refused_and_loses_nothing():
    x = torch.ones(3, device="accinte")
    reserved = torch.accinte.memory_reserved()
    graph = torch.accinte.AccinteGraph()
    with pytest.raises(RuntimeError, match="empty_cache.. cannot free memory while device 0 captures"):
        with torch.accinte.graph(graph):
            x.add_(1)
            torch.accinte.empty_cache()
    assert not torch.accinte.is_current_stream_capturing()
    assert torch.accinte.memory_reserved() <= reserved
    torch.accinte.empty_cache()  # after the capture, it frees again
    assert torch.equal(x.cpu(), torch.ones(3))
