"""PersonaMem-v2 (Jiang et al.): its files read (loader, layouts) and its questions asked of a memory (evaluate)."""
