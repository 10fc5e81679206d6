"""Chapter 16: layouts (sparse, quantized and nested tensors)."""
