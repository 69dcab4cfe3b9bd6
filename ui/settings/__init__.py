"""The Settings page's rendering helpers."""
