"""Starts the kernel: python3 -m roper_kernel -f CONNECTION_FILE (what kernel.json runs)."""
from ipykernel.kernelapp import IPKernelApp

from roper_kernel.kernel import RoperKernel

IPKernelApp.launch_instance(kernel_class=RoperKernel)
