"""Workspace bundles: one dataset's work in one file, moved between homes without keys or duplicates.

- :mod:`studio.bundle.kinds` — the record kinds a bundle carries (one registry entry per table)
- :mod:`studio.bundle.manifest` — the file's layout and manifest
- :mod:`studio.bundle.export` — ``pal workspace export``
- :mod:`studio.bundle.importer` — ``pal workspace import`` (checks, re-keying, one transaction)
"""
