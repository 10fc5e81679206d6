"""A producer and a consumer of accinte tensors, as a user writes them: a
``torch.multiprocessing`` Queue each way, a consumer started with
``spawn``.

The consumer receives a view of the producer's tensor, writes through it,
and sends a tensor of its own back; the producer prints what each side
saw. Everything is printed by the producer, in the order of the messages.
"""

import torch
import torch.multiprocessing as mp
import torch_accinte  # noqa: F401  (autoload does it from stage 06 on)


def consumer(inbox, outbox):
    row = inbox.get()  # maps the producer's memory, waits for its writes
    outbox.put(f"consumer: received {row.device}, offset "
               f"{row.storage_offset()}, {row.cpu().tolist()}")
    row.mul_(10)  # writes the producer's memory
    torch.accinte.synchronize()  # done before the producer is told
    outbox.put("consumer: multiplied it by 10")
    outbox.put(torch.arange(3.0, device="accinte:1") + 100)
    del row  # released: the producer may reuse the memory
    inbox.get()  # the producer has received (and dropped) our tensor


if __name__ == "__main__":
    context = mp.get_context("spawn")
    inbox, outbox = context.Queue(), context.Queue()
    process = context.Process(target=consumer, args=(inbox, outbox))
    process.start()

    tensor = torch.arange(6.0, device="accinte").reshape(2, 3)
    inbox.put(tensor[1])  # a view: the whole storage travels, with its offset
    print(outbox.get())
    print(outbox.get())
    print("producer: its tensor is now", tensor.cpu().tolist())
    back = outbox.get()
    print(f"producer: received {back.device}, {back.cpu().tolist()}")
    del back
    inbox.put(None)
    process.join()
    torch.accinte.ipc_collect()
    print("consumer exit code:", process.exitcode)
