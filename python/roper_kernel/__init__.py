"""roper's Jupyter kernel: a wrapper kernel (ipykernel's Kernel) that drives `roper --kernel`.

kernel.py is the kernel, spec.py writes its kernelspec (kernel.json), __main__.py starts it
(`python3 -m roper_kernel -f CONNECTION_FILE`, as kernel.json says). docs/notebooks.md.
"""
