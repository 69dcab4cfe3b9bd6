"""PAL-Set: typed records, loading, validation and statistics for datasets in the PAL-Set release layout."""
