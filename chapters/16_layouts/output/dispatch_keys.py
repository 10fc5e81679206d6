"""The dispatch keys of one accinte tensor in each layout.

The same 3 x 3 matrix, made dense, sparse (COO and CSR), quantized and
nested (strided and jagged) on the device. Each line shows the layout, the
dtype and the keys the dispatcher reads from the tensor, highest first:
the layout's functionality key combined with the device's backend bit.
"""

import warnings

import torch
import torch_accinte  # noqa: F401

# NB: the prototype and deprecation warnings of nested and quantized
# tensors are PyTorch's, printed once per process; they are not the point.
warnings.simplefilter("ignore", UserWarning)

x = torch.arange(9.0, device="accinte").reshape(3, 3)
tensors = {
    "dense": x,
    "sparse COO": x.to_sparse(),
    "sparse CSR": x.to_sparse_csr(),
    "quantized": torch.quantize_per_tensor(x, 0.5, 0, torch.qint8),
    "nested (strided)": torch.nested.nested_tensor([x, x[:2]]),
    "nested (jagged)": torch.nested.nested_tensor([x, x[:2]], layout=torch.jagged),
}
for name, tensor in tensors.items():
    keys = str(torch._C._dispatch_keys(tensor))
    print(f"{name:17} {str(tensor.layout):17} {str(tensor.dtype):14} {keys}")
