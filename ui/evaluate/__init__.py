"""The Evaluate page's rendering helpers."""
