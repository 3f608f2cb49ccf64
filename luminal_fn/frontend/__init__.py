"""The front end: tracing, jit and its stages, pytrees, the NumPy-like namespace, nn helpers."""
