"""Chapter 09: ``torch.accinte.record_fallbacks()`` finds the operators that
take the CPU fallback, however they got there, and nothing else."""

import threading

import pytest
import torch
import torch.nn.functional as F


def test_counts_the_calls_of_each_operator_that_takes_the_fallback():
    x = torch.rand(4, 4).to("accinte")
    with torch.accinte.record_fallbacks() as record:
        for _ in range(3):
            torch.cos(x)  # no accinte kernel: the CPU fallback
        x + x  # native
        torch.atan2(x, x)
    assert record.calls == {"aten::cos.out": 3, "aten::atan2.out": 1}
    assert all(row.seconds > 0 for row in record.rows)


def test_operators_routed_to_the_fallback_by_name_are_counted():
    # Chapter 02 registers the fallback itself as the accinte kernel of
    # mse_loss, so it never reaches chapter 01's global fallback.
    x = torch.rand(3, 2).to("accinte")
    with torch.accinte.record_fallbacks() as record:
        F.mse_loss(x, x * 2)
    assert record.calls == {"aten::mse_loss": 1}


def test_backward_and_other_threads_are_recorded():
    x = torch.rand(5).to("accinte").requires_grad_()
    with torch.accinte.record_fallbacks() as record:
        # The backward of cos (sin) runs on autograd's thread for accinte.
        torch.cos(x).sum().backward()
        worker = threading.Thread(target=lambda: torch.atan(x.detach()))
        worker.start()
        worker.join()
    assert "aten::sin" in record.calls or "aten::sin.out" in record.calls
    assert record.calls.get("aten::atan.out") == 1


def test_nothing_is_recorded_outside_the_block():
    x = torch.rand(4).to("accinte")
    with torch.accinte.record_fallbacks() as record:
        pass
    torch.cos(x)
    assert record.calls == {} and record.rows == []


def test_one_recording_at_a_time():
    with torch.accinte.record_fallbacks():
        with pytest.raises(RuntimeError, match="a fallback recording is already running"):
            with torch.accinte.record_fallbacks():
                pass
    # The refused one did not stop the first; a new one can start.
    with torch.accinte.record_fallbacks() as record:
        torch.cos(torch.rand(2).to("accinte"))
    assert record.calls == {"aten::cos.out": 1}


def test_an_exception_still_ends_the_recording():
    x = torch.rand(2).to("accinte")
    with pytest.raises(ZeroDivisionError):
        with torch.accinte.record_fallbacks() as record:
            torch.cos(x)
            1 / 0
    assert record.calls == {"aten::cos.out": 1}
    with torch.accinte.record_fallbacks():
        pass


def test_table():
    x = torch.rand(2).to("accinte")
    with torch.accinte.record_fallbacks() as record:
        torch.cos(x)
        torch.cos(x)
        torch.atan(x)
    lines = record.table().splitlines()
    assert lines[0].split() == ["operator", "calls", "ms"]
    assert {line.split()[0]: line.split()[1] for line in lines[1:-1]} == {
        "aten::cos.out": "2", "aten::atan.out": "1"}
    assert lines[-1].split()[:2] == ["total", "3"]
    assert str(record) == record.table()
