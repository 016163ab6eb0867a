"""LlamaIndex integration of MFS."""
