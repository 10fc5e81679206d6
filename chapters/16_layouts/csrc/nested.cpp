// Chapter 16, nested tensors: being written.
