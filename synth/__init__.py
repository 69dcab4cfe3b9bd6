"""Synthetic user generation: the PAL-Set pipeline (Mem-PAL spec §2)."""
