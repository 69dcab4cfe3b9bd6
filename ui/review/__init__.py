"""The Review page's rendering helpers."""
