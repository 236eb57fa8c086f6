"""Compiled code: numba and the ISA-L CRC (jit), the compiled commitlog walk (fastscan) and the
compiled append kernels (appendkernels).

Kernels work on numpy arrays over mapped bytes; the layers above hand them their buffers.
numba loads only when a module here is imported, so commands that compile nothing never pay
for it.
"""
