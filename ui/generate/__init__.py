"""The Generate page's rendering helpers."""
