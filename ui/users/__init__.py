"""The Users page's rendering helpers."""
