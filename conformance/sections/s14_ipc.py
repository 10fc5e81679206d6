"""Chapter 14, IPC: device tensors sent between processes by
``torch.multiprocessing`` share their memory, as CUDA tensors do.

A fresh interpreter runs a script that spawns a consumer
(``torch.multiprocessing.get_context("spawn")``, the start method CUDA
requires) and talks to it through two Queues. The parts, each a check:
a tensor and a view of it arrive on the same device with the same values;
the consumer's in-place write is seen by the producer (the memory is
shared, not copied); a tensor the consumer makes arrives back. The
producer first pickles the tensor as the Queue's feeder thread would, so a
backend that cannot share fails at once instead of leaving the consumer
waiting for a message that never comes. Waits poll the consumer's
liveness; nothing depends on how fast the machine is.
"""

import os
import tempfile

from .._api import Section
from .._helpers import ACCELERATOR, COPIES, DEVICE, import_line, last_line, run_children

SECTION = Section(
    chapter="14", title="IPC", requires=(DEVICE, COPIES, ACCELERATOR),
    missing="device tensors cannot be shared between processes (no torch.multiprocessing "
            "reductions for the device)")

_SCRIPT = '''
{imports}
import torch.multiprocessing as mp
from multiprocessing.reduction import ForkingPickler

NAME = {name!r}


def receive(queue, process):
    """queue.get(), polling so that a dead peer is an error, not a hang."""
    import queue as queue_module
    while True:
        try:
            return queue.get(timeout=1)
        except queue_module.Empty:
            if process is not None and not process.is_alive():
                raise RuntimeError(f"the consumer exited with code {{process.exitcode}}")


def consumer(inbox, outbox):
    tensor, view = receive(inbox, None)
    outbox.put((str(tensor.device), tensor.cpu().tolist(), str(view.device), view.cpu().tolist()))
    view.add_(100)  # writes the producer's memory
    torch.accelerator.synchronize(view.device)
    outbox.put("written")
    made = torch.arange(5, dtype=torch.float32, device=tensor.device) * 3
    outbox.put(made)
    receive(inbox, None)  # "done": the producer has read everything


state = {{}}


def part(name, function):
    try:
        function()
        print(f"PART {{name}} OK", flush=True)
    except Exception as error:
        text = str(error).splitlines()[0] if str(error) else ""
        print(f"PART {{name}} FAIL {{type(error).__name__}}: {{text}}", flush=True)
        if "process" in state:
            state["process"].terminate()
        raise SystemExit(1)


if __name__ == "__main__":
    context = mp.get_context("spawn")
    device = torch.device(NAME, torch.accelerator.device_count() - 1)
    values = torch.arange(12, dtype=torch.float32)
    tensor = values.to(device)
    view = tensor[4:10]

    def pickles():
        ForkingPickler.dumps(view)  # what the Queue's feeder thread does

    def arrives():
        inbox, outbox = context.Queue(), context.Queue()
        process = context.Process(target=consumer, args=(inbox, outbox), daemon=True)
        process.start()
        state.update(inbox=inbox, outbox=outbox, process=process)
        inbox.put((tensor, view))
        got_device, got, view_device, got_view = receive(outbox, process)
        assert got_device == str(device), f"the tensor arrived on {{got_device}}, sent from {{device}}"
        assert view_device == str(device), f"the view arrived on {{view_device}}"
        assert got == values.tolist(), f"the tensor arrived as {{got}}"
        assert got_view == values[4:10].tolist(), f"the view arrived as {{got_view}}"

    def shares():
        assert receive(state["outbox"], state["process"]) == "written"
        torch.accelerator.synchronize(device)
        want = values.clone()
        want[4:10] += 100
        assert tensor.cpu().tolist() == want.tolist(), \\
            f"the consumer's write to the view is not seen by the producer: {{tensor.cpu().tolist()}}"

    def comes_back():
        made = receive(state["outbox"], state["process"])
        assert made.device == device, f"the consumer's tensor arrived on {{made.device}}"
        assert made.cpu().tolist() == [0.0, 3.0, 6.0, 9.0, 12.0], f"it arrived as {{made.cpu().tolist()}}"
        del made
        state["inbox"].put("done")
        state["process"].join()
        assert state["process"].exitcode == 0, f"the consumer exited with {{state['process'].exitcode}}"

    part("pickles", pickles)
    part("arrives_with_the_same_values", arrives)
    part("writes_are_shared", shares)
    part("comes_back", comes_back)
    print("DONE", flush=True)
'''

_RESULTS = {}


def _run(ctx):
    key = (ctx.device, ctx.package)
    if key not in _RESULTS:
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "ipc_producer.py")
            with open(path, "w") as script:
                script.write(_SCRIPT.format(imports=import_line(ctx), name=ctx.device))
            interpreter = ctx.child_argv("")[0]
            _RESULTS[key] = run_children(ctx, [None], timeout=600, argv=[interpreter, path])[0]
    return _RESULTS[key]


def _read(ctx, name):
    code, out, err = _run(ctx)
    for part in ("pickles", name):
        lines = [line for line in out.splitlines() if line.startswith(f"PART {part} ")]
        if not lines:
            raise AssertionError(f"the producer exited {code} before {name}: {last_line(err)}")
        assert lines[0] == f"PART {part} OK", lines[0][len(part) + 6:]


@SECTION.check
def arrives_with_the_same_values(ctx):
    _read(ctx, "arrives_with_the_same_values")


@SECTION.check(missing="a device tensor sent to another process is a copy: writes are not shared "
                       "as CUDA's are")
def writes_are_shared(ctx):
    _read(ctx, "writes_are_shared")


@SECTION.check
def comes_back(ctx):
    _read(ctx, "comes_back")
    code, out, err = _run(ctx)
    assert code == 0 and "DONE" in out.split(), f"the producer exited {code}: {last_line(err)}"
