"""The synthesis steps of Mem-PAL §2.1–§2.13, one module per group; :mod:`synth.registry` orders them."""
