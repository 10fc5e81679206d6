// Chapter 16, sparse tensors: being written.
