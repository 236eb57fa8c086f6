"""Compiled code: numba and the ISA-L CRC (jit), the compiled commitlog walk (fastscan) and the
compiled append kernels (appendkernels).

Kernels work on numpy arrays over mapped bytes; the layers above hand them their buffers.
numba loads only when a kernel must be compiled (jit.load: the JIT fallback where the kernels
were not built ahead of time), so commands never pay for it where they were.
"""
