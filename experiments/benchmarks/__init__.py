"""One-off benchmark scripts: each measures one question about the library and prints a table."""
