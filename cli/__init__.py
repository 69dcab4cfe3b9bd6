"""The ``pal`` command line: everything users do outside the browser."""
