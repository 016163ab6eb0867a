"""LangChain integration of MFS (see issue: langchain adapters)."""
