"""What is on disk: the typed records, their one loader and the one atomic writer (no engine, no command)."""
