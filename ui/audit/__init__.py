"""The Audit page's rendering helpers."""
