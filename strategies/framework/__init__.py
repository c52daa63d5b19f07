"""What strategies are built on (not strategies themselves): the contract, the registry, source requirements,
GC-threshold helpers and wait points."""
