"""The Memory page's rendering helpers."""
