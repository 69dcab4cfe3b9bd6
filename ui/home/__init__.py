"""The Home page's rendering helpers."""
