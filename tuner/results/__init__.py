"""What is on disk: the typed records and their one loader, the one atomic writer, and everything made from records
(reports, plots, comparisons, benchmark exports, history, dashboards). Never imports the engine side."""
