"""Shared test fixtures: what both the test suite and the bench scripts use (fake servers, PAL-Set-shaped
datasets, a scripted H²Memory LLM, the headless-browser driver, workspaces over a temporary home).

``tests/`` and ``bench/`` both import from here and never from each other.
"""
