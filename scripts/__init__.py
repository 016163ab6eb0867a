"""Developer scripts of the repository (doc-output regeneration, install checks; not installed with the package)."""
