// Chapter 16, quantized tensors: being written.
