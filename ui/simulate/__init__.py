"""The Simulate page's rendering helpers."""
