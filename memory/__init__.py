"""Assistant memory of a user: one interface for H²Memory, the baselines and PersonaMem-v2's agentic memory."""
