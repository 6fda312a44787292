"""Starts the kernel: python3 -m roper_kernel -f CONNECTION_FILE (what kernel.json runs)."""
from roper_kernel.kernel import RoperKernel, RoperKernelApp

RoperKernelApp.launch_instance(kernel_class=RoperKernel)
