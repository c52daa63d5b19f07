"""Everything rendered from records: ``tuner report``, ``tuner compare``, and the sections and plots they share."""
